/* learners/learner_util.h - small helpers shared by shac.c and ppo.c:
 * binding the trainer, building MLPs from keys, buffers, observation and
 * normalisation, the mean action, the common iteration statistics, checkpoint
 * I/O of networks, optimisers, normalisers and the carried environment state,
 * finiteness checks, and the plugin descriptor. Header-only so that each
 * learner stays one plugin file. */
#ifndef BCG_LEARNER_UTIL_H
#define BCG_LEARNER_UTIL_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/config.h"
#include "bcg/env.h"
#include "bcg/nn.h"
#include "bcg/plugin.h"
#include "bcg/runlog.h"
#include "bcg/train.h"

static inline void *lu_calloc(size_t n, size_t size) { return calloc(n ? n : 1, size); }

/* p = n zeroed elements of *p's type (never NULL for n = 0 unless out of memory) */
#define ALLOC(p, n) ((p) = lu_calloc((size_t)(n), sizeof *(p)))

static inline void lu_free_all(void *const *bufs, size_t n) {
  for (size_t i = 0; i < n; i++) free(bufs[i]);
}

/* The trainer's environment, task and estimator into learner s (a struct with
 * the fields svc, tr, env, task_ops, task, est_ops, est, N, nx, nu, od). */
#define LU_BIND_TRAINER(s, svc_, tr_)             \
  do {                                            \
    (s)->svc = (svc_);                            \
    (s)->tr = (tr_);                              \
    (s)->env = (tr_)->env;                        \
    (s)->task_ops = (tr_)->task_ops;              \
    (s)->task = (tr_)->task;                      \
    (s)->est_ops = (tr_)->est_ops;                \
    (s)->est = (tr_)->est;                        \
    (s)->N = (s)->env->nenv;                      \
    (s)->nx = (s)->env->nx;                       \
    (s)->nu = (s)->env->nu;                       \
    (s)->od = (s)->task_ops->obs_dim((s)->task);  \
  } while (0)

/* The learner's descriptor and entry point, from its static create, destroy,
 * iterate, save, load, act and keys. */
#define LU_LEARNER_PLUGIN(name_, descr_, caps_)                                                      \
  static const bcg_learner_ops ops = {sizeof(bcg_learner_ops), create, destroy, iterate, save, load, act}; \
  static const bcg_plugin_desc desc = {BCG_PLUGIN_HEADER(BCG_KIND_LEARNER, name_, descr_), keys,         \
                                       BCG_NKEYS(keys), caps_, &ops};                                    \
  BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }

static inline int lu_finite(const bcg_real *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite((double)x[i])) return 0;
  return 1;
}

/* MLP in -> layers -> out with the activation and LayerNorm placement named
 * by keys `activation` and `layernorm` of p (none|pre|post). */
static inline int lu_mlp(bcg_mlp *m, const bcg_services *svc, const bcg_params *p, const char *layers_key,
                         int in, int out, int extra, bcg_real extra_init, int max_batch, char *err, size_t errlen) {
  bcg_mlp_config c;
  memset(&c, 0, sizeof c);
  c.in_dim = in;
  c.out_dim = out;
  long l[BCG_MLP_MAX_HIDDEN + 1];
  int n = svc->get_list(p, layers_key, l, BCG_MLP_MAX_HIDDEN + 1);
  if (n > BCG_MLP_MAX_HIDDEN) {
    snprintf(err, errlen, "%s: at most %d hidden layers", layers_key, BCG_MLP_MAX_HIDDEN);
    return -1;
  }
  c.nhidden = n;
  for (int i = 0; i < n; i++) c.hidden[i] = (int)l[i];
  if (bcg_act_parse(svc->get_string(p, "activation"), &c.hidden_act)) {
    snprintf(err, errlen, "activation: unknown '%s'", svc->get_string(p, "activation"));
    return -1;
  }
  c.out_act = BCG_ACT_IDENTITY;
  const char *ln = svc->get_string(p, "layernorm");
  c.layernorm = !strcmp(ln, "pre") ? BCG_LN_PRE_ACT : !strcmp(ln, "post") ? BCG_LN_POST_ACT : BCG_LN_NONE;
  c.init = !strcmp(svc->get_string(p, "init"), "orthogonal") ? BCG_INIT_ORTHOGONAL : BCG_INIT_UNIFORM;
  c.init_gain = c.init == BCG_INIT_ORTHOGONAL ? (bcg_real)sqrt(2.0) : 1;
  c.init_gain_out = c.init == BCG_INIT_ORTHOGONAL ? (bcg_real)0.01 : 1;
  c.extra = extra;
  c.extra_init = extra_init;
  c.max_batch = max_batch;
  int rc = bcg_mlp_create(m, &c);
  if (rc) snprintf(err, errlen, "%s: cannot build the network: %s", layers_key, bcg_nn_strerror(rc));
  return rc ? -1 : 0;
}

/* ---- observations, normalisation, the mean action --------------------------- */

/* observations of n environments (states x, previous actions prev, clocks
 * clk) into obs [n][od]; returns -1 if the task fails, else the number of
 * environments whose observation is not finite (their indices into bad[]) */
static inline int lu_observe(const bcg_task_ops *to, void *task, int n, int od, const bcg_real *x,
                             const bcg_real *prev, const bcg_task_clock *clk, bcg_real *obs, int *bad) {
  if (to->observe(task, x, prev, clk, obs)) return -1;
  int nb = 0;
  for (int e = 0; e < n; e++)
    if (!lu_finite(obs + (size_t)e * od, (size_t)od)) bad[nb++] = e;
  return nb;
}

/* the observations of environments envs[0..n) only (rows envs[i] of obs;
 * the task's observe_envs, or its observe of all environments where it has
 * none: the same rows either way); the non-finite ones listed in bad[]
 * (their count returned, -1 on failure) */
static inline int lu_observe_envs(const bcg_task_ops *to, void *task, const int *envs, int n, int od,
                                  const bcg_real *x, const bcg_real *prev, const bcg_task_clock *clk, bcg_real *obs,
                                  int *bad) {
  if (BCG_OPS_HAS(to, bcg_task_ops, observe_envs) ? to->observe_envs(task, envs, n, x, prev, clk, obs) : to->observe(task, x, prev, clk, obs)) return -1;
  int nb = 0;
  for (int i = 0; i < n; i++)
    if (!lu_finite(obs + (size_t)envs[i] * od, (size_t)od)) bad[nb++] = envs[i];
  return nb;
}

/* dst = src (n reals; memset to 0 if src is NULL), over the threads from
 * 64k reals on: PPO copies 4096 environments' observations, states and
 * actions every control step, 10 MB in double, and zeroes its 24576-row
 * action adjoint every minibatch */
#define LU_COPY_PAR ((size_t)1 << 16)
static inline void lu_copy(bcg_real *dst, const bcg_real *src, size_t n) {
  const int nb = 32;
#pragma omp parallel for schedule(static) if (n >= LU_COPY_PAR)
  for (int b = 0; b < nb; b++) {
    size_t i0 = n * (size_t)b / nb, i1 = n * (size_t)(b + 1) / nb;
    if (src)
      memcpy(dst + i0, src + i0, (i1 - i0) * sizeof(bcg_real));
    else
      memset(dst + i0, 0, (i1 - i0) * sizeof(bcg_real));
  }
}

/* out = obs normalised by z, or a copy of obs if z is NULL (n rows of od) */
static inline void lu_normalise(const bcg_normalizer *z, const bcg_real *obs, int n, int od, bcg_real *out) {
  if (z)
    bcg_normalizer_apply(z, obs, n, out);
  else
    lu_copy(out, obs, (size_t)n * od);
}

/* mean action a [n][nu] of the actor for raw observations obs [n][od],
 * normalised by z (NULL: none), squashed by tanh if squash */
static inline int lu_act(bcg_mlp *actor, const bcg_normalizer *z, int squash, int od, int nu,
                         const bcg_real *obs, int n, bcg_real *a) {
  bcg_real *buf = malloc(sizeof(bcg_real) * (size_t)(n ? n : 1) * od);
  bcg_mlp_tape tp;
  if (!buf || bcg_mlp_tape_init(&tp, actor, n ? n : 1, NULL)) {
    free(buf);
    return -1;
  }
  lu_normalise(z, obs, n, od, buf);
  int rc = bcg_mlp_forward(actor, &tp, buf, n, a);
  if (!rc && squash)
    for (int i = 0; i < n * nu; i++) a[i] = tanh(a[i]);
  bcg_mlp_tape_free(&tp);
  free(buf);
  return rc ? -1 : 0;
}

/* ---- iteration statistics ---------------------------------------------------- */

/* what a rollout adds up for the iteration's statistics (both learners) */
typedef struct lu_sums {
  double ret, len, rew; /* finished episodes' returns and lengths; rewards */
  double loss;          /* SHAC: the actor loss */
  int episodes, nan_resets;
  long nrew;
} lu_sums;

/* the statistics both learners report alike: episodes, rewards, the policy's
 * mean std (from its log-std ls [nu]), the estimator's counters since es0
 * (es1 is read here), resets and skipped updates */
static inline void lu_stats_common(bcg_learner_stats *st, const bcg_estimator_ops *eo, void *est,
                                   const bcg_estimator_stats *es0, int episodes, double sum_ret,
                                   double sum_len, long nrew, double sum_rew, const bcg_real *ls, int nu,
                                   int nan_resets, int skipped) {
  bcg_estimator_stats es1;
  eo->stats(est, &es1);
  st->mean_return = episodes ? sum_ret / episodes : NAN;
  st->mean_ep_len = episodes ? sum_len / episodes : NAN;
  st->mean_reward = nrew ? sum_rew / (double)nrew : NAN;
  double sd = 0;
  for (int j = 0; j < nu; j++) sd += exp((double)ls[j]);
  st->action_std = sd / nu;
  uint64_t dtr = es1.transitions - es0->transitions;
  st->bundle_frac = dtr ? (double)(es1.triggered - es0->triggered) / (double)dtr : NAN;
  st->samples = es1.samples - es0->samples;
  st->nan_resets = nan_resets;
  st->episodes = episodes;
  st->skipped_updates = skipped;
}

/* ---- the rollout's tracking error (stats.track_err) -------------------------
 * For tasks with the optional tracking_error op (imitation): the mean over
 * the iteration's transitions of the task's tracking error (m) of the state
 * each transition ended in (before any reset); transitions whose error is not
 * finite (NaN resets) are left out. NaN without the op or without a finite
 * value. One call of the op per control step: a forward kinematics per
 * environment, small beside the step it follows. */
typedef struct lu_track {
  bcg_real *err; /* [N], NULL when the task has no tracking_error */
  double sum;
  long n;
} lu_track;

static inline int lu_task_has_tracking(const bcg_task_ops *to) {
  return BCG_OPS_HAS(to, bcg_task_ops, tracking_error);
}

/* 0, or -1 when out of memory */
static inline int lu_track_init(lu_track *k, const bcg_task_ops *to, int N) {
  memset(k, 0, sizeof *k);
  if (!lu_task_has_tracking(to)) return 0;
  k->err = lu_calloc((size_t)N, sizeof *k->err);
  return k->err ? 0 : -1;
}

static inline void lu_track_free(lu_track *k) {
  free(k->err);
  k->err = NULL;
}

static inline void lu_track_begin(lu_track *k) {
  k->sum = 0;
  k->n = 0;
}

/* the finite ones of the N errors in k->err into the sums */
static inline void lu_track_sum(lu_track *k, int N) {
  for (int e = 0; e < N; e++)
    if (isfinite((double)k->err[e])) k->sum += (double)k->err[e], k->n++;
}

/* the errors of N environments at states x (clocks clk already count the transition) */
static inline int lu_track_add(lu_track *k, const bcg_task_ops *to, void *task, int N, const bcg_real *x,
                               const bcg_task_clock *clk) {
  if (!k->err) return 0;
  if (to->tracking_error(task, x, clk, k->err)) return -1;
  lu_track_sum(k, N);
  return 0;
}

/* one control step's reward, tracking error (into k) and observation of
 * states x (clocks already counting the transition; a the action taken,
 * prev_a the one before): the task's reward_observe where it has it, else
 * reward, tracking_error and observe in turn (the same numbers) */
static inline int lu_step_outputs(lu_track *k, const bcg_task_ops *to, void *task, int N, const bcg_real *x,
                                  const bcg_real *a, const bcg_real *prev_a, const bcg_task_clock *clk,
                                  bcg_real *rew, int *done, bcg_real *obs) {
  if (BCG_OPS_HAS(to, bcg_task_ops, reward_observe)) {
    if (to->reward_observe(task, x, a, prev_a, clk, rew, done, k->err, obs)) return -1;
    if (k->err) lu_track_sum(k, N);
    return 0;
  }
  if (to->reward(task, x, a, prev_a, clk, rew, done) || lu_track_add(k, to, task, N, x, clk)) return -1;
  return to->observe(task, x, a, clk, obs) ? -1 : 0;
}

static inline double lu_track_mean(const lu_track *k) { return k->n ? k->sum / (double)k->n : NAN; }

/* ---- checkpoint I/O (group g); readers demand the exact size ---------------- */

static inline int lu_save_reals(int64_t g, const char *name, const bcg_real *x, size_t n) {
  char e[512];
  return bcg_h5_write_reals(g, name, x, n, e, sizeof e);
}

static inline int lu_load_reals(int64_t g, const char *name, bcg_real *x, size_t n) {
  char e[512];
  if (bcg_h5_length(g, name) != (long)n) return -1;
  return bcg_h5_read_reals(g, name, x, n, e, sizeof e) == (long)n ? 0 : -1;
}

static inline int lu_save_i64(int64_t g, const char *name, const int64_t *x, size_t n) {
  char e[512];
  return bcg_h5_write_i64(g, name, x, n, e, sizeof e);
}

static inline int lu_load_i64(int64_t g, const char *name, int64_t *x, size_t n) {
  char e[512];
  if (bcg_h5_length(g, name) != (long)n) return -1;
  return bcg_h5_read_i64(g, name, x, n, e, sizeof e) == (long)n ? 0 : -1;
}

static inline int lu_save_doubles(int64_t g, const char *name, const double *x, size_t n) {
  char e[512];
  return bcg_h5_write_doubles(g, name, x, n, e, sizeof e);
}

static inline int lu_load_doubles(int64_t g, const char *name, double *x, size_t n) {
  char e[512];
  if (bcg_h5_length(g, name) != (long)n) return -1;
  return bcg_h5_read_doubles(g, name, x, n, e, sizeof e) == (long)n ? 0 : -1;
}

static inline int lu_save_ints(int64_t g, const char *name, const int *x, size_t n) {
  int64_t *t = malloc((n ? n : 1) * sizeof *t);
  if (!t) return -1;
  for (size_t i = 0; i < n; i++) t[i] = x[i];
  int rc = lu_save_i64(g, name, t, n);
  free(t);
  return rc;
}

static inline int lu_load_ints(int64_t g, const char *name, int *x, size_t n) {
  int64_t *t = malloc((n ? n : 1) * sizeof *t);
  if (!t) return -1;
  int rc = lu_load_i64(g, name, t, n);
  for (size_t i = 0; !rc && i < n; i++) x[i] = (int)t[i];
  free(t);
  return rc;
}

/* "<prefix>/params" */
/* the task clocks of n environments as prefix/t, prefix/flags (int64) and
 * prefix/phase (double, exact) */
static inline int lu_save_clock(int64_t g, const char *prefix, const bcg_task_clock *c, size_t n) {
  char nm[256];
  int64_t *t = malloc((n ? n : 1) * sizeof *t), *f = malloc((n ? n : 1) * sizeof *f);
  double *ph = malloc((n ? n : 1) * sizeof *ph);
  int rc = !t || !f || !ph;
  for (size_t i = 0; !rc && i < n; i++) t[i] = c[i].t, f[i] = c[i].flags, ph[i] = c[i].phase;
  snprintf(nm, sizeof nm, "%s/t", prefix);
  rc = rc || lu_save_i64(g, nm, t, n);
  snprintf(nm, sizeof nm, "%s/flags", prefix);
  rc = rc || lu_save_i64(g, nm, f, n);
  snprintf(nm, sizeof nm, "%s/phase", prefix);
  rc = rc || lu_save_doubles(g, nm, ph, n);
  free(t), free(f), free(ph);
  return rc ? -1 : 0;
}

static inline int lu_load_clock(int64_t g, const char *prefix, bcg_task_clock *c, size_t n) {
  char nm[256];
  int64_t *t = malloc((n ? n : 1) * sizeof *t), *f = malloc((n ? n : 1) * sizeof *f);
  double *ph = malloc((n ? n : 1) * sizeof *ph);
  int rc = !t || !f || !ph;
  snprintf(nm, sizeof nm, "%s/t", prefix);
  rc = rc || lu_load_i64(g, nm, t, n);
  snprintf(nm, sizeof nm, "%s/flags", prefix);
  rc = rc || lu_load_i64(g, nm, f, n);
  snprintf(nm, sizeof nm, "%s/phase", prefix);
  rc = rc || lu_load_doubles(g, nm, ph, n);
  for (size_t i = 0; !rc && i < n; i++) c[i].t = (int32_t)t[i], c[i].flags = (int32_t)f[i], c[i].phase = ph[i];
  free(t), free(f), free(ph);
  return rc ? -1 : 0;
}

static inline void lu_name(char *buf, size_t len, const char *prefix, const char *what) {
  snprintf(buf, len, "%s/%s", prefix, what);
}

static inline int lu_save_mlp(int64_t g, const char *prefix, const bcg_mlp *m) {
  char n[256];
  lu_name(n, sizeof n, prefix, "params");
  return lu_save_reals(g, n, m->params, m->nparams);
}

static inline int lu_load_mlp(int64_t g, const char *prefix, bcg_mlp *m) {
  char n[256];
  lu_name(n, sizeof n, prefix, "params");
  return lu_load_reals(g, n, m->params, m->nparams);
}

static inline int lu_save_adam(int64_t g, const char *prefix, const bcg_adam *a) {
  char n[256];
  int64_t step = a->step;
  double lr = (double)a->lr;
  lu_name(n, sizeof n, prefix, "m");
  if (lu_save_reals(g, n, a->m, a->n)) return -1;
  lu_name(n, sizeof n, prefix, "v");
  if (lu_save_reals(g, n, a->v, a->n)) return -1;
  lu_name(n, sizeof n, prefix, "step");
  if (lu_save_i64(g, n, &step, 1)) return -1;
  lu_name(n, sizeof n, prefix, "lr");
  return lu_save_doubles(g, n, &lr, 1);
}

static inline int lu_load_adam(int64_t g, const char *prefix, bcg_adam *a) {
  char n[256];
  int64_t step;
  double lr;
  lu_name(n, sizeof n, prefix, "m");
  if (lu_load_reals(g, n, a->m, a->n)) return -1;
  lu_name(n, sizeof n, prefix, "v");
  if (lu_load_reals(g, n, a->v, a->n)) return -1;
  lu_name(n, sizeof n, prefix, "step");
  if (lu_load_i64(g, n, &step, 1)) return -1;
  lu_name(n, sizeof n, prefix, "lr");
  if (lu_load_doubles(g, n, &lr, 1)) return -1;
  a->step = step;
  a->lr = (bcg_real)lr;
  return 0;
}

static inline int lu_save_norm(int64_t g, const char *prefix, const bcg_normalizer *z) {
  char n[256];
  lu_name(n, sizeof n, prefix, "mean");
  if (lu_save_reals(g, n, z->mean, (size_t)z->dim)) return -1;
  lu_name(n, sizeof n, prefix, "var");
  if (lu_save_reals(g, n, z->var, (size_t)z->dim)) return -1;
  lu_name(n, sizeof n, prefix, "count");
  return lu_save_doubles(g, n, &z->count, 1);
}

static inline int lu_load_norm(int64_t g, const char *prefix, bcg_normalizer *z) {
  char n[256];
  lu_name(n, sizeof n, prefix, "mean");
  if (lu_load_reals(g, n, z->mean, (size_t)z->dim)) return -1;
  lu_name(n, sizeof n, prefix, "var");
  if (lu_load_reals(g, n, z->var, (size_t)z->dim)) return -1;
  lu_name(n, sizeof n, prefix, "count");
  return lu_load_doubles(g, n, &z->count, 1);
}

/* the environment state carried across iterations of N environments:
 * state/x [N][nx], state/clock, state/prev_a [N][nu], state/ep_return,
 * state/ep_len */
static inline int lu_save_env_state(int64_t g, int N, int nx, int nu, const bcg_real *x,
                                    const bcg_task_clock *clk, const bcg_real *prev_a, const double *ep_ret,
                                    const int64_t *ep_len) {
  return lu_save_reals(g, "state/x", x, (size_t)N * nx) || lu_save_clock(g, "state/clock", clk, N) ||
                 lu_save_reals(g, "state/prev_a", prev_a, (size_t)N * nu) ||
                 lu_save_doubles(g, "state/ep_return", ep_ret, N) || lu_save_i64(g, "state/ep_len", ep_len, N)
             ? -1
             : 0;
}

static inline int lu_load_env_state(int64_t g, int N, int nx, int nu, bcg_real *x, bcg_task_clock *clk,
                                    bcg_real *prev_a, double *ep_ret, int64_t *ep_len) {
  return lu_load_reals(g, "state/x", x, (size_t)N * nx) || lu_load_clock(g, "state/clock", clk, N) ||
                 lu_load_reals(g, "state/prev_a", prev_a, (size_t)N * nu) ||
                 lu_load_doubles(g, "state/ep_return", ep_ret, N) || lu_load_i64(g, "state/ep_len", ep_len, N)
             ? -1
             : 0;
}

/* ---- domain randomisation: re-draws at resets, checkpointed ------------------
 * Environment e's friction / masses / com offsets come from draw index
 * env->dom->draw[e]; a learner re-draws e with the task's reset draw counter
 * of the reset that started e's episode (bcg_env_randomize, whose comment
 * states when: at the reset itself without a backward pass through the
 * physics, at the horizon boundary with one). pend[e] (>= 0) holds a
 * deferred draw; lu_domain_apply re-draws those and clears them (-1). */
static inline void lu_domain_apply(bcg_env *env, int64_t *pend, int N) {
  for (int e = 0; e < N; e++)
    if (pend[e] >= 0) {
      if (env->dom) bcg_env_randomize(env, &e, 1, (uint64_t)pend[e]);
      pend[e] = -1;
    }
}

/* domain/draw and domain/clock [N] (int64) when the env has a domain */
static inline int lu_save_domain(int64_t g, const bcg_env *env) {
  const bcg_domain *d = env->dom;
  if (!d) return 0;
  int64_t *t = malloc(sizeof *t * (size_t)(d->n ? d->n : 1));
  if (!t) return -1;
  int rc = 0;
  for (int e = 0; e < d->n; e++) t[e] = (int64_t)d->draw[e];
  rc = lu_save_i64(g, "domain/draw", t, (size_t)d->n);
  for (int e = 0; e < d->n; e++) t[e] = (int64_t)d->clock[e];
  rc = rc || lu_save_i64(g, "domain/clock", t, (size_t)d->n);
  free(t);
  return rc ? -1 : 0;
}

/* restores the draws (re-drawing every environment from its saved index) and
 * the push clocks; a checkpoint without them (DR off when it was written, or
 * written before re-draws existed) leaves the creation draw 0 */
static inline int lu_load_domain(int64_t g, bcg_env *env) {
  bcg_domain *d = env->dom;
  if (!d || bcg_h5_length(g, "domain/draw") < 0) return 0;
  int64_t *t = malloc(sizeof *t * (size_t)(d->n ? d->n : 1));
  if (!t) return -1;
  int rc = lu_load_i64(g, "domain/draw", t, (size_t)d->n);
  for (int e = 0; !rc && e < d->n; e++)
    bcg_env_randomize(env, &e, 1, (uint64_t)t[e]);
  rc = rc || lu_load_i64(g, "domain/clock", t, (size_t)d->n);
  for (int e = 0; !rc && e < d->n; e++) d->clock[e] = (uint32_t)t[e];
  free(t);
  return rc ? -1 : 0;
}

/* A frozen copy of a normaliser's statistics (the iteration's constants). */
static inline int lu_norm_copy(bcg_normalizer *dst, const bcg_normalizer *src) {
  if (!dst->mean && bcg_normalizer_init(dst, src->dim, src->clip, src->count)) return -1;
  memcpy(dst->mean, src->mean, (size_t)src->dim * sizeof(bcg_real));
  memcpy(dst->var, src->var, (size_t)src->dim * sizeof(bcg_real));
  dst->count = src->count;
  dst->clip = src->clip;
  dst->var_eps = src->var_eps;
  return 0;
}

#endif
