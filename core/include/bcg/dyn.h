/* bcg/dyn.h - per-environment articulated-body dynamics and their exact
 * adjoints, written once for CPU and GPU (BCG_HD).
 *
 * Representation. Every spatial quantity is expressed in world axes about one
 * origin o per evaluation (the root position when the first body has a free
 * joint, else the world origin), which keeps float precision when the robot
 * is far from the world origin. o is a constant of the evaluation: every
 * output bcg uses (torques, accelerations, contact velocities, gaps in world
 * z) is either invariant to o or takes o back explicitly, so treating o as a
 * constant in the adjoint is exact.
 *
 * Tangent coordinates. Adjoints of q live in the nv-dimensional tangent
 * space: hinge/slide the angle/offset, free joints the world-frame
 * translation and a body-frame rotation increment (q <- q * exp(delta)),
 * ball joints a local rotation increment. This is the space in which MuJoCo's
 * qvel lives, so the adjoint of q has the same layout as the adjoint of qvel.
 *
 * Pose adjoints. A scalar's sensitivity to a rigid frame (R, p) is written
 * (tb, pb): dL = tb . dtheta + pb . dp for a world rotation dtheta of the
 * frame about its own origin and a translation dp. The kinematic adjoint
 * turns pose adjoints into a spatial force about o,
 *   F = (tb + p x pb, pb),
 * and the adjoint of every joint coordinate is cdof . (sum of F outboard of
 * it): the same pass as the backward sweep of RNEA. */
#ifndef BCG_DYN_H
#define BCG_DYN_H

#include "bcg/model.h"
#include "bcg/spatial.h"

typedef struct bcg_kin {
  bcg_real o[3];                  /* evaluation origin (world) */
  bcg_real R[BCG_MAX_BODY][9];    /* body orientation, body -> world */
  bcg_real p[BCG_MAX_BODY][3];    /* body origin relative to o */
  bcg_real com[BCG_MAX_BODY][3];  /* centre of mass relative to o */
  bcg_real Ic[BCG_MAX_BODY][9];   /* rotational inertia about the com, world axes */
  bcg_real h[BCG_MAX_BODY][3];    /* m * com */
  bcg_real Ib[BCG_MAX_BODY][9];   /* rotational inertia about o */
  bcg_real cdof[BCG_MAX_DOF][6];  /* motion subspace of each dof, about o */
  bcg_real anchor[BCG_MAX_DOF][3];/* origin of the frame the dof's axis is fixed in */
} bcg_kin;

/* ------------------------------------------------------------------------ */
/* Forward kinematics                                                        */
/* ------------------------------------------------------------------------ */

BCG_HD int bcg_has_free_root(const bcg_mdata *m) {
  return m->nbody > 1 && m->body_jntnum[1] > 0 && m->jnt_type[m->body_jntadr[1]] == BCG_JNT_FREE;
}

/* The pose part of the kinematics: o, R, p, cdof and anchor (what the
 * tasks and bcg_kinematics_vjp read); bcg_kinematics adds the bodies' mass
 * properties (com, Ic, h, Ib) with bcg_kinematics_massprops, the same
 * operations as one pass. */
BCG_HD void bcg_kinematics_pose(const bcg_mdata *m, const bcg_real *q, bcg_kin *k) {
  if (bcg_has_free_root(m)) {
    int a = m->jnt_qposadr[m->body_jntadr[1]];
    k->o[0] = q[a]; k->o[1] = q[a + 1]; k->o[2] = q[a + 2];
  } else {
    bcg_v3_zero(k->o);
  }
  /* world body */
  for (int i = 0; i < 9; i++) k->R[0][i] = (i % 4 == 0) ? 1 : 0;
  bcg_v3_scl(k->p[0], k->o, -1);
  for (int b = 1; b < m->nbody; b++) {
    int par = m->body_parent[b];
    bcg_real R[9], p[3], Rl[9];
    bcg_quat2mat(Rl, m->body_quat[b]);
    bcg_m3_mul(R, k->R[par], Rl);
    bcg_m3_mulv(p, k->R[par], m->body_pos[b]);
    bcg_v3_addto(p, k->p[par]);
    for (int jj = 0; jj < m->body_jntnum[b]; jj++) {
      int j = m->body_jntadr[b] + jj;
      int qa = m->jnt_qposadr[j], da = m->jnt_dofadr[j];
      int type = m->jnt_type[j];
      if (type == BCG_JNT_FREE) {
        bcg_real qq[4] = {q[qa + 3], q[qa + 4], q[qa + 5], q[qa + 6]};
        bcg_quat_normalize(qq);
        bcg_quat2mat(R, qq);
        for (int i = 0; i < 3; i++) p[i] = q[qa + i] - k->o[i];
        for (int i = 0; i < 3; i++) {
          bcg_real *s = k->cdof[da + i];
          bcg_sp_zero(s);
          s[3 + i] = 1;
          bcg_v3_copy(k->anchor[da + i], p);
        }
        for (int i = 0; i < 3; i++) {
          bcg_real *s = k->cdof[da + 3 + i];
          s[0] = R[i]; s[1] = R[3 + i]; s[2] = R[6 + i];
          bcg_v3_cross(s + 3, p, s);
          bcg_v3_copy(k->anchor[da + 3 + i], p);
        }
      } else if (type == BCG_JNT_BALL) {
        bcg_real a[3], qq[4] = {q[qa], q[qa + 1], q[qa + 2], q[qa + 3]}, Rq[9], t[3];
        bcg_m3_mulv(a, R, m->jnt_pos[j]);
        bcg_v3_addto(a, p);
        bcg_quat_normalize(qq);
        bcg_quat2mat(Rq, qq);
        bcg_m3_mul(R, R, Rq);
        bcg_m3_mulv(t, R, m->jnt_pos[j]);
        bcg_v3_sub(p, a, t);
        for (int i = 0; i < 3; i++) {
          bcg_real *s = k->cdof[da + i];
          s[0] = R[i]; s[1] = R[3 + i]; s[2] = R[6 + i];
          bcg_v3_cross(s + 3, a, s);
          bcg_v3_copy(k->anchor[da + i], a);
        }
      } else if (type == BCG_JNT_HINGE) {
        bcg_real a[3], w[3], phi[3], Rq[9], t[3];
        bcg_m3_mulv(a, R, m->jnt_pos[j]);
        bcg_v3_addto(a, p);
        bcg_m3_mulv(w, R, m->jnt_axis[j]);
        bcg_v3_scl(phi, m->jnt_axis[j], q[qa] - m->qpos0[qa]);
        bcg_rotvec2mat(Rq, phi);
        bcg_m3_mul(R, R, Rq);
        bcg_m3_mulv(t, R, m->jnt_pos[j]);
        bcg_v3_sub(p, a, t);
        bcg_real *s = k->cdof[da];
        bcg_v3_copy(s, w);
        bcg_v3_cross(s + 3, a, w);
        bcg_v3_copy(k->anchor[da], a);
      } else { /* slide */
        bcg_real w[3], a[3];
        bcg_m3_mulv(w, R, m->jnt_axis[j]);
        bcg_v3_addscl(p, w, q[qa] - m->qpos0[qa]);
        bcg_m3_mulv(a, R, m->jnt_pos[j]);
        bcg_v3_addto(a, p);
        bcg_real *s = k->cdof[da];
        bcg_v3_zero(s);
        bcg_v3_copy(s + 3, w);
        bcg_v3_copy(k->anchor[da], a);
      }
    }
    for (int i = 0; i < 9; i++) k->R[b][i] = R[i];
    bcg_v3_copy(k->p[b], p);
  }
}

/* the bodies' mass properties in world axes about o, from the pose part */
BCG_HD void bcg_kinematics_massprops(const bcg_mdata *m, bcg_kin *k) {
  for (int b = 1; b < m->nbody; b++) {
    const bcg_real *R = k->R[b], *p = k->p[b];
    bcg_real mass = m->body_mass[b], Ri[9], Rw[9], D[9] = {0};
    bcg_quat2mat(Ri, m->body_iquat[b]);
    bcg_m3_mul(Rw, R, Ri);
    D[0] = m->body_inertia[b][0]; D[4] = m->body_inertia[b][1]; D[8] = m->body_inertia[b][2];
    bcg_real T[9];
    bcg_m3_mul(T, Rw, D);
    bcg_m3_mulT(k->Ic[b], T, Rw);
    bcg_real *c = k->com[b];
    bcg_m3_mulv(c, R, m->body_ipos[b]);
    bcg_v3_addto(c, p);
    bcg_v3_scl(k->h[b], c, mass);
    bcg_real cc = bcg_v3_dot(c, c);
    for (int i = 0; i < 3; i++)
      for (int j2 = 0; j2 < 3; j2++)
        k->Ib[b][3 * i + j2] = k->Ic[b][3 * i + j2] + mass * ((i == j2 ? cc : 0) - c[i] * c[j2]);
  }
}

BCG_HD void bcg_kinematics(const bcg_mdata *m, const bcg_real *q, bcg_kin *k) {
  bcg_kinematics_pose(m, q, k);
  bcg_kinematics_massprops(m, k);
}

/* Pose adjoints produced by the body mass properties: given hb (adjoint of
 * h = m c) and Ibb (adjoint of Ib, 3x3), accumulate the pose adjoint (tb, pb)
 * of body b. */
BCG_HD void bcg_massprop_vjp(const bcg_mdata *m, const bcg_kin *k, int b, const bcg_real *hb, const bcg_real *Ibb,
                             bcg_real *tb, bcg_real *pb) {
  bcg_real mass = m->body_mass[b];
  const bcg_real *c = k->com[b];
  bcg_real cb[3];
  bcg_v3_scl(cb, hb, mass);
  if (Ibb) {
    bcg_real tr = Ibb[0] + Ibb[4] + Ibb[8];
    for (int i = 0; i < 3; i++) {
      bcg_real s = 2 * tr * c[i];
      for (int j = 0; j < 3; j++) s -= (Ibb[3 * i + j] + Ibb[3 * j + i]) * c[j];
      cb[i] += mass * s;
    }
    /* Ic = R J R^T: dIc = [d]x Ic - Ic [d]x ; <Ibb, dIc> = tr(M [d]x), M = Ic Ibb^T - Ibb^T Ic */
    const bcg_real *I = k->Ic[b];
    bcg_real M[9];
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) {
        bcg_real s = 0;
        for (int l = 0; l < 3; l++) s += I[3 * i + l] * Ibb[3 * j + l] - Ibb[3 * l + i] * I[3 * l + j];
        M[3 * i + j] = s;
      }
    tb[0] += M[5] - M[7];
    tb[1] += M[6] - M[2];
    tb[2] += M[1] - M[3];
  }
  /* c = p + R ipos */
  bcg_v3_addto(pb, cb);
  bcg_real r[3];
  bcg_v3_sub(r, c, k->p[b]);
  bcg_v3_cross_add(tb, r, cb);
}

/* Kinematic adjoint. Inputs: per-body pose adjoints (tb, pb) (may be NULL for
 * none) and per-dof cdof adjoints (may be NULL). Output: qbar (tangent, nv),
 * accumulated. Scratch: F [BCG_MAX_BODY][6]. */
BCG_HD void bcg_kinematics_vjp(const bcg_mdata *m, const bcg_kin *k, const bcg_real (*tb)[3], const bcg_real (*pb)[3],
                               const bcg_real (*cdofb)[6], bcg_real *qbar, bcg_real (*F)[6]) {
  for (int b = 0; b < m->nbody; b++) {
    bcg_sp_zero(F[b]);
    if (tb) bcg_v3_copy(F[b], tb[b]);
    if (pb) {
      bcg_v3_cross_add(F[b], k->p[b], pb[b]);
      bcg_v3_copy(F[b] + 3, pb[b]);
    }
  }
  for (int b = m->nbody - 1; b >= 1; b--) {
    bcg_real *acc = F[b];
    for (int jj = m->body_jntnum[b] - 1; jj >= 0; jj--) {
      int j = m->body_jntadr[b] + jj;
      int da = m->jnt_dofadr[j];
      int nd = m->jnt_type[j] == BCG_JNT_FREE ? 6 : m->jnt_type[j] == BCG_JNT_BALL ? 3 : 1;
      /* cdof adjoints become pose adjoints of the dof's frame (origin = anchor) */
      if (cdofb) {
        /* free-joint translations are world-fixed (0, e): no pose dependence */
        for (int d = nd - 1; d >= (m->jnt_type[j] == BCG_JNT_FREE ? 3 : 0); d--) {
          const bcg_real *s = k->cdof[da + d], *sb = cdofb[da + d], *a = k->anchor[da + d];
          bcg_real t[3] = {0, 0, 0}, pp[3] = {0, 0, 0};
          /* s = (w, a x w): dw = dth x w, d(a x w) = da x w + a x (dth x w) */
          bcg_v3_cross_add(t, s, sb);             /* w x wbar */
          bcg_real la[3];
          bcg_v3_cross(la, sb + 3, a);            /* lbar x a */
          bcg_v3_cross_add(t, s, la);             /* w x (lbar x a) */
          bcg_v3_cross_add(pp, s, sb + 3);        /* da: w x lbar */
          if (m->jnt_type[j] == BCG_JNT_SLIDE) {
            /* s = (0, w): only the direction moves */
            bcg_v3_zero(t); bcg_v3_zero(pp);
            bcg_v3_cross_add(t, s + 3, sb + 3);   /* w x lbar */
          }
          /* spatial force of a pose adjoint at origin a: (t + a x pp, pp) */
          bcg_v3_addto(acc, t);
          bcg_v3_cross_add(acc, a, pp);
          bcg_v3_addto(acc + 3, pp);
        }
      }
      for (int d = nd - 1; d >= 0; d--) qbar[da + d] += bcg_sp_dot(k->cdof[da + d], acc);
    }
    int par = m->body_parent[b];
    for (int i = 0; i < 6; i++) F[par][i] += acc[i];
  }
}

/* ------------------------------------------------------------------------ */
/* RNEA: tau = H(q) qdd + C(q, qd) qd + g(q)   (gravity when grav != 0)     */
/* ------------------------------------------------------------------------ */

typedef struct bcg_rnea_ws {
  bcg_real V[BCG_MAX_BODY][6];
  bcg_real A[BCG_MAX_BODY][6];
  bcg_real f[BCG_MAX_BODY][6];      /* own force, then subtree total */
  bcg_real cdd[BCG_MAX_DOF][6];     /* cdof_dot */
  bcg_real Vpre[BCG_MAX_DOF][6];    /* velocity a dof's cdof_dot was taken with */
} bcg_rnea_ws;

BCG_HD int bcg_jnt_ndof(int type) { return type == BCG_JNT_FREE ? 6 : type == BCG_JNT_BALL ? 3 : 1; }

BCG_HD void bcg_rnea(const bcg_mdata *m, const bcg_kin *k, const bcg_real *qd, const bcg_real *qdd, int grav,
                     bcg_real *tau, bcg_rnea_ws *w) {
  bcg_sp_zero(w->V[0]);
  bcg_sp_zero(w->A[0]);
  if (grav) for (int i = 0; i < 3; i++) w->A[0][3 + i] = -m->gravity[i];
  for (int b = 1; b < m->nbody; b++) {
    int par = m->body_parent[b];
    bcg_real V[6], A[6];
    for (int i = 0; i < 6; i++) { V[i] = w->V[par][i]; A[i] = w->A[par][i]; }
    for (int jj = 0; jj < m->body_jntnum[b]; jj++) {
      int j = m->body_jntadr[b] + jj, da = m->jnt_dofadr[j], type = m->jnt_type[j];
      int d0 = 0, nd = bcg_jnt_ndof(type);
      if (type == BCG_JNT_FREE) {
        for (int d = 0; d < 3; d++) {
          bcg_sp_zero(w->cdd[da + d]);
          for (int i = 0; i < 6; i++) w->Vpre[da + d][i] = V[i];
        }
        for (int d = 0; d < 3; d++) {
          bcg_sp_addscl(V, k->cdof[da + d], qd[da + d]);
          if (qdd) bcg_sp_addscl(A, k->cdof[da + d], qdd[da + d]);
        }
        d0 = 3;
      }
      /* rotational dofs of a free/ball joint share one velocity; hinges and
       * slides chain */
      bcg_real Vs[6];
      for (int i = 0; i < 6; i++) Vs[i] = V[i];
      for (int d = d0; d < nd; d++) {
        const bcg_real *Vuse = (type == BCG_JNT_FREE || type == BCG_JNT_BALL) ? Vs : V;
        for (int i = 0; i < 6; i++) w->Vpre[da + d][i] = Vuse[i];
        bcg_sp_crossm(w->cdd[da + d], Vuse, k->cdof[da + d]);
        bcg_sp_addscl(V, k->cdof[da + d], qd[da + d]);
        if (qdd) bcg_sp_addscl(A, k->cdof[da + d], qdd[da + d]);
        bcg_sp_addscl(A, w->cdd[da + d], qd[da + d]);
      }
    }
    for (int i = 0; i < 6; i++) { w->V[b][i] = V[i]; w->A[b][i] = A[i]; }
    bcg_real IV[6], t[6];
    bcg_inertia_apply(w->f[b], m->body_mass[b], k->h[b], k->Ib[b], A);
    bcg_inertia_apply(IV, m->body_mass[b], k->h[b], k->Ib[b], V);
    bcg_sp_crossf(t, V, IV);
    for (int i = 0; i < 6; i++) w->f[b][i] += t[i];
  }
  for (int b = m->nbody - 1; b >= 1; b--) {
    for (int jj = 0; jj < m->body_jntnum[b]; jj++) {
      int j = m->body_jntadr[b] + jj, da = m->jnt_dofadr[j], nd = bcg_jnt_ndof(m->jnt_type[j]);
      for (int d = 0; d < nd; d++) tau[da + d] = bcg_sp_dot(k->cdof[da + d], w->f[b]);
    }
    int par = m->body_parent[b];
    if (par > 0) for (int i = 0; i < 6; i++) w->f[par][i] += w->f[b][i];
  }
}

/* Adjoint of bcg_rnea (which must have just run with the same arguments into
 * w). Accumulates: qdbar, qddbar (may be NULL), cdofb, hb, Ibb (per body, 3x3).
 * Scratch: Fb, Vb, Ab [BCG_MAX_BODY][6]. */
typedef struct bcg_rnea_adj {
  bcg_real fb[BCG_MAX_BODY][6];
  bcg_real Vb[BCG_MAX_BODY][6];
  bcg_real Ab[BCG_MAX_BODY][6];
} bcg_rnea_adj;

BCG_HD void bcg_rnea_vjp(const bcg_mdata *m, const bcg_kin *k, const bcg_real *qd, const bcg_real *qdd,
                         const bcg_rnea_ws *w, const bcg_real *taub, bcg_real *qdbar, bcg_real *qddbar,
                         bcg_real (*cdofb)[6], bcg_real (*hb)[3], bcg_real (*Ibb)[9], bcg_rnea_adj *a) {
  /* backward sweep adjoint: subtree totals, root to leaves */
  bcg_sp_zero(a->fb[0]);
  for (int b = 1; b < m->nbody; b++) {
    int par = m->body_parent[b];
    bcg_real fb[6];
    for (int i = 0; i < 6; i++) fb[i] = (par > 0) ? a->fb[par][i] : 0;
    for (int jj = 0; jj < m->body_jntnum[b]; jj++) {
      int j = m->body_jntadr[b] + jj, da = m->jnt_dofadr[j], nd = bcg_jnt_ndof(m->jnt_type[j]);
      for (int d = 0; d < nd; d++) {
        bcg_sp_addscl(fb, k->cdof[da + d], taub[da + d]);
        bcg_sp_addscl(cdofb[da + d], w->f[b], taub[da + d]); /* w->f[b] is the subtree total */
      }
    }
    for (int i = 0; i < 6; i++) a->fb[b][i] = fb[i];
  }
  /* own force f = I A + V xf (I V) */
  for (int b = 1; b < m->nbody; b++) {
    bcg_real mass = m->body_mass[b];
    const bcg_real *V = w->V[b], *A = w->A[b], *fb = a->fb[b];
    bcg_sp_zero(a->Ab[b]);
    bcg_sp_zero(a->Vb[b]);
    bcg_inertia_apply_vjp(mass, k->h[b], k->Ib[b], A, fb, a->Ab[b], hb[b], Ibb[b]);
    bcg_real IV[6], IVb[6] = {0, 0, 0, 0, 0, 0};
    bcg_inertia_apply(IV, mass, k->h[b], k->Ib[b], V);
    bcg_sp_crossf_vjp(V, IV, fb, a->Vb[b], IVb);
    bcg_inertia_apply_vjp(mass, k->h[b], k->Ib[b], V, IVb, a->Vb[b], hb[b], Ibb[b]);
  }
  /* forward sweep adjoint, leaves to root */
  for (int b = m->nbody - 1; b >= 1; b--) {
    bcg_real Vb[6], Ab[6];
    for (int i = 0; i < 6; i++) { Vb[i] = a->Vb[b][i]; Ab[i] = a->Ab[b][i]; }
    for (int jj = m->body_jntnum[b] - 1; jj >= 0; jj--) {
      int j = m->body_jntadr[b] + jj, da = m->jnt_dofadr[j], type = m->jnt_type[j];
      int nd = bcg_jnt_ndof(type), d0 = (type == BCG_JNT_FREE) ? 3 : 0;
      int shared = (type == BCG_JNT_FREE || type == BCG_JNT_BALL);
      bcg_real Vsb[6] = {0, 0, 0, 0, 0, 0}; /* adjoint of the shared velocity */
      for (int d = nd - 1; d >= d0; d--) {
        const bcg_real *s = k->cdof[da + d];
        /* A += s qdd + cdd qd */
        if (qdd) bcg_sp_addscl(cdofb[da + d], Ab, qdd[da + d]);
        if (qddbar) qddbar[da + d] += bcg_sp_dot(s, Ab);
        bcg_real cddb[6];
        for (int i = 0; i < 6; i++) cddb[i] = Ab[i] * qd[da + d];
        qdbar[da + d] += bcg_sp_dot(w->cdd[da + d], Ab);
        /* V += s qd */
        bcg_sp_addscl(cdofb[da + d], Vb, qd[da + d]);
        qdbar[da + d] += bcg_sp_dot(s, Vb);
        /* cdd = Vpre xm s */
        bcg_sp_crossm_vjp(w->Vpre[da + d], s, cddb, shared ? Vsb : Vb, cdofb[da + d]);
      }
      if (shared) for (int i = 0; i < 6; i++) Vb[i] += Vsb[i];
      if (type == BCG_JNT_FREE) {
        for (int d = 2; d >= 0; d--) {
          const bcg_real *s = k->cdof[da + d];
          if (qdd) bcg_sp_addscl(cdofb[da + d], Ab, qdd[da + d]);
          if (qddbar) qddbar[da + d] += bcg_sp_dot(s, Ab);
          bcg_sp_addscl(cdofb[da + d], Vb, qd[da + d]);
          qdbar[da + d] += bcg_sp_dot(s, Vb);
        }
      }
    }
    int par = m->body_parent[b];
    if (par > 0)
      for (int i = 0; i < 6; i++) { a->Vb[par][i] += Vb[i]; a->Ab[par][i] += Ab[i]; }
  }
}

/* ------------------------------------------------------------------------ */
/* CRBA: H(q) (without armature), lower triangle + mirror                   */
/* ------------------------------------------------------------------------ */

typedef struct bcg_crba_ws {
  bcg_real cm[BCG_MAX_BODY];
  bcg_real ch[BCG_MAX_BODY][3];
  bcg_real cI[BCG_MAX_BODY][9];
} bcg_crba_ws;

BCG_HD void bcg_crba(const bcg_mdata *m, const bcg_kin *k, bcg_real *H, bcg_crba_ws *w) {
  int nv = m->nv;
  for (int b = 0; b < m->nbody; b++) {
    w->cm[b] = b ? m->body_mass[b] : 0;
    for (int i = 0; i < 3; i++) w->ch[b][i] = b ? k->h[b][i] : 0;
    for (int i = 0; i < 9; i++) w->cI[b][i] = b ? k->Ib[b][i] : 0;
  }
  for (int b = m->nbody - 1; b >= 1; b--) {
    int par = m->body_parent[b];
    if (par <= 0) continue;
    w->cm[par] += w->cm[b];
    for (int i = 0; i < 3; i++) w->ch[par][i] += w->ch[b][i];
    for (int i = 0; i < 9; i++) w->cI[par][i] += w->cI[b][i];
  }
  for (int i = 0; i < nv * nv; i++) H[i] = 0;
  for (int kk = 0; kk < nv; kk++) {
    int b = m->dof_body[kk];
    bcg_real F[6];
    bcg_inertia_apply(F, w->cm[b], w->ch[b], w->cI[b], k->cdof[kk]);
    for (int j = kk; j >= 0; j = m->dof_parent[j]) {
      bcg_real v = bcg_sp_dot(k->cdof[j], F);
      H[kk * nv + j] = v;
      H[j * nv + kk] = v;
    }
  }
}

/* Adjoint of H = CRBA(q): accumulates cdofb, hb, Ibb given Hbar (full nv x nv,
 * need not be symmetric). */
BCG_HD void bcg_crba_vjp(const bcg_mdata *m, const bcg_kin *k, const bcg_crba_ws *w, const bcg_real *Hb,
                         bcg_real (*cdofb)[6], bcg_real (*hb)[3], bcg_real (*Ibb)[9], bcg_crba_ws *cb) {
  int nv = m->nv;
  for (int b = 0; b < m->nbody; b++) {
    for (int i = 0; i < 3; i++) cb->ch[b][i] = 0;
    for (int i = 0; i < 9; i++) cb->cI[b][i] = 0;
  }
  for (int kk = 0; kk < nv; kk++) {
    int b = m->dof_body[kk];
    bcg_real F[6], Fb[6] = {0, 0, 0, 0, 0, 0};
    bcg_inertia_apply(F, w->cm[b], w->ch[b], w->cI[b], k->cdof[kk]);
    for (int j = kk; j >= 0; j = m->dof_parent[j]) {
      bcg_real g = (j == kk) ? Hb[kk * nv + kk] : Hb[kk * nv + j] + Hb[j * nv + kk];
      bcg_sp_addscl(cdofb[j], F, g);
      bcg_sp_addscl(Fb, k->cdof[j], g);
    }
    bcg_inertia_apply_vjp(w->cm[b], w->ch[b], w->cI[b], k->cdof[kk], Fb, cdofb[kk], cb->ch[b], cb->cI[b]);
  }
  /* composite adjoint: each body receives the sum over its ancestors-or-self */
  for (int b = 1; b < m->nbody; b++) {
    int par = m->body_parent[b];
    if (par > 0) {
      for (int i = 0; i < 3; i++) cb->ch[b][i] += cb->ch[par][i];
      for (int i = 0; i < 9; i++) cb->cI[b][i] += cb->cI[par][i];
    }
    for (int i = 0; i < 3; i++) hb[b][i] += cb->ch[b][i];
    for (int i = 0; i < 9; i++) Ibb[b][i] += cb->cI[b][i];
  }
}

/* ------------------------------------------------------------------------ */
/* Dense Cholesky of a small SPD matrix (in place, lower), and solves        */
/* ------------------------------------------------------------------------ */

BCG_HD int bcg_chol(bcg_real *L, int n) {
  for (int j = 0; j < n; j++) {
    bcg_real d = L[j * n + j];
    for (int l = 0; l < j; l++) d -= L[j * n + l] * L[j * n + l];
    if (!(d > 0)) return -1;
    d = sqrt(d);
    L[j * n + j] = d;
    bcg_real inv = 1 / d;
    for (int i = j + 1; i < n; i++) {
      bcg_real s = L[i * n + j];
      for (int l = 0; l < j; l++) s -= L[i * n + l] * L[j * n + l];
      L[i * n + j] = s * inv;
    }
    for (int i = 0; i < j; i++) L[i * n + j] = 0;
  }
  return 0;
}
/* x = (L L^T)^-1 b, in place */
BCG_HD void bcg_chol_solve(const bcg_real *L, int n, bcg_real *x) {
  for (int i = 0; i < n; i++) {
    bcg_real s = x[i];
    for (int l = 0; l < i; l++) s -= L[i * n + l] * x[l];
    x[i] = s / L[i * n + i];
  }
  for (int i = n - 1; i >= 0; i--) {
    bcg_real s = x[i];
    for (int l = i + 1; l < n; l++) s -= L[l * n + i] * x[l];
    x[i] = s / L[i * n + i];
  }
}

/* ------------------------------------------------------------------------ */
/* Tree-sparse L^T D L factorisation of the joint-space inertia matrix         */
/* ------------------------------------------------------------------------ */

/* H = L^T D L for the mass matrix of a kinematic tree (Featherstone, "Rigid
 * Body Dynamics Algorithms", section 6.5, the factorisation MuJoCo's
 * mj_factorM uses): L unit lower triangular with L[i][j] != 0 only where
 * dof j is an ancestor of dof i (parent[], -1 at the root, parent[i] < i),
 * so nothing fills in and the work is O(n d^2) for a tree of depth d, where
 * a dense Cholesky is O(n^3). In place on the dense n x n matrix H (row
 * major, the lower triangle read): afterwards H's strictly lower ancestor
 * entries hold L and its diagonal D; every other entry is left as it was and
 * is never read. -1 when a pivot D_k is not positive (H not SPD). */
BCG_HD int bcg_ltdl(bcg_real *H, int n, const int *parent) {
  for (int k = n - 1; k >= 0; k--) {
    const bcg_real dk = H[k * n + k];
    if (!(dk > 0)) return -1;
    /* k's ancestors, nearest first: those of the t-th are the rest of the
     * list, so the inner loop reads indices instead of chasing parent[] */
    int anc[BCG_MAX_DOF], len = 0;
    for (int i = parent[k]; i >= 0; i = parent[i]) anc[len++] = i;
    const bcg_real *Hk = H + k * n;
    for (int t = 0; t < len; t++) {
      const int i = anc[t];
      const bcg_real a = Hk[i] / dk;
      bcg_real *Hi = H + i * n;
      for (int u = t; u < len; u++) Hi[anc[u]] -= a * Hk[anc[u]];
      H[k * n + i] = a;
    }
  }
  return 0;
}

/* Adjoint of bcg_ltdl. LD: the factor it left; W (row major n x n): on
 * entry the adjoints of its outputs, L's at (k, j) for j an ancestor of k
 * and D's on the diagonal; on return the adjoint of the input H's lower
 * triangle at the same entries (the only ones bcg_ltdl reads). No other entry
 * is read or written. The steps of bcg_ltdl in reverse, root first; step k's
 * inputs, row k's values before the division, are recovered as L[k][j] D[k]
 * (O(n d^2), as the factorisation). */
BCG_HD void bcg_ltdl_vjp(const bcg_real *LD, int n, const int *parent, bcg_real *W) {
  for (int k = 0; k < n; k++) {
    int anc[BCG_MAX_DOF], len = 0;
    for (int i = parent[k]; i >= 0; i = parent[i]) anc[len++] = i;
    if (!len) continue;
    const bcg_real dk = LD[k * n + k];
    const bcg_real *Lk = LD + k * n;
    bcg_real hk[BCG_MAX_DOF], ab[BCG_MAX_DOF], hb[BCG_MAX_DOF];
    for (int t = 0; t < len; t++) {
      hk[t] = Lk[anc[t]] * dk;
      ab[t] = W[k * n + anc[t]];
      hb[t] = 0;
    }
    /* H[i][anc[u]] -= a_t Hk[anc[u]] for i = anc[t], u >= t */
    for (int t = 0; t < len; t++) {
      const bcg_real at = Lk[anc[t]];
      const bcg_real *Wi = W + anc[t] * n;
      bcg_real s = ab[t];
      for (int u = t; u < len; u++) {
        const bcg_real wb = Wi[anc[u]];
        s -= wb * hk[u];
        hb[u] -= wb * at;
      }
      ab[t] = s;
    }
    /* a_t = Hk[anc[t]] / dk */
    bcg_real db = 0;
    for (int t = 0; t < len; t++) {
      const bcg_real q = ab[t] / dk;
      W[k * n + anc[t]] = hb[t] + q;
      db -= q * Lk[anc[t]];
    }
    W[k * n + k] += db;
  }
}

/* x = H^-1 x = L^-1 D^-1 L^-T x for the factor of bcg_ltdl, in place,
 * O(n d). A zero of x skips its ancestor chain in the first pass (exactly:
 * nothing is subtracted), so a right-hand side supported on one branch,
 * such as a contact Jacobian's row, costs its chain there. */
BCG_HD void bcg_ltdl_solve(const bcg_real *LD, int n, const int *parent, bcg_real *x) {
  for (int k = n - 1; k >= 0; k--) {
    const bcg_real xk = x[k];
    if (xk == 0) continue;
    for (int j = parent[k]; j >= 0; j = parent[j]) x[j] -= LD[k * n + j] * xk;
  }
  for (int k = 0; k < n; k++) x[k] /= LD[k * n + k];
  for (int k = 0; k < n; k++) {
    bcg_real s = x[k];
    for (int j = parent[k]; j >= 0; j = parent[j]) s -= LD[k * n + j] * x[j];
    x[k] = s;
  }
}

/* ------------------------------------------------------------------------ */
/* Position integration q' = q (+) h u and its adjoint                       */
/* ------------------------------------------------------------------------ */

BCG_HD void bcg_integrate(const bcg_mdata *m, const bcg_real *q, const bcg_real *u, bcg_real h, bcg_real *qo) {
  for (int j = 0; j < m->njnt; j++) {
    int qa = m->jnt_qposadr[j], da = m->jnt_dofadr[j], type = m->jnt_type[j];
    if (type == BCG_JNT_FREE || type == BCG_JNT_BALL) {
      if (type == BCG_JNT_FREE) {
        for (int i = 0; i < 3; i++) qo[qa + i] = q[qa + i] + h * u[da + i];
        qa += 3; da += 3;
      }
      bcg_real phi[3] = {h * u[da], h * u[da + 1], h * u[da + 2]}, e[4], r[4];
      bcg_quat_exp(e, phi);
      bcg_real q0[4] = {q[qa], q[qa + 1], q[qa + 2], q[qa + 3]};
      bcg_quat_normalize(q0);
      bcg_quat_mul(r, q0, e);
      bcg_quat_normalize(r);
      for (int i = 0; i < 4; i++) qo[qa + i] = r[i];
    } else {
      qo[qa] = q[qa] + h * u[da];
    }
  }
}

/* Given qobar (tangent at qo), write qbar (tangent at q) and accumulate ubar. */
BCG_HD void bcg_integrate_vjp(const bcg_mdata *m, const bcg_real *u, bcg_real h, const bcg_real *qobar, bcg_real *qbar,
                              bcg_real *ubar) {
  for (int j = 0; j < m->njnt; j++) {
    int da = m->jnt_dofadr[j], type = m->jnt_type[j];
    if (type == BCG_JNT_FREE || type == BCG_JNT_BALL) {
      if (type == BCG_JNT_FREE) {
        for (int i = 0; i < 3; i++) { qbar[da + i] = qobar[da + i]; ubar[da + i] += h * qobar[da + i]; }
        da += 3;
      }
      bcg_real phi[3] = {h * u[da], h * u[da + 1], h * u[da + 2]}, E[9], J[9], t[3];
      /* delta_o = E^T delta + h Jr(phi) du  =>  deltabar = E deltaobar, ubar += h Jr^T deltaobar */
      bcg_rotvec2mat(E, phi);
      bcg_m3_mulv(t, E, qobar + da);
      bcg_v3_copy(qbar + da, t);
      bcg_so3_jr(J, phi);
      bcg_m3_mulTv(t, J, qobar + da);
      bcg_v3_addscl(ubar + da, t, h);
    } else {
      qbar[da] = qobar[da];
      ubar[da] += h * qobar[da];
    }
  }
}

/* q_b = q_a (+) delta for a tangent displacement (finite differences, noise) */
BCG_HD void bcg_qadd(const bcg_mdata *m, const bcg_real *q, const bcg_real *delta, bcg_real *qo) {
  bcg_integrate(m, q, delta, 1, qo);
}

#endif
