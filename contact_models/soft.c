/* contact_models/soft.c - penalty spring-damper contact with regularised
 * Coulomb friction (DESIGN.md section 5), applied as the impulse dt * f and
 * computed from the contact velocity at the start of the substep (v0):
 *
 *   f_n = k_e max(0, -g) + k_d max(0, -v_n) [g < 0]
 *   f_t = -(v_t / |v_t|_e) min(k_f |v_t|_e, mu f_n),  |v_t|_e = sqrt(|v_t|^2 + e^2)
 *
 * Below the cone (k_f |v_t|_e <= mu f_n) this is exactly the viscous
 * f_t = -k_f v_t; on it the magnitude is mu f_n |v_t| / |v_t|_e. The
 * regulariser e = SOFT_VT_EPS (1e-4 m/s) only matters on the cone at
 * |v_t| < e, which needs mu f_n < k_f e (a few hundredths of a newton), and
 * bounds the Jacobian of v_t / |v_t|_e by 1/e so the VJP is finite at v_t = 0.
 * lam = dt f, fn = f_n. Needs no Delassus matrix; c has no influence.
 *
 * The VJP is exact with the branches as taken (max, indicator and the min),
 * accumulating into gap_bar and v0_bar (c_bar, G_bar untouched: zero).
 * Per-environment code is BCG_HD, shared by the OpenMP loop and the CUDA
 * kernels (#ifdef __CUDACC__, nvcc -x cu into the same .so). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bcg/plugin.h"

typedef bcg_real real;

#define SOFT_VT_EPS ((real)1e-4) /* m/s, tangential speed regulariser */

typedef struct soft_cfg {
  real ke; /* N/m */
  real kd; /* N s/m */
  real kf; /* N s/m */
} soft_cfg;

/* one contact: force f (normal, t1, t2) and which branches were taken */
BCG_HD void soft_force(const soft_cfg *cf, real g, const real v[3], real mu, real f[3],
                       int *slide, real *vm) {
  const real pen = g < 0 ? -g : (real)0;
  const real damp = (g < 0 && v[0] < 0) ? -cf->kd * v[0] : (real)0;
  const real fnv = cf->ke * pen + damp;
  const real m = sqrt(v[1] * v[1] + v[2] * v[2] + SOFT_VT_EPS * SOFT_VT_EPS);
  f[0] = fnv;
  if (cf->kf * m <= mu * fnv) { /* sticking: viscous */
    f[1] = -cf->kf * v[1];
    f[2] = -cf->kf * v[2];
    *slide = 0;
  } else { /* on the cone */
    const real sc = mu * fnv / m;
    f[1] = -sc * v[1];
    f[2] = -sc * v[2];
    *slide = 1;
  }
  *vm = m;
}

BCG_HD void soft_env_solve(const soft_cfg *cf, int na, int ncon, real dt, const real *gap,
                           const real *v0, const real *mu, real *lam, real *fn) {
  for (int i = 0; i < na; i++) {
    real f[3], m;
    int slide;
    soft_force(cf, gap[i], v0 + 3 * i, mu[i], f, &slide, &m);
    for (int a = 0; a < 3; a++) lam[3 * i + a] = dt * f[a];
    fn[i] = f[0];
  }
  for (int i = na; i < ncon; i++) {
    lam[3 * i] = lam[3 * i + 1] = lam[3 * i + 2] = 0;
    fn[i] = 0;
  }
}

BCG_HD void soft_env_vjp(const soft_cfg *cf, int na, real dt, const real *gap, const real *v0,
                         const real *mu, const real *lam_bar, real *gap_bar, real *v0_bar) {
  for (int i = 0; i < na; i++) {
    const real g = gap[i], *v = v0 + 3 * i, *lb = lam_bar + 3 * i;
    real f[3], m;
    int slide;
    soft_force(cf, g, v, mu[i], f, &slide, &m);
    real fnb = dt * lb[0];
    const real ftb1 = dt * lb[1], ftb2 = dt * lb[2];
    real vb[3] = {0, 0, 0};
    if (!slide) {
      vb[1] = -cf->kf * ftb1;
      vb[2] = -cf->kf * ftb2;
    } else {
      /* f_t = -mu f_n v_t / m,  m = sqrt(|v_t|^2 + e^2) */
      const real u1 = v[1] / m, u2 = v[2] / m;
      const real ub = u1 * ftb1 + u2 * ftb2;
      const real sc = mu[i] * f[0] / m;
      fnb -= mu[i] * ub;
      vb[1] = -sc * (ftb1 - u1 * ub);
      vb[2] = -sc * (ftb2 - u2 * ub);
    }
    if (g < 0) {
      gap_bar[i] -= cf->ke * fnb;
      if (v[0] < 0) vb[0] = -cf->kd * fnb;
    }
    for (int a = 0; a < 3; a++) v0_bar[3 * i + a] += vb[a];
  }
}

BCG_HD int soft_nactive(const int *nactive, int e, int ncon) {
  int na = nactive[e];
  return na < 0 ? 0 : (na > ncon ? ncon : na);
}

/* ======================================================================== host == */
#ifndef __CUDACC__

#ifdef BCG_HAVE_CUDA
__attribute__((visibility("hidden"))) int soft_solve_cuda(void *self, bcg_contact_batch *b,
                                                          void *stream);
__attribute__((visibility("hidden"))) int soft_solve_vjp_cuda(void *self,
                                                              const bcg_contact_batch *b,
                                                              bcg_contact_adjoint *adj,
                                                              void *stream);
#endif

/* Defaults for a 40 kg humanoid at dt = 0.005 with ~8 points in contact when
 * standing, each point carrying an effective mass of >= ~1 kg (a foot and the
 * links above it); the forces are explicit (start-of-substep state), so
 * k_d dt / m and k_e dt^2 / m must stay well inside the stable region. */
static const bcg_key_spec soft_keys[] = {
    {"stiffness", BCG_KEY_REAL, "3e4", 0, 1e8, NULL,
     "k_e, N/m per contact point; 3e4: a 40 kg humanoid on 8 points sinks ~1.6 mm, "
     "and k_e dt^2 / m = 0.75 at dt 0.005 for a 1 kg point (explicit-stable)"},
    {"damping", BCG_KEY_REAL, "300", 0, 1e6, NULL,
     "k_d, N s/m per point, acts only while penetrating and approaching; 300: damping ratio ~0.4 "
     "for the whole body on 8 points, k_d dt / m = 1.5 < 2 for a 1 kg point"},
    {"friction_stiffness", BCG_KEY_REAL, "300", 0, 1e6, NULL,
     "k_f, N s/m: viscous tangential force -k_f v_t below the Coulomb cone; 300 stops a slipping "
     "1 kg point within a substep's stable limit (k_f dt / m < 2)"},
};

static void *soft_create(const bcg_services *svc, const bcg_params *params,
                         const bcg_model *model, char *err, size_t errlen) {
  (void)model;
  soft_cfg *cf = (soft_cfg *)calloc(1, sizeof *cf);
  if (!cf) {
    if (err && errlen) snprintf(err, errlen, "soft: out of memory");
    return NULL;
  }
  cf->ke = (real)3e4;
  cf->kd = 300;
  cf->kf = 300;
  if (svc && params && svc->get_real) {
    cf->ke = (real)svc->get_real(params, "stiffness");
    cf->kd = (real)svc->get_real(params, "damping");
    cf->kf = (real)svc->get_real(params, "friction_stiffness");
  }
  if (!(cf->ke >= 0 && cf->kd >= 0 && cf->kf >= 0)) {
    if (err && errlen) snprintf(err, errlen, "soft: stiffness, damping, friction_stiffness must be >= 0");
    free(cf);
    return NULL;
  }
  return cf;
}

static void soft_destroy(void *self) { free(self); }

static int soft_solve(void *self, bcg_contact_batch *b) {
  const soft_cfg *cf = (const soft_cfg *)self;
  const int ncon = b->ncon;
  if (b->nenv <= 0 || ncon <= 0) return 0;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < b->nenv; e++)
    soft_env_solve(cf, soft_nactive(b->nactive, e, ncon), ncon, b->dt, b->gap + (size_t)e * ncon,
                   b->v0 + (size_t)e * 3 * ncon, b->mu + (size_t)e * ncon,
                   b->lam + (size_t)e * 3 * ncon, b->fn + (size_t)e * ncon);
  return 0;
}

static int soft_solve_vjp(void *self, const bcg_contact_batch *b, bcg_contact_adjoint *adj) {
  const soft_cfg *cf = (const soft_cfg *)self;
  const int ncon = b->ncon;
  if (b->nenv <= 0 || ncon <= 0) return 0;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < b->nenv; e++)
    soft_env_vjp(cf, soft_nactive(b->nactive, e, ncon), b->dt, b->gap + (size_t)e * ncon,
                 b->v0 + (size_t)e * 3 * ncon, b->mu + (size_t)e * ncon,
                 adj->lam_bar + (size_t)e * 3 * ncon, adj->gap_bar + (size_t)e * ncon,
                 adj->v0_bar + (size_t)e * 3 * ncon);
  return 0;
}

static const bcg_contact_ops soft_ops = {
    .size = sizeof(bcg_contact_ops),
    .create = soft_create,
    .destroy = soft_destroy,
    .solve = soft_solve,
    .solve_vjp = soft_solve_vjp,
#ifdef BCG_HAVE_CUDA
    .solve_cuda = soft_solve_cuda,
    .solve_vjp_cuda = soft_solve_vjp_cuda,
#else
    .solve_cuda = NULL,
    .solve_vjp_cuda = NULL,
#endif
};

static const bcg_plugin_desc soft_desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_CONTACT, "soft",
                      "penalty spring-damper contact with regularised Coulomb friction"),
    soft_keys,
    BCG_NKEYS(soft_keys),
    BCG_CAP_DIFFERENTIABLE
#ifdef BCG_HAVE_CUDA
        | BCG_CAP_CUDA
#endif
    ,
    &soft_ops,
};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &soft_desc; }

#endif /* !__CUDACC__ */

/* ======================================================================== CUDA == */
#ifdef __CUDACC__
#include <cuda_runtime.h>

__global__ void soft_solve_kernel(soft_cfg cf, int nenv, int ncon, real dt, const int *nactive,
                                  const real *gap, const real *v0, const real *mu, real *lam,
                                  real *fn) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= nenv) return;
  soft_env_solve(&cf, soft_nactive(nactive, e, ncon), ncon, dt, gap + (size_t)e * ncon,
                 v0 + (size_t)e * 3 * ncon, mu + (size_t)e * ncon, lam + (size_t)e * 3 * ncon,
                 fn + (size_t)e * ncon);
}

__global__ void soft_vjp_kernel(soft_cfg cf, int nenv, int ncon, real dt, const int *nactive,
                                const real *gap, const real *v0, const real *mu,
                                const real *lam_bar, real *gap_bar, real *v0_bar) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= nenv) return;
  soft_env_vjp(&cf, soft_nactive(nactive, e, ncon), dt, gap + (size_t)e * ncon,
               v0 + (size_t)e * 3 * ncon, mu + (size_t)e * ncon, lam_bar + (size_t)e * 3 * ncon,
               gap_bar + (size_t)e * ncon, v0_bar + (size_t)e * 3 * ncon);
}

#define SOFT_THREADS 128

extern "C" __attribute__((visibility("hidden"))) int soft_solve_cuda(void *self,
                                                                     bcg_contact_batch *b,
                                                                     void *stream) {
  const soft_cfg *cf = (const soft_cfg *)self;
  if (b->nenv <= 0 || b->ncon <= 0) return 0;
  const int nb = (b->nenv + SOFT_THREADS - 1) / SOFT_THREADS;
  soft_solve_kernel<<<nb, SOFT_THREADS, 0, (cudaStream_t)stream>>>(
      *cf, b->nenv, b->ncon, b->dt, b->nactive, b->gap, b->v0, b->mu, b->lam, b->fn);
  return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" __attribute__((visibility("hidden"))) int soft_solve_vjp_cuda(
    void *self, const bcg_contact_batch *b, bcg_contact_adjoint *adj, void *stream) {
  const soft_cfg *cf = (const soft_cfg *)self;
  if (b->nenv <= 0 || b->ncon <= 0) return 0;
  const int nb = (b->nenv + SOFT_THREADS - 1) / SOFT_THREADS;
  soft_vjp_kernel<<<nb, SOFT_THREADS, 0, (cudaStream_t)stream>>>(
      *cf, b->nenv, b->ncon, b->dt, b->nactive, b->gap, b->v0, b->mu, adj->lam_bar,
      adj->gap_bar, adj->v0_bar);
  return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
#endif /* __CUDACC__ */
