/* contact_models/smoothed_kappa.c - the BCG paper's smoothed hard contact
 * (docs/design.md section 5.3 has the solve and its adjoint in full) and,
 * compiled with BCG_CONTACT_HARD (hard.c), the hard contact of section 5.4.
 *
 * Projected Gauss-Seidel over the active contacts on the Delassus system,
 * each contact's impulse weighted by s(g) = T(g / margin) / (1 + exp(kappa g))
 * (kappa g clipped), which tapers to 0 at the activation margin (hard:
 * s = [g <= 0]); solver = split
 * (default: a scalar normal step, then the exact 2x2 sticking step or the
 * exact sliding step on the friction disc), block or reference; an optional
 * position correction erp. Guarantees: a control step is continuous in the
 * state near the floor (test_continuity); the VJP recomputes the sweeps on a
 * per-call tape and is the exact adjoint of the unrolled iterations with the
 * branches as taken (test_contact_plugins: FD).
 *
 * One source for CPU and GPU: the per-environment functions are BCG_HD; the
 * host part (#ifndef __CUDACC__) has the descriptor and OpenMP loops, the
 * CUDA part (#ifdef __CUDACC__, nvcc -x cu into the same .so) one-thread-
 * per-environment kernels and their extern "C" launchers. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/plugin.h"
#include "contact_common.h"

#ifdef BCG_CONTACT_HARD
#define PGS_NAME "hard"
#define PGS_DESCR "hard contact: projected Gauss-Seidel on the Delassus system, binary activation"
#else
#define PGS_NAME "smoothed_kappa"
#define PGS_DESCR "smoothed hard contact: projected Gauss-Seidel with sigmoid activation of stiffness kappa"
#endif


/* The instance; shared by both compilations (the CUDA launchers read it). */
typedef struct pgs_cfg {
  bcg_real kappa; /* sigmoid stiffness, 1/m (unused by hard) */
  int iters;  /* Gauss-Seidel sweeps */
  int solver; /* PGS_REFERENCE, PGS_BLOCK or PGS_SPLIT */
  int hard;   /* binary activation */
  bcg_real erp;   /* position correction: the normal velocity target is -erp g / dt */
} pgs_cfg;

#define PGS_REFERENCE 0 /* scalar step 1 / (1 + sum_j det G_ij) */
#define PGS_BLOCK 1     /* 3x3 block step G_ii^-1, then the disc projection */
#define PGS_SPLIT 2     /* normal step 1 / G_ii,nn and clip, then tangential (G_ii,tt)^-1 */

/* Sweeps recorded on the tape: split starts from p = 0 with one extra sweep
 * (its initialisation), the others from -G_ii^-1 c_i. */
BCG_HD int pgs_nsweep(const pgs_cfg *cf) { return cf->iters + (cf->solver == PGS_SPLIT ? 1 : 0); }

/* Per-environment scratch, in reals: s, ds, r [ncon] each (r: the reference
 * step; unused by split and block), Gi [9 ncon] (the inverted diagonal blocks; split:
 * blockdiag(1 / G_nn, (G_tt)^-1)), p [3 ncon];
 * the VJP adds pb [3 ncon], sb, rb [ncon] each, Gib [9 ncon] and the tape:
 * the pre-update p_i and the residual y of every (sweep, contact),
 * [2][nsweep * 3 * ncon]; vjp = 2 (the adjoint's kept solve, on the CPU)
 * also the split step's state of each (sweep, contact), [nsweep * ncon][8]
 * (PGS_NST: qn, dn, z, q, slide; the backward sweeps read it instead of
 * running the step again). */
#define PGS_NST 8
BCG_HD size_t pgs_work_size(int ncon, int nsweep, int vjp) {
  size_t n = (size_t)ncon * (3 + 9 + 3);
  if (vjp) n += (size_t)ncon * (3 + 2 + 9) + (size_t)2 * nsweep * 3 * (size_t)ncon;
  if (vjp == 2) n += (size_t)PGS_NST * nsweep * (size_t)ncon;
  return n;
}

/* ---- 3x3 helpers (row stride ld) --------------------------------------------- */

/* cofactor matrix C (C_ab = d det A / d A_ab); returns det A */
BCG_HD bcg_real pgs_cof3(const bcg_real *A, int ld, bcg_real C[9]) {
  const bcg_real a00 = A[0], a01 = A[1], a02 = A[2];
  const bcg_real a10 = A[ld], a11 = A[ld + 1], a12 = A[ld + 2];
  const bcg_real a20 = A[2 * ld], a21 = A[2 * ld + 1], a22 = A[2 * ld + 2];
  C[0] = a11 * a22 - a12 * a21;
  C[1] = a12 * a20 - a10 * a22;
  C[2] = a10 * a21 - a11 * a20;
  C[3] = a02 * a21 - a01 * a22;
  C[4] = a00 * a22 - a02 * a20;
  C[5] = a01 * a20 - a00 * a21;
  C[6] = a01 * a12 - a02 * a11;
  C[7] = a02 * a10 - a00 * a12;
  C[8] = a00 * a11 - a01 * a10;
  return a00 * C[0] + a01 * C[1] + a02 * C[2];
}

BCG_HD void pgs_inv3(const bcg_real *A, int ld, bcg_real Ai[9]) {
  bcg_real C[9];
  const bcg_real d = pgs_cof3(A, ld, C);
  const bcg_real id = (bcg_real)1 / d;
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++) Ai[3 * a + b] = C[3 * b + a] * id;
}

/* Directions in which a contact cannot move at all: a planar model (its
 * root a chain of slides and hinges in the x-z plane, models/biped2d.xml)
 * has contact Jacobian rows that are exactly zero across the plane, so the
 * diagonal block G_ii has a zero row and column and no inverse. Such a
 * direction (its diagonal entry at most 1e-14 of the block's largest) gets
 * no impulse: the block is inverted on the other directions and Gi is zero
 * in its row and column (the pseudo-inverse; exact for the adjoint too,
 * since G has no dependence there). Blocks without one take the usual path
 * unchanged. */
BCG_HD int pgs_block_has_null(const bcg_real *A, int ld) {
  const bcg_real d0 = A[0], d1 = A[ld + 1], d2 = A[2 * ld + 2];
  const bcg_real mx = d0 > d1 ? (d0 > d2 ? d0 : d2) : (d1 > d2 ? d1 : d2);
  const bcg_real tol = (bcg_real)1e-14 * mx;
  return d0 <= tol || d1 <= tol || d2 <= tol;
}

/* Gi = the inverse of A on its directions with a diagonal above the
 * tolerance of pgs_block_has_null, zero elsewhere; split: normal and
 * tangential parts separately (blockdiag(1 / G_nn, (G_tt)^-1)). */
BCG_HD void pgs_inv_null(const bcg_real *A, int ld, int split, bcg_real Gi[9]) {
  const bcg_real d[3] = {A[0], A[ld + 1], A[2 * ld + 2]};
  const bcg_real mx = d[0] > d[1] ? (d[0] > d[2] ? d[0] : d[2]) : (d[1] > d[2] ? d[1] : d[2]);
  const bcg_real tol = (bcg_real)1e-14 * mx;
  for (int k = 0; k < 9; k++) Gi[k] = 0;
  int act[3], na = 0;
  for (int a = 0; a < 3; a++)
    if (d[a] > tol) act[na++] = a;
  /* groups inverted together: all active directions, or (split) the normal
   * alone and the active tangents */
  int grp[2][3], ng[2] = {0, 0}, ngrp = split ? 2 : 1;
  for (int k = 0; k < na; k++) {
    int g = split && act[k] > 0 ? 1 : 0;
    grp[g][ng[g]++] = act[k];
  }
  for (int g = 0; g < ngrp; g++) {
    const int *ix = grp[g];
    if (ng[g] == 1) {
      Gi[3 * ix[0] + ix[0]] = (bcg_real)1 / A[ix[0] * ld + ix[0]];
    } else if (ng[g] == 2) {
      const bcg_real a = A[ix[0] * ld + ix[0]], b = A[ix[0] * ld + ix[1]], c = A[ix[1] * ld + ix[0]],
                 e = A[ix[1] * ld + ix[1]], id = (bcg_real)1 / (a * e - b * c);
      Gi[3 * ix[0] + ix[0]] = e * id;
      Gi[3 * ix[0] + ix[1]] = -b * id;
      Gi[3 * ix[1] + ix[0]] = -c * id;
      Gi[3 * ix[1] + ix[1]] = a * id;
    }
  }
}

/* The position correction added to the normal residual: the solve asks for an
 * end-of-substep normal velocity of at least -erp g / dt, so a penetrating
 * contact (g < 0) is pushed out by the fraction erp of its depth per substep
 * and a contact still apart may close at most that fraction of its gap
 * (linear in g: smooth, and 0 at g = 0). */
BCG_HD bcg_real pgs_shift(const pgs_cfg *cf, bcg_real g, bcg_real dt) { return cf->erp * g / dt; }

/* ---- activation ------------------------------------------------------------------ */

/* s = sigmoid(-kappa g) * T(g / margin), ds = d s / d g. T is the margin
 * taper: 1 for g <= 0, 1 - 3 x^2 + 2 x^3 for x = g / margin in (0, 1), 0 from
 * the margin on (C1 at both ends), so the weight of a contact reaches zero
 * exactly where the core stops listing it (gap > margin) and the forward map
 * has no jump there; margin <= 0: no taper. */
BCG_HD void pgs_weight(const pgs_cfg *cf, bcg_real g, bcg_real margin, bcg_real *s, bcg_real *ds) {
  if (cf->hard) {
    *s = g <= 0 ? (bcg_real)1 : (bcg_real)0;
    *ds = 0;
    return;
  }
  bcg_real z = cf->kappa * g;
  int clipped = 0;
  if (z < (bcg_real)-100) { z = (bcg_real)-100; clipped = 1; }
  else if (z > (bcg_real)50) { z = (bcg_real)50; clipped = 1; }
  const bcg_real sv = (bcg_real)1 / ((bcg_real)1 + exp(z));
  const bcg_real dsv = clipped ? (bcg_real)0 : -cf->kappa * sv * ((bcg_real)1 - sv);
  bcg_real T = 1, dT = 0;
  if (margin > 0 && g > 0) {
    if (g >= margin) {
      T = 0;
    } else {
      const bcg_real x = g / margin;
      T = (bcg_real)1 - x * x * ((bcg_real)3 - (bcg_real)2 * x);
      dT = -(bcg_real)6 * x * ((bcg_real)1 - x) / margin;
    }
  }
  *s = sv * T;
  *ds = dsv * T + sv * dT;
}

/* ---- one environment ---------------------------------------------------------------- */

/* Scratch views of one environment. */
typedef struct pgs_work {
  bcg_real *s, *ds, *r, *Gi, *p;
  bcg_real *pb, *sb, *rb, *Gib, *tape, *ytape;
  bcg_real *sttape; /* vjp = 2: the split step's states (pgs_work_size), else NULL */
} pgs_work;

BCG_HD pgs_work pgs_work_view(bcg_real *w, int ncon, int nsweep, int vjp) {
  pgs_work v;
  v.s = w; w += ncon;
  v.ds = w; w += ncon;
  v.r = w; w += ncon;
  v.Gi = w; w += 9 * ncon;
  v.p = w; w += 3 * ncon;
  if (vjp) {
    v.pb = w; w += 3 * ncon;
    v.sb = w; w += ncon;
    v.rb = w; w += ncon;
    v.Gib = w; w += 9 * ncon;
    v.tape = w; w += (size_t)nsweep * 3 * ncon;
    v.ytape = w; w += (size_t)nsweep * 3 * ncon;
    v.sttape = vjp == 2 ? w : NULL;
  } else {
    v.pb = v.sb = v.rb = v.Gib = v.tape = v.ytape = v.sttape = NULL;
  }
  return v;
}

/* y = c_i + sum_j w_ij G_ij p_j */
BCG_HD void pgs_residual(int i, int na, int ld, const bcg_real *G, const bcg_real *ci, const bcg_real *s,
                         const bcg_real *p, bcg_real y[3]) {
  y[0] = ci[0]; y[1] = ci[1]; y[2] = ci[2];
  for (int j = 0; j < na; j++) {
    const bcg_real wj = j == i ? (bcg_real)1 : s[j];
    if (wj == 0) continue; /* an exactly-zero weight contributes exactly nothing */
    const bcg_real *Gij = G + (size_t)(3 * i) * ld + 3 * j;
    const bcg_real *pj = p + 3 * j;
    for (int a = 0; a < 3; a++)
      y[a] += wj * (Gij[a * ld] * pj[0] + Gij[a * ld + 1] * pj[1] + Gij[a * ld + 2] * pj[2]);
  }
}

/* q = p_i - R_i y */
BCG_HD void pgs_step(const pgs_cfg *cf, const pgs_work *w, int i, const bcg_real y[3], bcg_real q[3]) {
  const bcg_real *pi = w->p + 3 * i;
  if (cf->solver == PGS_BLOCK) {
    const bcg_real *Gi = w->Gi + 9 * i;
    for (int a = 0; a < 3; a++) q[a] = pi[a] - (Gi[3 * a] * y[0] + Gi[3 * a + 1] * y[1] + Gi[3 * a + 2] * y[2]);
  } else {
    for (int a = 0; a < 3; a++) q[a] = pi[a] - w->r[i] * y[a];
  }
}

/* The split step of contact i, from its pre-update p_i and residual y:
 *   qn = p_n - y_n / G_nn,  p_n' = max(0, qn),  dn = p_n' - p_n
 *   z  = y_t + G_tn dn     (the tangential residual after the normal update)
 *   u  = (G_tt)^-1 z,  q = (p_n', p_t - u)                   (Newton step)
 *   sliding (p_n' > 0 and |q_t| > mu p_n'): q_t = the minimiser of the
 *     contact's tangential problem 1/2 t^T G_tt t + b^T t, b = z - G_tt p_t,
 *     on the disc |t| <= mu p_n' (contact_disc_slide: the Newton point's
 *     projection in the metric of G_tt, equal to it on the boundary)
 * and then p_i' = contact_proj(q) (p_n' = 0 -> p_t' = 0; sticking: q as is;
 * sliding: the rounding-sized rest onto the disc). Gi is blockdiag(1 / G_nn,
 * (G_tt)^-1), Gii the block G_ii. */
typedef struct pgs_split_st {
  bcg_real qn, dn, z[2], u[2], q[3];
  bcg_real A[4], b[2], pt[2]; /* sliding: G_tt, the linear term, the pre-update p_t */
  int slide;
} pgs_split_st;

/* The sliding step's linear system from G_ii and the pre-update p_i: A = G_tt,
 * pt = p_i's tangential part, b = z - A pt (pgs_split_fwd, and
 * pgs_split_st_get forming it again from the tape) */
BCG_HD void pgs_split_slide_sys(const bcg_real *Gii, int ld, const bcg_real pi[3], pgs_split_st *st) {
  st->A[0] = Gii[ld + 1]; st->A[1] = Gii[ld + 2];
  st->A[2] = Gii[2 * ld + 1]; st->A[3] = Gii[2 * ld + 2];
  st->pt[0] = pi[1]; st->pt[1] = pi[2];
  st->b[0] = st->z[0] - (st->A[0] * pi[1] + st->A[1] * pi[2]);
  st->b[1] = st->z[1] - (st->A[2] * pi[1] + st->A[3] * pi[2]);
}

BCG_HD void pgs_split_fwd(const bcg_real *Gii, int ld, const bcg_real *Gi, bcg_real mu, const bcg_real pi[3],
                          const bcg_real y[3], pgs_split_st *st) {
  st->qn = pi[0] - Gi[0] * y[0];
  const bcg_real pn = st->qn > 0 ? st->qn : (bcg_real)0;
  st->dn = pn - pi[0];
  st->z[0] = y[1] + Gii[ld] * st->dn;
  st->z[1] = y[2] + Gii[2 * ld] * st->dn;
  st->u[0] = Gi[4] * st->z[0] + Gi[5] * st->z[1];
  st->u[1] = Gi[7] * st->z[0] + Gi[8] * st->z[1];
  st->q[0] = pn;
  st->q[1] = pi[1] - st->u[0];
  st->q[2] = pi[2] - st->u[1];
  /* the Newton step outside the disc: sliding (the same test as contact_proj's).
   * With a tangent direction that cannot move (pgs_inv_null: its row of Gi is
   * zero, and so is its q) the disc is an interval, where the exact sliding
   * solution is contact_proj's clamp of q: no Newton step (whose A = G_tt
   * would be singular) */
  const int null_t = (Gi[4] == 0 && Gi[5] == 0) || (Gi[7] == 0 && Gi[8] == 0);
  st->slide = !null_t && pn > 0 && sqrt(st->q[1] * st->q[1] + st->q[2] * st->q[2]) > mu * pn;
  if (st->slide) {
    pgs_split_slide_sys(Gii, ld, pi, st);
    contact_disc_slide(st->A, st->b, mu * pn, st->q + 1);
  }
}

/* The split step's state on the kept solve's tape (PGS_NST reals): what
 * pgs_split_vjp reads, less what pgs_split_fwd copies from G_ii and p_i
 * and the linear term it forms from them, which pgs_split_st_get forms
 * again with the same operations (bit for bit) */
BCG_HD void pgs_split_st_put(const pgs_split_st *st, bcg_real *t) {
  t[0] = st->qn; t[1] = st->dn; t[2] = st->z[0]; t[3] = st->z[1];
  t[4] = st->q[0]; t[5] = st->q[1]; t[6] = st->q[2]; t[7] = (bcg_real)st->slide;
}

BCG_HD void pgs_split_st_get(const bcg_real *t, const bcg_real *Gii, int ld, const bcg_real pi[3], pgs_split_st *st) {
  st->qn = t[0]; st->dn = t[1]; st->z[0] = t[2]; st->z[1] = t[3];
  st->q[0] = t[4]; st->q[1] = t[5]; st->q[2] = t[6];
  st->slide = t[7] != 0;
  st->u[0] = st->u[1] = 0; /* not read by pgs_split_vjp */
  if (st->slide) {
    pgs_split_slide_sys(Gii, ld, pi, st);
  }
}

/* Adjoint of pgs_split_fwd + contact_proj: from pb (adjoint of p_i') to the
 * adjoints of the pre-update p_i (pold_b, overwritten) and of y (yb,
 * overwritten); accumulates the adjoint of Gi into Gib and those of the raw
 * G_tt (sliding) and coupling G_tn into Gbii (the G_bar block of G_ii; may
 * be NULL). The sticking/sliding branch is the one taken (the two agree on
 * the boundary). */
BCG_HD void pgs_split_vjp(const bcg_real *Gii, int ld, const bcg_real *Gi, bcg_real mu, const bcg_real y[3],
                          const pgs_split_st *st, const bcg_real pb[3], bcg_real pold_b[3], bcg_real yb[3],
                          bcg_real *Gib, bcg_real *Gbii) {
  bcg_real qb[3], zb0, zb1, ptb0, ptb1;
  contact_proj_vjp(st->q, mu, pb, qb);
  if (st->slide) {
    /* q_t = disc(A = G_tt, b = z - G_tt p_t, r = mu p_n') */
    bcg_real Ab[4] = {0, 0, 0, 0}, bb[2] = {0, 0}, rb = 0;
    contact_disc_slide_vjp(st->A, st->b, mu * st->q[0], qb + 1, Ab, bb, &rb);
    qb[0] += mu * rb;
    zb0 = bb[0];
    zb1 = bb[1];
    ptb0 = -(st->A[0] * bb[0] + st->A[2] * bb[1]);
    ptb1 = -(st->A[1] * bb[0] + st->A[3] * bb[1]);
    if (Gbii) {
      Gbii[ld + 1] += Ab[0] - bb[0] * st->pt[0];
      Gbii[ld + 2] += Ab[1] - bb[0] * st->pt[1];
      Gbii[2 * ld + 1] += Ab[2] - bb[1] * st->pt[0];
      Gbii[2 * ld + 2] += Ab[3] - bb[1] * st->pt[1];
    }
  } else {
    /* q_t = p_t - u,  u = Ainv z */
    const bcg_real ub0 = -qb[1], ub1 = -qb[2];
    Gib[4] += ub0 * st->z[0]; Gib[5] += ub0 * st->z[1];
    Gib[7] += ub1 * st->z[0]; Gib[8] += ub1 * st->z[1];
    zb0 = Gi[4] * ub0 + Gi[7] * ub1;
    zb1 = Gi[5] * ub0 + Gi[8] * ub1;
    ptb0 = qb[1];
    ptb1 = qb[2];
  }
  /* z = y_t + G_tn dn */
  yb[1] = zb0;
  yb[2] = zb1;
  if (Gbii) {
    Gbii[ld] += zb0 * st->dn;
    Gbii[2 * ld] += zb1 * st->dn;
  }
  const bcg_real dnb = zb0 * Gii[ld] + zb1 * Gii[2 * ld];
  /* dn = p_n' - p_n,  p_n' = max(0, qn),  qn = p_n - y_n / G_nn */
  const bcg_real pnb = qb[0] + dnb;
  const bcg_real qnb = st->qn > 0 ? pnb : (bcg_real)0;
  yb[0] = -Gi[0] * qnb;
  Gib[0] -= qnb * y[0];
  pold_b[0] = qnb - dnb;
  pold_b[1] = ptb0;
  pold_b[2] = ptb1;
}

/* pgs_env_solve's sweeps (keep_st: tape the split step's states) */
#if defined(__GNUC__) && !defined(__CUDACC__)
__attribute__((always_inline))
#endif
BCG_HD void pgs_env_sweeps(const pgs_cfg *cf, int na, int ld, bcg_real dt, const bcg_real *gap, const bcg_real *c,
                           const bcg_real *G, const bcg_real *mu, const pgs_work *w, const int keep_st) {
  const int nsweep = pgs_nsweep(cf);
  for (int k = 0; k < nsweep; k++)
    for (int i = 0; i < na; i++) {
      bcg_real y[3], q[3];
      if (w->tape) {
        bcg_real *t = w->tape + 3 * ((size_t)k * na + i);
        t[0] = w->p[3 * i]; t[1] = w->p[3 * i + 1]; t[2] = w->p[3 * i + 2];
      }
      pgs_residual(i, na, ld, G, c + 3 * i, w->s, w->p, y);
      y[0] += pgs_shift(cf, gap[i], dt);
      if (w->ytape) {
        bcg_real *t = w->ytape + 3 * ((size_t)k * na + i);
        t[0] = y[0]; t[1] = y[1]; t[2] = y[2];
      }
      if (cf->solver == PGS_SPLIT) {
        pgs_split_st st;
        pgs_split_fwd(G + (size_t)(3 * i) * ld + 3 * i, ld, w->Gi + 9 * i, mu[i], w->p + 3 * i,
                      y, &st);
        if (keep_st) pgs_split_st_put(&st, w->sttape + PGS_NST * ((size_t)k * na + i));
        contact_proj(st.q, mu[i], w->p + 3 * i);
      } else {
        pgs_step(cf, w, i, y, q);
        contact_proj(q, mu[i], w->p + 3 * i);
      }
    }
}

/* Forward solve of one environment. G, gap, c, mu, lam, fn point at the
 * environment's slices. With tape (w->tape != NULL) the pre-update p_i of every
 * (sweep, contact) is recorded, and its residual y (w->ytape). w->p holds the
 * final p afterwards. */
BCG_HD void pgs_env_solve(const pgs_cfg *cf, int na, int ncon, bcg_real dt, bcg_real margin,
                          const bcg_real *gap, const bcg_real *c, const bcg_real *G, const bcg_real *mu, bcg_real *lam,
                          bcg_real *fn, const pgs_work *w) {
  const int ld = 3 * ncon;
  for (int i = 0; i < na; i++) {
    pgs_weight(cf, gap[i], margin, &w->s[i], &w->ds[i]);
    const bcg_real *Gii = G + (size_t)(3 * i) * ld + 3 * i;
    bcg_real *Gi = w->Gi + 9 * i;
    if (pgs_block_has_null(Gii, ld)) {
      pgs_inv_null(Gii, ld, cf->solver == PGS_SPLIT, Gi);
      if (cf->solver == PGS_SPLIT) w->r[i] = 0;
    } else if (cf->solver == PGS_SPLIT) {
      const bcg_real idt = (bcg_real)1 / (Gii[ld + 1] * Gii[2 * ld + 2] - Gii[ld + 2] * Gii[2 * ld + 1]);
      Gi[0] = (bcg_real)1 / Gii[0];
      Gi[1] = Gi[2] = Gi[3] = Gi[6] = 0;
      Gi[4] = Gii[2 * ld + 2] * idt;
      Gi[5] = -Gii[ld + 2] * idt;
      Gi[7] = -Gii[2 * ld + 1] * idt;
      Gi[8] = Gii[ld + 1] * idt;
      w->r[i] = 0; /* unused */
    } else {
      pgs_inv3(Gii, ld, Gi);
    }
    if (cf->solver == PGS_REFERENCE) {
      bcg_real sum = 1, C[9];
      for (int j = 0; j < na; j++) sum += pgs_cof3(G + (size_t)(3 * i) * ld + 3 * j, ld, C);
      w->r[i] = (bcg_real)1 / sum;
    }
  }
  for (int i = 0; i < na; i++) {
    const bcg_real *Gi = w->Gi + 9 * i;
    const bcg_real ci[3] = {c[3 * i] + pgs_shift(cf, gap[i], dt), c[3 * i + 1], c[3 * i + 2]};
    if (cf->solver == PGS_SPLIT)
      w->p[3 * i] = w->p[3 * i + 1] = w->p[3 * i + 2] = 0;
    else
      for (int a = 0; a < 3; a++)
        w->p[3 * i + a] = -(Gi[3 * a] * ci[0] + Gi[3 * a + 1] * ci[1] + Gi[3 * a + 2] * ci[2]);
  }
  /* the sweeps, with the split step's states taped (the adjoint's kept
   * solve) or not: two copies, so that the plain solve's loop is as before */
  if (w->sttape) pgs_env_sweeps(cf, na, ld, dt, gap, c, G, mu, w, 1);
  else pgs_env_sweeps(cf, na, ld, dt, gap, c, G, mu, w, 0);
  for (int i = 0; i < na; i++) {
    for (int a = 0; a < 3; a++) lam[3 * i + a] = w->s[i] * w->p[3 * i + a];
    fn[i] = lam[3 * i] / dt;
  }
  for (int i = na; i < ncon; i++) {
    lam[3 * i] = lam[3 * i + 1] = lam[3 * i + 2] = 0;
    fn[i] = 0;
  }
}

/* The VJP's backward part: w as a taped pgs_env_solve (w->tape set) left it
 * for the same inputs; accumulates into gap_bar, c_bar, G_bar (G_bar may be
 * NULL). Overwrites w's p and its adjoint parts. */
BCG_HD void pgs_env_vjp_back(const pgs_cfg *cf, int na, int ncon, bcg_real dt, const bcg_real *gap,
                             const bcg_real *c, const bcg_real *G, const bcg_real *mu, const bcg_real *lam_bar,
                             bcg_real *gap_bar, bcg_real *c_bar, bcg_real *G_bar, const pgs_work *w) {
  const int ld = 3 * ncon;
  /* lam_i = s_i p_i */
  for (int i = 0; i < na; i++) {
    const bcg_real *lb = lam_bar + 3 * i, *pi = w->p + 3 * i;
    for (int a = 0; a < 3; a++) w->pb[3 * i + a] = w->s[i] * lb[a];
    w->sb[i] = lb[0] * pi[0] + lb[1] * pi[1] + lb[2] * pi[2];
    w->rb[i] = 0;
    for (int a = 0; a < 9; a++) w->Gib[9 * i + a] = 0;
  }
  /* the sweeps, backwards */
  for (int k = pgs_nsweep(cf) - 1; k >= 0; k--)
    for (int i = na - 1; i >= 0; i--) {
      const bcg_real *t = w->tape + 3 * ((size_t)k * na + i), *ty = w->ytape + 3 * ((size_t)k * na + i);
      bcg_real *pi = w->p + 3 * i, *pbi = w->pb + 3 * i;
      bcg_real q[3], qb[3], yb[3];
      pi[0] = t[0]; pi[1] = t[1]; pi[2] = t[2]; /* state before this update */
      /* its residual as the forward computed it from the same p (taped) */
      const bcg_real y[3] = {ty[0], ty[1], ty[2]};
      if (cf->solver == PGS_SPLIT) {
        /* the old p_i's adjoint (pbi) and yb from the split step's adjoint */
        const bcg_real *Gii = G + (size_t)(3 * i) * ld + 3 * i;
        pgs_split_st st;
        if (w->sttape)
          pgs_split_st_get(w->sttape + PGS_NST * ((size_t)k * na + i), Gii, ld, pi, &st);
        else
          pgs_split_fwd(Gii, ld, w->Gi + 9 * i, mu[i], pi, y, &st);
        bcg_real pn[3] = {pbi[0], pbi[1], pbi[2]};
        pgs_split_vjp(Gii, ld, w->Gi + 9 * i, mu[i], y, &st, pn, pbi, yb, w->Gib + 9 * i,
                      G_bar ? G_bar + (size_t)(3 * i) * ld + 3 * i : NULL);
      } else {
        pgs_step(cf, w, i, y, q);
        contact_proj_vjp(q, mu[i], pbi, qb);
        /* q = p_i - R_i y: the old p_i's adjoint starts at qb */
        pbi[0] = qb[0]; pbi[1] = qb[1]; pbi[2] = qb[2];
        if (cf->solver == PGS_BLOCK) {
          const bcg_real *Gi = w->Gi + 9 * i;
          bcg_real *Gib = w->Gib + 9 * i;
          for (int b = 0; b < 3; b++) yb[b] = -(Gi[b] * qb[0] + Gi[3 + b] * qb[1] + Gi[6 + b] * qb[2]);
          for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) Gib[3 * a + b] -= qb[a] * y[b];
        } else {
          for (int a = 0; a < 3; a++) yb[a] = -w->r[i] * qb[a];
          w->rb[i] -= qb[0] * y[0] + qb[1] * y[1] + qb[2] * y[2];
        }
      }
      /* y = c_i + (erp g_i / dt) e_n + sum_j w_ij G_ij p_j */
      for (int a = 0; a < 3; a++) c_bar[3 * i + a] += yb[a];
      gap_bar[i] += cf->erp / dt * yb[0];
      for (int j = 0; j < na; j++) {
        const int self = j == i;
        const bcg_real wj = self ? (bcg_real)1 : w->s[j];
        if (wj == 0 && cf->hard) continue; /* as in the forward; s has no adjoint for hard */
        const bcg_real *Gij = G + (size_t)(3 * i) * ld + 3 * j;
        const bcg_real *pj = w->p + 3 * j;
        bcg_real *pbj = w->pb + 3 * j;
        /* v = G_ij^T yb serves both p_j's adjoint (w_ij v) and w_ij's
         * (yb . G_ij p_j = v . p_j) */
        bcg_real v[3];
        for (int b = 0; b < 3; b++) v[b] = Gij[b] * yb[0] + Gij[ld + b] * yb[1] + Gij[2 * ld + b] * yb[2];
        if (wj != 0) {
          for (int b = 0; b < 3; b++) pbj[b] += wj * v[b];
          if (G_bar) {
            bcg_real *Gbij = G_bar + (size_t)(3 * i) * ld + 3 * j;
            for (int a = 0; a < 3; a++)
              for (int b = 0; b < 3; b++) Gbij[a * ld + b] += wj * yb[a] * pj[b];
          }
        }
        if (!self) w->sb[j] += v[0] * pj[0] + v[1] * pj[1] + v[2] * pj[2];
      }
    }
  /* p_i = -Gi_i c_i (split: p = 0) */
  for (int i = 0; i < na && cf->solver != PGS_SPLIT; i++) {
    const bcg_real *Gi = w->Gi + 9 * i, *pbi = w->pb + 3 * i;
    const bcg_real ci[3] = {c[3 * i] + pgs_shift(cf, gap[i], dt), c[3 * i + 1], c[3 * i + 2]};
    bcg_real *Gib = w->Gib + 9 * i;
    for (int b = 0; b < 3; b++) c_bar[3 * i + b] -= Gi[b] * pbi[0] + Gi[3 + b] * pbi[1] + Gi[6 + b] * pbi[2];
    gap_bar[i] -= cf->erp / dt * (Gi[0] * pbi[0] + Gi[3] * pbi[1] + Gi[6] * pbi[2]);
    for (int a = 0; a < 3; a++)
      for (int b = 0; b < 3; b++) Gib[3 * a + b] -= pbi[a] * ci[b];
  }
  if (G_bar)
    for (int i = 0; i < na; i++) {
      /* Gi = G_ii^-1: G_ii_bar = -Gi^T Gib Gi^T (split: Gi = blockdiag(1 / G_nn,
       * G_tt^-1) is the inverse of blockdiag(G_nn, G_tt), and Gib is zero off the
       * blocks, so the same formula gives G_nn's and G_tt's adjoints) */
      const bcg_real *Gi = w->Gi + 9 * i, *Gib = w->Gib + 9 * i;
      bcg_real T[9];
      for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
          T[3 * a + b] = Gib[3 * a] * Gi[b * 3] + Gib[3 * a + 1] * Gi[b * 3 + 1] + Gib[3 * a + 2] * Gi[b * 3 + 2];
      bcg_real *Gbii = G_bar + (size_t)(3 * i) * ld + 3 * i;
      for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
          Gbii[a * ld + b] -= Gi[a] * T[b] + Gi[3 + a] * T[3 + b] + Gi[6 + a] * T[6 + b];
      /* r_i = 1 / (1 + sum_j det G_ij) */
      if (cf->solver == PGS_REFERENCE) {
        const bcg_real sbar = -w->r[i] * w->r[i] * w->rb[i];
        if (sbar != 0)
          for (int j = 0; j < na; j++) {
            bcg_real C[9];
            const bcg_real *Gij = G + (size_t)(3 * i) * ld + 3 * j;
            bcg_real *Gbij = G_bar + (size_t)(3 * i) * ld + 3 * j;
            pgs_cof3(Gij, ld, C);
            for (int a = 0; a < 3; a++)
              for (int b = 0; b < 3; b++) Gbij[a * ld + b] += sbar * C[3 * a + b];
          }
      }
    }
  for (int i = 0; i < na; i++) gap_bar[i] += w->sb[i] * w->ds[i];
}

/* VJP of one environment: the taped solve, then the backward part. lam/fn
 * are scratch outputs of the recomputed forward. */
BCG_HD void pgs_env_vjp(const pgs_cfg *cf, int na, int ncon, bcg_real dt, bcg_real margin,
                        const bcg_real *gap, const bcg_real *c, const bcg_real *G, const bcg_real *mu,
                        const bcg_real *lam_bar, bcg_real *gap_bar, bcg_real *c_bar, bcg_real *G_bar, bcg_real *lam,
                        bcg_real *fn, const pgs_work *w) {
  pgs_env_solve(cf, na, ncon, dt, margin, gap, c, G, mu, lam, fn, w);
  pgs_env_vjp_back(cf, na, ncon, dt, gap, c, G, mu, lam_bar, gap_bar, c_bar, G_bar, w);
}

/* ======================================================================== host == */
#ifndef __CUDACC__

#ifdef BCG_HAVE_CUDA
__attribute__((visibility("hidden"))) int pgs_solve_cuda(void *self, bcg_contact_batch *b,
                                                         void *stream);
__attribute__((visibility("hidden"))) int pgs_solve_vjp_cuda(void *self,
                                                             const bcg_contact_batch *b,
                                                             bcg_contact_adjoint *adj,
                                                             void *stream);
#endif

static const bcg_key_spec pgs_keys[] = {
#ifndef BCG_CONTACT_HARD
    {"kappa", BCG_KEY_REAL, "300", 1, 1e7, NULL,
     "sigmoid stiffness, 1/m: s = 1/(1+exp(kappa*g)), tapered smoothly to 0 at [sim] "
     "contact_margin (C1) where the contact leaves the active set; 300 is the paper's "
     "training value (50, 100 ablations; large kappa approaches hard)"},
#endif
    {"erp", BCG_KEY_REAL, "0", 0, 1, NULL,
     "position correction per substep: the normal velocity target is -erp g / dt, so a contact "
     "penetrating by d is pushed out at erp d / dt (0: none, the paper's model). Without it the "
     "smoothed contact, whose impulse is scaled by s(g) < 1, lets a standing humanoid sink about "
     "17 mm at kappa 300 (MuJoCo's contact: about 2 mm), which breaks transfer; 0.2 holds it about "
     "1 mm deep but, since friction is scaled by s(g) too, lets a resting body creep (docs/learning.md)"},
    {"iterations", BCG_KEY_INT, "10", 1, 1000, NULL,
     "projected Gauss-Seidel sweeps per substep (fixed, so the adjoint is exact); 10 as in the paper "
     "(split runs one more, its initialisation from p = 0)"},
    {"solver", BCG_KEY_CHOICE, "split", 0, 0, "split|block|reference",
     "Gauss-Seidel step per contact: split (default) = normal step 1/G_nn clipped at 0, then "
     "tangential step with the updated normal: the (G_tt)^-1 Newton step if it stays in the "
     "friction disc (sticking), else the minimiser of the contact's 2x2 problem on the disc "
     "(sliding: maximum dissipation, friction against the slip, and equal to the Newton step "
     "on the disc's edge, so the step is continuous; projecting the Newton step instead "
     "turned it sideways where G_tt is anisotropic: a box sliding down a tan 0.8 slope, "
     "mu 0.5, got 3.58 N of friction instead of 3.83 N) (from p = 0, iterations + 1 sweeps); "
     "converges to the complementarity solution also when "
     "G_ii couples normal and tangent (box corners); block = 3x3 G_ii^-1 step then projection "
     "(fixed point wrong under n-t coupling: penetrates); reference = the published "
     "1/(1+sum_j det G_ij) scalar step (slow; diverges for light links)"},
};

static void *pgs_create(const bcg_services *svc, const bcg_params *params,
                        const bcg_model *model, char *err, size_t errlen) {
  (void)model;
  pgs_cfg *cf = (pgs_cfg *)calloc(1, sizeof *cf);
  if (!cf) {
    if (err && errlen) snprintf(err, errlen, PGS_NAME ": out of memory");
    return NULL;
  }
  /* without services (unit use) the declared defaults apply */
  cf->kappa = 300;
  cf->iters = 10;
  cf->erp = 0;
  cf->solver = PGS_SPLIT;
#ifdef BCG_CONTACT_HARD
  cf->hard = 1;
#else
  cf->hard = 0;
#endif
  if (svc && params) {
#ifndef BCG_CONTACT_HARD
    if (svc->get_real) cf->kappa = (bcg_real)svc->get_real(params, "kappa");
#endif
    if (svc->get_int) cf->iters = (int)svc->get_int(params, "iterations");
    if (svc->get_real) cf->erp = (bcg_real)svc->get_real(params, "erp");
    if (svc->get_string) {
      const char *s = svc->get_string(params, "solver");
      if (s && strcmp(s, "reference") == 0) cf->solver = PGS_REFERENCE;
      else if (s && strcmp(s, "block") == 0) cf->solver = PGS_BLOCK;
      else if (s && strcmp(s, "split") == 0) cf->solver = PGS_SPLIT;
      else {
        if (err && errlen)
          snprintf(err, errlen, PGS_NAME ": solver '%s' is not one of split|block|reference",
                   s ? s : "(null)");
        free(cf);
        return NULL;
      }
    }
  }
  if (cf->iters < 1 || !(cf->kappa > 0)) {
    if (err && errlen) snprintf(err, errlen, PGS_NAME ": iterations must be >= 1 and kappa > 0");
    free(cf);
    return NULL;
  }
  return cf;
}

static void pgs_destroy(void *self) { free(self); }

/* pgs_env_solve of every environment of b, each in its slice of work
 * ([nenv][pgs_work_size(ncon, sweeps, tape)] reals); tape: the VJP's parts
 * too (the adjoint's kept solve) */
static void pgs_solve_envs(const pgs_cfg *cf, bcg_contact_batch *b, bcg_real *work, int tape) {
  const int ncon = b->ncon;
  const size_t ws = pgs_work_size(ncon, pgs_nsweep(cf), tape), gsz = (size_t)9 * ncon * ncon;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < b->nenv; e++) {
    const pgs_work w = pgs_work_view(work + (size_t)e * ws, ncon, pgs_nsweep(cf), tape);
    pgs_env_solve(cf, contact_nactive(b->nactive, e, ncon), ncon, b->dt, b->margin,
                  b->gap + (size_t)e * ncon, b->c + (size_t)e * 3 * ncon, b->G + (size_t)e * gsz, b->mu + (size_t)e * ncon,
                  b->lam + (size_t)e * 3 * ncon, b->fn + (size_t)e * ncon, &w);
  }
}

static int pgs_solve(void *self, bcg_contact_batch *b) {
  const pgs_cfg *cf = (const pgs_cfg *)self;
  if (b->nenv <= 0 || b->ncon <= 0) return 0;
  bcg_real *work = (bcg_real *)malloc((size_t)b->nenv * pgs_work_size(b->ncon, pgs_nsweep(cf), 0) * sizeof(bcg_real));
  if (!work) return -1;
  pgs_solve_envs(cf, b, work, 0);
  free(work);
  return 0;
}

static int pgs_solve_vjp(void *self, const bcg_contact_batch *b, bcg_contact_adjoint *adj) {
  const pgs_cfg *cf = (const pgs_cfg *)self;
  if (b->nenv <= 0 || b->ncon <= 0) return 0;
  const int ncon = b->ncon;
  const size_t ws = pgs_work_size(ncon, pgs_nsweep(cf), 1) + (size_t)4 * ncon; /* + lam, fn */
  bcg_real *work = (bcg_real *)malloc((size_t)b->nenv * ws * sizeof(bcg_real));
  if (!work) return -1;
  const size_t gsz = (size_t)9 * ncon * ncon;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < b->nenv; e++) {
    bcg_real *we = work + (size_t)e * ws;
    const pgs_work w = pgs_work_view(we + 4 * ncon, ncon, pgs_nsweep(cf), 1);
    pgs_env_vjp(cf, contact_nactive(b->nactive, e, ncon), ncon, b->dt, b->margin,
                b->gap + (size_t)e * ncon, b->c + (size_t)e * 3 * ncon, b->G + (size_t)e * gsz, b->mu + (size_t)e * ncon,
                adj->lam_bar + (size_t)e * 3 * ncon, adj->gap_bar + (size_t)e * ncon,
                adj->c_bar + (size_t)e * 3 * ncon, adj->G_bar ? adj->G_bar + (size_t)e * gsz : NULL,
                we, we + 3 * ncon, &w);
  }
  free(work);
  return 0;
}

/* The adjoint's pair (bcg_contact_ops.solve_keep, solve_vjp_kept): the
 * taped solve's workspace of each environment (pgs_work with the VJP's
 * parts) kept between the two, so the sweeps run once, taped, instead of once
 * plain and once more taped in solve_vjp. The same operations as solve and
 * solve_vjp: bit for bit. */
static size_t pgs_keep_size(void *self, int ncon) {
  return pgs_work_size(ncon, pgs_nsweep((const pgs_cfg *)self), 2);
}

static int pgs_solve_keep(void *self, bcg_contact_batch *b, bcg_real *keep) {
  if (b->nenv > 0 && b->ncon > 0) pgs_solve_envs((const pgs_cfg *)self, b, keep, 2);
  return 0;
}

static int pgs_solve_vjp_kept(void *self, const bcg_contact_batch *b, bcg_contact_adjoint *adj, bcg_real *keep) {
  const pgs_cfg *cf = (const pgs_cfg *)self;
  if (b->nenv <= 0 || b->ncon <= 0) return 0;
  const int ncon = b->ncon;
  const size_t ws = pgs_keep_size(self, ncon), gsz = (size_t)9 * ncon * ncon;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < b->nenv; e++) {
    const pgs_work w = pgs_work_view(keep + (size_t)e * ws, ncon, pgs_nsweep(cf), 2);
    pgs_env_vjp_back(cf, contact_nactive(b->nactive, e, ncon), ncon, b->dt, b->gap + (size_t)e * ncon,
                     b->c + (size_t)e * 3 * ncon, b->G + (size_t)e * gsz, b->mu + (size_t)e * ncon,
                     adj->lam_bar + (size_t)e * 3 * ncon, adj->gap_bar + (size_t)e * ncon,
                     adj->c_bar + (size_t)e * 3 * ncon, adj->G_bar ? adj->G_bar + (size_t)e * gsz : NULL, &w);
  }
  return 0;
}

static const bcg_contact_ops pgs_ops = {
    .size = sizeof(bcg_contact_ops),
    .create = pgs_create,
    .destroy = pgs_destroy,
    .solve = pgs_solve,
    .solve_vjp = pgs_solve_vjp,
#ifdef BCG_HAVE_CUDA
    .solve_cuda = pgs_solve_cuda,
    .solve_vjp_cuda = pgs_solve_vjp_cuda,
#else
    .solve_cuda = NULL,
    .solve_vjp_cuda = NULL,
#endif
    .keep_size = pgs_keep_size,
    .solve_keep = pgs_solve_keep,
    .solve_vjp_kept = pgs_solve_vjp_kept,
};

static const bcg_plugin_desc pgs_desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_CONTACT, PGS_NAME, PGS_DESCR),
    pgs_keys,
    BCG_NKEYS(pgs_keys),
    BCG_CAP_NEEDS_DELASSUS | BCG_CAP_DIFFERENTIABLE | BCG_CAP_SLICES
#ifdef BCG_HAVE_CUDA
        | BCG_CAP_CUDA
#endif
    ,
    &pgs_ops,
};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &pgs_desc; }

#endif /* !__CUDACC__ */

/* ======================================================================== CUDA == */
#ifdef __CUDACC__
#include <cuda_runtime.h>

/* scratch of one environment in local memory when it fits (PGS_LOCAL_WORK
 * reals: ncon 24 with up to ~23 sweeps, ncon 16 up to ~37), else in the
 * batch buffer */
#define PGS_LOCAL_WORK 4096

__global__ void pgs_solve_kernel(pgs_cfg cf, int nenv, int ncon, bcg_real dt, bcg_real margin,
                                 const int *nactive, const bcg_real *gap, const bcg_real *c, const bcg_real *G,
                                 const bcg_real *mu, bcg_real *lam, bcg_real *fn, bcg_real *work, size_t ws) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= nenv) return;
  const size_t gsz = (size_t)9 * ncon * ncon;
  const int na = contact_nactive(nactive, e, ncon), ld = 3 * ncon;
  bcg_real Gl[CONTACT_GLOCAL], wl[PGS_LOCAL_WORK];
  contact_stage_G(Gl, G + (size_t)e * gsz, na, ld);
  const pgs_work w = pgs_work_view(work ? work + (size_t)e * ws : wl, ncon, pgs_nsweep(&cf), 0);
  pgs_env_solve(&cf, na, ncon, dt, margin, gap + (size_t)e * ncon, c + (size_t)e * 3 * ncon, Gl,
                mu + (size_t)e * ncon, lam + (size_t)e * 3 * ncon, fn + (size_t)e * ncon, &w);
}

__global__ void pgs_vjp_kernel(pgs_cfg cf, int nenv, int ncon, bcg_real dt, bcg_real margin,
                               const int *nactive, const bcg_real *gap, const bcg_real *c, const bcg_real *G,
                               const bcg_real *mu, const bcg_real *lam_bar, bcg_real *gap_bar, bcg_real *c_bar, bcg_real *G_bar,
                               bcg_real *work, size_t ws) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= nenv) return;
  const size_t gsz = (size_t)9 * ncon * ncon;
  const int na = contact_nactive(nactive, e, ncon), ld = 3 * ncon;
  bcg_real Gl[CONTACT_GLOCAL], Gbl[CONTACT_GLOCAL], wl[PGS_LOCAL_WORK];
  contact_stage_G(Gl, G + (size_t)e * gsz, na, ld);
  if (G_bar) contact_zero_G(Gbl, na, ld);
  bcg_real *we = work ? work + (size_t)e * ws : wl;
  const pgs_work w = pgs_work_view(we + 4 * ncon, ncon, pgs_nsweep(&cf), 1);
  pgs_env_vjp(&cf, na, ncon, dt, margin, gap + (size_t)e * ncon, c + (size_t)e * 3 * ncon, Gl,
              mu + (size_t)e * ncon, lam_bar + (size_t)e * 3 * ncon, gap_bar + (size_t)e * ncon,
              c_bar + (size_t)e * 3 * ncon, G_bar ? Gbl : NULL, we, we + 3 * ncon, &w);
  if (G_bar) contact_add_G(G_bar + (size_t)e * gsz, Gbl, na, ld);
}

extern "C" __attribute__((visibility("hidden"))) int pgs_solve_cuda(void *self,
                                                                    bcg_contact_batch *b,
                                                                    void *stream) {
  const pgs_cfg *cf = (const pgs_cfg *)self;
  if (b->nenv <= 0 || b->ncon <= 0) return 0;
  cudaStream_t st = (cudaStream_t)stream;
  if (b->ncon > CONTACT_MAXC) return -1;
  const size_t ws = pgs_work_size(b->ncon, pgs_nsweep(cf), 0);
  bcg_real *work = NULL;
  if (ws > PGS_LOCAL_WORK &&
      cudaMallocAsync((void **)&work, (size_t)b->nenv * ws * sizeof(bcg_real), st) != cudaSuccess)
    return -1;
  const int nt = bcg_cuda_block_default(), nb = (b->nenv + nt - 1) / nt;
  pgs_solve_kernel<<<nb, nt, 0, st>>>(*cf, b->nenv, b->ncon, b->dt, b->margin, b->nactive,
                                               b->gap, b->c, b->G, b->mu, b->lam, b->fn, work, ws);
  const cudaError_t err = cudaGetLastError();
  if (work) cudaFreeAsync(work, st);
  return err == cudaSuccess ? 0 : -1;
}

extern "C" __attribute__((visibility("hidden"))) int pgs_solve_vjp_cuda(
    void *self, const bcg_contact_batch *b, bcg_contact_adjoint *adj, void *stream) {
  const pgs_cfg *cf = (const pgs_cfg *)self;
  if (b->nenv <= 0 || b->ncon <= 0) return 0;
  cudaStream_t st = (cudaStream_t)stream;
  if (b->ncon > CONTACT_MAXC) return -1;
  const size_t ws = pgs_work_size(b->ncon, pgs_nsweep(cf), 1) + (size_t)4 * b->ncon;
  bcg_real *work = NULL;
  if (ws > PGS_LOCAL_WORK &&
      cudaMallocAsync((void **)&work, (size_t)b->nenv * ws * sizeof(bcg_real), st) != cudaSuccess)
    return -1;
  const int nt = bcg_cuda_block_default(), nb = (b->nenv + nt - 1) / nt;
  pgs_vjp_kernel<<<nb, nt, 0, st>>>(*cf, b->nenv, b->ncon, b->dt, b->margin, b->nactive,
                                             b->gap, b->c, b->G, b->mu, adj->lam_bar,
                                             adj->gap_bar, adj->c_bar, adj->G_bar, work, ws);
  const cudaError_t err = cudaGetLastError();
  if (work) cudaFreeAsync(work, st);
  return err == cudaSuccess ? 0 : -1;
}
#endif /* __CUDACC__ */
