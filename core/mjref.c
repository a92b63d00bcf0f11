/* core/mjref.c - MuJoCo reference quantities (see bcg/mjref.h). */
#include "bcg/mjref.h"

#include <mujoco/mujoco.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct bcg_mjref {
  mjModel *m;
  mjData *d;
};

bcg_mjref *bcg_mjref_new(const bcg_model *model, int flags) {
  if (!model || !model->mj) return NULL;
  bcg_mjref *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->m = mj_copyModel(NULL, (const mjModel *)model->mj);
  if (!r->m) { free(r); return NULL; }
  if (flags & BCG_MJREF_NO_CONTACT) r->m->opt.disableflags |= mjDSBL_CONTACT;
  if (flags & BCG_MJREF_NO_LIMIT) r->m->opt.disableflags |= mjDSBL_LIMIT;
  if (flags & BCG_MJREF_NO_PASSIVE) r->m->opt.disableflags |= mjDSBL_SPRING | mjDSBL_DAMPER;
  if (flags & BCG_MJREF_NO_GRAVITY) r->m->opt.disableflags |= mjDSBL_GRAVITY;
  if (flags & BCG_MJREF_NO_CLAMPCTRL) r->m->opt.disableflags |= mjDSBL_CLAMPCTRL;
  if (flags & BCG_MJREF_NO_CONSTRAINT) r->m->opt.disableflags |= mjDSBL_CONSTRAINT;
  r->d = mj_makeData(r->m);
  if (!r->d) { mj_deleteModel(r->m); free(r); return NULL; }
  return r;
}

void bcg_mjref_free(bcg_mjref *r) {
  if (!r) return;
  mj_deleteData(r->d);
  mj_deleteModel(r->m);
  free(r);
}

int bcg_mjref_nq(const bcg_mjref *r) { return r->m->nq; }
int bcg_mjref_nv(const bcg_mjref *r) { return r->m->nv; }
int bcg_mjref_nu(const bcg_mjref *r) { return r->m->nu; }
int bcg_mjref_nbody(const bcg_mjref *r) { return r->m->nbody; }

static void set_inputs(bcg_mjref *r, const double *qpos, const double *qvel, const double *ctrl,
                       const double *qfrc_applied) {
  const mjModel *m = r->m;
  mjData *d = r->d;
  mj_resetData(m, d);
  if (qpos) mju_copy(d->qpos, qpos, m->nq);
  if (qvel) mju_copy(d->qvel, qvel, m->nv);
  if (ctrl) mju_copy(d->ctrl, ctrl, m->nu);
  if (qfrc_applied) mju_copy(d->qfrc_applied, qfrc_applied, m->nv);
}

void bcg_mjref_forward(bcg_mjref *r, const double *qpos, const double *qvel, const double *ctrl,
                       const double *qfrc_applied) {
  set_inputs(r, qpos, qvel, ctrl, qfrc_applied);
  mj_forward(r->m, r->d);
}

void bcg_mjref_fullM(const bcg_mjref *r, double *M) { mj_fullM(r->m, r->d, M); }
void bcg_mjref_bias(const bcg_mjref *r, double *v) { mju_copy(v, r->d->qfrc_bias, r->m->nv); }
void bcg_mjref_passive(const bcg_mjref *r, double *v) { mju_copy(v, r->d->qfrc_passive, r->m->nv); }
void bcg_mjref_actuator(const bcg_mjref *r, double *v) { mju_copy(v, r->d->qfrc_actuator, r->m->nv); }
void bcg_mjref_constraint(const bcg_mjref *r, double *v) { mju_copy(v, r->d->qfrc_constraint, r->m->nv); }
void bcg_mjref_qacc(const bcg_mjref *r, double *v) { mju_copy(v, r->d->qacc, r->m->nv); }
int bcg_mjref_ncon(const bcg_mjref *r) { return r->d->ncon; }

void bcg_mjref_contact(const bcg_mjref *r, int i, double *dist, double pos[3], int *geom1, int *geom2) {
  const mjContact *c = r->d->contact + i;
  if (dist) *dist = c->dist;
  if (pos) mju_copy3(pos, c->pos);
  if (geom1) *geom1 = c->geom[0];
  if (geom2) *geom2 = c->geom[1];
}

int bcg_mjref_self_contacts(const bcg_mjref *r) {
  const mjModel *m = r->m;
  int n = 0;
  for (int i = 0; i < r->d->ncon; i++) {
    const mjContact *c = r->d->contact + i;
    if (c->exclude) continue;
    if (m->body_weldid[m->geom_bodyid[c->geom1]] != 0 && m->body_weldid[m->geom_bodyid[c->geom2]] != 0) n++;
  }
  return n;
}

void bcg_mjref_bodies(const bcg_mjref *r, double *xpos, double *xquat, double *xipos) {
  int n = r->m->nbody;
  if (xpos) mju_copy(xpos, r->d->xpos, 3 * n);
  if (xquat) mju_copy(xquat, r->d->xquat, 4 * n);
  if (xipos) mju_copy(xipos, r->d->xipos, 3 * n);
}

void bcg_mjref_jac(const bcg_mjref *r, int body, const double point[3], double *jacp, double *jacr) {
  mj_jac(r->m, r->d, jacp, jacr, point, body);
}

void bcg_mjref_state(const bcg_mjref *r, double *qpos, double *qvel) {
  if (qpos) mju_copy(qpos, r->d->qpos, r->m->nq);
  if (qvel) mju_copy(qvel, r->d->qvel, r->m->nv);
}

void bcg_mjref_step(bcg_mjref *r, const double *ctrl, int nsteps) {
  if (ctrl)
    mju_copy(r->d->ctrl, ctrl, r->m->nu);
  else
    mju_zero(r->d->ctrl, r->m->nu);
  for (int i = 0; i < nsteps; i++) mj_step(r->m, r->d);
}

double bcg_mjref_steps_per_sec(bcg_mjref *r, const double *qpos, const double *qvel, const double *ctrl,
                               int nsteps) {
  if (nsteps <= 0) return 0;
  set_inputs(r, qpos, qvel, ctrl, NULL);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < nsteps; i++) mj_step(r->m, r->d);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  return s > 0 ? nsteps / s : 0;
}

/* ---- transfer: bcg's PD law as MuJoCo servos ----------------------------- */

int bcg_mjref_use_pd(bcg_mjref *r, const double *kp, const double *kd, const double *tau_max) {
  mjModel *m = r->m;
  for (int i = 0; i < m->nu; i++) {
    if (m->actuator_trntype[i] != mjTRN_JOINT) return -1;
    m->actuator_gaintype[i] = mjGAIN_FIXED;
    m->actuator_biastype[i] = mjBIAS_AFFINE;
    mju_zero(m->actuator_gainprm + i * mjNGAIN, mjNGAIN);
    mju_zero(m->actuator_biasprm + i * mjNBIAS, mjNBIAS);
    m->actuator_gainprm[i * mjNGAIN] = kp[i];
    m->actuator_biasprm[i * mjNBIAS + 1] = -kp[i];
    m->actuator_biasprm[i * mjNBIAS + 2] = -kd[i];
    mju_zero(m->actuator_gear + i * 6, 6);
    m->actuator_gear[i * 6] = 1;
    m->actuator_ctrllimited[i] = 0;
    m->actuator_forcelimited[i] = tau_max && tau_max[i] > 0;
    if (tau_max && tau_max[i] > 0) {
      m->actuator_forcerange[2 * i] = -tau_max[i];
      m->actuator_forcerange[2 * i + 1] = tau_max[i];
    }
  }
  m->opt.integrator = mjINT_IMPLICIT;
  mj_setConst(m, r->d);
  return 0;
}

void bcg_mjref_set_state(bcg_mjref *r, const double *qpos, const double *qvel) {
  mj_resetData(r->m, r->d);
  mju_copy(r->d->qpos, qpos, r->m->nq);
  mju_copy(r->d->qvel, qvel, r->m->nv);
  mj_forward(r->m, r->d);
}

double bcg_mjref_timestep(const bcg_mjref *r) { return r->m->opt.timestep; }

void bcg_mjref_set_timestep(bcg_mjref *r, double dt) { r->m->opt.timestep = dt; }

/* ---- inverse dynamics (bcg feasibility) ---------------------------------- */

void bcg_mjref_inverse(bcg_mjref *r, const double *qpos, const double *qvel, const double *qacc,
                       double *qfrc_inverse) {
  set_inputs(r, qpos, qvel, NULL, NULL);
  if (qacc) mju_copy(r->d->qacc, qacc, r->m->nv);
  mj_inverse(r->m, r->d);
  mju_copy(qfrc_inverse, r->d->qfrc_inverse, r->m->nv);
}

void bcg_mjref_diff_pos(const bcg_mjref *r, const double *qpos1, const double *qpos2, double dt, double *qvel) {
  mj_differentiatePos(r->m, qvel, dt, qpos1, qpos2);
}

double bcg_mjref_total_mass(const bcg_mjref *r) { return mj_getTotalmass(r->m); }
