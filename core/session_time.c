/* core/session_time.c - the task's and the estimator's share of a training
 * session's time (bcg_session_time, bcg/train.h).
 *
 * bcg_session_open hands the learner (bcg_trainer's task_ops/task and
 * est_ops/est) timing wrappers of the task and the estimator: each call is
 * forwarded to the plugin and its wall time, less the time the stepper
 * (bcg_env_time) and the networks (bcg_nn_time) spent inside it, is added
 * to a process-wide clock. So the estimator's clock holds its own work
 * (perturbations, averaging, compaction, tape bookkeeping) while the
 * physics it runs stays in time_sim / time_sim_vjp, and the parts of a
 * session's time never overlap. The loop itself, evaluation and the
 * checkpoint I/O keep the plugins' own tables (S->task_ops, S->est_ops). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/env.h"
#include "bcg/loader.h"
#include "bcg/nn.h"
#include "bcg/train.h"
#include "clock.h"
#include "plugin_err.h"
#include "session_time.h"

static uint64_t op_ns[2]; /* task, estimator */

void bcg_session_time(double *task_s, double *est_s) {
  if (task_s) *task_s = bcg_clock_s(&op_ns[0]);
  if (est_s) *est_s = bcg_clock_s(&op_ns[1]);
}

/* seconds in the stepper and the networks so far (what a wrapped call subtracts) */
static double inner_s(void) {
  double f, b, nf, nb;
  bcg_env_time(&f, &b);
  bcg_nn_time(&nf, &nb);
  return f + b + nf + nb;
}

typedef struct { uint64_t t0; double in0; } span;

static span span_begin(void) {
  span s = {bcg_mono_ns(), inner_s()};
  return s;
}

static void span_end(span s, int k) {
  double in = inner_s() - s.in0;
  int64_t own = (int64_t)(bcg_mono_ns() - s.t0) - (int64_t)(1e9 * in);
  if (own > 0) __atomic_fetch_add(&op_ns[k], (uint64_t)own, __ATOMIC_RELAXED);
}

/* ---- the task ---- */

typedef struct timed_task {
  bcg_task_ops ops; /* first: &tt->ops is the table, tt the self */
  const bcg_task_ops *in;
  void *self;
  const char *name; /* the plugin's, for error contexts */
} timed_task;

#define TT(p) ((timed_task *)(p))
#define TTC(p) ((const timed_task *)(p))
/* the call timed; a failure gets its context: kind, plugin, call (and step) */
#define TIMED_CTX(k, call, ...)                                 \
  do {                                                          \
    span sp_ = span_begin();                                    \
    int rc_ = (call);                                           \
    span_end(sp_, k);                                           \
    if (rc_) bcg_plugin_err_context(__VA_ARGS__);               \
    return rc_;                                                 \
  } while (0)
#define TIMED_TASK(call, what) TIMED_CTX(0, call, "[task] %s: %s returned %d", TT(p)->name, what, rc_)
#define TIMED_EST(call, what) TIMED_CTX(1, call, "[estimator] %s: %s returned %d", TE(p)->name, what, rc_)

static void t_destroy(void *p) { TT(p)->in->destroy(TT(p)->self); }
static int t_obs_dim(const void *p) { return TTC(p)->in->obs_dim(TTC(p)->self); }
static int t_act_dim(const void *p) { return TTC(p)->in->act_dim(TTC(p)->self); }
static int t_reset(void *p, const int *envs, int n, uint64_t draw, bcg_real *x, bcg_task_clock *clk) {
  TIMED_TASK(TT(p)->in->reset(TT(p)->self, envs, n, draw, x, clk), "reset");
}
static int t_observe(void *p, const bcg_real *x, const bcg_real *pa, const bcg_task_clock *clk, bcg_real *obs) {
  TIMED_TASK(TT(p)->in->observe(TT(p)->self, x, pa, clk, obs), "observe");
}
static int t_observe_envs(void *p, const int *envs, int n, const bcg_real *x, const bcg_real *pa,
                          const bcg_task_clock *clk, bcg_real *obs) {
  TIMED_TASK(TT(p)->in->observe_envs(TT(p)->self, envs, n, x, pa, clk, obs), "observe_envs");
}
static int t_reward_observe(void *p, const bcg_real *x, const bcg_real *a, const bcg_real *pa,
                            const bcg_task_clock *clk, bcg_real *rew, int *done, bcg_real *err, bcg_real *obs) {
  TIMED_TASK(TT(p)->in->reward_observe(TT(p)->self, x, a, pa, clk, rew, done, err, obs), "reward_observe");
}
static int t_observe_vjp(void *p, const bcg_real *x, const bcg_real *pa, const bcg_task_clock *clk,
                         const bcg_real *ob, bcg_real *xb, bcg_real *pab) {
  TIMED_TASK(TT(p)->in->observe_vjp(TT(p)->self, x, pa, clk, ob, xb, pab), "observe_vjp");
}
static int t_reward(void *p, const bcg_real *x, const bcg_real *a, const bcg_real *pa, const bcg_task_clock *clk,
                    bcg_real *rew, int *done) {
  TIMED_TASK(TT(p)->in->reward(TT(p)->self, x, a, pa, clk, rew, done), "reward");
}
static int t_reward_vjp(void *p, const bcg_real *x, const bcg_real *a, const bcg_real *pa, const bcg_task_clock *clk,
                        const bcg_real *rb, bcg_real *xb, bcg_real *ab, bcg_real *pab) {
  TIMED_TASK(TT(p)->in->reward_vjp(TT(p)->self, x, a, pa, clk, rb, xb, ab, pab), "reward_vjp");
}
static int t_update(void *p, int64_t it) { TIMED_TASK(TT(p)->in->update(TT(p)->self, it), "update"); }
static int t_tracking_error(void *p, const bcg_real *x, const bcg_task_clock *clk, bcg_real *err) {
  TIMED_TASK(TT(p)->in->tracking_error(TT(p)->self, x, clk, err), "tracking_error");
}
static int t_reference_qpos(void *p, const bcg_task_clock *clk, int n, bcg_real *qpos) {
  return TT(p)->in->reference_qpos(TT(p)->self, clk, n, qpos); /* for drawing: not timed */
}
static int t_save(void *p, int64_t g) { return TT(p)->in->save(TT(p)->self, g); }
static int t_load(void *p, int64_t g) { return TT(p)->in->load(TT(p)->self, g); }

/* the table's entries that the plugin's table has (size) and sets (non-NULL) */
#define WRAP(o, in, T, f, w) ((o)->f = BCG_OPS_HAS(in, T, f) ? (w) : NULL)

/* ---- the estimator ---- */

typedef struct timed_est {
  bcg_estimator_ops ops;
  const bcg_estimator_ops *in;
  void *self;
  const char *name;
} timed_est;

#define TE(p) ((timed_est *)(p))

static void e_destroy(void *p) { TE(p)->in->destroy(TE(p)->self); }
static int e_begin(void *p) { TIMED_EST(TE(p)->in->begin(TE(p)->self), "begin"); }
static int e_forward(void *p, int t, const bcg_real *x, const bcg_real *a, bcg_real *xn) {
  TIMED_CTX(1, TE(p)->in->forward(TE(p)->self, t, x, a, xn), "[estimator] %s: forward at step %d returned %d",
            TE(p)->name, t, rc_);
}
static int e_backward(void *p, int t, const bcg_real *xnb, bcg_real *xb, bcg_real *ab) {
  TIMED_CTX(1, TE(p)->in->backward(TE(p)->self, t, xnb, xb, ab), "[estimator] %s: backward at step %d returned %d",
            TE(p)->name, t, rc_);
}
static int e_reset_envs(void *p, const int *envs, int n) {
  TIMED_EST(TE(p)->in->reset_envs(TE(p)->self, envs, n), "reset_envs");
}
static void e_stats(const void *p, bcg_estimator_stats *out) {
  const timed_est *t = p;
  t->in->stats(t->self, out);
}
static int e_save(void *p, int64_t g) { return TE(p)->in->save(TE(p)->self, g); }
static int e_load(void *p, int64_t g) { return TE(p)->in->load(TE(p)->self, g); }

struct bcg_session_timing {
  timed_task task;
  timed_est est;
};

int bcg_session_time_wrap(bcg_session *S) {
  bcg_session_timing *w = calloc(1, sizeof *w);
  if (!w) return -1;
  const bcg_task_ops *ti = S->task_ops;
  bcg_task_ops *to = &w->task.ops;
  to->size = ti->size < sizeof *to ? ti->size : (uint32_t)sizeof *to;
  to->create = ti->create; /* never called through the wrapper */
  WRAP(to, ti, bcg_task_ops, destroy, t_destroy);
  WRAP(to, ti, bcg_task_ops, obs_dim, t_obs_dim);
  WRAP(to, ti, bcg_task_ops, act_dim, t_act_dim);
  WRAP(to, ti, bcg_task_ops, reset, t_reset);
  WRAP(to, ti, bcg_task_ops, observe, t_observe);
  WRAP(to, ti, bcg_task_ops, observe_vjp, t_observe_vjp);
  WRAP(to, ti, bcg_task_ops, reward, t_reward);
  WRAP(to, ti, bcg_task_ops, reward_vjp, t_reward_vjp);
  WRAP(to, ti, bcg_task_ops, update, t_update);
  WRAP(to, ti, bcg_task_ops, tracking_error, t_tracking_error);
  WRAP(to, ti, bcg_task_ops, save, t_save);
  WRAP(to, ti, bcg_task_ops, load, t_load);
  WRAP(to, ti, bcg_task_ops, reference_qpos, t_reference_qpos);
  WRAP(to, ti, bcg_task_ops, observe_envs, t_observe_envs);
  WRAP(to, ti, bcg_task_ops, reward_observe, t_reward_observe);
  /* every entry of bcg_task_ops and bcg_estimator_ops has its wrapper here:
   * an entry left out reaches the learner as NULL, and an optional one then
   * silently takes its fallback (test_eval 'timing_wrappers_keep_ops') */
  w->task.in = ti;
  w->task.self = S->task;
  w->task.name = S->ptask->desc->name;

  const bcg_estimator_ops *ei = S->est_ops;
  bcg_estimator_ops *eo = &w->est.ops;
  eo->size = ei->size < sizeof *eo ? ei->size : (uint32_t)sizeof *eo;
  eo->create = ei->create;
  WRAP(eo, ei, bcg_estimator_ops, destroy, e_destroy);
  WRAP(eo, ei, bcg_estimator_ops, begin, e_begin);
  WRAP(eo, ei, bcg_estimator_ops, forward, e_forward);
  WRAP(eo, ei, bcg_estimator_ops, backward, e_backward);
  WRAP(eo, ei, bcg_estimator_ops, reset_envs, e_reset_envs);
  WRAP(eo, ei, bcg_estimator_ops, stats, e_stats);
  WRAP(eo, ei, bcg_estimator_ops, save, e_save);
  WRAP(eo, ei, bcg_estimator_ops, load, e_load);
  w->est.in = ei;
  w->est.self = S->est;
  w->est.name = S->pest->desc->name;

  S->tr.task_ops = &w->task.ops;
  S->tr.task = &w->task;
  S->tr.est_ops = &w->est.ops;
  S->tr.est = &w->est;
  S->timing = w;
  return 0;
}

void bcg_session_time_free(bcg_session *S) {
  free(S->timing);
  S->timing = NULL;
}
