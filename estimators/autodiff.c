/* estimators/autodiff.c - plain autodiff (docs/design.md section 6.2): the
 * exact vector-Jacobian product of every control step.
 *
 * forward(t) steps all environments as one batch with bcg_env_step and keeps
 * the step's tape (one state per substep) and its actions in slot t; the
 * backward of step t replays that tape with bcg_env_step_vjp. Nothing else is
 * read in the backward pass. Steps with t >= horizon run without a tape
 * (forward-only use, e.g. PPO with horizon 0). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/env.h"
#include "bcg/plugin.h"

typedef struct autodiff {
  bcg_env *env;
  int horizon;
  size_t tape_n;    /* reals of one step's tape */
  bcg_real *tape;   /* [horizon][tape_n] */
  bcg_real *act;    /* [horizon][nenv][nu] actions of each taped step */
  unsigned char *recorded; /* [horizon] step t has a tape since begin() */
  bcg_estimator_stats st;
} autodiff;

static void ad_destroy(void *p) {
  autodiff *s = p;
  if (!s) return;
  free(s->tape);
  free(s->act);
  free(s->recorded);
  free(s);
}

static void *ad_create(const bcg_services *svc, const bcg_params *params, bcg_env *env, int horizon, char *err,
                       size_t errlen) {
  (void)svc;
  (void)params;
  if (!env || horizon < 0) {
    if (errlen) snprintf(err, errlen, "autodiff: needs an environment and a horizon >= 0");
    return NULL;
  }
  autodiff *s = calloc(1, sizeof *s);
  if (!s) goto oom;
  s->env = env;
  s->horizon = horizon;
  s->tape_n = bcg_env_tape_size(env, env->nenv);
  if (horizon > 0) {
    s->tape = malloc(sizeof(bcg_real) * s->tape_n * (size_t)horizon);
    s->act = malloc(sizeof(bcg_real) * (size_t)env->nenv * env->nu * (size_t)horizon);
    s->recorded = calloc((size_t)horizon, 1);
    if (!s->tape || !s->act || !s->recorded) goto oom;
  }
  return s;
oom:
  if (errlen) snprintf(err, errlen, "autodiff: out of memory for a horizon of %d steps", horizon);
  ad_destroy(s);
  return NULL;
}

static int ad_begin(void *p) {
  autodiff *s = p;
  if (s->horizon > 0) memset(s->recorded, 0, (size_t)s->horizon);
  return 0;
}

static int ad_forward(void *p, int t, const bcg_real *x, const bcg_real *a, bcg_real *xn) {
  autodiff *s = p;
  bcg_env *env = s->env;
  int n = env->nenv;
  int taped = t >= 0 && t < s->horizon;
  bcg_real *tape = taped ? s->tape + s->tape_n * (size_t)t : NULL;
  int rc = bcg_env_step(env, n, x, a, xn, tape);
  if (taped) {
    memcpy(s->act + (size_t)t * n * env->nu, a, sizeof(bcg_real) * (size_t)n * env->nu);
    s->recorded[t] = rc == 0;
  }
  s->st.samples += (uint64_t)n;
  s->st.transitions += (uint64_t)n;
  return rc;
}

static int ad_backward(void *p, int t, const bcg_real *xn_bar, bcg_real *x_bar, bcg_real *a_bar) {
  autodiff *s = p;
  bcg_env *env = s->env;
  if (t < 0 || t >= s->horizon || !s->recorded[t]) return -1;
  int n = env->nenv;
  return bcg_env_step_vjp(env, n, s->tape + s->tape_n * (size_t)t, s->act + (size_t)t * n * env->nu, xn_bar, x_bar,
                          a_bar);
}

static int ad_reset_envs(void *p, const int *envs, int n) {
  (void)p;
  (void)envs;
  (void)n;
  return 0; /* no state across steps */
}

static void ad_stats(const void *p, bcg_estimator_stats *out) { *out = ((const autodiff *)p)->st; }

static const bcg_estimator_ops ops = {sizeof(bcg_estimator_ops), ad_create, ad_destroy, ad_begin, ad_forward,
                                      ad_backward, ad_reset_envs, ad_stats,
                                      NULL, NULL /* save, load: no state to checkpoint */, NULL /* log_values */,
                                      NULL, NULL /* no device entries */};

static const bcg_plugin_desc desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_ESTIMATOR, "autodiff", "exact VJP of every control step (plain autodiff)"),
    NULL, 0, BCG_CAP_DIFFERENTIABLE, &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }
