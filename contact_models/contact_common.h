/* contact_models/contact_common.h - per-contact helpers shared by the contact
 * laws (smoothed_kappa.c, and through it hard.c; soft.c): the friction-disc
 * projection and the sliding tangential step (the contact's 2x2 problem
 * solved exactly on the friction disc), each with its VJP, and the clamp of
 * an environment's active-contact count.
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

/* ---- the tangential step: the 2x2 problem on the friction disc ------------------
 *
 * t = argmin_{|t| <= r} 1/2 t^T A t + b^T t, A the (symmetric positive
 * definite) tangential block of a contact, b the linear term, r = mu p_n the
 * disc radius: the exact minimiser of the contact's own tangential problem
 * in the metric of A. Inside the disc (sticking) t = -A^-1 b; outside
 * (sliding) t = -(A + nu I)^-1 b with nu > 0 the root of |t(nu)| = r, where
 * the end tangential velocity A t + b = -nu t is opposite to t: Coulomb's
 * maximum dissipation. Both branches agree at |A^-1 b| = r (nu = 0), so t is
 * a continuous function of A, b and r; a Euclidean projection of either the
 * Newton point or of a gradient step onto the disc is not (the first turns
 * the friction sideways where A is anisotropic, the second jumps between
 * the Newton point and the gradient step at the stick/slip boundary).
 *
 * nu by CONTACT_DISC_NEWTON Newton steps on phi(nu) = 1 / |t(nu)| - 1 / r
 * from nu = 0 (Moré and Sorensen's trust-region secular equation: phi is
 * concave and increasing, so Newton from phi(0) < 0 climbs monotonically to
 * the root). A fixed count and no tolerance test keep t continuous and the
 * adjoint exact: contact_disc_vjp is the adjoint of the unrolled steps. 8
 * steps reach |t| = r to 1e-8 and 10 to rounding (1e-11 relative for
 * condition numbers of A up to 1e6 and |A^-1 b| / r up to 1e12, 1e5 random
 * problems); the caller then projects onto the disc (contact_proj), which
 * removes the last rounding-sized overshoot. A is read row-major and used as
 * given (a finite-difference test perturbs its entries one at a time). */
#define CONTACT_DISC_NEWTON 10

/* On the GPU the Newton loops below stay loops: fully unrolled, their ten
 * iterates and the adjoint's temporaries took the solver's adjoint kernel
 * from 64 to 230 registers per thread (float; 96 to 255 with spills in
 * double), a quarter of the resident warps. */
#ifdef __CUDA_ARCH__
#define CONTACT_NO_UNROLL _Pragma("unroll 1")
#else
#define CONTACT_NO_UNROLL
#endif

/* t(nu) = -(A + nu I)^-1 b; returns the inverse in Mi (row-major) */
BCG_HD void contact_disc_t(const bcg_real A[4], const bcg_real b[2], bcg_real nu, bcg_real Mi[4],
                           bcg_real t[2]) {
  const bcg_real m00 = A[0] + nu, m01 = A[1], m10 = A[2], m11 = A[3] + nu;
  const bcg_real id = (bcg_real)1 / (m00 * m11 - m01 * m10);
  Mi[0] = m11 * id; Mi[1] = -m01 * id; Mi[2] = -m10 * id; Mi[3] = m00 * id;
  t[0] = -(Mi[0] * b[0] + Mi[1] * b[1]);
  t[1] = -(Mi[2] * b[0] + Mi[3] * b[1]);
}

/* the Newton steps of the sliding branch: nus[k] = nu before step k
 * (nus[0] = 0), returns nu after the last. phi is scaled by r (r / |t| - 1,
 * the same Newton steps) so that no 1 / r is formed. */
BCG_HD bcg_real contact_disc_nu(const bcg_real A[4], const bcg_real b[2], bcg_real r,
                                bcg_real nus[CONTACT_DISC_NEWTON]) {
  bcg_real nu = 0, Mi[4], t[2];
  CONTACT_NO_UNROLL
  for (int k = 0; k < CONTACT_DISC_NEWTON; k++) {
    nus[k] = nu;
    contact_disc_t(A, b, nu, Mi, t);
    const bcg_real n = sqrt(t[0] * t[0] + t[1] * t[1]);
    const bcg_real s = t[0] * (Mi[0] * t[0] + Mi[1] * t[1]) + t[1] * (Mi[2] * t[0] + Mi[3] * t[1]);
    const bcg_real phi = r / n - (bcg_real)1, dphi = r * s / (n * n * n);
    nu -= phi / dphi;
  }
  return nu;
}

/* Sliding branch (the caller has found |A^-1 b| > r): t = t(nu); r = 0 (a
 * frictionless contact): t = 0, the limit. */
BCG_HD void contact_disc_slide(const bcg_real A[4], const bcg_real b[2], bcg_real r, bcg_real t[2]) {
  if (!(r > 0)) { t[0] = t[1] = 0; return; }
  bcg_real nus[CONTACT_DISC_NEWTON], Mi[4];
  contact_disc_t(A, b, contact_disc_nu(A, b, r, nus), Mi, t);
}

/* Adjoint of contact_disc_slide: from tb (the adjoint of t) accumulates into
 * Ab (row-major), bb and *rb. Recomputes the Newton steps. At r = 0 only r
 * has an adjoint: t = -r b / |b| + O(r^2). */
BCG_HD void contact_disc_slide_vjp(const bcg_real A[4], const bcg_real b[2], bcg_real r,
                                   const bcg_real tb_in[2], bcg_real Ab[4], bcg_real bb[2],
                                   bcg_real *rb) {
  if (!(r > 0)) {
    const bcg_real nb = sqrt(b[0] * b[0] + b[1] * b[1]);
    if (nb > 0) *rb -= (b[0] * tb_in[0] + b[1] * tb_in[1]) / nb;
    return;
  }
  bcg_real nus[CONTACT_DISC_NEWTON], Mi[4], t[2];
  const bcg_real nuK = contact_disc_nu(A, b, r, nus);
  /* t = -Mi b: bb -= Mi^T tb; Mb = -Mi^T tb t^T (then A's and nu's) */
  contact_disc_t(A, b, nuK, Mi, t);
  bcg_real w0 = Mi[0] * tb_in[0] + Mi[2] * tb_in[1], w1 = Mi[1] * tb_in[0] + Mi[3] * tb_in[1];
  bb[0] -= w0; bb[1] -= w1;
  Ab[0] -= w0 * t[0]; Ab[1] -= w0 * t[1]; Ab[2] -= w1 * t[0]; Ab[3] -= w1 * t[1];
  bcg_real nub = -(w0 * t[0] + w1 * t[1]);
  CONTACT_NO_UNROLL
  for (int k = CONTACT_DISC_NEWTON - 1; k >= 0; k--) {
    /* nu_k+1 = nu_k - phi / dphi at nu_k */
    contact_disc_t(A, b, nus[k], Mi, t);
    const bcg_real n = sqrt(t[0] * t[0] + t[1] * t[1]);
    const bcg_real Mt0 = Mi[0] * t[0] + Mi[1] * t[1], Mt1 = Mi[2] * t[0] + Mi[3] * t[1];
    const bcg_real MTt0 = Mi[0] * t[0] + Mi[2] * t[1], MTt1 = Mi[1] * t[0] + Mi[3] * t[1];
    const bcg_real s = t[0] * Mt0 + t[1] * Mt1;
    const bcg_real n3 = n * n * n;
    const bcg_real phi = r / n - (bcg_real)1, dphi = r * s / n3;
    const bcg_real phib = -nub / dphi, dphib = nub * phi / (dphi * dphi);
    /* phi = r / n - 1, dphi = r s / n^3 */
    bcg_real nb = -phib * r / (n * n) - 3 * r * s * dphib / (n3 * n);
    *rb += phib / n + dphib * s / n3;
    const bcg_real sb = dphib * r / n3;
    /* n = |t|, s = t^T Mi t */
    bcg_real tb0 = nb * t[0] / n + sb * (Mt0 + MTt0), tb1 = nb * t[1] / n + sb * (Mt1 + MTt1);
    /* Mib = sb t t^T - tb b^T (t = -Mi b) */
    const bcg_real Mib[4] = {sb * t[0] * t[0] - tb0 * b[0], sb * t[0] * t[1] - tb0 * b[1],
                             sb * t[1] * t[0] - tb1 * b[0], sb * t[1] * t[1] - tb1 * b[1]};
    bb[0] -= Mi[0] * tb0 + Mi[2] * tb1;
    bb[1] -= Mi[1] * tb0 + Mi[3] * tb1;
    /* Mi = M^-1: Mb = -Mi^T Mib Mi^T */
    const bcg_real T0 = Mib[0] * Mi[0] + Mib[1] * Mi[1], T1 = Mib[0] * Mi[2] + Mib[1] * Mi[3];
    const bcg_real T2 = Mib[2] * Mi[0] + Mib[3] * Mi[1], T3 = Mib[2] * Mi[2] + Mib[3] * Mi[3];
    const bcg_real Mb0 = -(Mi[0] * T0 + Mi[2] * T2), Mb1 = -(Mi[0] * T1 + Mi[2] * T3);
    const bcg_real Mb2 = -(Mi[1] * T0 + Mi[3] * T2), Mb3 = -(Mi[1] * T1 + Mi[3] * T3);
    Ab[0] += Mb0; Ab[1] += Mb1; Ab[2] += Mb2; Ab[3] += Mb3;
    nub += Mb0 + Mb3; /* M = A + nu I; and nu_k+1 = nu_k - ...: nub passes on */
  }
  /* nu_0 = 0 */
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

/* threads per block of the one-thread-per-environment kernels: the
 * stepper's (libbcg, bcg/sim_cuda.h), 32 or BCG_CUDA_BLOCK */
extern "C" int bcg_cuda_block_default(void);
#endif

#endif
