/* test_exact_estimator - the exact VJP of every control step, for the
 * learners' tests (so they do not depend on estimators/autodiff.c).
 *
 * forward(t) steps the whole batch with bcg_env_step and keeps the step's
 * tape (one state per substep) and its actions in slot t; backward(t) replays
 * them with bcg_env_step_vjp and reads nothing else. With horizon 0 it runs
 * forward only, without a tape. Built into build/tests/plugins/ (not linked
 * against libbcg: its symbols come from the process that loads it).
 * fail_backward_at = t makes backward(t) fail through the error channel
 * (bcg_services.error), for test_cli. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/env.h"
#include "bcg/plugin.h"

typedef struct self {
  long backward_calls; /* since begin() */
  const bcg_services *svc;
  long fail_at;
  bcg_env *env;
  int horizon;
  size_t tape_n;
  bcg_real *tape, *act;
  bcg_estimator_stats st;
} self;

static void destroy(void *p) {
  self *s = p;
  if (!s) return;
  free(s->tape);
  free(s->act);
  free(s);
}

static void *create(const bcg_services *svc, const bcg_params *params, bcg_env *env, int horizon, char *err,
                    size_t errlen) {
  if (!env || horizon < 0) {
    snprintf(err, errlen, "test_exact_estimator: needs an env and a horizon >= 0");
    return NULL;
  }
  self *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->svc = svc;
  s->fail_at = svc->get_int(params, "fail_backward_at");
  s->env = env;
  s->horizon = horizon;
  s->tape_n = bcg_env_tape_size(env, env->nenv);
  if (horizon > 0) {
    s->tape = malloc(sizeof(bcg_real) * s->tape_n * (size_t)horizon);
    s->act = malloc(sizeof(bcg_real) * (size_t)env->nenv * env->nu * (size_t)horizon);
    if (!s->tape || !s->act) {
      snprintf(err, errlen, "test_exact_estimator: out of memory");
      destroy(s);
      return NULL;
    }
  }
  return s;
}

static int begin(void *p) {
  ((self *)p)->backward_calls = 0;
  return 0;
}

static int forward(void *p, int t, const bcg_real *x, const bcg_real *a, bcg_real *xn) {
  self *s = p;
  int n = s->env->nenv, nu = s->env->nu;
  bcg_real *tape = NULL;
  if (t >= 0 && t < s->horizon) {
    tape = s->tape + (size_t)t * s->tape_n;
    memcpy(s->act + (size_t)t * n * nu, a, sizeof(bcg_real) * (size_t)n * nu);
  }
  int rc = bcg_env_step(s->env, n, x, a, xn, tape);
  s->st.samples += (uint64_t)n;
  s->st.transitions += (uint64_t)n;
  return rc;
}

static int backward(void *p, int t, const bcg_real *xn_bar, bcg_real *x_bar, bcg_real *a_bar) {
  self *s = p;
  if (t < 0 || t >= s->horizon) return -1;
  s->backward_calls++;
  if (t == s->fail_at) {
    if (BCG_SVC_HAS(s->svc, error)) s->svc->error(7, "adjoint of step %d not finite (fail_backward_at)", t);
    return -1;
  }
  int n = s->env->nenv, nu = s->env->nu;
  return bcg_env_step_vjp(s->env, n, s->tape + (size_t)t * s->tape_n, s->act + (size_t)t * n * nu, xn_bar, x_bar,
                          a_bar);
}

static int reset_envs(void *p, const int *envs, int n) { return 0; }
static void stats(const void *p, bcg_estimator_stats *out) { *out = ((const self *)p)->st; }

/* per iteration: backward calls since begin() (curve est_backward_calls) */
static int log_values(void *p, const char **names, double *values, int cap) {
  self *s = p;
  if (cap < 1) return 0;
  names[0] = "backward_calls", values[0] = (double)s->backward_calls;
  return 1;
}

static const bcg_estimator_ops ops = {sizeof(bcg_estimator_ops), create, destroy, begin, forward, backward,
                                      reset_envs, stats,
                                      NULL, NULL /* save, load: no state to checkpoint */, log_values,
                                      NULL, NULL /* forward_cuda, backward_cuda */};

static const bcg_key_spec keys[] = {
    {"fail_backward_at", BCG_KEY_INT, "-1", -1, 1e9, NULL, "backward of this step fails (-1: never)"},
};

static const bcg_plugin_desc desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_ESTIMATOR, "test_exact_estimator", "exact step VJPs with a tape (test plugin)"),
    keys, BCG_NKEYS(keys), BCG_CAP_DIFFERENTIABLE, &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }
