/* estimators/truncate.c - horizon truncation at stiff contact (docs/design.md
 * section 6.4).
 *
 * Forward is plain autodiff: every environment steps in one batch with a tape.
 * A transition is stiff when the largest normal contact force of the control
 * step out of x_t (bcg_env_diagnostics' maxfn[e], over its substeps) exceeds
 * force_threshold -- the same trigger as bcg. In the backward pass the state
 * path of a stiff transition is cut: x_bar_t of that environment is exactly
 * zero (it receives nothing through x_{t+1}). The action path of the step,
 * a_bar_t += (d x_{t+1} / d a_t)^T x_bar_{t+1}, is kept when keep_action_grad
 * is true, so the policy still learns from the immediate effect of its action.
 * Gradients entering x_t from elsewhere (rewards, observations) are the
 * learner's and are not touched. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/env.h"
#include "bcg/plugin.h"

typedef struct truncate {
  bcg_env *env;
  int horizon;
  double threshold;
  int keep_action;
  size_t tape_n;
  bcg_real *tape;          /* [horizon][tape_n] */
  bcg_real *act;           /* [horizon][nenv][nu] */
  unsigned char *stiff;    /* [horizon][nenv] */
  unsigned char *recorded; /* [horizon] */
  bcg_real *abuf;          /* [nenv][nu] action adjoint of one step (keep_action_grad = false) */
  bcg_estimator_stats st;
} truncate_est;

static void tr_destroy(void *p) {
  truncate_est *s = p;
  if (!s) return;
  free(s->tape);
  free(s->act);
  free(s->stiff);
  free(s->recorded);
  free(s->abuf);
  free(s);
}

static void *tr_create(const bcg_services *svc, const bcg_params *params, bcg_env *env, int horizon, char *err,
                       size_t errlen) {
  if (!env || horizon < 0) {
    if (errlen) snprintf(err, errlen, "truncate: needs an environment and a horizon >= 0");
    return NULL;
  }
  truncate_est *s = calloc(1, sizeof *s);
  if (!s) goto oom;
  s->env = env;
  s->horizon = horizon;
  s->threshold = params ? svc->get_real(params, "force_threshold") : 400.0;
  s->keep_action = params ? svc->get_bool(params, "keep_action_grad") : 1;
  s->tape_n = bcg_env_tape_size(env, env->nenv);
  int n = env->nenv;
  s->abuf = malloc(sizeof(bcg_real) * (size_t)n * env->nu);
  if (!s->abuf) goto oom;
  if (horizon > 0) {
    s->tape = malloc(sizeof(bcg_real) * s->tape_n * (size_t)horizon);
    s->act = malloc(sizeof(bcg_real) * (size_t)n * env->nu * (size_t)horizon);
    s->stiff = calloc((size_t)horizon * n, 1);
    s->recorded = calloc((size_t)horizon, 1);
    if (!s->tape || !s->act || !s->stiff || !s->recorded) goto oom;
  }
  return s;
oom:
  if (errlen) snprintf(err, errlen, "truncate: out of memory for a horizon of %d steps", horizon);
  tr_destroy(s);
  return NULL;
}

static int tr_begin(void *p) {
  truncate_est *s = p;
  if (s->horizon > 0) memset(s->recorded, 0, (size_t)s->horizon);
  return 0;
}

static int tr_forward(void *p, int t, const bcg_real *x, const bcg_real *a, bcg_real *xn) {
  truncate_est *s = p;
  bcg_env *env = s->env;
  int n = env->nenv;
  int taped = t >= 0 && t < s->horizon;
  bcg_real *tape = taped ? s->tape + s->tape_n * (size_t)t : NULL;
  int rc = bcg_env_step(env, n, x, a, xn, tape);
  const bcg_env_diag dg = bcg_env_diagnostics(env);
  uint64_t trig = 0;
  for (int e = 0; e < n; e++) {
    int st = dg.maxfn[e] > s->threshold;
    trig += (uint64_t)st;
    if (taped) s->stiff[(size_t)t * n + e] = (unsigned char)st;
  }
  if (taped) {
    memcpy(s->act + (size_t)t * n * env->nu, a, sizeof(bcg_real) * (size_t)n * env->nu);
    s->recorded[t] = rc == 0;
  }
  s->st.samples += (uint64_t)n;
  s->st.transitions += (uint64_t)n;
  s->st.triggered += trig;
  return rc;
}

static int tr_backward(void *p, int t, const bcg_real *xn_bar, bcg_real *x_bar, bcg_real *a_bar) {
  truncate_est *s = p;
  bcg_env *env = s->env;
  if (t < 0 || t >= s->horizon || !s->recorded[t]) return -1;
  int n = env->nenv, nu = env->nu, nv = env->nv;
  const unsigned char *stiff = s->stiff + (size_t)t * n;
  int any = 0;
  for (int e = 0; e < n; e++) any |= stiff[e];
  const bcg_real *tape = s->tape + s->tape_n * (size_t)t, *act = s->act + (size_t)t * n * nu;
  int rc;
  if (!any || s->keep_action) {
    /* accumulate straight into a_bar: bitwise the autodiff arithmetic */
    rc = bcg_env_step_vjp(env, n, tape, act, xn_bar, x_bar, a_bar);
  } else {
    memset(s->abuf, 0, sizeof(bcg_real) * (size_t)n * nu);
    rc = bcg_env_step_vjp(env, n, tape, act, xn_bar, x_bar, s->abuf);
    for (int e = 0; e < n; e++)
      if (!stiff[e])
        for (int i = 0; i < nu; i++) a_bar[(size_t)e * nu + i] += s->abuf[(size_t)e * nu + i];
  }
  /* the cut: exactly zero through x_{t+1} */
  for (int e = 0; e < n; e++)
    if (stiff[e]) memset(x_bar + (size_t)e * 2 * nv, 0, sizeof(bcg_real) * 2 * (size_t)nv);
  return rc;
}

static int tr_reset_envs(void *p, const int *envs, int n) {
  (void)p;
  (void)envs;
  (void)n;
  return 0;
}

static void tr_stats(const void *p, bcg_estimator_stats *out) { *out = ((const truncate_est *)p)->st; }

static const bcg_key_spec keys[] = {
    {"force_threshold", BCG_KEY_REAL, "400", 0, 1e300, NULL,
     "a control step is stiff when a normal contact force exceeds this (N); the BCG paper's trigger tau = 400 N"},
    {"keep_action_grad", BCG_KEY_BOOL, "true", 0, 0, NULL,
     "keep the action gradient of a stiff step (only the state path is cut); false cuts both"},
};

static const bcg_estimator_ops ops = {sizeof(bcg_estimator_ops), tr_create, tr_destroy, tr_begin, tr_forward,
                                      tr_backward, tr_reset_envs, tr_stats,
                                      NULL, NULL /* save, load: no state to checkpoint */, NULL /* log_values */,
                                      NULL, NULL /* no device entries */};

static const bcg_plugin_desc desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_ESTIMATOR, "truncate",
                      "autodiff with the state adjoint cut at stiff contact transitions (truncation baseline)"),
    keys, BCG_NKEYS(keys), BCG_CAP_DIFFERENTIABLE, &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }
