/* core/simconfig.c - simulation parameters and the contact plugin from a
 * validated configuration. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/config.h"
#include "bcg/loader.h"
#include "bcg/sim.h"
#include "bcg/step.h"

/* Per-joint gains 'pattern:value, ...' ([sim] kp_joints / kd_joints): each
 * actuator whose joint name contains a pattern (the first that matches) gets
 * its value in g[]. A malformed entry or a pattern that matches no actuated
 * joint is an error naming the key. */
static int joint_gains(const bcg_config *cfg, const bcg_model *model, const char *key, bcg_real *g, char *err,
                       size_t errlen) {
  const char *spec = bcg_config_get_string(cfg, "sim", key);
  if (!spec || !spec[0]) return 0;
  const bcg_mdata *m = &model->m;
  int set[BCG_MAX_ACT] = {0};
  char buf[2048];
  if (strlen(spec) >= sizeof buf) {
    bcg_config_errorf(cfg, "sim", key, err, errlen, "longer than %zu characters", sizeof buf - 1);
    return -1;
  }
  snprintf(buf, sizeof buf, "%s", spec);
  char *save = NULL;
  for (char *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
    char *colon = strrchr(it, ':');
    while (*it == ' ' || *it == '\t') it++;
    if (!colon || colon == it) {
      bcg_config_errorf(cfg, "sim", key, err, errlen, "'%s': expected pattern:value", it);
      return -1;
    }
    *colon = 0;
    char *e = colon - 1;
    while (e > it && (*e == ' ' || *e == '\t')) *e-- = 0;
    char *end;
    double v = strtod(colon + 1, &end);
    while (*end == ' ' || *end == '\t') end++;
    if (end == colon + 1 || *end || !isfinite(v) || v < 0) {
      bcg_config_errorf(cfg, "sim", key, err, errlen, "'%s': value '%s' is not a non-negative number", it, colon + 1);
      return -1;
    }
    int hit = 0;
    for (int i = 0; i < m->nu; i++) {
      if (!strstr(model->jnt_name[m->act_jnt[i]], it)) continue;
      hit = 1;
      if (!set[i]) g[i] = (bcg_real)v, set[i] = 1;
    }
    if (!hit) {
      bcg_config_errorf(cfg, "sim", key, err, errlen, "pattern '%s' matches no actuated joint of %s", it, model->path);
      return -1;
    }
  }
  return 0;
}

int bcg_simparams_from_config(const bcg_config *cfg, const bcg_model *model, bcg_simparams *sp, char *err,
                              size_t errlen) {
  const bcg_mdata *m = &model->m;
  bcg_simparams_default(model, sp);
  int ns = (int)bcg_config_get_int(cfg, "sim", "substeps");
  double cdt = bcg_config_get_real(cfg, "sim", "control_dt");
  sp->substeps = ns;
  sp->dt = (bcg_real)(cdt / ns);
  if (sp->dt > 0.05) {
    bcg_config_errorf(cfg, "sim", "control_dt", err, errlen,
                      "substep length control_dt / substeps = %g s is too long for a stable explicit step", sp->dt);
    return -1;
  }
  sp->actuation = strcmp(bcg_config_get_string(cfg, "sim", "actuation"), "pd") == 0 ? BCG_ACTUATION_PD
                                                                                   : BCG_ACTUATION_MOTOR;
  double kp = bcg_config_get_real(cfg, "sim", "kp"), kd = bcg_config_get_real(cfg, "sim", "kd");
  int lim = bcg_config_get_bool(cfg, "sim", "pd_torque_limit");
  for (int i = 0; i < m->nu; i++) {
    sp->kp[i] = (bcg_real)(kp * m->act_gear[i] / 100);
    sp->kd[i] = (bcg_real)(kd * m->act_gear[i] / 100);
    if (!lim) sp->tau_max[i] = 0;
  }
  if (joint_gains(cfg, model, "kp_joints", sp->kp, err, errlen) ||
      joint_gains(cfg, model, "kd_joints", sp->kd, err, errlen))
    return -1;
  sp->floss_v = (bcg_real)bcg_config_get_real(cfg, "sim", "frictionloss_velocity");
  sp->action_scale = (bcg_real)bcg_config_get_real(cfg, "sim", "action_scale");
  if (sp->actuation == BCG_ACTUATION_PD && !(sp->action_scale > 0)) {
    bcg_config_errorf(cfg, "sim", "action_scale", err, errlen,
                      "0 with actuation = pd: every PD target would be the default pose, whatever the action "
                      "(target = qdef + action_scale * action)");
    return -1;
  }
  sp->lim_k = (bcg_real)bcg_config_get_real(cfg, "sim", "joint_limit_stiffness");
  sp->lim_width = (bcg_real)bcg_config_get_real(cfg, "sim", "joint_limit_width");
  sp->lim_d = (bcg_real)bcg_config_get_real(cfg, "sim", "joint_limit_damping");
  sp->margin = (bcg_real)bcg_config_get_real(cfg, "sim", "contact_margin");
  sp->mu = (bcg_real)bcg_config_get_real(cfg, "sim", "friction");
  sp->ncmax = (int)bcg_config_get_int(cfg, "sim", "max_contacts");
  const bcg_plugin *pl = bcg_config_plugin(cfg, BCG_KIND_CONTACT);
  sp->need_G = pl && (pl->desc->caps & BCG_CAP_NEEDS_DELASSUS) ? 1 : 0;
  return 0;
}

int bcg_pd_check_gains(const bcg_model *model, const bcg_simparams *sp, bcg_pd_check *c) {
  const bcg_mdata *m = &model->m;
  memset(c, 0, sizeof *c);
  c->act_max = -1;
  for (int i = 0; i < m->nu; i++)
    if (c->act_max < 0 || sp->kp[i] > c->kp_max) c->kp_max = sp->kp[i], c->act_max = i;
  c->g = sqrt((double)(m->gravity[0] * m->gravity[0] + m->gravity[1] * m->gravity[1] + m->gravity[2] * m->gravity[2]));
  bcg_kin *kin = malloc(sizeof *kin);
  if (!kin) return 0;
  bcg_real q[BCG_MAX_Q];
  for (int i = 0; i < m->nq; i++) q[i] = m->qpos0[i];
  bcg_kinematics(m, q, kin);
  const bcg_kin *kk = kin;
  double mz = 0, lo = INFINITY;
  for (int b = 1; b < m->nbody; b++) {
    bcg_real ci[3];
    bcg_m3_mulv(ci, kk->R[b], m->body_ipos[b]);
    c->mass += m->body_mass[b];
    mz += m->body_mass[b] * (double)(kk->p[b][2] + ci[2]);
    if (m->ncp == 0 && kk->p[b][2] < lo) lo = kk->p[b][2];
  }
  for (int i = 0; i < m->ncp; i++) {
    bcg_real pc[3];
    bcg_contact_point(m, kk, i, pc);
    if (pc[2] < lo) lo = pc[2];
  }
  free(kin);
  if (c->mass > 0 && isfinite(lo)) c->h = mz / c->mass - lo;
  if (c->act_max < 0 || !(c->g > 0) || !(c->h > 0)) return 0;
  c->need = c->mass * c->g * c->h;
  return c->kp_max < c->need ? 1 : 0;
}

int bcg_drparams_from_config(const bcg_config *cfg, bcg_drparams *dr, char *err, size_t errlen) {
  bcg_drparams_default(dr);
  dr->friction_min = (bcg_real)bcg_config_get_real(cfg, "sim", "dr_friction_min");
  dr->friction_max = (bcg_real)bcg_config_get_real(cfg, "sim", "dr_friction_max");
  if (dr->friction_min >= 0 && !(dr->friction_max >= dr->friction_min)) {
    bcg_config_errorf(cfg, "sim", "dr_friction_max", err, errlen,
                      "must be at least dr_friction_min = %g when friction randomisation is on",
                      (double)dr->friction_min);
    return -1;
  }
  if (dr->friction_min < 0 && dr->friction_max >= 0) {
    bcg_config_errorf(cfg, "sim", "dr_friction_min", err, errlen,
                      "dr_friction_max is set: set dr_friction_min too (-1 turns friction randomisation off)");
    return -1;
  }
  dr->mass_scale = (bcg_real)bcg_config_get_real(cfg, "sim", "dr_mass_scale");
  dr->com_offset = (bcg_real)bcg_config_get_real(cfg, "sim", "dr_com_offset");
  dr->push_interval = (bcg_real)bcg_config_get_real(cfg, "sim", "dr_push_interval");
  dr->push_velocity = (bcg_real)bcg_config_get_real(cfg, "sim", "dr_push_velocity");
  return 0;
}

int bcg_contact_from_config(const bcg_config *cfg, const bcg_model *model, const bcg_contact_ops **ops,
                            void **self, char *err, size_t errlen) {
  *ops = NULL;
  *self = NULL;
  const bcg_plugin *pl = bcg_config_plugin(cfg, BCG_KIND_CONTACT);
  if (!pl) return 0;
  const bcg_contact_ops *o = (const bcg_contact_ops *)pl->desc->ops;
  char perr[1024] = "";
  void *s = o->create(bcg_services_host(), bcg_config_section(cfg, "contact"), model, perr, sizeof perr);
  if (!s) {
    snprintf(err, errlen, "%s: contact plugin '%s' failed to start: %s", pl->path, pl->desc->name,
             perr[0] ? perr : "no reason given");
    return -1;
  }
  *ops = o;
  *self = s;
  return 0;
}
