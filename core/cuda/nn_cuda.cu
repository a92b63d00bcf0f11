/* core/cuda/nn_cuda.cu - bcg_mlp forward / backward on a CUDA device (core/nn_cuda.h).
 *
 * The device mirror of core/nn.c's bcg_mlp_forward / bcg_mlp_backward, step
 * for step: the same GEMMs (cuBLAS, column-major calls that are exactly the
 * row-major OpenBLAS calls of nn.c), the same per-row LayerNorm and its VJP
 * (bcg/nn.h's bcg_layernorm / bcg_layernorm_vjp, one warp per row: the
 * feature sums grouped by lane), the same activations (bcg_act_f /
 * bcg_act_df, one thread per element). The batch sums of the bias and
 * LayerNorm gradients are ordered differently: rows are summed in chunks of
 * CHUNK rows, then the chunk sums in order (a batch of at most CHUNK rows is
 * summed exactly as nn.c does); a backward's parameter gradient is summed
 * from zero on the device and added to the caller's array on the host.
 *
 * Device memory: process-wide parameter, gradient, scratch and partial-sum
 * buffers (grown on demand; the parameters are copied in on every call, so
 * the host arrays stay authoritative: from the host array itself, page-locked
 * at a network's first call; a held network, bcg_mlp_hold, has its own
 * parameters, gradient and Adam moments on the device instead), and per host tape a device
 * tape (t->dev) with what the backward reads: x, and per layer pre, post and
 * with LayerNorm xhat, rstd (POST_ACT: the LN output too), laid out as nn.c's
 * host tape for the batch capacity; per row source (bcg_nn_rows) a mirror
 * of its host array, which a forward of its rows gathers from (k_gather).
 *
 * Copies go through a pinned staging buffer (up / down below), kernels and
 * cuBLAS run on the one stream G.st. Every call ends synchronised, so host
 * outputs are ready on return. */
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

#ifndef EMU_LAUNCH
/* One warp per row (the device): lane j takes the features j, j + 32, ... so
 * the warp's loads are coalesced, and the row sums are combined with
 * shuffles. The arithmetic is bcg_layernorm's (two passes: mean, then the
 * biased variance) and bcg_layernorm_vjp's, with the sums over features
 * grouped by lane. The one-thread-per-row kernels below (bcg_layernorm
 * itself, uncoalesced: a thread walks its row) stay for bench/emu, whose
 * host stand-in runs threads one after another and has no warps. */
#define LN_WARPS 4 /* rows per block */
__device__ __forceinline__ bcg_real warp_sum(bcg_real v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void k_ln_warp(int no, int batch, const bcg_real *x, const bcg_real *g, const bcg_real *b, bcg_real *xhat,
                          bcg_real *rstd, bcg_real *y) {
  long s = (long)blockIdx.x * LN_WARPS + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (s >= batch) return; /* whole warps leave together */
  size_t o = (size_t)s * no;
  const bcg_real *xr = x + o;
  bcg_real mean = 0, var = 0;
  for (int i = lane; i < no; i += 32) mean += xr[i];
  mean = warp_sum(mean) / (bcg_real)no;
  for (int i = lane; i < no; i += 32) var += (xr[i] - mean) * (xr[i] - mean);
  var = warp_sum(var) / (bcg_real)no;
  bcg_real r = (bcg_real)1 / bcg_nn_sqrt(var + (bcg_real)BCG_LN_EPS);
  if (lane == 0) rstd[s] = r;
  for (int i = lane; i < no; i += 32) {
    bcg_real h = (xr[i] - mean) * r;
    xhat[o + i] = h;
    y[o + i] = g[i] * h + b[i];
  }
}

__global__ void k_ln_vjp_warp(int no, int batch, const bcg_real *xhat, const bcg_real *rstd, const bcg_real *g,
                              bcg_real *d) {
  long s = (long)blockIdx.x * LN_WARPS + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (s >= batch) return;
  size_t o = (size_t)s * no;
  bcg_real m1 = 0, m2 = 0;
  for (int i = lane; i < no; i += 32) {
    bcg_real t = d[o + i] * g[i];
    m1 += t;
    m2 += t * xhat[o + i];
  }
  m1 = warp_sum(m1) / (bcg_real)no;
  m2 = warp_sum(m2) / (bcg_real)no;
  bcg_real r = rstd[s];
  for (int i = lane; i < no; i += 32) d[o + i] = r * (d[o + i] * g[i] - m1 - xhat[o + i] * m2);
}
#define LN_FWD(no, batch, x, g, b, xhat, rstd, y)                                                     \
  k_ln_warp<<<(int)(((batch) + LN_WARPS - 1) / LN_WARPS), 32 * LN_WARPS, 0, G.st>>>(no, batch, x, g, b, xhat, rstd, y)
#define LN_VJP(no, batch, xhat, rstd, g, d)                                                           \
  k_ln_vjp_warp<<<(int)(((batch) + LN_WARPS - 1) / LN_WARPS), 32 * LN_WARPS, 0, G.st>>>(no, batch, xhat, rstd, g, d)
#else
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

#define LN_FWD(no, batch, x, g, b, xhat, rstd, y) LAUNCH(k_ln, batch, no, batch, x, g, b, xhat, rstd, y)
#define LN_VJP(no, batch, xhat, rstd, g, d) LAUNCH(k_ln_vjp, batch, no, batch, xhat, rstd, g, d)
#endif

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

/* x[i][j] = src[row0 + idx[i]][j] (idx NULL: row0 + i) */
__global__ void k_gather(bcg_real *x, const bcg_real *src, long row0, const int *idx, int batch, int w) {
  long k = tid();
  if (k >= (long)batch * w) return;
  long i = k / w, j = k % w;
  x[k] = src[(size_t)(row0 + (idx ? idx[i] : i)) * w + j];
}

/* acc[j] = sum over i = j mod 32 of x[i]^2 in double, in order: core/nn.c's lanes of the
 * gradient norm (its fixed tree then combines them on the host). One warp: lane j reads
 * j, j + 32, ... (coalesced), LANE_LOADS of them issued before their squares are added in
 * order: one load at a time left the warp waiting a memory latency per 32 elements (a
 * 300k-parameter actor's gradient is 9k such waits) */
#define LANE_LOADS 32
__global__ void k_sumsq_lanes(double *acc, const bcg_real *x, long n) {
  long j = tid();
  if (j >= 32) return;
  double s = 0;
  long i = j;
  for (; i + 32L * (LANE_LOADS - 1) < n; i += 32L * LANE_LOADS) {
    double v[LANE_LOADS];
#pragma unroll
    for (int u = 0; u < LANE_LOADS; u++) v[u] = (double)x[i + 32L * u];
#pragma unroll
    for (int u = 0; u < LANE_LOADS; u++) s += v[u] * v[u];
  }
  for (; i < n; i += 32) s += (double)x[i] * (double)x[i];
  acc[j] = s;
}

/* bcg_clip_grad_norm's scaling (clip) and bcg_adam_step's element (adam), as core/nn.c */
__global__ void k_clip_adam(bcg_real *p, bcg_real *g, bcg_real *am, bcg_real *av, long n, int clip, double c,
                            int adam, bcg_real b1, bcg_real b2, bcg_real wd, bcg_real eps, bcg_real ss,
                            bcg_real isbc2) {
  long i = tid();
  if (i >= n) return;
  bcg_real gi = g[i];
  if (clip) g[i] = gi = (bcg_real)((double)gi * c);
  if (adam) BCG_ADAM_ELEM(wd != 0 ? gi + wd * p[i] : gi, am[i], av[i], p[i], b1, b2, ss, isbc2, eps);
}

/* ---- process-wide state ----------------------------------------------------------------- */

#ifndef BCG_NN_CUDA_STAGE
#define BCG_NN_CUDA_STAGE (1 << 21) /* bytes in each half of the pinned staging buffer */
#endif
/* what one chunk moves: whole reals (down_add adds them) */
#define STAGE ((int)(BCG_NN_CUDA_STAGE / sizeof(bcg_real) * sizeof(bcg_real)))

static struct {
  pthread_mutex_t mu;
  int ready;
  cudaStream_t st;
  cublasHandle_t h;
  bcg_real *params, *grad, *s0, *s1, *part, *idx; /* device (idx: int row indices of a gather) */
  size_t cparams, cgrad, cs0, cs1, cpart, cidx;     /* their capacities in reals */
  double *lanes;                                    /* device [32]: a held gradient's norm lanes */
  char *pin;                                  /* pinned host staging, two halves of STAGE bytes */
  cudaEvent_t ev[2];                          /* the last copy through each half */
  int half;                                   /* the half the next chunk takes */
  char err[512];
} G = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, {0, 0}, 0, ""};

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
  CK(cudaHostAlloc((void **)&G.pin, 2 * (size_t)STAGE, cudaHostAllocDefault));
  CK(cudaEventCreate(&G.ev[0]));
  CK(cudaEventCreate(&G.ev[1]));
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

/* ---- copies through the pinned staging buffer ----------------------------------------------
 * A copy from or to pageable host memory (the callers' arrays) is staged by
 * the driver at a few GB/s; through our own pinned buffer it runs at the
 * DMA engine's speed. Chunks of STAGE bytes alternate between the buffer's
 * two halves, so the host copies one chunk while the engine moves the other;
 * an event per half says when its last copy has left it. Both run on G.st,
 * in order with the kernels. */

/* ---- the learners' pinned arrays (bcg_nn_pin): copies inside one are direct DMAs ---- */
#define NPIN 64
static struct {
  const char *p;
  size_t bytes;
} PIN[NPIN];
static int npin;

/* 1 if host [p, p + n) lies inside one pinned array */
static int pinned(const void *p, size_t n) {
  const char *c = (const char *)p;
  for (int i = 0; i < npin; i++)
    if (c >= PIN[i].p && n <= PIN[i].bytes && (size_t)(c - PIN[i].p) <= PIN[i].bytes - n) return 1;
  return 0;
}

/* device dst[n bytes] = host src */
static cudaError_t up(void *dst, const void *src, size_t n) {
  if (pinned(src, n)) return cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, G.st);
  for (size_t off = 0; off < n; off += STAGE) {
    size_t len = n - off < (size_t)STAGE ? n - off : (size_t)STAGE;
    int h = G.half;
    G.half ^= 1;
    char *buf = G.pin + (size_t)h * STAGE;
    cudaError_t e = cudaEventSynchronize(G.ev[h]);
    if (e != cudaSuccess) return e;
    memcpy(buf, (const char *)src + off, len);
    if ((e = cudaMemcpyAsync((char *)dst + off, buf, len, cudaMemcpyHostToDevice, G.st)) != cudaSuccess ||
        (e = cudaEventRecord(G.ev[h], G.st)) != cudaSuccess)
      return e;
  }
  return cudaSuccess;
}

/* host dst[n bytes] = device src (add: dst += src, n / sizeof(bcg_real)
 * reals), after the work queued before it; chunk k+1 is queued before the
 * host copies chunk k out */
static cudaError_t down_(void *dst, const void *src, size_t n, int add) {
  if (!add && pinned(dst, n)) {
    cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, G.st);
    return e != cudaSuccess ? e : cudaStreamSynchronize(G.st);
  }
  size_t poff = 0, plen = 0;
  int ph_ = -1;
  for (size_t off = 0;; off += STAGE) {
    int h = -1;
    size_t len = 0;
    cudaError_t e;
    if (off < n) {
      len = n - off < (size_t)STAGE ? n - off : (size_t)STAGE;
      h = G.half;
      G.half ^= 1;
      if ((e = cudaEventSynchronize(G.ev[h])) != cudaSuccess ||
          (e = cudaMemcpyAsync(G.pin + (size_t)h * STAGE, (const char *)src + off, len, cudaMemcpyDeviceToHost,
                               G.st)) != cudaSuccess ||
          (e = cudaEventRecord(G.ev[h], G.st)) != cudaSuccess)
        return e;
    }
    if (ph_ >= 0) {
      if ((e = cudaEventSynchronize(G.ev[ph_])) != cudaSuccess) return e;
      const char *buf = G.pin + (size_t)ph_ * STAGE;
      if (add) {
        bcg_real *a = (bcg_real *)((char *)dst + poff);
        const bcg_real *b = (const bcg_real *)buf;
        for (size_t i = 0; i < plen / sizeof(bcg_real); i++) a[i] += b[i];
      } else
        memcpy((char *)dst + poff, buf, plen);
    }
    if (h < 0) return cudaSuccess;
    ph_ = h;
    poff = off;
    plen = len;
  }
}
static cudaError_t down(void *dst, const void *src, size_t n) { return down_(dst, src, n, 0); }
static cudaError_t down_add(bcg_real *dst, const bcg_real *src, size_t n) { return down_(dst, src, n * sizeof(bcg_real), 1); }

/* ---- the networks' parameters, page-locked where they are ----------------------------------
 * A call's parameters (about 1 MB for a 256-256 critic in double) went
 * through the staging buffer at every call: a host copy and then the DMA,
 * about 0.2 ms a call and a third of SHAC+BCG's GPU networks time. The
 * first device call of a network now page-locks its host parameter array in
 * place (cudaHostRegister; the learners keep writing it as before, and the
 * host copy stays the authoritative one: it is still sent at every call),
 * and later calls copy straight from it. bcg_mlp_destroy unlocks it
 * (bcg_cuda_nn_forget) before freeing it. Where registration fails (the
 * pages overlap another registered array, a platform without it, the table
 * full) the call goes through the staging buffer as before. Under G.mu. */
/* page-lock host memory [p, p + bytes) where it is: 1, or 0 with the error
 * cleared (it is not sticky; the caller stages its copies instead) */
static int host_lock(const void *p, size_t bytes) {
  if (cudaHostRegister((void *)p, bytes, cudaHostRegisterDefault) == cudaSuccess) return 1;
  (void)cudaGetLastError();
  return 0;
}

/* undo host_lock, once no copy from the memory is in flight */
static void host_unlock(const void *p) {
  if (G.st) cudaStreamSynchronize(G.st);
  cudaHostUnregister((void *)p);
}

int bcg_cuda_nn_pin(const void *p, size_t bytes) {
  int rc = -1;
  pthread_mutex_lock(&G.mu);
  const char *c = (const char *)p;
  int overlap = 0;
  for (int i = 0; i < npin; i++)
    if (c < PIN[i].p + PIN[i].bytes && PIN[i].p < c + bytes) overlap = 1;
  if (!overlap && npin < NPIN && init_locked() == 0 && host_lock(p, bytes)) {
    PIN[npin].p = c;
    PIN[npin].bytes = bytes;
    npin++;
    rc = 0;
  }
  pthread_mutex_unlock(&G.mu);
  return rc;
}

void bcg_cuda_nn_unpin(const void *p) {
  pthread_mutex_lock(&G.mu);
  for (int i = 0; i < npin; i++)
    if (PIN[i].p == (const char *)p) {
      host_unlock(p);
      PIN[i] = PIN[--npin];
      break;
    }
  pthread_mutex_unlock(&G.mu);
}

#define NREG 128
static struct {
  const void *p;
  size_t bytes;
} R[NREG];
static int nreg;

static int reg_find(const void *p, size_t bytes) {
  for (int i = 0; i < nreg; i++)
    if (R[i].p == p && bytes <= R[i].bytes) return i;
  return -1;
}

/* G.params = m's parameters, after the work queued before */
static cudaError_t params_in(const bcg_mlp *m) {
  size_t b = m->nnet * sizeof(bcg_real);
  int i = reg_find(m->params, b);
  if (i < 0 && nreg < NREG && host_lock(m->params, b)) {
    R[nreg].p = m->params;
    R[nreg].bytes = b;
    i = nreg++;
  }
  if (i >= 0) return cudaMemcpyAsync(G.params, m->params, b, cudaMemcpyHostToDevice, G.st);
  return up(G.params, m->params, b);
}

static void held_drop(const void *key);

void bcg_cuda_nn_forget(const void *p) {
  if (!p) return;
  pthread_mutex_lock(&G.mu);
  held_drop(p);
  for (int i = 0; i < nreg; i++)
    if (R[i].p == p) {
      host_unlock(p);
      R[i] = R[--nreg];
      break;
    }
  pthread_mutex_unlock(&G.mu);
}

/* ---- held networks (bcg_mlp_hold) -------------------------------------------------------------
 * A held network's parameters, gradient and Adam moments live in device
 * buffers of their own, found by the network's host parameter array. Its
 * forwards and backwards read the parameters there (no copy in), a backward
 * into m->grad adds to the gradient there (no copy back), and the optimiser
 * step runs there (k_sumsq_lanes, then k_clip_adam). Under G.mu. */
typedef struct held_t {
  const void *key; /* m->params */
  size_t n;        /* m->nparams */
  const bcg_adam *opt;
  bcg_real *p, *g, *am, *av; /* device; am, av NULL without opt */
  int bad;                   /* a device failure since the hold: its calls fail */
} held_t;
#define NHELD 64
static held_t HD[NHELD];
static int nheld;

static held_t *held_find(const void *key) {
  for (int i = 0; i < nheld; i++)
    if (HD[i].key == key) return &HD[i];
  return NULL;
}

static void held_buffers_free(held_t *h) {
  bcg_real *b[4] = {h->p, h->g, h->am, h->av};
  for (int i = 0; i < 4; i++)
    if (b[i]) cudaFree(b[i]);
}

static void held_free(held_t *h) {
  held_buffers_free(h);
  *h = HD[--nheld];
}

static void held_drop(const void *key) {
  held_t *h = held_find(key);
  if (!h) return;
  if (G.st) cudaStreamSynchronize(G.st);
  held_free(h);
}

int bcg_cuda_nn_hold(const bcg_mlp *m, const bcg_adam *opt) {
  held_t h;
  size_t b = m->nparams * sizeof(bcg_real);
  memset(&h, 0, sizeof h);
  pthread_mutex_lock(&G.mu);
  if (init_locked()) goto fail;
  if (held_find(m->params)) {
    seterr("nn on CUDA: the network is held already");
    goto fail;
  }
  if (nheld == NHELD) {
    seterr("nn on CUDA: more than %d networks held at once", NHELD);
    goto fail;
  }
  h.key = m->params;
  h.n = m->nparams;
  h.opt = opt;
  CK(cudaMalloc((void **)&h.p, b));
  CK(cudaMalloc((void **)&h.g, b));
  CK(up(h.p, m->params, b));
  CK(up(h.g, m->grad, b));
  if (opt) {
    CK(cudaMalloc((void **)&h.am, b));
    CK(cudaMalloc((void **)&h.av, b));
    CK(up(h.am, opt->m, b));
    CK(up(h.av, opt->v, b));
  }
  CK(cudaStreamSynchronize(G.st));
  HD[nheld++] = h;
  pthread_mutex_unlock(&G.mu);
  return 0;
fail:
  held_buffers_free(&h);
  pthread_mutex_unlock(&G.mu);
  return -1;
}

int bcg_cuda_nn_release(bcg_mlp *m, bcg_adam *opt) {
  int rc = 0;
  size_t b;
  pthread_mutex_lock(&G.mu);
  held_t *h = held_find(m->params);
  if (!h) {
    pthread_mutex_unlock(&G.mu);
    return 0;
  }
  b = h->n * sizeof(bcg_real);
  if (h->bad) {
    rc = -1; /* the device state is not trusted: the host keeps what it had at the hold */
  } else {
    CK(down(m->params, h->p, b));
    CK(down(m->grad, h->g, b));
    if (opt && h->am) {
      CK(down(opt->m, h->am, b));
      CK(down(opt->v, h->av, b));
    }
    CK(cudaStreamSynchronize(G.st));
  }
  held_free(h);
  pthread_mutex_unlock(&G.mu);
  return rc;
fail:
  held_free(h);
  pthread_mutex_unlock(&G.mu);
  return -1;
}

int bcg_cuda_nn_held(const bcg_mlp *m, const bcg_adam **opt) {
  pthread_mutex_lock(&G.mu);
  const held_t *h = held_find(m->params);
  if (h && opt) *opt = h->opt;
  pthread_mutex_unlock(&G.mu);
  return h != NULL;
}

int bcg_cuda_nn_zero_grad(const bcg_mlp *m) {
  pthread_mutex_lock(&G.mu);
  held_t *h = held_find(m->params);
  if (!h) {
    seterr("nn on CUDA: zero_grad of a network that is not held");
    goto fail;
  }
  if (cudaMemsetAsync(h->g, 0, h->n * sizeof(bcg_real), G.st) != cudaSuccess) {
    h->bad = 1;
    seterr("nn on CUDA: zeroing a held gradient failed");
    goto fail;
  }
  pthread_mutex_unlock(&G.mu);
  return 0;
fail:
  pthread_mutex_unlock(&G.mu);
  return -1;
}

/* the held network of m, usable; else NULL with the message set */
static held_t *held_ok(const bcg_mlp *m) {
  held_t *h = held_find(m->params);
  if (!h) seterr("nn on CUDA: the network is not held");
  else if (h->bad) {
    seterr("nn on CUDA: an earlier device call of this held network failed");
    h = NULL;
  }
  return h;
}

int bcg_cuda_nn_grad_copy(const bcg_mlp *m, bcg_real *host, int to_host) {
  pthread_mutex_lock(&G.mu);
  held_t *h = held_ok(m);
  if (!h) goto fail;
  if (to_host) CK(down(host, h->g, m->nnet * sizeof(bcg_real)));
  else {
    CK(up(h->g, host, m->nnet * sizeof(bcg_real)));
    CK(cudaStreamSynchronize(G.st)); /* host may change once this returns */
  }
  pthread_mutex_unlock(&G.mu);
  return 0;
fail:
  if (h) h->bad = 1;
  pthread_mutex_unlock(&G.mu);
  return -1;
}

/* a held network's extra parameters (m->nnet .. m->nparams) keep their gradient on the
 * host (bcg_mlp_hold): the host's extra_grad into the device gradient's tail (queued) */
static cudaError_t extra_grad_in(held_t *h, const bcg_mlp *m) {
  if (h->n == m->nnet) return cudaSuccess;
  return up(h->g + m->nnet, m->extra_grad, (h->n - m->nnet) * sizeof(bcg_real));
}

int bcg_cuda_nn_grad_lanes(const bcg_mlp *m, double acc[32]) {
  uint64_t t0 = bcg_mono_ns();
  pthread_mutex_lock(&G.mu);
  held_t *h = held_ok(m);
  if (!h) goto fail;
  CK(extra_grad_in(h, m));
  if (!G.lanes) CK(cudaMalloc((void **)&G.lanes, 32 * sizeof(double)));
  LAUNCH(k_sumsq_lanes, 32, G.lanes, h->g, (long)h->n);
  CK(cudaGetLastError());
  CK(down(acc, G.lanes, 32 * sizeof(double))); /* waits for it, and for the backwards before */
  if (P.on) {
    P.s.steps++;
    P.s.optimizer += 1e-9 * (double)(bcg_mono_ns() - t0);
  }
  pthread_mutex_unlock(&G.mu);
  return 0;
fail:
  if (h) h->bad = 1;
  pthread_mutex_unlock(&G.mu);
  return -1;
}

int bcg_cuda_nn_clip_adam(const bcg_mlp *m, const bcg_adam *opt, int clip, double c, int adam, bcg_real ss,
                          bcg_real isbc2) {
  uint64_t t0 = bcg_mono_ns();
  pthread_mutex_lock(&G.mu);
  held_t *h = held_ok(m);
  if (!h) goto fail;
  if (adam && (h->opt != opt || !h->am)) {
    seterr("nn on CUDA: an optimiser step with another optimiser than the network was held with");
    goto fail;
  }
  CK(extra_grad_in(h, m));
  LAUNCH(k_clip_adam, (long)h->n, h->p, h->g, h->am, h->av, (long)h->n, clip, c, adam, opt->beta1, opt->beta2,
         opt->weight_decay, opt->eps, ss, isbc2);
  CK(cudaGetLastError());
  if (h->n > m->nnet) { /* the extra parameters and gradient back to the host (down waits for them) */
    CK(down(m->extra_params, h->p + m->nnet, (h->n - m->nnet) * sizeof(bcg_real)));
    CK(down(m->extra_grad, h->g + m->nnet, (h->n - m->nnet) * sizeof(bcg_real)));
  }
  if (P.on) {
    CK(cudaStreamSynchronize(G.st));
    P.s.optimizer += 1e-9 * (double)(bcg_mono_ns() - t0);
  }
  pthread_mutex_unlock(&G.mu);
  return 0;
fail:
  if (h) h->bad = 1;
  pthread_mutex_unlock(&G.mu);
  return -1;
}

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

/* a row source's device mirror (bcg_nn_rows.dev). The host array is
 * page-locked where it is at the first put (cudaHostRegister, as the
 * parameters): PPO puts 4096 rows of 226 observations per control step, 178
 * MB per iteration, which went through the staging buffer (a host copy, then
 * the DMA) at a few GB/s; a put from registered memory is the DMA alone.
 * Unregistered when the mirror goes (bcg_nn_rows_free, a renamed source).
 * Where registration fails the puts are staged as before. */
typedef struct drows {
  bcg_real *mem;
  long nrows;
  int width;
  const void *reg; /* the host array, if page-locked by us */
} drows;

static void drows_free(drows *d) {
  if (d->reg) host_unlock(d->reg);
  if (d->mem) cudaFree(d->mem);
  free(d);
}

int bcg_cuda_nn_rows_put(bcg_nn_rows *r, long row0, long n) {
  drows *d;
  pthread_mutex_lock(&G.mu);
  if (init_locked()) goto fail;
  d = (drows *)r->dev;
  if (d && (d->nrows != r->nrows || d->width != r->width || (d->reg && d->reg != r->host))) { /* renamed: a new mirror */
    drows_free(d);
    r->dev = d = NULL;
  }
  if (!d) {
    d = (drows *)calloc(1, sizeof *d);
    if (!d) {
      seterr("nn on CUDA: out of host memory");
      goto fail;
    }
    d->nrows = r->nrows;
    d->width = r->width;
    size_t bytes = (size_t)r->nrows * r->width * sizeof(bcg_real);
    if (cudaMalloc((void **)&d->mem, bytes ? bytes : sizeof(bcg_real)) != cudaSuccess) {
      seterr("nn on CUDA: no device memory for a row source of %ld x %d", r->nrows, r->width);
      free(d);
      goto fail;
    }
    r->dev = d;
    if (bytes && reg_find(r->host, bytes) < 0 && host_lock(r->host, bytes)) d->reg = r->host;
  }
  if (d->reg)
    CK(cudaMemcpyAsync(d->mem + (size_t)row0 * d->width, r->host + (size_t)row0 * d->width,
                       (size_t)n * d->width * sizeof(bcg_real), cudaMemcpyHostToDevice, G.st));
  else
    CK(up(d->mem + (size_t)row0 * d->width, r->host + (size_t)row0 * d->width,
          (size_t)n * d->width * sizeof(bcg_real)));
  CK(cudaStreamSynchronize(G.st));
  pthread_mutex_unlock(&G.mu);
  return 0;
fail:
  pthread_mutex_unlock(&G.mu);
  return -1;
}

void bcg_cuda_nn_rows_free(bcg_nn_rows *r) {
  if (!r || !r->dev) return;
  drows *d = (drows *)r->dev;
  pthread_mutex_lock(&G.mu);
  drows_free(d);
  pthread_mutex_unlock(&G.mu);
  r->dev = NULL;
}

/* the forward of x (host), or of rows of r's mirror (x NULL) */
static int forward_(const bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *x, const bcg_nn_rows *r, long row0,
                    const int *idx, int batch, bcg_real *y) {
  const bcg_real one = 1;
  dptrs p;
  dtape *dt;
  uint64_t t0;
  const bcg_real *P_; /* the parameters on the device: G.params, or a held network's own */
  held_t *h = NULL;
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
  if (held_find(m->params)) {
    if (!(h = held_ok(m))) goto fail; /* failed before: marked already */
    P_ = h->p;
  } else {
    CK(grow(&G.params, &G.cparams, m->nnet));
    CK(params_in(m));
    P_ = G.params;
  }
  ph(PH_PARAMS);
  if (x)
    CK(up(p.x, x, (size_t)batch * m->dim[0] * sizeof(bcg_real)));
  else {
    const drows *d = (const drows *)r->dev;
    const int *di = NULL;
    if (idx) {
      CK(grow(&G.idx, &G.cidx, ((size_t)batch * sizeof(int) + sizeof(bcg_real) - 1) / sizeof(bcg_real)));
      CK(up(G.idx, idx, (size_t)batch * sizeof(int)));
      di = (const int *)G.idx;
    }
    LAUNCH(k_gather, (long)batch * d->width, p.x, d->mem, row0, di, batch, d->width);
    CK(cudaGetLastError());
  }
  ph(PH_IN);
  {
    const bcg_real *a = p.x;
    for (int l = 0; l < m->nlin; l++) {
      int ni = m->dim[l], no = m->dim[l + 1], act = act_of(m, l), ln = ln_of(m, l);
      long n = (long)batch * no;
      const bcg_real *W = P_ + m->off_w[l], *bias = P_ + m->off_b[l];
      const bcg_real *g = ln ? P_ + m->off_lng[l] : NULL, *gb = ln ? P_ + m->off_lnb[l] : NULL;
      bcg_real *z = p.pre[l];
      LAUNCH(k_bias, n, z, bias, n, no);
      ph(PH_ELEM);
      /* row-major z[batch][no] += a[batch][ni] W^T  ==  column-major z^T += W^T^T a^T */
      CB(GEMM(G.h, CUBLAS_OP_T, CUBLAS_OP_N, no, batch, ni, &one, W, ni, a, ni, &one, z, no));
      ph(PH_GEMM);
      if (ln == BCG_LN_PRE_ACT) LN_FWD(no, batch, z, g, gb, p.xhat[l], p.rstd[l], z);
      ph(PH_LN);
      LAUNCH(k_act, n, act, z, p.post[l], n);
      ph(PH_ELEM);
      if (ln == BCG_LN_POST_ACT) LN_FWD(no, batch, p.post[l], g, gb, p.xhat[l], p.rstd[l], p.out[l]);
      ph(PH_LN);
      CK(cudaGetLastError());
      a = p.out[l];
    }
    CK(down(y, a, (size_t)batch * m->dim[m->nlin] * sizeof(bcg_real)));
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
  if (h) h->bad = 1;
  pthread_mutex_unlock(&G.mu);
  return -1;
}

int bcg_cuda_nn_forward(const bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *x, int batch, bcg_real *y) {
  return forward_(m, t, x, NULL, 0, NULL, batch, y);
}

int bcg_cuda_nn_forward_rows(const bcg_mlp *m, bcg_mlp_tape *t, const bcg_nn_rows *r, long row0, const int *idx,
                             int batch, bcg_real *y) {
  return forward_(m, t, NULL, r, row0, idx, batch, y);
}

int bcg_cuda_nn_backward(const bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *dy, bcg_real *grad, bcg_real *dx) {
  const bcg_real one = 1, zero = 0;
  dptrs p;
  dtape *dt = (dtape *)t->dev;
  int batch, gheld = 0;
  bcg_real *d, *e;
  uint64_t t0;
  const bcg_real *P_;   /* the parameters on the device: G.params, or a held network's own */
  bcg_real *GR = NULL; /* the gradient on the device: G.grad, or a held network's own */
  held_t *h = NULL;
  pthread_mutex_lock(&G.mu);
  t0 = bcg_mono_ns();
  ph_begin();
  if (!dt || dt->m != m || dt->batch <= 0 || dt->batch != t->batch) {
    seterr("nn on CUDA: backward without a matching device forward on this tape");
    goto fail;
  }
  batch = dt->batch;
  dlayout(m, dt->cap, dt->mem, &p);
  if (held_find(m->params)) {
    if (!(h = held_ok(m))) goto fail; /* failed before: marked already */
    P_ = h->p;
    gheld = grad == m->grad; /* adds to the held gradient, on the device */
    if (gheld) GR = h->g;
  } else {
    CK(grow(&G.params, &G.cparams, m->nnet));
    CK(params_in(m));
    P_ = G.params;
  }
  if (grad && !gheld) { /* the device sums this backward's gradient from zero; the host adds it to grad at the end */
    CK(grow(&G.grad, &G.cgrad, m->nnet));
    CK(cudaMemsetAsync(G.grad, 0, m->nnet * sizeof(bcg_real), G.st));
    GR = G.grad;
  }
  ph(PH_PARAMS);
  CK(grow(&G.s0, &G.cs0, (size_t)batch * maxdim(m)));
  CK(grow(&G.s1, &G.cs1, (size_t)batch * maxdim(m)));
  d = G.s0;
  e = G.s1;
  CK(up(d, dy, (size_t)batch * m->dim[m->nlin] * sizeof(bcg_real)));
  ph(PH_IN);
  for (int l = m->nlin - 1; l >= 0; l--) {
    int ni = m->dim[l], no = m->dim[l + 1], act = act_of(m, l), ln = ln_of(m, l);
    long n = (long)batch * no;
    const bcg_real *g = ln ? P_ + m->off_lng[l] : NULL;
    bcg_real *dg = ln && grad ? GR + m->off_lng[l] : NULL, *dgb = ln && grad ? GR + m->off_lnb[l] : NULL;
    for (int pass = 0; pass < 2; pass++) {
      /* pass 0: POST_ACT LayerNorm, then the activation; pass 1: PRE_ACT LayerNorm */
      if (pass == 1 && act != BCG_ACT_IDENTITY) LAUNCH(k_act_df, n, act, p.pre[l], p.post[l], d, n);
      ph(PH_ELEM);
      if (ln != (pass == 0 ? BCG_LN_POST_ACT : BCG_LN_PRE_ACT)) continue;
      if (dg) {
        if (colsum(dg, d, p.xhat[l], batch, no) || colsum(dgb, d, NULL, batch, no)) goto fail;
      }
      ph(PH_SUM);
      LN_VJP(no, batch, p.xhat[l], p.rstd[l], g, d);
      ph(PH_LN);
    }
    const bcg_real *a = l == 0 ? p.x : p.out[l - 1];
    if (grad) {
      /* row-major gW[no][ni] += d^T a  ==  column-major gW^T += a^T d */
      CB(GEMM(G.h, CUBLAS_OP_N, CUBLAS_OP_T, ni, no, batch, &one, a, ni, d, no, &one, GR + m->off_w[l], ni));
      ph(PH_GEMM);
      if (colsum(GR + m->off_b[l], d, NULL, batch, no)) goto fail;
      ph(PH_SUM);
    }
    if (l > 0 || dx) /* row-major da[batch][ni] = d W  ==  column-major da^T = W^T d^T */
      CB(GEMM(G.h, CUBLAS_OP_N, CUBLAS_OP_N, ni, batch, no, &one, P_ + m->off_w[l], ni, d, no, &zero, e, ni));
    ph(PH_GEMM);
    CK(cudaGetLastError());
    bcg_real *tmp = d;
    d = e;
    e = tmp;
  }
  /* d now holds dx (after the last swap) */
  if (dx) CK(down(dx, d, (size_t)batch * m->dim[0] * sizeof(bcg_real)));
  if (grad && !gheld) CK(down_add(grad, G.grad, m->nnet));
  /* nothing for the host (a held gradient, no dx): the work stays queued; the
   * held network's next step (bcg_cuda_nn_grad_lanes) waits for it and sees its errors */
  if (dx || (grad && !gheld)) CK(cudaStreamSynchronize(G.st));
  else CK(cudaGetLastError());
  ph(PH_OUT);
  if (P.on) {
    P.s.backwards++;
    P.s.total += 1e-9 * (double)(bcg_mono_ns() - t0);
  }
  pthread_mutex_unlock(&G.mu);
  return 0;
fail:
  if (h) h->bad = 1;
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
