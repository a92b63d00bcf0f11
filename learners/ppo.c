/* learners/ppo.c - clipped PPO as used in legged robotics (rsl_rl's
 * algorithms/ppo.py, modules/actor_critic.py, storage/rollout_storage.py);
 * docs/design.md section 7.2. Forward only: the estimator is created with
 * horizon 0.
 *
 * One iteration, in stage functions: a rollout of steps_per_env steps with
 * sampled actions (Philox ACTION stream), values and log-probabilities, time
 * limits bootstrapped with gamma V; GAE(lambda) and batch-normalised
 * advantages; epochs x minibatches of one permutation (MINIBATCH stream) with
 * the clipped surrogate, the clipped value loss, the entropy bonus, one
 * gradient-norm clip and Adam, the learning rate adapted to the KL.
 *
 * Guarantees: reproducible from the seed (every draw counter-based); NaN/Inf
 * resets the environment, counts it and treats the transition as a
 * termination with reward 0; a non-finite minibatch gradient is skipped and
 * counted; a reset re-draws the environment's domain randomisation, and the
 * draw indices and push clocks are checkpointed.
 *
 * Data-parallel (several ranks, bcg/dist.h; BCG_CAP_DATA_PARALLEL): every
 * rank steps its own environments from its own seed and keeps its own
 * rollout; rank 0's initial parameters are sent to all; the observation
 * normaliser merges all ranks' rows, the advantages are normalised with the
 * mean and deviation over all ranks, the KL of the adaptive learning rate is
 * the mean over all minibatch rows, and each minibatch's gradient (actor,
 * log-std and critic) is the mean of the ranks' gradients (each over its
 * equal share of rows), so the clip, Adam and the parameters are the same
 * on every rank. As in rsl_rl's multi-GPU PPO, one rank's minibatch is its
 * rows of one permutation of its own rollout. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/env.h"
#include "bcg/nn.h"
#include "bcg/plugin.h"
#include "bcg/rng.h"
#include "bcg/train.h"
#include "learner_util.h"

/* rows per block of a minibatch's loss sums: each block summed in row order
 * by one thread, the blocks in order (the same for every thread count) */
#define PPO_BLOCK 1024

typedef struct ppo {
  const bcg_services *svc;
  bcg_trainer *tr;
  bcg_env *env;
  const bcg_task_ops *task_ops;
  void *task;
  const bcg_estimator_ops *est_ops;
  void *est;
  int N, nx, nu, od, S;
  int cap; /* rows of the minibatch buffers (at least N) */
  /* configuration */
  double gamma, lam, clip, vcoef, ecoef, max_grad, kl_target, logstd_init;
  int epochs, nmb, clipped_value, obs_norm, squash, adaptive;
  /* networks */
  bcg_mlp actor, critic;
  bcg_adam aopt, copt;
  bcg_lr_schedule sched;
  bcg_normalizer obs_rms;
  bcg_nn_rows obs_rows; /* OBS as the networks' row source (on the device: sent once per rollout step) */
  /* carried across iterations */
  bcg_real *x, *prev_a;
  bcg_task_clock *clk; /* [N] task clocks */
  double *ep_ret;
  int64_t *ep_len;
  uint64_t draw, step;
  /* rollout storage [S][N][...] */
  bcg_real *OBS, *ACT, *MU, *LP, *V, *R, *RET, *ADV;
  bcg_real *draws; /* [M] the minibatch permutation's uniform draws */
  unsigned char *D;
  /* scratch */
  bcg_real *obs, *obsn, *xn, *env_a, *rew, *eps, *v, *mba, *mbmu, *mbdmu, *mbdv, *mblp, *mbdlp;
  int *done, *envs, *perm;
  int *nonfinite; /* [N] environments whose observation was not finite */
  unsigned char *bad; /* [N] this control step's non-finite environments */
  double *lsum;       /* [2 nblocks] a minibatch's surrogate and value losses per block of PPO_BLOCK rows */
  bcg_real lsold[64];
  lu_track trk; /* the rollout's tracking error (stats.track_err) */
  /* data-parallel runs (tr->world > 1): the services' sums over the ranks, NULL with one rank */
  int (*dsum)(double *x, size_t n);
  int (*dsum_real)(bcg_real *x, size_t n);
  int world, check; /* ranks; [run] check_replicas */
} ppo;

/* the host arrays the networks write (outputs) or read (output adjoints)
 * every step or minibatch, page-locked for direct copies with CUDA on
 * (bcg_nn_pin; a no-op without) */
typedef struct ppo_pin {
  bcg_real *p;
  size_t n;
} ppo_pin;
#define PPO_PINNED(s)                                                                                         \
  {                                                                                                          \
    {(s)->MU, (size_t)(s)->S * (s)->N * (s)->nu}, {(s)->V, (size_t)(s)->S * (s)->N}, {(s)->v, (size_t)(s)->N}, \
        {(s)->obsn, (size_t)(s)->N * (s)->od}, {(s)->mbmu, (size_t)(s)->cap * (s)->nu},                       \
        {(s)->mbdmu, (size_t)(s)->cap * (s)->nu}, {(s)->mbdv, (size_t)(s)->cap}                                \
  }

static void destroy(void *p) {
  ppo *s = p;
  if (!s) return;
  ppo_pin pins[] = PPO_PINNED(s);
  for (size_t i = 0; i < sizeof pins / sizeof pins[0]; i++) bcg_nn_unpin(pins[i].p);
  bcg_mlp_destroy(&s->actor);
  bcg_mlp_destroy(&s->critic);
  bcg_adam_free(&s->aopt);
  bcg_adam_free(&s->copt);
  bcg_normalizer_free(&s->obs_rms);
  bcg_nn_rows_free(&s->obs_rows);
  lu_track_free(&s->trk);
  void *bufs[] = {s->x,   s->prev_a, s->clk,  s->ep_ret, s->ep_len, s->OBS,  s->ACT,   s->MU,   s->LP,   s->V,
                  s->R,   s->RET,    s->ADV,  s->D,      s->obs,    s->obsn, s->xn,    s->env_a, s->rew, s->eps,
                  s->v,   s->mba,  s->mbmu,   s->mbdmu,  s->mbdv, s->mblp,  s->mbdlp, s->done, s->envs,
                  s->perm, s->bad, s->lsum, s->nonfinite, s->draws};
  lu_free_all(bufs, sizeof bufs / sizeof bufs[0]);
  free(s);
}

/* Reset envs[0..n-1] with the task's draw counter k, which is also the draw
 * index of their domain randomisation: PPO has no backward pass through the
 * physics, so the new episode gets its friction, masses and com offsets at
 * the reset itself (bcg_env_randomize in env.h; SHAC defers them). */
static int reset_envs(ppo *s, const int *envs, int n, bcg_real *x) {
  if (n == 0) return 0;
  uint64_t k = s->draw++;
  bcg_env_randomize(s->env, envs, n, k); /* no-op without DR */
  int rc = s->task_ops->reset(s->task, envs, n, k, x, s->clk);
  for (int i = 0; i < n; i++) {
    memset(s->prev_a + (size_t)envs[i] * s->nu, 0, sizeof(bcg_real) * s->nu);
    s->ep_ret[envs[i]] = 0;
    s->ep_len[envs[i]] = 0;
  }
  return rc;
}

static void *create(const bcg_services *svc, const bcg_params *p, bcg_trainer *tr, char *err, size_t errlen) {
  ppo *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  LU_BIND_TRAINER(s, svc, tr);
  s->S = (int)svc->get_int(p, "steps_per_env");
  s->epochs = (int)svc->get_int(p, "epochs");
  s->nmb = (int)svc->get_int(p, "minibatches");
  s->clip = svc->get_real(p, "clip");
  s->gamma = svc->get_real(p, "gamma");
  s->lam = svc->get_real(p, "lambda");
  s->vcoef = svc->get_real(p, "value_loss_coef");
  s->ecoef = svc->get_real(p, "entropy_coef");
  s->clipped_value = svc->get_bool(p, "clipped_value_loss");
  s->max_grad = svc->get_real(p, "max_grad_norm");
  s->adaptive = !strcmp(svc->get_string(p, "schedule"), "adaptive");
  s->kl_target = svc->get_real(p, "desired_kl");
  s->logstd_init = log(svc->get_real(p, "init_noise_std"));
  s->obs_norm = svc->get_bool(p, "obs_norm");
  s->squash = !strcmp(svc->get_string(p, "squash"), "tanh");
  int N = s->N, S = s->S, nu = s->nu, od = s->od, nx = s->nx, M = S * N;
  if (nu > 64 || od <= 0 || nu <= 0) {
    snprintf(err, errlen, "ppo: bad dimensions (obs %d, actions %d; at most 64 actions)", od, nu);
    goto fail;
  }
  int mb = (M + s->nmb - 1) / s->nmb, cap = mb > N ? mb : N;
  s->cap = cap;
  char e2[512];
  if (lu_mlp(&s->actor, svc, p, "actor_layers", od, nu, nu, (bcg_real)s->logstd_init, cap, e2, sizeof e2) ||
      lu_mlp(&s->critic, svc, p, "critic_layers", od, 1, 0, 0, cap, e2, sizeof e2)) {
    snprintf(err, errlen, "ppo: %s", e2);
    goto fail;
  }
  bcg_mlp_init_params(&s->actor, tr->seed, 1);
  bcg_mlp_init_params(&s->critic, tr->seed, 10);
  /* tr's rank fields exist in hosts with the dist services (appended together) */
  s->world = BCG_SVC_HAS(svc, dist_same) ? tr->world : 1;
  s->check = s->world > 1 && tr->check_replicas;
  if (s->world > 1) { /* every rank starts from rank 0's parameters */
    s->dsum = svc->dist_sum;
    s->dsum_real = svc->dist_sum_real;
    if (svc->dist_bcast(s->actor.params, s->actor.nparams * sizeof(bcg_real), 0) ||
        svc->dist_bcast(s->critic.params, s->critic.nparams * sizeof(bcg_real), 0)) {
      snprintf(err, errlen, "ppo: sending rank 0's initial parameters failed");
      goto fail;
    }
  }
  double lr = svc->get_real(p, "lr"), b1 = svc->get_real(p, "beta1"), b2 = svc->get_real(p, "beta2");
  if (bcg_adam_init(&s->aopt, s->actor.nparams, (bcg_real)lr, (bcg_real)b1, (bcg_real)b2, (bcg_real)1e-8) ||
      bcg_adam_init(&s->copt, s->critic.nparams, (bcg_real)lr, (bcg_real)b1, (bcg_real)b2, (bcg_real)1e-8) ||
      bcg_normalizer_init(&s->obs_rms, od, (bcg_real)svc->get_real(p, "obs_clip"), 1e-4))
    goto oom;
  s->sched = s->adaptive ? bcg_lr_kl_schedule((bcg_real)lr, (bcg_real)s->kl_target) : bcg_lr_constant_schedule((bcg_real)lr);
  if (!ALLOC(s->x, N * nx) || !ALLOC(s->prev_a, N * nu) || !ALLOC(s->clk, N) || !ALLOC(s->ep_ret, N) ||
      !ALLOC(s->ep_len, N) || !ALLOC(s->OBS, M * od) || !ALLOC(s->ACT, M * nu) || !ALLOC(s->MU, M * nu) ||
      !ALLOC(s->LP, M) || !ALLOC(s->V, M) || !ALLOC(s->R, M) || !ALLOC(s->RET, M) || !ALLOC(s->ADV, M) ||
      !ALLOC(s->D, M) || !ALLOC(s->obs, N * od) || !ALLOC(s->obsn, N * od) || !ALLOC(s->xn, N * nx) ||
      !ALLOC(s->env_a, N * nu) || !ALLOC(s->rew, N) || !ALLOC(s->eps, N * nu) || !ALLOC(s->v, N) ||
      !ALLOC(s->mba, cap * nu) || !ALLOC(s->mbmu, cap * nu) ||
      !ALLOC(s->mbdmu, cap * nu) || !ALLOC(s->mbdv, cap) || !ALLOC(s->mblp, cap) || !ALLOC(s->mbdlp, cap) ||
      !ALLOC(s->done, N) || !ALLOC(s->envs, N) || !ALLOC(s->perm, M) || !ALLOC(s->draws, M) || !ALLOC(s->bad, N) || !ALLOC(s->nonfinite, N) ||
      !ALLOC(s->lsum, 2 * ((cap + PPO_BLOCK - 1) / PPO_BLOCK)) || lu_track_init(&s->trk, s->task_ops, N) ||
      bcg_nn_rows_init(&s->obs_rows, s->OBS, (long)M, od))
    goto oom;
  {
    ppo_pin pins[] = PPO_PINNED(s);
    for (size_t i = 0; i < sizeof pins / sizeof pins[0]; i++) bcg_nn_pin(pins[i].p, pins[i].n * sizeof(bcg_real));
  }
  for (int e = 0; e < N; e++) s->envs[e] = e;
  if (reset_envs(s, s->envs, N, s->x)) {
    snprintf(err, errlen, "ppo: the task's reset failed");
    goto fail;
  }
  return s;
oom:
  snprintf(err, errlen, "ppo: out of memory");
fail:
  destroy(s);
  return NULL;
}

static void normalise(ppo *s, const bcg_real *obs, int n, bcg_real *out) {
  lu_normalise(s->obs_norm ? &s->obs_rms : NULL, obs, n, s->od, out);
}

/* the observations of x into obs, of all environments (envs NULL) or of
 * envs[0..n) only (just reset: the other rows are current); environments
 * whose observation is not finite are reset and observed again (NaN resets) */
static int observe_checked(ppo *s, const bcg_real *x, bcg_real *obs, int *nan_resets, const int *envs, int n) {
  int *bad = s->nonfinite;
  int nb = envs ? lu_observe_envs(s->task_ops, s->task, envs, n, s->od, x, s->prev_a, s->clk, obs, bad)
                : lu_observe(s->task_ops, s->task, s->N, s->od, x, s->prev_a, s->clk, obs, bad);
  if (nb <= 0) return nb;
  *nan_resets += nb;
  if (reset_envs(s, bad, nb, s->x) || s->est_ops->reset_envs(s->est, bad, nb)) return -1;
  int nb2 = lu_observe_envs(s->task_ops, s->task, bad, nb, s->od, s->x, s->prev_a, s->clk, obs, s->envs);
  if (nb2 < 0) return -1;
  if (nb2 > 0) {
    s->svc->log(2, "ppo: the task's observation is not finite right after a reset");
    return -1;
  }
  return 0;
}

/* step 1 of the module header: steps_per_env steps of every environment
 * into the rollout buffers */
static int rollout(ppo *s, lu_sums *sum) {
  int N = s->N, S = s->S, nu = s->nu, od = s->od, nx = s->nx;
  const bcg_task_ops *to = s->task_ops;
  const bcg_real *ls = s->actor.extra_params;
  if (observe_checked(s, s->x, s->obs, &sum->nan_resets, NULL, 0)) return -1;
  lu_track_begin(&s->trk);
  for (int t = 0; t < S; t++) {
    bcg_real *O = s->OBS + (size_t)t * N * od, *Ac = s->ACT + (size_t)t * N * nu, *MUt = s->MU + (size_t)t * N * nu;
    if (s->obs_norm && bcg_normalizer_update_dist(&s->obs_rms, s->obs, N, s->dsum)) return -1;
    normalise(s, s->obs, N, O);
    if (bcg_nn_rows_put(&s->obs_rows, (long)t * N, N) ||
        bcg_mlp_forward_rows(&s->actor, NULL, &s->obs_rows, (long)t * N, NULL, N, MUt) ||
        bcg_mlp_forward_rows(&s->critic, NULL, &s->obs_rows, (long)t * N, NULL, N, s->V + (size_t)t * N))
      return -1;
#pragma omp parallel for schedule(static) if (N >= 256)
    for (int e = 0; e < N; e++)
      bcg_rng_fill_normal(s->eps + (size_t)e * nu, nu, s->tr->seed, BCG_RNG_ACTION, (uint32_t)e, (uint32_t)s->step);
    s->step++;
    bcg_gauss_sample_batch(N, nu, MUt, ls, s->eps, Ac);
    bcg_gauss_logprob_batch(N, nu, MUt, ls, Ac, s->LP + (size_t)t * N);
#pragma omp parallel for schedule(static) if (N >= 256)
    for (int i = 0; i < N * nu; i++) s->env_a[i] = s->squash ? tanh(Ac[i]) : Ac[i];
    if (s->est_ops->forward(s->est, t, s->x, s->env_a, s->xn)) return -1;
    for (int e = 0; e < N; e++) s->clk[e].t++;
    /* the reward, and the terminal observations: NaN checks and time-limit bootstrap */
    if (lu_step_outputs(&s->trk, to, s->task, N, s->xn, s->env_a, s->prev_a, s->clk, s->rew, s->done, s->obs))
      return -1;
    int nreset = 0, nboot = 0;
#pragma omp parallel for schedule(static) if (N >= 256)
    for (int e = 0; e < N; e++) {
      s->bad[e] = !isfinite((double)s->rew[e]) || !lu_finite(s->xn + (size_t)e * nx, (size_t)nx) ||
                  !lu_finite(s->obs + (size_t)e * od, (size_t)od);
      if (s->bad[e]) {
        s->done[e] = 3;
        s->rew[e] = 0;
        memset(s->obs + (size_t)e * od, 0, sizeof(bcg_real) * od);
      }
    }
    for (int e = 0; e < N; e++) {
      if (s->bad[e]) {
        sum->nan_resets++;
      } else {
        sum->rew += s->rew[e];
        sum->nrew++;
        s->ep_ret[e] += s->rew[e];
        s->ep_len[e]++;
      }
      nboot += s->done[e] == 2;
    }
    if (nboot) {
      normalise(s, s->obs, N, s->obsn);
      if (bcg_mlp_forward(&s->critic, NULL, s->obsn, N, s->v)) return -1;
    }
    for (int e = 0; e < N; e++) {
      size_t te = (size_t)t * N + e;
      double r = s->rew[e];
      if (s->done[e] == 2) r += s->gamma * (double)s->v[e];
      s->R[te] = (bcg_real)r;
      s->D[te] = s->done[e] != 0;
      if (s->done[e]) {
        if (s->done[e] != 3) {
          sum->episodes++;
          sum->ret += s->ep_ret[e];
          sum->len += (double)s->ep_len[e];
        }
        s->envs[nreset++] = e;
      }
    }
    lu_copy(s->x, s->xn, (size_t)N * nx);
    lu_copy(s->prev_a, s->env_a, (size_t)N * nu);
    if (nreset) {
      if (reset_envs(s, s->envs, nreset, s->x) || s->est_ops->reset_envs(s->est, s->envs, nreset)) return -1;
      if (observe_checked(s, s->x, s->obs, &sum->nan_resets, s->envs, nreset)) return -1;
    }
  }
  return 0;
}

/* step 2: GAE(lambda) returns and advantages, the advantages normalised */
static int advantages(ppo *s) {
  int N = s->N, S = s->S, M = S * N;
  normalise(s, s->obs, N, s->obsn);
  if (bcg_mlp_forward(&s->critic, NULL, s->obsn, N, s->v)) return -1;
#pragma omp parallel for schedule(static) if (N >= 256)
  for (int e = 0; e < N; e++) {
    double adv = 0;
    for (int t = S - 1; t >= 0; t--) {
      size_t te = (size_t)t * N + e;
      double nv = t == S - 1 ? (double)s->v[e] : (double)s->V[te + N];
      double nt = 1.0 - s->D[te];
      double delta = s->R[te] + nt * s->gamma * nv - s->V[te];
      adv = delta + nt * s->gamma * s->lam * adv;
      s->RET[te] = (bcg_real)(adv + s->V[te]);
      s->ADV[te] = (bcg_real)adv;
    }
  }
  {
    /* over every rank's rollout in a data-parallel run (the sums reduced) */
    double mc[2] = {0, M}, v = 0;
    for (int i = 0; i < M; i++) mc[0] += s->ADV[i];
    if (s->dsum && s->dsum(mc, 2)) return -1;
    double m = mc[0] / mc[1];
    for (int i = 0; i < M; i++) v += (s->ADV[i] - m) * (s->ADV[i] - m);
    if (s->dsum && s->dsum(&v, 1)) return -1;
    double sd = sqrt(v / (mc[1] > 1 ? mc[1] - 1 : 1));
    for (int i = 0; i < M; i++) s->ADV[i] = (bcg_real)((s->ADV[i] - m) / (sd + 1e-8));
  }
  return 0;
}

/* one minibatch of step 3 (rows perm[b0 .. b0 + n)): the KL-adaptive LR,
 * the losses, their gradients, the clip and Adam; -1 on failure, 1 when the
 * gradient was not finite (no update), else 0 with the surrogate and value
 * losses and the gradient norm */
static int minibatch(ppo *s, int b0, int n, double *surr_out, double *vl_out, double *gn_out) {
  int nu = s->nu;
  const bcg_real *ls = s->actor.extra_params;
#pragma omp parallel for schedule(static) if (n >= 256)
  for (int i = 0; i < n; i++) {
    int src = s->perm[b0 + i];
    memcpy(s->mba + (size_t)i * nu, s->ACT + (size_t)src * nu, sizeof(bcg_real) * nu);
  }
  /* the observations are gathered by the networks (on the device: from the rollout's rows sent there) */
  if (bcg_mlp_forward_rows(&s->actor, NULL, &s->obs_rows, 0, s->perm + b0, n, s->mbmu) ||
      bcg_mlp_forward_rows(&s->critic, NULL, &s->obs_rows, 0, s->perm + b0, n, s->mbdv))
    return -1;
  bcg_real *vals = s->mbdv; /* values now; overwritten by their adjoint below */
  /* adaptive learning rate from KL(old || new) */
  if (s->adaptive) {
    double kl[2] = {bcg_gauss_kl_sum(n, nu, s->MU, s->perm + b0, s->lsold, s->mbmu, ls), n};
    if (s->dsum && s->dsum(kl, 2)) return -1; /* the mean over every rank's rows */
    bcg_lr_observe_kl(&s->sched, (bcg_real)(kl[0] / kl[1]));
  }
  bcg_gauss_logprob_batch(n, nu, s->mbmu, ls, s->mba, s->mblp);
  const int nb = (n + PPO_BLOCK - 1) / PPO_BLOCK;
#pragma omp parallel for schedule(static) if (nb > 1)
  for (int b = 0; b < nb; b++) {
    double surr = 0, vl = 0;
    for (int i = b * PPO_BLOCK; i < n && i < (b + 1) * PPO_BLOCK; i++) {
      int src = s->perm[b0 + i];
      double A = s->ADV[src], ratio = exp((double)s->mblp[i] - (double)s->LP[src]);
      double rc = fmin(fmax(ratio, 1 - s->clip), 1 + s->clip);
      double s1 = -A * ratio, s2 = -A * rc;
      surr += fmax(s1, s2);
      /* d max(s1, s2) / d lp: through s1 when it is the max, through s2 only inside the clip range */
      double g = (s1 >= s2) ? -A * ratio : ((ratio > 1 - s->clip && ratio < 1 + s->clip) ? -A * ratio : 0);
      s->mbdlp[i] = (bcg_real)(g / n);
      double vv = vals[i], ret = s->RET[src], vold = s->V[src];
      double dv;
      if (s->clipped_value) {
        double d = vv - vold, dc = fmin(fmax(d, -s->clip), s->clip);
        double vc = vold + dc, l1 = (vv - ret) * (vv - ret), l2 = (vc - ret) * (vc - ret);
        vl += fmax(l1, l2);
        dv = l1 >= l2 ? 2 * (vv - ret) : ((d > -s->clip && d < s->clip) ? 2 * (vc - ret) : 0);
      } else {
        vl += (vv - ret) * (vv - ret);
        dv = 2 * (vv - ret);
      }
      s->mbdv[i] = (bcg_real)(s->vcoef * dv / n);
    }
    s->lsum[b] = surr;
    s->lsum[nb + b] = vl;
  }
  double surr = 0, vl = 0;
  for (int b = 0; b < nb; b++) {
    surr += s->lsum[b];
    vl += s->lsum[nb + b];
  }
  surr /= n;
  vl /= n;
  bcg_mlp_zero_grad(&s->actor);
  bcg_mlp_zero_grad(&s->critic);
  lu_copy(s->mbdmu, NULL, (size_t)n * nu);
  bcg_gauss_logprob_vjp_batch(n, nu, s->mbmu, ls, s->mba, s->mbdlp, NULL, s->mbdmu, s->actor.extra_grad);
  bcg_gauss_entropy_vjp(nu, (bcg_real)-s->ecoef, s->actor.extra_grad);
  if (bcg_mlp_backward(&s->actor, NULL, s->mbdmu, s->actor.grad, NULL) ||
      bcg_mlp_backward(&s->critic, NULL, s->mbdv, s->critic.grad, NULL))
    return -1;
  /* data-parallel: the mean of the ranks' gradients (every rank's minibatch has n rows) */
  if (s->dsum_real) {
    double inv = 1.0 / s->world;
    if (bcg_mlp_grad_reduce(&s->actor, s->dsum_real, inv) || bcg_mlp_grad_reduce(&s->critic, s->dsum_real, inv))
      return -1;
  }
  /* one clip over both networks (on the device when they are held) */
  bcg_real na_r, nc_r;
  if (bcg_mlp_grad_norm(&s->actor, &na_r) || bcg_mlp_grad_norm(&s->critic, &nc_r)) return -1;
  double na = na_r, nc = nc_r, gn = sqrt(na * na + nc * nc);
  if (!isfinite(gn)) {
    return 1;
  }
  /* the factor rounded to bcg_real first: g * c in double, rounded, is then
   * exactly the product of two bcg_reals (the same bits in a float build) */
  double c = gn > s->max_grad ? (double)(bcg_real)(s->max_grad / gn) : 1.0;
  s->aopt.lr = s->copt.lr = s->sched.lr;
  if (bcg_mlp_scale_adam(&s->actor, &s->aopt, c) || bcg_mlp_scale_adam(&s->critic, &s->copt, c)) return -1;
  *surr_out = surr;
  *vl_out = vl;
  *gn_out = gn;
  return 0;
}

/* step 3: epochs x minibatches over one permutation; the mean losses and
 * gradient norm of the updates made into U[0..2] (NaN without any) */
static int update(ppo *s, int *skipped, double U[3]) {
  int M = s->S * s->N;
  /* Fisher-Yates with counter-based draws: drawn over the threads first */
#pragma omp parallel for schedule(static) if (M >= 4096)
  for (int i = 0; i < M; i++) {
    s->perm[i] = i;
    s->draws[i] = bcg_rng_uniform(s->tr->seed, BCG_RNG_MINIBATCH, 0, (uint32_t)s->tr->iteration, (uint32_t)i);
  }
  for (int i = M - 1; i > 0; i--) {
    bcg_real u = s->draws[i];
    int k = (int)(u * (bcg_real)(i + 1));
    if (k > i) k = i;
    int tmp = s->perm[i];
    s->perm[i] = s->perm[k];
    s->perm[k] = tmp;
  }
  int mb = (M + s->nmb - 1) / s->nmb;
  double tot_surr = 0, tot_v = 0, tot_gn = 0;
  int nupd = 0;
  for (int ep = 0; ep < s->epochs; ep++)
    for (int b0 = 0; b0 < M; b0 += mb) {
      int n = M - b0 < mb ? M - b0 : mb;
      double surr, vl, gn;
      int rc = minibatch(s, b0, n, &surr, &vl, &gn);
      if (rc < 0) return -1;
      if (rc > 0) {
        (*skipped)++;
        continue;
      }
      tot_surr += surr;
      tot_v += vl;
      tot_gn += gn;
      nupd++;
    }
  U[0] = nupd ? tot_surr / nupd : NAN;
  U[1] = nupd ? tot_v / nupd : NAN;
  U[2] = nupd ? tot_gn / nupd : NAN;
  return 0;
}

/* [run] check_replicas: every parameter, Adam moment and normaliser
 * statistic the same on every rank (hashes compared); -1 with a message if not */
static int check_replicas(ppo *s) {
  const struct {
    const void *p;
    size_t n;
    const char *what;
  } parts[] = {{s->actor.params, s->actor.nparams * sizeof(bcg_real), "actor parameters"},
               {s->critic.params, s->critic.nparams * sizeof(bcg_real), "critic parameters"},
               {s->aopt.m, s->aopt.n * sizeof(bcg_real), "actor Adam moments"},
               {s->aopt.v, s->aopt.n * sizeof(bcg_real), "actor Adam moments"},
               {s->copt.m, s->copt.n * sizeof(bcg_real), "critic Adam moments"},
               {s->copt.v, s->copt.n * sizeof(bcg_real), "critic Adam moments"},
               {s->obs_rms.mean, (size_t)s->od * sizeof(bcg_real), "observation normaliser statistics"},
               {s->obs_rms.var, (size_t)s->od * sizeof(bcg_real), "observation normaliser statistics"},
               {&s->sched.lr, sizeof s->sched.lr, "learning rate"}};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    int same = s->svc->dist_same(parts[i].p, parts[i].n);
    if (same != 1) {
      if (BCG_SVC_HAS(s->svc, error))
        s->svc->error(1, "[run] check_replicas: the %s differ between the ranks after iteration %lld%s", parts[i].what,
                      (long long)s->tr->iteration, same < 0 ? " (the comparison failed)" : "");
      return -1;
    }
  }
  return 0;
}

static int iterate(void *p, bcg_learner_stats *st) {
  ppo *s = p;
  bcg_estimator_stats es0;
  s->est_ops->stats(s->est, &es0);
  if (s->est_ops->begin(s->est)) return -1;
  memcpy(s->lsold, s->actor.extra_params, sizeof(bcg_real) * s->nu); /* the rollout policy's log-std, for the KL */
  lu_sums S = {0, 0, 0, 0, 0, 0, 0};
  int skipped = 0;
  double U[3];
  /* with the rollout's batches on the GPU, both networks' parameters,
   * gradients and Adam moments stay there for the whole iteration
   * (bcg_mlp_hold; the log-std extra parameters stay current on the host):
   * no parameters sent per call, no gradients back, the clip and Adam on the
   * device, bit for bit the host's */
  int minb = 0, hold = bcg_nn_cuda_enabled(&minb) && s->N >= minb;
  if (hold && bcg_mlp_hold(&s->actor, &s->aopt)) return -1;
  if (hold && bcg_mlp_hold(&s->critic, &s->copt)) {
    bcg_mlp_release(&s->actor, &s->aopt);
    return -1;
  }
  int rc = rollout(s, &S) || advantages(s) || update(s, &skipped, U);
  if (hold && bcg_mlp_release(&s->actor, &s->aopt)) rc = 1;
  if (hold && bcg_mlp_release(&s->critic, &s->copt)) rc = 1;
  if (rc) return -1;
  if (s->check && check_replicas(s)) return -1;
  lu_stats_common(st, s->est_ops, s->est, &es0, S.episodes, S.ret, S.len, S.nrew, S.rew, s->actor.extra_params, s->nu,
                  S.nan_resets, skipped);
  st->actor_loss = U[0];
  st->critic_loss = U[1];
  st->grad_norm = U[2];
  st->grad_var = NAN;
  st->track_err = lu_track_mean(&s->trk);
  st->lr = (double)s->sched.lr;
  return 0;
}

static int save(void *p, int64_t g) {
  ppo *s = p;
  int N = s->N;
  int64_t ctr[2] = {(int64_t)s->draw, (int64_t)s->step};
  double lr = (double)s->sched.lr;
  return (lu_save_mlp(g, "actor", &s->actor) || lu_save_adam(g, "actor/adam", &s->aopt) ||
          lu_save_mlp(g, "critic", &s->critic) || lu_save_adam(g, "critic/adam", &s->copt) ||
          lu_save_norm(g, "obs_rms", &s->obs_rms) ||
          lu_save_env_state(g, N, s->nx, s->nu, s->x, s->clk, s->prev_a, s->ep_ret, s->ep_len) ||
          lu_save_i64(g, "counters", ctr, 2) || lu_save_doubles(g, "lr", &lr, 1) || lu_save_domain(g, s->env))
             ? -1
             : 0;
}

static int load(void *p, int64_t g) {
  ppo *s = p;
  int N = s->N;
  int64_t ctr[2];
  double lr;
  if (lu_load_mlp(g, "actor", &s->actor) || lu_load_adam(g, "actor/adam", &s->aopt) ||
      lu_load_mlp(g, "critic", &s->critic) || lu_load_adam(g, "critic/adam", &s->copt) ||
      lu_load_norm(g, "obs_rms", &s->obs_rms) ||
      lu_load_env_state(g, N, s->nx, s->nu, s->x, s->clk, s->prev_a, s->ep_ret, s->ep_len) ||
      lu_load_i64(g, "counters", ctr, 2) || lu_load_doubles(g, "lr", &lr, 1) || lu_load_domain(g, s->env))
    return -1;
  s->draw = (uint64_t)ctr[0];
  s->step = (uint64_t)ctr[1];
  s->sched.lr = (bcg_real)lr;
  return 0;
}

static int act(void *p, const bcg_real *obs, int n, bcg_real *a) {
  ppo *s = p;
  return lu_act(&s->actor, s->obs_norm ? &s->obs_rms : NULL, s->squash, s->od, s->nu, obs, n, a);
}

static const bcg_key_spec keys[] = {
    {"steps_per_env", BCG_KEY_INT, "24", 1, 100000, NULL, "rollout steps per environment and iteration (rsl_rl 24)"},
    {"epochs", BCG_KEY_INT, "5", 1, 1000, NULL, "passes over the rollout (rsl_rl num_learning_epochs = 5)"},
    {"minibatches", BCG_KEY_INT, "4", 1, 100000, NULL, "minibatches per pass (rsl_rl num_mini_batches = 4)"},
    {"clip", BCG_KEY_REAL, "0.2", 0, 10, NULL, "ratio and value clip (rsl_rl clip_param = 0.2)"},
    {"gamma", BCG_KEY_REAL, "0.99", 0, 1, NULL, "discount (rsl_rl 0.99)"},
    {"lambda", BCG_KEY_REAL, "0.95", 0, 1, NULL, "GAE lambda (rsl_rl lam = 0.95)"},
    {"lr", BCG_KEY_REAL, "1e-3", 0, 10, NULL, "initial Adam learning rate (rsl_rl learning_rate = 1e-3)"},
    {"schedule", BCG_KEY_CHOICE, "adaptive", 0, 0, "adaptive|fixed",
     "adaptive: lr follows the KL to desired_kl, clamped to [1e-5, 1e-2] (rsl_rl schedule = adaptive)"},
    {"desired_kl", BCG_KEY_REAL, "0.01", 0, 10, NULL, "KL target of the adaptive schedule (rsl_rl 0.01)"},
    {"beta1", BCG_KEY_REAL, "0.9", 0, 0.999999, NULL, "Adam beta1 (PyTorch default, as rsl_rl)"},
    {"beta2", BCG_KEY_REAL, "0.999", 0, 0.999999, NULL, "Adam beta2 (PyTorch default, as rsl_rl)"},
    {"entropy_coef", BCG_KEY_REAL, "0.01", 0, 100, NULL,
     "entropy bonus (rsl_rl 0.01; 0.005 common for humanoid tracking; BCG paper 0.0)"},
    {"value_loss_coef", BCG_KEY_REAL, "1.0", 0, 100, NULL, "value-loss weight (rsl_rl 1.0)"},
    {"clipped_value_loss", BCG_KEY_BOOL, "true", 0, 0, NULL, "clip the value update like the ratio (rsl_rl true)"},
    {"max_grad_norm", BCG_KEY_REAL, "1.0", 0, 1e30, NULL,
     "gradient-norm clip over actor and critic together (rsl_rl 1.0)"},
    {"init_noise_std", BCG_KEY_REAL, "1.0", 1e-6, 100, NULL, "initial action std (rsl_rl 1.0; BCG paper 0.3)"},
    {"actor_layers", BCG_KEY_LIST, "512,256,128", 1, 65536, NULL,
     "actor hidden layers (legged_gym / BCG paper [512, 256, 128])"},
    {"critic_layers", BCG_KEY_LIST, "512,256,128", 1, 65536, NULL,
     "critic hidden layers (legged_gym [512, 256, 128]; BCG paper 256,256)"},
    {"activation", BCG_KEY_CHOICE, "elu", 0, 0, "elu|relu|tanh|identity", "hidden activation (rsl_rl elu)"},
    {"layernorm", BCG_KEY_CHOICE, "none", 0, 0, "none|pre|post", "LayerNorm of hidden layers (rsl_rl none)"},
    {"init", BCG_KEY_CHOICE, "uniform", 0, 0, "uniform|orthogonal",
     "weight init: uniform = PyTorch's nn.Linear default (rsl_rl)"},
    {"obs_norm", BCG_KEY_BOOL, "false", 0, 0, NULL,
     "running observation normalisation (rsl_rl empirical_normalization = False)"},
    {"obs_clip", BCG_KEY_REAL, "0", 0, 1e6, NULL, "clip normalised observations to +-obs_clip (0: no clip)"},
    {"squash", BCG_KEY_CHOICE, "none", 0, 0, "none|tanh", "actions sent to the env: raw (rsl_rl) or tanh(sample)"},
};

LU_LEARNER_PLUGIN("ppo", "clipped PPO with GAE and adaptive-KL learning rate (rsl_rl)", BCG_CAP_DATA_PARALLEL)
