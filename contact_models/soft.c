/* contact_models/soft.c - penalty spring-damper contact with regularised
 * Coulomb friction (docs/design.md section 5.2, which gives the law, both
 * integrators' equations and their adjoints in full).
 *
 * integrator = explicit: the law at the start-of-substep velocity v0,
 * applied as the impulse dt f; ignores c and G; stable only for small gains.
 * integrator = implicit (default): the same law at the end of the substep, on
 * the Delassus system, by Gauss-Seidel sweeps from lam = 0: per contact the
 * normal impulse solves its scalar equation exactly (one of three linear
 * branches), then the tangential impulse is the viscous solution inside the
 * disc |t| <= mu x, else the exact minimiser on the disc (contact_disc_slide).
 *
 * Guarantees: the impulse is continuous in the gap (the damper ramps in over
 * damping_width) and across stick/slip; lam >= 0 along the normal; fn =
 * lam_n / dt. The VJPs are exact for the branches as taken: the implicit one
 * recomputes the sweeps on a per-call tape (iterations * 3 * ncon reals per
 * environment) and accumulates into gap_bar, c_bar and G_bar (may be NULL);
 * the explicit one into gap_bar and v0_bar.
 *
 * Per-environment code is BCG_HD, shared by the OpenMP loop and the CUDA
 * kernels (#ifdef __CUDACC__, nvcc -x cu into the same .so). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/plugin.h"
#include "contact_common.h"


#define SOFT_VT_EPS ((bcg_real)1e-4) /* m/s, tangential speed regulariser (explicit) */
#define SOFT_DW 5e-4                /* m, default damping_width */
#define SOFT_STR_(x) #x
#define SOFT_STR(x) SOFT_STR_(x)

typedef struct soft_cfg {
  bcg_real ke;      /* N/m */
  bcg_real kd;      /* N s/m */
  bcg_real dw;      /* m, penetration over which the damping gain ramps up to kd (0: a step) */
  bcg_real kf;      /* N s/m */
  int implicit; /* 1: end-of-substep law on the Delassus system; 0: explicit */
  int iters;    /* Gauss-Seidel sweeps (implicit) */
} soft_cfg;

/* The damping gain at midpoint gap g: D = k_d R(-g / w), R(x) = x^2 (3 - 2 x)
 * on [0, 1] (0 apart, k_d from w = damping_width deep, C1 at both ends);
 * *dD = d D / d g. A gain that switched from 0 to k_d at g = 0 made the
 * impulse of an approaching point jump there by about dt k_d |v_n| (the
 * forward map's discontinuity of docs/contact_continuity.md). w = 0: the
 * step. */
BCG_HD bcg_real soft_damping(const soft_cfg *cf, bcg_real g, bcg_real *dD) {
  *dD = 0;
  if (!(g < 0)) return 0;
  if (!(cf->dw > 0) || -g >= cf->dw) return cf->kd;
  const bcg_real x = -g / cf->dw;
  *dD = -cf->kd * (bcg_real)6 * x * ((bcg_real)1 - x) / cf->dw;
  return cf->kd * x * x * ((bcg_real)3 - (bcg_real)2 * x);
}

/* ================================================================ explicit == */

/* one contact: force f (normal, t1, t2) and which branches were taken */
BCG_HD void soft_force(const soft_cfg *cf, bcg_real g, const bcg_real v[3], bcg_real mu, bcg_real f[3],
                       int *slide, bcg_real *vm) {
  const bcg_real pen = g < 0 ? -g : (bcg_real)0;
  bcg_real dD;
  const bcg_real D = soft_damping(cf, g, &dD);
  const bcg_real damp = v[0] < 0 ? -D * v[0] : (bcg_real)0;
  const bcg_real fnv = cf->ke * pen + damp;
  const bcg_real m = sqrt(v[1] * v[1] + v[2] * v[2] + SOFT_VT_EPS * SOFT_VT_EPS);
  f[0] = fnv;
  if (cf->kf * m <= mu * fnv) { /* sticking: viscous */
    f[1] = -cf->kf * v[1];
    f[2] = -cf->kf * v[2];
    *slide = 0;
  } else { /* on the cone */
    const bcg_real sc = mu * fnv / m;
    f[1] = -sc * v[1];
    f[2] = -sc * v[2];
    *slide = 1;
  }
  *vm = m;
}

BCG_HD void soft_env_solve(const soft_cfg *cf, int na, int ncon, bcg_real dt, const bcg_real *gap,
                           const bcg_real *v0, const bcg_real *mu, bcg_real *lam, bcg_real *fn) {
  for (int i = 0; i < na; i++) {
    bcg_real f[3], m;
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

BCG_HD void soft_env_vjp(const soft_cfg *cf, int na, bcg_real dt, const bcg_real *gap, const bcg_real *v0,
                         const bcg_real *mu, const bcg_real *lam_bar, bcg_real *gap_bar, bcg_real *v0_bar) {
  for (int i = 0; i < na; i++) {
    const bcg_real g = gap[i], *v = v0 + 3 * i, *lb = lam_bar + 3 * i;
    bcg_real f[3], m;
    int slide;
    soft_force(cf, g, v, mu[i], f, &slide, &m);
    bcg_real fnb = dt * lb[0];
    const bcg_real ftb1 = dt * lb[1], ftb2 = dt * lb[2];
    bcg_real vb[3] = {0, 0, 0};
    if (!slide) {
      vb[1] = -cf->kf * ftb1;
      vb[2] = -cf->kf * ftb2;
    } else {
      /* f_t = -mu f_n v_t / m,  m = sqrt(|v_t|^2 + e^2) */
      const bcg_real u1 = v[1] / m, u2 = v[2] / m;
      const bcg_real ub = u1 * ftb1 + u2 * ftb2;
      const bcg_real sc = mu[i] * f[0] / m;
      fnb -= mu[i] * ub;
      vb[1] = -sc * (ftb1 - u1 * ub);
      vb[2] = -sc * (ftb2 - u2 * ub);
    }
    if (g < 0) {
      bcg_real dD;
      const bcg_real D = soft_damping(cf, g, &dD);
      gap_bar[i] -= cf->ke * fnb;
      if (v[0] < 0) {
        vb[0] = -D * fnb;
        gap_bar[i] -= v[0] * dD * fnb; /* damp = -D(g) v_n */
      }
    }
    for (int a = 0; a < 3; a++) v0_bar[3 * i + a] += vb[a];
  }
}

/* ================================================================ implicit == */

/* y = c_i + sum_j G_ij lam_j (the current end-of-substep velocity of contact i) */
BCG_HD void soft_residual(int i, int na, int ld, const bcg_real *G, const bcg_real *ci, const bcg_real *p,
                          bcg_real y[3]) {
  y[0] = ci[0]; y[1] = ci[1]; y[2] = ci[2];
  for (int j = 0; j < na; j++) {
    const bcg_real *Gij = G + (size_t)(3 * i) * ld + 3 * j;
    const bcg_real *pj = p + 3 * j;
    for (int a = 0; a < 3; a++)
      y[a] += Gij[a * ld] * pj[0] + Gij[a * ld + 1] * pj[1] + Gij[a * ld + 2] * pj[2];
  }
}

/* Intermediates of one contact update (see the header). */
typedef struct soft_imp_st {
  bcg_real w, hw, D;   /* v_n(0), h(0), active damping gain */
  bcg_real dD;         /* d D / d g */
  bcg_real num, den;   /* x = num / den on the branch taken */
  int br;          /* normal branch: 2 spring+damper, 1 spring, 0 none */
  bcg_real dn;         /* x - p_n */
  bcg_real vt[2];      /* y_t + G_tn dn: the end tangential velocity after the normal update */
  bcg_real z[2];       /* vt - G_tt p_t */
  bcg_real Ai[4];      /* (I + dt k_f G_tt)^-1, row major */
  bcg_real u[2];       /* Ai z */
  bcg_real A[4];       /* G_tt + I / (dt k_f) (sliding: the tangential problem's matrix) */
  int slide;       /* x > 0 and the viscous t* outside the disc */
  bcg_real q[3];       /* before the projection: (x, t*) (sticking) or (x, t on the disc) (sliding) */
} soft_imp_st;

BCG_HD void soft_imp_fwd(const soft_cfg *cf, bcg_real dt, bcg_real mu, bcg_real g, const bcg_real *Gii, int ld,
                         const bcg_real p[3], const bcg_real y[3], soft_imp_st *st) {
  const bcg_real a = Gii[0], hdt = dt * (bcg_real)0.5;
  st->w = y[0] - a * p[0];
  st->hw = g + hdt * st->w;
  st->D = soft_damping(cf, g, &st->dD);
  bcg_real x = 0;
  st->br = 0;
  st->num = 0;
  st->den = 1;
  /* D > 0 (g < 0): x = dt max(0, -k_e h - D v_n) (branch 2); else x = dt k_e max(0, -h) (1) */
  const bcg_real D = st->D;
  const bcg_real num = -dt * (cf->ke * st->hw + D * st->w);
  const bcg_real den = (bcg_real)1 + dt * a * (cf->ke * hdt + D);
  const bcg_real xx = num / den;
  if (xx > 0) { st->br = D > 0 ? 2 : 1; st->num = num; st->den = den; x = xx; }
  st->dn = x - p[0];
  const bcg_real g11 = Gii[ld + 1], g12 = Gii[ld + 2], g21 = Gii[2 * ld + 1], g22 = Gii[2 * ld + 2];
  st->vt[0] = y[1] + Gii[ld] * st->dn;
  st->vt[1] = y[2] + Gii[2 * ld] * st->dn;
  st->z[0] = st->vt[0] - (g11 * p[1] + g12 * p[2]);
  st->z[1] = st->vt[1] - (g21 * p[1] + g22 * p[2]);
  const bcg_real al = dt * cf->kf;
  const bcg_real A00 = (bcg_real)1 + al * g11, A01 = al * g12, A10 = al * g21, A11 = (bcg_real)1 + al * g22;
  const bcg_real id = (bcg_real)1 / (A00 * A11 - A01 * A10);
  st->Ai[0] = A11 * id; st->Ai[1] = -A01 * id;
  st->Ai[2] = -A10 * id; st->Ai[3] = A00 * id;
  st->u[0] = st->Ai[0] * st->z[0] + st->Ai[1] * st->z[1];
  st->u[1] = st->Ai[2] * st->z[0] + st->Ai[3] * st->z[1];
  st->q[0] = x;
  st->q[1] = -al * st->u[0];
  st->q[2] = -al * st->u[1];
  /* the viscous solution outside the disc: sliding (the same test as contact_proj's);
   * t* minimises 1/2 t^T A t + z^T t, A = G_tt + I / (dt k_f): on the disc, the
   * minimiser there (equal to t* on the boundary) */
  st->slide = x > 0 && sqrt(st->q[1] * st->q[1] + st->q[2] * st->q[2]) > mu * x;
  if (st->slide) {
    const bcg_real il = (bcg_real)1 / al; /* al > 0: al = 0 gives t* = 0, never sliding */
    st->A[0] = g11 + il; st->A[1] = g12; st->A[2] = g21; st->A[3] = g22 + il;
    contact_disc_slide(st->A, st->z, mu * x, st->q + 1);
  }
}

/* Adjoint of soft_imp_fwd + contact_proj: from pb (adjoint of the updated lam_i)
 * to the adjoints of the pre-update lam_i (pold_b, overwritten) and of y (yb,
 * overwritten); accumulates into *gb (the gap) and Gbii (the G_bar block of
 * G_ii; may be NULL). */
BCG_HD void soft_imp_vjp(const soft_cfg *cf, bcg_real dt, bcg_real mu, const bcg_real *Gii, int ld,
                         const bcg_real p[3], const soft_imp_st *st, const bcg_real pb[3],
                         bcg_real pold_b[3], bcg_real yb[3], bcg_real *gb, bcg_real *Gbii) {
  const bcg_real a = Gii[0], hdt = dt * (bcg_real)0.5, al = dt * cf->kf;
  bcg_real qb[3], vb0, vb1;
  contact_proj_vjp(st->q, mu, pb, qb);
  if (st->slide) {
    /* q_t = disc(A = G_tt + I / al, z, r = mu x),  z = vt - G_tt p_t */
    bcg_real Ab[4] = {0, 0, 0, 0}, zb[2] = {0, 0}, rb = 0;
    contact_disc_slide_vjp(st->A, st->z, mu * st->q[0], qb + 1, Ab, zb, &rb);
    qb[0] += mu * rb;
    vb0 = zb[0];
    vb1 = zb[1];
    pold_b[1] = -(Gii[ld + 1] * zb[0] + Gii[2 * ld + 1] * zb[1]);
    pold_b[2] = -(Gii[ld + 2] * zb[0] + Gii[2 * ld + 2] * zb[1]);
    if (Gbii) {
      Gbii[ld + 1] += Ab[0] - zb[0] * p[1];
      Gbii[ld + 2] += Ab[1] - zb[0] * p[2];
      Gbii[2 * ld + 1] += Ab[2] - zb[1] * p[1];
      Gbii[2 * ld + 2] += Ab[3] - zb[1] * p[2];
    }
  } else {
    /* t* = -al u,  u = Ai z,  Ai = (I + al G_tt)^-1 */
    const bcg_real ub0 = -al * qb[1], ub1 = -al * qb[2];
    const bcg_real zb0 = st->Ai[0] * ub0 + st->Ai[2] * ub1, zb1 = st->Ai[1] * ub0 + st->Ai[3] * ub1;
    /* z = vt - G_tt p_t */
    vb0 = zb0;
    vb1 = zb1;
    pold_b[1] = -(Gii[ld + 1] * zb0 + Gii[2 * ld + 1] * zb1);
    pold_b[2] = -(Gii[ld + 2] * zb0 + Gii[2 * ld + 2] * zb1);
    if (Gbii) {
      /* G_tt: through A (Ab = -zb u^T, times al) and through -G_tt p_t */
      Gbii[ld + 1] -= zb0 * (al * st->u[0] + p[1]);
      Gbii[ld + 2] -= zb0 * (al * st->u[1] + p[2]);
      Gbii[2 * ld + 1] -= zb1 * (al * st->u[0] + p[1]);
      Gbii[2 * ld + 2] -= zb1 * (al * st->u[1] + p[2]);
    }
  }
  /* vt = y_t + G_tn dn */
  yb[1] = vb0;
  yb[2] = vb1;
  const bcg_real dnb = vb0 * Gii[ld] + vb1 * Gii[2 * ld];
  if (Gbii) {
    Gbii[ld] += vb0 * st->dn;
    Gbii[2 * ld] += vb1 * st->dn;
  }
  /* dn = x - p_n */
  const bcg_real xb = qb[0] + dnb;
  bcg_real pnb = -dnb, wb = 0, ab = 0;
  if (st->br) {
    /* x = num / den */
    const bcg_real x = st->q[0];
    const bcg_real numb = xb / st->den, denb = -xb * x / st->den;
    const bcg_real hwb = -dt * cf->ke * numb;
    if (st->br == 2) {
      wb -= dt * st->D * numb;
      ab += denb * dt * (cf->ke * hdt + st->D);
      /* D = D(g) */
      *gb += (-dt * st->w * numb + denb * dt * a) * st->dD;
    } else {
      ab += denb * dt * cf->ke * hdt;
    }
    /* hw = g + dt/2 w */
    *gb += hwb;
    wb += hdt * hwb;
  }
  /* w = y_n - a p_n */
  yb[0] = wb;
  ab -= wb * p[0];
  pnb -= a * wb;
  pold_b[0] = pnb;
  if (Gbii) Gbii[0] += ab;
}

/* Forward solve of one environment; lam doubles as the iterate. With tape
 * != NULL the pre-update lam_i of every (sweep, contact) is recorded. */
BCG_HD void soft_imp_env_solve(const soft_cfg *cf, int na, int ncon, bcg_real dt, const bcg_real *gap,
                               const bcg_real *c, const bcg_real *G, const bcg_real *mu, bcg_real *lam, bcg_real *fn,
                               bcg_real *tape) {
  const int ld = 3 * ncon;
  for (int i = 0; i < 3 * ncon; i++) lam[i] = 0;
  for (int k = 0; k < cf->iters; k++)
    for (int i = 0; i < na; i++) {
      bcg_real *pi = lam + 3 * i, y[3];
      if (tape) {
        bcg_real *t = tape + 3 * ((size_t)k * na + i);
        t[0] = pi[0]; t[1] = pi[1]; t[2] = pi[2];
      }
      soft_residual(i, na, ld, G, c + 3 * i, lam, y);
      soft_imp_st st;
      soft_imp_fwd(cf, dt, mu[i], gap[i], G + (size_t)(3 * i) * ld + 3 * i, ld, pi, y, &st);
      contact_proj(st.q, mu[i], pi);
    }
  for (int i = 0; i < na; i++) fn[i] = lam[3 * i] / dt;
  for (int i = na; i < ncon; i++) fn[i] = 0;
}

/* VJP of one environment: accumulates into gap_bar, c_bar, G_bar (may be
 * NULL). lam, fn, pb ([3 ncon], [ncon], [3 ncon]) and the tape
 * ([iters * 3 * na]) are scratch. */
BCG_HD void soft_imp_env_vjp(const soft_cfg *cf, int na, int ncon, bcg_real dt, const bcg_real *gap,
                             const bcg_real *c, const bcg_real *G, const bcg_real *mu, const bcg_real *lam_bar,
                             bcg_real *gap_bar, bcg_real *c_bar, bcg_real *G_bar, bcg_real *lam, bcg_real *fn,
                             bcg_real *pb, bcg_real *tape) {
  const int ld = 3 * ncon;
  soft_imp_env_solve(cf, na, ncon, dt, gap, c, G, mu, lam, fn, tape);
  for (int i = 0; i < 3 * na; i++) pb[i] = lam_bar[i];
  for (int k = cf->iters - 1; k >= 0; k--)
    for (int i = na - 1; i >= 0; i--) {
      const bcg_real *t = tape + 3 * ((size_t)k * na + i);
      bcg_real *pi = lam + 3 * i, *pbi = pb + 3 * i;
      pi[0] = t[0]; pi[1] = t[1]; pi[2] = t[2]; /* state before this update */
      bcg_real y[3], yb[3];
      soft_residual(i, na, ld, G, c + 3 * i, lam, y);
      const bcg_real *Gii = G + (size_t)(3 * i) * ld + 3 * i;
      soft_imp_st st;
      soft_imp_fwd(cf, dt, mu[i], gap[i], Gii, ld, pi, y, &st);
      const bcg_real pn[3] = {pbi[0], pbi[1], pbi[2]};
      soft_imp_vjp(cf, dt, mu[i], Gii, ld, pi, &st, pn, pbi, yb, gap_bar + i,
                   G_bar ? G_bar + (size_t)(3 * i) * ld + 3 * i : NULL);
      /* y = c_i + sum_j G_ij lam_j */
      for (int a = 0; a < 3; a++) c_bar[3 * i + a] += yb[a];
      for (int j = 0; j < na; j++) {
        const bcg_real *Gij = G + (size_t)(3 * i) * ld + 3 * j;
        const bcg_real *pj = lam + 3 * j;
        bcg_real *pbj = pb + 3 * j;
        for (int b = 0; b < 3; b++)
          pbj[b] += Gij[b] * yb[0] + Gij[ld + b] * yb[1] + Gij[2 * ld + b] * yb[2];
        if (G_bar) {
          bcg_real *Gbij = G_bar + (size_t)(3 * i) * ld + 3 * j;
          for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) Gbij[a * ld + b] += yb[a] * pj[b];
        }
      }
    }
  /* lam starts at 0: no further adjoint */
}

/* scratch reals per environment of the implicit VJP: lam, fn, pb, tape */
BCG_HD size_t soft_imp_work_size(const soft_cfg *cf, int ncon) {
  return (size_t)ncon * (3 + 1 + 3) + (size_t)cf->iters * 3 * (size_t)ncon;
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

/* Defaults (implicit) for a 40 kg humanoid at dt = 0.005 standing on ~8
 * contact points (~49 N each), where a point's effective mass can be ~1 kg (a
 * foot). The implicit update is unconditionally stable for the linear
 * spring-damper, so the gains are chosen for accuracy, not for stability. */
static const bcg_key_spec soft_keys[] = {
    {"integrator", BCG_KEY_CHOICE, "implicit", 0, 0, "implicit|explicit",
     "implicit (default): the law at the end of the substep, Gauss-Seidel on the Delassus "
     "system, stable for any gains (viscous friction inside the friction disc; on it the "
     "contact's law solved exactly on the disc: maximum dissipation, friction against the slip, "
     "continuous across stick/slip); explicit: forces from the start-of-substep state (no G; "
     "needs k_d dt/m < 2 and k_f dt/m < 2 for the lightest point mass m, e.g. stiffness 3e4, "
     "damping 300, friction_stiffness 300 at dt 5 ms: the defaults below are implicit ones)"},
    {"stiffness", BCG_KEY_REAL, "1e5", 0, 1e8, NULL,
     "k_e, N/m per contact point; 1e5: a 40 kg humanoid on 8 points (49 N each) sinks ~0.5 mm, "
     "a 1 kg sphere 0.1 mm; implicit keeps k_e dt^2/m = 2.5 (1 kg point, dt 5 ms) stable"},
    {"damping", BCG_KEY_REAL, "2e3", 0, 1e6, NULL,
     "k_d, N s/m per point, only while penetrating (midpoint gap < 0, ramped in over "
     "damping_width) and approaching; 2e3: "
     "damping ratio ~1.4 for the whole 40 kg body on 8 points (k = 8e5 N/m), overdamped for a "
     "1 kg point (ratio 3.2, no bounce); implicit, so k_d dt/m = 10 only slows the approach"},
    {"damping_width", BCG_KEY_REAL, SOFT_STR(SOFT_DW), 0, 0.1, NULL,
     "m: the damping gain ramps smoothly from 0 at the surface to k_d at this penetration "
     "(C1), so an approaching point's impulse does not jump when it crosses the floor; 5e-4 is "
     "about the humanoid's resting sink (full damping at rest); 0: full damping from the first "
     "touch (the impulse jumps by about dt k_d |v_n| there)"},
    {"friction_stiffness", BCG_KEY_REAL, "1e4", 0, 1e7, NULL,
     "k_f, N s/m: viscous tangential force -k_f v_t below the Coulomb cone, so a standing point "
     "creeps at F_t / k_f; 1e4: 10 N of tangential load per point creeps 1 mm/s, and the "
     "implicit solve keeps k_f dt/m = 50 (1 kg point) stable"},
    {"iterations", BCG_KEY_INT, "10", 1, 1000, NULL,
     "implicit: Gauss-Seidel sweeps over the active contacts per substep (fixed, so the adjoint "
     "is exact); 10 as smoothed_kappa's default (the compliance k_e, k_d makes the system better "
     "conditioned than hard contact); explicit ignores it"},
};

static void *soft_create(const bcg_services *svc, const bcg_params *params,
                         const bcg_model *model, char *err, size_t errlen) {
  (void)model;
  soft_cfg *cf = (soft_cfg *)calloc(1, sizeof *cf);
  if (!cf) {
    if (err && errlen) snprintf(err, errlen, "soft: out of memory");
    return NULL;
  }
  /* without services (unit use) the declared defaults apply */
  cf->ke = (bcg_real)1e5;
  cf->kd = (bcg_real)2e3;
  cf->dw = (bcg_real)SOFT_DW;
  cf->kf = (bcg_real)1e4;
  cf->implicit = 1;
  cf->iters = 10;
  if (svc && params) {
    if (svc->get_real) {
      cf->ke = (bcg_real)svc->get_real(params, "stiffness");
      cf->kd = (bcg_real)svc->get_real(params, "damping");
      cf->dw = (bcg_real)svc->get_real(params, "damping_width");
      cf->kf = (bcg_real)svc->get_real(params, "friction_stiffness");
    }
    if (svc->get_int) cf->iters = (int)svc->get_int(params, "iterations");
    if (svc->get_string) {
      const char *s = svc->get_string(params, "integrator");
      if (s && strcmp(s, "implicit") == 0) cf->implicit = 1;
      else if (s && strcmp(s, "explicit") == 0) cf->implicit = 0;
      else {
        if (err && errlen)
          snprintf(err, errlen, "soft: integrator '%s' is not one of implicit|explicit", s ? s : "(null)");
        free(cf);
        return NULL;
      }
    }
  }
  if (!(cf->ke >= 0 && cf->kd >= 0 && cf->kf >= 0 && cf->dw >= 0)) {
    if (err && errlen)
      snprintf(err, errlen, "soft: stiffness, damping, damping_width, friction_stiffness must be >= 0");
    free(cf);
    return NULL;
  }
  if (cf->iters < 1) {
    if (err && errlen) snprintf(err, errlen, "soft: iterations must be >= 1");
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
  if (cf->implicit) {
    if (!b->G) return -1; /* BCG_CAP_NEEDS_DELASSUS */
    const size_t gsz = (size_t)9 * ncon * ncon;
#pragma omp parallel for schedule(static)
    for (int e = 0; e < b->nenv; e++)
      soft_imp_env_solve(cf, contact_nactive(b->nactive, e, ncon), ncon, b->dt,
                         b->gap + (size_t)e * ncon, b->c + (size_t)e * 3 * ncon,
                         b->G + (size_t)e * gsz, b->mu + (size_t)e * ncon,
                         b->lam + (size_t)e * 3 * ncon, b->fn + (size_t)e * ncon, NULL);
    return 0;
  }
#pragma omp parallel for schedule(static)
  for (int e = 0; e < b->nenv; e++)
    soft_env_solve(cf, contact_nactive(b->nactive, e, ncon), ncon, b->dt, b->gap + (size_t)e * ncon,
                   b->v0 + (size_t)e * 3 * ncon, b->mu + (size_t)e * ncon,
                   b->lam + (size_t)e * 3 * ncon, b->fn + (size_t)e * ncon);
  return 0;
}

static int soft_solve_vjp(void *self, const bcg_contact_batch *b, bcg_contact_adjoint *adj) {
  const soft_cfg *cf = (const soft_cfg *)self;
  const int ncon = b->ncon;
  if (b->nenv <= 0 || ncon <= 0) return 0;
  if (cf->implicit) {
    if (!b->G) return -1;
    const size_t ws = soft_imp_work_size(cf, ncon);
    bcg_real *work = (bcg_real *)malloc((size_t)b->nenv * ws * sizeof(bcg_real));
    if (!work) return -1;
    const size_t gsz = (size_t)9 * ncon * ncon;
#pragma omp parallel for schedule(static)
    for (int e = 0; e < b->nenv; e++) {
      bcg_real *we = work + (size_t)e * ws;
      soft_imp_env_vjp(cf, contact_nactive(b->nactive, e, ncon), ncon, b->dt,
                       b->gap + (size_t)e * ncon, b->c + (size_t)e * 3 * ncon,
                       b->G + (size_t)e * gsz, b->mu + (size_t)e * ncon,
                       adj->lam_bar + (size_t)e * 3 * ncon, adj->gap_bar + (size_t)e * ncon,
                       adj->c_bar + (size_t)e * 3 * ncon,
                       adj->G_bar ? adj->G_bar + (size_t)e * gsz : NULL, we, we + 3 * ncon,
                       we + 4 * ncon, we + 7 * ncon);
    }
    free(work);
    return 0;
  }
#pragma omp parallel for schedule(static)
  for (int e = 0; e < b->nenv; e++)
    soft_env_vjp(cf, contact_nactive(b->nactive, e, ncon), b->dt, b->gap + (size_t)e * ncon,
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

/* NEEDS_DELASSUS: the implicit integrator (default) solves on G; the explicit
 * one ignores it. */
static const bcg_plugin_desc soft_desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_CONTACT, "soft",
                      "penalty spring-damper contact with regularised Coulomb friction "
                      "(implicit on the Delassus system, or explicit)"),
    soft_keys,
    BCG_NKEYS(soft_keys),
    BCG_CAP_NEEDS_DELASSUS | BCG_CAP_DIFFERENTIABLE | BCG_CAP_SLICES
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

__global__ void soft_solve_kernel(soft_cfg cf, int nenv, int ncon, bcg_real dt, const int *nactive,
                                  const bcg_real *gap, const bcg_real *v0, const bcg_real *mu, bcg_real *lam,
                                  bcg_real *fn) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= nenv) return;
  soft_env_solve(&cf, contact_nactive(nactive, e, ncon), ncon, dt, gap + (size_t)e * ncon,
                 v0 + (size_t)e * 3 * ncon, mu + (size_t)e * ncon, lam + (size_t)e * 3 * ncon,
                 fn + (size_t)e * ncon);
}

__global__ void soft_vjp_kernel(soft_cfg cf, int nenv, int ncon, bcg_real dt, const int *nactive,
                                const bcg_real *gap, const bcg_real *v0, const bcg_real *mu,
                                const bcg_real *lam_bar, bcg_real *gap_bar, bcg_real *v0_bar) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= nenv) return;
  soft_env_vjp(&cf, contact_nactive(nactive, e, ncon), dt, gap + (size_t)e * ncon,
               v0 + (size_t)e * 3 * ncon, mu + (size_t)e * ncon, lam_bar + (size_t)e * 3 * ncon,
               gap_bar + (size_t)e * ncon, v0_bar + (size_t)e * 3 * ncon);
}

__global__ void soft_imp_solve_kernel(soft_cfg cf, int nenv, int ncon, bcg_real dt,
                                      const int *nactive, const bcg_real *gap, const bcg_real *c,
                                      const bcg_real *G, const bcg_real *mu, bcg_real *lam, bcg_real *fn) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= nenv) return;
  const size_t gsz = (size_t)9 * ncon * ncon;
  const int na = contact_nactive(nactive, e, ncon);
  bcg_real Gl[CONTACT_GLOCAL]; /* see contact_stage_G */
  contact_stage_G(Gl, G + (size_t)e * gsz, na, 3 * ncon);
  soft_imp_env_solve(&cf, na, ncon, dt, gap + (size_t)e * ncon, c + (size_t)e * 3 * ncon, Gl,
                     mu + (size_t)e * ncon, lam + (size_t)e * 3 * ncon, fn + (size_t)e * ncon, NULL);
}

__global__ void soft_imp_vjp_kernel(soft_cfg cf, int nenv, int ncon, bcg_real dt, const int *nactive,
                                    const bcg_real *gap, const bcg_real *c, const bcg_real *G,
                                    const bcg_real *mu, const bcg_real *lam_bar, bcg_real *gap_bar,
                                    bcg_real *c_bar, bcg_real *G_bar, bcg_real *work, size_t ws) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= nenv) return;
  const size_t gsz = (size_t)9 * ncon * ncon;
  const int na = contact_nactive(nactive, e, ncon), ld = 3 * ncon;
  bcg_real Gl[CONTACT_GLOCAL], Gbl[CONTACT_GLOCAL]; /* see contact_stage_G */
  contact_stage_G(Gl, G + (size_t)e * gsz, na, ld);
  if (G_bar) contact_zero_G(Gbl, na, ld);
  bcg_real *we = work + (size_t)e * ws;
  soft_imp_env_vjp(&cf, na, ncon, dt, gap + (size_t)e * ncon, c + (size_t)e * 3 * ncon, Gl,
                   mu + (size_t)e * ncon, lam_bar + (size_t)e * 3 * ncon, gap_bar + (size_t)e * ncon,
                   c_bar + (size_t)e * 3 * ncon, G_bar ? Gbl : NULL, we, we + 3 * ncon, we + 4 * ncon,
                   we + 7 * ncon);
  if (G_bar) contact_add_G(G_bar + (size_t)e * gsz, Gbl, na, ld);
}


extern "C" __attribute__((visibility("hidden"))) int soft_solve_cuda(void *self,
                                                                     bcg_contact_batch *b,
                                                                     void *stream) {
  const soft_cfg *cf = (const soft_cfg *)self;
  if (b->nenv <= 0 || b->ncon <= 0) return 0;
  if (cf->implicit) {
    if (!b->G || b->ncon > CONTACT_MAXC) return -1;
    const int nt = bcg_cuda_block_default(), nb = (b->nenv + nt - 1) / nt;
    soft_imp_solve_kernel<<<nb, nt, 0, (cudaStream_t)stream>>>(
        *cf, b->nenv, b->ncon, b->dt, b->nactive, b->gap, b->c, b->G, b->mu, b->lam, b->fn);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
  }
  const int nt = bcg_cuda_block_default(), nb = (b->nenv + nt - 1) / nt;
  soft_solve_kernel<<<nb, nt, 0, (cudaStream_t)stream>>>(
      *cf, b->nenv, b->ncon, b->dt, b->nactive, b->gap, b->v0, b->mu, b->lam, b->fn);
  return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" __attribute__((visibility("hidden"))) int soft_solve_vjp_cuda(
    void *self, const bcg_contact_batch *b, bcg_contact_adjoint *adj, void *stream) {
  const soft_cfg *cf = (const soft_cfg *)self;
  if (b->nenv <= 0 || b->ncon <= 0) return 0;
  if (cf->implicit) {
    if (!b->G || b->ncon > CONTACT_MAXC) return -1;
    cudaStream_t st = (cudaStream_t)stream;
    const size_t ws = soft_imp_work_size(cf, b->ncon);
    bcg_real *work = NULL;
    if (cudaMallocAsync((void **)&work, (size_t)b->nenv * ws * sizeof(bcg_real), st) != cudaSuccess)
      return -1;
    const int nt = bcg_cuda_block_default(), nb = (b->nenv + nt - 1) / nt;
    soft_imp_vjp_kernel<<<nb, nt, 0, st>>>(
        *cf, b->nenv, b->ncon, b->dt, b->nactive, b->gap, b->c, b->G, b->mu, adj->lam_bar,
        adj->gap_bar, adj->c_bar, adj->G_bar, work, ws);
    const cudaError_t err = cudaGetLastError();
    cudaFreeAsync(work, st);
    return err == cudaSuccess ? 0 : -1;
  }
  const int nt = bcg_cuda_block_default(), nb = (b->nenv + nt - 1) / nt;
  soft_vjp_kernel<<<nb, nt, 0, (cudaStream_t)stream>>>(
      *cf, b->nenv, b->ncon, b->dt, b->nactive, b->gap, b->v0, b->mu, adj->lam_bar,
      adj->gap_bar, adj->v0_bar);
  return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
#endif /* __CUDACC__ */
