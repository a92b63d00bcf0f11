/* bcg/spatial.h - 3-vectors, quaternions (w x y z), 3x3 matrices (row-major,
 * R maps body to world coordinates) and 6-D spatial vectors (angular part
 * first, then linear, about a fixed origin), as BCG_HD functions for CPU and GPU. */
#ifndef BCG_SPATIAL_H
#define BCG_SPATIAL_H

#include "bcg/real.h"


BCG_HD void bcg_v3_zero(bcg_real *a) { a[0] = a[1] = a[2] = 0; }
BCG_HD void bcg_v3_copy(bcg_real *d, const bcg_real *a) { d[0] = a[0]; d[1] = a[1]; d[2] = a[2]; }
BCG_HD bcg_real bcg_v3_dot(const bcg_real *a, const bcg_real *b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
BCG_HD void bcg_v3_cross(bcg_real *c, const bcg_real *a, const bcg_real *b) {
  bcg_real x = a[1] * b[2] - a[2] * b[1], y = a[2] * b[0] - a[0] * b[2], z = a[0] * b[1] - a[1] * b[0];
  c[0] = x; c[1] = y; c[2] = z;
}
/* c += a x b */
BCG_HD void bcg_v3_cross_add(bcg_real *c, const bcg_real *a, const bcg_real *b) {
  c[0] += a[1] * b[2] - a[2] * b[1];
  c[1] += a[2] * b[0] - a[0] * b[2];
  c[2] += a[0] * b[1] - a[1] * b[0];
}
BCG_HD void bcg_v3_add(bcg_real *c, const bcg_real *a, const bcg_real *b) { c[0] = a[0] + b[0]; c[1] = a[1] + b[1]; c[2] = a[2] + b[2]; }
BCG_HD void bcg_v3_sub(bcg_real *c, const bcg_real *a, const bcg_real *b) { c[0] = a[0] - b[0]; c[1] = a[1] - b[1]; c[2] = a[2] - b[2]; }
BCG_HD void bcg_v3_addto(bcg_real *c, const bcg_real *a) { c[0] += a[0]; c[1] += a[1]; c[2] += a[2]; }
BCG_HD void bcg_v3_addscl(bcg_real *c, const bcg_real *a, bcg_real s) { c[0] += s * a[0]; c[1] += s * a[1]; c[2] += s * a[2]; }
BCG_HD void bcg_v3_scl(bcg_real *c, const bcg_real *a, bcg_real s) { c[0] = s * a[0]; c[1] = s * a[1]; c[2] = s * a[2]; }

/* y = R x ; y = R^T x */
BCG_HD void bcg_m3_mulv(bcg_real *y, const bcg_real *R, const bcg_real *x) {
  bcg_real a = R[0] * x[0] + R[1] * x[1] + R[2] * x[2];
  bcg_real b = R[3] * x[0] + R[4] * x[1] + R[5] * x[2];
  bcg_real c = R[6] * x[0] + R[7] * x[1] + R[8] * x[2];
  y[0] = a; y[1] = b; y[2] = c;
}
BCG_HD void bcg_m3_mulTv(bcg_real *y, const bcg_real *R, const bcg_real *x) {
  bcg_real a = R[0] * x[0] + R[3] * x[1] + R[6] * x[2];
  bcg_real b = R[1] * x[0] + R[4] * x[1] + R[7] * x[2];
  bcg_real c = R[2] * x[0] + R[5] * x[1] + R[8] * x[2];
  y[0] = a; y[1] = b; y[2] = c;
}
/* C = A B */
BCG_HD void bcg_m3_mul(bcg_real *C, const bcg_real *A, const bcg_real *B) {
  bcg_real t[9];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      t[3 * i + j] = A[3 * i] * B[j] + A[3 * i + 1] * B[3 + j] + A[3 * i + 2] * B[6 + j];
  for (int i = 0; i < 9; i++) C[i] = t[i];
}
/* C = A B^T */
BCG_HD void bcg_m3_mulT(bcg_real *C, const bcg_real *A, const bcg_real *B) {
  bcg_real t[9];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      t[3 * i + j] = A[3 * i] * B[3 * j] + A[3 * i + 1] * B[3 * j + 1] + A[3 * i + 2] * B[3 * j + 2];
  for (int i = 0; i < 9; i++) C[i] = t[i];
}

BCG_HD void bcg_quat_normalize(bcg_real *q) {
  bcg_real n = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  if (n < (bcg_real)1e-12) { q[0] = 1; q[1] = q[2] = q[3] = 0; return; }
  bcg_real s = 1 / n;
  q[0] *= s; q[1] *= s; q[2] *= s; q[3] *= s;
}
BCG_HD void bcg_quat_mul(bcg_real *r, const bcg_real *a, const bcg_real *b) {
  bcg_real w = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3];
  bcg_real x = a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2];
  bcg_real y = a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1];
  bcg_real z = a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0];
  r[0] = w; r[1] = x; r[2] = y; r[3] = z;
}
/* rotation matrix of a unit quaternion */
BCG_HD void bcg_quat2mat(bcg_real *R, const bcg_real *q) {
  bcg_real w = q[0], x = q[1], y = q[2], z = q[3];
  R[0] = 1 - 2 * (y * y + z * z); R[1] = 2 * (x * y - w * z);     R[2] = 2 * (x * z + w * y);
  R[3] = 2 * (x * y + w * z);     R[4] = 1 - 2 * (x * x + z * z); R[5] = 2 * (y * z - w * x);
  R[6] = 2 * (x * z - w * y);     R[7] = 2 * (y * z + w * x);     R[8] = 1 - 2 * (x * x + y * y);
}
/* quaternion of the rotation vector phi (angle |phi| about phi/|phi|) */
BCG_HD void bcg_quat_exp(bcg_real *q, const bcg_real *phi) {
  bcg_real th = sqrt(bcg_v3_dot(phi, phi));
  bcg_real s;
  if (th < (bcg_real)1e-6) { s = (bcg_real)0.5 - th * th / 48; q[0] = 1 - th * th / 8; }
  else { s = sin(th / 2) / th; q[0] = cos(th / 2); }
  q[1] = s * phi[0]; q[2] = s * phi[1]; q[3] = s * phi[2];
}
/* rotation matrix exp([phi]x) */
BCG_HD void bcg_rotvec2mat(bcg_real *R, const bcg_real *phi) {
  bcg_real q[4];
  bcg_quat_exp(q, phi);
  bcg_quat2mat(R, q);
}
/* Right Jacobian of SO(3): exp(phi + d) ~ exp(phi) exp(Jr(phi) d). */
BCG_HD void bcg_so3_jr(bcg_real *J, const bcg_real *phi) {
  bcg_real th2 = bcg_v3_dot(phi, phi), th = sqrt(th2), a, b;
  if (th < (bcg_real)1e-4) { a = (bcg_real)0.5 - th2 / 24; b = (bcg_real)1 / 6 - th2 / 120; }
  else { a = (1 - cos(th)) / th2; b = (th - sin(th)) / (th2 * th); }
  bcg_real x = phi[0], y = phi[1], z = phi[2];
  /* [phi]x and its square */
  bcg_real K[9] = {0, -z, y, z, 0, -x, -y, x, 0};
  bcg_real K2[9] = {-(y * y + z * z), x * y, x * z, x * y, -(x * x + z * z), y * z, x * z, y * z, -(x * x + y * y)};
  for (int i = 0; i < 9; i++) J[i] = (i % 4 == 0 ? 1 : 0) - a * K[i] + b * K2[i];
}

/* spatial vectors: s = (angular[3], linear[3]) about the common origin */
/* motion cross: c = a xm b */
BCG_HD void bcg_sp_crossm(bcg_real *c, const bcg_real *a, const bcg_real *b) {
  bcg_real t[6];
  bcg_v3_cross(t, a, b);
  bcg_v3_cross(t + 3, a, b + 3);
  bcg_v3_cross_add(t + 3, a + 3, b);
  for (int i = 0; i < 6; i++) c[i] = t[i];
}
/* force cross: c = a xf f */
BCG_HD void bcg_sp_crossf(bcg_real *c, const bcg_real *a, const bcg_real *f) {
  bcg_real t[6];
  bcg_v3_cross(t, a, f);
  bcg_v3_cross_add(t, a + 3, f + 3);
  bcg_v3_cross(t + 3, a, f + 3);
  for (int i = 0; i < 6; i++) c[i] = t[i];
}
BCG_HD bcg_real bcg_sp_dot(const bcg_real *a, const bcg_real *b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5];
}
BCG_HD void bcg_sp_addscl(bcg_real *c, const bcg_real *a, bcg_real s) {
  for (int i = 0; i < 6; i++) c[i] += s * a[i];
}
BCG_HD void bcg_sp_zero(bcg_real *a) {
  for (int i = 0; i < 6; i++) a[i] = 0;
}

/* Adjoint of c = a xm b: accumulate abar, bbar given cbar. */
BCG_HD void bcg_sp_crossm_vjp(const bcg_real *a, const bcg_real *b, const bcg_real *cb, bcg_real *ab, bcg_real *bb) {
  /* c_w = aw x bw ; c_v = aw x bv + av x bw */
  if (ab) {
    bcg_v3_cross_add(ab, b, cb);         /* aw += bw x cbw */
    bcg_v3_cross_add(ab, b + 3, cb + 3); /* aw += bv x cbv */
    bcg_v3_cross_add(ab + 3, b, cb + 3); /* av += bw x cbv */
  }
  if (bb) {
    bcg_v3_cross_add(bb, cb, a);         /* bw += cbw x aw */
    bcg_v3_cross_add(bb, cb + 3, a + 3); /* bw += cbv x av */
    bcg_v3_cross_add(bb + 3, cb + 3, a); /* bv += cbv x aw */
  }
}
/* Adjoint of c = a xf f: c_n = aw x fn + av x ff ; c_f = aw x ff */
BCG_HD void bcg_sp_crossf_vjp(const bcg_real *a, const bcg_real *f, const bcg_real *cb, bcg_real *ab, bcg_real *fb) {
  if (ab) {
    bcg_v3_cross_add(ab, f, cb);         /* aw += fn x cbn */
    bcg_v3_cross_add(ab, f + 3, cb + 3); /* aw += ff x cbf */
    bcg_v3_cross_add(ab + 3, f + 3, cb); /* av += ff x cbn */
  }
  if (fb) {
    bcg_v3_cross_add(fb, cb, a);         /* fn += cbn x aw */
    bcg_v3_cross_add(fb + 3, cb, a + 3); /* ff += cbn x av */
    bcg_v3_cross_add(fb + 3, cb + 3, a); /* ff += cbf x aw */
  }
}

/* Rigid-body inertia about the origin, as (m, h = m c, Ib = rotational
 * inertia about the origin). y = I x for x = (w, v):
 *   y_n = Ib w + h x v ;  y_f = m v - h x w */
BCG_HD void bcg_inertia_apply(bcg_real *y, bcg_real m, const bcg_real *h, const bcg_real *Ib, const bcg_real *x) {
  bcg_real t[6];
  bcg_m3_mulv(t, Ib, x);
  bcg_v3_cross_add(t, h, x + 3);
  for (int i = 0; i < 3; i++) t[3 + i] = m * x[3 + i];
  bcg_v3_cross_add(t + 3, x, h); /* - h x w = w x h */
  for (int i = 0; i < 6; i++) y[i] = t[i];
}
/* Adjoint of y = I x: accumulate xbar, hbar, Ibbar (any may be NULL). */
BCG_HD void bcg_inertia_apply_vjp(bcg_real m, const bcg_real *h, const bcg_real *Ib, const bcg_real *x, const bcg_real *yb,
                              bcg_real *xb, bcg_real *hb, bcg_real *Ibb) {
  if (xb) {
    bcg_real t[3];
    bcg_m3_mulTv(t, Ib, yb);
    bcg_v3_addto(xb, t);
    bcg_v3_cross_add(xb, h, yb + 3);    /* w += h x ybf */
    bcg_v3_addscl(xb + 3, yb + 3, m);   /* v += m ybf */
    bcg_v3_cross_add(xb + 3, yb, h);    /* v += ybn x h */
  }
  if (hb) {
    bcg_v3_cross_add(hb, x + 3, yb);    /* h += v x ybn */
    bcg_v3_cross_add(hb, yb + 3, x);    /* h += ybf x w  (= -w x ybf) */
  }
  if (Ibb)
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) Ibb[3 * i + j] += yb[i] * x[j];
}

/* closest points P = A0 + s (A1 - A0), Q = B0 + t (B1 - B0) of two segments
 * (s, t in [0, 1]; a segment of length below 1e-6 is a point) */
BCG_HD void bcg_seg_closest(const bcg_real *A0, const bcg_real *A1, const bcg_real *B0, const bcg_real *B1, bcg_real *s,
                            bcg_real *t) {
  bcg_real d1[3], d2[3], r[3];
  bcg_v3_sub(d1, A1, A0);
  bcg_v3_sub(d2, B1, B0);
  bcg_v3_sub(r, A0, B0);
  bcg_real a = bcg_v3_dot(d1, d1), e = bcg_v3_dot(d2, d2), f = bcg_v3_dot(d2, r), eps = (bcg_real)1e-12;
  if (a <= eps && e <= eps) { *s = *t = 0; return; }
  if (a <= eps) { *s = 0; *t = f / e; }
  else {
    bcg_real c = bcg_v3_dot(d1, r);
    if (e <= eps) { *t = 0; *s = -c / a; }
    else {
      bcg_real b = bcg_v3_dot(d1, d2), den = a * e - b * b;
      *s = den > eps * a * e ? (b * f - c * e) / den : 0;
      if (*s < 0) *s = 0;
      if (*s > 1) *s = 1;
      *t = (b * *s + f) / e;
      if (*t < 0) { *t = 0; *s = -c / a; }
      else if (*t > 1) { *t = 1; *s = (b - c) / a; }
    }
  }
  if (*s < 0) *s = 0;
  if (*s > 1) *s = 1;
  if (*t < 0) *t = 0;
  if (*t > 1) *t = 1;
}

/* the closest points of two segments (bcg_seg_closest): their parameters s
 * and t, n = P - Q; returns the distance |n| */
BCG_HD bcg_real bcg_seg_nearest(const bcg_real *A0, const bcg_real *A1, const bcg_real *B0, const bcg_real *B1,
                                bcg_real *s, bcg_real *t, bcg_real n[3]) {
  bcg_seg_closest(A0, A1, B0, B1, s, t);
  for (int q = 0; q < 3; q++) n[q] = (A0[q] + *s * (A1[q] - A0[q])) - (B0[q] + *t * (B1[q] - B0[q]));
  return sqrt(bcg_v3_dot(n, n));
}

#endif
