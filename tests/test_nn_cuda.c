/* tests/test_nn_cuda.c - MLPs on the CUDA device (bcg_nn_set_cuda, core/cuda/nn_cuda.cu)
 * against the CPU path of core/nn.c: forward outputs, the tape output,
 * parameter gradients (accumulated onto a non-zero gradient) and input
 * adjoints, for LayerNorm none / pre / post, every activation, batches 1, 7,
 * 513 and 4096; the min_batch dispatch; row sources (bcg_nn_rows) gathered on
 * the device; a tape re-recorded on the CPU after a
 * device forward; backward called twice; held networks (bcg_mlp_hold: the
 * parameters, gradient and Adam steps on the device) bit for bit the unheld,
 * also with PPO's joint clip of two networks and a log-std stepped on the host's gradient;
 * two threads' calls side by side, and a held network trained on another thread than its hold.
 *
 * Tolerances (norm-wise relative error, bcg_vec_relerr): double 1e-12; float
 * 2e-5 (cuBLAS and OpenBLAS sum the GEMMs in different orders, and the batch
 * sums of the bias / LayerNorm gradients run in chunks on the device).
 *
 * Without a CUDA device (or in a CUDA=0 build) every test prints
 * "skipped: no CUDA device (reason)" and counts as skipped (bcg_test_skip). bench/emu/nn_run.sh runs
 * this suite on a host emulation of the device code. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/nn.h"
#include "bcg/rng.h"
#include "testutil.h"

#ifdef BCG_REAL_FLOAT
#define TOL 2e-5
#else
#define TOL 1e-12
#endif

static const uint64_t SEED = 0x6e6e637564610001ull;
static int have_gpu = -1;
static char gpu_why[512];

static int gpu(void) {
  if (have_gpu < 0) {
    have_gpu = bcg_nn_set_cuda(1, 1, gpu_why, sizeof gpu_why) == 0;
    bcg_nn_set_cuda(0, 0, NULL, 0);
  }
  if (!have_gpu) bcg_test_skip(gpu_why);
  return have_gpu;
}

static void randn(bcg_real *x, size_t n, uint32_t stream, double scale, double shift) {
  bcg_rng_fill_normal(x, (int)n, SEED, BCG_RNG_TEST, stream, 0);
  for (size_t i = 0; i < n; i++) x[i] = (bcg_real)(x[i] * scale + shift);
}

static double relerr(const bcg_real *a, const bcg_real *b, size_t n) {
  double *u = malloc(n * sizeof(double)), *v = malloc(n * sizeof(double));
  for (size_t i = 0; i < n; i++) u[i] = (double)a[i], v[i] = (double)b[i];
  double e = bcg_vec_relerr(u, v, (int)n);
  free(u);
  free(v);
  return e;
}

/* A network with non-trivial LayerNorm parameters, made like the learners' MLPs. */
static int make_mlp(bcg_mlp *m, bcg_ln_mode ln, bcg_act act, int in, int out, int maxb) {
  bcg_mlp_config c;
  memset(&c, 0, sizeof c);
  c.in_dim = in;
  c.out_dim = out;
  c.nhidden = 3;
  c.hidden[0] = 64;
  c.hidden[1] = 48;
  c.hidden[2] = 33;
  c.hidden_act = act;
  c.out_act = BCG_ACT_IDENTITY;
  c.layernorm = ln;
  c.init = BCG_INIT_UNIFORM;
  c.extra = 5;
  c.extra_init = -0.5;
  c.max_batch = maxb;
  if (bcg_mlp_create(m, &c)) return -1;
  bcg_mlp_init_params(m, SEED, 3);
  for (int l = 0; l < m->nlin; l++)
    if (m->off_lng[l] != (size_t)-1) {
      randn(m->params + m->off_lng[l], (size_t)m->dim[l + 1], 40 + l, 0.3, 1.0);
      randn(m->params + m->off_lnb[l], (size_t)m->dim[l + 1], 50 + l, 0.2, 0.0);
    }
  return 0;
}

typedef struct pass_out {
  bcg_real *y, *yt, *g, *dx, *dx2;
  int on_device;
} pass_out;

static void pass_free(pass_out *o) {
  free(o->y);
  free(o->yt);
  free(o->g);
  free(o->dx);
  free(o->dx2);
}

/* forward, tape output, backward (grad onto g0) and a second backward (dx only) */
static int run_pass(bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *x, int B, const bcg_real *dy,
                    const bcg_real *g0, pass_out *o) {
  size_t ny = (size_t)B * m->dim[m->nlin], nx = (size_t)B * m->dim[0];
  o->y = malloc(ny * sizeof(bcg_real));
  o->yt = malloc(ny * sizeof(bcg_real));
  o->g = malloc(m->nparams * sizeof(bcg_real));
  o->dx = malloc(nx * sizeof(bcg_real));
  o->dx2 = malloc(nx * sizeof(bcg_real));
  memcpy(o->g, g0, m->nparams * sizeof(bcg_real));
  int rc = bcg_mlp_forward(m, t, x, B, o->y);
  if (rc) return rc;
  o->on_device = t->on_device;
  memcpy(o->yt, bcg_mlp_tape_output(m, t), ny * sizeof(bcg_real));
  rc = bcg_mlp_backward(m, t, dy, o->g, o->dx);
  if (rc) return rc;
  return bcg_mlp_backward(m, t, dy, NULL, o->dx2);
}

static double worst[3]; /* y, grad, dx */

static void compare_one(bcg_ln_mode ln, bcg_act act, int B) {
  enum { IN = 37, OUT = 21 };
  bcg_mlp m;
  bcg_mlp_tape t;
  if (make_mlp(&m, ln, act, IN, OUT, 8) || bcg_mlp_tape_init(&t, &m, B, NULL)) {
    CU_FAIL("create");
    return;
  }
  size_t nx = (size_t)B * IN, ny = (size_t)B * OUT;
  bcg_real *x = malloc(nx * sizeof(bcg_real)), *dy = malloc(ny * sizeof(bcg_real));
  bcg_real *g0 = malloc(m.nparams * sizeof(bcg_real));
  randn(x, nx, 1, 1.5, 0.1);
  randn(dy, ny, 2, 1.0, 0.0);
  randn(g0, m.nparams, 3, 0.01, 0.0);
  pass_out c = {0}, d = {0};
  int rcc, rcd;
  bcg_nn_set_cuda(0, 0, NULL, 0);
  rcc = run_pass(&m, &t, x, B, dy, g0, &c);
  char err[512] = "";
  if (bcg_nn_set_cuda(1, 1, err, sizeof err)) printf("\n  set_cuda: %s", err);
  rcd = run_pass(&m, &t, x, B, dy, g0, &d);
  bcg_nn_set_cuda(0, 0, NULL, 0);
  if (rcd) printf("\n  device pass: %s: %s", bcg_nn_strerror(rcd), bcg_nn_cuda_error());
  CU_ASSERT_EQUAL(rcc, 0);
  CU_ASSERT_EQUAL(rcd, 0);
  CU_ASSERT_EQUAL(c.on_device, 0);
  CU_ASSERT_EQUAL(d.on_device, 1);
  if (!rcc && !rcd) {
    double ey = relerr(d.y, c.y, ny), et = relerr(d.yt, d.y, ny), eg = relerr(d.g, c.g, m.nparams);
    double ex = relerr(d.dx, c.dx, nx), ex2 = relerr(d.dx2, d.dx, nx), ec = relerr(c.dx2, c.dx, nx);
    /* the extra parameters are not touched by the MLP backward */
    int extra_same = !memcmp(d.g + m.nnet, g0 + m.nnet, (size_t)m.cfg.extra * sizeof(bcg_real));
    if (!(ey <= TOL && eg <= TOL && ex <= TOL && et == 0 && ex2 == 0 && ec == 0 && extra_same))
      printf("\n  ln %d %s B=%d: y %.2e grad %.2e dx %.2e tape %.2e dx(again) %.2e extra %d", (int)ln,
             bcg_act_name(act), B, ey, eg, ex, et, ex2, extra_same);
    CU_ASSERT(ey <= TOL);
    CU_ASSERT(eg <= TOL);
    CU_ASSERT(ex <= TOL);
    CU_ASSERT(et == 0);
    CU_ASSERT(ex2 == 0);
    CU_ASSERT(ec == 0);
    CU_ASSERT(extra_same);
    if (ey > worst[0]) worst[0] = ey;
    if (eg > worst[1]) worst[1] = eg;
    if (ex > worst[2]) worst[2] = ex;
  }
  pass_free(&c);
  pass_free(&d);
  free(x);
  free(dy);
  free(g0);
  bcg_mlp_tape_free(&t);
  bcg_mlp_destroy(&m);
}

static void test_vs_cpu(void) {
  if (!gpu()) return;
  const bcg_ln_mode lns[3] = {BCG_LN_NONE, BCG_LN_PRE_ACT, BCG_LN_POST_ACT};
  const bcg_act acts[4] = {BCG_ACT_ELU, BCG_ACT_RELU, BCG_ACT_TANH, BCG_ACT_IDENTITY};
  const int batches[4] = {1, 7, 513, 4096};
  for (int i = 0; i < 3; i++)
    for (int a = 0; a < 4; a++)
      for (int b = 0; b < 4; b++) compare_one(lns[i], acts[a], batches[b]);
  printf("\n  device vs CPU (norm-wise relative, worst of 48 cases): y %.2e, grad %.2e, dx %.2e (tolerance %.0e)\n",
         worst[0], worst[1], worst[2], TOL);
  bcg_test_report("device vs CPU: y", worst[0]);
  bcg_test_report("device vs CPU: grad", worst[1]);
  bcg_test_report("device vs CPU: dx", worst[2]);
}

/* min_batch dispatch; CPU forward after a device forward on one tape; the MLP-owned tape */
static void test_dispatch(void) {
  if (!gpu()) return;
  bcg_mlp m;
  if (make_mlp(&m, BCG_LN_POST_ACT, BCG_ACT_ELU, 11, 3, 600)) {
    CU_FAIL("create");
    return;
  }
  int B = 600;
  bcg_real *x = malloc((size_t)B * 11 * sizeof(bcg_real)), *y = malloc((size_t)B * 3 * sizeof(bcg_real));
  bcg_real *y2 = malloc((size_t)B * 3 * sizeof(bcg_real)), *dy = malloc((size_t)B * 3 * sizeof(bcg_real));
  bcg_real *dx = malloc((size_t)B * 11 * sizeof(bcg_real)), *dx2 = malloc((size_t)B * 11 * sizeof(bcg_real));
  randn(x, (size_t)B * 11, 4, 1, 0);
  randn(dy, (size_t)B * 3, 5, 1, 0);
  int mb = 0;
  CU_ASSERT_EQUAL(bcg_nn_set_cuda(1, 0, NULL, 0), 0);
  CU_ASSERT(bcg_nn_cuda_enabled(&mb) && mb == 64); /* the default (bcg/nn.h) */
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, NULL, x, 63, y), 0);
  CU_ASSERT_EQUAL(m.tape.on_device, 0);
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, NULL, x, 64, y), 0);
  CU_ASSERT_EQUAL(m.tape.on_device, 1);
  CU_ASSERT_EQUAL(bcg_nn_set_cuda(1, 512, NULL, 0), 0);
  CU_ASSERT(bcg_nn_cuda_enabled(&mb) && mb == 512);
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, NULL, x, 511, y), 0);
  CU_ASSERT_EQUAL(m.tape.on_device, 0);
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, NULL, x, 512, y), 0);
  CU_ASSERT_EQUAL(m.tape.on_device, 1);
  CU_ASSERT_EQUAL(bcg_nn_set_cuda(1, 100, NULL, 0), 0);
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, NULL, x, 100, y), 0);
  CU_ASSERT_EQUAL(m.tape.on_device, 1);
  /* a device forward, then a CPU forward of other rows on the same tape: the backward is the CPU one's */
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, NULL, x, B, y), 0);
  bcg_nn_set_cuda(0, 0, NULL, 0);
  CU_ASSERT(!bcg_nn_cuda_enabled(NULL));
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, NULL, x + 11, B - 1, y2), 0);
  CU_ASSERT_EQUAL(m.tape.on_device, 0);
  CU_ASSERT_EQUAL(bcg_mlp_backward(&m, NULL, dy, NULL, dx), 0);
  bcg_mlp_tape t;
  CU_ASSERT_EQUAL(bcg_mlp_tape_init(&t, &m, B, NULL), 0);
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, &t, x + 11, B - 1, NULL), 0);
  CU_ASSERT_EQUAL(bcg_mlp_backward(&m, &t, dy, NULL, dx2), 0);
  CU_ASSERT(memcmp(dx, dx2, (size_t)(B - 1) * 11 * sizeof(bcg_real)) == 0);
  /* a device tape outlives the switch: its backward still runs on the device */
  CU_ASSERT_EQUAL(bcg_nn_set_cuda(1, 1, NULL, 0), 0);
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, &t, x, B, y), 0);
  bcg_nn_set_cuda(0, 0, NULL, 0);
  CU_ASSERT_EQUAL(t.on_device, 1);
  CU_ASSERT_EQUAL(bcg_mlp_backward(&m, &t, dy, m.grad, dx2), 0);
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, NULL, x, B, y2), 0);
  CU_ASSERT(relerr(y, y2, (size_t)B * 3) <= TOL);
  CU_ASSERT(strcmp(bcg_nn_strerror(BCG_NN_EDEVICE), "unknown nn error") != 0);
  bcg_mlp_tape_free(&t);
  free(x);
  free(y);
  free(y2);
  free(dy);
  free(dx);
  free(dx2);
  bcg_mlp_destroy(&m);
}

/* row sources (bcg_nn_rows): a device forward of rows gathered from the
 * mirror equals, bit for bit, the device forward of the same rows gathered on
 * the host (the same kernels on the same numbers), with and without idx, and
 * so do its backward's gradient and dx; after host rows change and are put
 * again, the forward sees the new rows; a put with the switch off drops the
 * mirror, and without a mirror the device forward receives the rows from the
 * host; the CPU path (batch below min_batch) gathers from the host */
static void rows_case(bcg_mlp *m, const bcg_nn_rows *r, const bcg_real *H, long row0, const int *idx, int B,
                      const bcg_real *dy, int expect_dev) {
  int IN = m->dim[0], OUT = m->dim[m->nlin];
  bcg_real *x = malloc(sizeof(bcg_real) * B * IN), *y1 = malloc(sizeof(bcg_real) * B * OUT);
  bcg_real *y2 = malloc(sizeof(bcg_real) * B * OUT), *dx1 = malloc(sizeof(bcg_real) * B * IN);
  bcg_real *dx2 = malloc(sizeof(bcg_real) * B * IN);
  bcg_real *g1 = calloc(m->nparams, sizeof(bcg_real)), *g2 = calloc(m->nparams, sizeof(bcg_real));
  for (int i = 0; i < B; i++)
    memcpy(x + (size_t)i * IN, H + (size_t)(row0 + (idx ? idx[i] : i)) * IN, sizeof(bcg_real) * IN);
  CU_ASSERT_EQUAL(bcg_mlp_forward(m, NULL, x, B, y1), 0);
  CU_ASSERT_EQUAL(bcg_mlp_backward(m, NULL, dy, g1, dx1), 0);
  int rc = bcg_mlp_forward_rows(m, NULL, r, row0, idx, B, y2);
  if (rc) printf("\n  forward_rows: %s: %s", bcg_nn_strerror(rc), bcg_nn_cuda_error());
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_EQUAL(m->tape.on_device, expect_dev);
  CU_ASSERT_EQUAL(bcg_mlp_backward(m, NULL, dy, g2, dx2), 0);
  int same = !memcmp(y1, y2, sizeof(bcg_real) * B * OUT) && !memcmp(dx1, dx2, sizeof(bcg_real) * B * IN) &&
             !memcmp(g1, g2, sizeof(bcg_real) * m->nparams);
  if (!same) printf("\n  rows row0 %ld idx %d B %d: y %.2e dx %.2e grad %.2e", row0, idx != NULL, B,
                    relerr(y1, y2, (size_t)B * OUT), relerr(dx1, dx2, (size_t)B * IN), relerr(g1, g2, m->nparams));
  CU_ASSERT(same);
  free(x);
  free(y1);
  free(y2);
  free(dx1);
  free(dx2);
  free(g1);
  free(g2);
}

static void test_rows(void) {
  if (!gpu()) return;
  enum { NR = 5000, IN = 37, OUT = 21, B = 1500 };
  bcg_mlp m;
  if (make_mlp(&m, BCG_LN_POST_ACT, BCG_ACT_ELU, IN, OUT, B)) {
    CU_FAIL("create");
    return;
  }
  bcg_real *H = malloc(sizeof(bcg_real) * NR * IN), *dy = malloc(sizeof(bcg_real) * B * OUT);
  int *idx = malloc(sizeof(int) * B);
  randn(H, (size_t)NR * IN, 60, 1.0, 0.1);
  randn(dy, (size_t)B * OUT, 61, 1.0, 0.0);
  for (int i = 0; i < B; i++) idx[i] = (int)((i * 7919L + 3) % 4000);
  bcg_nn_rows r;
  CU_ASSERT_EQUAL_FATAL(bcg_nn_rows_init(&r, H, NR, IN), 0);
  CU_ASSERT_EQUAL_FATAL(bcg_nn_set_cuda(1, 100, NULL, 0), 0);
  CU_ASSERT_EQUAL(bcg_nn_rows_put(&r, 0, 2500), 0); /* in two puts */
  CU_ASSERT_EQUAL(bcg_nn_rows_put(&r, 2500, NR - 2500), 0);
  CU_ASSERT_PTR_NOT_NULL(r.dev);
  rows_case(&m, &r, H, 1000, idx, B, dy, 1);
  rows_case(&m, &r, H, NR - B, NULL, B, dy, 1);
  rows_case(&m, &r, H, 7, idx, 99, dy, 0); /* below min_batch: the CPU gathers from the host */
  /* new contents of rows 1000 + [0, 4000) that idx reads: put, then seen */
  for (size_t i = 1000 * (size_t)IN; i < 3000 * (size_t)IN; i++) H[i] = -H[i] * (bcg_real)0.5;
  CU_ASSERT_EQUAL(bcg_nn_rows_put(&r, 1000, 2000), 0);
  rows_case(&m, &r, H, 1000, idx, B, dy, 1);
  /* the switch off: a put drops the mirror; on again, the rows are sent from the host */
  bcg_nn_set_cuda(0, 0, NULL, 0);
  CU_ASSERT_EQUAL(bcg_nn_rows_put(&r, 0, 1), 0);
  CU_ASSERT_PTR_NULL(r.dev);
  rows_case(&m, &r, H, 1000, idx, B, dy, 0);
  CU_ASSERT_EQUAL_FATAL(bcg_nn_set_cuda(1, 100, NULL, 0), 0);
  rows_case(&m, &r, H, 1000, idx, B, dy, 1);
  /* the source pointed at another array of the same shape (the first one is
   * page-locked by the mirror): a new mirror, filled from the new array; and back */
  {
    bcg_real *H2 = malloc(sizeof(bcg_real) * NR * IN);
    randn(H2, (size_t)NR * IN, 62, 2.0, -0.3);
    r.host = H2;
    CU_ASSERT_EQUAL(bcg_nn_rows_put(&r, 0, NR), 0);
    rows_case(&m, &r, H2, 1000, idx, B, dy, 1);
    r.host = H;
    CU_ASSERT_EQUAL(bcg_nn_rows_put(&r, 0, NR), 0);
    rows_case(&m, &r, H, 1000, idx, B, dy, 1);
    free(H2); /* its mirror, and page lock, went with the switch back */
  }
  /* and the device path against the CPU's: within the usual tolerance */
  {
    bcg_real *yd = malloc(sizeof(bcg_real) * B * OUT), *yc = malloc(sizeof(bcg_real) * B * OUT);
    CU_ASSERT_EQUAL(bcg_nn_rows_put(&r, 0, NR), 0);
    CU_ASSERT_EQUAL(bcg_mlp_forward_rows(&m, NULL, &r, 1000, idx, B, yd), 0);
    bcg_nn_set_cuda(0, 0, NULL, 0);
    CU_ASSERT_EQUAL(bcg_mlp_forward_rows(&m, NULL, &r, 1000, idx, B, yc), 0);
    double e = relerr(yd, yc, (size_t)B * OUT);
    printf("\n  rows: device vs CPU y %.2e\n", e);
    CU_ASSERT(e <= TOL);
    free(yd);
    free(yc);
  }
  bcg_nn_set_cuda(0, 0, NULL, 0);
  bcg_nn_rows_free(&r);
  CU_ASSERT_PTR_NULL(r.dev);
  free(H);
  free(dy);
  free(idx);
  bcg_mlp_destroy(&m);
}

/* the parameters are page-locked in place at a network's first device call:
 * host changes between calls are still seen (the host copy is sent at every
 * call), and a network created where a destroyed one was is not confused
 * with it */
static double dev_vs_cpu(bcg_mlp *m, const bcg_real *x, int B) {
  size_t ny = (size_t)B * m->dim[m->nlin];
  bcg_real *yd = malloc(ny * sizeof(bcg_real)), *yc = malloc(ny * sizeof(bcg_real));
  double e = 1e30;
  if (!bcg_nn_set_cuda(1, 1, NULL, 0) && !bcg_mlp_forward(m, NULL, x, B, yd) && m->tape.on_device) {
    bcg_nn_set_cuda(0, 0, NULL, 0);
    if (!bcg_mlp_forward(m, NULL, x, B, yc)) e = relerr(yd, yc, ny);
  }
  bcg_nn_set_cuda(0, 0, NULL, 0);
  free(yd);
  free(yc);
  return e;
}

static void test_params_in_place(void) {
  if (!gpu()) return;
  enum { B = 300, IN = 37, OUT = 21 };
  bcg_real *x = malloc(sizeof(bcg_real) * B * IN);
  randn(x, (size_t)B * IN, 70, 1.0, 0.0);
  double worst = 0;
  for (int round = 0; round < 3; round++) {
    bcg_mlp m;
    if (make_mlp(&m, BCG_LN_PRE_ACT, BCG_ACT_TANH, IN, OUT, B)) {
      CU_FAIL("create");
      break;
    }
    bcg_mlp_init_params(&m, SEED + (uint64_t)round, 9);
    double e0 = dev_vs_cpu(&m, x, B);
    for (size_t i = 0; i < m.nnet; i++) m.params[i] *= (bcg_real)1.25; /* like an optimiser step */
    double e1 = dev_vs_cpu(&m, x, B);
    m.params[m.nnet - 1] += (bcg_real)0.5; /* one output bias */
    double e2 = dev_vs_cpu(&m, x, B);
    if (!(e0 <= TOL && e1 <= TOL && e2 <= TOL)) printf("\n  round %d: %.2e %.2e %.2e", round, e0, e1, e2);
    CU_ASSERT(e0 <= TOL);
    CU_ASSERT(e1 <= TOL);
    CU_ASSERT(e2 <= TOL);
    worst = fmax(worst, fmax(e0, fmax(e1, e2)));
    bcg_mlp_destroy(&m); /* the next round's network is likely allocated where this one was */
  }
  printf("\n  parameters in place: device vs CPU after host changes, worst %.2e\n", worst);
  free(x);
}

/* bcg_nn_pin: a forward and backward whose x, y, dy and dx lie inside pinned
 * arrays (at offsets, so a copy covers part of its array) give bit for bit
 * what the staged copies give; the host arrays hold the results on return;
 * a pin overlapping another is refused quietly (its copies stay staged),
 * pins with the switch off do nothing, unpinning unknown pointers is
 * ignored, and arrays can be pinned again after an unpin */
static void test_pinned(void) {
  if (!gpu()) return;
  enum { B = 333, IN = 23, OUT = 7, PAD = 5 };
  bcg_mlp m;
  bcg_mlp_tape t;
  if (make_mlp(&m, BCG_LN_POST_ACT, BCG_ACT_ELU, IN, OUT, B) || bcg_mlp_tape_init(&t, &m, B, NULL)) {
    CU_FAIL("create");
    return;
  }
  size_t nx = (size_t)B * IN, ny = (size_t)B * OUT;
  bcg_real *x = malloc(sizeof(bcg_real) * (nx + PAD)), *y = malloc(sizeof(bcg_real) * (ny + PAD));
  bcg_real *dy = malloc(sizeof(bcg_real) * (ny + PAD)), *dx = malloc(sizeof(bcg_real) * (nx + PAD));
  bcg_real *y0 = malloc(sizeof(bcg_real) * ny), *dx0 = malloc(sizeof(bcg_real) * nx);
  bcg_real *g0 = calloc(m.nparams, sizeof(bcg_real)), *g1 = calloc(m.nparams, sizeof(bcg_real));
  randn(x + PAD, nx, 71, 1.0, 0.1);
  randn(dy + PAD, ny, 72, 0.5, 0.0);
  CU_ASSERT_EQUAL(bcg_nn_set_cuda(1, 64, NULL, 0), 0);
  /* staged */
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, &t, x + PAD, B, y0), 0);
  CU_ASSERT(t.on_device);
  CU_ASSERT_EQUAL(bcg_mlp_backward(&m, &t, dy + PAD, g0, dx0), 0);
  /* pinned: the same bits */
  CU_ASSERT_EQUAL(bcg_nn_pin(x, sizeof(bcg_real) * (nx + PAD)), 0);
  CU_ASSERT_EQUAL(bcg_nn_pin(y, sizeof(bcg_real) * (ny + PAD)), 0);
  CU_ASSERT_EQUAL(bcg_nn_pin(dy, sizeof(bcg_real) * (ny + PAD)), 0);
  CU_ASSERT_EQUAL(bcg_nn_pin(dx, sizeof(bcg_real) * (nx + PAD)), 0);
  CU_ASSERT_EQUAL(bcg_nn_pin(x + 3, sizeof(bcg_real) * 4), 0); /* overlaps x: refused quietly */
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < ny + PAD; i++) y[i] = (bcg_real)-7;
    for (size_t i = 0; i < nx + PAD; i++) dx[i] = (bcg_real)-7;
    memset(g1, 0, sizeof(bcg_real) * m.nparams);
    CU_ASSERT_EQUAL(bcg_mlp_forward(&m, &t, x + PAD, B, y + PAD), 0);
    CU_ASSERT_EQUAL(bcg_mlp_backward(&m, &t, dy + PAD, g1, dx + PAD), 0);
    CU_ASSERT(memcmp(y + PAD, y0, sizeof(bcg_real) * ny) == 0);
    CU_ASSERT(memcmp(dx + PAD, dx0, sizeof(bcg_real) * nx) == 0);
    CU_ASSERT(memcmp(g1, g0, sizeof(bcg_real) * m.nparams) == 0);
    CU_ASSERT(y[PAD - 1] == (bcg_real)-7 && dx[PAD - 1] == (bcg_real)-7); /* nothing written outside */
    /* unpinned and pinned again: still the same */
    bcg_nn_unpin(x);
    bcg_nn_unpin(dy);
    bcg_nn_unpin(dy); /* twice: ignored */
    bcg_nn_unpin(x + 3); /* never pinned: ignored */
    bcg_nn_unpin(NULL);
    CU_ASSERT_EQUAL(bcg_nn_pin(x, sizeof(bcg_real) * (nx + PAD)), 0);
    CU_ASSERT_EQUAL(bcg_nn_pin(dy, sizeof(bcg_real) * (ny + PAD)), 0);
  }
  CU_ASSERT_EQUAL(bcg_nn_pin(NULL, 8), BCG_NN_EINVAL);
  CU_ASSERT_EQUAL(bcg_nn_pin(x, 0), BCG_NN_EINVAL);
  bcg_nn_unpin(x);
  bcg_nn_unpin(y);
  bcg_nn_unpin(dy);
  bcg_nn_unpin(dx);
  bcg_nn_set_cuda(0, 0, NULL, 0);
  CU_ASSERT_EQUAL(bcg_nn_pin(x, sizeof(bcg_real) * nx), 0); /* the switch off: nothing pinned */
  bcg_nn_unpin(x);
  bcg_mlp_tape_free(&t);
  bcg_mlp_destroy(&m);
  free(x);
  free(y);
  free(dy);
  free(dx);
  free(y0);
  free(dx0);
  free(g0);
  free(g1);
  printf("\n  pinned arrays: forward and backward bit for bit the staged copies'\n");
}

/* bcg_nn_cuda_profile: the calls counted, phases that add up to at most the
 * calls' wall time, nothing counted while off, and the same numbers either way */
static void test_profile(void) {
  if (!gpu()) return;
  bcg_mlp m;
  if (make_mlp(&m, BCG_LN_POST_ACT, BCG_ACT_ELU, 11, 3, 600)) {
    CU_FAIL("create");
    return;
  }
  int B = 600;
  size_t np = m.nnet;
  bcg_real *x = malloc((size_t)B * 11 * sizeof(bcg_real)), *y = malloc((size_t)B * 3 * sizeof(bcg_real));
  bcg_real *y2 = malloc((size_t)B * 3 * sizeof(bcg_real)), *dy = malloc((size_t)B * 3 * sizeof(bcg_real));
  bcg_real *g = calloc(np, sizeof(bcg_real)), *g2 = calloc(np, sizeof(bcg_real));
  randn(x, (size_t)B * 11, 6, 1, 0);
  randn(dy, (size_t)B * 3, 7, 1, 0);
  CU_ASSERT_EQUAL(bcg_nn_set_cuda(1, 1, NULL, 0), 0);
  bcg_nn_cuda_split a, b, c;
  bcg_nn_cuda_profile_read(&a);
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, NULL, x, B, y), 0);
  CU_ASSERT_EQUAL(bcg_mlp_backward(&m, NULL, dy, g, NULL), 0);
  bcg_nn_cuda_profile_read(&b);
  CU_ASSERT(b.forwards == a.forwards && b.backwards == a.backwards && b.total == a.total); /* off: nothing */
  bcg_nn_cuda_profile(1);
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, NULL, x, B, y2), 0);
  CU_ASSERT_EQUAL(bcg_mlp_backward(&m, NULL, dy, g2, NULL), 0);
  bcg_nn_cuda_profile(0);
  bcg_nn_cuda_profile_read(&c);
  CU_ASSERT_EQUAL(c.forwards - b.forwards, 1);
  CU_ASSERT_EQUAL(c.backwards - b.backwards, 1);
  CU_ASSERT_EQUAL(c.rows - b.rows, B);
  double ph[7] = {c.params - b.params, c.inputs - b.inputs, c.gemm - b.gemm, c.elementwise - b.elementwise,
                  c.layernorm - b.layernorm, c.sums - b.sums, c.outputs - b.outputs};
  double sum = 0;
  for (int k = 0; k < 7; k++) {
    CU_ASSERT(ph[k] >= 0);
    sum += ph[k];
  }
  CU_ASSERT(c.total - b.total > 0 && sum <= c.total - b.total);
  CU_ASSERT(memcmp(y, y2, (size_t)B * 3 * sizeof(bcg_real)) == 0);
  CU_ASSERT(memcmp(g, g2, np * sizeof(bcg_real)) == 0);
  bcg_nn_set_cuda(0, 0, NULL, 0);
  free(x);
  free(y);
  free(y2);
  free(dy);
  free(g);
  free(g2);
  bcg_mlp_destroy(&m);
}

/* Held networks (bcg_mlp_hold): a network held on the device with its Adam
 * state ends, bit for bit, where the same device forwards and backwards with
 * host clips and Adam steps take an unheld copy of it: steps with and without
 * clipping, with weight decay, a step whose gradient is NaN (no step taken),
 * steps whose gradient is reduced (bcg_mlp_grad_reduce, a data-parallel step),
 * minibatches gathered from a row source; a small batch of a held network runs
 * on the device whatever min_batch; refusals; destroy while held. */
/* a stand-in for the sum over the ranks: another rank's gradient added */
static int fake_sum(bcg_real *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] += (bcg_real)(1e-3 * (double)(i % 7));
  return 0;
}

static void held_round(bcg_ln_mode ln, bcg_act act, bcg_real wd, double *worst_y) {
  enum { IN = 19, OUT = 1, NR = 700, B = 256, STEPS = 7 };
  bcg_mlp a, b;
  bcg_adam oa, ob;
  if (make_mlp(&a, ln, act, IN, OUT, B) || make_mlp(&b, ln, act, IN, OUT, B)) {
    CU_FAIL("create");
    return;
  }
  bcg_adam_init(&oa, a.nparams, (bcg_real)3e-3, (bcg_real)0.9, (bcg_real)0.999, (bcg_real)1e-8);
  bcg_adam_init(&ob, b.nparams, (bcg_real)3e-3, (bcg_real)0.9, (bcg_real)0.999, (bcg_real)1e-8);
  oa.weight_decay = ob.weight_decay = wd;
  for (size_t i = 0; i < a.nparams; i++) a.grad[i] = b.grad[i] = (bcg_real)0.25; /* stale: zeroed per step */
  bcg_real *H = malloc(sizeof(bcg_real) * NR * IN), *ya = malloc(sizeof(bcg_real) * B), *yb = malloc(sizeof(bcg_real) * B);
  bcg_real *dy = malloc(sizeof(bcg_real) * B);
  int *idx = malloc(sizeof(int) * B);
  randn(H, (size_t)NR * IN, 80, 1.0, 0.2);
  bcg_nn_rows r;
  CU_ASSERT_EQUAL(bcg_nn_set_cuda(1, 64, NULL, 0), 0);
  CU_ASSERT_EQUAL(bcg_nn_rows_init(&r, H, NR, IN), 0);
  CU_ASSERT_EQUAL(bcg_nn_rows_put(&r, 0, NR), 0);
  CU_ASSERT_EQUAL(bcg_mlp_hold(&b, &ob), 0);
  CU_ASSERT(bcg_mlp_is_held(&b) && !bcg_mlp_is_held(&a));
  int same_y = 1, steps = 0;
  for (int st = 0; st < STEPS; st++) {
    for (int i = 0; i < B; i++) idx[i] = (int)((i * 37 + st * 101) % NR);
    int n = st == 2 ? B - 17 : B; /* one partial minibatch */
    if (bcg_mlp_forward_rows(&a, NULL, &r, 0, idx, n, ya) || bcg_mlp_forward_rows(&b, NULL, &r, 0, idx, n, yb)) {
      CU_FAIL("forward");
      break;
    }
    CU_ASSERT(a.tape.on_device && b.tape.on_device);
    same_y &= memcmp(ya, yb, sizeof(bcg_real) * (size_t)n) == 0;
    for (int i = 0; i < n; i++) dy[i] = (bcg_real)(2 * ((double)ya[i] - 0.3 * i / n) / n);
    if (st == 4) dy[5] = (bcg_real)NAN; /* a non-finite gradient: no step */
    bcg_mlp_zero_grad(&a);
    bcg_mlp_zero_grad(&b);
    if (bcg_mlp_backward(&a, NULL, dy, a.grad, NULL) || bcg_mlp_backward(&b, NULL, dy, b.grad, NULL)) {
      CU_FAIL("backward");
      break;
    }
    if (st == 1 || st == 5) { /* a data-parallel step's reduction: the held gradient through the host and back */
      CU_ASSERT_EQUAL(bcg_mlp_grad_reduce(&a, fake_sum, 0.5), 0);
      CU_ASSERT_EQUAL(bcg_mlp_grad_reduce(&b, fake_sum, 0.5), 0);
    }
    bcg_real max = st < 3 ? (bcg_real)1e30 : (bcg_real)0.05, na = 0, nb = 0; /* no clip, then clips */
    oa.lr = ob.lr = (bcg_real)(3e-3 / (1 + st));
    CU_ASSERT_EQUAL(bcg_mlp_clip_adam(&a, &oa, max, &na), 0);
    CU_ASSERT_EQUAL(bcg_mlp_clip_adam(&b, &ob, max, &nb), 0);
    CU_ASSERT(memcmp(&na, &nb, sizeof na) == 0 || (isnan((double)na) && isnan((double)nb)));
    CU_ASSERT(st == 4 ? !isfinite((double)nb) : isfinite((double)nb));
    steps += isfinite((double)nb);
  }
  CU_ASSERT(same_y);
  CU_ASSERT_EQUAL(ob.step, steps);
  CU_ASSERT_EQUAL(oa.step, ob.step);
  /* a small batch of the held network: on the device, with its device parameters */
  CU_ASSERT_EQUAL(bcg_mlp_forward_rows(&b, NULL, &r, 0, idx, 3, yb), 0);
  CU_ASSERT(b.tape.on_device);
  CU_ASSERT_EQUAL(bcg_mlp_forward_rows(&a, NULL, &r, 0, idx, 3, ya), 0);
  CU_ASSERT(!a.tape.on_device); /* 3 < min_batch: the CPU */
  *worst_y = fmax(*worst_y, relerr(ya, yb, 3));
  CU_ASSERT(relerr(ya, yb, 3) <= TOL);
  /* refusals while held */
  bcg_adam other;
  bcg_adam_init(&other, b.nparams, (bcg_real)1e-3, (bcg_real)0.9, (bcg_real)0.999, (bcg_real)1e-8);
  CU_ASSERT_EQUAL(bcg_mlp_hold(&b, &ob), BCG_NN_EINVAL);       /* held already */
  CU_ASSERT_EQUAL(bcg_mlp_clip_adam(&b, &other, 1, NULL), BCG_NN_EINVAL); /* another optimiser */
  CU_ASSERT_EQUAL(bcg_mlp_release(&b, &other), BCG_NN_EINVAL);
  CU_ASSERT(bcg_mlp_is_held(&b));
  CU_ASSERT_EQUAL(bcg_mlp_release(&b, &ob), 0);
  CU_ASSERT(!bcg_mlp_is_held(&b));
  CU_ASSERT_EQUAL(bcg_mlp_release(&b, &ob), 0); /* not held: nothing to do */
  CU_ASSERT(memcmp(a.params, b.params, sizeof(bcg_real) * a.nparams) == 0);
  CU_ASSERT(memcmp(a.grad, b.grad, sizeof(bcg_real) * a.nparams) == 0);
  CU_ASSERT(memcmp(oa.m, ob.m, sizeof(bcg_real) * a.nparams) == 0);
  CU_ASSERT(memcmp(oa.v, ob.v, sizeof(bcg_real) * a.nparams) == 0);
  bcg_adam_free(&other);
  bcg_adam_free(&oa);
  bcg_adam_free(&ob);
  bcg_nn_rows_free(&r);
  bcg_nn_set_cuda(0, 0, NULL, 0);
  bcg_mlp_destroy(&a);
  bcg_mlp_destroy(&b);
  free(H);
  free(ya);
  free(yb);
  free(dy);
  free(idx);
}

/* PPO's step: bcg_mlp_grad_norm of two networks, one joint clip factor,
 * bcg_mlp_scale_adam of each. With both held it ends bit for bit where the
 * unheld pair ends; while held, the actor's extra parameters (its log-std)
 * are current on the host after every step, and the gradient a learner
 * writes into m->extra_grad by hand is the one clipped and stepped (and
 * comes back scaled). Sizes below and above the norm kernel's batch of 32
 * loads per lane. */
static void held_joint_round(int nhidden, int hidden, double *worst_y) {
  enum { IN = 11, NR = 500, B = 200, STEPS = 6, NU = 3 };
  bcg_mlp a[2], b[2];
  bcg_adam oa[2], ob[2];
  for (int k = 0; k < 2; k++) {
    bcg_mlp_config c;
    memset(&c, 0, sizeof c);
    c.in_dim = IN;
    c.out_dim = k == 0 ? NU : 1;
    c.nhidden = nhidden;
    for (int l = 0; l < nhidden; l++) c.hidden[l] = hidden;
    c.hidden_act = BCG_ACT_ELU;
    c.out_act = BCG_ACT_IDENTITY;
    c.init = BCG_INIT_UNIFORM;
    c.extra = k == 0 ? NU : 0;
    c.extra_init = (bcg_real)-1.2;
    c.max_batch = B;
    if (bcg_mlp_create(&a[k], &c) || bcg_mlp_create(&b[k], &c)) {
      CU_FAIL("create");
      return;
    }
    bcg_mlp_init_params(&a[k], SEED, 5 + k);
    bcg_mlp_init_params(&b[k], SEED, 5 + k);
    bcg_adam_init(&oa[k], a[k].nparams, (bcg_real)1e-3, (bcg_real)0.9, (bcg_real)0.999, (bcg_real)1e-8);
    bcg_adam_init(&ob[k], b[k].nparams, (bcg_real)1e-3, (bcg_real)0.9, (bcg_real)0.999, (bcg_real)1e-8);
  }
  bcg_real *H = malloc(sizeof(bcg_real) * NR * IN), *ya[2], *yb[2], *dy[2];
  for (int k = 0; k < 2; k++) {
    ya[k] = malloc(sizeof(bcg_real) * B * NU);
    yb[k] = malloc(sizeof(bcg_real) * B * NU);
    dy[k] = malloc(sizeof(bcg_real) * B * NU);
  }
  int *idx = malloc(sizeof(int) * B);
  randn(H, (size_t)NR * IN, 81, 1.0, 0.1);
  bcg_nn_rows r;
  CU_ASSERT_EQUAL(bcg_nn_set_cuda(1, 64, NULL, 0), 0);
  CU_ASSERT_EQUAL(bcg_nn_rows_init(&r, H, NR, IN), 0);
  CU_ASSERT_EQUAL(bcg_nn_rows_put(&r, 0, NR), 0);
  CU_ASSERT_EQUAL(bcg_mlp_hold(&b[0], &ob[0]), 0);
  CU_ASSERT_EQUAL(bcg_mlp_hold(&b[1], &ob[1]), 0);
  int same_y = 1, same_n = 1, extras_current = 1, extra_grad_zeroed = 1, clipped = 0;
  for (int st = 0; st < STEPS; st++) {
    for (int i = 0; i < B; i++) idx[i] = (int)((i * 53 + st * 71) % NR);
    for (int k = 0; k < 2; k++) {
      int no = k == 0 ? NU : 1;
      if (bcg_mlp_forward_rows(&a[k], NULL, &r, 0, idx, B, ya[k]) ||
          bcg_mlp_forward_rows(&b[k], NULL, &r, 0, idx, B, yb[k])) {
        CU_FAIL("forward");
        goto out;
      }
      same_y &= memcmp(ya[k], yb[k], sizeof(bcg_real) * (size_t)B * no) == 0;
      *worst_y = fmax(*worst_y, relerr(ya[k], yb[k], (size_t)B * no));
      for (int i = 0; i < B * no; i++) dy[k][i] = (bcg_real)(((double)ya[k][i] - 0.2) / B);
      bcg_mlp_zero_grad(&a[k]);
      bcg_mlp_zero_grad(&b[k]);
      if (bcg_mlp_backward(&a[k], NULL, dy[k], a[k].grad, NULL) ||
          bcg_mlp_backward(&b[k], NULL, dy[k], b[k].grad, NULL)) {
        CU_FAIL("backward");
        goto out;
      }
    }
    /* the log-std's gradient, written on the host as PPO's log-prob VJP does */
    for (int j = 0; j < NU; j++) {
      extra_grad_zeroed &= b[0].extra_grad[j] == 0;
      bcg_real gj = (bcg_real)(0.3 * (j + 1) * (double)ya[0][j] - 0.01 * st);
      a[0].extra_grad[j] += gj;
      b[0].extra_grad[j] += gj;
    }
    bcg_real n[4];
    CU_ASSERT(!bcg_mlp_grad_norm(&a[0], &n[0]) && !bcg_mlp_grad_norm(&a[1], &n[1]) &&
              !bcg_mlp_grad_norm(&b[0], &n[2]) && !bcg_mlp_grad_norm(&b[1], &n[3]));
    same_n &= memcmp(&n[0], &n[2], sizeof n[0]) == 0 && memcmp(&n[1], &n[3], sizeof n[0]) == 0;
    double gn = sqrt((double)n[0] * n[0] + (double)n[1] * n[1]), max = st < 2 ? 1e30 : 0.05 * gn;
    double c = gn > max ? (double)(bcg_real)(max / gn) : 1.0;
    clipped += c != 1;
    for (int k = 0; k < 2; k++) {
      oa[k].lr = ob[k].lr = (bcg_real)(1e-3 * (1 + st));
      CU_ASSERT_EQUAL(bcg_mlp_scale_adam(&a[k], &oa[k], c), 0);
      CU_ASSERT_EQUAL(bcg_mlp_scale_adam(&b[k], &ob[k], c), 0);
    }
    extras_current &= memcmp(a[0].extra_params, b[0].extra_params, sizeof(bcg_real) * NU) == 0 &&
                      memcmp(a[0].extra_grad, b[0].extra_grad, sizeof(bcg_real) * NU) == 0;
  }
  CU_ASSERT(same_y);
  CU_ASSERT(same_n);
  CU_ASSERT(extras_current);
  CU_ASSERT(extra_grad_zeroed);
  CU_ASSERT_EQUAL(clipped, STEPS - 2);
  CU_ASSERT(a[0].extra_params[0] != (bcg_real)-1.2); /* the log-std moved */
  CU_ASSERT_EQUAL(bcg_mlp_scale_adam(&b[1], &ob[0], 1), BCG_NN_EINVAL); /* not its optimiser (nor its size) */
  CU_ASSERT_EQUAL(bcg_mlp_scale_adam(&b[0], &oa[0], 1), BCG_NN_EINVAL); /* another optimiser of its size */
out:
  for (int k = 0; k < 2; k++) {
    CU_ASSERT_EQUAL(bcg_mlp_release(&b[k], &ob[k]), 0);
    CU_ASSERT(memcmp(a[k].params, b[k].params, sizeof(bcg_real) * a[k].nparams) == 0);
    CU_ASSERT(memcmp(a[k].grad, b[k].grad, sizeof(bcg_real) * a[k].nparams) == 0);
    CU_ASSERT(memcmp(oa[k].m, ob[k].m, sizeof(bcg_real) * a[k].nparams) == 0);
    CU_ASSERT(memcmp(oa[k].v, ob[k].v, sizeof(bcg_real) * a[k].nparams) == 0);
    CU_ASSERT_EQUAL(oa[k].step, ob[k].step);
    bcg_adam_free(&oa[k]);
    bcg_adam_free(&ob[k]);
    bcg_mlp_destroy(&a[k]);
    bcg_mlp_destroy(&b[k]);
    free(ya[k]);
    free(yb[k]);
    free(dy[k]);
  }
  bcg_nn_rows_free(&r);
  bcg_nn_set_cuda(0, 0, NULL, 0);
  free(H);
  free(idx);
}

static void test_held(void) {
  if (!gpu()) return;
  double wy = 0;
  held_round(BCG_LN_POST_ACT, BCG_ACT_ELU, 0, &wy);
  held_round(BCG_LN_PRE_ACT, BCG_ACT_TANH, (bcg_real)0.01, &wy);
  held_round(BCG_LN_NONE, BCG_ACT_RELU, 0, &wy);
  held_joint_round(1, 4, &wy);   /* 66 parameters: the norm kernel's tail only */
  held_joint_round(2, 128, &wy); /* 18k */
  /* bad arguments, and a network destroyed while held */
  bcg_mlp m;
  bcg_adam o;
  if (make_mlp(&m, BCG_LN_NONE, BCG_ACT_ELU, 7, 2, 64)) {
    CU_FAIL("create");
    return;
  }
  bcg_adam_init(&o, m.nparams + 1, (bcg_real)1e-3, (bcg_real)0.9, (bcg_real)0.999, (bcg_real)1e-8);
  CU_ASSERT_EQUAL(bcg_nn_set_cuda(1, 64, NULL, 0), 0);
  CU_ASSERT_EQUAL(bcg_mlp_hold(&m, &o), BCG_NN_EINVAL); /* not the network's size */
  CU_ASSERT_EQUAL(bcg_mlp_hold(&m, NULL), 0);           /* parameters only */
  CU_ASSERT_EQUAL(bcg_mlp_clip_adam(&m, &o, 1, NULL), BCG_NN_EINVAL);
  bcg_mlp_destroy(&m);
  CU_ASSERT(make_mlp(&m, BCG_LN_NONE, BCG_ACT_ELU, 7, 2, 64) == 0);
  CU_ASSERT(!bcg_mlp_is_held(&m)); /* likely where the destroyed one was: not confused with it */
  bcg_nn_set_cuda(0, 0, NULL, 0);
  bcg_mlp_destroy(&m);
  bcg_adam_free(&o);
  printf("\n  held: parameters, gradients and Adam moments bit for bit the unheld network's; small batch "
         "device vs CPU %.2e\n", wy);
}

/* refused without a device, with the reason */
/* ---- calls from several threads at once ----
 * Each calling thread has its own stream and scratch (core/cuda/nn_cuda.cu):
 * two threads training networks side by side, one held (its backward and
 * Adam steps left queued on its stream) and one not, end bit for bit where
 * the same calls made one after the other on one thread end; and a network
 * held on one thread, then trained on a second and released on the first,
 * ends where it ends on one thread (the second thread's queued work is
 * waited for). */
enum { TH_IN = 13, TH_NR = 600, TH_B = 192, TH_STEPS = 9 };

typedef struct th_job {
  bcg_mlp m;
  bcg_adam o;
  bcg_nn_rows r;
  bcg_real *H, *y, *dy;
  int idx[TH_B];
  int hold, hold_here, release_here, rc;
  uint32_t stream;
} th_job;

static int th_make(th_job *j, uint32_t stream, int hold) {
  memset(j, 0, sizeof *j);
  j->stream = stream;
  j->hold = hold;
  if (make_mlp(&j->m, BCG_LN_PRE_ACT, BCG_ACT_ELU, TH_IN, 2, TH_B)) return -1;
  bcg_adam_init(&j->o, j->m.nparams, (bcg_real)2e-3, (bcg_real)0.9, (bcg_real)0.999, (bcg_real)1e-8);
  j->H = malloc(sizeof(bcg_real) * TH_NR * TH_IN);
  j->y = malloc(sizeof(bcg_real) * TH_B * 2);
  j->dy = malloc(sizeof(bcg_real) * TH_B * 2);
  randn(j->H, (size_t)TH_NR * TH_IN, stream, 1.0, 0.1);
  return bcg_nn_rows_init(&j->r, j->H, TH_NR, TH_IN) || bcg_nn_rows_put(&j->r, 0, TH_NR);
}

static void th_free(th_job *j) {
  bcg_nn_rows_free(&j->r);
  bcg_adam_free(&j->o);
  bcg_mlp_destroy(&j->m);
  free(j->H);
  free(j->y);
  free(j->dy);
}

/* TH_STEPS minibatch steps of j's network (held: its backward and step stay queued on the device) */
static void *th_train(void *p) {
  th_job *j = p;
  int rc = 0;
  if (j->hold && j->hold_here) rc = bcg_mlp_hold(&j->m, &j->o);
  for (int st = 0; st < TH_STEPS && !rc; st++) {
    for (int i = 0; i < TH_B; i++) j->idx[i] = (int)((i * 53 + st * 97 + (int)j->stream) % TH_NR);
    rc = bcg_mlp_forward_rows(&j->m, NULL, &j->r, 0, j->idx, TH_B, j->y);
    if (!rc && !j->m.tape.on_device) rc = -100;
    for (int i = 0; i < 2 * TH_B && !rc; i++) j->dy[i] = (bcg_real)((double)j->y[i] / TH_B - 0.01);
    bcg_mlp_zero_grad(&j->m);
    rc = rc || bcg_mlp_backward(&j->m, NULL, j->dy, j->m.grad, NULL);
    rc = rc || bcg_mlp_clip_adam(&j->m, &j->o, (bcg_real)0.5, NULL);
  }
  if (!rc && j->hold && j->release_here) rc = bcg_mlp_release(&j->m, &j->o);
  j->rc = rc;
  return NULL;
}

static int th_same(const th_job *a, const th_job *b) {
  size_t n = a->m.nparams * sizeof(bcg_real);
  return memcmp(a->m.params, b->m.params, n) == 0 && memcmp(a->m.grad, b->m.grad, n) == 0 &&
         memcmp(a->o.m, b->o.m, n) == 0 && memcmp(a->o.v, b->o.v, n) == 0 && a->o.step == b->o.step;
}

static void test_threads(void) {
  if (!gpu()) return;
  CU_ASSERT_EQUAL_FATAL(bcg_nn_set_cuda(1, 64, NULL, 0), 0);
  th_job ref[2], par[2], hand, handref;
  int ok = !th_make(&ref[0], 90, 1) && !th_make(&ref[1], 91, 0) && !th_make(&par[0], 90, 1) &&
           !th_make(&par[1], 91, 0) && !th_make(&hand, 92, 1) && !th_make(&handref, 92, 1);
  CU_ASSERT_FATAL(ok);
  /* one after the other, on this thread */
  for (int k = 0; k < 2; k++) {
    ref[k].hold_here = ref[k].release_here = 1;
    th_train(&ref[k]);
    CU_ASSERT_EQUAL(ref[k].rc, 0);
  }
  /* side by side, three rounds (a thread per round, as SHAC's critic thread) */
  pthread_t th[2];
  for (int k = 0; k < 2; k++) par[k].hold_here = par[k].release_here = 1;
  for (int round = 0; round < 3; round++) {
    if (round > 0) { /* the same start again */
      for (int k = 0; k < 2; k++) {
        th_free(&par[k]);
        CU_ASSERT_FATAL(th_make(&par[k], 90 + k, k == 0) == 0);
        par[k].hold_here = par[k].release_here = 1;
      }
    }
    for (int k = 0; k < 2; k++) CU_ASSERT_FATAL(pthread_create(&th[k], NULL, th_train, &par[k]) == 0);
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < 2; k++) {
      CU_ASSERT_EQUAL(par[k].rc, 0);
      CU_ASSERT(th_same(&par[k], &ref[k]));
    }
  }
  /* held here, trained on another thread (its work left queued there), released here */
  handref.hold_here = handref.release_here = 1;
  th_train(&handref);
  CU_ASSERT_EQUAL(handref.rc, 0);
  CU_ASSERT_EQUAL(bcg_mlp_hold(&hand.m, &hand.o), 0);
  pthread_t t1;
  CU_ASSERT_FATAL(pthread_create(&t1, NULL, th_train, &hand) == 0);
  pthread_join(t1, NULL);
  CU_ASSERT_EQUAL(hand.rc, 0);
  CU_ASSERT(bcg_mlp_is_held(&hand.m));
  CU_ASSERT_EQUAL(bcg_mlp_release(&hand.m, &hand.o), 0);
  CU_ASSERT(th_same(&hand, &handref));
  bcg_nn_set_cuda(0, 0, NULL, 0);
  for (int k = 0; k < 2; k++) {
    th_free(&ref[k]);
    th_free(&par[k]);
  }
  th_free(&hand);
  th_free(&handref);
}

static void test_refusal(void) {
  char err[512] = "";
  int rc = bcg_nn_set_cuda(1, 0, err, sizeof err);
  if (rc) {
    printf("\n  bcg_nn_set_cuda refused: %s", err);
    CU_ASSERT(err[0] != 0);
    CU_ASSERT(!bcg_nn_cuda_enabled(NULL));
  }
  bcg_nn_set_cuda(0, 0, NULL, 0);
  CU_ASSERT(!bcg_nn_cuda_enabled(NULL));
}

BCG_TESTS({"device vs cpu", test_vs_cpu}, {"dispatch", test_dispatch}, {"row sources", test_rows}, {"parameters in place", test_params_in_place}, {"pinned arrays", test_pinned}, {"profile", test_profile},
          {"held networks", test_held}, {"threads", test_threads}, {"refusal", test_refusal});
BCG_RUN("nn_cuda")
