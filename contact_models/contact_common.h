/* contact_models/contact_common.h - per-contact helpers shared by the contact
 * laws (smoothed_kappa.c, and through it hard.c; soft.c): the friction-disc
 * projection and the sliding tangential step alpha = 1 / lambda_max(sym G_tt),
 * each with its VJP, and the clamp of an environment's active-contact count.
 *
 * BCG_HD like the laws' own per-environment code: compiled by gcc for the
 * OpenMP loops and by nvcc -x cu for the kernels. */
#ifndef BCG_CONTACT_COMMON_H
#define BCG_CONTACT_COMMON_H

#include "bcg/real.h"

/* the number of active contacts of environment e, clamped to [0, ncon] */
BCG_HD int contact_nactive(const int *nactive, int e, int ncon) {
  int na = nactive[e];
  return na < 0 ? 0 : (na > ncon ? ncon : na);
}

/* ---- friction-disc projection and its VJP --------------------------------------- */

/* q_n <= 0 -> 0; |q_t| > mu q_n -> onto the circle of radius mu q_n */
BCG_HD void contact_proj(const bcg_real q[3], bcg_real mu, bcg_real p[3]) {
  if (q[0] <= 0) { p[0] = p[1] = p[2] = 0; return; }
  const bcg_real t = sqrt(q[1] * q[1] + q[2] * q[2]);
  const bcg_real lim = mu * q[0];
  if (t > lim) {
    const bcg_real sc = lim / t;
    p[0] = q[0]; p[1] = q[1] * sc; p[2] = q[2] * sc;
  } else {
    p[0] = q[0]; p[1] = q[1]; p[2] = q[2];
  }
}

/* qb = (d proj / d q)^T pb at q, the branch taken by contact_proj */
BCG_HD void contact_proj_vjp(const bcg_real q[3], bcg_real mu, const bcg_real pb[3],
                             bcg_real qb[3]) {
  if (q[0] <= 0) { qb[0] = qb[1] = qb[2] = 0; return; }
  const bcg_real t = sqrt(q[1] * q[1] + q[2] * q[2]);
  const bcg_real lim = mu * q[0];
  if (t > lim) {
    const bcg_real u1 = q[1] / t, u2 = q[2] / t, sc = lim / t;
    const bcg_real ub = u1 * pb[1] + u2 * pb[2];
    qb[0] = pb[0] + mu * ub;
    qb[1] = sc * (pb[1] - u1 * ub);
    qb[2] = sc * (pb[2] - u2 * ub);
  } else {
    qb[0] = pb[0]; qb[1] = pb[1]; qb[2] = pb[2];
  }
}

/* ---- the sliding step ----------------------------------------------------------- */

/* alpha = 1 / lambda_max of the symmetric part of G_tt (the tangential step
 * of a sliding contact): lambda_max = (a + c) / 2 + sqrt(((a - c) / 2)^2 + b^2)
 * with a = G_t1t1, c = G_t2t2, b = (G_t1t2 + G_t2t1) / 2; Gii is the block
 * G_ii, row stride ld. */
BCG_HD bcg_real contact_alpha(const bcg_real *Gii, int ld) {
  const bcg_real a = Gii[ld + 1], c = Gii[2 * ld + 2];
  const bcg_real b = (bcg_real)0.5 * (Gii[ld + 2] + Gii[2 * ld + 1]);
  const bcg_real h = (bcg_real)0.5 * (a - c);
  return (bcg_real)1 / ((bcg_real)0.5 * (a + c) + sqrt(h * h + b * b));
}

/* G_tt's adjoint from alpha's (alpha_b), added into Gbii (the G_bar block of
 * G_ii). d lambda / da = 1/2 + h / (2 r), d / dc = 1/2 - h / (2 r), d / dG_t1t2
 * = d / dG_t2t1 = b / (2 r), r = sqrt(h^2 + b^2); at r = 0 (a = c, b = 0: the
 * isotropic G_tt, where lambda_max has a kink) the one-sided mean 1/2, 1/2, 0. */
BCG_HD void contact_alpha_vjp(const bcg_real *Gii, int ld, bcg_real alpha, bcg_real alpha_b,
                              bcg_real *Gbii) {
  const bcg_real a = Gii[ld + 1], c = Gii[2 * ld + 2];
  const bcg_real b = (bcg_real)0.5 * (Gii[ld + 2] + Gii[2 * ld + 1]);
  const bcg_real h = (bcg_real)0.5 * (a - c), r = sqrt(h * h + b * b);
  const bcg_real lb = -alpha * alpha * alpha_b; /* alpha = 1 / lambda */
  const bcg_real ha = r > 0 ? (bcg_real)0.5 * h / r : (bcg_real)0;
  const bcg_real hb = r > 0 ? (bcg_real)0.5 * b / r : (bcg_real)0;
  Gbii[ld + 1] += lb * ((bcg_real)0.5 + ha);
  Gbii[2 * ld + 2] += lb * ((bcg_real)0.5 - ha);
  Gbii[ld + 2] += lb * hb;
  Gbii[2 * ld + 1] += lb * hb;
}


#ifdef __CUDACC__
/* ---- staging an environment's Delassus block in thread-local memory ------------
 * The batch's G is [nenv][3 ncon][3 ncon]: one thread per environment reading
 * it in place makes every warp access touch 32 separate cache lines, and the
 * solvers read each block once per sweep. The kernels instead copy the
 * active 3 na x 3 na block once into a local array (CUDA local memory is
 * interleaved across a warp's threads: coalesced) with the same row stride, and
 * accumulate G_bar there before adding it to the batch once. ncon is at most
 * CONTACT_MAXC (= BCG_MAX_CONTACT, the core's cap on max_contacts). */
#define CONTACT_MAXC 24
#define CONTACT_GLOCAL (9 * CONTACT_MAXC * CONTACT_MAXC)
static __device__ inline void contact_stage_G(bcg_real *dst, const bcg_real *src, int na, int ld) {
  for (int r = 0; r < 3 * na; r++)
    for (int s = 0; s < 3 * na; s++) dst[r * ld + s] = src[r * ld + s];
}
static __device__ inline void contact_zero_G(bcg_real *dst, int na, int ld) {
  for (int r = 0; r < 3 * na; r++)
    for (int s = 0; s < 3 * na; s++) dst[r * ld + s] = 0;
}
static __device__ inline void contact_add_G(bcg_real *dst, const bcg_real *src, int na, int ld) {
  for (int r = 0; r < 3 * na; r++)
    for (int s = 0; s < 3 * na; s++) dst[r * ld + s] += src[r * ld + s];
}
#endif

#endif
