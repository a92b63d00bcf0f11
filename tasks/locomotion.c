/* tasks/locomotion.c - run forward on the floor at a commanded speed, with
 * DiffRL's shaping; docs/design.md section 8.4 and tasks/README.md give the
 * observation and every reward term with its key.
 *
 * Observation: the proprioception of task_util.h (root height, orientation
 * and velocities in the heading frame, joint positions and velocities, the
 * previous action). Reward: a saturating progress term and a Gaussian speed
 * term on the root's forward velocity, uprightness, an optional alive bonus,
 * heading and lateral-velocity penalties, DiffRL's low-root shaping, the
 * self-collision, joint-limit, action, action-rate and energy penalties.
 * Done: 1 below fall_height, 2 at episode_seconds. Reset: qpos0 with seeded
 * noise, the lowest contact point placed on the floor. Observation and
 * reward VJPs are exact (test_tasks: FD). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/env.h"
#include "bcg/plugin.h"
#include "bcg/rng.h"
#include "bcg/step.h"
#include "task_util.h"

typedef struct loco {
  bcg_env *env;
  const bcg_mdata *m;
  tu_layout L;
  int nenv, nq, nv, nu, nx, odim;
  double target, w_progress, w_speed, speed_scale, w_upright, w_alive, w_heading, w_lateral, w_low, low_margin, w_self, w_limit, w_action, w_rate,
      w_energy, fall, noise;
  int ep_steps;
  int zq;      /* qpos address that moves the root vertically, -1 if none */
  double zsgn; /* d(height)/d(q[zq]) */
  bcg_kin *k;  /* [nenv] */
  tu_adj *adj; /* [nenv] */
  tu_self self;
} loco;

static void *create(const bcg_services *svc, const bcg_params *p, bcg_env *env, char *err, size_t errlen) {
  loco *s = calloc(1, sizeof *s);
  if (!s) return snprintf(err, errlen, "out of memory"), NULL;
  s->env = env;
  s->m = &env->model->m;
  if (tu_layout_init(&s->L, env->model, err, errlen)) return free(s), NULL;
  s->nenv = env->nenv;
  s->nq = env->nq;
  s->nv = env->nv;
  s->nu = env->nu;
  s->nx = env->nx;
  s->odim = tu_proprio_dim(&s->L, s->nu);
  s->target = svc->get_real(p, "target_speed");
  s->w_progress = svc->get_real(p, "w_progress");
  s->w_speed = svc->get_real(p, "w_speed");
  s->speed_scale = svc->get_real(p, "speed_scale");
  s->w_upright = svc->get_real(p, "w_upright");
  s->w_alive = svc->get_real(p, "w_alive");
  s->w_heading = svc->get_real(p, "w_heading");
  s->w_lateral = svc->get_real(p, "w_lateral");
  s->w_low = svc->get_real(p, "w_low");
  s->low_margin = svc->get_real(p, "low_margin");
  s->w_self = svc->get_real(p, "w_self");
  tu_self_init(&s->self, env->model);
  tu_self_warn(env->model, s->w_self, svc);
  if (tu_self_set_margin(&s->self, s->m, svc->get_real(p, "self_margin"))) {
    snprintf(err, errlen, "out of memory");
    free(s);
    return NULL;
  }
  s->w_action = svc->get_real(p, "w_action");
  s->w_rate = svc->get_real(p, "w_action_rate");
  s->w_limit = svc->get_real(p, "w_limit");
  s->w_energy = svc->get_real(p, "w_energy");
  s->fall = svc->get_real(p, "fall_height");
  s->noise = svc->get_real(p, "reset_noise");
  double sec = svc->get_real(p, "episode_seconds");
  s->ep_steps = (int)bcg_steps_for(sec, env->control_dt);
  if (s->ep_steps < 1) s->ep_steps = 1;
  const bcg_mdata *m = s->m;
  s->zq = -1;
  if (s->L.free_root) {
    s->zq = m->jnt_qposadr[m->body_jntadr[s->L.root]] + 2;
    s->zsgn = 1;
  } else {
    for (int jj = 0; jj < m->body_jntnum[s->L.root]; jj++) {
      int j = m->body_jntadr[s->L.root] + jj;
      if (m->jnt_type[j] == BCG_JNT_SLIDE && fabs(m->jnt_axis[j][2]) > 0.99) {
        s->zq = m->jnt_qposadr[j];
        s->zsgn = m->jnt_axis[j][2] > 0 ? 1 : -1;
        break;
      }
    }
  }
  s->k = malloc(sizeof(bcg_kin) * s->nenv);
  s->adj = malloc(sizeof(tu_adj) * s->nenv);
  if (!s->k || !s->adj) {
    free(s->k), free(s->adj), free(s);
    return snprintf(err, errlen, "out of memory"), NULL;
  }
  return s;
}

static void destroy(void *p) {
  loco *s = p;
  if (!s) return;
  free(s->k);
  free(s->adj);
  free(s);
}
static int obs_dim(const void *p) { return ((const loco *)p)->odim; }
static int act_dim(const void *p) { return ((const loco *)p)->nu; }

static int reset(void *p, const int *envs, int n, uint64_t draw, bcg_real *x, bcg_task_clock *clk) {
  loco *s = p;
  const bcg_mdata *m = s->m;
  for (int i = 0; i < n; i++) {
    int e = envs[i];
    if (e < 0 || e >= s->nenv) return -1;
    bcg_real *q = x + (size_t)e * s->nx, *u = q + s->nq;
    bcg_real z[2 * BCG_MAX_DOF];
    bcg_rng_fill_normal(z, s->L.nj + s->nv, s->env->seed, BCG_RNG_RESET, (uint32_t)e, (uint32_t)draw);
    for (int c = 0; c < s->nq; c++) q[c] = m->qpos0[c];
    for (int j = 0; j < s->L.nj; j++) q[s->L.jq[j]] += s->noise * z[j];
    for (int d = 0; d < s->nv; d++) u[d] = s->noise * z[s->L.nj + d];
    if (s->zq >= 0 && m->has_floor && m->ncp > 0) {
      bcg_kin *k = &s->k[e];
      bcg_kinematics_pose(m, q, k);
      bcg_real lo = 1e30;
      for (int c = 0; c < m->ncp; c++) {
        bcg_real pc[3];
        bcg_contact_point(m, k, c, pc);
        if (pc[2] + k->o[2] < lo) lo = pc[2] + k->o[2];
      }
      q[s->zq] -= s->zsgn * (lo - m->floor_z);
    }
    clk[e].t = 0;
    clk[e].flags = 0;
    clk[e].phase = 0;
  }
  return 0;
}

static void observe_one(loco *s, int e, const bcg_real *x, const bcg_real *prev_a, bcg_real *obs) {
  const bcg_real *q = x + (size_t)e * s->nx;
  bcg_kinematics_pose(s->m, q, &s->k[e]);
  tu_proprio(&s->L, s->m, &s->k[e], q, q + s->nq, prev_a ? prev_a + (size_t)e * s->nu : NULL,
             obs + (size_t)e * s->odim);
}

static int observe(void *p, const bcg_real *x, const bcg_real *prev_a, const bcg_task_clock *clk, bcg_real *obs) {
  loco *s = p;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < s->nenv; e++) observe_one(s, e, x, prev_a, obs);
  return 0;
}

static int observe_envs(void *p, const int *envs, int n, const bcg_real *x, const bcg_real *prev_a,
                        const bcg_task_clock *clk, bcg_real *obs) {
  loco *s = p;
  (void)clk;
#pragma omp parallel for schedule(static) if (n >= 64)
  for (int i = 0; i < n; i++) observe_one(s, envs[i], x, prev_a, obs);
  return 0;
}

static int observe_vjp(void *p, const bcg_real *x, const bcg_real *prev_a, const bcg_task_clock *clk,
                       const bcg_real *ob, bcg_real *xb, bcg_real *pab) {
  loco *s = p;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < s->nenv; e++) {
    const bcg_real *q = x + (size_t)e * s->nx;
    bcg_kin *k = &s->k[e];
    tu_adj *a = &s->adj[e];
    bcg_kinematics_pose(s->m, q, k);
    tu_adj_zero(a);
    tu_proprio_vjp(&s->L, s->m, k, q + s->nq, ob + (size_t)e * s->odim, a, pab ? pab + (size_t)e * s->nu : NULL);
    tu_adj_finish(&s->L, s->m, k, a, xb + (size_t)e * 2 * s->nv);
  }
  return 0;
}

static double sgn(double v) { return v > 0 ? 1 : (v < 0 ? -1 : 0); }

/* the progress term w c tanh(d vx / c) and its derivative in vx */
static double progress(const loco *s, double vx, double *dr) {
  double d = s->target < 0 ? -1 : 1, c = fabs(s->target) > 0.5 ? fabs(s->target) : 0.5;
  double t = tanh(d * vx / c);
  if (dr) *dr = s->w_progress * d * (1 - t * t);
  return s->w_progress * c * t;
}

/* the heading penalty w (1 - cos psi), psi = atan2(R10, R00) of the root
 * rotation R; with Rb, adds g times its gradient in R (0 without a free root
 * or with the root's x axis vertical) */
static double heading_penalty(const loco *s, const bcg_real *R, double g, bcg_real *Rb) {
  if (!s->L.free_root || s->w_heading == 0) return 0;
  double n = (double)R[0] * R[0] + (double)R[3] * R[3];
  if (n < 1e-30) return 0;
  double rn = sqrt(n);
  if (Rb) {
    double n3 = n * rn;
    Rb[0] += (bcg_real)(g * s->w_heading * -(double)R[3] * R[3] / n3);
    Rb[3] += (bcg_real)(g * s->w_heading * (double)R[0] * R[3] / n3);
  }
  return s->w_heading * (1 - R[0] / rn);
}

static int reward(void *p, const bcg_real *x, const bcg_real *a, const bcg_real *prev_a, const bcg_task_clock *clk,
                  bcg_real *rew, int *done) {
  loco *s = p;
  const bcg_mdata *m = s->m;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < s->nenv; e++) {
    const bcg_real *q = x + (size_t)e * s->nx, *u = q + s->nq, *ae = a + (size_t)e * s->nu;
    const bcg_real *pe = prev_a ? prev_a + (size_t)e * s->nu : NULL;
    bcg_kin *k = &s->k[e];
    bcg_kinematics_pose(m, q, k);
    bcg_real v[3], w[3];
    tu_root_vel(&s->L, k, u, v, w);
    double dv = v[0] - s->target, r = s->w_speed * exp(-s->speed_scale * dv * dv) + progress(s, v[0], NULL);
    r += s->w_upright * k->R[s->L.root][8] + s->w_alive;
    r -= heading_penalty(s, k->R[s->L.root], 0, NULL) + s->w_lateral * v[1] * v[1];
    double aa = 0, da = 0, en = 0;
    for (int i = 0; i < s->nu; i++) {
      double d = ae[i] - (pe ? pe[i] : 0);
      aa += ae[i] * ae[i];
      da += d * d;
      en += fabs(ae[i] * u[m->act_dof[i]]);
    }
    r -= s->w_action * aa + s->w_rate * da + s->w_energy * en;
    double h = k->p[s->L.root][2] + k->o[2], lo = h - s->fall - s->low_margin;
    if (lo < 0) r -= s->w_low * lo * lo;
    if (s->w_self > 0) r -= s->w_self * tu_self_penalty(&s->self, k, 0, NULL);
    if (s->w_limit > 0) r -= s->w_limit * tu_limit_penalty(m, q, 0, NULL);
    rew[e] = (bcg_real)r;
    done[e] = !(h >= s->fall) ? 1 : (clk[e].t >= s->ep_steps ? 2 : 0);
  }
  return 0;
}

static int reward_vjp(void *p, const bcg_real *x, const bcg_real *a, const bcg_real *prev_a,
                      const bcg_task_clock *clk, const bcg_real *rb, bcg_real *xb, bcg_real *ab, bcg_real *pab) {
  loco *s = p;
  const bcg_mdata *m = s->m;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < s->nenv; e++) {
    const bcg_real *q = x + (size_t)e * s->nx, *u = q + s->nq, *ae = a + (size_t)e * s->nu;
    bcg_kin *k = &s->k[e];
    tu_adj *A = &s->adj[e];
    bcg_real g = rb[e];
    bcg_kinematics_pose(m, q, k);
    tu_adj_zero(A);
    bcg_real v[3], w[3], vb[3] = {0, 0, 0}, wb[3] = {0, 0, 0};
    tu_root_vel(&s->L, k, u, v, w);
    double dv = v[0] - s->target;
    double dp;
    progress(s, v[0], &dp);
    vb[0] = g * (s->w_speed * exp(-s->speed_scale * dv * dv) * (-2 * s->speed_scale * dv) + dp);
    vb[1] = g * (-2 * s->w_lateral * v[1]);
    tu_root_vel_vjp(&s->L, k, u, vb, wb, A);
    A->Rb[8] += g * s->w_upright;
    heading_penalty(s, k->R[s->L.root], -g, A->Rb);
    double lo = k->p[s->L.root][2] + k->o[2] - s->fall - s->low_margin;
    if (lo < 0) A->pb[s->L.root][2] += g * (-2 * s->w_low * lo);
    if (s->w_self > 0) tu_self_penalty(&s->self, k, -g * s->w_self, A);
    if (s->w_limit > 0) tu_limit_penalty(m, q, -g * s->w_limit, A->qb);
    const bcg_real *pe = prev_a ? prev_a + (size_t)e * s->nu : NULL;
    for (int i = 0; i < s->nu; i++) {
      int d = m->act_dof[i];
      double sg = sgn(ae[i] * u[d]), da = ae[i] - (pe ? pe[i] : 0);
      if (ab) ab[(size_t)e * s->nu + i] += g * (-2 * s->w_action * ae[i] - 2 * s->w_rate * da - s->w_energy * sg * u[d]);
      if (pab) pab[(size_t)e * s->nu + i] += g * 2 * s->w_rate * da;
      A->ub[d] += g * (-s->w_energy * sg * ae[i]);
    }
    tu_adj_finish(&s->L, m, k, A, xb + (size_t)e * 2 * s->nv);
  }
  return 0;
}

static const bcg_key_spec keys[] = {
    {"target_speed", BCG_KEY_REAL, "2.0", -10, 10, NULL, "commanded root speed along world +x (m/s)"},
    {"w_progress", BCG_KEY_REAL, "1.0", 0, 1e6, NULL,
     "weight of the progress term c tanh(vx / c), c = max(|target_speed|, 0.5) (slope w_progress at rest)"},
    {"w_speed", BCG_KEY_REAL, "1.0", 0, 1e6, NULL, "weight of exp(-speed_scale (vx - target_speed)^2)"},
    {"speed_scale", BCG_KEY_REAL, "1.0", 0, 1e6, NULL, "scale of the speed error (s^2/m^2)"},
    {"w_upright", BCG_KEY_REAL, "0.5", 0, 1e6, NULL, "weight of the world z component of the root's z axis"},
    {"w_alive", BCG_KEY_REAL, "0", 0, 1e6, NULL,
     "alive bonus per control step (a policy that stands collects it without risk: with 1, SHAC settled for "
     "standing)"},
    {"w_heading", BCG_KEY_REAL, "0.5", 0, 1e6, NULL,
     "weight of the heading penalty 1 - cos(psi), psi the yaw of the root's x axis from world +x"},
    {"w_lateral", BCG_KEY_REAL, "0.5", 0, 1e6, NULL, "weight of the lateral-velocity penalty vy^2 (s^2/m^2)"},
    {"w_low", BCG_KEY_REAL, "200", 0, 1e6, NULL,
     "weight of the low-root penalty w_low (fall_height + low_margin - h)^2 while the root height h is below "
     "fall_height + low_margin (DiffRL's height shaping)"},
    {"low_margin", BCG_KEY_REAL, "0.1", 0, 10, NULL, "height above fall_height where the low-root penalty starts (m)"},
    TU_PENALTY_KEYS,
    {"w_action", BCG_KEY_REAL, "0.01", 0, 1e6, NULL, "weight of the action cost |a|^2"},
    {"w_action_rate", BCG_KEY_REAL, "0", 0, 1e6, NULL,
     "weight of the action-rate cost |a - prev_a|^2 (prev_a = 0 after a reset): against a policy that chatters"},
    {"w_energy", BCG_KEY_REAL, "0.001", 0, 1e6, NULL,
     "weight of the power proxy sum |a_i qvel_i| over actuated dofs (meaningful with actuation = motor)"},
    {"fall_height", BCG_KEY_REAL, "0.8", 0, 10, NULL, "terminate when the root origin drops below this height (m)"},
    {"episode_seconds", BCG_KEY_REAL, "10", 0.01, 1e6, NULL, "time limit of an episode (s)"},
    {"reset_noise", BCG_KEY_REAL, "0.02", 0, 1, NULL,
     "std of the Gaussian noise on joint positions (rad, m) and all velocities at reset"},
};

static const bcg_task_ops ops = {sizeof(bcg_task_ops), create, destroy, obs_dim, act_dim, reset, observe,
                                 observe_vjp, reward, reward_vjp, NULL, NULL, NULL, NULL, NULL, observe_envs, NULL};

static const bcg_plugin_desc desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_TASK, "locomotion", "run forward at a commanded speed, upright and alive"),
    keys, BCG_NKEYS(keys), BCG_CAP_DIFFERENTIABLE | BCG_CAP_NEEDS_FLOOR, &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }
