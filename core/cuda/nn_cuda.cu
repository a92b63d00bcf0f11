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
 * cuBLAS run on the calling thread's stream (its context, below). Every call
 * that returns something to the host ends synchronised, so host outputs are
 * ready on return. */
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
#define LAUNCH(k, n, ...) k<<<nblk(n), NT, 0, C->st>>>(__VA_ARGS__) /* C: the calling thread's context */
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
  k_ln_warp<<<(int)(((batch) + LN_WARPS - 1) / LN_WARPS), 32 * LN_WARPS, 0, C->st>>>(no, batch, x, g, b, xhat, rstd, y)
#define LN_VJP(no, batch, xhat, rstd, g, d)                                                           \
  k_ln_vjp_warp<<<(int)(((batch) + LN_WARPS - 1) / LN_WARPS), 32 * LN_WARPS, 0, C->st>>>(no, batch, xhat, rstd, g, d)
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

/* ---- per-thread contexts and process-wide state -----------------------------------------
 * Each calling thread has a context of its own: a stream, a cuBLAS handle
 * (its workspace with it), the scratch buffers of its calls and a pinned
 * staging buffer. So two threads' calls (SHAC's critics beside the backward
 * pass, learner.critic_overlap) run side by side on the device instead of
 * one waiting for the other's. A thread takes a free context at its first
 * call and gives it back to the pool when it exits (a thread started per
 * iteration reuses the same one), so contexts are created as many as
 * threads call at once, and kept until the process ends.
 *
 * The lock G.mu guards only the process-wide tables (contexts, page-locked
 * arrays, held networks, the profile's sums); no device work runs under it.
 * A held network records the stream of its last queued work (an event), and
 * a call from another context first waits for that event on its own stream,
 * so the order of a network's operations is the order of the calls. */

#ifndef BCG_NN_CUDA_STAGE
#define BCG_NN_CUDA_STAGE (1 << 21) /* bytes in each half of the pinned staging buffer */
#endif
/* what one chunk moves: whole reals (down_add adds them) */
#define STAGE ((int)(BCG_NN_CUDA_STAGE / sizeof(bcg_real) * sizeof(bcg_real)))

typedef struct ctx {
  cudaStream_t st;
  cublasHandle_t h;
  bcg_real *params, *grad, *s0, *s1, *part, *idx; /* device (idx: int row indices of a gather) */
  size_t cparams, cgrad, cs0, cs1, cpart, cidx;     /* their capacities in reals */
  double *lanes;                                    /* device [32]: a held gradient's norm lanes */
  char *pin;                                        /* pinned host staging, two halves of STAGE bytes */
  cudaEvent_t ev[2];                                /* the last copy through each half */
  int half;                                         /* the half the next chunk takes */
  int busy;                                         /* a thread has it */
  struct ctx *next;                                 /* every context (G.all) */
} ctx;

static struct {
  pthread_mutex_t mu;
  int ready; /* a device was found */
  ctx *all;
  pthread_key_t key; /* the calling thread's context */
} G = {PTHREAD_MUTEX_INITIALIZER, 0, NULL, 0};

static __thread char ERR[512]; /* the calling thread's last failure */

/* ---- the split of the device calls' time (bcg_nn_cuda_profile) --------------------------
 * Off: nothing but a flag test per phase. On: each phase ends with a device-wide
 * synchronisation and its wall time goes to its bucket, so the phases are
 * attributed exactly (the calls get a little slower: no overlap of a phase with
 * the next launch; with several threads calling at once, a phase's time includes
 * the other threads' work that ends in it). The sums under G.mu. */
enum { PH_PARAMS, PH_IN, PH_GEMM, PH_ELEM, PH_LN, PH_SUM, PH_OUT, PH_N };
static struct {
  int on;
  bcg_nn_cuda_split s;
} P;
static __thread uint64_t ph_t; /* the calling thread's current phase began */

static void ph_begin(void) {
  if (!P.on) return;
  cudaDeviceSynchronize();
  ph_t = bcg_mono_ns();
}

static void ph(int k) {
  if (!P.on) return;
  cudaDeviceSynchronize();
  uint64_t t = bcg_mono_ns();
  double d = 1e-9 * (double)(t - ph_t);
  ph_t = t;
  pthread_mutex_lock(&G.mu);
  double *b[PH_N] = {&P.s.params, &P.s.inputs, &P.s.gemm, &P.s.elementwise, &P.s.layernorm, &P.s.sums, &P.s.outputs};
  *b[k] += d;
  pthread_mutex_unlock(&G.mu);
}

/* a call's totals into the profile: forwards, backwards, rows, optimiser steps and seconds */
static void ph_add(int fwd, int bwd, long rows, int steps, double total, double optimizer) {
  if (!P.on) return;
  pthread_mutex_lock(&G.mu);
  P.s.forwards += fwd;
  P.s.backwards += bwd;
  P.s.rows += rows;
  P.s.steps += steps;
  P.s.total += total;
  P.s.optimizer += optimizer;
  pthread_mutex_unlock(&G.mu);
}

static void seterr(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ERR, sizeof ERR, fmt, ap);
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

/* a thread ends: its context back to the pool (the work it queued stays in order on its stream) */
static void ctx_unbind(void *p) {
  pthread_mutex_lock(&G.mu);
  ((ctx *)p)->busy = 0;
  pthread_mutex_unlock(&G.mu);
}

/* a device is there (once); under G.mu */
static int init_locked(void) {
  if (G.ready) return 0;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n <= 0) {
    seterr("no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return -1;
  }
  if (pthread_key_create(&G.key, ctx_unbind)) {
    seterr("nn on CUDA: no thread-specific key left for the calling threads' contexts");
    return -1;
  }
  __atomic_store_n(&G.ready, 1, __ATOMIC_RELEASE);
  return 0;
}

static void ctx_destroy(ctx *c) {
  if (c->st) cudaStreamDestroy(c->st);
  if (c->h) cublasDestroy(c->h);
  if (c->pin) cudaFreeHost(c->pin);
  for (int i = 0; i < 2; i++)
    if (c->ev[i]) cudaEventDestroy(c->ev[i]);
  free(c);
}

/* a new context: stream, cuBLAS handle on it, staging buffer, its events; NULL with the message set */
static ctx *ctx_create(void) {
  ctx *c = (ctx *)calloc(1, sizeof *c);
  if (!c) {
    seterr("nn on CUDA: out of host memory");
    return NULL;
  }
  CK(cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking));
  CB(cublasCreate(&c->h));
  CB(cublasSetStream(c->h, c->st));
  CB(cublasSetMathMode(c->h, CUBLAS_DEFAULT_MATH)); /* no TF32 / reduced precision */
  CK(cudaHostAlloc((void **)&c->pin, 2 * (size_t)STAGE, cudaHostAllocDefault));
  CK(cudaEventCreateWithFlags(&c->ev[0], cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&c->ev[1], cudaEventDisableTiming));
  return c;
fail:
  ctx_destroy(c);
  return NULL;
}

/* the calling thread's context (taken from the pool or created at its first call); NULL with the message set */
static ctx *my_ctx(void) {
  ctx *c = __atomic_load_n(&G.ready, __ATOMIC_ACQUIRE) ? (ctx *)pthread_getspecific(G.key) : NULL;
  if (c) return c;
  pthread_mutex_lock(&G.mu);
  if (init_locked()) goto out;
  for (c = G.all; c && c->busy; c = c->next) {
  }
  if (!c && (c = ctx_create())) {
    c->next = G.all;
    G.all = c;
  }
  if (c) {
    c->busy = 1;
    pthread_setspecific(G.key, c);
  }
out:
  pthread_mutex_unlock(&G.mu);
  return c;
}

/* every context's queued work done (before host memory a copy may read is unlocked or freed) */
static void sync_all(void) {
  if (__atomic_load_n(&G.ready, __ATOMIC_ACQUIRE)) cudaDeviceSynchronize();
}

int bcg_cuda_nn_init(char *err, size_t errlen) {
  int rc = my_ctx() ? 0 : -1;
  if (rc && err && errlen) snprintf(err, errlen, "%s", ERR);
  return rc;
}

const char *bcg_cuda_nn_error(void) { return ERR; }

/* ---- copies through the pinned staging buffer ----------------------------------------------
 * A copy from or to pageable host memory (the callers' arrays) is staged by
 * the driver at a few GB/s; through our own pinned buffer it runs at the
 * DMA engine's speed. Chunks of STAGE bytes alternate between the buffer's
 * two halves, so the host copies one chunk while the engine moves the other;
 * an event per half says when its last copy has left it. Both run on the
 * calling thread's stream, in order with its kernels. */

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
  int in = 0;
  pthread_mutex_lock(&G.mu);
  for (int i = 0; i < npin && !in; i++)
    if (c >= PIN[i].p && n <= PIN[i].bytes && (size_t)(c - PIN[i].p) <= PIN[i].bytes - n) in = 1;
  pthread_mutex_unlock(&G.mu);
  return in;
}

/* device dst[n bytes] = host src */
static cudaError_t up(ctx *C, void *dst, const void *src, size_t n) {
  if (pinned(src, n)) return cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, C->st);
  for (size_t off = 0; off < n; off += STAGE) {
    size_t len = n - off < (size_t)STAGE ? n - off : (size_t)STAGE;
    int h = C->half;
    C->half ^= 1;
    char *buf = C->pin + (size_t)h * STAGE;
    cudaError_t e = cudaEventSynchronize(C->ev[h]);
    if (e != cudaSuccess) return e;
    memcpy(buf, (const char *)src + off, len);
    if ((e = cudaMemcpyAsync((char *)dst + off, buf, len, cudaMemcpyHostToDevice, C->st)) != cudaSuccess ||
        (e = cudaEventRecord(C->ev[h], C->st)) != cudaSuccess)
      return e;
  }
  return cudaSuccess;
}

/* host dst[n bytes] = device src (add: dst += src, n / sizeof(bcg_real)
 * reals), after the work queued before it; chunk k+1 is queued before the
 * host copies chunk k out */
static cudaError_t down_(ctx *C, void *dst, const void *src, size_t n, int add) {
  if (!add && pinned(dst, n)) {
    cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, C->st);
    return e != cudaSuccess ? e : cudaStreamSynchronize(C->st);
  }
  size_t poff = 0, plen = 0;
  int ph_ = -1;
  for (size_t off = 0;; off += STAGE) {
    int h = -1;
    size_t len = 0;
    cudaError_t e;
    if (off < n) {
      len = n - off < (size_t)STAGE ? n - off : (size_t)STAGE;
      h = C->half;
      C->half ^= 1;
      if ((e = cudaEventSynchronize(C->ev[h])) != cudaSuccess ||
          (e = cudaMemcpyAsync(C->pin + (size_t)h * STAGE, (const char *)src + off, len, cudaMemcpyDeviceToHost,
                               C->st)) != cudaSuccess ||
          (e = cudaEventRecord(C->ev[h], C->st)) != cudaSuccess)
        return e;
    }
    if (ph_ >= 0) {
      if ((e = cudaEventSynchronize(C->ev[ph_])) != cudaSuccess) return e;
      const char *buf = C->pin + (size_t)ph_ * STAGE;
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
static cudaError_t down(ctx *C, void *dst, const void *src, size_t n) { return down_(C, dst, src, n, 0); }
static cudaError_t down_add(ctx *C, bcg_real *dst, const bcg_real *src, size_t n) {
  return down_(C, dst, src, n * sizeof(bcg_real), 1);
}

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
 * full) the call goes through the staging buffer as before. The tables
 * under G.mu. */
/* page-lock host memory [p, p + bytes) where it is: 1, or 0 with the error
 * cleared (it is not sticky; the caller stages its copies instead) */
static int host_lock(const void *p, size_t bytes) {
  if (cudaHostRegister((void *)p, bytes, cudaHostRegisterDefault) == cudaSuccess) return 1;
  (void)cudaGetLastError();
  return 0;
}

/* undo host_lock, once no copy from the memory is in flight (on any thread's stream) */
static void host_unlock(const void *p) {
  sync_all();
  cudaHostUnregister((void *)p);
}

int bcg_cuda_nn_pin(const void *p, size_t bytes) {
  int rc = -1;
  if (!my_ctx()) return -1;
  pthread_mutex_lock(&G.mu);
  const char *c = (const char *)p;
  int overlap = 0;
  for (int i = 0; i < npin; i++)
    if (c < PIN[i].p + PIN[i].bytes && PIN[i].p < c + bytes) overlap = 1;
  if (!overlap && npin < NPIN && host_lock(p, bytes)) {
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

/* under G.mu */
static int reg_find(const void *p, size_t bytes) {
  for (int i = 0; i < nreg; i++)
    if (R[i].p == p && bytes <= R[i].bytes) return i;
  return -1;
}

/* C->params = m's parameters, after the work queued before on C's stream */
static cudaError_t params_in(ctx *C, const bcg_mlp *m) {
  size_t b = m->nnet * sizeof(bcg_real);
  pthread_mutex_lock(&G.mu);
  int i = reg_find(m->params, b);
  if (i < 0 && nreg < NREG && host_lock(m->params, b)) {
    R[nreg].p = m->params;
    R[nreg].bytes = b;
    i = nreg++;
  }
  pthread_mutex_unlock(&G.mu);
  if (i >= 0) return cudaMemcpyAsync(C->params, m->params, b, cudaMemcpyHostToDevice, C->st);
  return up(C, C->params, m->params, b);
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
 * step runs there (k_sumsq_lanes, then k_clip_adam). The table under G.mu;
 * an entry does not move while held, so a call uses it after the lookup.
 * Work on it may stay queued on the stream of the thread that queued it:
 * h->ev marks its end, and a call from another thread's stream waits for it
 * first (held_use), then records its own (held_done). */
typedef struct held_t {
  const void *key; /* m->params */
  size_t n;        /* m->nparams */
  const bcg_adam *opt;
  bcg_real *p, *g, *am, *av; /* device; am, av NULL without opt */
  int bad;                   /* a device failure since the hold: its calls fail */
  cudaEvent_t ev;            /* after the last work queued on it */
  const ctx *last;           /* the context that queued it (NULL: none pending) */
} held_t;
#define NHELD 64
static held_t *HD[NHELD];
static int nheld;

static held_t *held_find(const void *key) {
  for (int i = 0; i < nheld; i++)
    if (HD[i]->key == key) return HD[i];
  return NULL;
}

/* the entry of m if held (looked up under G.mu), else NULL */
static held_t *held_lookup(const void *key) {
  pthread_mutex_lock(&G.mu);
  held_t *h = held_find(key);
  pthread_mutex_unlock(&G.mu);
  return h;
}

/* C's stream waits for the work another thread queued on h */
static cudaError_t held_use(ctx *C, held_t *h) {
  if (!h->last || h->last == C) return cudaSuccess;
  return cudaStreamWaitEvent(C->st, h->ev, 0);
}

/* h's queued work now ends with C's */
static cudaError_t held_done(ctx *C, held_t *h) {
  h->last = C;
  return cudaEventRecord(h->ev, C->st);
}

static void held_buffers_free(held_t *h) {
  bcg_real *b[4] = {h->p, h->g, h->am, h->av};
  for (int i = 0; i < 4; i++)
    if (b[i]) cudaFree(b[i]);
  if (h->ev) cudaEventDestroy(h->ev);
}

/* under G.mu */
static void held_free(held_t *h) {
  for (int i = 0; i < nheld; i++)
    if (HD[i] == h) {
      HD[i] = HD[--nheld];
      break;
    }
  held_buffers_free(h);
  free(h);
}

/* under G.mu */
static void held_drop(const void *key) {
  held_t *h = held_find(key);
  if (!h) return;
  sync_all();
  held_free(h);
}

int bcg_cuda_nn_hold(const bcg_mlp *m, const bcg_adam *opt) {
  ctx *C = my_ctx();
  held_t *h = NULL;
  size_t b = m->nparams * sizeof(bcg_real);
  if (!C) return -1;
  if (held_lookup(m->params)) {
    seterr("nn on CUDA: the network is held already");
    return -1;
  }
  if (!(h = (held_t *)calloc(1, sizeof *h))) {
    seterr("nn on CUDA: out of host memory");
    return -1;
  }
  h->key = m->params;
  h->n = m->nparams;
  h->opt = opt;
  CK(cudaEventCreateWithFlags(&h->ev, cudaEventDisableTiming));
  CK(cudaMalloc((void **)&h->p, b));
  CK(cudaMalloc((void **)&h->g, b));
  CK(up(C, h->p, m->params, b));
  CK(up(C, h->g, m->grad, b));
  if (opt) {
    CK(cudaMalloc((void **)&h->am, b));
    CK(cudaMalloc((void **)&h->av, b));
    CK(up(C, h->am, opt->m, b));
    CK(up(C, h->av, opt->v, b));
  }
  CK(cudaStreamSynchronize(C->st));
  pthread_mutex_lock(&G.mu);
  if (nheld == NHELD || held_find(m->params)) {
    seterr(nheld == NHELD ? "nn on CUDA: more than %d networks held at once" : "nn on CUDA: the network is held already",
           NHELD);
    pthread_mutex_unlock(&G.mu);
    goto fail;
  }
  HD[nheld++] = h;
  pthread_mutex_unlock(&G.mu);
  return 0;
fail:
  held_buffers_free(h);
  free(h);
  return -1;
}

int bcg_cuda_nn_release(bcg_mlp *m, bcg_adam *opt) {
  int rc = 0;
  size_t b;
  ctx *C = my_ctx();
  held_t *h = held_lookup(m->params);
  if (!h) return 0;
  if (!C) {
    rc = -1;
    goto out;
  }
  b = h->n * sizeof(bcg_real);
  if (h->bad) {
    rc = -1; /* the device state is not trusted: the host keeps what it had at the hold */
  } else {
    CK(held_use(C, h));
    CK(down(C, m->params, h->p, b));
    CK(down(C, m->grad, h->g, b));
    if (opt && h->am) {
      CK(down(C, opt->m, h->am, b));
      CK(down(C, opt->v, h->av, b));
    }
    CK(cudaStreamSynchronize(C->st));
  }
  goto out;
fail:
  rc = -1;
out:
  pthread_mutex_lock(&G.mu);
  if (h->last && h->last != C) sync_all(); /* work another thread queued on it (a failed call) */
  held_free(h);
  pthread_mutex_unlock(&G.mu);
  return rc;
}

int bcg_cuda_nn_held(const bcg_mlp *m, const bcg_adam **opt) {
  pthread_mutex_lock(&G.mu);
  const held_t *h = held_find(m->params);
  if (h && opt) *opt = h->opt;
  pthread_mutex_unlock(&G.mu);
  return h != NULL;
}

int bcg_cuda_nn_zero_grad(const bcg_mlp *m) {
  ctx *C = my_ctx();
  held_t *h = C ? held_lookup(m->params) : NULL;
  if (!C) return -1;
  if (!h) {
    seterr("nn on CUDA: zero_grad of a network that is not held");
    return -1;
  }
  if (held_use(C, h) != cudaSuccess || cudaMemsetAsync(h->g, 0, h->n * sizeof(bcg_real), C->st) != cudaSuccess ||
      held_done(C, h) != cudaSuccess) {
    h->bad = 1;
    seterr("nn on CUDA: zeroing a held gradient failed");
    return -1;
  }
  return 0;
}

/* the held network of m, usable; else NULL with the message set */
/* h (looked up already) if usable; else NULL with the message set */
static held_t *held_usable(held_t *h) {
  if (!h) seterr("nn on CUDA: the network is not held");
  else if (h->bad) {
    seterr("nn on CUDA: an earlier device call of this held network failed");
    h = NULL;
  }
  return h;
}

static held_t *held_ok(const bcg_mlp *m) { return held_usable(held_lookup(m->params)); }

int bcg_cuda_nn_grad_copy(const bcg_mlp *m, bcg_real *host, int to_host) {
  ctx *C = my_ctx();
  held_t *h = C ? held_ok(m) : NULL;
  if (!h) return -1;
  CK(held_use(C, h));
  if (to_host) CK(down(C, host, h->g, m->nnet * sizeof(bcg_real)));
  else {
    CK(up(C, h->g, host, m->nnet * sizeof(bcg_real)));
    CK(cudaStreamSynchronize(C->st)); /* host may change once this returns */
  }
  h->last = NULL; /* C's stream is synchronised: nothing pending */
  return 0;
fail:
  h->bad = 1;
  return -1;
}

/* a held network's extra parameters (m->nnet .. m->nparams) keep their gradient on the
 * host (bcg_mlp_hold): the host's extra_grad into the device gradient's tail (queued) */
static cudaError_t extra_grad_in(ctx *C, held_t *h, const bcg_mlp *m) {
  if (h->n == m->nnet) return cudaSuccess;
  return up(C, h->g + m->nnet, m->extra_grad, (h->n - m->nnet) * sizeof(bcg_real));
}

int bcg_cuda_nn_grad_lanes(const bcg_mlp *m, double acc[32]) {
  uint64_t t0 = bcg_mono_ns();
  ctx *C = my_ctx();
  held_t *h = C ? held_ok(m) : NULL;
  if (!h) return -1;
  CK(held_use(C, h));
  CK(extra_grad_in(C, h, m));
  if (!C->lanes) CK(cudaMalloc((void **)&C->lanes, 32 * sizeof(double)));
  LAUNCH(k_sumsq_lanes, 32, C->lanes, h->g, (long)h->n);
  CK(cudaGetLastError());
  CK(down(C, acc, C->lanes, 32 * sizeof(double))); /* waits for it, and for the backwards before */
  h->last = NULL;
  ph_add(0, 0, 0, 1, 0, 1e-9 * (double)(bcg_mono_ns() - t0));
  return 0;
fail:
  h->bad = 1;
  return -1;
}

int bcg_cuda_nn_clip_adam(const bcg_mlp *m, const bcg_adam *opt, int clip, double c, int adam, bcg_real ss,
                          bcg_real isbc2) {
  uint64_t t0 = bcg_mono_ns();
  ctx *C = my_ctx();
  held_t *h = C ? held_ok(m) : NULL;
  if (!h) return -1;
  if (adam && (h->opt != opt || !h->am)) {
    seterr("nn on CUDA: an optimiser step with another optimiser than the network was held with");
    goto fail;
  }
  CK(held_use(C, h));
  CK(extra_grad_in(C, h, m));
  LAUNCH(k_clip_adam, (long)h->n, h->p, h->g, h->am, h->av, (long)h->n, clip, c, adam, opt->beta1, opt->beta2,
         opt->weight_decay, opt->eps, ss, isbc2);
  CK(cudaGetLastError());
  if (h->n > m->nnet) { /* the extra parameters and gradient back to the host (down waits for them) */
    CK(down(C, m->extra_params, h->p + m->nnet, (h->n - m->nnet) * sizeof(bcg_real)));
    CK(down(C, m->extra_grad, h->g + m->nnet, (h->n - m->nnet) * sizeof(bcg_real)));
  }
  CK(held_done(C, h));
  if (P.on) {
    CK(cudaStreamSynchronize(C->st));
    ph_add(0, 0, 0, 0, 0, 1e-9 * (double)(bcg_mono_ns() - t0));
  }
  return 0;
fail:
  h->bad = 1;
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
  if (dt->mem) cudaFree(dt->mem); /* waits for the device */
  free(dt);
  t->dev = NULL;
}

/* out[no] += batch sums of d (* w) */
static int colsum(ctx *C, bcg_real *out, const bcg_real *d, const bcg_real *w, int batch, int no) {
  int nchunk = (batch + CHUNK - 1) / CHUNK;
  if (nchunk <= 1) {
    LAUNCH(k_colsum_direct, no, out, d, w, batch, no);
  } else {
    CK(grow(&C->part, &C->cpart, (size_t)nchunk * no));
    LAUNCH(k_colsum_part, (long)nchunk * no, C->part, d, w, batch, no, nchunk);
    LAUNCH(k_colsum_fin, no, out, C->part, nchunk, no);
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
  ctx *C = my_ctx();
  if (!C) return -1;
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
    pthread_mutex_lock(&G.mu);
    if (bytes && reg_find(r->host, bytes) < 0 && host_lock(r->host, bytes)) d->reg = r->host;
    pthread_mutex_unlock(&G.mu);
  }
  if (d->reg)
    CK(cudaMemcpyAsync(d->mem + (size_t)row0 * d->width, r->host + (size_t)row0 * d->width,
                       (size_t)n * d->width * sizeof(bcg_real), cudaMemcpyHostToDevice, C->st));
  else
    CK(up(C, d->mem + (size_t)row0 * d->width, r->host + (size_t)row0 * d->width,
          (size_t)n * d->width * sizeof(bcg_real)));
  CK(cudaStreamSynchronize(C->st)); /* the mirror is complete for any thread's stream */
  return 0;
fail:
  return -1;
}

void bcg_cuda_nn_rows_free(bcg_nn_rows *r) {
  if (!r || !r->dev) return;
  drows *d = (drows *)r->dev;
  drows_free(d);
  r->dev = NULL;
}

/* the forward of x (host), or of rows of r's mirror (x NULL) */
static int forward_(const bcg_mlp *m, bcg_mlp_tape *t, const bcg_real *x, const bcg_nn_rows *r, long row0,
                    const int *idx, int batch, bcg_real *y) {
  const bcg_real one = 1;
  dptrs p;
  dtape *dt;
  uint64_t t0;
  const bcg_real *P_; /* the parameters on the device: C->params, or a held network's own */
  held_t *h = NULL;
  ctx *C = my_ctx();
  if (!C) return -1;
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
  if ((h = held_lookup(m->params))) {
    if (!(h = held_usable(h))) goto fail; /* failed before: marked already */
    CK(held_use(C, h));
    P_ = h->p;
  } else {
    CK(grow(&C->params, &C->cparams, m->nnet));
    CK(params_in(C, m));
    P_ = C->params;
  }
  ph(PH_PARAMS);
  if (x)
    CK(up(C, p.x, x, (size_t)batch * m->dim[0] * sizeof(bcg_real)));
  else {
    const drows *d = (const drows *)r->dev;
    const int *di = NULL;
    if (idx) {
      CK(grow(&C->idx, &C->cidx, ((size_t)batch * sizeof(int) + sizeof(bcg_real) - 1) / sizeof(bcg_real)));
      CK(up(C, C->idx, idx, (size_t)batch * sizeof(int)));
      di = (const int *)C->idx;
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
      CB(GEMM(C->h, CUBLAS_OP_T, CUBLAS_OP_N, no, batch, ni, &one, W, ni, a, ni, &one, z, no));
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
    CK(down(C, y, a, (size_t)batch * m->dim[m->nlin] * sizeof(bcg_real)));
  }
  CK(cudaStreamSynchronize(C->st));
  if (h) h->last = NULL; /* its work, and what it waited for, is done */
  ph(PH_OUT);
  dt->batch = batch;
  ph_add(1, 0, batch, 0, 1e-9 * (double)(bcg_mono_ns() - t0), 0);
  return 0;
fail:
  if (h) h->bad = 1;
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
  const bcg_real *P_;   /* the parameters on the device: C->params, or a held network's own */
  bcg_real *GR = NULL; /* the gradient on the device: C->grad, or a held network's own */
  held_t *h = NULL;
  ctx *C = my_ctx();
  if (!C) return -1;
  t0 = bcg_mono_ns();
  ph_begin();
  if (!dt || dt->m != m || dt->batch <= 0 || dt->batch != t->batch) {
    seterr("nn on CUDA: backward without a matching device forward on this tape");
    goto fail;
  }
  batch = dt->batch;
  dlayout(m, dt->cap, dt->mem, &p);
  if ((h = held_lookup(m->params))) {
    if (!(h = held_usable(h))) goto fail; /* failed before: marked already */
    CK(held_use(C, h));
    P_ = h->p;
    gheld = grad == m->grad; /* adds to the held gradient, on the device */
    if (gheld) GR = h->g;
  } else {
    CK(grow(&C->params, &C->cparams, m->nnet));
    CK(params_in(C, m));
    P_ = C->params;
  }
  if (grad && !gheld) { /* the device sums this backward's gradient from zero; the host adds it to grad at the end */
    CK(grow(&C->grad, &C->cgrad, m->nnet));
    CK(cudaMemsetAsync(C->grad, 0, m->nnet * sizeof(bcg_real), C->st));
    GR = C->grad;
  }
  ph(PH_PARAMS);
  CK(grow(&C->s0, &C->cs0, (size_t)batch * maxdim(m)));
  CK(grow(&C->s1, &C->cs1, (size_t)batch * maxdim(m)));
  d = C->s0;
  e = C->s1;
  CK(up(C, d, dy, (size_t)batch * m->dim[m->nlin] * sizeof(bcg_real)));
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
        if (colsum(C, dg, d, p.xhat[l], batch, no) || colsum(C, dgb, d, NULL, batch, no)) goto fail;
      }
      ph(PH_SUM);
      LN_VJP(no, batch, p.xhat[l], p.rstd[l], g, d);
      ph(PH_LN);
    }
    const bcg_real *a = l == 0 ? p.x : p.out[l - 1];
    if (grad) {
      /* row-major gW[no][ni] += d^T a  ==  column-major gW^T += a^T d */
      CB(GEMM(C->h, CUBLAS_OP_N, CUBLAS_OP_T, ni, no, batch, &one, a, ni, d, no, &one, GR + m->off_w[l], ni));
      ph(PH_GEMM);
      if (colsum(C, GR + m->off_b[l], d, NULL, batch, no)) goto fail;
      ph(PH_SUM);
    }
    if (l > 0 || dx) /* row-major da[batch][ni] = d W  ==  column-major da^T = W^T d^T */
      CB(GEMM(C->h, CUBLAS_OP_N, CUBLAS_OP_N, ni, batch, no, &one, P_ + m->off_w[l], ni, d, no, &zero, e, ni));
    ph(PH_GEMM);
    CK(cudaGetLastError());
    bcg_real *tmp = d;
    d = e;
    e = tmp;
  }
  /* d now holds dx (after the last swap) */
  if (dx) CK(down(C, dx, d, (size_t)batch * m->dim[0] * sizeof(bcg_real)));
  if (grad && !gheld) CK(down_add(C, grad, C->grad, m->nnet));
  /* nothing for the host (a held gradient, no dx): the work stays queued; the
   * held network's next step (bcg_cuda_nn_grad_lanes) waits for it and sees its errors */
  if (dx || (grad && !gheld)) {
    CK(cudaStreamSynchronize(C->st));
    if (h) h->last = NULL;
  } else {
    CK(cudaGetLastError());
    if (h) CK(held_done(C, h)); /* queued: another thread's call on h waits for it */
  }
  ph(PH_OUT);
  ph_add(0, 1, 0, 0, 1e-9 * (double)(bcg_mono_ns() - t0), 0);
  return 0;
fail:
  if (h) h->bad = 1;
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
