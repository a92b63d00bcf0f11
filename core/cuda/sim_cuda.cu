/* core/cuda/sim_cuda.cu - batched stepping on a CUDA device (bcg/sim_cuda.h).
 *
 * The device-side mirror of core/sim.c: one thread per environment, each
 * kernel a thin wrapper around the BCG_HD halves of bcg/step.h, with the
 * contact plugin's CUDA entry points in between. Every per-environment
 * reduction (the contact diagnostics) is done by that environment's thread:
 * no atomics. */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/rng.h"
#include "bcg/sim.h"
#include "bcg/sim_cuda.h"
#include "sim_common.h"

/* the unit of the interleaved workspace buffers (see below): one real */
#ifdef BCG_REAL_FLOAT
typedef unsigned int wword;
#else
typedef unsigned long long wword;
#endif

struct bcg_cuda_sim {
  const bcg_model *model;
  bcg_simparams sp; /* host copy (ncmax = 0 without a plugin, as in bcg_sim) */
  int cap, ncon, nq, nv, nu;
  const bcg_contact_ops *cops;
  void *cself;
  int block;
  int async;
  int store_full; /* backward: the recompute stores the whole first-half workspace (ws_full) */
  int stack_vjp;  /* the per-thread stack was raised for the adjoint kernels' frames (reserve_stack) */
  size_t bytes;   /* the batch's device memory */
  cudaStream_t st;
  /* device memory */
  bcg_mdata *m;
  bcg_simparams *spd;
  wword *ws;  /* interleaved persist set, [WSW(bcg_stepws)][cap] words */
  wword *adj; /* interleaved adjoint hand-off, [WSW(bcg_stepadj)][cap] words */
  int *nact, *bad;
  bcg_real *gap, *v0, *c, *G, *mu, *lam, *fn;
  bcg_real *lamb, *gapb, *v0b, *cb, *Gb;
  bcg_real *maxfn, *maxpen;
  bcg_real *scratch; /* 2 ping-pong state buffers [cap][nq + nv] of the control step */
  bcg_real *adjbuf;  /* 2 ping-pong adjoint buffers [cap][2 nv] of the control-step VJP */
  /* domain randomisation (bcg_cuda_sim_set_domain) and the slot ->
   * environment map (bcg_cuda_sim_set_envmap). The kernels index dm / dmu by
   * batch slot: they point at em / emu (identity map) or at sm / smu, the
   * per-slot copies gathered through the map. */
  const bcg_domain *dom; /* host domain (push clock), not owned */
  int ndom;
  bcg_mdata *dm;   /* per-slot models seen by the kernels, or NULL */
  bcg_real *dmu;       /* per-slot friction seen by the kernels, or NULL */
  bcg_mdata *em;   /* [ndom] per-environment models, or NULL */
  bcg_real *emu;       /* [ndom] per-environment friction, or NULL */
  uint32_t *dclock; /* [ndom] push clock copied from the host at each control step */
  int mapped, nmap; /* a non-identity map of nmap slots is active */
  int ngath;        /* leading entries of hmap whose sm / smu are gathered */
  int *dmap;        /* [cap] the map on the device */
  int *hmap;        /* [cap] host copy of the active map */
  bcg_mdata *sm;    /* [cap] models gathered per slot (allocated on first use) */
  bcg_real *smu;        /* [cap] friction gathered per slot */
  /* bcg_cuda_sim_update_domain's staging: the re-drawn environments' models,
   * friction and indices packed in page-locked host memory, sent in one copy
   * and scattered on the device (grown on demand; bytes) */
  char *hstage, *dstage;
  size_t cstage;
  /* stage timing */
  int timing;
  cudaEvent_t t0, t1;
  double ms[BCG_CUDA_NSTAGE];
  char errmsg[640];
};

/* ---- kernels --------------------------------------------------------------------- */

/* ---- the workspace between kernels ------------------------------------------------
 * Every kernel works on a thread-local bcg_stepws / bcg_stepadj (CUDA local
 * memory, which the hardware interleaves word by word across the threads of
 * a warp: the same access pattern in step.h's loops becomes one coalesced
 * transaction per warp instead of 32 separate ones, as an array of structs in
 * global memory gave). Only what the next kernel needs crosses kernels, in
 * global buffers laid out the same way: word i of environment e at
 * buf[i * cap + e], i counted in the struct's own words, so a copy is a
 * coalesced strided loop and the struct layout stays step.h's.
 *   k_pre      -> ws: status, nact, cid, qM, L, ufree, J rows (the "persist" set)
 *   k_post     <- ws (persist)
 *   k_post_vjp <- ws (persist); -> adj: Hb, Jb rows, ufreeb, qMb
 *   k_pre_vjp  recomputes bcg_substep_pre locally (cheaper than storing and
 *              reloading the kinematics, RNEA and CRBA workspaces), <- adj. */
#define WSW(T) ((sizeof(T) + sizeof(wword) - 1) / sizeof(wword)) /* words per struct */

/* words [w0, w1) covering bytes [off, off + bytes) of the struct */
__device__ __forceinline__ void ws_load(void *loc, const wword *__restrict__ g, size_t cap, int e, size_t off,
                                        size_t bytes) {
  size_t w0 = off / sizeof(wword), w1 = (off + bytes + sizeof(wword) - 1) / sizeof(wword);
  char *l = (char *)loc; /* memcpy: the struct's fields are read with their own types (no aliasing UB) */
  for (size_t w = w0; w < w1; w++) {
    wword v = g[w * cap + e];
    memcpy(l + w * sizeof(wword), &v, sizeof v);
  }
}
__device__ __forceinline__ void ws_store(const void *loc, wword *__restrict__ g, size_t cap, int e, size_t off,
                                         size_t bytes) {
  size_t w0 = off / sizeof(wword), w1 = (off + bytes + sizeof(wword) - 1) / sizeof(wword);
  const char *l = (const char *)loc;
  for (size_t w = w0; w < w1; w++) {
    wword v;
    memcpy(&v, l + w * sizeof(wword), sizeof v);
    g[w * cap + e] = v;
  }
}

#define WS_OFF(f) offsetof(bcg_stepws, f)
#define AD_OFF(f) offsetof(bcg_stepadj, f)

/* the persist set of a stepws (ld = 1: load from g, else store to g).
 * status, nact and cid[] are adjacent ints: one range. */
__device__ __forceinline__ void ws_persist(int ld, bcg_stepws *w, wword *g, size_t cap, int e, int nq, int nv) {
#define WS_X(off, bytes) (ld ? ws_load(w, g, cap, e, (off), (bytes)) : ws_store(w, g, cap, e, (off), (bytes)))
  WS_X(WS_OFF(status), sizeof(int));
  WS_X(WS_OFF(nact), sizeof(int));
  int na = w->nact;
  WS_X(WS_OFF(cid), sizeof(int) * (size_t)na);
  WS_X(WS_OFF(qM), sizeof(bcg_real) * (size_t)nq);
  WS_X(WS_OFF(L), sizeof(bcg_real) * (size_t)nv * nv);
  WS_X(WS_OFF(ufree), sizeof(bcg_real) * (size_t)nv);
  for (int r = 0; r < 3 * na; r++) WS_X(WS_OFF(J) + sizeof(bcg_real) * (size_t)r * BCG_MAX_DOF, sizeof(bcg_real) * (size_t)nv);
#undef WS_X
}

/* the pieces of a stepadj that bcg_substep_post_vjp hands to bcg_substep_pre_vjp */
__device__ __forceinline__ void adj_handoff(int ld, bcg_stepadj *A, int na, wword *g, size_t cap, int e, int nv) {
#define AD_X(off, bytes) (ld ? ws_load(A, g, cap, e, (off), (bytes)) : ws_store(A, g, cap, e, (off), (bytes)))
  AD_X(AD_OFF(Hb), sizeof(bcg_real) * (size_t)nv * nv);
  AD_X(AD_OFF(ufreeb), sizeof(bcg_real) * (size_t)nv);
  AD_X(AD_OFF(qMb), sizeof(bcg_real) * (size_t)nv);
  for (int r = 0; r < 3 * na; r++)
    AD_X(AD_OFF(Jb) + sizeof(bcg_real) * (size_t)r * BCG_MAX_DOF, sizeof(bcg_real) * (size_t)nv);
#undef AD_X
}

/* Everything bcg_substep_pre_vjp reads of a stepws (the persist set plus the
 * kinematics, RNEA and CRBA workspaces, y, K rows and contact points), for
 * the "store" variant of the backward pass: the recompute kernel of the
 * backward writes it, k_pre_vjp reads it instead of recomputing the first
 * half (BCG_CUDA_PRE_VJP=store|recompute; see bcg_cuda_sim_create). */
__device__ __forceinline__ void ws_full(int ld, bcg_stepws *w, wword *g, size_t cap, int e, const bcg_mdata *m,
                                        int need_K) {
  int nq = m->nq, nv = m->nv, nb = m->nbody;
  ws_persist(ld, w, g, cap, e, nq, nv);
  int na = w->nact;
  size_t R = sizeof(bcg_real);
#define WF(off, bytes) (ld ? ws_load(w, g, cap, e, (off), (bytes)) : ws_store(w, g, cap, e, (off), (bytes)))
#define KO(f) (offsetof(bcg_stepws, k) + offsetof(bcg_kin, f))
#define RO(f) (offsetof(bcg_stepws, rw) + offsetof(bcg_rnea_ws, f))
#define CO(f) (offsetof(bcg_stepws, cw) + offsetof(bcg_crba_ws, f))
  WF(KO(o), 3 * R);
  WF(KO(R), 9 * R * nb); WF(KO(p), 3 * R * nb); WF(KO(com), 3 * R * nb); WF(KO(Ic), 9 * R * nb);
  WF(KO(h), 3 * R * nb); WF(KO(Ib), 9 * R * nb); WF(KO(cdof), 6 * R * nv); WF(KO(anchor), 3 * R * nv);
  WF(RO(V), 6 * R * nb); WF(RO(A), 6 * R * nb); WF(RO(f), 6 * R * nb); WF(RO(cdd), 6 * R * nv);
  WF(RO(Vpre), 6 * R * nv);
  WF(CO(cm), R * nb); WF(CO(ch), 3 * R * nb); WF(CO(cI), 9 * R * nb);
  WF(WS_OFF(y), R * nv); WF(WS_OFF(b), R * nv); WF(WS_OFF(tau), R * nv);
  WF(WS_OFF(cpos), 3 * R * na);
  if (need_K) { /* K holds Y = L^-T J^T, which bcg_substep_pre_vjp reads */
    for (int r = 0; r < 3 * na; r++) WF(WS_OFF(K) + R * (size_t)r * BCG_MAX_DOF, R * nv);
  }
#undef WF
#undef KO
#undef RO
#undef CO
}

/* First half. Reads q, u with row strides qs, us (plain batches, ping-pong
 * buffers or the tape). If tape != NULL stores (q, u) of each environment
 * there ([n][nq + nv]); if zero_lam, zeroes this environment's impulses
 * (no contact plugin). */
/* the model of environment e: its randomised copy, or the shared one */
__device__ __forceinline__ const bcg_mdata *env_model(const bcg_mdata *m, const bcg_mdata *dm, int e) {
  return dm ? dm + e : m;
}

__global__ void k_pre(const bcg_mdata *__restrict__ m, const bcg_mdata *dm, const bcg_real *__restrict__ dmu,
                      const bcg_simparams *__restrict__ sp, int n, int nc,
                      const bcg_real *__restrict__ q, int qs, const bcg_real *__restrict__ u, int us,
                      const bcg_real *__restrict__ a, wword *ws, size_t cap, int *nact, bcg_real *gap, bcg_real *v0, bcg_real *c,
                      bcg_real *G, bcg_real *mu, bcg_real *tape, int zero_lam, bcg_real *lam, bcg_real *fn, int full) {
  int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  int nq = m->nq, nv = m->nv, nu = m->nu, n3 = 3 * nc;
  const bcg_real *qe = q + (size_t)e * qs, *ue = u + (size_t)e * us;
  if (tape) {
    bcg_real *t = tape + (size_t)e * (nq + nv);
    for (int i = 0; i < nq; i++) t[i] = qe[i];
    for (int i = 0; i < nv; i++) t[nq + i] = ue[i];
  }
  const bcg_mdata *me = env_model(m, dm, e);
  bcg_stepws w;
  bcg_substep_pre(me, sp, qe, ue, a + (size_t)e * nu, &w, nc, &nact[e], gap + (size_t)e * nc,
                  v0 + (size_t)e * n3, c + (size_t)e * n3, G ? G + (size_t)e * n3 * n3 : NULL, mu + (size_t)e * nc);
  if (full) ws_full(0, &w, ws, cap, e, me, sp->need_G);
  else ws_persist(0, &w, ws, cap, e, nq, nv);
  if (dmu) /* per-environment friction (as core/sim.c) */
    for (int r = 0; r < w.nact; r++)
      if (me->cp_friction[w.cid[r]] > 0) mu[(size_t)e * nc + r] = dmu[e];
  if (zero_lam) {
    for (int r = 0; r < n3; r++) lam[(size_t)e * n3 + r] = 0;
    for (int r = 0; r < nc; r++) fn[(size_t)e * nc + r] = 0;
  }
}

/* Second half, and this environment's diagnostics. */
__global__ void k_post(const bcg_mdata *__restrict__ m, const bcg_mdata *dm, const bcg_simparams *__restrict__ sp, int n, int nc,
                       wword *ws, size_t cap, const bcg_real *__restrict__ lam, bcg_real *qo, bcg_real *uo, const int *__restrict__ nact,
                       const bcg_real *__restrict__ fn, const bcg_real *__restrict__ gap, bcg_real *maxfn, bcg_real *maxpen,
                       int *bad) {
  int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  bcg_stepws w;
  ws_persist(1, &w, ws, cap, e, m->nq, m->nv);
  bcg_substep_post(env_model(m, dm, e), sp, &w, lam + (size_t)e * 3 * nc, qo + (size_t)e * m->nq,
                   uo + (size_t)e * m->nv);
  bcg_real mf = maxfn[e], mp = maxpen[e];
  for (int r = 0; r < nact[e]; r++) {
    bcg_real f = fn[(size_t)e * nc + r], pen = -gap[(size_t)e * nc + r];
    if (f > mf) mf = f;
    if (pen > mp) mp = pen;
  }
  maxfn[e] = mf;
  maxpen[e] = mp;
  if (w.status) bad[e] = w.status;
}

/* VJP: recompute the second half (its outputs are not needed: they go to
 * thread-local scratch), then its adjoint. Adjoint rows have strides. */
__global__ void k_post_vjp(const bcg_mdata *__restrict__ m, const bcg_mdata *dm, const bcg_simparams *__restrict__ sp, int n, int nc,
                           wword *ws, size_t cap, const bcg_real *__restrict__ lam, const bcg_real *__restrict__ qob,
                           const bcg_real *__restrict__ uob, int bs, bcg_real *lamb, wword *adj) {
  int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  int n3 = 3 * nc;
  bcg_real qE[BCG_MAX_Q], uE[BCG_MAX_DOF];
  const bcg_mdata *me = env_model(m, dm, e);
  bcg_stepws w;
  bcg_stepadj A;
  ws_persist(1, &w, ws, cap, e, m->nq, m->nv);
  bcg_substep_post(me, sp, &w, lam + (size_t)e * n3, qE, uE);
  bcg_substep_post_vjp(me, sp, &w, lam + (size_t)e * n3, qob + (size_t)e * bs, uob + (size_t)e * bs, nc,
                       lamb + (size_t)e * n3, &A);
  adj_handoff(0, &A, w.nact, adj, cap, e, m->nv);
}

/* VJP of the first half: recompute it into thread-local memory (its contact
 * outputs go to scratch: the plugin's VJP has already run), then its adjoint. */
__global__ void k_pre_vjp(const bcg_mdata *__restrict__ m, const bcg_mdata *dm, const bcg_simparams *__restrict__ sp, int n, int nc,
                          const bcg_real *__restrict__ q, int qs, const bcg_real *__restrict__ u, int us,
                          const bcg_real *__restrict__ a, const bcg_real *__restrict__ gapb,
                          const bcg_real *__restrict__ v0b, const bcg_real *__restrict__ cb, const bcg_real *__restrict__ Gb,
                          wword *adj, size_t cap, bcg_real *qb, bcg_real *ub, int bs, bcg_real *ab, wword *ws) {
  int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  int nv = m->nv, nu = m->nu, n3 = 3 * nc;
  const bcg_mdata *me = env_model(m, dm, e);
  const bcg_real *qe = q + (size_t)e * qs, *ue = u + (size_t)e * us, *ae = a + (size_t)e * nu;
  bcg_stepws w;
  bcg_stepadj A;
  if (ws) /* stored by the recompute kernel (ws_full) */
    ws_full(1, &w, ws, cap, e, me, sp->need_G);
  else {
    int na;
    bcg_real sgap[BCG_MAX_CONTACT], smu[BCG_MAX_CONTACT], sv0[3 * BCG_MAX_CONTACT], sc[3 * BCG_MAX_CONTACT];
    bcg_substep_pre(me, sp, qe, ue, ae, &w, nc, &na, sgap, sv0, sc, NULL, smu);
  }
  adj_handoff(1, &A, w.nact, adj, cap, e, nv);
  bcg_real *ube = ub + (size_t)e * bs;
  for (int d = 0; d < nv; d++) ube[d] = 0;
  /* the active block of this environment's G adjoint, staged in local memory
   * (read three times by bcg_substep_pre_vjp; see contact_common.h) */
  bcg_real Gbl[9 * BCG_MAX_CONTACT * BCG_MAX_CONTACT];
  if (Gb) {
    const bcg_real *src = Gb + (size_t)e * n3 * n3;
    for (int r = 0; r < 3 * w.nact; r++)
      for (int c2 = 0; c2 < 3 * w.nact; c2++) Gbl[r * n3 + c2] = src[r * n3 + c2];
  }
  bcg_substep_pre_vjp(me, sp, qe, ue, ae, &w, nc, gapb + (size_t)e * nc, v0b + (size_t)e * n3, cb + (size_t)e * n3,
                      Gb ? Gbl : NULL, &A, qb + (size_t)e * bs, ube, ab + (size_t)e * nu);
}

/* Pushes at the end of a forward control step (see bcg_domain in bcg/sim.h):
 * the same draws as core/sim.c, from the host's push clock. */
__global__ void k_push(int n, int nv, uint64_t seed, const uint32_t *__restrict__ clock, bcg_real prob, bcg_real vel,
                       int dof, bcg_real *uo, const int *__restrict__ envmap) {
  int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  int v = envmap ? envmap[e] : e; /* slot e steps environment v: its clock, its draws */
  uint32_t k = clock[v];
  if (bcg_rng_uniform(seed, BCG_RNG_PUSH, (uint32_t)v, k, 0) > prob) return;
  double t = 6.283185307179586 * (double)bcg_rng_uniform(seed, BCG_RNG_PUSH, (uint32_t)v, k, 1);
  uo[(size_t)e * nv + dof] += vel * (bcg_real)cos(t);
  uo[(size_t)e * nv + dof + 1] += vel * (bcg_real)sin(t);
}

/* ---- helpers ------------------------------------------------------------------------ */

static int cuda_fail(bcg_cuda_sim *s, cudaError_t e, const char *what) {
  if (e == cudaSuccess) return 0;
  if (s) snprintf(s->errmsg, sizeof s->errmsg, "%s: %s", what, cudaGetErrorString(e));
  return -1;
}
#define CK(s, call)                                      \
  do {                                                   \
    if (cuda_fail((s), (call), #call)) return -1;        \
  } while (0)

/* bcg_cuda_sim_update_domain: em[idx[i]] = the i-th staged model (words
 * 32-bit words each; em NULL: words 0, friction only), emu[idx[i]] = mu[i];
 * n = k * max(words, 1) threads */
static_assert(sizeof(bcg_mdata) % sizeof(uint32_t) == 0, "bcg_mdata is copied in 32-bit words");
__global__ void k_dom_scatter(int n, int words, const int *idx, const uint32_t *stage, uint32_t *em,
                              const bcg_real *mu, bcg_real *emu) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  int w1 = words ? words : 1, i = t / w1, w = t % w1;
  if (words) em[(size_t)idx[i] * words + w] = stage[(size_t)i * words + w];
  if (w == 0 && emu) emu[idx[i]] = mu[i];
}

static int grid(const bcg_cuda_sim *s, int n) { return (n + s->block - 1) / s->block; }

/* a batch of n slots: within the capacity and, with a domain, covered by the
 * map (or, without one, naming environments 0..n-1 of the domain) */
static int bad_n(const bcg_cuda_sim *s, int n) {
  return n < 0 || n > s->cap || (s->dom && n > (s->mapped ? s->nmap : s->ndom));
}

static int launched(bcg_cuda_sim *s, const char *kernel) { return cuda_fail(s, cudaGetLastError(), kernel); }

/* The per-thread stack: CUDA reserves the largest frame of the kernels
 * launched so far (step.h's local arrays, tens to hundreds of KB) for every
 * thread the GPU can hold resident. It is raised here, ahead of the launches,
 * so that a GPU too small for it fails with this message, not an out-of-memory
 * error at some launch: at creation for the forward kernels, at the first
 * backward pass for the adjoint kernels (about twice as large). A sim that only
 * steps forward (PPO, evaluation) never reserves the adjoints' frames, which
 * lets double run on an 80 GB GPU and several float processes share one.
 * batch_bytes: the batch's own device memory (for the message). */
static int reserve_stack(int vjp, size_t batch_bytes, char *err, size_t errlen) {
  const void *kern[] = {(const void *)k_pre, (const void *)k_post, (const void *)k_post_vjp, (const void *)k_pre_vjp};
  size_t need = 0, have = 0;
  cudaError_t e = cudaSuccess;
  for (int i = 0; i < (vjp ? 4 : 2) && e == cudaSuccess; i++) {
    cudaFuncAttributes fa;
    e = cudaFuncGetAttributes(&fa, kern[i]);
    if (e == cudaSuccess && fa.localSizeBytes > need) need = fa.localSizeBytes;
  }
  if (e == cudaSuccess) e = cudaDeviceGetLimit(&have, cudaLimitStackSize);
  if (e != cudaSuccess) {
    snprintf(err, errlen, "CUDA kernel attributes: %s", cudaGetErrorString(e));
    cudaGetLastError();
    return -1;
  }
  if (need + 256 <= have) return 0;
  e = cudaDeviceSetLimit(cudaLimitStackSize, need + 256);
  if (e == cudaSuccess) return 0;
  cudaGetLastError();
  size_t fr = 0, tot = 0;
  cudaDeviceProp p;
  int dev = 0, resident = 0;
  if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&p, dev) == cudaSuccess)
    resident = p.multiProcessorCount * p.maxThreadsPerMultiProcessor;
  if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) fr = tot = 0;
  snprintf(err, errlen,
           "CUDA could not reserve the %s kernels' per-thread stack: %.0f KB (the largest kernel frame, step.h's "
           "local arrays in %s) x %d resident threads = %.1f GiB, with %.1f of %.1f GiB free beside the batch's "
           "%.2f GiB (%s): this GPU is too small for this precision (double needs about twice float's) and this "
           "build's capacities (MAX_DOF=%d MAX_CONTACT=%d; a build with smaller ones, e.g. make MAX_DOF=40 "
           "MAX_CONTACT=16 for robots of up to 40 dofs, about halves the frames: docs/usage.md section 1), or "
           "another process holds its memory",
           vjp ? "stepper's adjoint" : "stepper", (need + 256) / 1024.0, sizeof(bcg_real) == 8 ? "double" : "float",
           resident, (double)(need + 256) * resident / 1073741824.0, fr / 1073741824.0, tot / 1073741824.0,
           batch_bytes / 1073741824.0, cudaGetErrorString(e), BCG_MAX_DOF, BCG_MAX_CONTACT);
  cudaGetLastError();
  return -1;
}

static void tbeg(bcg_cuda_sim *s) {
  if (s->timing) cudaEventRecord(s->t0, s->st);
}
static int tend(bcg_cuda_sim *s, int stage) {
  if (!s->timing) return 0;
  float ms = 0;
  CK(s, cudaEventRecord(s->t1, s->st));
  CK(s, cudaEventSynchronize(s->t1));
  CK(s, cudaEventElapsedTime(&ms, s->t0, s->t1));
  s->ms[stage] += ms;
  return 0;
}

static int finish(bcg_cuda_sim *s) {
  if (s->async) return 0;
  return cuda_fail(s, cudaStreamSynchronize(s->st), "cudaStreamSynchronize");
}

static void fill_batch(bcg_cuda_sim *s, int n, bcg_contact_batch *b) {
  bcg_contact_batch_fill(b, n, s->ncon, &s->sp, s->nact, s->gap, s->v0, s->c, s->G, s->mu, s->lam, s->fn);
}

static int use_contact(const bcg_cuda_sim *s) { return s->cops && s->sp.ncmax > 0; }

/* first half + contact solve (forward and recompute) */
static int pre_and_contact(bcg_cuda_sim *s, int n, const bcg_real *q, int qs, const bcg_real *u, int us, const bcg_real *a,
                           bcg_real *tape, int full) {
  int zero = !use_contact(s);
  tbeg(s);
  /* G's padding (zeros, identity on unused rows) is written by k_pre; the
   * zeros come from one coalesced memset instead of n3^2 scattered stores per
   * thread (sp.G_prezeroed) */
  if (s->G) CK(s, cudaMemsetAsync(s->G, 0, sizeof(bcg_real) * (size_t)n * 9 * s->ncon * s->ncon, s->st));
  k_pre<<<grid(s, n), s->block, 0, s->st>>>(s->m, s->dm, s->dmu, s->spd, n, s->ncon, q, qs, u, us, a, s->ws, (size_t)s->cap, s->nact, s->gap,
                                              s->v0, s->c, s->G, s->mu, tape, zero, s->lam, s->fn, full);
  if (launched(s, "k_pre")) return -1;
  if (tend(s, BCG_CUDA_STAGE_PRE)) return -1;
  tbeg(s);
  if (!zero) {
    bcg_contact_batch b;
    fill_batch(s, n, &b);
    int rc = s->cops->solve_cuda(s->cself, &b, (void *)s->st);
    if (rc) {
      snprintf(s->errmsg, sizeof s->errmsg, "contact plugin solve_cuda returned %d", rc);
      return rc;
    }
    if (launched(s, "contact solve_cuda")) return -1;
  }
  return tend(s, BCG_CUDA_STAGE_CONTACT);
}

static int substep_fwd(bcg_cuda_sim *s, int n, const bcg_real *q, int qs, const bcg_real *u, int us, const bcg_real *a,
                       bcg_real *qo, bcg_real *uo, bcg_real *tape) {
  int rc = pre_and_contact(s, n, q, qs, u, us, a, tape, 0);
  if (rc) return rc;
  tbeg(s);
  k_post<<<grid(s, n), s->block, 0, s->st>>>(s->m, s->dm, s->spd, n, s->ncon, s->ws, (size_t)s->cap, s->lam, qo, uo, s->nact, s->fn,
                                               s->gap, s->maxfn, s->maxpen, s->bad);
  if (launched(s, "k_post")) return -1;
  return tend(s, BCG_CUDA_STAGE_POST);
}

/* adjoint rows: qob/uob and qb/ub with row stride bs */
static int substep_bwd(bcg_cuda_sim *s, int n, const bcg_real *q, int qs, const bcg_real *u, int us, const bcg_real *a,
                       const bcg_real *qob, const bcg_real *uob, bcg_real *qb, bcg_real *ub, int bs, bcg_real *ab) {
  int nc = s->ncon, n3 = 3 * nc;
  if (!s->stack_vjp) {
    if (reserve_stack(1, s->bytes, s->errmsg, sizeof s->errmsg)) return -1;
    s->stack_vjp = 1;
  }
  int rc = pre_and_contact(s, n, q, qs, u, us, a, NULL, s->store_full);
  if (rc) return rc;
  tbeg(s);
  k_post_vjp<<<grid(s, n), s->block, 0, s->st>>>(s->m, s->dm, s->spd, n, nc, s->ws, (size_t)s->cap, s->lam, qob, uob, bs,
                                                   s->lamb, s->adj);
  if (launched(s, "k_post_vjp")) return -1;
  if (tend(s, BCG_CUDA_STAGE_POST)) return -1;
  tbeg(s);
  CK(s, cudaMemsetAsync(s->gapb, 0, sizeof(bcg_real) * (size_t)n * nc, s->st));
  CK(s, cudaMemsetAsync(s->v0b, 0, sizeof(bcg_real) * (size_t)n * n3, s->st));
  CK(s, cudaMemsetAsync(s->cb, 0, sizeof(bcg_real) * (size_t)n * n3, s->st));
  if (s->Gb) CK(s, cudaMemsetAsync(s->Gb, 0, sizeof(bcg_real) * (size_t)n * n3 * n3, s->st));
  if (use_contact(s)) {
    bcg_contact_batch b;
    fill_batch(s, n, &b);
    bcg_contact_adjoint adj = {s->lamb, s->gapb, s->v0b, s->cb, s->Gb};
    rc = s->cops->solve_vjp_cuda(s->cself, &b, &adj, (void *)s->st);
    if (rc) {
      snprintf(s->errmsg, sizeof s->errmsg, "contact plugin solve_vjp_cuda returned %d", rc);
      return rc;
    }
    if (launched(s, "contact solve_vjp_cuda")) return -1;
  }
  if (tend(s, BCG_CUDA_STAGE_CONTACT_VJP)) return -1;
  tbeg(s);
  k_pre_vjp<<<grid(s, n), s->block, 0, s->st>>>(s->m, s->dm, s->spd, n, nc, q, qs, u, us, a, s->gapb, s->v0b, s->cb,
                                                  s->Gb, s->adj, (size_t)s->cap, qb, ub, bs, ab, s->store_full ? s->ws : NULL);
  if (launched(s, "k_pre_vjp")) return -1;
  return tend(s, BCG_CUDA_STAGE_PRE_VJP);
}

/* ---- plugin identification for messages --------------------------------------- */

/* Finds the descriptor whose ops table is cops (through the shared object
 * holding it); name "?" and caps ~0 when it cannot be found. */
static void plugin_ident(const bcg_contact_ops *cops, char *name, size_t len, uint64_t *caps) {
  snprintf(name, len, "?");
  *caps = ~0ull;
  Dl_info info;
  if (!dladdr((const void *)cops, &info) || !info.dli_fname) return;
  void *h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return;
  bcg_plugin_entry_fn f = (bcg_plugin_entry_fn)dlsym(h, BCG_PLUGIN_ENTRY_SYMBOL);
  if (f) {
    const bcg_plugin_desc *d = f();
    if (d && d->ops == (const void *)cops) {
      snprintf(name, len, "%s", d->name ? d->name : "?");
      *caps = d->caps;
    }
  }
  dlclose(h);
}

/* ---- public API ------------------------------------------------------------------- */

extern "C" {

BCG_EXPORT int bcg_cuda_available(char *err, size_t errlen) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (err && errlen) snprintf(err, errlen, "no CUDA device: %s", cudaGetErrorString(e));
    cudaGetLastError(); /* clear */
    return 0;
  }
  if (n < 1) {
    if (err && errlen) snprintf(err, errlen, "no CUDA device: none found");
    return 0;
  }
  return 1;
}

BCG_EXPORT void bcg_cuda_device_info(char *buf, size_t len) {
  char err[200];
  if (!bcg_cuda_available(err, sizeof err)) {
    snprintf(buf, len, "%s", err);
    return;
  }
  int dev = 0, drv = 0, rt = 0;
  cudaGetDevice(&dev);
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
    snprintf(buf, len, "CUDA device %d (properties unavailable)", dev);
    return;
  }
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  snprintf(buf, len, "%s, %d SMs, %.1f GiB, L2 %.0f MiB, cc %d.%d, driver %d.%d, runtime %d.%d", p.name,
           p.multiProcessorCount, p.totalGlobalMem / 1073741824.0, p.l2CacheSize / 1048576.0, p.major, p.minor,
           drv / 1000, (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10);
}

BCG_EXPORT void bcg_cuda_sim_free(bcg_cuda_sim *s) {
  if (!s) return;
  if (s->st) cudaStreamSynchronize(s->st);
  void *p[] = {s->m, s->spd, s->ws, s->adj, s->nact, s->bad, s->gap, s->v0, s->c, s->G, s->mu, s->lam, s->fn,
               s->lamb, s->gapb, s->v0b, s->cb, s->Gb, s->maxfn, s->maxpen, s->scratch, s->adjbuf,
               s->em, s->emu, s->dclock, s->dmap, s->sm, s->smu, s->dstage};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
    if (p[i]) cudaFree(p[i]);
  if (s->t0) cudaEventDestroy(s->t0);
  if (s->t1) cudaEventDestroy(s->t1);
  if (s->st) cudaStreamDestroy(s->st);
  free(s->hmap);
  if (s->hstage) cudaFreeHost(s->hstage);
  free(s);
}

BCG_EXPORT bcg_cuda_sim *bcg_cuda_sim_create(const bcg_model *model, const bcg_simparams *sp, int cap,
                                             const bcg_contact_ops *cops, void *cself, char *err, size_t errlen) {
  if (bcg_sim_check_args(sp, cap, err, errlen)) return NULL;
  if (cops) {
    char name[128];
    uint64_t caps;
    plugin_ident(cops, name, sizeof name, &caps);
    int has = cops->size >= offsetof(bcg_contact_ops, solve_vjp_cuda) + sizeof(cops->solve_vjp_cuda) &&
              cops->solve_cuda && cops->solve_vjp_cuda && (caps & BCG_CAP_CUDA);
    if (!has) {
      snprintf(err, errlen, "contact plugin '%s' has no CUDA entry points; use device = cpu", name);
      return NULL;
    }
  }
  char why[200];
  if (!bcg_cuda_available(why, sizeof why)) {
    snprintf(err, errlen, "%s; use device = cpu", why);
    return NULL;
  }
  bcg_cuda_sim *s = (bcg_cuda_sim *)calloc(1, sizeof *s);
  if (!s) {
    snprintf(err, errlen, "out of host memory");
    return NULL;
  }
  const bcg_mdata *m = &model->m;
  BCG_SIM_SET_COMMON(s, model, sp, cap, cops, cself);
  s->nq = m->nq;
  s->nv = m->nv;
  s->nu = m->nu;
  s->block = bcg_cuda_block_default();
  /* backward pass variant: "store" (default) or "recompute" the first half in k_pre_vjp */
  const char *pv = getenv("BCG_CUDA_PRE_VJP");
  s->store_full = !(pv && !strcmp(pv, "recompute"));

  size_t nc = (size_t)cap * s->ncon, n3 = 3 * (size_t)s->ncon, sx = (size_t)s->nq + s->nv;
  cudaError_t e = cudaSuccess;
  size_t total = 0;
#define DALLOC(ptr, bytes)                                                \
  do {                                                                    \
    if (e == cudaSuccess) {                                               \
      e = cudaMalloc((void **)&(ptr), (bytes));                           \
      total += (bytes);                                                   \
      if (e == cudaSuccess) e = cudaMemset((ptr), 0, (bytes));            \
    }                                                                     \
  } while (0)
  DALLOC(s->m, sizeof(bcg_mdata));
  DALLOC(s->spd, sizeof(bcg_simparams));
  DALLOC(s->ws, sizeof(wword) * WSW(bcg_stepws) * (size_t)cap);
  DALLOC(s->adj, sizeof(wword) * WSW(bcg_stepadj) * (size_t)cap);
  DALLOC(s->nact, sizeof(int) * (size_t)cap);
  DALLOC(s->bad, sizeof(int) * (size_t)cap);
  DALLOC(s->gap, sizeof(bcg_real) * nc);
  DALLOC(s->mu, sizeof(bcg_real) * nc);
  DALLOC(s->fn, sizeof(bcg_real) * nc);
  DALLOC(s->gapb, sizeof(bcg_real) * nc);
  DALLOC(s->v0, sizeof(bcg_real) * 3 * nc);
  DALLOC(s->c, sizeof(bcg_real) * 3 * nc);
  DALLOC(s->lam, sizeof(bcg_real) * 3 * nc);
  DALLOC(s->lamb, sizeof(bcg_real) * 3 * nc);
  DALLOC(s->v0b, sizeof(bcg_real) * 3 * nc);
  DALLOC(s->cb, sizeof(bcg_real) * 3 * nc);
  DALLOC(s->maxfn, sizeof(bcg_real) * (size_t)cap);
  DALLOC(s->maxpen, sizeof(bcg_real) * (size_t)cap);
  DALLOC(s->scratch, sizeof(bcg_real) * 2 * (size_t)cap * sx);
  DALLOC(s->adjbuf, sizeof(bcg_real) * 2 * (size_t)cap * 2 * s->nv);
  if (s->sp.need_G && cops) {
    DALLOC(s->G, sizeof(bcg_real) * (size_t)cap * n3 * n3);
    DALLOC(s->Gb, sizeof(bcg_real) * (size_t)cap * n3 * n3);
  }
#undef DALLOC
  /* the forward kernels' per-thread stack (the adjoints' at the first backward pass) */
  s->bytes = total;
  if (e == cudaSuccess && reserve_stack(0, total, err, errlen)) {
    bcg_cuda_sim_free(s);
    return NULL;
  }
  if (e == cudaSuccess) e = cudaMemcpy(s->m, m, sizeof(bcg_mdata), cudaMemcpyHostToDevice);
  s->sp.G_prezeroed = s->G != NULL;
  if (e == cudaSuccess) e = cudaMemcpy(s->spd, &s->sp, sizeof(bcg_simparams), cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaStreamCreate(&s->st);
  if (e == cudaSuccess) e = cudaEventCreate(&s->t0);
  if (e == cudaSuccess) e = cudaEventCreate(&s->t1);
  if (e != cudaSuccess) {
    /* say what else holds the memory: CUDA reserves the per-thread stack
     * (the largest kernel frame, hundreds of KB) for every thread the device
     * can hold resident, in every process, so a second bcg process on the
     * same GPU is what usually fails here */
    cudaError_t e0 = e;
    cudaGetLastError();
    size_t fr = 0, tot = 0, stk = 0;
    cudaDeviceProp p;
    int dev = 0, resident = 0;
    double resv = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&p, dev) == cudaSuccess)
      resident = p.multiProcessorCount * p.maxThreadsPerMultiProcessor;
    if (cudaDeviceGetLimit(&stk, cudaLimitStackSize) == cudaSuccess) resv = (double)stk * resident;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) fr = tot = 0;
    snprintf(err, errlen,
             "CUDA allocation of a batch of %d environments (%.2f GiB of device memory) failed: %s (%.1f of %.1f GiB "
             "free; each bcg process also reserves its kernels' per-thread stack, %.0f KB x every resident thread = "
             "%.1f GiB: run one CUDA training per GPU)",
             cap, total / 1073741824.0, cudaGetErrorString(e0), fr / 1073741824.0, tot / 1073741824.0, stk / 1024.0,
             resv / 1073741824.0);
    cudaGetLastError();
    bcg_cuda_sim_free(s);
    return NULL;
  }
  return s;
}

BCG_EXPORT int bcg_cuda_sim_substep(bcg_cuda_sim *s, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a, bcg_real *qo,
                                    bcg_real *uo) {
  if (bad_n(s, n)) return -1;
  if (n == 0) return 0;
  int rc = substep_fwd(s, n, q, s->nq, u, s->nv, a, qo, uo, NULL);
  return rc ? rc : finish(s);
}

BCG_EXPORT int bcg_cuda_sim_substep_vjp(bcg_cuda_sim *s, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a,
                                        const bcg_real *qob, const bcg_real *uob, bcg_real *qb, bcg_real *ub, bcg_real *ab) {
  if (bad_n(s, n)) return -1;
  if (n == 0) return 0;
  int rc = substep_bwd(s, n, q, s->nq, u, s->nv, a, qob, uob, qb, ub, s->nv, ab);
  return rc ? rc : finish(s);
}

BCG_EXPORT int bcg_cuda_sim_set_domain(bcg_cuda_sim *s, const bcg_domain *dom) {
  if (s->st) CK(s, cudaStreamSynchronize(s->st));
  if (s->em) cudaFree(s->em);
  if (s->emu) cudaFree(s->emu);
  if (s->dclock) cudaFree(s->dclock);
  s->em = NULL;
  s->emu = NULL;
  s->dm = NULL;
  s->dmu = NULL;
  s->dclock = NULL;
  s->dom = NULL;
  s->ndom = 0;
  s->mapped = 0; /* the map is reset to the identity */
  s->nmap = 0;
  s->ngath = 0;
  if (!dom) return 0;
  int n = dom->n;
  if (dom->m) {
    CK(s, cudaMalloc((void **)&s->em, sizeof(bcg_mdata) * (size_t)n));
    CK(s, cudaMemcpy(s->em, dom->m, sizeof(bcg_mdata) * (size_t)n, cudaMemcpyHostToDevice));
  }
  if (dom->mu) {
    CK(s, cudaMalloc((void **)&s->emu, sizeof(bcg_real) * (size_t)n));
    CK(s, cudaMemcpy(s->emu, dom->mu, sizeof(bcg_real) * (size_t)n, cudaMemcpyHostToDevice));
  }
  CK(s, cudaMalloc((void **)&s->dclock, sizeof(uint32_t) * (size_t)n));
  s->dom = dom;
  s->ndom = n;
  s->dm = s->em;
  s->dmu = s->emu;
  return 0;
}

BCG_EXPORT int bcg_cuda_sim_update_domain(bcg_cuda_sim *s, const int *envs, int k) {
  const bcg_domain *d = s->dom;
  if (!d) {
    snprintf(s->errmsg, sizeof s->errmsg, "update_domain: no domain is set");
    return -1;
  }
  for (int i = 0; i < k; i++)
    if (envs[i] < 0 || envs[i] >= s->ndom) {
      snprintf(s->errmsg, sizeof s->errmsg, "update_domain: envs[%d] = %d names no environment of the domain (%d)", i,
               envs[i], s->ndom);
      return -1;
    }
  if (k <= 0 || (!s->em && !s->emu)) return 0;
  CK(s, cudaStreamSynchronize(s->st)); /* queued kernels may still read em / emu, or copies the staging */
  /* the k environments' models, friction and indices packed into page-locked
   * memory, one copy, and a scatter kernel: a reset of a few dozen scattered
   * environments was as many pageable copies of a model (tens of kB each) */
  size_t sm = s->em ? sizeof(bcg_mdata) : 0, words = sm / sizeof(uint32_t);
  size_t off_mu = (size_t)k * sm, off_idx = off_mu + (size_t)k * sizeof(bcg_real);
  size_t need = off_idx + (size_t)k * sizeof(int);
  if (s->cstage < need) {
    if (s->hstage) cudaFreeHost(s->hstage);
    if (s->dstage) cudaFree(s->dstage);
    s->hstage = s->dstage = NULL;
    s->cstage = 0;
    CK(s, cudaHostAlloc((void **)&s->hstage, need, cudaHostAllocDefault));
    CK(s, cudaMalloc((void **)&s->dstage, need));
    s->cstage = need;
  }
  /* over the threads when there are many (a model is 36 kB for humanoid.xml;
   * PPO's 4096 environments reset about a hundred per control step: about 1.5
   * ms a step packed serially) */
#pragma omp parallel for schedule(static) if (k >= 16)
  for (int i = 0; i < k; i++) {
    if (sm) memcpy(s->hstage + (size_t)i * sm, d->m + envs[i], sm);
    ((bcg_real *)(s->hstage + off_mu))[i] = s->emu ? d->mu[envs[i]] : 0;
    ((int *)(s->hstage + off_idx))[i] = envs[i];
  }
  CK(s, cudaMemcpyAsync(s->dstage, s->hstage, need, cudaMemcpyHostToDevice, s->st));
  {
    int n = (int)((size_t)k * (words ? words : 1));
    k_dom_scatter<<<grid(s, n), s->block, 0, s->st>>>(n, (int)words, (const int *)(s->dstage + off_idx),
                                                      (const uint32_t *)s->dstage, (uint32_t *)s->em,
                                                      (const bcg_real *)(s->dstage + off_mu), s->emu);
    if (launched(s, "k_dom_scatter")) return -1;
  }
  s->ngath = 0; /* the per-slot copies of a mapped batch are stale: gathered again by the next set_envmap */
  return finish(s);
}

BCG_EXPORT int bcg_cuda_sim_control_step(bcg_cuda_sim *s, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a,
                                         bcg_real *qo, bcg_real *uo, bcg_real *tape) {
  if (bad_n(s, n)) return -1;
  if (n == 0) return 0;
  int nq = s->nq, nv = s->nv, ns = s->sp.substeps;
  size_t sx = (size_t)nq + nv;
  CK(s, cudaMemsetAsync(s->maxfn, 0, sizeof(bcg_real) * n, s->st));
  CK(s, cudaMemsetAsync(s->maxpen, 0, sizeof(bcg_real) * n, s->st));
  CK(s, cudaMemsetAsync(s->bad, 0, sizeof(int) * n, s->st));
  const bcg_real *qi = q, *ui = u;
  for (int k = 0; k < ns; k++) {
    bcg_real *qn, *un;
    if (k == ns - 1) {
      qn = qo;
      un = uo;
    } else {
      qn = s->scratch + (size_t)(k % 2) * s->cap * sx;
      un = qn + (size_t)s->cap * nq;
    }
    int rc = substep_fwd(s, n, qi, nq, ui, nv, a, qn, un, tape ? tape + (size_t)k * n * sx : NULL);
    if (rc) return rc;
    qi = qn;
    ui = un;
  }
  const bcg_domain *d = s->dom;
  if (d && d->push_prob > 0 && d->push_dof >= 0 && d->clock) {
    /* the whole clock: a mapped slot may name any environment */
    CK(s, cudaMemcpyAsync(s->dclock, d->clock, sizeof(uint32_t) * s->ndom, cudaMemcpyHostToDevice, s->st));
    k_push<<<grid(s, n), s->block, 0, s->st>>>(n, nv, d->seed, s->dclock, d->push_prob, d->push_vel, d->push_dof, uo,
                                                 s->mapped ? s->dmap : NULL);
    if (launched(s, "k_push")) return -1;
  }
  return finish(s);
}

BCG_EXPORT int bcg_cuda_sim_control_step_vjp(bcg_cuda_sim *s, int n, const bcg_real *tape, const bcg_real *a,
                                             const bcg_real *xob, bcg_real *xb, bcg_real *ab) {
  if (bad_n(s, n)) return -1;
  if (n == 0) return 0;
  int nq = s->nq, nv = s->nv, ns = s->sp.substeps, bs = 2 * nv;
  size_t sx = (size_t)nq + nv;
  const bcg_real *in = xob;
  for (int k = ns - 1; k >= 0; k--) {
    bcg_real *out = k == 0 ? xb : s->adjbuf + (size_t)(k % 2) * s->cap * bs;
    const bcg_real *qk = tape + (size_t)k * n * sx;
    int rc = substep_bwd(s, n, qk, (int)sx, qk + nq, (int)sx, a, in, in + nv, out, out + nv, bs, ab);
    if (rc) return rc;
    in = out;
  }
  return finish(s);
}

BCG_EXPORT int bcg_cuda_sim_diagnostics(bcg_cuda_sim *s, int n, bcg_real *maxfn, bcg_real *maxpen, int *bad) {
  if (bad_n(s, n)) return -1;
  if (n == 0) return 0;
  CK(s, cudaStreamSynchronize(s->st));
  if (maxfn) CK(s, cudaMemcpy(maxfn, s->maxfn, sizeof(bcg_real) * n, cudaMemcpyDeviceToHost));
  if (maxpen) CK(s, cudaMemcpy(maxpen, s->maxpen, sizeof(bcg_real) * n, cudaMemcpyDeviceToHost));
  if (bad) CK(s, cudaMemcpy(bad, s->bad, sizeof(int) * n, cudaMemcpyDeviceToHost));
  return 0;
}

BCG_EXPORT int bcg_cuda_sim_nactive(bcg_cuda_sim *s, int n, int *nact) {
  if (bad_n(s, n)) return -1;
  if (n == 0) return 0;
  CK(s, cudaStreamSynchronize(s->st));
  CK(s, cudaMemcpy(nact, s->nact, sizeof(int) * n, cudaMemcpyDeviceToHost));
  return 0;
}

BCG_EXPORT int bcg_cuda_sim_set_async(bcg_cuda_sim *s, int async) {
  s->async = async != 0;
  return 0;
}

BCG_EXPORT int bcg_cuda_sim_sync(bcg_cuda_sim *s) {
  CK(s, cudaStreamSynchronize(s->st));
  return 0;
}

BCG_EXPORT void *bcg_cuda_sim_stream(bcg_cuda_sim *s) { return (void *)s->st; }
BCG_EXPORT const char *bcg_cuda_sim_error(const bcg_cuda_sim *s) { return s->errmsg; }
BCG_EXPORT int bcg_cuda_sim_block(const bcg_cuda_sim *s) { return s->block; }

/* 32: one warp per block spreads a few thousand environments over the most
 * SMs (docs/performance.md section 8.4: H100, double, 4096 environments,
 * forward 1.62 -> 1.75 M substeps/s against 64; equal at 16384) */
extern "C" BCG_EXPORT int bcg_cuda_block_default(void) {
  const char *bs = getenv("BCG_CUDA_BLOCK");
  const int b = bs ? atoi(bs) : 0;
  return b >= 32 && b <= 1024 ? b : 32;
}

BCG_EXPORT int bcg_cuda_sim_set_timing(bcg_cuda_sim *s, int on) {
  s->timing = on != 0;
  for (int i = 0; i < BCG_CUDA_NSTAGE; i++) s->ms[i] = 0;
  return 0;
}

BCG_EXPORT void bcg_cuda_sim_stage_ms(const bcg_cuda_sim *s, double ms[BCG_CUDA_NSTAGE]) {
  for (int i = 0; i < BCG_CUDA_NSTAGE; i++) ms[i] = s->ms[i];
}

BCG_EXPORT void *bcg_cuda_malloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError();
    return NULL;
  }
  return p;
}
BCG_EXPORT void bcg_cuda_free(void *p) {
  if (p) cudaFree(p);
}
BCG_EXPORT void *bcg_cuda_host_alloc(size_t bytes) {
  void *p = NULL;
  if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();
    return NULL;
  }
  return p;
}
BCG_EXPORT void bcg_cuda_host_free(void *p) {
  if (p) cudaFreeHost(p);
}
BCG_EXPORT int bcg_cuda_copy(void *dst, const void *src, size_t bytes) {
  return cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) == cudaSuccess ? 0 : -1;
}
BCG_EXPORT int bcg_cuda_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                               size_t rows) {
  if (!rows || !width) return 0;
  return cudaMemcpy2D(dst, dpitch, src, spitch, width, rows, cudaMemcpyDefault) == cudaSuccess ? 0 : -1;
}
BCG_EXPORT int bcg_cuda_memset(void *p, int byte, size_t bytes) {
  return cudaMemset(p, byte, bytes) == cudaSuccess ? 0 : -1;
}

struct bcg_cuda_event {
  cudaEvent_t ev;
};
BCG_EXPORT bcg_cuda_event *bcg_cuda_event_new(void) {
  bcg_cuda_event *e = (bcg_cuda_event *)calloc(1, sizeof *e);
  if (e && cudaEventCreate(&e->ev) != cudaSuccess) {
    free(e);
    return NULL;
  }
  return e;
}
BCG_EXPORT void bcg_cuda_event_free(bcg_cuda_event *e) {
  if (!e) return;
  cudaEventDestroy(e->ev);
  free(e);
}
BCG_EXPORT int bcg_cuda_event_record(bcg_cuda_event *e, bcg_cuda_sim *s) {
  return cudaEventRecord(e->ev, s ? s->st : 0) == cudaSuccess ? 0 : -1;
}
BCG_EXPORT double bcg_cuda_event_ms(bcg_cuda_event *a, bcg_cuda_event *b) {
  float ms = -1;
  if (cudaEventSynchronize(b->ev) != cudaSuccess) return -1;
  if (cudaEventElapsedTime(&ms, a->ev, b->ev) != cudaSuccess) return -1;
  return ms;
}

} /* extern "C" */

/* ---- the slot -> environment map (bcg_cuda_sim_set_envmap) --------------------------- */

/* slot e of a mapped batch gets environment map[e]'s randomised model and friction */
__global__ void k_gather(int n, const int *__restrict__ map, const bcg_mdata *__restrict__ em, bcg_mdata *sm,
                         const bcg_real *__restrict__ emu, bcg_real *smu) {
  int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  int v = map[e];
  if (em) sm[e] = em[v];
  if (smu) smu[e] = emu[v];
}

extern "C" BCG_EXPORT int bcg_cuda_sim_set_envmap(bcg_cuda_sim *s, const int *envmap, int n) {
  if (n < 0 || n > s->cap) return -1;
  int ident = 1;
  for (int i = 0; envmap && i < n && ident; i++) ident = envmap[i] == i;
  if (!s->dom || !envmap || ident) { /* identity (or no domain: nothing to map) */
    s->mapped = 0;
    s->nmap = 0;
    s->dm = s->em;
    s->dmu = s->emu;
    return 0;
  }
  for (int i = 0; i < n; i++)
    if (envmap[i] < 0 || envmap[i] >= s->ndom) {
      snprintf(s->errmsg, sizeof s->errmsg, "envmap[%d] = %d names no environment of the domain (%d)", i,
               envmap[i], s->ndom);
      return -1;
    }
  size_t cap = (size_t)s->cap;
  if (!s->hmap && !(s->hmap = (int *)malloc(sizeof(int) * cap))) return -1;
  if (!s->dmap) CK(s, cudaMalloc((void **)&s->dmap, sizeof(int) * cap));
  if (s->em && !s->sm) CK(s, cudaMalloc((void **)&s->sm, sizeof(bcg_mdata) * cap));
  if (s->emu && !s->smu) CK(s, cudaMalloc((void **)&s->smu, sizeof(bcg_real) * cap));
  if (!(n <= s->ngath && memcmp(s->hmap, envmap, sizeof(int) * (size_t)n) == 0)) {
    CK(s, cudaStreamSynchronize(s->st)); /* queued kernels may still read dmap / sm / smu */
    memcpy(s->hmap, envmap, sizeof(int) * (size_t)n);
    s->ngath = 0;
    CK(s, cudaMemcpy(s->dmap, envmap, sizeof(int) * (size_t)n, cudaMemcpyHostToDevice));
    if (n > 0 && (s->em || s->emu)) {
      k_gather<<<grid(s, n), s->block, 0, s->st>>>(n, s->dmap, s->em, s->sm, s->emu, s->smu);
      if (launched(s, "k_gather")) return -1;
    }
    s->ngath = n;
  }
  s->mapped = 1;
  s->nmap = n;
  s->dm = s->em ? s->sm : NULL;
  s->dmu = s->emu ? s->smu : NULL;
  return finish(s);
}
