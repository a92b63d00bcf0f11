/* plugins/example/hold_height.c - an example task plugin built only from the
 * installed SDK: keep a floating robot's root at its reset height.
 *
 * Model: a free root joint first, every other joint a hinge or a slide (so
 * that qpos[7 + j] is the tangent coordinate 6 + j), e.g. humanoid.xml or
 * Unitree's G1.
 *
 *   observation  [z - z0, qpos[7..nq), 0.1 qvel]        (1 + nq - 7 + nv)
 *   reward       exp(-(z - z0)^2 / width^2) - vel_cost |qvel|^2 - act_cost |a|^2
 *   done         1 when z < fall_fraction z0, 2 after episode_steps
 *
 * z is the root's height (qpos[2]), z0 the model's (qpos0[2]). Both VJPs
 * are exact (bcg's test_sdk checks them against central finite differences
 * and trains a few iterations with this plugin). The state adjoint x_bar is in
 * tangent coordinates [2 nv]: the root's world translation is its first three
 * entries. Runtime failures go through the host's error channel. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <bcg/env.h>
#include <bcg/model.h>
#include <bcg/plugin.h>
#include <bcg/rng.h>

typedef struct hold {
  const bcg_services *svc;
  bcg_env *env;
  int nenv, nq, nv, nu, nx, odim;
  double z0, width, vel_cost, act_cost, fall, noise;
  long steps;
} hold;

static void *create(const bcg_services *svc, const bcg_params *p, bcg_env *env, char *err, size_t errlen) {
  const bcg_mdata *m = &env->model->m;
  if (m->njnt < 1 || m->jnt_type[0] != BCG_JNT_FREE) {
    snprintf(err, errlen, "hold_height: the model's first joint must be a free root");
    return NULL;
  }
  for (int j = 1; j < m->njnt; j++)
    if (m->jnt_type[j] != BCG_JNT_HINGE && m->jnt_type[j] != BCG_JNT_SLIDE) {
      snprintf(err, errlen, "hold_height: joint %d is not a hinge or a slide", j);
      return NULL;
    }
  hold *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->svc = svc;
  s->env = env;
  s->nenv = env->nenv, s->nq = env->nq, s->nv = env->nv, s->nu = env->nu, s->nx = env->nx;
  s->odim = 1 + (s->nq - 7) + s->nv;
  s->z0 = m->qpos0[2];
  s->width = svc->get_real(p, "width");
  s->vel_cost = svc->get_real(p, "vel_cost");
  s->act_cost = svc->get_real(p, "act_cost");
  s->fall = svc->get_real(p, "fall_fraction") * s->z0;
  s->noise = svc->get_real(p, "noise");
  s->steps = svc->get_int(p, "episode_steps");
  return s;
}

static void destroy(void *p) { free(p); }
static int obs_dim(const void *p) { return ((const hold *)p)->odim; }
static int act_dim(const void *p) { return ((const hold *)p)->nu; }

/* the reference pose with seeded noise on the joints and velocities */
static int reset(void *p, const int *envs, int n, uint64_t draw, bcg_real *x, bcg_task_clock *clk) {
  hold *s = p;
  const bcg_mdata *m = &s->env->model->m;
  for (int i = 0; i < n; i++) {
    int e = envs[i];
    if (e < 0 || e >= s->nenv) {
      if (BCG_SVC_HAS(s->svc, error)) s->svc->error(1, "reset: environment %d outside [0, %d)", e, s->nenv);
      return -1;
    }
    bcg_real *q = x + (size_t)e * s->nx, *u = q + s->nq;
    for (int c = 0; c < s->nq; c++) q[c] = m->qpos0[c];
    for (int c = 7; c < s->nq; c++)
      q[c] += (bcg_real)(s->noise * bcg_rng_normal(s->env->seed, BCG_RNG_RESET, (uint32_t)e, (uint32_t)draw, (uint32_t)c));
    for (int d = 0; d < s->nv; d++) u[d] = 0;
    clk[e].t = 0, clk[e].flags = 0, clk[e].phase = 0;
  }
  return 0;
}

static int observe(void *p, const bcg_real *x, const bcg_real *prev_a, const bcg_task_clock *clk, bcg_real *obs) {
  hold *s = p;
  for (int e = 0; e < s->nenv; e++) {
    const bcg_real *q = x + (size_t)e * s->nx, *u = q + s->nq;
    bcg_real *o = obs + (size_t)e * s->odim;
    o[0] = (bcg_real)(q[2] - s->z0);
    for (int c = 7; c < s->nq; c++) o[1 + c - 7] = q[c];
    for (int d = 0; d < s->nv; d++) o[1 + s->nq - 7 + d] = (bcg_real)0.1 * u[d];
  }
  return 0;
}

static int observe_vjp(void *p, const bcg_real *x, const bcg_real *prev_a, const bcg_task_clock *clk,
                       const bcg_real *ob, bcg_real *xb, bcg_real *pab) {
  hold *s = p;
  for (int e = 0; e < s->nenv; e++) {
    const bcg_real *o = ob + (size_t)e * s->odim;
    bcg_real *b = xb + (size_t)e * 2 * s->nv;
    b[2] += o[0];                                                        /* root z: tangent 2 */
    for (int c = 7; c < s->nq; c++) b[c - 1] += o[1 + c - 7];            /* hinge/slide q: tangent c - 1 */
    for (int d = 0; d < s->nv; d++) b[s->nv + d] += (bcg_real)0.1 * o[1 + s->nq - 7 + d];
  }
  return 0;
}

static int reward(void *p, const bcg_real *x, const bcg_real *a, const bcg_real *prev_a, const bcg_task_clock *clk,
                  bcg_real *rew, int *done) {
  hold *s = p;
  for (int e = 0; e < s->nenv; e++) {
    const bcg_real *q = x + (size_t)e * s->nx, *u = q + s->nq, *ae = a + (size_t)e * s->nu;
    double dz = (q[2] - s->z0) / s->width, r = exp(-dz * dz);
    for (int d = 0; d < s->nv; d++) r -= s->vel_cost * u[d] * u[d];
    for (int i = 0; i < s->nu; i++) r -= s->act_cost * ae[i] * ae[i];
    rew[e] = (bcg_real)r;
    done[e] = q[2] < s->fall ? 1 : (clk[e].t >= s->steps ? 2 : 0);
  }
  return 0;
}

static int reward_vjp(void *p, const bcg_real *x, const bcg_real *a, const bcg_real *prev_a,
                      const bcg_task_clock *clk, const bcg_real *rb, bcg_real *xb, bcg_real *ab, bcg_real *pab) {
  hold *s = p;
  for (int e = 0; e < s->nenv; e++) {
    const bcg_real *q = x + (size_t)e * s->nx, *u = q + s->nq, *ae = a + (size_t)e * s->nu;
    bcg_real *b = xb + (size_t)e * 2 * s->nv;
    double dz = (q[2] - s->z0) / s->width, g = rb[e];
    b[2] += (bcg_real)(g * exp(-dz * dz) * (-2 * dz / s->width));
    for (int d = 0; d < s->nv; d++) b[s->nv + d] += (bcg_real)(g * -2 * s->vel_cost * u[d]);
    if (ab)
      for (int i = 0; i < s->nu; i++) ab[(size_t)e * s->nu + i] += (bcg_real)(g * -2 * s->act_cost * ae[i]);
  }
  return 0;
}

static const bcg_key_spec keys[] = {
    {"width", BCG_KEY_REAL, "0.1", 1e-6, 100, NULL, "height error (m) at which the reward's first term is 1/e"},
    {"vel_cost", BCG_KEY_REAL, "0.001", 0, 100, NULL, "reward penalty per (velocity unit)^2"},
    {"act_cost", BCG_KEY_REAL, "0.001", 0, 100, NULL, "reward penalty per action^2"},
    {"fall_fraction", BCG_KEY_REAL, "0.6", 0, 1, NULL, "terminate below this fraction of the reset height"},
    {"noise", BCG_KEY_REAL, "0.02", 0, 1, NULL, "joint-angle noise of the reset (rad)"},
    {"episode_steps", BCG_KEY_INT, "500", 1, 1e7, NULL, "control steps per episode (time limit)"},
};

static const bcg_task_ops ops = {sizeof(bcg_task_ops), create, destroy, obs_dim, act_dim, reset, observe,
                                 observe_vjp, reward, reward_vjp, NULL, NULL, NULL, NULL, NULL};

static const bcg_plugin_desc desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_TASK, "hold_height", "keep a floating robot's root at its reset height (SDK example)"),
    keys, BCG_NKEYS(keys), BCG_CAP_DIFFERENTIABLE | BCG_CAP_NEEDS_FLOOR, &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }
