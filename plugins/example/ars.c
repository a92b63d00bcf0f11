/* ars.c - an example LEARNER plugin, built out of tree against an installed
 * bcg (see Makefile here): Augmented Random Search, V2-t, of Mania, Guy and
 * Recht, "Simple random search of static linear policies is competitive for
 * reinforcement learning" (NeurIPS 2018), a derivative-free baseline.
 *
 * The policy is linear in the normalised observation: a = M (o - mean) / std
 * with M [nu][obs_dim], starting at zero. One iteration:
 *   1. draw N/2 directions delta_k [nu][obs_dim] ~ N(0, 1) (N = [run]
 *      num_envs, even); environment 2k runs M + noise delta_k, 2k+1 runs
 *      M - noise delta_k, every environment one episode of at most
 *      episode_steps control steps from a fresh reset (an environment whose
 *      episode ended early waits, its steps not counted);
 *   2. the episodes' returns r+_k, r-_k; the top directions by
 *      max(r+_k, r-_k) (key top, 0: all) and sigma_R, the std of their 2b
 *      returns;
 *   3. M += step_size / (b sigma_R) sum_k (r+_k - r-_k) delta_k;
 *   4. the observation statistics (mean, std) updated from every observation
 *      of the iteration (V2), used from the next iteration on.
 * It needs no gradient: the estimator gets horizon 0 (no BCG_CAP_NEEDS_BACKWARD)
 * and only its forward is called, so `[estimator] plugin = autodiff` is the
 * plain simulator. Directions and resets come from the run's seed and the
 * iteration (bcg/rng.h, counter-based), and save/load keep M, the statistics
 * and the reset counter: a resumed run continues as an uninterrupted one.
 *
 * What a learner plugin does, in short: create() takes the trainer's env,
 * task and estimator (bcg/train.h) and the keys of its [learner] section;
 * iterate() runs one iteration and fills bcg_learner_stats (the core logs
 * every field, writes checkpoints and keeps the budget); save()/load() write
 * and read the learner's state into the checkpoint's HDF5 group through the
 * bcg_h5_* helpers of bcg/runlog.h; act() gives the mean action for bcg eval,
 * bcg render and the MuJoCo transfer. plugins/README.md has the contract. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/env.h"
#include "bcg/plugin.h"
#include "bcg/rng.h"
#include "bcg/runlog.h"
#include "bcg/train.h"

#define RNG_DIRECTION (BCG_RNG_PURPOSE_USER + 1) /* a plugin's own random streams start at PURPOSE_USER */

typedef struct ars {
  const bcg_services *svc;
  bcg_trainer *tr;
  bcg_env *env;
  const bcg_task_ops *to;
  void *task;
  int N, nx, nu, od, np; /* np = nu * od, the policy's parameters */
  int steps, top;
  double step_size, noise;
  bcg_real *M, *delta, *x, *xn, *a, *prev_a, *obs, *rew;
  double *mean, *var, count; /* observation statistics (Welford, merged per iteration) */
  double *bsum, *bsq;        /* this iteration's observation sums */
  double *ret;
  int *done, *alive, *envs, *len;
  bcg_task_clock *clk;
  int64_t draws; /* resets so far: the draw counter of the task and the domain randomisation */
} ars;

static void destroy(void *p) {
  ars *s = p;
  if (!s) return;
  void *b[] = {s->M,   s->delta, s->x,   s->xn,  s->a,    s->prev_a, s->obs,  s->rew, s->mean,
               s->var, s->bsum,  s->bsq, s->ret, s->done, s->alive,  s->envs, s->len, s->clk};
  for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) free(b[i]);
  free(s);
}

static void *zalloc(size_t n, size_t size) { return calloc(n > 0 ? n : 1, size); }
#define NEW(p, n) ((p) = zalloc((size_t)(n), sizeof *(p)))

static void *create(const bcg_services *svc, const bcg_params *p, bcg_trainer *tr, char *err, size_t errlen) {
  ars *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->svc = svc, s->tr = tr, s->env = tr->env, s->to = tr->task_ops, s->task = tr->task;
  s->N = tr->env->nenv, s->nx = tr->env->nx, s->nu = tr->env->nu, s->od = s->to->obs_dim(s->task);
  s->np = s->nu * s->od;
  s->steps = (int)svc->get_int(p, "episode_steps");
  s->top = (int)svc->get_int(p, "top");
  s->step_size = svc->get_real(p, "step_size");
  s->noise = svc->get_real(p, "noise");
  int N = s->N; /* an odd N is refused by iterate() only: bcg eval's sessions have --runs environments */
  if (N > 1 && s->top > N / 2) {
    snprintf(err, errlen, "ars: top = %d, but there are only num_envs / 2 = %d directions", s->top, N / 2);
    destroy(s);
    return NULL;
  }
  if (!NEW(s->M, s->np) || !NEW(s->delta, (size_t)(N / 2) * s->np) || !NEW(s->x, N * s->nx) ||
      !NEW(s->xn, N * s->nx) || !NEW(s->a, N * s->nu) || !NEW(s->prev_a, N * s->nu) || !NEW(s->obs, N * s->od) ||
      !NEW(s->rew, N) || !NEW(s->mean, s->od) || !NEW(s->var, s->od) || !NEW(s->bsum, s->od) ||
      !NEW(s->bsq, s->od) || !NEW(s->ret, N) || !NEW(s->done, N) || !NEW(s->alive, N) || !NEW(s->envs, N) ||
      !NEW(s->len, N) || !NEW(s->clk, N)) {
    snprintf(err, errlen, "ars: out of memory");
    destroy(s);
    return NULL;
  }
  for (int i = 0; i < s->od; i++) s->var[i] = 1; /* the identity until statistics exist */
  return s;
}

/* a = P (o - mean) / std for every environment e, P = M + sign_e noise delta_k */
static void policy(const ars *s, const bcg_real *obs, int n, int perturbed, bcg_real *a) {
  for (int e = 0; e < n; e++) {
    const bcg_real *o = obs + (size_t)e * s->od;
    const bcg_real *d = perturbed ? s->delta + (size_t)(e / 2) * s->np : NULL;
    const double sg = e % 2 ? -s->noise : s->noise;
    for (int j = 0; j < s->nu; j++) {
      double acc = 0;
      for (int i = 0; i < s->od; i++) {
        double w = s->M[j * s->od + i] + (d ? sg * d[j * s->od + i] : 0);
        acc += w * ((double)o[i] - s->mean[i]) / sqrt(s->var[i] + 1e-8);
      }
      a[(size_t)e * s->nu + j] = (bcg_real)acc;
    }
  }
}

static int reset_all(ars *s) {
  for (int e = 0; e < s->N; e++) s->envs[e] = e;
  uint64_t k = (uint64_t)s->draws++;
  bcg_env_randomize(s->env, s->envs, s->N, k); /* a no-op without domain randomisation */
  memset(s->prev_a, 0, sizeof(bcg_real) * (size_t)s->N * s->nu);
  return s->to->reset(s->task, s->envs, s->N, k, s->x, s->clk);
}

/* step 1: one episode per environment; returns the steps of the episodes
 * (their observations), *simulated the control steps simulated */
static long rollout(ars *s, bcg_learner_stats *st, long *simulated) {
  int N = s->N;
  if (reset_all(s)) return -1;
  for (int e = 0; e < N; e++) s->ret[e] = 0, s->alive[e] = 1, s->len[e] = 0;
  long steps = 0;
  for (int t = 0; t < s->steps; t++) {
    if (s->to->observe(s->task, s->x, s->prev_a, s->clk, s->obs)) return -1;
    for (int e = 0; e < N; e++) {
      if (!s->alive[e]) continue;
      for (int i = 0; i < s->od; i++) {
        double o = s->obs[(size_t)e * s->od + i];
        s->bsum[i] += o, s->bsq[i] += o * o;
      }
    }
    policy(s, s->obs, N, 1, s->a);
    if (s->tr->est_ops->forward(s->tr->est, t, s->x, s->a, s->xn)) return -1;
    *simulated += N; /* every environment steps, also one that waits */
    for (int e = 0; e < N; e++) s->clk[e].t++;
    if (s->to->reward(s->task, s->xn, s->a, s->prev_a, s->clk, s->rew, s->done)) return -1;
    int alive = 0;
    for (int e = 0; e < N; e++) {
      if (!s->alive[e]) continue;
      if (!isfinite((double)s->rew[e])) s->done[e] = 1; /* a non-finite state ends the episode, reward 0 */
      else s->ret[e] += s->rew[e];
      s->len[e]++, steps++;
      st->mean_reward += s->rew[e];
      if (s->done[e]) s->alive[e] = 0;
      alive += s->alive[e];
    }
    memcpy(s->x, s->xn, sizeof(bcg_real) * (size_t)N * s->nx);
    memcpy(s->prev_a, s->a, sizeof(bcg_real) * (size_t)N * s->nu);
    if (!alive) break;
  }
  return steps;
}

static int cmp_desc(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? 1 : a > b ? -1 : 0;
}

/* steps 2-4 */
static void update(ars *s, long nobs) {
  int K = s->N / 2, b = s->top > 0 ? s->top : K;
  double *key = malloc(sizeof(double) * 2 * (size_t)K);
  if (!key) return;
  for (int k = 0; k < K; k++) key[2 * k] = fmax(s->ret[2 * k], s->ret[2 * k + 1]), key[2 * k + 1] = k;
  qsort(key, (size_t)K, 2 * sizeof(double), cmp_desc); /* pairs (max return, k), best first */
  double m = 0, m2 = 0;
  for (int i = 0; i < b; i++) {
    int k = (int)key[2 * i + 1];
    m += s->ret[2 * k] + s->ret[2 * k + 1];
    m2 += s->ret[2 * k] * s->ret[2 * k] + s->ret[2 * k + 1] * s->ret[2 * k + 1];
  }
  m /= 2 * b;
  double sd = sqrt(fmax(m2 / (2 * b) - m * m, 0));
  if (sd > 1e-12)
    for (int i = 0; i < b; i++) {
      int k = (int)key[2 * i + 1];
      double c = s->step_size / (b * sd) * (s->ret[2 * k] - s->ret[2 * k + 1]);
      for (int j = 0; j < s->np; j++) s->M[j] += (bcg_real)(c * s->delta[(size_t)k * s->np + j]);
    }
  free(key);
  /* merge this iteration's observations into the running statistics */
  for (int i = 0; i < s->od && nobs > 0; i++) {
    double bm = s->bsum[i] / nobs, bv = fmax(s->bsq[i] / nobs - bm * bm, 0), n0 = s->count, n1 = (double)nobs;
    double d = bm - s->mean[i], n = n0 + n1;
    double var0 = n0 > 0 ? s->var[i] : 0;
    s->mean[i] += d * n1 / n;
    s->var[i] = (n0 * var0 + n1 * bv + d * d * n0 * n1 / n) / n;
    s->bsum[i] = s->bsq[i] = 0;
  }
  if (nobs > 0) s->count += (double)nobs;
}

static int iterate(void *p, bcg_learner_stats *st) {
  ars *s = p;
  if (s->N < 2 || s->N % 2) {
    if (BCG_SVC_HAS(s->svc, error))
      s->svc->error(3, "[run] num_envs must be even (a + and a - episode per direction), not %d", s->N);
    return -1;
  }
  memset(st, 0, sizeof *st);
  st->grad_var = st->bundle_frac = st->track_err = NAN;
  st->actor_loss = st->critic_loss = NAN;
  for (int k = 0; k < s->N / 2; k++)
    bcg_rng_fill_normal(s->delta + (size_t)k * s->np, s->np, s->tr->seed, RNG_DIRECTION, (uint32_t)k,
                        (uint32_t)s->tr->iteration);
  long simulated = 0, steps = s->tr->est_ops->begin(s->tr->est) ? -1 : rollout(s, st, &simulated);
  if (steps < 0) {
    if (BCG_SVC_HAS(s->svc, error)) s->svc->error(1, "a call of the task or the estimator failed");
    return -1;
  }
  update(s, steps);
  double r = 0, l = 0, gn = 0;
  for (int e = 0; e < s->N; e++) r += s->ret[e], l += s->len[e];
  for (int j = 0; j < s->np; j++) gn += (double)s->M[j] * s->M[j];
  st->mean_return = r / s->N;
  st->mean_ep_len = l / s->N;
  st->mean_reward = steps ? st->mean_reward / steps : NAN;
  st->episodes = s->N;
  st->samples = (uint64_t)simulated;
  st->lr = s->step_size;
  st->action_std = s->noise;
  st->grad_norm = sqrt(gn); /* the policy's norm: ARS has no gradient */
  return 0;
}

/* the checkpoint: M, the observation statistics and the reset counter */
static int save(void *p, int64_t g) {
  ars *s = p;
  char e[256];
  double stats[1] = {s->count};
  return bcg_h5_write_reals(g, "M", s->M, (size_t)s->np, e, sizeof e) ||
         bcg_h5_write_doubles(g, "obs_mean", s->mean, (size_t)s->od, e, sizeof e) ||
         bcg_h5_write_doubles(g, "obs_var", s->var, (size_t)s->od, e, sizeof e) ||
         bcg_h5_write_doubles(g, "obs_count", stats, 1, e, sizeof e) ||
         bcg_h5_write_i64(g, "draws", &s->draws, 1, e, sizeof e);
}

static int load(void *p, int64_t g) {
  ars *s = p;
  char e[256];
  double stats[1];
  if (bcg_h5_length(g, "M") != s->np || bcg_h5_length(g, "obs_mean") != s->od) {
    if (BCG_SVC_HAS(s->svc, error)) s->svc->error(2, "the checkpoint's policy has another shape (obs %d, actions %d)", s->od, s->nu);
    return -1;
  }
  if (bcg_h5_read_reals(g, "M", s->M, (size_t)s->np, e, sizeof e) != s->np ||
      bcg_h5_read_doubles(g, "obs_mean", s->mean, (size_t)s->od, e, sizeof e) != s->od ||
      bcg_h5_read_doubles(g, "obs_var", s->var, (size_t)s->od, e, sizeof e) != s->od ||
      bcg_h5_read_doubles(g, "obs_count", stats, 1, e, sizeof e) != 1 ||
      bcg_h5_read_i64(g, "draws", &s->draws, 1, e, sizeof e) != 1)
    return -1;
  s->count = stats[0];
  return 0;
}

static int act(void *p, const bcg_real *obs, int n, bcg_real *a) {
  policy(p, obs, n, 0, a);
  return 0;
}

static const bcg_key_spec keys[] = {
    {"step_size", BCG_KEY_REAL, "0.02", 1e-9, 1e3, NULL, "alpha: the step of M per iteration (ARS: 0.01-0.02)"},
    {"noise", BCG_KEY_REAL, "0.03", 1e-9, 1e3, NULL, "nu: the std of the exploration directions (ARS: 0.01-0.03)"},
    {"top", BCG_KEY_INT, "0", 0, 1e6, NULL, "b: directions used per update, the best by max(r+, r-); 0: all"},
    {"episode_steps", BCG_KEY_INT, "100", 1, 1e6, NULL,
     "control steps of each episode at most (the task's own end stops it earlier)"},
};

static const bcg_learner_ops ops = {sizeof(bcg_learner_ops), create, destroy, iterate, save, load, act};
static const bcg_plugin_desc desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_LEARNER, "ars", "Augmented Random Search (V2-t): a linear policy, derivative-free"),
    keys, BCG_NKEYS(keys), 0, &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }
