/* core/cuda/nn_cuda.cu - bcg_mlp forward / backward on a CUDA device (core/nn_cuda.h).
 *
 * The device mirror of core/nn.c's bcg_mlp_forward / bcg_mlp_backward, step
 * for step: the same GEMMs (cuBLAS, column-major calls that are exactly the
 * row-major OpenBLAS calls of nn.c), the same per-row LayerNorm and its VJP
 * (bcg/nn.h's BCG_HD bcg_layernorm / bcg_layernorm_vjp, one thread per row),
 * the same activations (bcg_act_f / bcg_act_df, one thread per element).
 * Only the batch sums of the bias and LayerNorm gradients are ordered
 * differently: rows are summed in chunks of CHUNK rows, then the chunk sums in
 * order (a batch of at most CHUNK rows is summed exactly as nn.c does).
 *
 * Device memory: process-wide parameter, gradient, scratch and partial-sum
 * buffers (grown on demand; parameters and gradients are copied in on every
 * call, so the host arrays stay authoritative), and per host tape a device
 * tape (t->dev) with what the backward reads: x, and per layer pre, post and
 * with LayerNorm xhat, rstd (POST_ACT: the LN output too), laid out as nn.c's
 * host tape for the batch capacity.
 *
 * Copies are plain cudaMemcpy (legacy default stream); kernels and cuBLAS run
 * on the blocking stream G.st, which the legacy stream orders against (this
 * also keeps the file within bench/emu's stub runtime). Every call ends
 * synchronised, so host outputs are ready on return. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/nn.h"
#include "clock.h"
#include "nn_cuda.h"
#include "nn_tape.h"

#ifdef BCG_REAL_FLOAT
#define GEMM cublasSgemm
#else
#define GEMM cublasDgemm
#endif

#define NT 128 /* threads per block */
#ifndef BCG_NN_CUDA_CHUNK
#define BCG_NN_CUDA_CHUNK 64 /* rows per partial sum of the batch reductions */
#endif
#define CHUNK BCG_NN_CUDA_CHUNK

static inline int nblk(long n) { return (int)((n + NT - 1) / NT); }
#ifdef EMU_LAUNCH /* bench/emu: the host stand-in runs every thread as a loop */
#define LAUNCH(k, n, ...) EMU_LAUNCH(nblk(n), NT, k, __VA_ARGS__)
#else
#define LAUNCH(k, n, ...) k<<<nblk(n), NT, 0, G.st>>>(__VA_ARGS__)
#endif

/* ---- kernels ------------------------------------------------------------------------ */

__device__ __forceinline__ long tid(void) { return (long)blockIdx.x * blockDim.x + threadIdx.x; }

/* z[s][i] = bias[i] (the GEMM then adds x W^T with beta = 1, as nn.c) */
__global__ void k_bias(bcg_real *z, const bcg_real *bias, long n, int no) {
  long k = tid();
  if (k < n) z[k] = bias[k % no];
}

__global__ void k_act(int act, const bcg_real *z, bcg_real *y, long n) {
  long k = tid();
  if (k < n) y[k] = bcg_act_f(act, z[k]);
}

__global__ void k_act_df(int act, const bcg_real *pre, const bcg_real *post, bcg_real *d, long n) {
  long k = tid();
  if (k < n) d[k] *= bcg_act_df(act, pre[k], post[k]);
}

/* one row per thread: y = LN(x) (y may alias x) */
__global__ void k_ln(int no, int batch, const bcg_real *x, const bcg_real *g, const bcg_real *b, bcg_real *xhat, bcg_real *rstd, bcg_real *y) {
  long s = tid();
  if (s >= batch) return;
  size_t o = (size_t)s * no;
  bcg_layernorm(no, x + o, g, b, (bcg_real)BCG_LN_EPS, xhat + o, rstd + s, y + o);
}

/* one row per thread: d = VJP of LN at (xhat, rstd), in place (parameter sums: k_colsum*) */
__global__ void k_ln_vjp(int no, int batch, const bcg_real *xhat, const bcg_real *rstd, const bcg_real *g, bcg_real *d) {
  long s = tid();
  if (s >= batch) return;
  size_t o = (size_t)s * no;
  bcg_layernorm_vjp(no, xhat + o, rstd[s], g, d + o, d + o, NULL, NULL);
}

/* out[i] += sum_s d[s][i] (* w[s][i]), rows in order (one chunk: nn.c's order exactly) */
__global__ void k_colsum_direct(bcg_real *out, const bcg_real *d, const bcg_real *w, int batch, int no) {
  long i = tid();
  if (i >= no) return;
  bcg_real acc = out[i];
  for (int s = 0; s < batch; s++) {
    size_t k = (size_t)s * no + i;
    acc += w ? d[k] * w[k] : d[k];
  }
  out[i] = acc;
}

/* part[c][i] = sum over rows [c CHUNK, (c+1) CHUNK) of d[s][i] (* w[s][i]) */
__global__ void k_colsum_part(bcg_real *part, const bcg_real *d, const bcg_real *w, int batch, int no, int nchunk) {
  long k = tid();
  if (k >= (long)nchunk * no) return;
  int c = (int)(k / no), i = (int)(k % no);
  int s1 = (c + 1) * CHUNK < batch ? (c + 1) * CHUNK : batch;
  bcg_real acc = 0;
  for (int s = c * CHUNK; s < s1; s++) {
    size_t j = (size_t)s * no + i;
    acc += w ? d[j] * w[j] : d[j];
  }
  part[k] = acc;
}

__global__ void k_colsum_fin(bcg_real *out, const bcg_real *part, int nchunk, int no) {
  long i = tid();
  if (i >= no) return;
  bcg_real acc = 0;
  for (int c = 0; c < nchunk; c++) acc += part[(size_t)c * no + i];
  out[i] += acc;
}

/* ---- process-wide state ----------------------------------------------------------------- */

static struct {
  pthread_mutex_t mu;
  int ready;
  cudaStream_t st;
  cublasHandle_t h;
  bcg_real *params, *grad, *s0, *s1, *part; /* device */
  size_t cparams, cgrad, cs0, cs1, cpart;     /* their capacities in reals */
  char err[512];
} G = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, ""};

/* ---- the split of the device calls' time (bcg_nn_cuda_profile) --------------------------
 * Off: nothing but a flag test per phase. On: each phase ends with a device-wide
 * synchronisation and its wall time goes to its bucket, so the phases are
 * attributed exactly (the calls get a little slower: no overlap of a phase with
 * the next launch). Read and written under G.mu. */
enum { PH_PARAMS, PH_IN, PH_GEMM, PH_ELEM, PH_LN, PH_SUM, PH_OUT, PH_N };
static struct {
  int on;
  uint64_t t;
  bcg_nn_cuda_split s;
} P;

static void ph_begin(void) {
  if (!P.on) return;
  cudaDeviceSynchronize();
  P.t = bcg_mono_ns();
}

static void ph(int k) {
  if (!P.on) return;
  cudaDeviceSynchronize();
  uint64_t t = bcg_mono_ns();
  double d = 1e-9 * (double)(t - P.t);
  P.t = t;
  double *b[PH_N] = {&P.s.params, &P.s.inputs, &P.s.gemm, &P.s.elementwise, &P.s.layernorm, &P.s.sums, &P.s.outputs};
  *b[k] += d;
}

static void seterr(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(G.err, sizeof G.err, fmt, ap);
  va_end(ap);
}

#define CK(call)                                                                                 \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      seterr("nn on CUDA: %s failed: %s", #call, cudaGetErrorString(e_));                       \
      goto fail;                                                                                 \
    }                                                                                            \
  } while (0)
#define CB(call)                                                                                 \
  do {                                                                                           \
    cublasStatus_t s_ = (call);                                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                           \
      seterr("nn on CUDA: %s failed: cuBLAS status %d", #call, (int)s_);                        \
      goto fail;                                                                                 \
    }                                                                                            \
  } while (0)

/* *p holds at least n reals (contents not kept) */
static cudaError_t grow(bcg_real **p, size_t *cap, size_t n) {
  if (n <= *cap) return cudaSuccess;
  if (*p) cudaFree(*p);
  *p = NULL;
  *cap = 0;
  cudaError_t e = cudaMalloc((void **)p, n * sizeof(bcg_real));
  if (e == cudaSuccess) *cap = n;
  else *p = NULL;
  return e;
}

static int init_locked(void) {
  if (G.ready) return 0;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n <= 0) {
    seterr("no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return -1;
  }
  CK(cudaStreamCreate(&G.st));
  CB(cublasCreate(&G.h));
  CB(cublasSetStream(G.h, G.st));
  CB(cublasSetMathMode(G.h, CUBLAS_DEFAULT_MATH)); /* no TF32 / reduced precision */
  G.ready = 1;
  return 0;
fail:
  return -1;
}

int bcg_cuda_nn_init(char *err, size_t errlen) {
  pthread_mutex_lock(&G.mu);
  int rc = init_locked();
  if (rc && err && errlen) snprintf(err, errlen, "%s", G.err);
  pthread_mutex_unlock(&G.mu);
  return rc;
}

const char *bcg_cuda_nn_error(void) { return G.err; }

/* ---- device tape ---------------------------------------------------------------------- */

typedef struct dtape {
  bcg_real *mem;
  int cap;   /* batch capacity */
  int batch; /* of the last forward, 0 before */
  const bcg_mlp *m;
} dtape;

typedef bcg_nn_tape_ptrs dptrs; /* core/nn_tape.h's layout without the scratch rows */

static int ln_of(const bcg_mlp *m, int l) { return l < m->nlin - 1 ? (int)m->cfg.layernorm : BCG_LN_NONE; }
static int act_of(const bcg_mlp *m, int l) {
  return l < m->nlin - 1 ? (int)m->cfg.hidden_act : (int)m->cfg.out_act;
}
static int maxdim(const bcg_mlp *m) {
  int d = 0;
  for (int l = 0; l <= m->nlin; l++)
    if (m->dim[l] > d) d = m->dim[l];
  return d;
}

/* core/nn_tape.h's layout without the scratch rows; returns the reals needed */
static size_t dlayout(const bcg_mlp *m, int B, bcg_real *mem, dptrs *p) { return bcg_nn_tape_layout(m, B, mem, p, 0); }

void bcg_cuda_nn_tape_free(bcg_mlp_tape *t) {
  if (!t || !t->dev) return;
  dtape *dt = (dtape *)t->dev;
  pthread_mutex_lock(&G.mu);
  if (dt->mem) cudaFree(dt->mem);
  pthread_mutex_unlock(&G.mu);
  free(dt);
  t->dev = NULL;
}

/* out[no] += batch sums of d (* w) */
static int colsum(bcg_real *out, const bcg_real *d, const bcg_real *w, int batch, int no) {
  int nchunk = (batch + CHUNK - 1) / CHUNK;
  if (nchunk <= 1) {
    LAUNCH(k_colsum_direct, no, out, d, w, batch, no);
  } else {
    CK(grow(&G.part, &G.cpart, (size_t)nchunk * no));
    LAUNCH(k_colsum_part, (long)nchunk * no, G.part, d, w, batch, no, nchunk);
    LAUNCH(k_colsum_fin, no, out, G.part, nchunk, no);
  }
  return 0;
fail:
  return -1;
}

/* ---- forward / backward ------------------------------------------------------------------ */

int bcg_cuda_nn_forward(const bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *x, int batch, bcg_real *y) {
  const bcg_real one = 1;
  dptrs p;
  dtape *dt;
  uint64_t t0;
  pthread_mutex_lock(&G.mu);
  if (init_locked()) goto fail;
  dt = (dtape *)t->dev;
  if (!dt) {
    dt = (dtape *)calloc(1, sizeof *dt);
    if (!dt) {
      seterr("nn on CUDA: out of host memory");
      goto fail;
    }
    t->dev = dt;
  }
  dt->batch = 0;
  t0 = bcg_mono_ns();
  ph_begin();
  if (dt->cap < batch || dt->m != m) {
    if (dt->mem) cudaFree(dt->mem);
    dt->mem = NULL;
    dt->cap = 0;
    CK(cudaMalloc((void **)&dt->mem, dlayout(m, batch, NULL, &p) * sizeof(bcg_real)));
    dt->cap = batch;
    dt->m = m;
  }
  dlayout(m, dt->cap, dt->mem, &p);
  CK(grow(&G.params, &G.cparams, m->nnet));
  CK(cudaMemcpy(G.params, m->params, m->nnet * sizeof(bcg_real), cudaMemcpyHostToDevice));
  ph(PH_PARAMS);
  CK(cudaMemcpy(p.x, x, (size_t)batch * m->dim[0] * sizeof(bcg_real), cudaMemcpyHostToDevice));
  ph(PH_IN);
  {
    const bcg_real *a = p.x;
    for (int l = 0; l < m->nlin; l++) {
      int ni = m->dim[l], no = m->dim[l + 1], act = act_of(m, l), ln = ln_of(m, l);
      long n = (long)batch * no;
      const bcg_real *W = G.params + m->off_w[l], *bias = G.params + m->off_b[l];
      const bcg_real *g = ln ? G.params + m->off_lng[l] : NULL, *gb = ln ? G.params + m->off_lnb[l] : NULL;
      bcg_real *z = p.pre[l];
      LAUNCH(k_bias, n, z, bias, n, no);
      ph(PH_ELEM);
      /* row-major z[batch][no] += a[batch][ni] W^T  ==  column-major z^T += W^T^T a^T */
      CB(GEMM(G.h, CUBLAS_OP_T, CUBLAS_OP_N, no, batch, ni, &one, W, ni, a, ni, &one, z, no));
      ph(PH_GEMM);
      if (ln == BCG_LN_PRE_ACT) LAUNCH(k_ln, batch, no, batch, z, g, gb, p.xhat[l], p.rstd[l], z);
      ph(PH_LN);
      LAUNCH(k_act, n, act, z, p.post[l], n);
      ph(PH_ELEM);
      if (ln == BCG_LN_POST_ACT) LAUNCH(k_ln, batch, no, batch, p.post[l], g, gb, p.xhat[l], p.rstd[l], p.out[l]);
      ph(PH_LN);
      CK(cudaGetLastError());
      a = p.out[l];
    }
    CK(cudaMemcpy(y, a, (size_t)batch * m->dim[m->nlin] * sizeof(bcg_real), cudaMemcpyDeviceToHost));
  }
  CK(cudaStreamSynchronize(G.st));
  ph(PH_OUT);
  dt->batch = batch;
  if (P.on) {
    P.s.forwards++;
    P.s.rows += batch;
    P.s.total += 1e-9 * (double)(bcg_mono_ns() - t0);
  }
  pthread_mutex_unlock(&G.mu);
  return 0;
fail:
  pthread_mutex_unlock(&G.mu);
  return -1;
}

int bcg_cuda_nn_backward(const bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *dy, bcg_real *grad, bcg_real *dx) {
  const bcg_real one = 1, zero = 0;
  dptrs p;
  dtape *dt = (dtape *)t->dev;
  int batch;
  bcg_real *d, *e;
  uint64_t t0;
  pthread_mutex_lock(&G.mu);
  t0 = bcg_mono_ns();
  ph_begin();
  if (!dt || dt->m != m || dt->batch <= 0 || dt->batch != t->batch) {
    seterr("nn on CUDA: backward without a matching device forward on this tape");
    goto fail;
  }
  batch = dt->batch;
  dlayout(m, dt->cap, dt->mem, &p);
  CK(grow(&G.params, &G.cparams, m->nnet));
  CK(cudaMemcpy(G.params, m->params, m->nnet * sizeof(bcg_real), cudaMemcpyHostToDevice));
  if (grad) {
    CK(grow(&G.grad, &G.cgrad, m->nnet));
    CK(cudaMemcpy(G.grad, grad, m->nnet * sizeof(bcg_real), cudaMemcpyHostToDevice));
  }
  ph(PH_PARAMS);
  CK(grow(&G.s0, &G.cs0, (size_t)batch * maxdim(m)));
  CK(grow(&G.s1, &G.cs1, (size_t)batch * maxdim(m)));
  d = G.s0;
  e = G.s1;
  CK(cudaMemcpy(d, dy, (size_t)batch * m->dim[m->nlin] * sizeof(bcg_real), cudaMemcpyHostToDevice));
  ph(PH_IN);
  for (int l = m->nlin - 1; l >= 0; l--) {
    int ni = m->dim[l], no = m->dim[l + 1], act = act_of(m, l), ln = ln_of(m, l);
    long n = (long)batch * no;
    const bcg_real *g = ln ? G.params + m->off_lng[l] : NULL;
    bcg_real *dg = ln && grad ? G.grad + m->off_lng[l] : NULL, *dgb = ln && grad ? G.grad + m->off_lnb[l] : NULL;
    for (int pass = 0; pass < 2; pass++) {
      /* pass 0: POST_ACT LayerNorm, then the activation; pass 1: PRE_ACT LayerNorm */
      if (pass == 1 && act != BCG_ACT_IDENTITY) LAUNCH(k_act_df, n, act, p.pre[l], p.post[l], d, n);
      ph(PH_ELEM);
      if (ln != (pass == 0 ? BCG_LN_POST_ACT : BCG_LN_PRE_ACT)) continue;
      if (dg) {
        if (colsum(dg, d, p.xhat[l], batch, no) || colsum(dgb, d, NULL, batch, no)) goto fail;
      }
      ph(PH_SUM);
      LAUNCH(k_ln_vjp, batch, no, batch, p.xhat[l], p.rstd[l], g, d);
      ph(PH_LN);
    }
    const bcg_real *a = l == 0 ? p.x : p.out[l - 1];
    if (grad) {
      /* row-major gW[no][ni] += d^T a  ==  column-major gW^T += a^T d */
      CB(GEMM(G.h, CUBLAS_OP_N, CUBLAS_OP_T, ni, no, batch, &one, a, ni, d, no, &one, G.grad + m->off_w[l], ni));
      ph(PH_GEMM);
      if (colsum(G.grad + m->off_b[l], d, NULL, batch, no)) goto fail;
      ph(PH_SUM);
    }
    if (l > 0 || dx) /* row-major da[batch][ni] = d W  ==  column-major da^T = W^T d^T */
      CB(GEMM(G.h, CUBLAS_OP_N, CUBLAS_OP_N, ni, batch, no, &one, G.params + m->off_w[l], ni, d, no, &zero, e, ni));
    ph(PH_GEMM);
    CK(cudaGetLastError());
    bcg_real *tmp = d;
    d = e;
    e = tmp;
  }
  /* d now holds dx (after the last swap) */
  if (dx) CK(cudaMemcpy(dx, d, (size_t)batch * m->dim[0] * sizeof(bcg_real), cudaMemcpyDeviceToHost));
  if (grad) CK(cudaMemcpy(grad, G.grad, m->nnet * sizeof(bcg_real), cudaMemcpyDeviceToHost));
  CK(cudaStreamSynchronize(G.st));
  ph(PH_OUT);
  if (P.on) {
    P.s.backwards++;
    P.s.total += 1e-9 * (double)(bcg_mono_ns() - t0);
  }
  pthread_mutex_unlock(&G.mu);
  return 0;
fail:
  pthread_mutex_unlock(&G.mu);
  return -1;
}

/* ---- profile switch ----------------------------------------------------------------------- */

void bcg_cuda_nn_profile(int on) {
  pthread_mutex_lock(&G.mu);
  P.on = on != 0;
  pthread_mutex_unlock(&G.mu);
}

void bcg_cuda_nn_profile_read(bcg_nn_cuda_split *s) {
  pthread_mutex_lock(&G.mu);
  *s = P.s;
  pthread_mutex_unlock(&G.mu);
}
