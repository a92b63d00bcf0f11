/* nn.c - host side of bcg/nn.h: batched MLP forward/backward through OpenBLAS,
 * Adam, clipping, schedules, the running normaliser and batched Gaussian helpers. */
#include "bcg/nn.h"

#include <cblas.h>
#include <ctype.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bcg/rng.h"
#include "clock.h"
#include "nn_cuda.h"
#include "nn_tape.h"

/* networks held on the device now (bcg_mlp_hold): while 0, no call looks them up */
static int nn_nheld;
static int is_held(const bcg_mlp *m, const bcg_adam **opt);

#ifdef BCG_REAL_FLOAT
#define BCG_GEMM cblas_sgemm
#else
#define BCG_GEMM cblas_dgemm
#endif

#define NO_OFF ((size_t)-1)

/* ---- GEMM on the OpenMP threads -----------------------------------------------
 *
 * OpenBLAS runs single-threaded (set here at the first GEMM): its own
 * pthread pool beside OpenMP's team oversubscribed the cores (its workers
 * spin after each call while OpenMP's threads start the next physics
 * region), and most of bcg's GEMMs are too small to be worth a thread. A
 * GEMM of at least NN_PAR_MIN multiply-adds per thread is split here over
 * OpenMP threads instead: C's rows (or its columns, when it has more of them)
 * in contiguous blocks, one single-threaded GEMM per block. Each element of C
 * is still one dot product over K in OpenBLAS's order, so the result does not
 * depend on the split, provided the blocks start at multiples of NN_ALIGN:
 * OpenBLAS's kernels work on tiles of up to 16 (double) or 32 (float) rows
 * or columns and treat a block's last, partial tile with other instructions,
 * which round differently (8192 rows in 3 unaligned blocks changed 46 of
 * 262 144 elements; aligned, none). Inside a parallel region a GEMM stays on
 * its thread. And no block may fall below the size under which OpenBLAS's
 * SkylakeX and Cooperlake kernels take their separate small-matrix path
 * (M N K <= 100^3 in 0.3.21), which rounds differently: with the per-thread
 * minimum at 2^18 multiply-adds a 24 x 80 x 600 GEMM split into two blocks
 * changed bits there. With at least 2^21 per block on average, each block
 * has at least 2^20 > 100^3 (the aligned split leaves every block at least
 * half the average). */
#define NN_PAR_MIN (1 << 21)
#define NN_ALIGN 32

/* row-wise helpers (normaliser, batched Gaussian) run on the OpenMP threads
 * from this many elements on; each row or dimension stays on one thread, so
 * results do not depend on the thread count */
#define BCG_NN_PAR_MIN 16384

void openblas_set_num_threads(int n); /* libopenblas */

/* OpenBLAS's kernels. A DYNAMIC_ARCH build (Debian's) picks them by the CPU
 * model, and a model it does not know gets its generic Prescott kernels:
 * Debian 12's OpenBLAS 0.3.21 on an Intel Xeon of family 6, model 207 (a
 * 2026 cloud VM) ran a 128 x 128 x 80 dgemm on one thread at a fifth to a quarter of
 * the rate of the Cooperlake kernels that the CPU's instruction set
 * supports, and the demo's iteration 1.5x slower (docs/performance.md
 * section 7). So when OpenBLAS chose
 * Prescott and the user did not choose (OPENBLAS_CORETYPE unset), the kernels
 * are chosen again by instruction set: AVX-512 (F, BW, VL, DQ) with BF16
 * Cooperlake, without SkylakeX, AVX2 with FMA Haswell, AVX Sandybridge;
 * through OpenBLAS's own OPENBLAS_CORETYPE and its exported re-initialisation
 * (weak: other BLAS builds skip this). Once per process, before the first
 * GEMM; OpenBLAS is also set to one thread (the GEMMs are split over
 * OpenMP here). */
extern char *openblas_get_corename(void) __attribute__((weak));
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static char blas_desc[128] = "BLAS";

static void blas_setup(void) {
  openblas_set_num_threads(1);
  const char *core = openblas_get_corename ? openblas_get_corename() : NULL;
  if (!core) return;
  snprintf(blas_desc, sizeof blas_desc, "OpenBLAS %s kernels", core);
  const char *env = getenv("OPENBLAS_CORETYPE");
  if ((env && *env) || strcasecmp(core, "Prescott") != 0 || !gotoblas_dynamic_init || !gotoblas_dynamic_quit) return;
  __builtin_cpu_init();
  const char *pick = NULL;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    pick = __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    pick = "Haswell";
  else if (__builtin_cpu_supports("avx"))
    pick = "Sandybridge";
  if (!pick) return;
  setenv("OPENBLAS_CORETYPE", pick, 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
  openblas_set_num_threads(1);
  const char *now = openblas_get_corename();
  snprintf(blas_desc, sizeof blas_desc, "OpenBLAS %s kernels (chosen by bcg; OpenBLAS's own choice: Prescott)",
           now ? now : "?");
}

const char *bcg_blas_describe(void) {
  pthread_once(&blas_once, blas_setup);
  return blas_desc;
}

static void nn_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, bcg_real alpha, const bcg_real *A,
                    int lda, const bcg_real *B, int ldb, bcg_real beta, bcg_real *C, int ldc) {
  pthread_once(&blas_once, blas_setup);
  double work = (double)M * (double)N * (double)K;
  int split_rows = M >= N, D = split_rows ? M : N;
  /* outside a parallel region: all threads; inside one (SHAC's critics side
   * by side): the thread count the caller set for its nested regions, if
   * nesting is allowed there, else this thread alone */
  int nt = omp_get_active_level() < omp_get_max_active_levels() ? omp_get_max_threads() : 1;
  if (nt > work / NN_PAR_MIN) nt = (int)(work / NN_PAR_MIN);
  if (nt > D / NN_ALIGN) nt = D / NN_ALIGN; /* blocks of at least NN_ALIGN rows or columns */
  if (nt <= 1) {
    BCG_GEMM(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num(), n = omp_get_num_threads();
    int lo = (int)((long)D * t / n) / NN_ALIGN * NN_ALIGN;
    int hi = t == n - 1 ? D : (int)((long)D * (t + 1) / n) / NN_ALIGN * NN_ALIGN;
    if (hi > lo) {
      if (split_rows) /* op(A) rows lo..hi: A's rows (NoTrans) or columns (Trans) */
        BCG_GEMM(CblasRowMajor, ta, tb, hi - lo, N, K, alpha, ta == CblasNoTrans ? A + (size_t)lo * lda : A + lo,
                 lda, B, ldb, beta, C + (size_t)lo * ldc, ldc);
      else /* op(B) columns lo..hi: B's columns (NoTrans) or rows (Trans) */
        BCG_GEMM(CblasRowMajor, ta, tb, M, hi - lo, K, alpha, A, lda,
                 tb == CblasNoTrans ? B + lo : B + (size_t)lo * ldb, ldb, beta, C + lo, ldc);
    }
  }
}

const char *bcg_nn_strerror(int err) {
  switch (err) {
  case BCG_NN_OK: return "ok";
  case BCG_NN_EINVAL: return "invalid argument or network configuration";
  case BCG_NN_ENOMEM: return "out of memory";
  case BCG_NN_EBATCH: return "batch larger than the workspace capacity";
  case BCG_NN_EDEVICE: return "MLP on the CUDA device failed (see bcg_nn_cuda_error)";
  default: return "unknown nn error";
  }
}

static const char *const act_names[] = {"identity", "relu", "tanh", "elu"};

int bcg_act_parse(const char *name, bcg_act *out) {
  if (!name || !out) return BCG_NN_EINVAL;
  for (int a = 0; a < 4; a++) {
    const char *s = act_names[a], *t = name;
    while (*s && *t && tolower((unsigned char)*t) == *s) s++, t++;
    if (!*s && !*t) {
      *out = (bcg_act)a;
      return BCG_NN_OK;
    }
  }
  return BCG_NN_EINVAL;
}

const char *bcg_act_name(bcg_act act) {
  return ((int)act >= 0 && (int)act < 4) ? act_names[(int)act] : "?";
}

/* 64-byte aligned, zeroed; size rounded up as aligned_alloc requires. */
static bcg_real *alloc_reals(size_t n) {
  size_t bytes = n * sizeof(bcg_real);
  bytes = (bytes + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  bcg_real *p = aligned_alloc(64, bytes);
  if (p) memset(p, 0, bytes);
  return p;
}

/* ---- MLP ------------------------------------------------------------------- */

static int has_ln(const bcg_mlp *m, int l) {
  return l < m->nlin - 1 && m->cfg.layernorm != BCG_LN_NONE;
}

static int layer_act(const bcg_mlp *m, int l) {
  return l < m->nlin - 1 ? (int)m->cfg.hidden_act : (int)m->cfg.out_act;
}

static int valid_act(bcg_act a) { return (int)a >= BCG_ACT_IDENTITY && (int)a <= BCG_ACT_ELU; }

int bcg_mlp_create(bcg_mlp *m, const bcg_mlp_config *cfg) {
  if (!m || !cfg) return BCG_NN_EINVAL;
  memset(m, 0, sizeof *m);
  if (cfg->in_dim <= 0 || cfg->out_dim <= 0 || cfg->nhidden < 0 ||
      cfg->nhidden > BCG_MLP_MAX_HIDDEN || cfg->extra < 0 || cfg->max_batch <= 0 ||
      !valid_act(cfg->hidden_act) || !valid_act(cfg->out_act) ||
      (cfg->layernorm != BCG_LN_NONE && cfg->layernorm != BCG_LN_PRE_ACT &&
       cfg->layernorm != BCG_LN_POST_ACT) ||
      (cfg->init != BCG_INIT_UNIFORM && cfg->init != BCG_INIT_ORTHOGONAL))
    return BCG_NN_EINVAL;
  for (int i = 0; i < cfg->nhidden; i++)
    if (cfg->hidden[i] <= 0) return BCG_NN_EINVAL;
  m->cfg = *cfg;
  m->nlin = cfg->nhidden + 1;
  m->dim[0] = cfg->in_dim;
  for (int i = 0; i < cfg->nhidden; i++) m->dim[i + 1] = cfg->hidden[i];
  m->dim[m->nlin] = cfg->out_dim;
  size_t off = 0;
  for (int l = 0; l < m->nlin; l++) {
    size_t ni = (size_t)m->dim[l], no = (size_t)m->dim[l + 1];
    m->off_w[l] = off;
    off += no * ni;
    m->off_b[l] = off;
    off += no;
    if (has_ln(m, l)) {
      m->off_lng[l] = off;
      off += no;
      m->off_lnb[l] = off;
      off += no;
    } else {
      m->off_lng[l] = m->off_lnb[l] = NO_OFF;
    }
  }
  m->nnet = off;
  m->nparams = off + (size_t)cfg->extra;
  m->params = alloc_reals(m->nparams);
  m->grad = alloc_reals(m->nparams);
  if (!m->params || !m->grad) {
    bcg_mlp_destroy(m);
    return BCG_NN_ENOMEM;
  }
  if (cfg->extra > 0) {
    m->extra_params = m->params + m->nnet;
    m->extra_grad = m->grad + m->nnet;
  }
  int rc = bcg_mlp_tape_init(&m->tape, m, cfg->max_batch, NULL);
  if (rc) {
    bcg_mlp_destroy(m);
    return rc;
  }
  return BCG_NN_OK;
}

void bcg_mlp_destroy(bcg_mlp *m) {
  if (!m) return;
  if (m->params && is_held(m, NULL)) __atomic_sub_fetch(&nn_nheld, 1, __ATOMIC_RELAXED);
  bcg_cuda_nn_forget(m->params); /* page-locked by a device call; a held network's device state dropped */
  free(m->params);
  free(m->grad);
  bcg_mlp_tape_free(&m->tape);
  memset(m, 0, sizeof *m);
}

void bcg_mlp_zero_grad(bcg_mlp *m) {
  if (is_held(m, NULL)) { /* a failure is kept: the network's next device call reports it */
    (void)bcg_cuda_nn_zero_grad(m);
    if (m->nparams > m->nnet) memset(m->extra_grad, 0, (m->nparams - m->nnet) * sizeof(bcg_real)); /* the host's while held */
    return;
  }
  memset(m->grad, 0, m->nparams * sizeof(bcg_real));
}

/* Orthonormal columns of a p x k Gaussian matrix (p >= k, column-major in q)
 * by modified Gram-Schmidt, run twice for stability. MGS yields R with a
 * positive diagonal, the sign convention torch.nn.init.orthogonal_ enforces. */
static void orthonormalize(double *q, int p, int k) {
  for (int j = 0; j < k; j++) {
    double *qj = q + (size_t)j * p;
    for (int pass = 0; pass < 2; pass++)
      for (int i = 0; i < j; i++) {
        const double *qi = q + (size_t)i * p;
        double d = 0;
        for (int r = 0; r < p; r++) d += qi[r] * qj[r];
        for (int r = 0; r < p; r++) qj[r] -= d * qi[r];
      }
    double nrm = 0;
    for (int r = 0; r < p; r++) nrm += qj[r] * qj[r];
    nrm = sqrt(nrm);
    for (int r = 0; r < p; r++) qj[r] = nrm > 0 ? qj[r] / nrm : 0;
  }
}

void bcg_mlp_init_params(bcg_mlp *m, uint64_t seed, uint32_t stream) {
  const bcg_mlp_config *c = &m->cfg;
  for (int l = 0; l < m->nlin; l++) {
    int ni = m->dim[l], no = m->dim[l + 1];
    bcg_real gain = l < m->nlin - 1 ? c->init_gain : c->init_gain_out;
    if (!(gain > 0)) gain = 1;
    bcg_real *W = m->params + m->off_w[l], *b = m->params + m->off_b[l];
    size_t nw = (size_t)no * (size_t)ni;
    uint32_t stepw = (uint32_t)(2 * l), stepb = (uint32_t)(2 * l + 1);
    if (c->init == BCG_INIT_ORTHOGONAL) {
      int p = no > ni ? no : ni, k = no > ni ? ni : no;
      double *q = malloc(nw * sizeof(double));
      bcg_real *z = malloc(nw * sizeof(bcg_real));
      if (q && z) {
        bcg_rng_fill_normal(z, (int)nw, seed, BCG_RNG_INIT, stream, stepw);
        for (size_t i = 0; i < nw; i++) q[i] = (double)z[i];
        orthonormalize(q, p, k);
        for (int i = 0; i < no; i++)
          for (int j = 0; j < ni; j++)
            W[(size_t)i * ni + j] =
                (bcg_real)(gain * (no >= ni ? q[(size_t)j * p + i] : q[(size_t)i * p + j]));
      }
      free(q);
      free(z);
      memset(b, 0, (size_t)no * sizeof(bcg_real));
    } else {
      bcg_real k = gain / (bcg_real)sqrt((double)ni);
      bcg_rng_fill_uniform(W, (int)nw, seed, BCG_RNG_INIT, stream, stepw);
      for (size_t i = 0; i < nw; i++) W[i] = (2 * W[i] - 1) * k;
      bcg_rng_fill_uniform(b, no, seed, BCG_RNG_INIT, stream, stepb);
      for (int i = 0; i < no; i++) b[i] = (2 * b[i] - 1) * k;
    }
    if (has_ln(m, l))
      for (int i = 0; i < no; i++) {
        m->params[m->off_lng[l] + i] = 1;
        m->params[m->off_lnb[l] + i] = 0;
      }
  }
  for (int i = 0; i < c->extra; i++) m->params[m->nnet + i] = c->extra_init;
}

/* the tape's layout: core/nn_tape.h (with the two scratch rows) */
static size_t shape_id(const bcg_mlp *m) {
  size_t h = 1469598103934665603ull;
  for (int l = 0; l <= m->nlin; l++) h = (h ^ (size_t)m->dim[l]) * 1099511628211ull;
  h = (h ^ (size_t)m->nlin) * 1099511628211ull;
  h = (h ^ (size_t)m->cfg.layernorm) * 1099511628211ull;
  return h;
}

size_t bcg_mlp_tape_reals(const bcg_mlp *m, int max_batch) {
  bcg_nn_tape_ptrs p;
  return bcg_nn_tape_layout(m, max_batch, NULL, &p, 1);
}

int bcg_mlp_tape_init(bcg_mlp_tape *t, const bcg_mlp *m, int max_batch, bcg_real *mem) {
  if (!t || !m || max_batch <= 0) return BCG_NN_EINVAL;
  memset(t, 0, sizeof *t);
  if (!mem) {
    mem = alloc_reals(bcg_mlp_tape_reals(m, max_batch));
    if (!mem) return BCG_NN_ENOMEM;
    t->owned = 1;
  }
  t->mem = mem;
  t->max_batch = max_batch;
  t->shape_id = shape_id(m);
  return BCG_NN_OK;
}

void bcg_mlp_tape_free(bcg_mlp_tape *t) {
  if (!t) return;
  if (t->dev) bcg_cuda_nn_tape_free(t);
  if (t->owned) free(t->mem);
  memset(t, 0, sizeof *t);
}

static int check_tape(const bcg_mlp *m, const bcg_mlp_tape *t, int batch) {
  if (!t->mem || t->shape_id != shape_id(m)) return BCG_NN_EINVAL;
  if (batch > t->max_batch) return BCG_NN_EBATCH;
  return BCG_NN_OK;
}

const bcg_real *bcg_mlp_tape_output(const bcg_mlp *m, const bcg_mlp_tape *t) {
  if (!t) t = &m->tape;
  bcg_nn_tape_ptrs p;
  bcg_nn_tape_layout(m, t->max_batch, t->mem, &p, 1);
  return p.out[m->nlin - 1];
}

/* ---- the CUDA switch (bcg_nn_set_cuda) ---- */
#define NN_CUDA_MIN_BATCH 64
static int nn_cuda_on, nn_cuda_min = NN_CUDA_MIN_BATCH;

int bcg_nn_set_cuda(int on, int min_batch, char *err, size_t errlen) {
  if (!on) {
    nn_cuda_on = 0;
    return 0;
  }
  if (bcg_cuda_nn_init(err, errlen)) return -1;
  nn_cuda_min = min_batch > 0 ? min_batch : NN_CUDA_MIN_BATCH;
  nn_cuda_on = 1;
  return 0;
}

int bcg_nn_cuda_enabled(int *min_batch) {
  if (min_batch) *min_batch = nn_cuda_min;
  return nn_cuda_on;
}

const char *bcg_nn_cuda_error(void) { return bcg_cuda_nn_error(); }
void bcg_nn_cuda_profile(int on) { bcg_cuda_nn_profile(on); }
void bcg_nn_cuda_profile_read(bcg_nn_cuda_split *s) { bcg_cuda_nn_profile_read(s); }

/* ---- process-wide time in the networks (bcg_nn_time) ---- */
static uint64_t nn_ns[2]; /* forward, backward */
static uint64_t nn_ns_beside; /* both, on threads marked with bcg_nn_time_beside */
static _Thread_local int nn_beside;

void bcg_nn_time(double *fwd_s, double *bwd_s) {
  if (fwd_s) *fwd_s = bcg_clock_s(&nn_ns[0]);
  if (bwd_s) *bwd_s = bcg_clock_s(&nn_ns[1]);
}

void bcg_nn_time_beside(int on) { nn_beside = on != 0; }
double bcg_nn_time_overlapped(void) { return bcg_clock_s(&nn_ns_beside); }

/* a call's time into clock k (0 forward, 1 backward), or into the beside
 * clock on a marked thread; inside a parallel region on its master only */
static void nn_clock(int k, uint64_t t0) {
  if (omp_get_thread_num() == 0) bcg_clock_add(nn_beside ? &nn_ns_beside : &nn_ns[k], t0);
}

/* a forward's input: the host array x, or rows of r (row0 + idx[i], idx NULL: row0 + i) */
typedef struct fwd_src {
  const bcg_real *x;
  const bcg_nn_rows *r;
  long row0;
  const int *idx;
} fwd_src;

static int mlp_forward(bcg_mlp *m, bcg_mlp_tape *t, const fwd_src *src, int batch, bcg_real *y);
static int mlp_backward(bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *dy, bcg_real *grad, bcg_real *dx);

int bcg_mlp_forward(bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *x, int batch, bcg_real *y) {
  uint64_t t0 = bcg_mono_ns();
  fwd_src src = {x, NULL, 0, NULL};
  int rc = x ? mlp_forward(m, t, &src, batch, y) : BCG_NN_EINVAL;
  nn_clock(0, t0);
  return rc;
}

int bcg_mlp_forward_rows(bcg_mlp *m, bcg_mlp_tape *t, const bcg_nn_rows *r, long row0, const int *idx, int batch,
                         bcg_real *y) {
  if (!m || !r || !r->host || r->width != m->dim[0] || batch < 0 || row0 < 0) return BCG_NN_EINVAL;
  if (idx) {
    for (int i = 0; i < batch; i++)
      if (idx[i] < 0 || row0 + idx[i] >= r->nrows) return BCG_NN_EINVAL;
  } else if (row0 + batch > r->nrows)
    return BCG_NN_EINVAL;
  uint64_t t0 = bcg_mono_ns();
  fwd_src src = {NULL, r, row0, idx};
  int rc = mlp_forward(m, t, &src, batch, y);
  nn_clock(0, t0);
  return rc;
}

int bcg_nn_rows_init(bcg_nn_rows *r, const bcg_real *host, long nrows, int width) {
  if (!r || !host || nrows < 0 || width <= 0) return BCG_NN_EINVAL;
  memset(r, 0, sizeof *r);
  r->host = host;
  r->nrows = nrows;
  r->width = width;
  return BCG_NN_OK;
}

int bcg_nn_rows_put(bcg_nn_rows *r, long row0, long n) {
  if (!r || !r->host || row0 < 0 || n < 0 || row0 + n > r->nrows) return BCG_NN_EINVAL;
  if (!nn_cuda_on) { /* a mirror from an earlier time on would now be stale */
    bcg_nn_rows_free(r);
    return BCG_NN_OK;
  }
  if (n == 0) return BCG_NN_OK;
  return bcg_cuda_nn_rows_put(r, row0, n) ? BCG_NN_EDEVICE : BCG_NN_OK;
}

void bcg_nn_rows_free(bcg_nn_rows *r) {
  if (r && r->dev) bcg_cuda_nn_rows_free(r);
}

int bcg_nn_pin(const void *p, size_t bytes) {
  if (!p || !bytes) return BCG_NN_EINVAL;
  if (nn_cuda_on) bcg_cuda_nn_pin(p, bytes); /* not pinned: copies are staged */
  return BCG_NN_OK;
}

void bcg_nn_unpin(const void *p) {
  if (p) bcg_cuda_nn_unpin(p);
}

/* x[i] = the source's row i (the caller's array, or gathered from the rows) */
static const bcg_real *src_rows(const fwd_src *src, int batch, int w, bcg_real *buf) {
  if (src->x) return src->x;
  const bcg_real *h = src->r->host;
#pragma omp parallel for schedule(static) if (batch >= 256)
  for (int i = 0; i < batch; i++) {
    long row = src->row0 + (src->idx ? src->idx[i] : i);
    memcpy(buf + (size_t)i * w, h + (size_t)row * w, (size_t)w * sizeof(bcg_real));
  }
  return buf;
}

int bcg_mlp_backward(bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *dy, bcg_real *grad, bcg_real *dx) {
  uint64_t t0 = bcg_mono_ns();
  int rc = mlp_backward(m, t, dy, grad, dx);
  nn_clock(1, t0);
  return rc;
}

/* ---- activations over a whole layer -------------------------------------------
 *
 * ELU's expm1 was the largest single cost of the networks after the GEMMs
 * (9% of a demo iteration in glibc's scalar expm1, 10.5 ns per element). On
 * x86-64 with glibc's vector maths library (libmvec, glibc 2.35 and later:
 * BCG_HAVE_MVEC, set by the Makefile when -lmvec links) the layer goes
 * through libmvec's vector expm1 instead, 8, 4 or 2 lanes by the instruction
 * set (AVX-512, AVX2, SSE2; 0.8, 1.6 and 3 ns per element), with libmvec's
 * accuracy (within 1 ulp of the scalar function on the ELU's inputs). Every
 * element goes through the same vector function, the last partial vector
 * padded, so an element's value never depends on its position in the batch
 * or on the batch size; the lanes are independent, so nor on its neighbours. */
#if defined(BCG_HAVE_MVEC) && defined(__x86_64__)
#include <immintrin.h>
#ifdef BCG_REAL_FLOAT
#define MV_W512 16
#define MV_W256 8
#define MV_W128 4
#define MV_E _ZGVeN16v_expm1f
#define MV_D _ZGVdN8v_expm1f
#define MV_B _ZGVbN4v_expm1f
#define MV_T512 __m512
#define MV_T256 __m256
#define MV_T128 __m128
#define MV_LD512 _mm512_loadu_ps
#define MV_ST512 _mm512_storeu_ps
#define MV_LD256 _mm256_loadu_ps
#define MV_ST256 _mm256_storeu_ps
#define MV_LD128 _mm_loadu_ps
#define MV_ST128 _mm_storeu_ps
/* x > 0 ? x : e, lane by lane (an ordered compare: NaN takes e = expm1(NaN) = NaN, as bcg_act_f) */
#define MV_SEL512(x, e) _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ), e, x)
#define MV_SEL256(x, e) _mm256_blendv_ps(e, x, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ))
#define MV_SEL128(x, e) mv_sel128(x, e, _mm_cmpgt_ps(x, _mm_setzero_ps()))
static inline __m128 mv_sel128(__m128 x, __m128 e, __m128 m) { return _mm_or_ps(_mm_and_ps(m, x), _mm_andnot_ps(m, e)); }
#else
#define MV_W512 8
#define MV_W256 4
#define MV_W128 2
#define MV_E _ZGVeN8v_expm1
#define MV_D _ZGVdN4v_expm1
#define MV_B _ZGVbN2v_expm1
#define MV_T512 __m512d
#define MV_T256 __m256d
#define MV_T128 __m128d
#define MV_LD512 _mm512_loadu_pd
#define MV_ST512 _mm512_storeu_pd
#define MV_LD256 _mm256_loadu_pd
#define MV_ST256 _mm256_storeu_pd
#define MV_LD128 _mm_loadu_pd
#define MV_ST128 _mm_storeu_pd
#define MV_SEL512(x, e) _mm512_mask_blend_pd(_mm512_cmp_pd_mask(x, _mm512_setzero_pd(), _CMP_GT_OQ), e, x)
#define MV_SEL256(x, e) _mm256_blendv_pd(e, x, _mm256_cmp_pd(x, _mm256_setzero_pd(), _CMP_GT_OQ))
#define MV_SEL128(x, e) mv_sel128(x, e, _mm_cmpgt_pd(x, _mm_setzero_pd()))
static inline __m128d mv_sel128(__m128d x, __m128d e, __m128d m) { return _mm_or_pd(_mm_and_pd(m, x), _mm_andnot_pd(m, e)); }
#endif
/* y[i] = x[i] > 0 ? x[i] : expm1(x[i]) for n elements, W lanes at a time */
#define MV_ELU_BODY(W, T, LD, ST, F, SEL)                                                                         \
  {                                                                                                               \
    size_t i = 0;                                                                                                 \
    for (; i + W <= n; i += W) {                                                                                  \
      T v = LD(x + i);                                                                                            \
      ST(y + i, SEL(v, F(v)));                                                                                    \
    }                                                                                                             \
    if (i < n) {                                                                                                  \
      bcg_real pad[W] = {0};                                                                                      \
      memcpy(pad, x + i, (n - i) * sizeof(bcg_real));                                                             \
      T v = LD(pad);                                                                                              \
      ST(pad, SEL(v, F(v)));                                                                                      \
      memcpy(y + i, pad, (n - i) * sizeof(bcg_real));                                                             \
    }                                                                                                             \
  }
/* libmvec's variants (declared with the instruction set their vector types need) */
__attribute__((target("avx512f"))) extern MV_T512 MV_E(MV_T512);
__attribute__((target("avx2"))) extern MV_T256 MV_D(MV_T256);
extern MV_T128 MV_B(MV_T128);
__attribute__((target("avx512f"))) static void elu_mv512(const bcg_real *x, bcg_real *y, size_t n)
    MV_ELU_BODY(MV_W512, MV_T512, MV_LD512, MV_ST512, MV_E, MV_SEL512)
__attribute__((target("avx2"))) static void elu_mv256(const bcg_real *x, bcg_real *y, size_t n)
    MV_ELU_BODY(MV_W256, MV_T256, MV_LD256, MV_ST256, MV_D, MV_SEL256)
static void elu_mv128(const bcg_real *x, bcg_real *y, size_t n)
    MV_ELU_BODY(MV_W128, MV_T128, MV_LD128, MV_ST128, MV_B, MV_SEL128)

static int mv_cpu, mv_limit = 3; /* the CPU's best, and a cap (tests) */
static int mv_isa(void) { /* 3: AVX-512, 2: AVX2, 1: SSE2 */
  if (!mv_cpu) { /* computed once; a race writes the same value */
    __builtin_cpu_init();
    mv_cpu = __builtin_cpu_supports("avx512f") ? 3 : __builtin_cpu_supports("avx2") ? 2 : 1;
  }
  return mv_cpu < mv_limit ? mv_cpu : mv_limit;
}

int bcg_nn_vec_isa(int limit) {
  if (limit > 0) mv_limit = limit;
  return mv_isa();
}

const char *bcg_nn_act_describe(void) {
  static const char *d[] = {"", "ELU: libmvec expm1, 2 lanes (SSE2)", "ELU: libmvec expm1, 4 lanes (AVX2)",
                            "ELU: libmvec expm1, 8 lanes (AVX-512)"};
  return d[mv_isa()];
}
#else
int bcg_nn_vec_isa(int limit) { return 0; }
const char *bcg_nn_act_describe(void) { return "ELU: scalar expm1"; }
#endif

/* y = act(z) over n elements (y may alias z) */
static void act_layer(int act, const bcg_real *x, bcg_real *y, size_t n) {
#if defined(BCG_HAVE_MVEC) && defined(__x86_64__)
  if (act == BCG_ACT_ELU) {
    int isa = mv_isa();
    if (isa == 3) elu_mv512(x, y, n);
    else if (isa == 2) elu_mv256(x, y, n);
    else elu_mv128(x, y, n);
    return;
  }
#endif
  for (size_t i = 0; i < n; i++) y[i] = bcg_act_f(act, x[i]);
}

/* d *= act'(pre) over n elements, from the tape's pre and post (bcg_act_df,
 * one loop per activation so that each vectorises; the same operations) */
static void act_df_layer(int act, const bcg_real *restrict pre, const bcg_real *restrict post, bcg_real *restrict d,
                         size_t n) {
  switch (act) {
  case BCG_ACT_IDENTITY: return;
  case BCG_ACT_ELU:
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
      const bcg_real f = post[i] + (bcg_real)1, one = 1; /* both loaded: a select the vectoriser takes */
      d[i] *= pre[i] > 0 ? one : f;
    }
    return;
  case BCG_ACT_TANH:
#pragma omp simd
    for (size_t i = 0; i < n; i++) d[i] *= (bcg_real)1 - post[i] * post[i];
    return;
  case BCG_ACT_RELU:
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
      const bcg_real one = 1, zero = 0;
      d[i] *= pre[i] > 0 ? one : zero;
    }
    return;
  default:
    for (size_t i = 0; i < n; i++) d[i] *= bcg_act_df(act, pre[i], post[i]);
  }
}

static int mlp_forward(bcg_mlp *m, bcg_mlp_tape *t, const fwd_src *src, int batch, bcg_real *y) {
  if (!m || batch < 0) return BCG_NN_EINVAL;
  if (!t) t = &m->tape;
  int rc = check_tape(m, t, batch);
  if (rc) return rc;
  t->batch = batch;
  t->on_device = 0;
  if (batch == 0) return BCG_NN_OK;
  bcg_nn_tape_ptrs p;
  bcg_nn_tape_layout(m, t->max_batch, t->mem, &p, 1);
  if ((nn_cuda_on && batch >= nn_cuda_min) || is_held(m, NULL)) { /* the GPU: only the output in the host tape */
    bcg_real *out = p.out[m->nlin - 1];
    /* rows with a mirror are gathered on the device; otherwise x is sent (the
     * host tape's x, which a device forward leaves unused, holds gathered rows) */
    int rc_ = src->r && src->r->dev ? bcg_cuda_nn_forward_rows(m, t, src->r, src->row0, src->idx, batch, out)
                                    : bcg_cuda_nn_forward(m, t, src_rows(src, batch, m->dim[0], p.x), batch, out);
    if (rc_) {
      t->batch = 0;
      return BCG_NN_EDEVICE;
    }
    t->on_device = 1;
    if (y) memcpy(y, out, (size_t)batch * (size_t)m->dim[m->nlin] * sizeof(bcg_real));
    return BCG_NN_OK;
  }
  if (src->x) memcpy(p.x, src->x, (size_t)batch * (size_t)m->dim[0] * sizeof(bcg_real));
  else src_rows(src, batch, m->dim[0], p.x);
  const bcg_real *a = p.x;
  for (int l = 0; l < m->nlin; l++) {
    int ni = m->dim[l], no = m->dim[l + 1], act = layer_act(m, l);
    const bcg_real *W = m->params + m->off_w[l], *bias = m->params + m->off_b[l];
    bcg_real *z = p.pre[l];
    for (int s = 0; s < batch; s++) memcpy(z + (size_t)s * no, bias, (size_t)no * sizeof(bcg_real));
    nn_gemm(CblasNoTrans, CblasTrans, batch, no, ni, 1, a, ni, W, ni, 1, z, no);
    int ln = has_ln(m, l) ? (int)m->cfg.layernorm : BCG_LN_NONE;
    const bcg_real *g = ln ? m->params + m->off_lng[l] : NULL;
    const bcg_real *gb = ln ? m->params + m->off_lnb[l] : NULL;
    if (ln == BCG_LN_PRE_ACT)
      for (int s = 0; s < batch; s++) {
        size_t o = (size_t)s * no;
        bcg_layernorm(no, z + o, g, gb, (bcg_real)BCG_LN_EPS, p.xhat[l] + o, p.rstd[l] + s, z + o);
      }
    act_layer(act, z, p.post[l], (size_t)batch * (size_t)no);
    if (ln == BCG_LN_POST_ACT)
      for (int s = 0; s < batch; s++) {
        size_t o = (size_t)s * no;
        bcg_layernorm(no, p.post[l] + o, g, gb, (bcg_real)BCG_LN_EPS, p.xhat[l] + o, p.rstd[l] + s,
                      p.out[l] + o);
      }
    a = p.out[l];
  }
  if (y) memcpy(y, a, (size_t)batch * (size_t)m->dim[m->nlin] * sizeof(bcg_real));
  return BCG_NN_OK;
}

static int mlp_backward(bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *dy, bcg_real *grad, bcg_real *dx) {
  if (!m || !dy) return BCG_NN_EINVAL;
  if (!t) t = &m->tape;
  int batch = t->batch;
  int rc = check_tape(m, t, batch);
  if (rc) return rc;
  if (batch == 0) return BCG_NN_OK;
  if (t->on_device) return bcg_cuda_nn_backward(m, t, dy, grad, dx) ? BCG_NN_EDEVICE : BCG_NN_OK;
  if (is_held(m, NULL)) return BCG_NN_EINVAL; /* a CPU tape recorded before the hold: the host parameters are stale */
  bcg_nn_tape_ptrs p;
  bcg_nn_tape_layout(m, t->max_batch, t->mem, &p, 1);
  bcg_real *d = p.s0, *e = p.s1;
  memcpy(d, dy, (size_t)batch * (size_t)m->dim[m->nlin] * sizeof(bcg_real));
  for (int l = m->nlin - 1; l >= 0; l--) {
    int ni = m->dim[l], no = m->dim[l + 1], act = layer_act(m, l);
    int ln = has_ln(m, l) ? (int)m->cfg.layernorm : BCG_LN_NONE;
    const bcg_real *g = ln ? m->params + m->off_lng[l] : NULL;
    bcg_real *dg = ln && grad ? grad + m->off_lng[l] : NULL;
    bcg_real *dgb = ln && grad ? grad + m->off_lnb[l] : NULL;
    /* row by row as before: the LayerNorm parameter sums accumulate in row order */
    if (ln == BCG_LN_POST_ACT)
      for (int s = 0; s < batch; s++) {
        size_t o = (size_t)s * no;
        bcg_layernorm_vjp(no, p.xhat[l] + o, p.rstd[l][s], g, d + o, d + o, dg, dgb);
      }
    act_df_layer(act, p.pre[l], p.post[l], d, (size_t)batch * (size_t)no);
    if (ln == BCG_LN_PRE_ACT)
      for (int s = 0; s < batch; s++) {
        size_t o = (size_t)s * no;
        bcg_layernorm_vjp(no, p.xhat[l] + o, p.rstd[l][s], g, d + o, d + o, dg, dgb);
      }
    /* d = dL/dz [batch][no]; a = layer input [batch][ni] */
    const bcg_real *a = l == 0 ? p.x : p.out[l - 1];
    if (grad) {
      nn_gemm(CblasTrans, CblasNoTrans, no, ni, batch, 1, d, no, a, ni, 1, grad + m->off_w[l], ni);
      bcg_real *restrict db = grad + m->off_b[l];
      for (int s = 0; s < batch; s++) {
        const bcg_real *restrict ds = d + (size_t)s * no;
#pragma omp simd /* each db[i] still sums its rows in order */
        for (int i = 0; i < no; i++) db[i] += ds[i];
      }
    }
    bcg_real *da = l == 0 ? dx : e;
    if (da) {
      nn_gemm(CblasNoTrans, CblasNoTrans, batch, ni, no, 1, d, no, m->params + m->off_w[l], ni, 0, da, ni);
    }
    bcg_real *tmp = d;
    d = e;
    e = tmp;
  }
  return BCG_NN_OK;
}

/* ---- optimisation ---------------------------------------------------------- */

int bcg_adam_init(bcg_adam *a, size_t n, bcg_real lr, bcg_real beta1, bcg_real beta2,
                  bcg_real eps) {
  if (!a || !(lr >= 0) || !(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1) || !(eps >= 0))
    return BCG_NN_EINVAL;
  memset(a, 0, sizeof *a);
  a->n = n;
  a->lr = lr;
  a->beta1 = beta1;
  a->beta2 = beta2;
  a->eps = eps;
  a->m = alloc_reals(n);
  a->v = alloc_reals(n);
  if (!a->m || !a->v) {
    bcg_adam_free(a);
    return BCG_NN_ENOMEM;
  }
  return BCG_NN_OK;
}

void bcg_adam_free(bcg_adam *a) {
  if (!a) return;
  free(a->m);
  free(a->v);
  memset(a, 0, sizeof *a);
}

void bcg_adam_reset(bcg_adam *a) {
  memset(a->m, 0, a->n * sizeof(bcg_real));
  memset(a->v, 0, a->n * sizeof(bcg_real));
  a->step = 0;
}

#define BCG_ADAM_PAR_MIN 65536 /* parameters from which an Adam step is split over the threads */

/* a step's count and its bias-corrected coefficients (the host's and the held networks' steps) */
static void adam_coeffs(bcg_adam *a, bcg_real *step_size, bcg_real *isbc2) {
  a->step++;
  double bc1 = 1.0 - pow((double)a->beta1, (double)a->step);
  double bc2 = 1.0 - pow((double)a->beta2, (double)a->step);
  *step_size = (bcg_real)((double)a->lr / bc1);
  *isbc2 = (bcg_real)(1.0 / sqrt(bc2));
}

void bcg_adam_step(bcg_adam *a, bcg_real *params, const bcg_real *grad) {
  bcg_real step_size, isbc2;
  adam_coeffs(a, &step_size, &isbc2);
  bcg_real b1 = a->beta1, b2 = a->beta2, wd = a->weight_decay, eps = a->eps;
  bcg_real *restrict m = a->m, *restrict v = a->v, *restrict p = params;
  const bcg_real *restrict gr = grad;
  size_t n = a->n;
  /* element-wise, so the vector lanes compute what the scalar loop did (no
   * contraction: the build has no FMA), bit for bit */
#define ADAM_ELEM(G) BCG_ADAM_ELEM(G, m[i], v[i], p[i], b1, b2, step_size, isbc2, eps);
  /* element-wise, so splitting over the threads changes no bit either */
  if (wd != 0) {
#pragma omp parallel for simd schedule(static) if (n >= BCG_ADAM_PAR_MIN)
    for (size_t i = 0; i < n; i++) ADAM_ELEM(gr[i] + wd * p[i])
  } else {
#pragma omp parallel for simd schedule(static) if (n >= BCG_ADAM_PAR_MIN)
    for (size_t i = 0; i < n; i++) ADAM_ELEM(gr[i])
  }
#undef ADAM_ELEM
}

/* sum of squares in double, in a fixed order that vectorises: element i
 * goes to lane i mod SUMSQ_LANES, each lane sums its elements in order, and
 * the lanes are combined pairwise in a fixed tree. The same result on every
 * machine and thread count; one running sum (the former loop) was a chain of
 * dependent additions, about 0.17 ms for a 256-256 critic's gradient, which
 * SHAC+BCG clips 192 times per iteration. */
#define SUMSQ_LANES 32
static double sumsq_tree(double *acc) { /* the lanes' fixed tree (acc is overwritten) */
  for (int w = SUMSQ_LANES / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; j++) acc[j] += acc[j + w];
  return acc[0];
}

static double sumsq(const bcg_real *x, size_t n) {
  double acc[SUMSQ_LANES] = {0};
  size_t i = 0;
  for (; i + SUMSQ_LANES <= n; i += SUMSQ_LANES)
    for (int j = 0; j < SUMSQ_LANES; j++) acc[j] += (double)x[i + j] * (double)x[i + j];
  for (int j = 0; i < n; i++, j++) acc[j] += (double)x[i] * (double)x[i];
  return sumsq_tree(acc);
}

bcg_real bcg_vec_norm(const bcg_real *x, size_t n) { return (bcg_real)sqrt(sumsq(x, n)); }

/* the clip of a gradient of norm nrm: 1 and its factor in *c when it is to
 * be scaled (a finite norm above max_norm), else 0 */
static int clip_factor(double nrm, bcg_real max_norm, double *c) {
  if (!(isfinite(nrm) && nrm > (double)max_norm && nrm > 0)) return 0;
  *c = (double)max_norm / nrm;
  return 1;
}

/* g *= c, each element in double and rounded (the device's k_clip_adam too) */
static void scale_grad(bcg_real *g, size_t n, double c) {
  for (size_t i = 0; i < n; i++) g[i] = (bcg_real)((double)g[i] * c);
}

bcg_real bcg_clip_grad_norm(bcg_real *g, size_t n, bcg_real max_norm) {
  double nrm = sqrt(sumsq(g, n)), c;
  if (clip_factor(nrm, max_norm, &c)) scale_grad(g, n, c);
  return (bcg_real)nrm;
}

/* ---- held networks (bcg_mlp_hold) ---- */
static int is_held(const bcg_mlp *m, const bcg_adam **opt) {
  return __atomic_load_n(&nn_nheld, __ATOMIC_RELAXED) > 0 && bcg_cuda_nn_held(m, opt);
}

int bcg_mlp_is_held(const bcg_mlp *m) { return m && m->params && is_held(m, NULL); }

int bcg_mlp_hold(bcg_mlp *m, bcg_adam *opt) {
  if (!m || !m->params || (opt && (opt->n != m->nparams || !opt->m || !opt->v))) return BCG_NN_EINVAL;
  if (is_held(m, NULL)) return BCG_NN_EINVAL;
  if (!nn_cuda_on) return BCG_NN_OK;
  if (bcg_cuda_nn_hold(m, opt)) return BCG_NN_EDEVICE;
  __atomic_add_fetch(&nn_nheld, 1, __ATOMIC_RELAXED);
  return BCG_NN_OK;
}

int bcg_mlp_release(bcg_mlp *m, bcg_adam *opt) {
  const bcg_adam *ho = NULL;
  if (!m || !m->params) return BCG_NN_EINVAL;
  if (!is_held(m, &ho)) return BCG_NN_OK;
  if (ho != opt) return BCG_NN_EINVAL;
  int rc = bcg_cuda_nn_release(m, opt); /* frees the device state even when a copy failed */
  __atomic_sub_fetch(&nn_nheld, 1, __ATOMIC_RELAXED);
  return rc ? BCG_NN_EDEVICE : BCG_NN_OK;
}

/* a held network's gradient norm: the device's 32 lanes (the host's extra
 * gradient sent to the device's tail first), the host's tree */
static int held_norm(const bcg_mlp *m, double *nrm) {
  double acc[SUMSQ_LANES];
  if (bcg_cuda_nn_grad_lanes(m, acc)) return BCG_NN_EDEVICE;
  *nrm = sqrt(sumsq_tree(acc));
  return BCG_NN_OK;
}

/* a held network's scaling (clip) and Adam step (adam) on the device, with
 * bcg_adam_step's scalars (its extra parameters and gradient come back to
 * the host with it) */
static int held_step(bcg_mlp *m, bcg_adam *opt, int clip, double c, int adam) {
  bcg_real ss = 0, isbc2 = 0;
  if (adam) adam_coeffs(opt, &ss, &isbc2);
  if ((clip || adam) && bcg_cuda_nn_clip_adam(m, opt, clip, c, adam, ss, isbc2)) return BCG_NN_EDEVICE;
  return BCG_NN_OK;
}

/* 1 if m is held with opt (*rc BCG_NN_OK), 0 if it is not held, -1 with *rc
 * set if it is held with another optimiser */
static int held_with(const bcg_mlp *m, const bcg_adam *opt, int *rc) {
  const bcg_adam *ho = NULL;
  *rc = BCG_NN_OK;
  if (!is_held(m, &ho)) return 0;
  if (ho != opt) {
    *rc = BCG_NN_EINVAL;
    return -1;
  }
  return 1;
}

int bcg_mlp_clip_adam(bcg_mlp *m, bcg_adam *opt, bcg_real max_norm, bcg_real *norm) {
  int rc;
  if (!m || !opt || opt->n != m->nparams) return BCG_NN_EINVAL;
  int h = held_with(m, opt, &rc);
  if (h < 0) return rc;
  if (!h) {
    bcg_real nr = bcg_clip_grad_norm(m->grad, m->nparams, max_norm);
    if (norm) *norm = nr;
    if (isfinite((double)nr)) bcg_adam_step(opt, m->params, m->grad);
    return BCG_NN_OK;
  }
  /* bcg_clip_grad_norm's and bcg_adam_step's decisions and scalars, the device's elements */
  double nrm;
  if ((rc = held_norm(m, &nrm))) return rc;
  bcg_real nr = (bcg_real)nrm;
  if (norm) *norm = nr;
  double c = 1;
  int clip = clip_factor(nrm, max_norm, &c);
  return held_step(m, opt, clip, c, isfinite((double)nr));
}

int bcg_mlp_grad_norm(bcg_mlp *m, bcg_real *norm) {
  if (!m || !m->grad || !norm) return BCG_NN_EINVAL;
  if (!is_held(m, NULL)) {
    *norm = bcg_vec_norm(m->grad, m->nparams);
    return BCG_NN_OK;
  }
  double nrm;
  int rc = held_norm(m, &nrm);
  if (!rc) *norm = (bcg_real)nrm;
  return rc;
}

int bcg_mlp_scale_adam(bcg_mlp *m, bcg_adam *opt, double c) {
  int rc;
  if (!m || !opt || opt->n != m->nparams || !isfinite(c)) return BCG_NN_EINVAL;
  int h = held_with(m, opt, &rc);
  if (h < 0) return rc;
  if (!h) {
    if (c != 1) scale_grad(m->grad, m->nparams, c);
    bcg_adam_step(opt, m->params, m->grad);
    return BCG_NN_OK;
  }
  return held_step(m, opt, c != 1, c, 1);
}

int bcg_mlp_grad_reduce(bcg_mlp *m, int (*sum)(bcg_real *x, size_t n), double scale) {
  if (!m || !m->grad || !sum || !isfinite(scale)) return BCG_NN_EINVAL;
  const int h = is_held(m, NULL);
  if (h && bcg_cuda_nn_grad_copy(m, m->grad, 1)) return BCG_NN_EDEVICE;
  if (sum(m->grad, m->nparams)) return BCG_NN_EDEVICE;
  if (scale != 1) scale_grad(m->grad, m->nparams, scale);
  if (h && bcg_cuda_nn_grad_copy(m, m->grad, 0)) return BCG_NN_EDEVICE;
  return BCG_NN_OK;
}

void bcg_vec_polyak(bcg_real *dst, const bcg_real *src, size_t n, bcg_real alpha) {
  for (size_t i = 0; i < n; i++) dst[i] = alpha * dst[i] + (1 - alpha) * src[i];
}

bcg_real bcg_lr_linear(bcg_real lr0, bcg_real lr_end, int64_t it, int64_t iters) {
  if (it <= 0) return lr0;
  if (it >= iters) return lr_end;
  return (bcg_real)((double)lr0 + ((double)lr_end - (double)lr0) * (double)it / (double)iters);
}

bcg_real bcg_lr_adaptive_kl(bcg_real lr, bcg_real kl, bcg_real target, bcg_real lr_min,
                            bcg_real lr_max) {
  if (kl > 2 * target)
    lr = lr / (bcg_real)1.5;
  else if (kl < target / 2 && kl > 0)
    lr = lr * (bcg_real)1.5;
  if (lr < lr_min) lr = lr_min;
  if (lr > lr_max) lr = lr_max;
  return lr;
}

bcg_lr_schedule bcg_lr_constant_schedule(bcg_real lr) {
  bcg_lr_schedule s;
  memset(&s, 0, sizeof s);
  s.kind = BCG_LR_CONSTANT;
  s.lr0 = s.lr_end = s.lr = lr;
  return s;
}

bcg_lr_schedule bcg_lr_linear_schedule(bcg_real lr0, bcg_real lr_end, int64_t iters) {
  bcg_lr_schedule s = bcg_lr_constant_schedule(lr0);
  s.kind = BCG_LR_LINEAR;
  s.lr_end = lr_end;
  s.iters = iters;
  return s;
}

bcg_lr_schedule bcg_lr_kl_schedule(bcg_real lr0, bcg_real kl_target) {
  bcg_lr_schedule s = bcg_lr_constant_schedule(lr0);
  s.kind = BCG_LR_ADAPTIVE_KL;
  s.kl_target = kl_target;
  s.lr_min = (bcg_real)1e-5;
  s.lr_max = (bcg_real)1e-2;
  return s;
}

bcg_real bcg_lr_at(const bcg_lr_schedule *s, int64_t it) {
  switch (s->kind) {
  case BCG_LR_LINEAR: return bcg_lr_linear(s->lr0, s->lr_end, it, s->iters);
  case BCG_LR_ADAPTIVE_KL: return s->lr;
  default: return s->lr0;
  }
}

bcg_real bcg_lr_observe_kl(bcg_lr_schedule *s, bcg_real kl) {
  if (s->kind == BCG_LR_ADAPTIVE_KL)
    s->lr = bcg_lr_adaptive_kl(s->lr, kl, s->kl_target, s->lr_min, s->lr_max);
  return s->lr;
}

/* ---- normaliser ------------------------------------------------------------- */

int bcg_normalizer_init(bcg_normalizer *nz, int dim, bcg_real clip, double count_init) {
  if (!nz || dim <= 0 || !(count_init >= 0)) return BCG_NN_EINVAL;
  memset(nz, 0, sizeof *nz);
  nz->dim = dim;
  nz->mean = alloc_reals((size_t)dim);
  nz->var = alloc_reals((size_t)dim);
  if (!nz->mean || !nz->var) {
    bcg_normalizer_free(nz);
    return BCG_NN_ENOMEM;
  }
  for (int i = 0; i < dim; i++) nz->var[i] = 1;
  nz->count = count_init;
  nz->clip = clip;
  nz->var_eps = (bcg_real)1e-5;
  return BCG_NN_OK;
}

void bcg_normalizer_free(bcg_normalizer *nz) {
  if (!nz) return;
  free(nz->mean);
  free(nz->var);
  memset(nz, 0, sizeof *nz);
}

/* one dimension's batch statistics merged in */
static void norm_merge(bcg_normalizer *nz, int i, double bm, double bv, double na, double nb, double tot) {
  double ma = (double)nz->mean[i], delta = bm - ma;
  double m2 = (double)nz->var[i] * na + bv * nb + delta * delta * na * nb / tot;
  nz->mean[i] = (bcg_real)(ma + delta * nb / tot);
  nz->var[i] = (bcg_real)(m2 / tot);
}

int bcg_normalizer_update(bcg_normalizer *nz, const bcg_real *x, int batch) {
  if (!nz || (!x && batch > 0) || batch < 0) return BCG_NN_EINVAL;
  if (batch == 0) return BCG_NN_OK;
  int d = nz->dim;
  double nb = (double)batch, na = nz->count, tot = na + nb;
  /* each dimension by one thread, in the same order: the same sums for any thread count */
#pragma omp parallel for schedule(static) if ((size_t)batch * d >= BCG_NN_PAR_MIN)
  for (int i = 0; i < d; i++) {
    double bm = 0, bv = 0; /* two passes over the batch */
    for (int s = 0; s < batch; s++) bm += (double)x[(size_t)s * d + i];
    bm /= nb;
    for (int s = 0; s < batch; s++) {
      double c = (double)x[(size_t)s * d + i] - bm;
      bv += c * c;
    }
    bv /= nb;
    norm_merge(nz, i, bm, bv, na, nb, tot);
  }
  nz->count = tot;
  return BCG_NN_OK;
}

int bcg_normalizer_update_dist(bcg_normalizer *nz, const bcg_real *x, int batch, int (*sum)(double *x, size_t n)) {
  if (!sum) return bcg_normalizer_update(nz, x, batch);
  if (!nz || (!x && batch > 0) || batch < 0) return BCG_NN_EINVAL;
  int d = nz->dim;
  double *acc = calloc((size_t)d + 1, sizeof *acc); /* the sums of one pass, then the rows */
  if (!acc) return BCG_NN_ENOMEM;
  /* the two passes of bcg_normalizer_update, each summed over the ranks */
#pragma omp parallel for schedule(static) if ((size_t)batch * d >= BCG_NN_PAR_MIN)
  for (int i = 0; i < d; i++) {
    double bm = 0;
    for (int s = 0; s < batch; s++) bm += (double)x[(size_t)s * d + i];
    acc[i] = bm;
  }
  acc[d] = batch;
  if (sum(acc, (size_t)d + 1)) goto fail;
  const double nb = acc[d], na = nz->count, tot = na + nb;
  if (nb == 0) {
    free(acc);
    return BCG_NN_OK;
  }
  double *bm = malloc((size_t)d * sizeof *bm);
  if (!bm) {
    free(acc);
    return BCG_NN_ENOMEM;
  }
#pragma omp parallel for schedule(static) if ((size_t)batch * d >= BCG_NN_PAR_MIN)
  for (int i = 0; i < d; i++) {
    bm[i] = acc[i] / nb;
    double bv = 0;
    for (int s = 0; s < batch; s++) {
      double c = (double)x[(size_t)s * d + i] - bm[i];
      bv += c * c;
    }
    acc[i] = bv;
  }
  if (sum(acc, (size_t)d)) {
    free(bm);
    goto fail;
  }
  for (int i = 0; i < d; i++) norm_merge(nz, i, bm[i], acc[i] / nb, na, nb, tot);
  nz->count = tot;
  free(bm);
  free(acc);
  return BCG_NN_OK;
fail:
  free(acc);
  return BCG_NN_EDEVICE;
}

void bcg_normalizer_apply(const bcg_normalizer *nz, const bcg_real *x, int batch, bcg_real *y) {
#pragma omp parallel for schedule(static) if ((size_t)batch * nz->dim >= BCG_NN_PAR_MIN)
  for (int s = 0; s < batch; s++) {
    size_t o = (size_t)s * nz->dim;
    bcg_norm_apply(nz->dim, nz->mean, nz->var, nz->var_eps, nz->clip, x + o, y + o);
  }
}

void bcg_normalizer_vjp(const bcg_normalizer *nz, const bcg_real *x, const bcg_real *dy, int batch,
                        bcg_real *dx) {
#pragma omp parallel for schedule(static) if ((size_t)batch * nz->dim >= BCG_NN_PAR_MIN)
  for (int s = 0; s < batch; s++) {
    size_t o = (size_t)s * nz->dim;
    bcg_norm_apply_vjp(nz->dim, nz->mean, nz->var, nz->var_eps, nz->clip, x + o, dy + o, dx + o);
  }
}

/* ---- batched Gaussian --------------------------------------------------------- */

void bcg_gauss_sample_batch(int batch, int n, const bcg_real *mu, const bcg_real *ls,
                            const bcg_real *eps, bcg_real *a) {
#pragma omp parallel for schedule(static) if ((size_t)batch * n >= BCG_NN_PAR_MIN)
  for (int s = 0; s < batch; s++) {
    size_t o = (size_t)s * n;
    bcg_gauss_sample(n, mu + o, ls, eps + o, a + o);
  }
}

void bcg_gauss_sample_vjp_batch(int batch, int n, const bcg_real *ls, const bcg_real *eps,
                                const bcg_real *da, bcg_real *dmu, bcg_real *dls) {
  for (int s = 0; s < batch; s++) {
    size_t o = (size_t)s * n;
    bcg_gauss_sample_vjp(n, ls, eps + o, da + o, dmu ? dmu + o : NULL, dls);
  }
}

void bcg_gauss_logprob_batch(int batch, int n, const bcg_real *mu, const bcg_real *ls,
                             const bcg_real *a, bcg_real *lp) {
#pragma omp parallel for schedule(static) if ((size_t)batch * n >= BCG_NN_PAR_MIN)
  for (int s = 0; s < batch; s++) {
    size_t o = (size_t)s * n;
    lp[s] = bcg_gauss_logprob(n, mu + o, ls, a + o);
  }
}

/* exp(scale * ls) per dimension into buf when n fits, else NULL (scale -1 or
 * 2: the same values as the per-row functions' exp(-ls[i]) and exp(2 * ls[i])) */
#define GAUSS_PRE_MAX 256
static const bcg_real *gauss_pre(int n, const bcg_real *ls, bcg_real scale, bcg_real *buf) {
  if (n > GAUSS_PRE_MAX) return NULL;
  for (int i = 0; i < n; i++) buf[i] = bcg_nn_exp(scale * ls[i]);
  return buf;
}

/* Row blocks of the batched reductions below: one thread sums a block in row
 * order, then the blocks' sums are added in block order. The result is
 * the same for every thread count, and up to GAUSS_BLOCK rows it is the
 * plain row loop's, bit for bit. */
#define GAUSS_BLOCK 1024

/* rows [s0, s1) of bcg_gauss_logprob_vjp_batch with exp(-ls) in isd; dls
 * (may be NULL) accumulates */
static void lp_vjp_rows(int s0, int s1, int n, const bcg_real *mu, const bcg_real *a, const bcg_real *dlp,
                        const bcg_real *isd, bcg_real *da, bcg_real *dmu, bcg_real *dls) {
  for (int s = s0; s < s1; s++) {
    size_t o = (size_t)s * n;
    const bcg_real g = dlp[s];
    for (int i = 0; i < n; i++) { /* bcg_gauss_logprob_vjp's operations, exp(-ls[i]) from isd */
      bcg_real is = isd[i];
      bcg_real z = (a[o + i] - mu[o + i]) * is;
      bcg_real t = g * z * is;
      if (da) da[o + i] -= t;
      if (dmu) dmu[o + i] += t;
      if (dls) dls[i] += g * (z * z - (bcg_real)1);
    }
  }
}

void bcg_gauss_logprob_vjp_batch(int batch, int n, const bcg_real *mu, const bcg_real *ls,
                                 const bcg_real *a, const bcg_real *dlp, bcg_real *da,
                                 bcg_real *dmu, bcg_real *dls) {
  bcg_real buf[GAUSS_PRE_MAX];
  const bcg_real *isd = gauss_pre(n, ls, (bcg_real)-1, buf);
  if (!isd) {
    for (int s = 0; s < batch; s++) {
      size_t o = (size_t)s * n;
      bcg_gauss_logprob_vjp(n, mu + o, ls, a + o, dlp[s], da ? da + o : NULL, dmu ? dmu + o : NULL, dls);
    }
    return;
  }
  const int nb = (batch + GAUSS_BLOCK - 1) / GAUSS_BLOCK, par = (size_t)batch * n >= BCG_NN_PAR_MIN;
  /* block 0 adds into dls itself, block b > 0 into its own zeroed part[b - 1];
   * without memory for the parts, one block after the other into p, each
   * added to dls as it ends: the same sums in the same order */
  bcg_real *part = dls && nb > 1 ? calloc((size_t)(nb - 1) * n, sizeof(bcg_real)) : NULL;
  const int serial = dls && nb > 1 && !part;
#pragma omp parallel for schedule(static) if (par && nb > 1 && !serial)
  for (int b = 0; b < nb; b++) {
    int s1 = (b + 1) * GAUSS_BLOCK < batch ? (b + 1) * GAUSS_BLOCK : batch;
    bcg_real p[GAUSS_PRE_MAX];
    bcg_real *acc = !dls ? NULL : b == 0 ? dls : serial ? p : part + (size_t)(b - 1) * n;
    if (acc == p)
      for (int i = 0; i < n; i++) p[i] = 0;
    lp_vjp_rows(b * GAUSS_BLOCK, s1, n, mu, a, dlp, isd, da, dmu, acc);
    if (acc == p)
      for (int i = 0; i < n; i++) dls[i] += p[i];
  }
  if (part) {
    for (int b = 1; b < nb; b++)
      for (int i = 0; i < n; i++) dls[i] += part[(size_t)(b - 1) * n + i];
    free(part);
  }
}

/* rows [s0, s1) of bcg_gauss_kl_sum added to sum, in row order */
static double kl_rows(int s0, int s1, int n, const bcg_real *mu0, const int *rows0, const bcg_real *ls0,
                      const bcg_real *mu1, const bcg_real *ls1, const bcg_real *v0, const bcg_real *v1, double sum) {
  for (int s = s0; s < s1; s++) {
    const bcg_real *m0 = mu0 + (size_t)(rows0 ? rows0[s] : s) * n, *m1 = mu1 + (size_t)s * n;
    if (!v0 || !v1) {
      sum += (double)bcg_gauss_kl(n, m0, ls0, m1, ls1);
      continue;
    }
    bcg_real kl = 0;
    for (int i = 0; i < n; i++) { /* bcg_gauss_kl's operations, the variances from v0, v1 */
      bcg_real d = m0[i] - m1[i];
      kl += ls1[i] - ls0[i] + (v0[i] + d * d) / ((bcg_real)2 * v1[i]) - (bcg_real)0.5;
    }
    sum += (double)kl;
  }
  return sum;
}

double bcg_gauss_kl_sum(int batch, int n, const bcg_real *mu0, const int *rows0, const bcg_real *ls0,
                        const bcg_real *mu1, const bcg_real *ls1) {
  bcg_real b0[GAUSS_PRE_MAX], b1[GAUSS_PRE_MAX];
  const bcg_real *v0 = gauss_pre(n, ls0, (bcg_real)2, b0), *v1 = gauss_pre(n, ls1, (bcg_real)2, b1);
  const int nb = (batch + GAUSS_BLOCK - 1) / GAUSS_BLOCK;
  if (nb <= 1) return kl_rows(0, batch, n, mu0, rows0, ls0, mu1, ls1, v0, v1, 0.0);
  double *part = malloc((size_t)nb * sizeof(double)), sum = 0;
#pragma omp parallel for schedule(static) if (part && (size_t)batch * n >= BCG_NN_PAR_MIN)
  for (int b = 0; b < nb; b++) {
    int s1 = (b + 1) * GAUSS_BLOCK < batch ? (b + 1) * GAUSS_BLOCK : batch;
    double v = kl_rows(b * GAUSS_BLOCK, s1, n, mu0, rows0, ls0, mu1, ls1, v0, v1, 0.0);
    if (part) part[b] = v;
    else sum += v; /* no memory for the parts: one thread, the same order */
  }
  if (part) {
    for (int b = 0; b < nb; b++) sum += part[b];
    free(part);
  }
  return sum;
}
