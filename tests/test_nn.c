/* tests/test_nn.c - bcg/nn.h and bcg/rng.h: finite-difference checks of every
 * VJP, optimiser, schedules, normaliser statistics, Philox known answers and a
 * tiny regression. FD checks are meant for the double build; the float build
 * runs them with a coarse step and a loose tolerance. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/nn.h"
#include "bcg/rng.h"
#include "nn_tape.h"
#include "testutil.h"

#ifdef BCG_REAL_FLOAT
#define FD_H 3e-3
#define FD_TOL 5e-3
#else
#define FD_H 1e-6
#define FD_TOL 1e-6
#endif

static const uint64_t SEED = 0x5eed1234abcdull;

static void randn(bcg_real *x, int n, uint32_t stream, bcg_real scale) {
  bcg_rng_fill_normal(x, n, SEED, BCG_RNG_TEST, stream, 0);
  for (int i = 0; i < n; i++) x[i] *= scale;
}

static double dot(const bcg_real *a, const bcg_real *b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
  return s;
}

static double vec_relerr_r(const bcg_real *a, const double *b, int n) {
  double *t = malloc((size_t)n * sizeof(double));
  for (int i = 0; i < n; i++) t[i] = (double)a[i];
  double e = bcg_vec_relerr(t, b, n);
  free(t);
  return e;
}

/* ---- Philox and the samplers --------------------------------------------------- */

static void test_philox_kat(void) {
  /* Random123 tests/kat_vectors, "philox4x32 10" lines: counter[4] key[2] -> out[4]. */
  static const uint32_t kat[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
       0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
       0x94fdcceb, 0x5001e420, 0x24126ea1}};
  for (int k = 0; k < 3; k++) {
    bcg_u32x4 o = bcg_philox(kat[k] + 4, kat[k]);
    for (int j = 0; j < 4; j++) CU_ASSERT_EQUAL(o.v[j], kat[k][6 + j]);
  }
}

static void test_rng_streams(void) {
  enum { N = 100003 };
  bcg_real *z = malloc(N * sizeof(bcg_real)), *u = malloc(N * sizeof(bcg_real));
  bcg_rng_fill_normal(z, N, 42, BCG_RNG_ACTION, 7, 3);
  bcg_rng_fill_uniform(u, N, 42, BCG_RNG_RESET, 7, 3);
  double m = 0, v = 0, um = 0;
  int inrange = 1, same = 1;
  for (int i = 0; i < N; i++) {
    m += z[i];
    v += (double)z[i] * z[i];
    um += u[i];
    if (!(u[i] > 0 && u[i] <= 1)) inrange = 0;
    if (i % 997 == 0 && (z[i] != bcg_rng_normal(42, BCG_RNG_ACTION, 7, 3, (uint32_t)i) ||
                         u[i] != bcg_rng_uniform(42, BCG_RNG_RESET, 7, 3, (uint32_t)i)))
      same = 0;
  }
  m /= N;
  v = v / N - m * m;
  um /= N;
  CU_ASSERT(inrange);
  CU_ASSERT(same);
  CU_ASSERT(fabs(m) < 0.02);
  CU_ASSERT(fabs(v - 1) < 0.03);
  CU_ASSERT(fabs(um - 0.5) < 0.01);
  /* every index of the stream differs from another env's / step's / seed's */
  CU_ASSERT(bcg_rng_normal(42, BCG_RNG_ACTION, 8, 3, 0) != z[0]);
  CU_ASSERT(bcg_rng_normal(42, BCG_RNG_ACTION, 7, 4, 0) != z[0]);
  CU_ASSERT(bcg_rng_normal(43, BCG_RNG_ACTION, 7, 3, 0) != z[0]);
  free(z);
  free(u);
}

/* ---- MLP VJPs ------------------------------------------------------------------ */

static double mlp_loss(bcg_mlp *m, const bcg_real *x, int batch, const bcg_real *w, bcg_real *y) {
  CU_ASSERT_EQUAL_FATAL(bcg_mlp_forward(m, NULL, x, batch, y), 0);
  return dot(y, w, (size_t)batch * m->cfg.out_dim);
}

/* bcg_mlp_forward_rows on the CPU: the forward (and its backward) of rows
 * row0 + idx[i] of a row source equal bit for bit those of the gathered
 * array (the same arithmetic), with and without idx, over the OpenMP gather
 * (batch >= 256); puts are no-ops without the CUDA switch; bad rows, widths
 * and puts are refused */
static void test_mlp_rows(void) {
  enum { NR = 700, IN = 9, OUT = 4, B = 300 };
  bcg_mlp_config c;
  memset(&c, 0, sizeof c);
  c.in_dim = IN;
  c.out_dim = OUT;
  c.nhidden = 2;
  c.hidden[0] = c.hidden[1] = 16;
  c.hidden_act = BCG_ACT_ELU;
  c.layernorm = BCG_LN_POST_ACT;
  c.max_batch = B;
  bcg_mlp m;
  CU_ASSERT_EQUAL_FATAL(bcg_mlp_create(&m, &c), 0);
  bcg_mlp_init_params(&m, SEED, 7);
  bcg_real *H = malloc(sizeof(bcg_real) * NR * IN), *x = malloc(sizeof(bcg_real) * B * IN);
  bcg_real *y1 = malloc(sizeof(bcg_real) * B * OUT), *y2 = malloc(sizeof(bcg_real) * B * OUT);
  bcg_real *dy = malloc(sizeof(bcg_real) * B * OUT), *dx1 = malloc(sizeof(bcg_real) * B * IN);
  bcg_real *dx2 = malloc(sizeof(bcg_real) * B * IN);
  bcg_real *g1 = calloc(m.nparams, sizeof(bcg_real)), *g2 = calloc(m.nparams, sizeof(bcg_real));
  int idx[B];
  randn(H, NR * IN, 30, 1);
  randn(dy, B * OUT, 31, 1);
  for (int i = 0; i < B; i++) idx[i] = (int)((i * 7919L + 13) % 600); /* rows 50 + 0..599, repeats allowed */
  bcg_nn_rows r;
  CU_ASSERT_EQUAL_FATAL(bcg_nn_rows_init(&r, H, NR, IN), 0);
  CU_ASSERT_EQUAL(bcg_nn_rows_put(&r, 0, NR), 0);
  CU_ASSERT_PTR_NULL(r.dev);
  for (int pass = 0; pass < 2; pass++) {
    const int *ix = pass ? idx : NULL;
    long row0 = pass ? 50 : 400;
    for (int i = 0; i < B; i++) memcpy(x + i * IN, H + (row0 + (ix ? ix[i] : i)) * IN, sizeof(bcg_real) * IN);
    memset(g1, 0, sizeof(bcg_real) * m.nparams);
    memset(g2, 0, sizeof(bcg_real) * m.nparams);
    CU_ASSERT_EQUAL(bcg_mlp_forward(&m, NULL, x, B, y1), 0);
    CU_ASSERT_EQUAL(bcg_mlp_backward(&m, NULL, dy, g1, dx1), 0);
    CU_ASSERT_EQUAL(bcg_mlp_forward_rows(&m, NULL, &r, row0, ix, B, y2), 0);
    CU_ASSERT_EQUAL(bcg_mlp_backward(&m, NULL, dy, g2, dx2), 0);
    CU_ASSERT_EQUAL(memcmp(y1, y2, sizeof(bcg_real) * B * OUT), 0);
    CU_ASSERT_EQUAL(memcmp(dx1, dx2, sizeof(bcg_real) * B * IN), 0);
    CU_ASSERT_EQUAL(memcmp(g1, g2, sizeof(bcg_real) * m.nparams), 0);
  }
  /* refused: a row past the end (through idx or row0 + batch), a negative
   * index, another width, a put outside the array */
  idx[17] = 650;
  CU_ASSERT_EQUAL(bcg_mlp_forward_rows(&m, NULL, &r, 50, idx, B, y2), BCG_NN_EINVAL);
  idx[17] = -1;
  CU_ASSERT_EQUAL(bcg_mlp_forward_rows(&m, NULL, &r, 50, idx, B, y2), BCG_NN_EINVAL);
  CU_ASSERT_EQUAL(bcg_mlp_forward_rows(&m, NULL, &r, 401, NULL, B, y2), BCG_NN_EINVAL);
  CU_ASSERT_EQUAL(bcg_mlp_forward_rows(&m, NULL, &r, -1, NULL, 10, y2), BCG_NN_EINVAL);
  CU_ASSERT_EQUAL(bcg_mlp_forward_rows(&m, NULL, &r, 400, NULL, B, y2), 0);
  bcg_nn_rows r2;
  CU_ASSERT_EQUAL(bcg_nn_rows_init(&r2, H, NR * IN / 3, 3), 0);
  CU_ASSERT_EQUAL(bcg_mlp_forward_rows(&m, NULL, &r2, 0, NULL, 10, y2), BCG_NN_EINVAL);
  CU_ASSERT_EQUAL(bcg_nn_rows_put(&r, 690, 11), BCG_NN_EINVAL);
  CU_ASSERT_EQUAL(bcg_nn_rows_put(&r, -1, 1), BCG_NN_EINVAL);
  CU_ASSERT_EQUAL(bcg_nn_rows_init(&r2, NULL, 1, 3), BCG_NN_EINVAL);
  bcg_nn_rows_free(&r);
  bcg_mlp_destroy(&m);
  free(H);
  free(x);
  free(y1);
  free(y2);
  free(dy);
  free(dx1);
  free(dx2);
  free(g1);
  free(g2);
}

static void fd_mlp(bcg_act hact, bcg_act oact, bcg_ln_mode ln, const char *label) {
  enum { B = 4, IN = 5, OUT = 3 };
  bcg_mlp_config c;
  memset(&c, 0, sizeof c);
  c.in_dim = IN;
  c.out_dim = OUT;
  c.nhidden = 2;
  c.hidden[0] = 7;
  c.hidden[1] = 6;
  c.hidden_act = hact;
  c.out_act = oact;
  c.layernorm = ln;
  c.max_batch = B;
  bcg_mlp m;
  CU_ASSERT_EQUAL_FATAL(bcg_mlp_create(&m, &c), 0);
  bcg_mlp_init_params(&m, SEED, 1);
  /* move LayerNorm gains and biases off 1 and 0 so their gradients matter */
  bcg_real pert[64];
  for (int l = 0; l < m.nlin; l++)
    if (m.off_lng[l] != (size_t)-1) {
      int n = m.dim[l + 1];
      randn(pert, 2 * n, 100 + (uint32_t)l, (bcg_real)0.3);
      for (int i = 0; i < 2 * n; i++) m.params[m.off_lng[l] + i] += pert[i];
    }
  bcg_real x[B * IN], w[B * OUT], y[B * OUT], dx[B * IN];
  randn(x, B * IN, 2, 1);
  randn(w, B * OUT, 3, 1);
  bcg_mlp_zero_grad(&m);
  mlp_loss(&m, x, B, w, y);
  CU_ASSERT_EQUAL(bcg_mlp_backward(&m, NULL, w, m.grad, dx), 0);

  int np = (int)m.nparams;
  double *fd = malloc((size_t)np * sizeof(double));
  for (int i = 0; i < np; i++) {
    bcg_real p0 = m.params[i];
    m.params[i] = p0 + (bcg_real)FD_H;
    double lp = mlp_loss(&m, x, B, w, y);
    m.params[i] = p0 - (bcg_real)FD_H;
    double lm = mlp_loss(&m, x, B, w, y);
    m.params[i] = p0;
    fd[i] = (lp - lm) / (2 * FD_H);
  }
  double ep = vec_relerr_r(m.grad, fd, np);
  double fdx[B * IN];
  for (int i = 0; i < B * IN; i++) {
    bcg_real x0 = x[i];
    x[i] = x0 + (bcg_real)FD_H;
    double lp = mlp_loss(&m, x, B, w, y);
    x[i] = x0 - (bcg_real)FD_H;
    double lm = mlp_loss(&m, x, B, w, y);
    x[i] = x0;
    fdx[i] = (lp - lm) / (2 * FD_H);
  }
  double ex = vec_relerr_r(dx, fdx, B * IN);
  bcg_test_report("FD relerr mlp d/dparams (worst over activations x layernorm modes)", ep);
  bcg_test_report("FD relerr mlp d/dinput (worst over activations x layernorm modes)", ex);
  if (!(ep <= FD_TOL && ex <= FD_TOL))
    printf("\n  mlp %s: d/dparams %.3g d/dinput %.3g\n", label, ep, ex);
  CU_ASSERT(ep <= FD_TOL);
  CU_ASSERT(ex <= FD_TOL);
  free(fd);
  bcg_mlp_destroy(&m);
}

static void test_mlp_vjp_plain(void) {
  fd_mlp(BCG_ACT_ELU, BCG_ACT_IDENTITY, BCG_LN_NONE, "elu");
  fd_mlp(BCG_ACT_TANH, BCG_ACT_IDENTITY, BCG_LN_NONE, "tanh");
  fd_mlp(BCG_ACT_RELU, BCG_ACT_IDENTITY, BCG_LN_NONE, "relu");
  fd_mlp(BCG_ACT_IDENTITY, BCG_ACT_IDENTITY, BCG_LN_NONE, "identity");
  fd_mlp(BCG_ACT_ELU, BCG_ACT_TANH, BCG_LN_NONE, "elu/out-tanh");
  fd_mlp(BCG_ACT_TANH, BCG_ACT_ELU, BCG_LN_NONE, "tanh/out-elu");
}

static void test_mlp_vjp_layernorm(void) {
  static const bcg_act acts[4] = {BCG_ACT_ELU, BCG_ACT_TANH, BCG_ACT_RELU, BCG_ACT_IDENTITY};
  for (int a = 0; a < 4; a++)
    for (int ln = BCG_LN_PRE_ACT; ln <= BCG_LN_POST_ACT; ln++) {
      char label[48];
      snprintf(label, sizeof label, "%s+ln-%s", bcg_act_name(acts[a]),
               ln == BCG_LN_PRE_ACT ? "pre" : "post");
      fd_mlp(acts[a], BCG_ACT_IDENTITY, (bcg_ln_mode)ln, label);
    }
}

/* Tapes are independent; backward is repeatable; grad == NULL skips params. */
/* GEMMs large enough are split over the OpenMP threads (core/nn.c) in
 * blocks aligned to OpenBLAS's tiles: any thread count gives the same bits
 * (each element is one dot product in OpenBLAS's order, on the same kernel
 * path; unaligned blocks of 3 threads changed elements). Shapes split along
 * rows (batch > width) and along columns (width > batch). */
static void test_mlp_threads(void) {
  /* batch, hidden width: split along rows, along columns, small enough to
   * stay whole */
  static const int shapes[4][2] = {{512, 96}, {24, 600}, {8192, 32}, {48, 1024}};
  for (int sh = 0; sh < 4; sh++) {
    int B = shapes[sh][0], H = shapes[sh][1], IN = 80, OUT = 7;
    bcg_mlp_config c;
    memset(&c, 0, sizeof c);
    c.in_dim = IN;
    c.out_dim = OUT;
    c.nhidden = 2;
    c.hidden[0] = c.hidden[1] = H;
    c.hidden_act = BCG_ACT_ELU;
    c.layernorm = BCG_LN_POST_ACT;
    c.max_batch = B;
    bcg_mlp m;
    CU_ASSERT_EQUAL_FATAL(bcg_mlp_create(&m, &c), 0);
    bcg_mlp_init_params(&m, SEED, 3);
    size_t np = m.nparams;
    bcg_real *x = malloc(sizeof(bcg_real) * B * IN), *dy = malloc(sizeof(bcg_real) * B * OUT);
    bcg_real *y[3], *g[3], *dx[3];
    randn(x, B * IN, 20, 1);
    randn(dy, B * OUT, 21, 1);
    static const int thr[3] = {1, 3, 3};
    int saved = omp_get_max_threads();
    for (int r = 0; r < 3; r++) {
      y[r] = malloc(sizeof(bcg_real) * B * OUT);
      g[r] = calloc(np, sizeof(bcg_real));
      dx[r] = malloc(sizeof(bcg_real) * B * IN);
      omp_set_num_threads(thr[r]);
      CU_ASSERT_EQUAL(bcg_mlp_forward(&m, NULL, x, B, y[r]), 0);
      CU_ASSERT_EQUAL(bcg_mlp_backward(&m, NULL, dy, g[r], dx[r]), 0);
    }
    omp_set_num_threads(saved);
    for (int r = 1; r < 3; r++) {
      CU_ASSERT_EQUAL(memcmp(y[0], y[r], sizeof(bcg_real) * B * OUT), 0);
      CU_ASSERT_EQUAL(memcmp(g[0], g[r], sizeof(bcg_real) * np), 0);
      CU_ASSERT_EQUAL(memcmp(dx[0], dx[r], sizeof(bcg_real) * B * IN), 0);
    }
    for (int r = 0; r < 3; r++) free(y[r]), free(g[r]), free(dx[r]);
    free(x);
    free(dy);
    bcg_mlp_destroy(&m);
  }
}

/* A layer's ELU (core/nn.c: libmvec's vector expm1 where built with it, else
 * the scalar one): every element within 2 ulp of the scalar ELU over the
 * whole input range (tiny, large negative, positive, signed zeros), and an
 * element's value independent of its place in the batch and of the batch
 * size (the last partial vector is padded, never computed another way). */
static void elu_layer(void) {
  enum { N = 61 };
  bcg_mlp_config c;
  memset(&c, 0, sizeof c);
  c.in_dim = c.out_dim = 1;
  c.nhidden = 0;
  c.out_act = BCG_ACT_ELU;
  c.max_batch = 4 * N;
  bcg_mlp m;
  CU_ASSERT_EQUAL_FATAL(bcg_mlp_create(&m, &c), 0);
  m.params[m.off_w[0]] = 1; /* y = ELU(x) */
  m.params[m.off_b[0]] = 0;
  bcg_real x[4 * N], y[4 * N], y1[4 * N];
  int n = 0;
  static const double special[] = {0.0, -0.0, 1e-300, -1e-300, -1e-17, -1e-9, -0.3465, -0.5, -1, -20,
                                   -40, -800, 0.5, 3, 1e30};
  for (size_t k = 0; k < sizeof special / sizeof *special; k++) x[n++] = (bcg_real)special[k];
  randn(x + n, N - n, 40, 3);
  for (int i = n; i < N; i++) x[i] = -fabs((double)x[i]) * (i % 2 ? 1 : 1e-3); /* mostly the expm1 branch */
  CU_ASSERT_EQUAL_FATAL(bcg_mlp_forward(&m, NULL, x, N, y), 0);
  double worst = 0;
  for (int i = 0; i < N; i++) {
    double ref = x[i] > 0 ? (double)x[i] : (double)bcg_act_f(BCG_ACT_ELU, x[i]);
    double ulp = nextafter(fabs(ref), INFINITY) - fabs(ref);
    double e = ref == (double)y[i] ? 0 : fabs((double)y[i] - ref) / ulp;
    if (e > worst) worst = e;
    if (x[i] > 0 || x[i] == 0) CU_ASSERT_EQUAL((double)y[i], (double)x[i]);
  }
  bcg_test_report("ELU layer vs scalar ELU (ulp)", worst);
  CU_ASSERT(worst <= 2);
  /* each element alone, and the batch shifted by 1..3 places: the same bits */
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL_FATAL(bcg_mlp_forward(&m, NULL, x + i, 1, y1), 0);
    CU_ASSERT_EQUAL(memcmp(&y1[0], &y[i], sizeof(bcg_real)), 0);
  }
  for (int sh = 1; sh <= 3; sh++) {
    bcg_real xs[4 * N];
    for (int i = 0; i < sh; i++) xs[i] = (bcg_real)-0.25 * (bcg_real)(i + 1);
    memcpy(xs + sh, x, sizeof(bcg_real) * N);
    CU_ASSERT_EQUAL_FATAL(bcg_mlp_forward(&m, NULL, xs, N + sh, y1), 0);
    CU_ASSERT_EQUAL(memcmp(y1 + sh, y, sizeof(bcg_real) * N), 0);
  }
  bcg_mlp_destroy(&m);
}

/* every vector variant the CPU has (AVX-512, AVX2, SSE2), then back to the best */
static void test_elu_layer(void) {
  int best = bcg_nn_vec_isa(0), n = 0;
  for (int isa = best; isa >= (best ? 1 : 0); isa--) {
    CU_ASSERT_EQUAL(bcg_nn_vec_isa(isa ? isa : 1), isa);
    elu_layer();
    n++;
  }
  bcg_nn_vec_isa(3);
  CU_ASSERT_EQUAL(bcg_nn_vec_isa(0), best);
  bcg_test_report("ELU variants checked", n);
}

static void test_mlp_tapes(void) {
  enum { B = 6, IN = 4, OUT = 2 };
  bcg_mlp_config c;
  memset(&c, 0, sizeof c);
  c.in_dim = IN;
  c.out_dim = OUT;
  c.nhidden = 2;
  c.hidden[0] = c.hidden[1] = 8;
  c.hidden_act = BCG_ACT_ELU;
  c.layernorm = BCG_LN_PRE_ACT;
  c.extra = OUT;
  c.extra_init = (bcg_real)-1;
  c.max_batch = B;
  bcg_mlp m;
  CU_ASSERT_EQUAL_FATAL(bcg_mlp_create(&m, &c), 0);
  bcg_mlp_init_params(&m, SEED, 2);
  CU_ASSERT_EQUAL(m.extra_params[0], (bcg_real)-1);
  CU_ASSERT_EQUAL(m.nparams, m.nnet + OUT);
  bcg_mlp_tape t1, t2;
  size_t nr = bcg_mlp_tape_reals(&m, B);
  bcg_real *mem = malloc(nr * sizeof(bcg_real));
  CU_ASSERT_EQUAL_FATAL(bcg_mlp_tape_init(&t1, &m, B, mem), 0);
  CU_ASSERT_EQUAL_FATAL(bcg_mlp_tape_init(&t2, &m, 3, NULL), 0);
  bcg_real x1[B * IN], x2[B * IN], dy[B * OUT], y1[B * OUT], dxa[B * IN], dxb[B * IN], dxc[B * IN];
  randn(x1, B * IN, 10, 1);
  randn(x2, B * IN, 11, 1);
  randn(dy, B * OUT, 12, 1);
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, &t1, x1, B, y1), 0);
  size_t np = m.nparams;
  bcg_real *g1 = calloc(np, sizeof(bcg_real)), *g2 = calloc(np, sizeof(bcg_real));
  CU_ASSERT_EQUAL(bcg_mlp_backward(&m, &t1, dy, g1, dxa), 0);
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, &t2, x2, 3, NULL), 0);
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, &t2, x2, 4, NULL), BCG_NN_EBATCH);
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m, NULL, x2, B, NULL), 0);
  CU_ASSERT_EQUAL(bcg_mlp_backward(&m, &t1, dy, g2, dxb), 0);
  CU_ASSERT_EQUAL(bcg_mlp_backward(&m, &t1, dy, NULL, dxc), 0);
  CU_ASSERT_EQUAL(memcmp(g1, g2, np * sizeof(bcg_real)), 0);
  CU_ASSERT_EQUAL(memcmp(dxa, dxb, sizeof dxa), 0);
  CU_ASSERT_EQUAL(memcmp(dxa, dxc, sizeof dxa), 0);
  CU_ASSERT_EQUAL(memcmp(bcg_mlp_tape_output(&m, &t1), y1, sizeof y1), 0);
  for (size_t i = m.nnet; i < np; i++) CU_ASSERT_EQUAL(g1[i], 0);
  /* a tape of another shape is refused */
  bcg_mlp m2;
  c.hidden[1] = 9;
  CU_ASSERT_EQUAL_FATAL(bcg_mlp_create(&m2, &c), 0);
  CU_ASSERT_EQUAL(bcg_mlp_forward(&m2, &t1, x1, B, NULL), BCG_NN_EINVAL);
  bcg_mlp_destroy(&m2);
  bcg_mlp_tape_free(&t1);
  bcg_mlp_tape_free(&t2);
  free(mem);
  free(g1);
  free(g2);
  bcg_mlp_destroy(&m);
  bcg_act a;
  CU_ASSERT(bcg_act_parse("ELU", &a) == 0 && a == BCG_ACT_ELU);
  CU_ASSERT(bcg_act_parse("tanh", &a) == 0 && a == BCG_ACT_TANH);
  CU_ASSERT(bcg_act_parse("elux", &a) != 0);
}

static void test_mlp_init(void) {
  /* orthogonal: rows (out <= in) or columns (out > in) orthonormal times gain */
  int shapes[2][2] = {{5, 9}, {9, 4}};
  for (int k = 0; k < 2; k++) {
    bcg_mlp_config c;
    memset(&c, 0, sizeof c);
    c.in_dim = shapes[k][1];
    c.out_dim = shapes[k][0];
    c.init = BCG_INIT_ORTHOGONAL;
    c.init_gain_out = (bcg_real)1.41421356;
    c.max_batch = 1;
    bcg_mlp m;
    CU_ASSERT_EQUAL_FATAL(bcg_mlp_create(&m, &c), 0);
    bcg_mlp_init_params(&m, SEED, 3);
    int r = c.out_dim, cc = c.in_dim, small = r < cc ? r : cc;
    const bcg_real *W = m.params;
    double worst = 0, g2 = (double)c.init_gain_out * c.init_gain_out;
    for (int i = 0; i < small; i++)
      for (int j = 0; j < small; j++) {
        double s = 0;
        for (int t = 0; t < (r <= cc ? cc : r); t++)
          s += r <= cc ? (double)W[i * cc + t] * W[j * cc + t] : (double)W[t * cc + i] * W[t * cc + j];
        worst = fmax(worst, fabs(s - (i == j ? g2 : 0)));
      }
    CU_ASSERT(worst < 1e-5);
    for (int i = 0; i < r; i++) CU_ASSERT_EQUAL(m.params[m.off_b[0] + i], 0);
    bcg_mlp_destroy(&m);
  }
  /* uniform: within +-1/sqrt(fan_in), deterministic in (seed, stream) */
  bcg_mlp_config c;
  memset(&c, 0, sizeof c);
  c.in_dim = 16;
  c.out_dim = 8;
  c.max_batch = 1;
  bcg_mlp a, b;
  CU_ASSERT_EQUAL_FATAL(bcg_mlp_create(&a, &c), 0);
  CU_ASSERT_EQUAL_FATAL(bcg_mlp_create(&b, &c), 0);
  bcg_mlp_init_params(&a, SEED, 4);
  bcg_mlp_init_params(&b, SEED, 4);
  CU_ASSERT_EQUAL(memcmp(a.params, b.params, a.nparams * sizeof(bcg_real)), 0);
  double mx = 0;
  for (size_t i = 0; i < a.nparams; i++) mx = fmax(mx, fabs((double)a.params[i]));
  CU_ASSERT(mx <= 0.25 && mx > 0.2);
  bcg_mlp_init_params(&b, SEED, 5);
  CU_ASSERT(memcmp(a.params, b.params, a.nparams * sizeof(bcg_real)) != 0);
  bcg_mlp_destroy(&a);
  bcg_mlp_destroy(&b);
  bcg_mlp tmp;
  c.max_batch = 0;
  CU_ASSERT_EQUAL(bcg_mlp_create(&tmp, &c), BCG_NN_EINVAL);
}

/* ---- normaliser ----------------------------------------------------------------- */

/* the sum over two ranks that hold the same rows: the array doubled */
static int twice(double *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] *= 2;
  return 0;
}
static int add_rank(bcg_real *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] += (bcg_real)(0.125 * (double)(i % 5));
  return 0;
}

/* The data-parallel pieces on the host: bcg_normalizer_update_dist without a
 * sum is bcg_normalizer_update bit for bit, and with a sum over two ranks
 * that hold the same rows it merges what one process merges from both
 * copies; bcg_mlp_grad_reduce sums then scales every gradient element, the
 * extra ones included. */
static void test_dist_pieces(void) {
  enum { D = 5, B = 23 };
  bcg_real *x = malloc(sizeof(bcg_real) * 2 * B * D);
  randn(x, B * D, 41, 1);
  memcpy(x + B * D, x, sizeof(bcg_real) * B * D);
  bcg_normalizer a, b, c;
  CU_ASSERT_EQUAL_FATAL(bcg_normalizer_init(&a, D, 5, 1e-4), 0);
  CU_ASSERT_EQUAL_FATAL(bcg_normalizer_init(&b, D, 5, 1e-4), 0);
  CU_ASSERT_EQUAL_FATAL(bcg_normalizer_init(&c, D, 5, 1e-4), 0);
  double worst = 0;
  for (int k = 0; k < 3; k++) {
    CU_ASSERT_EQUAL(bcg_normalizer_update(&a, x, B), 0);
    CU_ASSERT_EQUAL(bcg_normalizer_update_dist(&b, x, B, NULL), 0);
    CU_ASSERT_EQUAL(memcmp(a.mean, b.mean, sizeof(bcg_real) * D), 0);
    CU_ASSERT_EQUAL(memcmp(a.var, b.var, sizeof(bcg_real) * D), 0);
    bcg_normalizer one;
    CU_ASSERT_EQUAL_FATAL(bcg_normalizer_init(&one, D, 5, 1e-4), 0);
    for (int j = 0; j <= k; j++) CU_ASSERT_EQUAL(bcg_normalizer_update(&one, x, 2 * B), 0);
    CU_ASSERT_EQUAL(bcg_normalizer_update_dist(&c, x, B, twice), 0);
    CU_ASSERT(c.count == one.count);
    for (int i = 0; i < D; i++) {
      worst = fmax(worst, bcg_relerr(c.mean[i], one.mean[i], 1e-12));
      worst = fmax(worst, bcg_relerr(c.var[i], one.var[i], 1e-12));
    }
    bcg_normalizer_free(&one);
  }
#ifdef BCG_REAL_FLOAT
  CU_ASSERT(worst < 1e-5);
#else
  CU_ASSERT(worst < 1e-12);
#endif
  bcg_test_report("normaliser over two ranks vs one process relerr", worst);
  bcg_normalizer_free(&a);
  bcg_normalizer_free(&b);
  bcg_normalizer_free(&c);
  bcg_mlp m;
  bcg_mlp_config cfg = {0};
  cfg.in_dim = 3;
  cfg.out_dim = 2;
  cfg.nhidden = 1;
  cfg.hidden[0] = 4;
  cfg.extra = 2;
  cfg.max_batch = 1;
  CU_ASSERT_EQUAL_FATAL(bcg_mlp_create(&m, &cfg), 0);
  for (size_t i = 0; i < m.nparams; i++) m.grad[i] = (bcg_real)(0.3 * (double)i - 1);
  CU_ASSERT_EQUAL(bcg_mlp_grad_reduce(&m, add_rank, 0.5), 0);
  int ok = 1;
  for (size_t i = 0; i < m.nparams; i++) {
    bcg_real g = (bcg_real)(0.3 * (double)i - 1);
    g += (bcg_real)(0.125 * (double)(i % 5));
    ok &= m.grad[i] == (bcg_real)((double)g * 0.5);
  }
  CU_ASSERT(ok);
  CU_ASSERT_EQUAL(bcg_mlp_grad_reduce(&m, NULL, 0.5), BCG_NN_EINVAL);
  bcg_mlp_destroy(&m);
  free(x);
}

static void test_normalizer_stats(void) {
  enum { D = 6, NB = 5, TOT = 3 + 17 + 1 + 40 + 8 };
  const int sizes[NB] = {3, 17, 1, 40, 8};
  bcg_real *x = malloc((size_t)TOT * D * sizeof(bcg_real));
  randn(x, TOT * D, 20, 1);
  for (int s = 0; s < TOT; s++)
    for (int i = 0; i < D; i++) x[s * D + i] = x[s * D + i] * (bcg_real)(0.5 + i) + (bcg_real)(3 * i - 4);
  double eps_counts[2] = {0, 1e-4};
  for (int k = 0; k < 2; k++) {
    bcg_normalizer nz;
    CU_ASSERT_EQUAL_FATAL(bcg_normalizer_init(&nz, D, 5, eps_counts[k]), 0);
    int off = 0;
    for (int b = 0; b < NB; b++) {
      CU_ASSERT_EQUAL(bcg_normalizer_update(&nz, x + off * D, sizes[b]), 0);
      off += sizes[b];
    }
    double worst = 0, e = eps_counts[k], n = TOT;
    for (int i = 0; i < D; i++) {
      double m = 0, v = 0;
      for (int s = 0; s < TOT; s++) m += x[s * D + i];
      m /= TOT;
      for (int s = 0; s < TOT; s++) v += (x[s * D + i] - m) * (x[s * D + i] - m);
      v /= TOT;
      /* the prior (mean 0, var 1, weight e) merged with the data */
      double em = n * m / (n + e), ev = (e + n * v + e * n / (n + e) * m * m) / (n + e);
      worst = fmax(worst, bcg_relerr(nz.mean[i], em, 1e-12));
      worst = fmax(worst, bcg_relerr(nz.var[i], ev, 1e-12));
    }
    CU_ASSERT(fabs(nz.count - (TOT + e)) < 1e-12);
#ifdef BCG_REAL_FLOAT
    CU_ASSERT(worst < 1e-5);
#else
    CU_ASSERT(worst < 1e-12);
#endif
    bcg_test_report("normaliser vs two-pass relerr", worst);
    bcg_normalizer_free(&nz);
  }
  free(x);
}

static void test_normalizer_vjp(void) {
  enum { D = 5, B = 6 };
  bcg_normalizer nz;
  CU_ASSERT_EQUAL_FATAL(bcg_normalizer_init(&nz, D, (bcg_real)1.5, 1e-4), 0);
  bcg_real data[40 * D];
  randn(data, 40 * D, 30, 2);
  bcg_normalizer_update(&nz, data, 40);
  bcg_real x[B * D], w[B * D], y[B * D], dx[B * D];
  randn(x, B * D, 31, 3);
  randn(w, B * D, 32, 1);
  int clipped = 0;
  bcg_normalizer_apply(&nz, x, B, y);
  for (int i = 0; i < B * D; i++) clipped += fabs((double)y[i]) >= 1.5;
  CU_ASSERT(clipped > 0 && clipped < B * D);
  bcg_normalizer_vjp(&nz, x, w, B, dx);
  double fd[B * D];
  for (int i = 0; i < B * D; i++) {
    bcg_real x0 = x[i];
    x[i] = x0 + (bcg_real)FD_H;
    bcg_normalizer_apply(&nz, x, B, y);
    double lp = dot(y, w, B * D);
    x[i] = x0 - (bcg_real)FD_H;
    bcg_normalizer_apply(&nz, x, B, y);
    double lm = dot(y, w, B * D);
    x[i] = x0;
    fd[i] = (lp - lm) / (2 * FD_H);
  }
  double e = vec_relerr_r(dx, fd, B * D);
  bcg_test_report("FD relerr normaliser", e);
  CU_ASSERT(e <= FD_TOL);
  bcg_normalizer_free(&nz);
}

/* ---- Gaussian ------------------------------------------------------------------- */

static void test_gauss_vjp(void) {
  enum { B = 5, N = 4 };
  bcg_real mu[B * N], ls[N], eps[B * N], a[B * N], w[B * N], c[B], lp[B];
  randn(mu, B * N, 40, 1);
  randn(ls, N, 41, (bcg_real)0.5);
  randn(eps, B * N, 42, 1);
  randn(w, B * N, 43, 1);
  randn(c, B, 44, 1);
  bcg_gauss_sample_batch(B, N, mu, ls, eps, a);
  /* the sample, w.r.t. mu and ls: L = sum w . a */
  bcg_real dmu[B * N] = {0}, dls[N] = {0};
  bcg_gauss_sample_vjp_batch(B, N, ls, eps, w, dmu, dls);
  double fmu[B * N], fls[N];
  for (int i = 0; i < B * N; i++) {
    bcg_real t = mu[i];
    mu[i] = t + (bcg_real)FD_H;
    bcg_gauss_sample_batch(B, N, mu, ls, eps, a);
    double lp_ = dot(a, w, B * N);
    mu[i] = t - (bcg_real)FD_H;
    bcg_gauss_sample_batch(B, N, mu, ls, eps, a);
    mu[i] = t;
    fmu[i] = (lp_ - dot(a, w, B * N)) / (2 * FD_H);
  }
  for (int i = 0; i < N; i++) {
    bcg_real t = ls[i];
    ls[i] = t + (bcg_real)FD_H;
    bcg_gauss_sample_batch(B, N, mu, ls, eps, a);
    double lp_ = dot(a, w, B * N);
    ls[i] = t - (bcg_real)FD_H;
    bcg_gauss_sample_batch(B, N, mu, ls, eps, a);
    ls[i] = t;
    fls[i] = (lp_ - dot(a, w, B * N)) / (2 * FD_H);
  }
  double e1 = fmax(vec_relerr_r(dmu, fmu, B * N), vec_relerr_r(dls, fls, N));
  bcg_test_report("FD relerr gaussian sample", e1);
  CU_ASSERT(e1 <= FD_TOL);

  /* the log-prob, w.r.t. a, mu and ls: L = sum_s c_s lp_s */
  bcg_gauss_sample_batch(B, N, mu, ls, eps, a);
  bcg_real da[B * N] = {0}, dmu2[B * N] = {0}, dls2[N] = {0};
  bcg_gauss_logprob_vjp_batch(B, N, mu, ls, a, c, da, dmu2, dls2);
  bcg_real *args[3] = {a, mu, ls};
  bcg_real *grads[3] = {da, dmu2, dls2};
  int lens[3] = {B * N, B * N, N};
  double e2 = 0;
  for (int k = 0; k < 3; k++) {
    double f[B * N];
    for (int i = 0; i < lens[k]; i++) {
      bcg_real t = args[k][i];
      args[k][i] = t + (bcg_real)FD_H;
      bcg_gauss_logprob_batch(B, N, mu, ls, a, lp);
      double lplus = dot(lp, c, B);
      args[k][i] = t - (bcg_real)FD_H;
      bcg_gauss_logprob_batch(B, N, mu, ls, a, lp);
      args[k][i] = t;
      f[i] = (lplus - dot(lp, c, B)) / (2 * FD_H);
    }
    e2 = fmax(e2, vec_relerr_r(grads[k], f, lens[k]));
  }
  bcg_test_report("FD relerr gaussian log-prob", e2);
  CU_ASSERT(e2 <= FD_TOL);
  /* log-prob against the closed form of one sample */
  double ref = 0;
  for (int i = 0; i < N; i++) {
    double s = exp((double)ls[i]), z = ((double)a[i] - mu[i]) / s;
    ref += -0.5 * z * z - log(s) - 0.5 * log(2 * M_PI);
  }
  bcg_gauss_logprob_batch(B, N, mu, ls, a, lp);
  CU_ASSERT(bcg_relerr(lp[0], ref, 1e-12) < 1e-5);

  /* the entropy, w.r.t. ls */
  bcg_real dls3[N] = {0};
  bcg_gauss_entropy_vjp(N, (bcg_real)0.7, dls3);
  double f3[N];
  for (int i = 0; i < N; i++) {
    bcg_real t = ls[i];
    ls[i] = t + (bcg_real)FD_H;
    double hp = 0.7 * bcg_gauss_entropy(N, ls);
    ls[i] = t - (bcg_real)FD_H;
    double hm = 0.7 * bcg_gauss_entropy(N, ls);
    ls[i] = t;
    f3[i] = (hp - hm) / (2 * FD_H);
  }
  double e3 = vec_relerr_r(dls3, f3, N);
  bcg_test_report("FD relerr gaussian entropy", e3);
  CU_ASSERT(e3 <= FD_TOL);
  double href = 0;
  for (int i = 0; i < N; i++) href += 0.5 * log(2 * M_PI * M_E) + ls[i];
  CU_ASSERT(bcg_relerr(bcg_gauss_entropy(N, ls), href, 1e-12) < 1e-5);
  /* KL of a distribution with itself is 0, and positive otherwise */
  CU_ASSERT(fabs((double)bcg_gauss_kl(N, mu, ls, mu, ls)) < 1e-6);
  CU_ASSERT(bcg_gauss_kl(N, mu, ls, mu + N, ls) > 0);
}

/* The batch forms bit for bit against the per-row functions they stand for
 * (they evaluate the exponentials once per dimension), with a row map, and
 * above the dimension count they precompute for (the per-row fallback). */
/* the inputs of the batched Gaussian tests: mu0, mu1, a [B][N] and c [B]
 * normal with std 1, ls0, ls1 [N] with std 0.5, from streams st .. st + 5 */
static void gauss_case(int B, int N, uint32_t st, bcg_real *mu0, bcg_real *mu1, bcg_real *a, bcg_real *c,
                       bcg_real *ls0, bcg_real *ls1) {
  randn(mu0, B * N, st, 1);
  randn(mu1, B * N, st + 1, 1);
  randn(a, B * N, st + 2, 1);
  randn(c, B, st + 3, 1);
  randn(ls0, N, st + 4, 0.5);
  randn(ls1, N, st + 5, 0.5);
}

static void test_gauss_batch_exact(void) {
  const int dims[2] = {7, 300};
  for (int k = 0; k < 2; k++) {
    int B = 5, N = dims[k];
    size_t BN = (size_t)B * N;
    bcg_real *mu0 = malloc(BN * sizeof(bcg_real)), *mu1 = malloc(BN * sizeof(bcg_real));
    bcg_real *a = malloc(BN * sizeof(bcg_real)), *c = malloc(B * sizeof(bcg_real));
    bcg_real *ls0 = malloc(N * sizeof(bcg_real)), *ls1 = malloc(N * sizeof(bcg_real));
    bcg_real *g[2][3];
    for (int v = 0; v < 2; v++) {
      g[v][0] = malloc(BN * sizeof(bcg_real));
      g[v][1] = malloc(BN * sizeof(bcg_real));
      g[v][2] = malloc(N * sizeof(bcg_real));
      randn(g[v][0], (int)BN, 90, 1);
      randn(g[v][1], (int)BN, 91, 1);
      randn(g[v][2], N, 92, 1); /* both variants start from the same non-zero values */
    }
    gauss_case(B, N, 93, mu0, mu1, a, c, ls0, ls1);
    bcg_gauss_logprob_vjp_batch(B, N, mu1, ls1, a, c, g[0][0], g[0][1], g[0][2]);
    for (int s = 0; s < B; s++)
      bcg_gauss_logprob_vjp(N, mu1 + (size_t)s * N, ls1, a + (size_t)s * N, c[s], g[1][0] + (size_t)s * N,
                            g[1][1] + (size_t)s * N, g[1][2]);
    CU_ASSERT(memcmp(g[0][0], g[1][0], BN * sizeof(bcg_real)) == 0);
    CU_ASSERT(memcmp(g[0][1], g[1][1], BN * sizeof(bcg_real)) == 0);
    CU_ASSERT(memcmp(g[0][2], g[1][2], N * sizeof(bcg_real)) == 0);
    const int rows[5] = {3, 0, 4, 4, 1};
    double ref = 0, ref_id = 0;
    for (int s = 0; s < B; s++) {
      ref += (double)bcg_gauss_kl(N, mu0 + (size_t)rows[s] * N, ls0, mu1 + (size_t)s * N, ls1);
      ref_id += (double)bcg_gauss_kl(N, mu0 + (size_t)s * N, ls0, mu1 + (size_t)s * N, ls1);
    }
    CU_ASSERT(bcg_gauss_kl_sum(B, N, mu0, rows, ls0, mu1, ls1) == ref);
    CU_ASSERT(bcg_gauss_kl_sum(B, N, mu0, NULL, ls0, mu1, ls1) == ref_id);
    CU_ASSERT(ref > 0);
    for (int v = 0; v < 2; v++)
      for (int j = 0; j < 3; j++) free(g[v][j]);
    free(mu0);
    free(mu1);
    free(a);
    free(c);
    free(ls0);
    free(ls1);
  }
}

/* Above 1024 rows the batched KL sum and log-prob VJP run in blocks of 1024
 * rows over the threads: each block summed in row order, the blocks in
 * order. Checked against that order written out with the per-row
 * functions, bit for bit, with 1 and 2 threads (a batch of 2500 rows: two
 * whole blocks and a partial one). */
static void test_gauss_batch_blocks(void) {
  enum { B = 2500, N = 21, BLK = 1024 };
  size_t BN = (size_t)B * N;
  bcg_real *mu0 = malloc(BN * sizeof(bcg_real)), *mu1 = malloc(BN * sizeof(bcg_real));
  bcg_real *a = malloc(BN * sizeof(bcg_real)), *c = malloc(B * sizeof(bcg_real));
  bcg_real *dmu_ref = calloc(BN, sizeof(bcg_real)), *dmu = calloc(BN, sizeof(bcg_real));
  int *rows = malloc(B * sizeof(int));
  bcg_real ls0[N], ls1[N], dls_ref[N], dls[N], part[N];
  CU_ASSERT_FATAL(mu0 && mu1 && a && c && dmu_ref && dmu && rows);
  gauss_case(B, N, 101, mu0, mu1, a, c, ls0, ls1);
  for (int s = 0; s < B; s++) rows[s] = (int)(((uint64_t)s * 7919u) % B);
  /* the reference: blocks of BLK rows, each in row order (the first onto the
   * initial dls, the others from zero), the blocks added in order */
  double kl_ref = 0;
  randn(dls_ref, N, 107, 1);
  for (int b0 = 0; b0 < B; b0 += BLK) {
    double kb = 0;
    bcg_real *acc = b0 == 0 ? dls_ref : part;
    if (b0 > 0)
      for (int i = 0; i < N; i++) part[i] = 0;
    for (int s = b0; s < B && s < b0 + BLK; s++) {
      kb += (double)bcg_gauss_kl(N, mu0 + (size_t)rows[s] * N, ls0, mu1 + (size_t)s * N, ls1);
      bcg_gauss_logprob_vjp(N, mu1 + (size_t)s * N, ls1, a + (size_t)s * N, c[s], NULL, dmu_ref + (size_t)s * N, acc);
    }
    kl_ref += kb;
    if (b0 > 0)
      for (int i = 0; i < N; i++) dls_ref[i] += part[i];
  }
  const int saved = omp_get_max_threads();
  for (int th = 1; th <= 2; th++) {
    omp_set_num_threads(th);
    CU_ASSERT(bcg_gauss_kl_sum(B, N, mu0, rows, ls0, mu1, ls1) == kl_ref);
    memset(dmu, 0, BN * sizeof(bcg_real));
    randn(dls, N, 107, 1);
    bcg_gauss_logprob_vjp_batch(B, N, mu1, ls1, a, c, NULL, dmu, dls);
    CU_ASSERT(memcmp(dmu, dmu_ref, BN * sizeof(bcg_real)) == 0);
    CU_ASSERT(memcmp(dls, dls_ref, sizeof dls) == 0);
  }
  omp_set_num_threads(saved);
  free(mu0);
  free(mu1);
  free(a);
  free(c);
  free(dmu_ref);
  free(dmu);
  free(rows);
}

/* ---- optimisation ----------------------------------------------------------------- */

static void test_adam(void) {
  enum { N = 10 };
  bcg_real p[N], t[N], k[N], g[N];
  randn(t, N, 50, 2);
  randn(p, N, 51, 2);
  for (int i = 0; i < N; i++) k[i] = (bcg_real)(0.1 + i);
  bcg_adam a;
  CU_ASSERT_EQUAL_FATAL(bcg_adam_init(&a, N, (bcg_real)0.05, (bcg_real)0.9, (bcg_real)0.999,
                                      (bcg_real)1e-8), 0);
  /* first step: m_hat = g, v_hat = g^2, so p -= lr g / (|g| + eps) */
  bcg_real p0[N];
  memcpy(p0, p, sizeof p);
  for (int i = 0; i < N; i++) g[i] = k[i] * (p[i] - t[i]);
  bcg_adam_step(&a, p, g);
  double e = 0;
  for (int i = 0; i < N; i++)
    e = fmax(e, fabs((double)p[i] - (p0[i] - 0.05 * g[i] / (fabs((double)g[i]) + 1e-8))));
  CU_ASSERT(e < 1e-6);
  CU_ASSERT_EQUAL(a.step, 1);
  /* converges on the quadratic 0.5 sum k (p - t)^2 with a decaying rate */
  bcg_lr_schedule s = bcg_lr_linear_schedule((bcg_real)0.05, (bcg_real)1e-4, 3000);
  for (int it = 0; it < 3000; it++) {
    a.lr = bcg_lr_at(&s, it);
    for (int i = 0; i < N; i++) g[i] = k[i] * (p[i] - t[i]);
    bcg_adam_step(&a, p, g);
  }
  double worst = 0;
  for (int i = 0; i < N; i++) worst = fmax(worst, fabs((double)p[i] - t[i]));
  bcg_test_report("adam quadratic max |p - p*|", worst);
  CU_ASSERT(worst < 1e-3);
  bcg_adam_reset(&a);
  CU_ASSERT(a.step == 0 && a.m[3] == 0 && a.v[3] == 0);
  bcg_adam_free(&a);
}

static void test_clip(void) {
  enum { N = 37 };
  bcg_real g[N], g0[N];
  randn(g, N, 60, 3);
  memcpy(g0, g, sizeof g);
  double ref = 0;
  for (int i = 0; i < N; i++) ref += (double)g[i] * g[i];
  ref = sqrt(ref);
  bcg_real n = bcg_clip_grad_norm(g, N, 1);
  CU_ASSERT(bcg_relerr(n, ref, 1e-300) < 1e-6);
  double after = bcg_vec_norm(g, N);
  bcg_test_report("clip |norm after - max|", fabs(after - 1));
#ifdef BCG_REAL_FLOAT
  CU_ASSERT(fabs(after - 1) < 1e-6);
#else
  CU_ASSERT(fabs(after - 1) < 1e-14);
#endif
  /* direction preserved */
  for (int i = 0; i < N; i++) CU_ASSERT(fabs(g[i] - g0[i] / ref) < 1e-6);
  /* below the threshold nothing changes */
  memcpy(g, g0, sizeof g);
  bcg_real n2 = bcg_clip_grad_norm(g, N, (bcg_real)(2 * ref));
  CU_ASSERT(bcg_relerr(n2, ref, 1e-300) < 1e-6);
  CU_ASSERT_EQUAL(memcmp(g, g0, sizeof g), 0);
  /* the summation order bcg/nn.h documents (32 interleaved partial sums,
   * combined pairwise), bit for bit, for lengths around the lane count and a
   * network-sized one; and within rounding of an extended-precision sum */
  static const size_t lens[6] = {1, 31, 32, 33, 95, 124037};
  bcg_real *v = malloc(sizeof(bcg_real) * 124037);
  randn(v, 124037, 61, 1);
  for (int k = 0; k < 6; k++) {
    size_t m = lens[k];
    double acc[32] = {0};
    long double ld = 0;
    for (size_t i = 0; i < m; i++) {
      acc[i % 32] += (double)v[i] * (double)v[i];
      ld += (long double)v[i] * (long double)v[i];
    }
    for (int w = 16; w >= 1; w /= 2)
      for (int j = 0; j < w; j++) acc[j] += acc[j + w];
    bcg_real want = (bcg_real)sqrt(acc[0]), got = bcg_vec_norm(v, m);
    CU_ASSERT_EQUAL(memcmp(&want, &got, sizeof got), 0);
    CU_ASSERT(fabs((double)got - (double)sqrtl(ld)) <= (sizeof(bcg_real) == 4 ? 1e-6 : 4e-16) * (double)sqrtl(ld));
  }
  free(v);
  /* Polyak */
  bcg_real d[2] = {1, 2}, s2[2] = {3, 4};
  bcg_vec_polyak(d, s2, 2, (bcg_real)0.25);
  CU_ASSERT(fabs(d[0] - 2.5) < 1e-6 && fabs(d[1] - 3.5) < 1e-6);
}

/* bcg_mlp_clip_adam on the host (the CUDA switch off: hold and release do
 * nothing) is bcg_clip_grad_norm then, for a finite norm, bcg_adam_step, bit
 * for bit; bad arguments refused */
static void test_clip_adam(void) {
  bcg_mlp_config c;
  memset(&c, 0, sizeof c);
  c.in_dim = 5;
  c.out_dim = 2;
  c.nhidden = 1;
  c.hidden[0] = 40;
  c.hidden_act = BCG_ACT_ELU;
  c.layernorm = BCG_LN_POST_ACT;
  c.extra = 2;
  c.max_batch = 4;
  bcg_mlp m;
  bcg_adam a, b;
  CU_ASSERT_FATAL(bcg_mlp_create(&m, &c) == 0);
  bcg_mlp_init_params(&m, 77, 1);
  size_t n = m.nparams;
  bcg_real *p = malloc(n * sizeof(bcg_real)), *g = malloc(n * sizeof(bcg_real));
  memcpy(p, m.params, n * sizeof(bcg_real));
  bcg_adam_init(&a, n, (bcg_real)1e-2, (bcg_real)0.9, (bcg_real)0.999, (bcg_real)1e-8);
  bcg_adam_init(&b, n, (bcg_real)1e-2, (bcg_real)0.9, (bcg_real)0.999, (bcg_real)1e-8);
  a.weight_decay = b.weight_decay = (bcg_real)0.003;
  bcg_nn_set_cuda(0, 0, NULL, 0);
  CU_ASSERT_EQUAL(bcg_mlp_hold(&m, &a), 0); /* the switch off: nothing held */
  CU_ASSERT(!bcg_mlp_is_held(&m));
  for (int st = 0; st < 5; st++) {
    randn(m.grad, n, 90 + st, st == 1 ? 100 : 0.1); /* step 1 clips */
    if (st == 3) m.grad[7] = (bcg_real)INFINITY;    /* no step */
    memcpy(g, m.grad, n * sizeof(bcg_real));
    bcg_real want = bcg_clip_grad_norm(g, n, 2), got = 0;
    if (isfinite((double)want)) bcg_adam_step(&b, p, g);
    CU_ASSERT_EQUAL(bcg_mlp_clip_adam(&m, &a, 2, &got), 0);
    CU_ASSERT(memcmp(&want, &got, sizeof got) == 0);
    CU_ASSERT(memcmp(m.params, p, n * sizeof(bcg_real)) == 0);
    CU_ASSERT(memcmp(m.grad, g, n * sizeof(bcg_real)) == 0);
  }
  CU_ASSERT_EQUAL(a.step, 4);
  CU_ASSERT(memcmp(a.m, b.m, n * sizeof(bcg_real)) == 0 && memcmp(a.v, b.v, n * sizeof(bcg_real)) == 0);
  CU_ASSERT_EQUAL(bcg_mlp_release(&m, &a), 0);
  bcg_adam_free(&b);
  bcg_adam_init(&b, n + 1, (bcg_real)1e-2, (bcg_real)0.9, (bcg_real)0.999, (bcg_real)1e-8);
  CU_ASSERT_EQUAL(bcg_mlp_clip_adam(&m, &b, 1, NULL), BCG_NN_EINVAL); /* another size */
  CU_ASSERT_EQUAL(bcg_mlp_hold(&m, &b), BCG_NN_EINVAL);
  CU_ASSERT_EQUAL(bcg_mlp_clip_adam(NULL, &a, 1, NULL), BCG_NN_EINVAL);
  CU_ASSERT_EQUAL(bcg_mlp_clip_adam(&m, NULL, 1, NULL), BCG_NN_EINVAL);
  bcg_adam_free(&a);
  bcg_adam_free(&b);
  bcg_mlp_destroy(&m);
  free(p);
  free(g);
}

/* bcg_mlp_grad_norm and bcg_mlp_scale_adam on the host: bcg_vec_norm, and
 * the gradient times c (in double, rounded) followed by bcg_adam_step; c = 1
 * leaves the gradient; a factor rounded to bcg_real scales exactly as the
 * product of two bcg_reals (PPO's former clip); bad arguments refused */
static void test_scale_adam(void) {
  bcg_mlp_config c;
  memset(&c, 0, sizeof c);
  c.in_dim = 6;
  c.out_dim = 3;
  c.nhidden = 2;
  c.hidden[0] = 50;
  c.hidden[1] = 30;
  c.hidden_act = BCG_ACT_TANH;
  c.extra = 3;
  c.max_batch = 4;
  bcg_mlp m;
  bcg_adam a, b;
  CU_ASSERT_FATAL(bcg_mlp_create(&m, &c) == 0);
  bcg_mlp_init_params(&m, 78, 1);
  size_t n = m.nparams;
  bcg_real *p = malloc(n * sizeof(bcg_real)), *g = malloc(n * sizeof(bcg_real));
  memcpy(p, m.params, n * sizeof(bcg_real));
  bcg_adam_init(&a, n, (bcg_real)1e-2, (bcg_real)0.9, (bcg_real)0.999, (bcg_real)1e-8);
  bcg_adam_init(&b, n, (bcg_real)1e-2, (bcg_real)0.9, (bcg_real)0.999, (bcg_real)1e-8);
  bcg_nn_set_cuda(0, 0, NULL, 0);
  for (int st = 0; st < 4; st++) {
    randn(m.grad, (int)n, 120 + st, (bcg_real)0.7);
    memcpy(g, m.grad, n * sizeof(bcg_real));
    bcg_real nr = 0, want = bcg_vec_norm(g, n);
    CU_ASSERT_EQUAL(bcg_mlp_grad_norm(&m, &nr), 0);
    CU_ASSERT(memcmp(&nr, &want, sizeof nr) == 0);
    bcg_real cf = st % 2 ? (bcg_real)(0.37 / (double)nr) : 1; /* odd steps scale */
    for (size_t i = 0; i < n; i++) g[i] *= cf;
    bcg_adam_step(&b, p, g);
    CU_ASSERT_EQUAL(bcg_mlp_scale_adam(&m, &a, (double)cf), 0);
    CU_ASSERT(memcmp(m.params, p, n * sizeof(bcg_real)) == 0);
    CU_ASSERT(memcmp(m.grad, g, n * sizeof(bcg_real)) == 0);
  }
  CU_ASSERT_EQUAL(a.step, 4);
  CU_ASSERT(memcmp(a.m, b.m, n * sizeof(bcg_real)) == 0 && memcmp(a.v, b.v, n * sizeof(bcg_real)) == 0);
  bcg_real nr;
  CU_ASSERT_EQUAL(bcg_mlp_grad_norm(NULL, &nr), BCG_NN_EINVAL);
  CU_ASSERT_EQUAL(bcg_mlp_grad_norm(&m, NULL), BCG_NN_EINVAL);
  CU_ASSERT_EQUAL(bcg_mlp_scale_adam(&m, NULL, 1), BCG_NN_EINVAL);
  CU_ASSERT_EQUAL(bcg_mlp_scale_adam(&m, &a, NAN), BCG_NN_EINVAL);
  CU_ASSERT_EQUAL(bcg_mlp_scale_adam(&m, &a, INFINITY), BCG_NN_EINVAL);
  bcg_adam_free(&b);
  bcg_adam_init(&b, n - 1, (bcg_real)1e-2, (bcg_real)0.9, (bcg_real)0.999, (bcg_real)1e-8);
  CU_ASSERT_EQUAL(bcg_mlp_scale_adam(&m, &b, 1), BCG_NN_EINVAL); /* another size */
  CU_ASSERT_EQUAL(a.step, 4);                                      /* no step counted by a refusal */
  bcg_adam_free(&a);
  bcg_adam_free(&b);
  bcg_mlp_destroy(&m);
  free(p);
  free(g);
}

static void test_lr_schedules(void) {
  bcg_lr_schedule s = bcg_lr_linear_schedule((bcg_real)5e-3, (bcg_real)1e-5, 3000);
  CU_ASSERT_EQUAL(bcg_lr_at(&s, 0), (bcg_real)5e-3);
  CU_ASSERT_EQUAL(bcg_lr_at(&s, 3000), (bcg_real)1e-5);
  CU_ASSERT_EQUAL(bcg_lr_at(&s, 5000), (bcg_real)1e-5);
  CU_ASSERT(bcg_relerr(bcg_lr_at(&s, 1500), 0.5 * (5e-3 + 1e-5), 1e-12) < 1e-6);
  CU_ASSERT(bcg_relerr(bcg_lr_at(&s, 1), 5e-3 + (1e-5 - 5e-3) / 3000, 1e-12) < 1e-6);
  bcg_lr_schedule c = bcg_lr_constant_schedule((bcg_real)2e-3);
  CU_ASSERT_EQUAL(bcg_lr_at(&c, 12345), (bcg_real)2e-3);
  CU_ASSERT_EQUAL(bcg_lr_observe_kl(&c, 1), (bcg_real)2e-3);

  bcg_lr_schedule k = bcg_lr_kl_schedule((bcg_real)1e-3, (bcg_real)0.01);
  CU_ASSERT(bcg_relerr(bcg_lr_observe_kl(&k, (bcg_real)0.05), 1e-3 / 1.5, 0) < 1e-6);
  CU_ASSERT(bcg_relerr(bcg_lr_observe_kl(&k, (bcg_real)0.01), 1e-3 / 1.5, 0) < 1e-6);
  CU_ASSERT(bcg_relerr(bcg_lr_observe_kl(&k, (bcg_real)0.001), 1e-3, 0) < 1e-6);
  CU_ASSERT(bcg_relerr(bcg_lr_observe_kl(&k, 0), 1e-3, 0) < 1e-6); /* kl = 0: rsl_rl keeps lr */
  CU_ASSERT(bcg_relerr(bcg_lr_at(&k, 99), 1e-3, 0) < 1e-6);
  for (int i = 0; i < 30; i++) bcg_lr_observe_kl(&k, (bcg_real)1e-4);
  CU_ASSERT_EQUAL(k.lr, (bcg_real)1e-2);
  for (int i = 0; i < 60; i++) bcg_lr_observe_kl(&k, 1);
  CU_ASSERT_EQUAL(k.lr, (bcg_real)1e-5);
  CU_ASSERT_EQUAL(bcg_lr_adaptive_kl((bcg_real)1e-3, (bcg_real)0.0201, (bcg_real)0.01,
                                     (bcg_real)1e-5, (bcg_real)1e-2),
                  (bcg_real)1e-3 / (bcg_real)1.5);
}

/* ---- tiny regression ---------------------------------------------------------------- */

static void test_regression_sin(void) {
  enum { B = 64 };
  bcg_mlp_config c;
  memset(&c, 0, sizeof c);
  c.in_dim = 1;
  c.out_dim = 1;
  c.nhidden = 2;
  c.hidden[0] = c.hidden[1] = 32;
  c.hidden_act = BCG_ACT_TANH;
  c.layernorm = BCG_LN_POST_ACT;
  c.max_batch = B;
  bcg_mlp m;
  CU_ASSERT_EQUAL_FATAL(bcg_mlp_create(&m, &c), 0);
  bcg_mlp_init_params(&m, SEED, 9);
  bcg_adam a;
  CU_ASSERT_EQUAL_FATAL(bcg_adam_init(&a, m.nparams, (bcg_real)3e-3, (bcg_real)0.9,
                                      (bcg_real)0.999, (bcg_real)1e-8), 0);
  bcg_real x[B], t[B], y[B], dy[B];
  for (int i = 0; i < B; i++) {
    x[i] = (bcg_real)(-M_PI + 2 * M_PI * i / (B - 1));
    t[i] = (bcg_real)sin((double)x[i]);
  }
  double l0 = 0, l = 0;
  for (int it = 0; it <= 600; it++) {
    bcg_mlp_forward(&m, NULL, x, B, y);
    l = 0;
    for (int i = 0; i < B; i++) {
      l += (double)(y[i] - t[i]) * (y[i] - t[i]) / B;
      dy[i] = 2 * (y[i] - t[i]) / B;
    }
    if (it == 0) l0 = l;
    if (it == 600) break;
    bcg_mlp_zero_grad(&m);
    bcg_mlp_backward(&m, NULL, dy, m.grad, NULL);
    bcg_clip_grad_norm(m.grad, m.nparams, 10);
    bcg_adam_step(&a, m.params, m.grad);
  }
  bcg_test_report("sin regression loss ratio final/initial", l / l0);
  CU_ASSERT(l < l0 / 10);
  bcg_adam_free(&a);
  bcg_mlp_destroy(&m);
}

BCG_TESTS({"philox known answers", test_philox_kat}, {"data-parallel pieces (normaliser, gradient)", test_dist_pieces}, {"rng streams", test_rng_streams},
          {"mlp vjp (no layernorm)", test_mlp_vjp_plain},
          {"mlp vjp (layernorm pre/post)", test_mlp_vjp_layernorm}, {"mlp tapes", test_mlp_tapes}, {"mlp row sources", test_mlp_rows}, {"mlp split over threads", test_mlp_threads},
          {"elu layer", test_elu_layer},
          {"mlp init", test_mlp_init}, {"normaliser statistics", test_normalizer_stats},
          {"normaliser vjp", test_normalizer_vjp}, {"gaussian vjps", test_gauss_vjp},
          {"gaussian batch forms exact", test_gauss_batch_exact}, {"gaussian batch blocks", test_gauss_batch_blocks},
          {"adam", test_adam}, {"clip and polyak", test_clip}, {"clip_adam", test_clip_adam}, {"grad_norm, scale_adam", test_scale_adam},
          {"lr schedules", test_lr_schedules}, {"sin regression", test_regression_sin});
BCG_RUN("nn")
