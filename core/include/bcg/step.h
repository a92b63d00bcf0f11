/* bcg/step.h - the Moreau midpoint substep of docs/design.md section 4.2, per
 * environment, and its exact adjoint (BCG_HD: one source for CPU and GPU).
 *
 *   q_M    = q_S (+) dt/2 u_S
 *   H, b   = CRBA(q_M) + armature, RNEA(q_M, u_S, 0)
 *   tau    = actuation(q_M, u_S, a) + passive(q_M, u_S) + limits(q_M, u_S)
 *   u_free = u_S + dt H^-1 (tau - b)
 *   contacts at q_M: gap, J, v0 = J u_S, c = J u_free, G = J H^-1 J^T
 *   Lam    = contact plugin(...)                 (between the two halves)
 *   u_E    = u_free + H^-1 J^T Lam
 *   q_E    = q_M (+) dt/2 u_E
 *
 * The substep is split in two halves around the batched contact plugin:
 * bcg_substep_pre() and bcg_substep_post(). Their adjoints run in the
 * opposite order around the plugin's VJP and recompute everything from the
 * saved substep input (q_S, u_S, a): nothing else is read.
 *
 * Contact frame rows are (normal = +z, t1 = +x, t2 = +y): the ground is the
 * plane z = floor_z. */
#ifndef BCG_STEP_H
#define BCG_STEP_H

#include "bcg/dyn.h"

/* BCG_MAX_CONTACT, the active contacts per environment: bcg/dims.h (a build option) */

enum { BCG_ACTUATION_MOTOR = 0, BCG_ACTUATION_PD = 1 };

typedef struct bcg_simparams {
  bcg_real dt;       /* substep length */
  int substeps;    /* substeps per control step */
  int actuation;   /* BCG_ACTUATION_MOTOR | BCG_ACTUATION_PD */
  bcg_real kp[BCG_MAX_ACT], kd[BCG_MAX_ACT]; /* PD gains per actuator */
  bcg_real tau_max[BCG_MAX_ACT];             /* PD torque limit per actuator (<= 0: none) */
  bcg_real action_scale;                     /* PD: target = qdef + scale * a */
  bcg_real qdef[BCG_MAX_Q];                  /* PD default pose */
  bcg_real lim_k, lim_width, lim_d;          /* joint-limit penalty */
  bcg_real margin;                           /* contact activation margin (m) */
  bcg_real mu;                               /* friction override, < 0: the model's */
  bcg_real floss_v;                          /* dry friction smoothing velocity (tanh scale) */
  int ncmax;                               /* active contacts kept per environment */
  int need_G;                              /* contact plugin wants the Delassus matrix */
  int gravity;                             /* 1: on */
  int G_prezeroed;                         /* the caller zeroed the G batch (GPU: one memset) */
} bcg_simparams;

/* Per-environment workspace of one substep (forward and recompute). */
typedef struct bcg_stepws {
  bcg_real qM[BCG_MAX_Q];
  bcg_kin k;
  bcg_rnea_ws rw;
  bcg_crba_ws cw;
  bcg_real L[BCG_MAX_DOF * BCG_MAX_DOF]; /* Cholesky factor of H, stride nv */
  bcg_real b[BCG_MAX_DOF], tau[BCG_MAX_DOF], y[BCG_MAX_DOF], ufree[BCG_MAX_DOF];
  bcg_real x[BCG_MAX_DOF]; /* H^-1 J^T Lam */
  bcg_real uE[BCG_MAX_DOF];
  int nact;
  int cid[BCG_MAX_CONTACT];                 /* contact point slot of each active contact */
  bcg_real cpos[BCG_MAX_CONTACT][3];          /* contact point relative to o */
  bcg_real J[BCG_MAX_CONTACT * 3][BCG_MAX_DOF]; /* rows (n, t1, t2) per contact */
  bcg_real K[BCG_MAX_CONTACT * 3][BCG_MAX_DOF]; /* if need_G or G is formed: the rows of Y = L^-T J^T
                                                 (H = L^T D L, bcg_ltdl), read by bcg_substep_pre_vjp */
  int status;                               /* 0 ok, else a BCG_STEP_* error */
} bcg_stepws;

enum { BCG_STEP_OK = 0, BCG_STEP_NOT_SPD = 1, BCG_STEP_NONFINITE = 2 };

/* Adjoint workspace. */
typedef struct bcg_stepadj {
  bcg_real Hb[BCG_MAX_DOF * BCG_MAX_DOF];
  bcg_real Jb[BCG_MAX_CONTACT * 3][BCG_MAX_DOF];
  bcg_real ufreeb[BCG_MAX_DOF], qMb[BCG_MAX_DOF];
  bcg_real cdofb[BCG_MAX_DOF][6], hb[BCG_MAX_BODY][3], Ibb[BCG_MAX_BODY][9];
  bcg_real tb[BCG_MAX_BODY][3], pb[BCG_MAX_BODY][3], F[BCG_MAX_BODY][6];
  bcg_rnea_adj ra;
  bcg_crba_ws cb;
} bcg_stepadj;

/* The first pass of bcg_ltdl_solve (dyn.h) on nrhs right-hand sides at once,
 * the rows of X (stride BCG_MAX_DOF), at most 3 BCG_MAX_CONTACT of them: L^-T
 * (X becomes Y = L^-T X: a row supported on one chain of dofs stays on it).
 * On the CPU on a transposed copy, so that the inner loop runs over
 * independent rows (vectorised); on the GPU one row after the other. The two
 * agree to the sign of a zero (the one-row pass skips the chain of a zero
 * entry). */
BCG_HD void bcg_ltdl_rows_half(const bcg_real *LD, int n, const int *parent, bcg_real (*X)[BCG_MAX_DOF], int nrhs) {
#ifdef __CUDA_ARCH__
  for (int r = 0; r < nrhs; r++)
    for (int k = n - 1; k >= 0; k--) {
      const bcg_real xk = X[r][k];
      if (xk == 0) continue;
      for (int j = parent[k]; j >= 0; j = parent[j]) X[r][j] -= LD[k * n + j] * xk;
    }
#else
  /* A row's nonzeros lie on one path to the root (a contact Jacobian's row:
   * its body's chain of dofs), so the row's deepest nonzero k0 names the
   * path (every other nonzero is an ancestor of k0: parent[i] < i). Runs of
   * consecutive rows whose paths nest (the three rows of a contact, and the
   * contacts of one body) are solved together along the deepest path only,
   * transposed so that the inner loop runs over the run's rows: each entry
   * takes the same updates in the same order as over all dofs, less the
   * products with exact zeros off the path (they subtracted l * 0), which
   * can change only the sign of a zero, as in the one-row pass. */
  enum { R = 3 * BCG_MAX_CONTACT };
  bcg_real T[BCG_MAX_DOF][R];
  int k0[R], path[BCG_MAX_DOF];
  for (int r = 0; r < nrhs; r++) {
    int k = n - 1;
    while (k >= 0 && X[r][k] == 0) k--;
    k0[r] = k;
  }
  for (int r0 = 0; r0 < nrhs;) {
    /* the run r0 .. r1-1: the deepest path so far is kd's; a row joins when
     * its k0 is on that path (-1: an all-zero row) or kd is on its path */
    int kd = k0[r0], r1 = r0 + 1;
    for (; r1 < nrhs; r1++) {
      const int kr = k0[r1];
      int a = kr, b = kd, on = 0;
      if (kr < 0 || kd < 0) on = 1;
      else if (kr <= kd) { while (b > kr) b = parent[b]; on = b == kr; }
      else { while (a > kd) a = parent[a]; on = a == kd; }
      if (!on) break;
      if (kr > kd) kd = kr;
    }
    const int nr = r1 - r0, nr4 = (nr + 3) & ~3; /* padded to blocks of 4 rows (zeros) */
    int len = 0;
    for (int k = kd; k >= 0; k = parent[k]) path[len++] = k; /* deepest first */
    for (int t = 0; t < len; t++) {
      for (int r = 0; r < nr; r++) T[t][r] = X[r0 + r][path[t]];
      for (int r = nr; r < nr4; r++) T[t][r] = 0;
    }
    /* entry u of the path, deepest first, in 4 rows at a time held in
     * registers: it subtracts l_t T[t] for t < u in increasing t, the order
     * of the updates X[j] -= L_kj X[k] of the one-row pass (k deepest first) */
    for (int u = 1; u < len; u++) {
      const int j = path[u];
      for (int rb = 0; rb < nr4; rb += 4) {
        bcg_real acc[4] = {T[u][rb], T[u][rb + 1], T[u][rb + 2], T[u][rb + 3]};
        for (int t = 0; t < u; t++) {
          const bcg_real l = LD[path[t] * n + j], *Tt = T[t] + rb;
          for (int r = 0; r < 4; r++) acc[r] -= l * Tt[r];
        }
        for (int r = 0; r < 4; r++) T[u][rb + r] = acc[r];
      }
    }
    for (int t = 0; t < len; t++)
      for (int r = 0; r < nr; r++) X[r0 + r][path[t]] = T[t][r];
    r0 = r1;
  }
#endif
}

/* ---- actuation, passive forces, joint limits --------------------------- */

BCG_HD bcg_real bcg_softplus(bcg_real x) { return x > 30 ? x : (x < -30 ? exp(x) : log1p(exp(x))); }
BCG_HD bcg_real bcg_sigmoid(bcg_real x) {
  if (x >= 0) { bcg_real e = exp(-x); return 1 / (1 + e); }
  bcg_real e = exp(x);
  return e / (1 + e);
}
/* bcg_softplus(x), and bcg_sigmoid(x) into *sg: the same values, with one
 * exp(x) for both where x < 0 (a joint inside its range) */
BCG_HD bcg_real bcg_softplus_sigmoid(bcg_real x, bcg_real *sg) {
  if (x >= 0) {
    *sg = bcg_sigmoid(x);
    return bcg_softplus(x);
  }
  const bcg_real e = exp(x);
  *sg = e / (1 + e);
  return x < -30 ? e : log1p(e);
}

/* Torque limit of actuator i in bcg's PD mode (<= 0: none): the force
 * range when the MJCF limits the force, else for a motor (no bias) the control
 * range times its gain, times the gear. */
BCG_HD bcg_real bcg_act_torque_limit(const bcg_mdata *m, int i) {
  bcg_real g = fabs(m->act_gear[i]);
  if (m->act_forcelimited[i]) return g * fmax(fabs(m->act_forcerange[i][0]), fabs(m->act_forcerange[i][1]));
  int motor = m->act_bias[i][0] == 0 && m->act_bias[i][1] == 0 && m->act_bias[i][2] == 0;
  if (motor && m->act_ctrllimited[i])
    return g * fabs(m->act_gain[i]) * fmax(fabs(m->act_ctrlrange[i][0]), fabs(m->act_ctrlrange[i][1]));
  return 0;
}

/* Actuator i's force before the gear (MuJoCo's affine law, model.h) at
 * joint position/velocity q, u of its dof; *sat = 1 where a clamp of the
 * control or the force holds it (zero derivative there). */
BCG_HD bcg_real bcg_act_force(const bcg_mdata *m, int i, bcg_real ai, bcg_real q, bcg_real u, int *ctrl_sat, int *f_sat) {
  *ctrl_sat = 0, *f_sat = 0;
  if (m->act_ctrllimited[i]) {
    if (ai < m->act_ctrlrange[i][0]) ai = m->act_ctrlrange[i][0], *ctrl_sat = 1;
    else if (ai > m->act_ctrlrange[i][1]) ai = m->act_ctrlrange[i][1], *ctrl_sat = 1;
  }
  bcg_real g = m->act_gear[i];
  bcg_real f = m->act_gain[i] * ai + m->act_bias[i][0] + m->act_bias[i][1] * g * q + m->act_bias[i][2] * g * u;
  if (m->act_forcelimited[i]) {
    if (f < m->act_forcerange[i][0]) f = m->act_forcerange[i][0], *f_sat = 1;
    else if (f > m->act_forcerange[i][1]) f = m->act_forcerange[i][1], *f_sat = 1;
  }
  return f;
}

/* Generalised actuator forces (tact, nv, zeroed here) before the per-dof
 * actuatorfrcrange clamp: the MJCF's actuators (motor mode) or bcg's PD law. */
BCG_HD void bcg_actuator_forces(const bcg_mdata *m, const bcg_simparams *sp, const bcg_real *q, const bcg_real *u,
                                const bcg_real *a, bcg_real *tact) {
  for (int d = 0; d < m->nv; d++) tact[d] = 0;
  for (int i = 0; i < m->nu; i++) {
    int d = m->act_dof[i];
    int qa = m->jnt_qposadr[m->act_jnt[i]];
    if (sp->actuation == BCG_ACTUATION_MOTOR) {
      int cs, fs;
      tact[d] += m->act_gear[i] * bcg_act_force(m, i, a[i], q[qa], u[d], &cs, &fs);
    } else {
      bcg_real t = sp->kp[i] * (sp->qdef[qa] + sp->action_scale * a[i] - q[qa]) - sp->kd[i] * u[d];
      if (sp->tau_max[i] > 0) t = fmin(fmax(t, -sp->tau_max[i]), sp->tau_max[i]);
      tact[d] += t;
    }
  }
}

/* The actuators' generalised force (MuJoCo's qfrc_actuator): tact with the
 * per-dof actuatorfrcrange clamp. */
BCG_HD void bcg_actuator_qfrc(const bcg_mdata *m, const bcg_simparams *sp, const bcg_real *q, const bcg_real *u,
                              const bcg_real *a, bcg_real *tact) {
  bcg_actuator_forces(m, sp, q, u, a, tact);
  for (int d = 0; d < m->nv; d++)
    if (m->dof_actfrclimited[d]) tact[d] = fmin(fmax(tact[d], m->dof_actfrcrange[d][0]), m->dof_actfrcrange[d][1]);
}

/* tau += generalised forces of actuators, springs, damping, dry friction and
 * limits */
BCG_HD void bcg_joint_forces(const bcg_mdata *m, const bcg_simparams *sp, const bcg_real *q, const bcg_real *u,
                             const bcg_real *a, bcg_real *tau) {
  for (int j = 0; j < m->njnt; j++) {
    int type = m->jnt_type[j];
    if (type != BCG_JNT_HINGE && type != BCG_JNT_SLIDE) continue;
    int qa = m->jnt_qposadr[j], da = m->jnt_dofadr[j];
    tau[da] -= m->jnt_stiffness[j] * (q[qa] - m->qpos_spring[qa]);
    if (m->jnt_limited[j] && sp->lim_k > 0) {
      bcg_real w = sp->lim_width;
      bcg_real xl = (m->jnt_range[j][0] - q[qa]) / w, xh = (q[qa] - m->jnt_range[j][1]) / w;
      bcg_real sgl, sgh;
      const bcg_real spl = bcg_softplus_sigmoid(xl, &sgl), sph = bcg_softplus_sigmoid(xh, &sgh);
      tau[da] += sp->lim_k * w * (spl - sph);
      tau[da] -= sp->lim_d * u[da] * (sgl + sgh);
    }
  }
  for (int d = 0; d < m->nv; d++) {
    tau[d] -= m->dof_damping[d] * u[d];
    if (m->dof_frictionloss[d] > 0) tau[d] -= m->dof_frictionloss[d] * tanh(u[d] / sp->floss_v);
  }
  bcg_real tact[BCG_MAX_DOF];
  bcg_actuator_qfrc(m, sp, q, u, a, tact);
  for (int d = 0; d < m->nv; d++) tau[d] += tact[d];
}

/* Adjoint of bcg_joint_forces: given taub, accumulate qb (tangent), ub, ab. */
BCG_HD void bcg_joint_forces_vjp(const bcg_mdata *m, const bcg_simparams *sp, const bcg_real *q, const bcg_real *u,
                                 const bcg_real *a, const bcg_real *taub, bcg_real *qb, bcg_real *ub, bcg_real *ab) {
  for (int j = 0; j < m->njnt; j++) {
    int type = m->jnt_type[j];
    if (type != BCG_JNT_HINGE && type != BCG_JNT_SLIDE) continue;
    int qa = m->jnt_qposadr[j], da = m->jnt_dofadr[j];
    bcg_real tb = taub[da];
    qb[da] -= m->jnt_stiffness[j] * tb;
    if (m->jnt_limited[j] && sp->lim_k > 0) {
      bcg_real w = sp->lim_width;
      bcg_real xl = (m->jnt_range[j][0] - q[qa]) / w, xh = (q[qa] - m->jnt_range[j][1]) / w;
      bcg_real sl = bcg_sigmoid(xl), sh = bcg_sigmoid(xh);
      /* d softplus(x)/dx = sigmoid(x); dx_l/dq = -1/w, dx_h/dq = 1/w */
      qb[da] += tb * sp->lim_k * (-sl - sh);
      /* d sigmoid = s (1 - s) */
      qb[da] -= tb * sp->lim_d * u[da] * (sl * (1 - sl) * (-1 / w) + sh * (1 - sh) * (1 / w));
      ub[da] -= tb * sp->lim_d * (sl + sh);
    }
  }
  for (int d = 0; d < m->nv; d++) {
    ub[d] -= m->dof_damping[d] * taub[d];
    if (m->dof_frictionloss[d] > 0) {
      bcg_real th = tanh(u[d] / sp->floss_v);
      ub[d] -= taub[d] * m->dof_frictionloss[d] * (1 - th * th) / sp->floss_v;
    }
  }
  /* the actuatorfrcrange clamp passes nothing where it holds */
  bcg_real tact[BCG_MAX_DOF], tactb[BCG_MAX_DOF];
  bcg_actuator_forces(m, sp, q, u, a, tact);
  for (int d = 0; d < m->nv; d++)
    tactb[d] = m->dof_actfrclimited[d] && (tact[d] < m->dof_actfrcrange[d][0] || tact[d] > m->dof_actfrcrange[d][1])
                   ? 0
                   : taub[d];
  for (int i = 0; i < m->nu; i++) {
    int d = m->act_dof[i];
    int qa = m->jnt_qposadr[m->act_jnt[i]];
    bcg_real tb = tactb[d], ai = a[i];
    if (sp->actuation == BCG_ACTUATION_MOTOR) {
      int cs, fs;
      bcg_act_force(m, i, ai, q[qa], u[d], &cs, &fs);
      if (fs) continue;
      bcg_real g = m->act_gear[i], fb = g * tb;
      if (!cs) ab[i] += m->act_gain[i] * fb;
      qb[d] += m->act_bias[i][1] * g * fb;
      ub[d] += m->act_bias[i][2] * g * fb;
    } else {
      bcg_real t = sp->kp[i] * (sp->qdef[qa] + sp->action_scale * ai - q[qa]) - sp->kd[i] * u[d];
      if (sp->tau_max[i] > 0 && (t > sp->tau_max[i] || t < -sp->tau_max[i])) continue;
      ab[i] += sp->kp[i] * sp->action_scale * tb;
      qb[d] -= sp->kp[i] * tb;
      ub[d] -= sp->kd[i] * tb;
    }
  }
}

/* Joint damping, PD gains and the MJCF actuators' position and velocity
 * feedback are integrated linearly implicitly, as MuJoCo's Euler integrator
 * treats joint damping: the velocity update solves
 * (H + dt (D + Kd) + dt^2/2 Kp) du = dt (tau(q_M, u_S) - b), i.e. the damping
 * and PD forces are evaluated at the end of the substep to first order
 * (q_E = q_M + dt/2 u_E for the position gain). A constant diagonal, so the
 * adjoint is unchanged apart from using the same matrix. Without it, stiff PD
 * gains acting on a foot held by the floor (a small effective inertia) go
 * unstable at dt = 5 ms. The smoothed dry friction -f tanh(u / v) adds its
 * slope at u_S, dt f / v sech^2(u_S / v) (Rosenbrock-Euler; its dependence on
 * u_S is in the adjoint: bcg_implicit_diag_vjp). Writes the diagonal's
 * entries of all nv dofs into v. */
BCG_HD void bcg_implicit_diag(const bcg_mdata *m, const bcg_simparams *sp, const bcg_real *uS, bcg_real *v) {
  const bcg_real h = sp->dt;
  for (int d = 0; d < m->nv; d++) v[d] = h * m->dof_damping[d];
  /* one pass over the actuators, each adding to its dof in actuator order */
  for (int i = 0; i < m->nu; i++) {
    const int d = m->act_dof[i];
    if (d < 0 || d >= m->nv) continue;
    if (sp->actuation == BCG_ACTUATION_PD) {
      v[d] += h * sp->kd[i] + (bcg_real)0.5 * h * h * sp->kp[i];
    } else {
      bcg_real g2 = m->act_gear[i] * m->act_gear[i];
      if (m->act_bias[i][2] < 0) v[d] -= h * g2 * m->act_bias[i][2];
      if (m->act_bias[i][1] < 0) v[d] -= (bcg_real)0.5 * h * h * g2 * m->act_bias[i][1];
    }
  }
  for (int d = 0; d < m->nv; d++)
    if (m->dof_frictionloss[d] > 0) {
      bcg_real th = tanh(uS[d] / sp->floss_v);
      v[d] += h * m->dof_frictionloss[d] / sp->floss_v * (1 - th * th);
    }
}

/* uSb += d(implicit diagonal)/d uS * Hb[d][d] (only the dry friction term
 * depends on the state) */
BCG_HD void bcg_implicit_diag_vjp(const bcg_mdata *m, const bcg_simparams *sp, const bcg_real *uS, const bcg_real *Hb,
                                  bcg_real *uSb) {
  int nv = m->nv;
  for (int d = 0; d < nv; d++) {
    if (!(m->dof_frictionloss[d] > 0)) continue;
    bcg_real v = sp->floss_v, th = tanh(uS[d] / v);
    /* d/du sech^2(u/v) = -2/v sech^2 tanh */
    uSb[d] += Hb[d * nv + d] * sp->dt * m->dof_frictionloss[d] / v * (-2 / v) * (1 - th * th) * th;
  }
}

/* ---- contacts ------------------------------------------------------------ */

/* World point of contact slot i (lowest point of its sphere), relative to o. */
BCG_HD void bcg_contact_point(const bcg_mdata *m, const bcg_kin *k, int i, bcg_real *pc) {
  int b = m->cp_body[i];
  bcg_m3_mulv(pc, k->R[b], m->cp_pos[i]);
  bcg_v3_addto(pc, k->p[b]);
  pc[2] -= m->cp_radius[i];
}

/* Gap of the lowest contact point above the floor at kinematics k (m; a
 * large number when the model has no contact points). */
BCG_HD bcg_real bcg_lowest_gap(const bcg_mdata *m, const bcg_kin *k) {
  bcg_real lo = (bcg_real)1e30;
  for (int i = 0; i < m->ncp; i++) {
    bcg_real pc[3];
    bcg_contact_point(m, k, i, pc);
    bcg_real g = pc[2] + k->o[2] - m->floor_z;
    if (g < lo) lo = g;
  }
  return lo;
}

/* The last dof on the path from body b to the root (-1: none). A point on b
 * moves with this dof and its dof_parent ancestors (its chain), with no other. */
BCG_HD int bcg_body_last_dof(const bcg_mdata *m, int b) {
  for (int bb = b; bb > 0; bb = m->body_parent[bb])
    if (m->body_jntnum[bb] > 0) {
      int j = m->body_jntadr[bb] + m->body_jntnum[bb] - 1;
      return m->jnt_dofadr[j] + bcg_jnt_ndof(m->jnt_type[j]) - 1;
    }
  return -1;
}

/* body b's chain of dofs, deepest first, into ch (BCG_MAX_DOF entries);
 * returns its length */
BCG_HD int bcg_body_chain(const bcg_mdata *m, int b, int *ch) {
  int len = 0;
  for (int d = bcg_body_last_dof(m, b); d >= 0; d = m->dof_parent[d]) ch[len++] = d;
  return len;
}

/* rows (n, t1, t2) = (z, x, y) of the translational Jacobian at point pc on body b */
BCG_HD void bcg_point_jacobian(const bcg_mdata *m, const bcg_kin *k, int b, const bcg_real *pc, bcg_real (*J)[BCG_MAX_DOF]) {
  for (int r = 0; r < 3; r++)
    for (int d = 0; d < m->nv; d++) J[r][d] = 0;
  for (int d = bcg_body_last_dof(m, b); d >= 0; d = m->dof_parent[d]) {
    const bcg_real *s = k->cdof[d];
    bcg_real col[3];
    bcg_v3_cross(col, s, pc);
    bcg_v3_addto(col, s + 3);
    J[0][d] = col[2];
    J[1][d] = col[0];
    J[2][d] = col[1];
  }
}

/* ---- the substep ------------------------------------------------------------ */

/* Each active contact's chain of dofs: ctop[a] the last dof of its body (the
 * chain runs from it to the root through dof_parent), cdep[a] the chain's
 * length (the G sums of bcg_substep_pre and their adjoint, bcg_delassus_vjp) */
BCG_HD void bcg_contact_chains(const bcg_mdata *m, const bcg_stepws *w, int *ctop, int *cdep) {
  for (int a = 0; a < w->nact; a++) {
    ctop[a] = bcg_body_last_dof(m, m->cp_body[w->cid[a]]);
    cdep[a] = 0;
    for (int d = ctop[a]; d >= 0; d = m->dof_parent[d]) cdep[a]++;
  }
}

/* First half. Writes this environment's contact problem into the batch slots
 * (ncon slots, arrays already offset to this environment). */
BCG_HD void bcg_substep_pre(const bcg_mdata *m, const bcg_simparams *sp, const bcg_real *qS, const bcg_real *uS,
                            const bcg_real *a, bcg_stepws *w, int ncon, int *nact, bcg_real *gap, bcg_real *v0,
                            bcg_real *c, bcg_real *G, bcg_real *mu) {
  int nv = m->nv;
  bcg_real h = sp->dt;
  w->status = BCG_STEP_OK;
  bcg_integrate(m, qS, uS, h / 2, w->qM);
  bcg_kinematics(m, w->qM, &w->k);
  bcg_crba(m, &w->k, w->L, &w->cw);
  {
    bcg_real idg[BCG_MAX_DOF];
    bcg_implicit_diag(m, sp, uS, idg);
    for (int d = 0; d < nv; d++) w->L[d * nv + d] += m->dof_armature[d] + idg[d];
  }
  if (bcg_ltdl(w->L, nv, m->dof_parent)) w->status = BCG_STEP_NOT_SPD;
  bcg_rnea(m, &w->k, uS, 0, sp->gravity, w->b, &w->rw);
  for (int d = 0; d < nv; d++) w->tau[d] = 0;
  bcg_joint_forces(m, sp, w->qM, uS, a, w->tau);
  for (int d = 0; d < nv; d++) w->y[d] = w->tau[d] - w->b[d];
  if (w->status == BCG_STEP_OK) bcg_ltdl_solve(w->L, nv, m->dof_parent, w->y);
  for (int d = 0; d < nv; d++) w->ufree[d] = uS[d] + h * w->y[d];

  /* active contacts: gap <= margin, at most ncmax (the deepest ones) */
  int na = 0, cap = sp->ncmax < ncon ? sp->ncmax : ncon;
  if (cap > BCG_MAX_CONTACT) cap = BCG_MAX_CONTACT;
  bcg_real gsel[BCG_MAX_CONTACT];
  for (int i = 0; i < m->ncp; i++) {
    bcg_real pc[3];
    bcg_contact_point(m, &w->k, i, pc);
    bcg_real g = pc[2] + w->k.o[2] - m->floor_z;
    if (!(g <= sp->margin)) continue;
    /* insertion into the sorted list (stable: ties keep slot order) */
    int pos = na;
    while (pos > 0 && gsel[pos - 1] > g) pos--;
    if (pos >= cap) continue;
    int last = na < cap ? na : cap - 1;
    for (int r = last; r > pos; r--) { gsel[r] = gsel[r - 1]; w->cid[r] = w->cid[r - 1]; }
    gsel[pos] = g;
    w->cid[pos] = i;
    if (na < cap) na++;
  }
  /* the kept contacts in slot order: the contact plugins' Gauss-Seidel sweeps
   * visit them in this order, and a fixed number of sweeps depends on it; in
   * depth order two contacts whose gaps cross would swap places there and the
   * step's result would jump (docs/contact_continuity.md) */
  for (int r = 1; r < na; r++)
    for (int q = r; q > 0 && w->cid[q - 1] > w->cid[q]; q--) {
      int ti = w->cid[q]; w->cid[q] = w->cid[q - 1]; w->cid[q - 1] = ti;
      bcg_real tg = gsel[q]; gsel[q] = gsel[q - 1]; gsel[q - 1] = tg;
    }
  w->nact = na;
  *nact = na;
  for (int r = 0; r < ncon; r++) {
    gap[r] = r < na ? gsel[r] : (bcg_real)1e3;
    mu[r] = r < na ? (sp->mu >= 0 ? sp->mu : m->cp_friction[w->cid[r]]) : 0;
    for (int t = 0; t < 3; t++) v0[3 * r + t] = c[3 * r + t] = 0;
  }
  for (int r = 0; r < na; r++) {
    int i = w->cid[r];
    bcg_contact_point(m, &w->k, i, w->cpos[r]);
    bcg_point_jacobian(m, &w->k, m->cp_body[i], w->cpos[r], &w->J[3 * r]);
    /* J's rows are zero off the body's chain of dofs: the sums run over the
     * chain, in increasing dof order (the zero terms left them as they were) */
    int ch[BCG_MAX_DOF], len = bcg_body_chain(m, m->cp_body[i], ch);
    for (int t = 0; t < 3; t++) {
      const bcg_real *Jt = w->J[3 * r + t];
      bcg_real s0 = 0, s1 = 0;
      for (int l = len - 1; l >= 0; l--) { const int d = ch[l]; s0 += Jt[d] * uS[d]; s1 += Jt[d] * w->ufree[d]; }
      v0[3 * r + t] = s0;
      c[3 * r + t] = s1;
    }
  }
  /* G = J H^-1 J^T = Y^T D^-1 Y with Y = L^-T J^T (H = L^T D L, bcg_ltdl):
   * a row of Y stays on its contact body's chain of dofs, so each entry
   * of G sums over one chain, and only the first pass of the solve runs
   * here. w->K keeps Y also when G itself is not wanted (a
   * recompute for the adjoint passes G = NULL): bcg_substep_pre_vjp takes
   * the adjoint of G through Y and the factor. */
  if (G || sp->need_G) {
    for (int r = 0; r < 3 * na; r++)
      for (int d = 0; d < nv; d++) w->K[r][d] = w->J[r][d];
    if (w->status == BCG_STEP_OK) bcg_ltdl_rows_half(w->L, nv, m->dof_parent, w->K, 3 * na);
  }
  if (G) {
    int n3 = 3 * ncon;
    if (!sp->G_prezeroed)
      for (int i = 0; i < n3 * n3; i++) G[i] = 0;
    for (int r = 3 * na; r < n3; r++) G[r * n3 + r] = 1; /* keeps padded blocks invertible */
    const int ok = w->status == BCG_STEP_OK;
    /* G[r][s] (s <= r) = sum over the dofs d of Y[r][d] / D[d] * Y[s][d],
     * in the order of r's chain from its deepest dof to the root. Per
     * contact a (rows 3a..3a+2, one chain: Y's rows are 0 off it): its chain
     * and Y / D along it; per contact b <= a only the chains' common part,
     * the ancestors of the two bodies' last common dof, contributes: the
     * rest of a's chain meets zeros of Y[s], whose products left every sum
     * as it was (they come first, while the sum is still +0). The nine sums
     * of a block run side by side. */
    int ctop[BCG_MAX_CONTACT], cdep[BCG_MAX_CONTACT];
    bcg_contact_chains(m, w, ctop, cdep);
    for (int a = 0; a < na; a++) {
      int idx[BCG_MAX_DOF], len = 0;
      bcg_real yd[3][BCG_MAX_DOF];
      const int top = ctop[a];
      for (int d = top; d >= 0; d = m->dof_parent[d]) {
        const bcg_real dd = w->L[d * nv + d];
        for (int i = 0; i < 3; i++) yd[i][len] = ok ? w->K[3 * a + i][d] / dd : w->K[3 * a + i][d];
        idx[len++] = d;
      }
      for (int b = 0; b <= a; b++) {
        /* the common chain: its length is the depth of the bodies' last common dof */
        int x = top, y = ctop[b], lx = len, ly = cdep[b];
        for (; lx > ly; lx--) x = m->dof_parent[x];
        for (; ly > lx; ly--) y = m->dof_parent[y];
        for (; x != y; lx--) { x = m->dof_parent[x]; y = m->dof_parent[y]; }
        const bcg_real *s0 = w->K[3 * b], *s1 = w->K[3 * b + 1], *s2 = w->K[3 * b + 2];
        bcg_real v[3][3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
        for (int t = len - lx; t < len; t++) {
          const int d = idx[t];
          const bcg_real k0 = s0[d], k1 = s1[d], k2 = s2[d];
          for (int i = 0; i < 3; i++) {
            v[i][0] += yd[i][t] * k0;
            v[i][1] += yd[i][t] * k1;
            v[i][2] += yd[i][t] * k2;
          }
        }
        for (int i = 0; i < 3; i++)
          for (int j = 0; j < 3 && (b < a || j <= i); j++) {
            const int r = 3 * a + i, c = 3 * b + j;
            G[r * n3 + c] = v[i][j];
            G[c * n3 + r] = v[i][j];
          }
      }
    }
  }
}

/* Second half: u_E = u_free + H^-1 J^T Lam, q_E = q_M (+) dt/2 u_E. */
BCG_HD void bcg_substep_post(const bcg_mdata *m, const bcg_simparams *sp, bcg_stepws *w, const bcg_real *lam,
                             bcg_real *qE, bcg_real *uE) {
  int nv = m->nv;
  for (int d = 0; d < nv; d++) {
    bcg_real s = 0;
    for (int r = 0; r < 3 * w->nact; r++) s += w->J[r][d] * lam[r];
    w->x[d] = s;
  }
  if (w->status == BCG_STEP_OK) bcg_ltdl_solve(w->L, nv, m->dof_parent, w->x);
  for (int d = 0; d < nv; d++) w->uE[d] = uE[d] = w->ufree[d] + w->x[d];
  bcg_integrate(m, w->qM, w->uE, sp->dt / 2, qE);
  int bad = 0;
  for (int i = 0; i < m->nq; i++) bad |= !isfinite(qE[i]);
  for (int d = 0; d < nv; d++) bad |= !isfinite(uE[d]);
  if (bad && w->status == BCG_STEP_OK) w->status = BCG_STEP_NONFINITE;
}

/* Hb -= u v^T on the entries of the mass matrix's adjoint that anything reads:
 * (i, j) and (j, i) for j an ancestor-or-self of dof i, the pairs the CRBA
 * adjoint visits (dyn.h, bcg_crba_vjp; the implicit diagonal's adjoint reads
 * the diagonal). The other entries of H are structurally zero and their
 * adjoints are never read, so they are left alone: O(nv d) instead of nv^2. */
BCG_HD void bcg_hb_sub_outer(const bcg_mdata *m, bcg_real *Hb, const bcg_real *u, const bcg_real *v) {
  const int nv = m->nv;
  for (int i = 0; i < nv; i++) {
    Hb[i * nv + i] -= u[i] * v[i];
    for (int j = m->dof_parent[i]; j >= 0; j = m->dof_parent[j]) {
      Hb[i * nv + j] -= u[i] * v[j];
      Hb[j * nv + i] -= u[j] * v[i];
    }
  }
}

/* Adjoint of the second half (w recomputed by pre + post for the same input).
 * Given qEb (tangent), uEb: writes lamb (3 ncon) and initialises the adjoint
 * workspace A with the pieces the first half's adjoint needs. */
BCG_HD void bcg_substep_post_vjp(const bcg_mdata *m, const bcg_simparams *sp, const bcg_stepws *w,
                                 const bcg_real *lam, const bcg_real *qEb, const bcg_real *uEb_in, int ncon, bcg_real *lamb,
                                 bcg_stepadj *A) {
  int nv = m->nv, n3 = 3 * w->nact;
  bcg_real uEb[BCG_MAX_DOF], sb[BCG_MAX_DOF];
  for (int d = 0; d < nv; d++) uEb[d] = uEb_in[d];
  for (int i = 0; i < nv * nv; i++) A->Hb[i] = 0;
  for (int r = 0; r < n3; r++)
    for (int d = 0; d < nv; d++) A->Jb[r][d] = 0;
  bcg_integrate_vjp(m, w->uE, sp->dt / 2, qEb, A->qMb, uEb);
  for (int d = 0; d < nv; d++) { A->ufreeb[d] = uEb[d]; sb[d] = uEb[d]; }
  if (w->status == BCG_STEP_OK) bcg_ltdl_solve(w->L, nv, m->dof_parent, sb);
  bcg_hb_sub_outer(m, A->Hb, sb, w->x);
  for (int r = 0; r < 3 * ncon; r++) lamb[r] = 0;
  for (int r = 0; r < n3; r++) {
    bcg_real s = 0;
    for (int d = 0; d < nv; d++) { A->Jb[r][d] += lam[r] * sb[d]; s += w->J[r][d] * sb[d]; }
    lamb[r] = s;
  }
}

/* Adjoint of the Delassus matrix's block of bcg_substep_pre: G = J H^-1 J^T
 * = Y D^-1 Y^T with Y = L^-T J^T (H = L^T D L, bcg_ltdl; w->K holds Y's
 * rows, w->L the factor), given Gb (the active 3 nact x 3 nact block, rows
 * of length 3 ncon). With Gs = Gb + Gb^T, Y's adjoint is Gs Y D^-1 and D's
 * -1/2 sum_r Yb_r Y_r / D; both stay on each contact's chain of dofs (Y's
 * rows are zero off it, and a zero of Y is a zero whatever L is, so the
 * adjoint of an entry off the chain is never needed). Through the first pass
 * of the solve (bcg_ltdl_rows_half, reversed along the chain) they become
 * J's adjoint, added to A->Jb, and L's on the chain's tree pairs; the
 * factorisation's adjoint (bcg_ltdl_vjp) then takes L's and D's to H's.
 * A->Hb (from bcg_substep_post_vjp) is folded first, Hb_ji += Hb_ij onto the
 * upper entry of each tree pair, since its readers (bcg_crba_vjp, the
 * implicit diagonal's adjoint) take only Hb_ij + Hb_ji and the diagonal:
 * its lower entries and diagonal serve as bcg_ltdl_vjp's workspace. About
 * half the operations of the product Gs H^-1 J^T and the K^T (Gs K) tree
 * pairs it replaces, and no second pass of the solve. */
BCG_HD void bcg_delassus_vjp(const bcg_mdata *m, const bcg_stepws *w, int ncon, const bcg_real *Gb, bcg_stepadj *A) {
  const int nv = m->nv, na = w->nact, N3 = 3 * ncon, ok = w->status == BCG_STEP_OK;
  const int *par = m->dof_parent;
  const bcg_real *LD = w->L;
  bcg_real *Hb = A->Hb;
  bcg_real hd[BCG_MAX_DOF], invd[BCG_MAX_DOF], db[BCG_MAX_DOF];
  if (ok)
    for (int i = 0; i < nv; i++) {
      hd[i] = Hb[i * nv + i];
      Hb[i * nv + i] = 0;
      db[i] = 0;
      invd[i] = 1 / LD[i * nv + i];
      for (int j = par[i]; j >= 0; j = par[j]) {
        Hb[j * nv + i] += Hb[i * nv + j];
        Hb[i * nv + j] = 0;
      }
    }
  int ctop[BCG_MAX_CONTACT], cdep[BCG_MAX_CONTACT];
  bcg_contact_chains(m, w, ctop, cdep);
  for (int a = 0; a < na; a++) {
    int idx[BCG_MAX_DOF], len = 0; /* a's chain, deepest dof first */
    for (int d = ctop[a]; d >= 0; d = par[d]) idx[len++] = d;
    bcg_real yb[3][BCG_MAX_DOF];
    for (int i = 0; i < 3; i++)
      for (int t = 0; t < len; t++) yb[i][t] = 0;
    /* Yb_a = sum over b of Gs_ab Y_b, on the chains' common part */
    for (int b = 0; b < na; b++) {
      bcg_real g[3][3];
      int nz = 0;
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
          g[i][j] = Gb[(3 * a + i) * N3 + 3 * b + j] + Gb[(3 * b + j) * N3 + 3 * a + i];
          nz |= g[i][j] != 0;
        }
      if (!nz) continue;
      int x = ctop[a], y = ctop[b], lx = len, ly = cdep[b];
      for (; lx > ly; lx--) x = par[x];
      for (; ly > lx; ly--) y = par[y];
      for (; x != y; lx--) { x = par[x]; y = par[y]; }
      const bcg_real *y0 = w->K[3 * b], *y1 = w->K[3 * b + 1], *y2 = w->K[3 * b + 2];
      for (int t = len - lx; t < len; t++) {
        const int d = idx[t];
        const bcg_real k0 = y0[d], k1 = y1[d], k2 = y2[d];
        for (int i = 0; i < 3; i++) yb[i][t] += g[i][0] * k0 + g[i][1] * k1 + g[i][2] * k2;
      }
    }
    if (ok) {
      const bcg_real *ya0 = w->K[3 * a], *ya1 = w->K[3 * a + 1], *ya2 = w->K[3 * a + 2];
      for (int t = 0; t < len; t++) {
        const int d = idx[t];
        const bcg_real s = invd[d];
        yb[0][t] *= s; yb[1][t] *= s; yb[2][t] *= s;
        db[d] += ya0[d] * yb[0][t] + ya1[d] * yb[1][t] + ya2[d] * yb[2][t];
      }
      /* Y = L^-T J^T row by row: for k deepest first, Y_j -= L_kj Y_k (j an
       * ancestor of k); reversed, root first: Yb_k -= L_kj Yb_j and
       * Lb_kj -= Yb_j Y_k, Yb_j final by then */
      for (int t = len - 1; t >= 0; t--) {
        const int k = idx[t];
        const bcg_real *Lk = LD + k * nv;
        const bcg_real yk0 = ya0[k], yk1 = ya1[k], yk2 = ya2[k];
        bcg_real x0 = yb[0][t], x1 = yb[1][t], x2 = yb[2][t];
        for (int u = t + 1; u < len; u++) {
          const int j = idx[u];
          const bcg_real l = Lk[j], b0 = yb[0][u], b1 = yb[1][u], b2 = yb[2][u];
          x0 -= l * b0;
          x1 -= l * b1;
          x2 -= l * b2;
          Hb[k * nv + j] -= b0 * yk0 + b1 * yk1 + b2 * yk2;
        }
        yb[0][t] = x0; yb[1][t] = x1; yb[2][t] = x2;
      }
    }
    for (int i = 0; i < 3; i++) {
      bcg_real *Jbi = A->Jb[3 * a + i];
      for (int t = 0; t < len; t++) Jbi[idx[t]] += yb[i][t];
    }
  }
  if (ok) {
    for (int d = 0; d < nv; d++) Hb[d * nv + d] -= (bcg_real)0.5 * invd[d] * db[d];
    bcg_ltdl_vjp(LD, nv, par, Hb);
    for (int d = 0; d < nv; d++) Hb[d * nv + d] += hd[d];
  }
}

/* Adjoint of the first half. Inputs: the contact-input adjoints (gapb, v0b,
 * cb, Gb; Gb may be NULL) and A from bcg_substep_post_vjp. Writes qSb
 * (tangent), accumulates uSb and ab. */
BCG_HD void bcg_substep_pre_vjp(const bcg_mdata *m, const bcg_simparams *sp, const bcg_real *qS, const bcg_real *uS,
                                const bcg_real *a, bcg_stepws *w, int ncon, const bcg_real *gapb,
                                const bcg_real *v0b, const bcg_real *cb, const bcg_real *Gb, bcg_stepadj *A, bcg_real *qSb,
                                bcg_real *uSb, bcg_real *ab) {
  int nv = m->nv, na = w->nact;
  bcg_real h = sp->dt;
  (void)qS; /* the recompute in w holds everything derived from q_S */
  for (int d = 0; d < nv; d++)
    for (int i = 0; i < 6; i++) A->cdofb[d][i] = 0;
  for (int b = 0; b < m->nbody; b++) {
    bcg_v3_zero(A->hb[b]); bcg_v3_zero(A->tb[b]); bcg_v3_zero(A->pb[b]);
    for (int i = 0; i < 9; i++) A->Ibb[b][i] = 0;
  }
  if (Gb && sp->need_G) bcg_delassus_vjp(m, w, ncon, Gb, A);
  /* v0 = J uS, c = J ufree, over each contact's chain (J's rows are zero off
   * it, and only its entries of Jb are read below) */
  for (int r = 0; r < na; r++) {
    int ch[BCG_MAX_DOF], len = bcg_body_chain(m, m->cp_body[w->cid[r]], ch);
    for (int i = 3 * r; i < 3 * r + 3; i++) {
      const bcg_real vb = v0b[i], cbr = cb[i], *Ji = w->J[i];
      bcg_real *Jbi = A->Jb[i];
      for (int l = len - 1; l >= 0; l--) {
        const int d = ch[l];
        Jbi[d] += vb * uS[d] + cbr * w->ufree[d];
        uSb[d] += Ji[d] * vb;
        A->ufreeb[d] += Ji[d] * cbr;
      }
    }
  }
  /* J rows at contact points, and gaps: to cdof and body-pose adjoints */
  for (int r = 0; r < na; r++) {
    int i = w->cid[r], b = m->cp_body[i];
    const bcg_real *pc = w->cpos[r];
    bcg_real pcb[3] = {0, 0, gapb[r]};
    for (int d = bcg_body_last_dof(m, b); d >= 0; d = m->dof_parent[d]) {
      /* col = s_w x pc + s_v, rows (z, x, y) */
      bcg_real colb[3] = {A->Jb[3 * r + 1][d], A->Jb[3 * r + 2][d], A->Jb[3 * r][d]};
      const bcg_real *s = w->k.cdof[d];
      bcg_v3_cross_add(A->cdofb[d], pc, colb); /* s_w += pc x colb */
      bcg_v3_addto(A->cdofb[d] + 3, colb);
      bcg_v3_cross_add(pcb, colb, s);          /* pc += colb x s_w */
    }
    /* pc = p_b + R_b cp_pos - r ez */
    bcg_real rr[3];
    bcg_m3_mulv(rr, w->k.R[b], m->cp_pos[i]);
    bcg_v3_addto(A->pb[b], pcb);
    bcg_v3_cross_add(A->tb[b], rr, pcb);
  }
  /* ufree = uS + h H^-1 (tau - b) */
  bcg_real rb[BCG_MAX_DOF];
  for (int d = 0; d < nv; d++) { uSb[d] += A->ufreeb[d]; rb[d] = h * A->ufreeb[d]; }
  if (w->status == BCG_STEP_OK) bcg_ltdl_solve(w->L, nv, m->dof_parent, rb);
  bcg_hb_sub_outer(m, A->Hb, rb, w->y);
  bcg_joint_forces_vjp(m, sp, w->qM, uS, a, rb, A->qMb, uSb, ab);
  bcg_implicit_diag_vjp(m, sp, uS, A->Hb, uSb);
  bcg_real bb[BCG_MAX_DOF];
  for (int d = 0; d < nv; d++) bb[d] = -rb[d];
  bcg_rnea_vjp(m, &w->k, uS, 0, &w->rw, bb, uSb, 0, A->cdofb, A->hb, A->Ibb, &A->ra);
  bcg_crba_vjp(m, &w->k, &w->cw, A->Hb, A->cdofb, A->hb, A->Ibb, &A->cb);
  for (int b = 1; b < m->nbody; b++) bcg_massprop_vjp(m, &w->k, b, A->hb[b], A->Ibb[b], A->tb[b], A->pb[b]);
  bcg_kinematics_vjp(m, &w->k, (const bcg_real(*)[3])A->tb, (const bcg_real(*)[3])A->pb, (const bcg_real(*)[6])A->cdofb,
                     A->qMb, A->F);
  bcg_integrate_vjp(m, uS, h / 2, A->qMb, qSb, uSb);
}

#endif
