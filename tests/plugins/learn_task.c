/* learn_task - a small differentiable task for the learners' tests and
 * learning checks (not a product task): swing up and balance the hinge
 * pendulum of tests/models/pendulum.xml (q = 0 upright).
 *
 *   observation  (cos q, sin q, 0.1 u, prev_a)               obs_dim = 3 + nu
 *   reward       cos(q - phase) - vel_cost u^2 - act_cost |a|^2 - rate_cost |a - prev_a|^2
 *                (at most 1 per step; prev_a: the previous action, 0 after a reset)
 *   done         2 (time limit) at episode_length steps; 1 when |u| exceeds
 *                terminate_speed (> 0); NaN injection for the NaN tests
 *   reset        q ~ U(-init_angle, init_angle), u ~ U(-init_speed, init_speed);
 *                the clock's phase (the episode's target angle) ~ U(-target_angle,
 *                target_angle), 0 by default (not drawn then)
 *   step_sleep_ms  a pause in every reward call, repeated while the file
 *                hold_file exists (the file <hold_file>.<pid> then says that
 *                the process is held): a slow run, held inside its first
 *                iteration as long as a test wants (bcg sweep stopped midway)
 *
 * Exact VJPs of observe and reward. Built into build/tests/plugins/ (not
 * linked against libbcg). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bcg/env.h"
#include "bcg/plugin.h"
#include "bcg/rng.h"

typedef struct self {
  bcg_env *env;
  int nenv, nx, nu, ep_len;
  double init_angle, init_speed, vel_cost, act_cost, rate_cost, target_angle, term_speed;
  int nan_env, nan_step, nan_obs, sleep_ms;
  char hold[512];
} self;

static void *create(const bcg_services *svc, const bcg_params *p, bcg_env *env, char *err, size_t errlen) {
  if (!env || env->nq != 1 || env->nv != 1 || env->nu < 1) {
    snprintf(err, errlen, "learn_task: needs a model with one hinge and an actuator (tests/models/pendulum.xml)");
    return NULL;
  }
  self *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->env = env;
  s->nenv = env->nenv, s->nx = env->nx, s->nu = env->nu;
  s->ep_len = (int)svc->get_int(p, "episode_length");
  s->init_angle = svc->get_real(p, "init_angle");
  s->init_speed = svc->get_real(p, "init_speed");
  s->vel_cost = svc->get_real(p, "vel_cost");
  s->act_cost = svc->get_real(p, "act_cost");
  s->rate_cost = svc->get_real(p, "rate_cost");
  s->target_angle = svc->get_real(p, "target_angle");
  s->term_speed = svc->get_real(p, "terminate_speed");
  s->nan_env = (int)svc->get_int(p, "nan_env");
  s->nan_step = (int)svc->get_int(p, "nan_step");
  s->nan_obs = strcmp(svc->get_string(p, "nan_what"), "obs") == 0;
  s->sleep_ms = (int)svc->get_int(p, "step_sleep_ms");
  snprintf(s->hold, sizeof s->hold, "%s", svc->get_string(p, "hold_file"));
  return s;
}
static void destroy(void *p) { free(p); }
static int obs_dim(const void *p) { return 3 + ((const self *)p)->nu; }
static int act_dim(const void *p) { return ((const self *)p)->nu; }

static int reset(void *p, const int *envs, int n, uint64_t draw, bcg_real *x, bcg_task_clock *clk) {
  self *s = p;
  for (int i = 0; i < n; i++) {
    int e = envs[i];
    bcg_real r[2];
    bcg_rng_fill_uniform(r, 2, s->env->seed, BCG_RNG_RESET, (uint32_t)e, (uint32_t)draw);
    x[(size_t)e * s->nx] = (bcg_real)((2 * r[0] - 1) * s->init_angle);
    x[(size_t)e * s->nx + 1] = (bcg_real)((2 * r[1] - 1) * s->init_speed);
    double ph = 0;
    if (s->target_angle > 0)
      ph = (2 * (double)bcg_rng_uniform(s->env->seed, BCG_RNG_RESET, (uint32_t)e, (uint32_t)draw, 2) - 1) *
           s->target_angle;
    clk[e] = (bcg_task_clock){0, 0, ph};
  }
  return 0;
}

static int observe(void *p, const bcg_real *x, const bcg_real *prev_a, const bcg_task_clock *clk, bcg_real *obs) {
  self *s = p;
  int od = 3 + s->nu;
  for (int e = 0; e < s->nenv; e++) {
    const bcg_real *xe = x + (size_t)e * s->nx;
    bcg_real *o = obs + (size_t)e * od;
    o[0] = cos(xe[0]);
    o[1] = sin(xe[0]);
    o[2] = (bcg_real)0.1 * xe[1];
    for (int j = 0; j < s->nu; j++) o[3 + j] = prev_a[(size_t)e * s->nu + j];
    if (s->nan_obs && e == s->nan_env && clk[e].t == s->nan_step) o[1] = NAN;
  }
  return 0;
}

static int observe_vjp(void *p, const bcg_real *x, const bcg_real *prev_a, const bcg_task_clock *clk,
                       const bcg_real *ob, bcg_real *xb, bcg_real *ab) {
  self *s = p;
  int od = 3 + s->nu;
  for (int e = 0; e < s->nenv; e++) {
    const bcg_real *xe = x + (size_t)e * s->nx, *o = ob + (size_t)e * od;
    xb[(size_t)e * 2] += -sin(xe[0]) * o[0] + cos(xe[0]) * o[1];
    xb[(size_t)e * 2 + 1] += (bcg_real)0.1 * o[2];
    if (ab)
      for (int j = 0; j < s->nu; j++) ab[(size_t)e * s->nu + j] += o[3 + j];
  }
  return 0;
}

static int reward(void *p, const bcg_real *x, const bcg_real *a, const bcg_real *prev_a, const bcg_task_clock *clk,
                  bcg_real *rew, int *done) {
  self *s = p;
  if (s->sleep_ms > 0) {
    struct timespec ts = {s->sleep_ms / 1000, (long)(s->sleep_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    if (s->hold[0] && access(s->hold, F_OK) == 0) {
      char mark[600]; /* <hold_file>.<pid>: this process is held inside an iteration */
      snprintf(mark, sizeof mark, "%s.%ld", s->hold, (long)getpid());
      FILE *f = fopen(mark, "w");
      if (f) fclose(f);
      while (access(s->hold, F_OK) == 0) nanosleep(&ts, NULL);
    }
  }
  for (int e = 0; e < s->nenv; e++) {
    const bcg_real *xe = x + (size_t)e * s->nx;
    double r = cos(xe[0] - clk[e].phase) - s->vel_cost * xe[1] * xe[1];
    for (int j = 0; j < s->nu; j++) r -= s->act_cost * a[(size_t)e * s->nu + j] * a[(size_t)e * s->nu + j];
    if (s->rate_cost > 0)
      for (int j = 0; j < s->nu; j++) {
        double d = a[(size_t)e * s->nu + j] - (prev_a ? prev_a[(size_t)e * s->nu + j] : 0);
        r -= s->rate_cost * d * d;
      }
    if (!s->nan_obs && e == s->nan_env && clk[e].t == s->nan_step) r = NAN;
    rew[e] = (bcg_real)r;
    done[e] = 0;
    if (s->term_speed > 0 && fabs(xe[1]) > s->term_speed) done[e] = 1;
    else if (clk[e].t >= s->ep_len) done[e] = 2;
  }
  return 0;
}

static int reward_vjp(void *p, const bcg_real *x, const bcg_real *a, const bcg_real *prev_a,
                      const bcg_task_clock *clk, const bcg_real *rb, bcg_real *xb, bcg_real *ab, bcg_real *pab) {
  self *s = p;
  for (int e = 0; e < s->nenv; e++) {
    const bcg_real *xe = x + (size_t)e * s->nx;
    xb[(size_t)e * 2] += -sin(xe[0] - clk[e].phase) * rb[e];
    xb[(size_t)e * 2 + 1] += -2 * s->vel_cost * xe[1] * rb[e];
    for (int j = 0; j < s->nu; j++) {
      size_t i = (size_t)e * s->nu + j;
      double d = a[i] - (prev_a ? prev_a[i] : 0);
      if (ab) ab[i] += (-2 * s->act_cost * a[i] - 2 * s->rate_cost * d) * rb[e];
      if (pab) pab[i] += 2 * s->rate_cost * d * rb[e];
    }
  }
  return 0;
}

static const bcg_key_spec keys[] = {
    {"episode_length", BCG_KEY_INT, "100", 1, 1e6, NULL, "control steps per episode (time limit, done = 2)"},
    {"init_angle", BCG_KEY_REAL, "3.14159", 0, 10, NULL, "initial angle ~ U(-init_angle, init_angle) (rad)"},
    {"init_speed", BCG_KEY_REAL, "0.5", 0, 100, NULL, "initial speed ~ U(-init_speed, init_speed) (rad/s)"},
    {"vel_cost", BCG_KEY_REAL, "0.01", 0, 100, NULL, "reward penalty per (rad/s)^2"},
    {"act_cost", BCG_KEY_REAL, "0.01", 0, 100, NULL, "reward penalty per action^2"},
    {"rate_cost", BCG_KEY_REAL, "0", 0, 100, NULL, "reward penalty per (a - prev_a)^2 (action rate)"},
    {"target_angle", BCG_KEY_REAL, "0", 0, 10, NULL,
     "per-episode target angle (the clock's phase) ~ U(-target_angle, target_angle); 0: upright"},
    {"terminate_speed", BCG_KEY_REAL, "0", 0, 1e6, NULL, "terminate (done = 1) above this speed (0: never)"},
    {"nan_env", BCG_KEY_INT, "-1", -1, 1e6, NULL, "inject a NaN into this environment (-1: never)"},
    {"nan_step", BCG_KEY_INT, "5", 0, 1e6, NULL, "... at this episode step"},
    {"nan_what", BCG_KEY_CHOICE, "reward", 0, 0, "reward|obs", "... into its reward or its observation"},
    {"step_sleep_ms", BCG_KEY_INT, "0", 0, 10000, NULL, "pause this long in every reward call (a slow run, for tests)"},
    {"hold_file", BCG_KEY_STRING, "", 0, 0, NULL, "step_sleep_ms > 0: the pause lasts while this file exists (and <file>.<pid> is made)"},
};

/* tests/plugins/old_abi_task.c builds this task as a plugin built against an
 * older plugin.h: a table that ends at reward_vjp, with poison beyond it */
#ifdef LEARN_TASK_OLD_ABI
#include <stdlib.h>
static int poison(void) { abort(); }
#define LEARN_TASK_NAME "old_abi_task"
#define LEARN_TASK_SIZE ((uint32_t)(offsetof(bcg_task_ops, reward_vjp) + sizeof(void *)))
#define LEARN_TASK_TAIL (void *)poison, (void *)poison, (void *)poison, (void *)poison, (void *)poison, (void *)poison, (void *)poison
#else
#define LEARN_TASK_NAME "learn_task"
#define LEARN_TASK_SIZE ((uint32_t)sizeof(bcg_task_ops))
#define LEARN_TASK_TAIL NULL, NULL, NULL, NULL, NULL, NULL, NULL
#endif
static const bcg_task_ops ops = {LEARN_TASK_SIZE, create, destroy, obs_dim, act_dim, reset, observe,
                                 observe_vjp, reward, reward_vjp, LEARN_TASK_TAIL};

static const bcg_plugin_desc desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_TASK, LEARN_TASK_NAME, "pendulum swing-up and balance (learners' test task)"),
    keys, BCG_NKEYS(keys), BCG_CAP_DIFFERENTIABLE, &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }
