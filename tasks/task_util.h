/* tasks/task_util.h - what the imitation and locomotion tasks share: the
 * root / joint layout of a model, the heading frame, the proprioceptive
 * observation, and the adjoint bookkeeping that turns pose adjoints into
 * state adjoints through bcg_kinematics_vjp. Header-only, BCG_HD.
 *
 * Root. The root is the first body with joints (body 1 on MuJoCo models); its
 * parent must be the world. With a free joint the root's orientation and
 * velocities are expressed in the heading frame (yaw of the root's x axis);
 * without one (planar models such as models/biped2d.xml: slide x, slide z,
 * hinge y) the heading is undefined and the world frame is used.
 * Root velocities are those of the root body's origin (linear, world) and its
 * angular velocity (world), computed from the root's dofs: for a free root
 * this is exactly qvel[0:3] and R qvel[3:6].
 *
 * Joints. Every hinge/slide coordinate outside the root is a "joint" of the
 * observation and the reward; ball joints outside the root are refused. */
#ifndef BCG_TASKS_UTIL_H
#define BCG_TASKS_UTIL_H

#include <stdio.h>
#include <string.h>

#include "bcg/dyn.h"
#include "bcg/model.h"

typedef struct tu_layout {
  int root;      /* root body */
  int free_root; /* root has a free joint (heading frame used) */
  int rdof0, nrdof; /* the root body's dofs */
  int nj;        /* joint coordinates outside the root */
  int jq[BCG_MAX_DOF], jd[BCG_MAX_DOF], jnt[BCG_MAX_DOF];
} tu_layout;

static inline int tu_layout_init(tu_layout *L, const bcg_model *model, char *err, size_t errlen) {
  const bcg_mdata *m = &model->m;
  memset(L, 0, sizeof *L);
  int r = 1;
  while (r < m->nbody && m->body_jntnum[r] == 0) r++;
  if (r >= m->nbody) return snprintf(err, errlen, "model %s has no joints", model->path), -1;
  if (m->body_parent[r] != 0)
    return snprintf(err, errlen, "model %s: the first body with joints ('%s') is not a child of the world",
                    model->path, model->body_name[r]), -1;
  L->root = r;
  int j0 = m->body_jntadr[r];
  L->free_root = m->jnt_type[j0] == BCG_JNT_FREE;
  L->rdof0 = m->jnt_dofadr[j0];
  L->nrdof = 0;
  for (int jj = 0; jj < m->body_jntnum[r]; jj++) L->nrdof += bcg_jnt_ndof(m->jnt_type[j0 + jj]);
  for (int j = 0; j < m->njnt; j++) {
    if (m->jnt_body[j] == r) continue;
    if (m->jnt_type[j] != BCG_JNT_HINGE && m->jnt_type[j] != BCG_JNT_SLIDE)
      return snprintf(err, errlen, "model %s: joint '%s' is a free/ball joint outside the root (not supported)",
                      model->path, model->jnt_name[j]), -1;
    L->jq[L->nj] = m->jnt_qposadr[j];
    L->jd[L->nj] = m->jnt_dofadr[j];
    L->jnt[L->nj] = j;
    L->nj++;
  }
  return 0;
}

/* ---- rotations --------------------------------------------------------------- */

/* tb += vee(Rb R^T): the world-rotation adjoint of a raw 3x3 adjoint Rb */
BCG_HD void tu_rot_adj(const bcg_real *R, const bcg_real *Rb, bcg_real *tb) {
  bcg_real N[9];
  bcg_m3_mulT(N, Rb, R);
  tb[0] += N[7] - N[5];
  tb[1] += N[2] - N[6];
  tb[2] += N[3] - N[1];
}

/* Hi = Rz(-psi), psi = atan2(R10, R00) (identity without a free root) */
BCG_HD void tu_heading(const tu_layout *L, const bcg_real *R, bcg_real *Hi) {
  for (int i = 0; i < 9; i++) Hi[i] = (i % 4 == 0) ? 1 : 0;
  if (!L->free_root) return;
  bcg_real psi = atan2(R[3], R[0]), c = cos(psi), s = sin(psi);
  Hi[0] = c; Hi[1] = s; Hi[3] = -s; Hi[4] = c;
}
/* Rb += d<Hib, Hi>/dR */
BCG_HD void tu_heading_vjp(const tu_layout *L, const bcg_real *R, const bcg_real *Hib, bcg_real *Rb) {
  if (!L->free_root) return;
  bcg_real psi = atan2(R[3], R[0]), c = cos(psi), s = sin(psi);
  bcg_real psib = Hib[0] * -s + Hib[1] * c + Hib[3] * -c + Hib[4] * -s;
  bcg_real n = R[0] * R[0] + R[3] * R[3];
  if (n < (bcg_real)1e-30) return;
  Rb[3] += psib * R[0] / n;
  Rb[0] -= psib * R[3] / n;
}
/* y = A x adjoint: Ab += yb x^T, xb += A^T yb (either may be NULL) */
BCG_HD void tu_mv_vjp(const bcg_real *A, const bcg_real *x, const bcg_real *yb, bcg_real *Ab, bcg_real *xb) {
  if (Ab)
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) Ab[3 * i + j] += yb[i] * x[j];
  if (xb) {
    bcg_real t[3];
    bcg_m3_mulTv(t, A, yb);
    bcg_v3_addto(xb, t);
  }
}
/* 6D of a rotation: its first two columns */
BCG_HD void tu_6d(const bcg_real *R, bcg_real *o) {
  o[0] = R[0]; o[1] = R[3]; o[2] = R[6]; o[3] = R[1]; o[4] = R[4]; o[5] = R[7];
}
BCG_HD void tu_6d_vjp(const bcg_real *ob, bcg_real *Rb) {
  Rb[0] += ob[0]; Rb[3] += ob[1]; Rb[6] += ob[2]; Rb[1] += ob[3]; Rb[4] += ob[4]; Rb[7] += ob[5];
}

/* ---- root velocity ------------------------------------------------------------ */

/* from the root dofs' motion subspaces rcdof [nrdof][6] (bcg_kin's cdof from
 * row rdof0), the root's position p (relative to the kinematics' origin) and
 * the velocity u [nv]: the root's linear velocity v and angular velocity w */
BCG_HD void tu_root_vel_of(const tu_layout *L, const bcg_real (*rcdof)[6], const bcg_real *p, const bcg_real *u,
                           bcg_real *v, bcg_real *w) {
  bcg_real V[6] = {0, 0, 0, 0, 0, 0};
  for (int d = L->rdof0; d < L->rdof0 + L->nrdof; d++) bcg_sp_addscl(V, rcdof[d - L->rdof0], u[d]);
  bcg_v3_copy(w, V);
  bcg_v3_copy(v, V + 3);
  bcg_v3_cross_add(v, V, p);
}
BCG_HD void tu_root_vel(const tu_layout *L, const bcg_kin *k, const bcg_real *u, bcg_real *v, bcg_real *w) {
  tu_root_vel_of(L, (const bcg_real(*)[6])k->cdof[L->rdof0], k->p[L->root], u, v, w);
}

/* ---- adjoint accumulator ------------------------------------------------------- */

typedef struct tu_adj {
  bcg_real tb[BCG_MAX_BODY][3], pb[BCG_MAX_BODY][3];
  bcg_real cdofb[BCG_MAX_DOF][6];
  bcg_real F[BCG_MAX_BODY][6];
  bcg_real Rb[9];  /* raw adjoint of the root rotation matrix */
  bcg_real Hib[9]; /* adjoint of the heading rotation Hi */
  bcg_real qb[BCG_MAX_DOF], ub[BCG_MAX_DOF]; /* direct tangent / velocity adjoints */
  bcg_real qk[BCG_MAX_DOF];
} tu_adj;

BCG_HD void tu_adj_zero(tu_adj *a) {
  memset(a->tb, 0, sizeof a->tb);
  memset(a->pb, 0, sizeof a->pb);
  memset(a->cdofb, 0, sizeof a->cdofb);
  memset(a->Rb, 0, sizeof a->Rb);
  memset(a->Hib, 0, sizeof a->Hib);
  memset(a->qb, 0, sizeof a->qb);
  memset(a->ub, 0, sizeof a->ub);
}

BCG_HD void tu_root_vel_vjp(const tu_layout *L, const bcg_kin *k, const bcg_real *u, const bcg_real *vb,
                            const bcg_real *wb, tu_adj *a) {
  bcg_real V[6] = {0, 0, 0, 0, 0, 0}, Vb[6];
  for (int d = L->rdof0; d < L->rdof0 + L->nrdof; d++) bcg_sp_addscl(V, k->cdof[d], u[d]);
  /* v = Vl + Vw x p ; w = Vw */
  bcg_v3_copy(Vb, wb);
  bcg_v3_cross_add(Vb, k->p[L->root], vb);
  bcg_v3_copy(Vb + 3, vb);
  bcg_v3_cross_add(a->pb[L->root], vb, V);
  for (int d = L->rdof0; d < L->rdof0 + L->nrdof; d++) {
    a->ub[d] += bcg_sp_dot(k->cdof[d], Vb);
    bcg_sp_addscl(a->cdofb[d], Vb, u[d]);
  }
}

/* Turn the accumulated adjoints into the state adjoint xb (+=, [2nv]). */
BCG_HD void tu_adj_finish(const tu_layout *L, const bcg_mdata *m, const bcg_kin *k, tu_adj *a, bcg_real *xb) {
  const bcg_real *R = k->R[L->root];
  tu_heading_vjp(L, R, a->Hib, a->Rb);
  tu_rot_adj(R, a->Rb, a->tb[L->root]);
  for (int d = 0; d < m->nv; d++) a->qk[d] = 0;
  bcg_kinematics_vjp(m, k, (const bcg_real(*)[3])a->tb, (const bcg_real(*)[3])a->pb,
                     (const bcg_real(*)[6])a->cdofb, a->qk, a->F);
  for (int d = 0; d < m->nv; d++) {
    xb[d] += a->qk[d] + a->qb[d];
    xb[m->nv + d] += a->ub[d];
  }
}

/* ---- proprioception ------------------------------------------------------------- */

/* root height, root orientation 6D (heading frame), root linear and angular
 * velocity (heading frame), joint positions, joint velocities, previous action */
BCG_HD int tu_proprio_dim(const tu_layout *L, int nu) { return 13 + 2 * L->nj + nu; }

BCG_HD void tu_proprio(const tu_layout *L, const bcg_mdata *m, const bcg_kin *k, const bcg_real *q,
                       const bcg_real *u, const bcg_real *pa, bcg_real *o) {
  int r = L->root;
  const bcg_real *R = k->R[r];
  bcg_real Hi[9], Rh[9], v[3], w[3];
  tu_heading(L, R, Hi);
  o[0] = k->p[r][2] + k->o[2];
  bcg_m3_mul(Rh, Hi, R);
  tu_6d(Rh, o + 1);
  tu_root_vel(L, k, u, v, w);
  bcg_m3_mulv(o + 7, Hi, v);
  bcg_m3_mulv(o + 10, Hi, w);
  bcg_real *oj = o + 13;
  for (int i = 0; i < L->nj; i++) {
    oj[i] = q[L->jq[i]];
    oj[L->nj + i] = u[L->jd[i]];
  }
  for (int i = 0; i < m->nu; i++) oj[2 * L->nj + i] = pa ? pa[i] : 0;
}

BCG_HD void tu_proprio_vjp(const tu_layout *L, const bcg_mdata *m, const bcg_kin *k, const bcg_real *u,
                           const bcg_real *ob, tu_adj *a, bcg_real *pab) {
  int r = L->root;
  const bcg_real *R = k->R[r];
  bcg_real Hi[9], Rh6b[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0}, v[3], w[3], vb[3] = {0, 0, 0}, wb[3] = {0, 0, 0};
  tu_heading(L, R, Hi);
  a->pb[r][2] += ob[0];
  tu_6d_vjp(ob + 1, Rh6b);
  /* Rh = Hi R: Hib += Rhb R^T ; Rb += Hi^T Rhb */
  bcg_real T[9];
  bcg_m3_mulT(T, Rh6b, R);
  for (int i = 0; i < 9; i++) a->Hib[i] += T[i];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      for (int l = 0; l < 3; l++) a->Rb[3 * i + j] += Hi[3 * l + i] * Rh6b[3 * l + j];
  tu_root_vel(L, k, u, v, w);
  tu_mv_vjp(Hi, v, ob + 7, a->Hib, vb);
  tu_mv_vjp(Hi, w, ob + 10, a->Hib, wb);
  tu_root_vel_vjp(L, k, u, vb, wb, a);
  const bcg_real *oj = ob + 13;
  for (int i = 0; i < L->nj; i++) {
    a->qb[L->jd[i]] += oj[i];
    a->ub[L->jd[i]] += oj[L->nj + i];
  }
  if (pab)
    for (int i = 0; i < m->nu; i++) pab[i] += oj[2 * L->nj + i];
}

/* ---- self-collision penalty ------------------------------------------------------
 * bcg's contact is with the floor only; MuJoCo also collides the robot's
 * bodies with each other, so a gait that crosses its feet in bcg trips in
 * MuJoCo. The tasks can penalise the overlap of the robot's own capsules:
 * every collision geom that the model turned into contact points becomes a
 * segment (a capsule's two end spheres) or a point (a sphere) of radius r on
 * its body; pairs on different bodies that are not parent and child (MuJoCo's
 * parent filter) contribute max(0, r1 + r2 - d)^2, d the distance of the two
 * segments. Its gradient is exact (the closest points are an optimum, so
 * only their explicit dependence on the endpoints counts). Box corners
 * (radius 0) are left out. */
/* Joint-limit penalty: sum over the limited hinge and slide joints of the
 * squared violation max(0, lo - q)^2 + max(0, q - hi)^2 (rad^2, m^2). bcg
 * models a limit as a smooth penalty force, MuJoCo as a soft constraint;
 * a policy that presses a joint into its limit (a knee locked straight, a
 * hip held at its extension limit) behaves differently in the two, so the
 * tasks can make that cost something. With qb non-NULL, qb[dof] += g * its
 * gradient (C1: the square of a ramp). */
BCG_HD bcg_real tu_limit_penalty(const bcg_mdata *m, const bcg_real *q, bcg_real g, bcg_real *qb) {
  bcg_real tot = 0;
  for (int j = 0; j < m->njnt; j++) {
    if (!m->jnt_limited[j] || (m->jnt_type[j] != BCG_JNT_HINGE && m->jnt_type[j] != BCG_JNT_SLIDE)) continue;
    bcg_real x = q[m->jnt_qposadr[j]], lo = m->jnt_range[j][0] - x, hi = x - m->jnt_range[j][1];
    if (lo > 0) {
      tot += lo * lo;
      if (qb) qb[m->jnt_dofadr[j]] -= 2 * g * lo;
    } else if (hi > 0) {
      tot += hi * hi;
      if (qb) qb[m->jnt_dofadr[j]] += 2 * g * hi;
    }
  }
  return tot;
}

#define TU_MAX_SEG BCG_MAX_SC
/* The self-collision penalty's capsules and pairs: the model's (struct
 * bcg_model, sc_*: every collision geom of a moving body, fitted where it is
 * not a sphere or capsule; MuJoCo's pair filters). */
typedef struct tu_self {
  int nseg, npair;
  bcg_real margin; /* penalise from this distance between the surfaces on (m; 0: overlap only) */
  int body[TU_MAX_SEG];
  bcg_real a[TU_MAX_SEG][3], c[TU_MAX_SEG][3], r[TU_MAX_SEG]; /* body-frame endpoints, radius */
  short pair[TU_MAX_SEG * (TU_MAX_SEG - 1) / 2][2];
  bcg_real pm[TU_MAX_SEG * (TU_MAX_SEG - 1) / 2]; /* each pair's margin: min(margin, its gap at qpos0) */
  /* each pair's skip bound (tu_self_bounds): the squared distance of the
   * capsules' midpoints beyond which the pair clears its margin */
  bcg_real far2[TU_MAX_SEG * (TU_MAX_SEG - 1) / 2];
} tu_self;

/* The pairs' skip bounds. Every point of a capsule's axis lies within half
 * its length h of its midpoint, so a pair whose midpoints are cm apart has
 * a surface gap of at least cm - h1 - h2 - r1 - r2; when that exceeds the
 * pair's margin pm by more than a micrometre (the slack covers the rounding
 * of the endpoints, in float too) the pair adds nothing to the penalty.
 * far2 = (h1 + h2 + r1 + r2 + pm + 1e-6)^2, compared with the midpoints'
 * squared distance: no square root per pair, and h from the body-frame
 * endpoints once instead of per call. */
static inline void tu_self_bounds(tu_self *S) {
  for (int i = 0; i < S->npair; i++) {
    double b = S->pm[i] + 1e-6;
    for (int e = 0; e < 2; e++) {
      int c = S->pair[i][e];
      double d2 = 0;
      for (int q = 0; q < 3; q++) d2 += ((double)S->c[c][q] - S->a[c][q]) * ((double)S->c[c][q] - S->a[c][q]);
      b += 0.5 * sqrt(d2) + S->r[c];
    }
    S->far2[i] = (bcg_real)(b * b);
  }
}

static inline void tu_self_init(tu_self *S, const bcg_model *M) {
  S->nseg = M->nsc;
  S->npair = M->nsc_pair;
  S->margin = 0;
  for (int k = 0; k < M->nsc; k++) {
    S->body[k] = M->sc_body[k];
    S->r[k] = M->sc_r[k];
    for (int d = 0; d < 3; d++) S->a[k][d] = M->sc_a[k][d], S->c[k][d] = M->sc_c[k][d];
  }
  for (int i = 0; i < M->nsc_pair; i++)
    S->pair[i][0] = M->sc_pair[i][0], S->pair[i][1] = M->sc_pair[i][1], S->pm[i] = 0;
  tu_self_bounds(S);
}

BCG_HD void tu_self_ends(const tu_self *S, const bcg_kin *k, bcg_real (*L)[2][3], bcg_real (*E)[2][3]);
BCG_HD bcg_real tu_self_pair_gap(const tu_self *S, const bcg_real (*E)[2][3], int i, bcg_real *s, bcg_real *t,
                                 bcg_real n[3]);

/* The penalty's margin: `margin` for every pair, but never more than the
 * pair's gap in the model's default pose (qpos0), so that pose is never
 * penalised (on the G1 the elbow and wrist links sit 3 mm apart, the arms
 * 1-2 cm from the torso). Returns -1 when out of memory. */
static inline int tu_self_set_margin(tu_self *S, const bcg_mdata *m, bcg_real margin) {
  S->margin = margin;
  bcg_kin *k = (bcg_kin *)malloc(sizeof *k);
  if (!k) return -1;
  bcg_kinematics_pose(m, m->qpos0, k);
  bcg_real L[TU_MAX_SEG][2][3], E[TU_MAX_SEG][2][3];
  tu_self_ends(S, k, L, E);
  for (int i = 0; i < S->npair; i++) {
    bcg_real s, t, n[3];
    bcg_real g = tu_self_pair_gap(S, (const bcg_real(*)[2][3])E, i, &s, &t, n);
    S->pm[i] = g < 0 ? 0 : g < margin ? g : margin;
  }
  tu_self_bounds(S);
  free(k);
  return 0;
}

/* a warning when the penalty is on and the model has collision geoms beyond
 * the capsules it keeps */
static inline void tu_self_warn(const bcg_model *M, double w_self, const bcg_services *svc) {
  if (w_self > 0 && M->sc_dropped)
    svc->log(1, "[task] w_self: %s has %d collision geoms beyond the %d the self-collision penalty keeps; "
                "those are left out of it", M->path, M->sc_dropped, BCG_MAX_SC);
}

/* every capsule's endpoints at kinematics k: L[c] their offsets from the
 * body's origin (world axes), E[c] the points (relative to o) */
BCG_HD void tu_self_ends(const tu_self *S, const bcg_kin *k, bcg_real (*L)[2][3], bcg_real (*E)[2][3]) {
  for (int c = 0; c < S->nseg; c++) {
    int b = S->body[c];
    bcg_m3_mulv(L[c][0], k->R[b], S->a[c]);
    bcg_m3_mulv(L[c][1], k->R[b], S->c[c]);
    for (int q = 0; q < 3; q++) E[c][0][q] = L[c][0][q] + k->p[b][q], E[c][1][q] = L[c][1][q] + k->p[b][q];
  }
}

/* pair i from the endpoints E (tu_self_ends): its surface gap d - r1 - r2, the
 * closest points' parameters s and t and n = P - Q */
BCG_HD bcg_real tu_self_pair_gap(const tu_self *S, const bcg_real (*E)[2][3], int i, bcg_real *s, bcg_real *t,
                                 bcg_real n[3]) {
  int x = S->pair[i][0], y = S->pair[i][1];
  return bcg_seg_nearest(E[x][0], E[x][1], E[y][0], E[y][1], s, t, n) - S->r[x] - S->r[y];
}

/* the penalty sum over pairs of max(0, r1 + r2 + margin_i - d)^2 at kinematics k (margin_i:
 * tu_self_set_margin); with A non-NULL, also A->pb / A->tb += g * its gradient. A pair
 * whose capsules' midpoints lie beyond its skip bound (tu_self_bounds) clears its margin
 * and is skipped unsolved: every pair that adds to the sum is solved, in the same order,
 * so the sum and the gradient are those of solving every pair. */
BCG_HD bcg_real tu_self_penalty(const tu_self *S, const bcg_kin *k, bcg_real g, tu_adj *A) {
  bcg_real L[TU_MAX_SEG][2][3], E[TU_MAX_SEG][2][3], M[TU_MAX_SEG][3];
  tu_self_ends(S, k, L, E);
  for (int c = 0; c < S->nseg; c++)
    for (int q = 0; q < 3; q++) M[c][q] = (bcg_real)0.5 * (E[c][0][q] + E[c][1][q]);
  bcg_real tot = 0;
  for (int i = 0; i < S->npair; i++) {
    int x = S->pair[i][0], y = S->pair[i][1], bx = S->body[x], by = S->body[y];
    bcg_real dm[3];
    bcg_v3_sub(dm, M[x], M[y]);
    if (bcg_v3_dot(dm, dm) > S->far2[i]) continue;
    bcg_real s, t, n[3];
    bcg_real gap = tu_self_pair_gap(S, (const bcg_real(*)[2][3])E, i, &s, &t, n);
    bcg_real d = gap + S->r[x] + S->r[y], o = S->pm[i] - gap;
    if (o <= 0 || d < (bcg_real)1e-12) continue;
    tot += o * o;
    if (!A) continue;
    bcg_real cf = -2 * o * g / d, w[4] = {(1 - s) * cf, s * cf, -(1 - t) * cf, -t * cf}; /* d d / d P = n / d */
    for (int e = 0; e < 4; e++) {
      int b = e < 2 ? bx : by;
      const bcg_real *Le = L[e < 2 ? x : y][e & 1];
      bcg_real ge[3] = {w[e] * n[0], w[e] * n[1], w[e] * n[2]};
      for (int q = 0; q < 3; q++) A->pb[b][q] += ge[q];
      bcg_v3_cross_add(A->tb[b], Le, ge);
    }
  }
  return tot;
}

/* The declared keys of the penalties both tasks apply (tu_self_penalty,
 * the joint-limit penalty): w_self, self_margin, w_limit. */
#define TU_PENALTY_KEYS                                                                                            \
  {"w_self", BCG_KEY_REAL, "1000", 0, 1e9, NULL,                                                                   \
   "weight of the self-collision penalty: sum over the pairs MuJoCo would collide of the robot's capsules (one "   \
   "per collision geom; spheres and capsules exact, other shapes fitted) of max(0, r1 + r2 - distance)^2 (m^2); " \
   "bcg simulates floor contact only, MuJoCo also body-body contact"},                                             \
      {"self_margin", BCG_KEY_REAL, "0", 0, 1, NULL,                                                               \
       "the self-collision penalty starts this far apart (m): max(0, r1 + r2 + self_margin - distance)^2; a "      \
       "margin keeps limbs from grazing each other, which MuJoCo answers with a contact. A pair closer than this "  \
       "in the model's default pose (qpos0) gets that distance as its margin"},                         \
      {"w_limit", BCG_KEY_REAL, "0", 0, 1e9, NULL,                                                                 \
       "weight of the joint-limit penalty: sum over limited joints of the squared violation of the range "         \
       "(rad^2); bcg's penalty limits and MuJoCo's constraint limits differ, a policy that leans on them "          \
       "transfers worse"}

#endif
