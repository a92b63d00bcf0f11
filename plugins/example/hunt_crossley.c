/* hunt_crossley.c - an example CONTACT MODEL plugin with a CUDA entry, built
 * out of tree against an installed bcg (see Makefile here): the Hunt and
 * Crossley contact law (K. H. Hunt, F. R. E. Crossley, "Coefficient of
 * restitution interpreted as damping in vibroimpact", J. Appl. Mech. 1975),
 * Hertzian stiffness with damping proportional to it, and regularised
 * Coulomb friction, applied explicitly from the start-of-substep state.
 *
 * Per active contact i with gap g (< 0: penetrating) and contact-frame
 * velocity v = v0_i (normal v_n > 0 separating, tangents v_t):
 *   p    = max(-g, 0)                          penetration
 *   f_n  = k p^(3/2) max(1 - d v_n, 0)          Hunt-Crossley: damping grows with the elastic force
 *   f_t  = -mu f_n v_t / sqrt(|v_t|^2 + vs^2)   Coulomb, smoothed below the speed vs
 *   lam  = dt f,   fn = f_n
 * Keys: stiffness k (N/m^1.5), dissipation d (s/m), slip_velocity vs (m/s).
 * The force is 0 for g >= 0 and C1 there (p^(3/2) has slope 0 at p = 0), so
 * it vanishes before a contact reaches the activation margin and leaves the
 * list, as the contract asks (plugins/README.md, contact models). It needs
 * neither the Delassus matrix nor c (no BCG_CAP_NEEDS_DELASSUS) and is stable
 * only for stiffness and substeps that an explicit law allows: humanoid.xml
 * dropped onto the floor lands with the defaults at 1 ms substeps ([sim]
 * substeps = 20 of a 0.02 s control step) and blows up at 5 ms, where its
 * light feet see k_eff dt^2 / m above the explicit limit. The implicit
 * models of bcg (soft, smoothed_kappa, hard) solve on the Delassus matrix
 * instead and run at 5 ms.
 *
 * The VJP is exact except on the set d v_n = 1 (the damping factor's kink,
 * taken as 0 there), and accumulates into gap_bar and v0_bar.
 *
 * One source for CPU and GPU: the per-environment functions are BCG_HD
 * (bcg/real.h): static inline on the CPU, __host__ __device__ under nvcc.
 * Compiled once by the C compiler (the descriptor, the CPU entries, OpenMP
 * over environments) and, where nvcc is found, once more as CUDA (nvcc -x cu
 * -DHC_CUDA_KERNELS: only the kernels and the two *_cuda entries below); both
 * objects go into the same .so, and the C part names the CUDA entries and
 * sets BCG_CAP_CUDA only when built with -DHC_WITH_CUDA. The core calls
 * solve_cuda / solve_vjp_cuda with device pointers when [run] device = cuda,
 * else solve / solve_vjp. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bcg/plugin.h"

typedef struct hc_cfg {
  bcg_real k, d, vs;
} hc_cfg;

/* one contact: the force f (normal, t1, t2) */
BCG_HD void hc_force(const hc_cfg *c, bcg_real g, const bcg_real *v, bcg_real mu, bcg_real f[3]) {
  const bcg_real p = g < 0 ? -g : (bcg_real)0;
  const bcg_real s = (bcg_real)1 - c->d * v[0];
  const bcg_real fn = p > 0 && s > 0 ? c->k * p * sqrt(p) * s : (bcg_real)0;
  const bcg_real m = sqrt(v[1] * v[1] + v[2] * v[2] + c->vs * c->vs);
  f[0] = fn;
  f[1] = -mu * fn * v[1] / m;
  f[2] = -mu * fn * v[2] / m;
}

/* one environment's na active contacts of ncon slots: lam, fn (the rest zero) */
BCG_HD void hc_env_solve(const hc_cfg *c, int na, int ncon, bcg_real dt, const bcg_real *gap, const bcg_real *v0,
                         const bcg_real *mu, bcg_real *lam, bcg_real *fn) {
  for (int i = 0; i < ncon; i++) {
    bcg_real f[3] = {0, 0, 0};
    if (i < na) hc_force(c, gap[i], v0 + 3 * i, mu[i], f);
    for (int a = 0; a < 3; a++) lam[3 * i + a] = dt * f[a];
    fn[i] = f[0];
  }
}

/* its adjoint: lam_bar -> (+=) gap_bar, v0_bar */
BCG_HD void hc_env_vjp(const hc_cfg *c, int na, bcg_real dt, const bcg_real *gap, const bcg_real *v0,
                       const bcg_real *mu, const bcg_real *lam_bar, bcg_real *gap_bar, bcg_real *v0_bar) {
  for (int i = 0; i < na; i++) {
    const bcg_real *v = v0 + 3 * i, *lb = lam_bar + 3 * i, g = gap[i];
    const bcg_real p = g < 0 ? -g : (bcg_real)0, s = (bcg_real)1 - c->d * v[0];
    if (!(p > 0 && s > 0)) continue; /* no force: nothing depends on the inputs */
    const bcg_real rp = sqrt(p), fn = c->k * p * rp * s;
    const bcg_real m = sqrt(v[1] * v[1] + v[2] * v[2] + c->vs * c->vs);
    const bcg_real fb1 = dt * lb[1], fb2 = dt * lb[2];
    /* f_t = -mu fn v_t / m: into fn and the tangential velocity */
    const bcg_real u1 = v[1] / m, u2 = v[2] / m, ub = u1 * fb1 + u2 * fb2;
    const bcg_real fnb = dt * lb[0] - mu[i] * ub;
    const bcg_real sc = mu[i] * fn / m;
    v0_bar[3 * i + 1] += -sc * (fb1 - u1 * ub);
    v0_bar[3 * i + 2] += -sc * (fb2 - u2 * ub);
    /* fn = k p^(3/2) s: dp/dg = -1, ds/dv_n = -d */
    gap_bar[i] += fnb * c->k * (bcg_real)1.5 * rp * s * (bcg_real)-1;
    v0_bar[3 * i] += fnb * c->k * p * rp * -c->d;
  }
}

BCG_HD int hc_nactive(const int *nactive, int e, int ncon) {
  const int na = nactive[e];
  return na < 0 ? 0 : na > ncon ? ncon : na;
}

#ifndef HC_CUDA_KERNELS /* ======================================= the C part == */

#ifdef HC_WITH_CUDA
int hc_solve_cuda(void *self, bcg_contact_batch *b, void *stream);
int hc_solve_vjp_cuda(void *self, const bcg_contact_batch *b, bcg_contact_adjoint *adj, void *stream);
#endif

static void *create(const bcg_services *svc, const bcg_params *p, const bcg_model *model, char *err, size_t errlen) {
  hc_cfg *c = malloc(sizeof *c);
  if (!c) {
    snprintf(err, errlen, "hunt_crossley: out of memory");
    return NULL;
  }
  c->k = (bcg_real)svc->get_real(p, "stiffness");
  c->d = (bcg_real)svc->get_real(p, "dissipation");
  c->vs = (bcg_real)svc->get_real(p, "slip_velocity");
  return c;
}

static void destroy(void *self) { free(self); }

static int solve(void *self, bcg_contact_batch *b) {
  const hc_cfg *c = self;
  const int ncon = b->ncon;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < b->nenv; e++)
    hc_env_solve(c, hc_nactive(b->nactive, e, ncon), ncon, b->dt, b->gap + (size_t)e * ncon,
                 b->v0 + (size_t)e * 3 * ncon, b->mu + (size_t)e * ncon, b->lam + (size_t)e * 3 * ncon,
                 b->fn + (size_t)e * ncon);
  return 0;
}

static int solve_vjp(void *self, const bcg_contact_batch *b, bcg_contact_adjoint *adj) {
  const hc_cfg *c = self;
  const int ncon = b->ncon;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < b->nenv; e++)
    hc_env_vjp(c, hc_nactive(b->nactive, e, ncon), b->dt, b->gap + (size_t)e * ncon, b->v0 + (size_t)e * 3 * ncon,
               b->mu + (size_t)e * ncon, adj->lam_bar + (size_t)e * 3 * ncon, adj->gap_bar + (size_t)e * ncon,
               adj->v0_bar + (size_t)e * 3 * ncon);
  return 0;
}

static const bcg_key_spec keys[] = {
    {"stiffness", BCG_KEY_REAL, "2e5", 0, 1e12, NULL, "k of f_n = k p^(3/2) max(1 - d v_n, 0) (N/m^1.5)"},
    {"dissipation", BCG_KEY_REAL, "0.5", 0, 1e6, NULL,
     "d (s/m): Hunt-Crossley damping; an impact at speed v restitutes about 1 - (2/3) d v (for small d v)"},
    {"slip_velocity", BCG_KEY_REAL, "0.01", 1e-9, 100, NULL,
     "vs (m/s): friction is Coulomb above this tangential speed, viscous-like below"},
};

static const bcg_contact_ops ops = {
    sizeof(bcg_contact_ops), create, destroy, solve, solve_vjp,
#ifdef HC_WITH_CUDA
    hc_solve_cuda, hc_solve_vjp_cuda,
#else
    NULL, NULL,
#endif
};

static const bcg_plugin_desc desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_CONTACT, "hunt_crossley",
                      "Hunt-Crossley contact (Hertzian stiffness, damping proportional to it), smoothed Coulomb "
                      "friction, explicit"),
    keys, BCG_NKEYS(keys),
    /* SLICES: solve and solve_vjp touch only their batch's environments and
     * allocate nothing shared, so the core may call them on blocks of
     * environments from several threads at once */
    BCG_CAP_DIFFERENTIABLE | BCG_CAP_SLICES
#ifdef HC_WITH_CUDA
        | BCG_CAP_CUDA
#endif
    ,
    &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }

#else /* ============================================ the CUDA part (nvcc -x cu) == */
#include <cuda_runtime.h>

#define HC_THREADS 128

__global__ void hc_solve_kernel(hc_cfg c, int nenv, int ncon, bcg_real dt, const int *nactive, const bcg_real *gap,
                                const bcg_real *v0, const bcg_real *mu, bcg_real *lam, bcg_real *fn) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= nenv) return;
  hc_env_solve(&c, hc_nactive(nactive, e, ncon), ncon, dt, gap + (size_t)e * ncon, v0 + (size_t)e * 3 * ncon,
               mu + (size_t)e * ncon, lam + (size_t)e * 3 * ncon, fn + (size_t)e * ncon);
}

__global__ void hc_vjp_kernel(hc_cfg c, int nenv, int ncon, bcg_real dt, const int *nactive, const bcg_real *gap,
                              const bcg_real *v0, const bcg_real *mu, const bcg_real *lam_bar, bcg_real *gap_bar,
                              bcg_real *v0_bar) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= nenv) return;
  hc_env_vjp(&c, hc_nactive(nactive, e, ncon), dt, gap + (size_t)e * ncon, v0 + (size_t)e * 3 * ncon,
             mu + (size_t)e * ncon, lam_bar + (size_t)e * 3 * ncon, gap_bar + (size_t)e * ncon,
             v0_bar + (size_t)e * 3 * ncon);
}

/* hidden: only bcg_plugin_entry is exported; the C part takes their addresses */
extern "C" __attribute__((visibility("hidden"))) int hc_solve_cuda(void *self, bcg_contact_batch *b, void *stream) {
  if (b->nenv <= 0 || b->ncon <= 0) return 0;
  const int nb = (b->nenv + HC_THREADS - 1) / HC_THREADS;
  hc_solve_kernel<<<nb, HC_THREADS, 0, (cudaStream_t)stream>>>(*(const hc_cfg *)self, b->nenv, b->ncon, b->dt,
                                                               b->nactive, b->gap, b->v0, b->mu, b->lam, b->fn);
  return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" __attribute__((visibility("hidden"))) int hc_solve_vjp_cuda(void *self, const bcg_contact_batch *b,
                                                                       bcg_contact_adjoint *adj, void *stream) {
  if (b->nenv <= 0 || b->ncon <= 0) return 0;
  const int nb = (b->nenv + HC_THREADS - 1) / HC_THREADS;
  hc_vjp_kernel<<<nb, HC_THREADS, 0, (cudaStream_t)stream>>>(*(const hc_cfg *)self, b->nenv, b->ncon, b->dt,
                                                             b->nactive, b->gap, b->v0, b->mu, adj->lam_bar,
                                                             adj->gap_bar, adj->v0_bar);
  return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
#endif
