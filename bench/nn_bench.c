/* bench/nn_bench.c - MLP forward + backward time, CPU (OpenBLAS, all threads)
 * against the CUDA device (bcg_nn_set_cuda, cuBLAS), for the PPO actor shape:
 * obs 200 -> 512, 256, 128 (ELU) -> 21, as learners/ppo.c builds it.
 *   nn_bench [--sizes 4096,24576] [--seconds 1] [--in 200] [--layers 512,256,128] [--out 21] [--ln none|pre|post]
 * One line per batch size: ms per forward, per backward (parameter gradient and
 * dx) and the sum on each device, the speed-up, and the device-vs-CPU
 * relative error of y and of the gradient. Without a GPU only the CPU runs. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bcg/nn.h"
#include "bcg/rng.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static double relerr(const bcg_real *a, const bcg_real *b, size_t n) {
  double nd = 0, nb = 0;
  for (size_t i = 0; i < n; i++) nd += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), nb += (double)b[i] * b[i];
  return sqrt(nd) / fmax(sqrt(nb), 1e-300);
}

typedef struct timing { double fwd, bwd; } timing;

/* mean ms of forward and backward over repetitions filling about `seconds` */
static int time_it(bcg_mlp *m, const bcg_real *x, const bcg_real *dy, int B, bcg_real *y, bcg_real *dx,
                   double seconds, timing *t) {
  int rc = bcg_mlp_forward(m, NULL, x, B, y) || bcg_mlp_backward(m, NULL, dy, m->grad, dx); /* warm-up */
  if (rc) return -1;
  double tf = 0, tb = 0;
  int reps = 0;
  double t0 = now();
  while (reps < 3 || now() - t0 < seconds) {
    double a = now();
    if (bcg_mlp_forward(m, NULL, x, B, y)) return -1;
    double b = now();
    if (bcg_mlp_backward(m, NULL, dy, m->grad, dx)) return -1;
    tb += now() - b;
    tf += b - a;
    reps++;
  }
  t->fwd = 1e3 * tf / reps;
  t->bwd = 1e3 * tb / reps;
  return 0;
}

static int parse_list(const char *s, int *v, int max) {
  int n = 0;
  while (*s && n < max) {
    v[n++] = atoi(s);
    const char *c = strchr(s, ',');
    if (!c) break;
    s = c + 1;
  }
  return n;
}

int main(int argc, char **argv) {
  int sizes[16] = {4096, 24576}, nsizes = 2, layers[BCG_MLP_MAX_HIDDEN] = {512, 256, 128}, nl = 3;
  int in = 200, out = 21;
  double seconds = 1;
  bcg_ln_mode ln = BCG_LN_NONE;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--sizes")) nsizes = parse_list(argv[i + 1], sizes, 16);
    else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--in")) in = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--out")) out = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--layers")) nl = parse_list(argv[i + 1], layers, BCG_MLP_MAX_HIDDEN);
    else if (!strcmp(argv[i], "--ln"))
      ln = !strcmp(argv[i + 1], "pre") ? BCG_LN_PRE_ACT : !strcmp(argv[i + 1], "post") ? BCG_LN_POST_ACT : BCG_LN_NONE;
    else {
      fprintf(stderr, "nn_bench: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  int maxb = 0;
  for (int i = 0; i < nsizes; i++)
    if (sizes[i] > maxb) maxb = sizes[i];
  bcg_mlp_config c;
  memset(&c, 0, sizeof c);
  c.in_dim = in;
  c.out_dim = out;
  c.nhidden = nl;
  memcpy(c.hidden, layers, sizeof layers);
  c.hidden_act = BCG_ACT_ELU;
  c.out_act = BCG_ACT_IDENTITY;
  c.layernorm = ln;
  c.init = BCG_INIT_ORTHOGONAL;
  c.init_gain = (bcg_real)sqrt(2.0);
  c.init_gain_out = (bcg_real)0.01;
  c.extra = out;
  c.max_batch = maxb;
  bcg_mlp m;
  if (bcg_mlp_create(&m, &c)) {
    fprintf(stderr, "nn_bench: bad network\n");
    return 2;
  }
  bcg_mlp_init_params(&m, 1, 1);
  size_t nx = (size_t)maxb * in, ny = (size_t)maxb * out;
  bcg_real *x = malloc(nx * sizeof(bcg_real)), *dy = malloc(ny * sizeof(bcg_real));
  bcg_real *y = malloc(ny * sizeof(bcg_real)), *yd = malloc(ny * sizeof(bcg_real));
  bcg_real *dx = malloc(nx * sizeof(bcg_real)), *g = malloc(m.nparams * sizeof(bcg_real));
  bcg_rng_fill_normal(x, (int)nx, 7, BCG_RNG_TEST, 0, 0);
  bcg_rng_fill_normal(dy, (int)ny, 7, BCG_RNG_TEST, 1, 0);
  char err[512] = "";
  int gpu = bcg_nn_set_cuda(1, 1, err, sizeof err) == 0;
  bcg_nn_set_cuda(0, 0, NULL, 0);
  printf("# nn_bench (%s): MLP %d ->", BCG_REAL_NAME, in);
  for (int i = 0; i < nl; i++) printf(" %d", layers[i]);
  printf(" -> %d, ELU, layernorm %s, %zu parameters; CPU: OpenBLAS, %d threads; GPU: %s\n", out,
         ln == BCG_LN_NONE ? "none" : ln == BCG_LN_PRE_ACT ? "pre" : "post", m.nnet, openblas_get_num_threads(),
         gpu ? "cuBLAS" : err);
  printf("# %7s %9s %9s %9s | %9s %9s %9s | %7s %9s %9s\n", "batch", "cpu_fwd", "cpu_bwd", "cpu_ms", "gpu_fwd",
         "gpu_bwd", "gpu_ms", "speedup", "err_y", "err_grad");
  int bad = 0;
  for (int i = 0; i < nsizes; i++) {
    int B = sizes[i];
    timing tc, tg = {0, 0};
    bcg_nn_set_cuda(0, 0, NULL, 0);
    bcg_mlp_zero_grad(&m);
    if (time_it(&m, x, dy, B, y, dx, seconds, &tc)) { bad = 1; break; }
    bcg_mlp_zero_grad(&m); /* one clean forward + backward for the comparison */
    bcg_mlp_forward(&m, NULL, x, B, y);
    bcg_mlp_backward(&m, NULL, dy, m.grad, dx);
    memcpy(g, m.grad, m.nparams * sizeof(bcg_real));
    if (!gpu) {
      printf("  %7d %9.3f %9.3f %9.3f | %9s %9s %9s |\n", B, tc.fwd, tc.bwd, tc.fwd + tc.bwd, "-", "-", "-");
      continue;
    }
    bcg_nn_set_cuda(1, 1, NULL, 0);
    if (time_it(&m, x, dy, B, yd, dx, seconds, &tg)) {
      fprintf(stderr, "nn_bench: device: %s\n", bcg_nn_cuda_error());
      bad = 1;
      break;
    }
    bcg_mlp_zero_grad(&m);
    bcg_mlp_forward(&m, NULL, x, B, yd);
    bcg_mlp_backward(&m, NULL, dy, m.grad, dx);
    printf("  %7d %9.3f %9.3f %9.3f | %9.3f %9.3f %9.3f | %6.1fx %9.2e %9.2e\n", B, tc.fwd, tc.bwd, tc.fwd + tc.bwd,
           tg.fwd, tg.bwd, tg.fwd + tg.bwd, (tc.fwd + tc.bwd) / (tg.fwd + tg.bwd), relerr(yd, y, (size_t)B * out),
           relerr(m.grad, g, m.nnet));
  }
  bcg_nn_set_cuda(0, 0, NULL, 0);
  free(x), free(dy), free(y), free(yd), free(dx), free(g);
  bcg_mlp_destroy(&m);
  return bad;
}
