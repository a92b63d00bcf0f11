/* learners/shac.c - Short-Horizon Actor-Critic (Xu et al., ICLR 2022),
 * defaults from SHAC's public configuration (DiffRL); docs/design.md section
 * 7.1 has the iteration in detail.
 *
 * One iteration, in stage functions: a differentiable rollout of `horizon`
 * steps through the estimator; the actor loss (discounted rewards and the
 * target critic at a segment's end, no bootstrap after a termination); the
 * backward pass in reverse time (reward, critic, estimator, policy, observe
 * VJPs); the actor update (clip, Adam, linear LR decay); the critics'
 * TD(lambda) regression and their Polyak targets.
 *
 * Guarantees: the VJPs see the clock and the randomised model their forward
 * saw, also for environments reset since (domain randomisation is re-drawn
 * only at the horizon boundary); NaN/Inf resets the environment and zeroes
 * its segment's adjoints, and a non-finite gradient skips the update (both
 * counted); the policy gradient is exact (test_learners: FD of the actor
 * loss); grad_var is the variance across environments of their own
 * gradients, recovered by replaying the policy's VJP row by row. */
#include <math.h>
#include <omp.h>
#include <pthread.h>
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

#define MAXCRIT 8

typedef struct shac {
  const bcg_services *svc;
  bcg_trainer *tr;
  bcg_env *env;
  const bcg_task_ops *task_ops;
  void *task;
  const bcg_estimator_ops *est_ops;
  void *est;
  int N, nx, nxb, nu, od, T;
  /* configuration */
  double gamma, lam, actor_lr, critic_lr, lr_end, beta1, beta2, adam_eps, actor_clip, critic_clip, alpha,
      rew_scale, logstd_init;
  int critic_iters, nbatch, K, obs_norm, ret_norm, squash, lr_linear, per_step, grad_var_every, shuffle;
  int overlap; /* critic_overlap: 0 false, 1 true, 2 auto */
  /* networks */
  bcg_mlp actor;
  bcg_adam aopt;
  bcg_mlp critic[MAXCRIT], target[MAXCRIT];
  bcg_adam copt[MAXCRIT];
  bcg_normalizer obs_rms, ret_rms, snap;
  /* state carried across iterations (checkpointed) */
  bcg_real *x;      /* [N][nx] */
  bcg_task_clock *clk; /* [N] task clocks */
  bcg_real *prev_a; /* [N][nu] */
  double *ep_ret;   /* [N] undiscounted return of the running episode */
  int64_t *ep_len;  /* [N] */
  double *ret;      /* [N] discounted return (return normalisation) */
  uint64_t draw;    /* reset counter (task random stream; also the domain draw index) */
  int64_t *pend;    /* [N] domain re-draw deferred to the horizon boundary (-1: none) */
  uint64_t step;    /* global rollout step (action-noise stream) */
  /* rollout buffers */
  bcg_real *X, *XN;        /* [T+1][N][nx], [T][N][nx] */
  bcg_task_clock *CLK, *CLKN; /* [T][N] clocks of x_t and of x_{t+1} (before any reset) */
  bcg_real *PREV, *A, *EPS;/* [T][N][nu] */
  bcg_real *OBS, *OBSP;    /* [T][N][od] raw policy input, normalised policy input */
  bcg_real *OBSX;          /* [T][N][od] raw observation of x_{t+1} before any reset */
  bcg_real *R, *RW;        /* [T][N] raw reward (0 where NaN), reward the critic sees */
  int *DONE;               /* [T][N] 0, 1, 2, 3 = NaN */
  unsigned char *live;     /* [T][N] */
  bcg_real *CR, *CV;       /* [T][N] loss coefficients of r_t and of V'(x_{t+1}) */
  bcg_real *NV, *TV;       /* [T][N] next values (0 after termination), TD(lambda) targets */
  bcg_mlp_tape *ptape;     /* [T] */
  bcg_mlp_tape *vtape;     /* [T][K] */
  /* scratch */
  bcg_real *obs, *obsn, *mu, *rew, *v, *xb, *xbn, *ab, *pab, *dmu, *dobs, *dobs2, *dv, *lsb, *mub;
  int *done, *envs, *seg;
  double *g;
  bcg_real *cbuf_y, *cbuf_dy; /* critic minibatch */
  bcg_nn_rows obsp_rows;      /* OBSP as the critics' row source (sent to the device once per update) */
  int *perm;              /* [K][T*N] sample order per critic */
  double *closs_mb;       /* [K][minibatches] the last pass's critic losses */
  bcg_real *gvar; /* [nparams] per-environment gradient (grad_var) */
  bcg_mlp_tape row; /* batch-1 tape (grad_var) */
  lu_track trk;     /* the rollout's tracking error (stats.track_err) */
} shac;

static void destroy(void *p) {
  shac *s = p;
  if (!s) return;
  bcg_mlp_destroy(&s->actor);
  bcg_adam_free(&s->aopt);
  for (int k = 0; k < MAXCRIT; k++) {
    bcg_mlp_destroy(&s->critic[k]);
    bcg_mlp_destroy(&s->target[k]);
    bcg_adam_free(&s->copt[k]);
  }
  bcg_normalizer_free(&s->obs_rms);
  bcg_normalizer_free(&s->ret_rms);
  bcg_normalizer_free(&s->snap);
  bcg_nn_rows_free(&s->obsp_rows);
  if (s->ptape)
    for (int t = 0; t < s->T; t++) bcg_mlp_tape_free(&s->ptape[t]);
  if (s->vtape)
    for (int i = 0; i < s->T * s->K; i++) bcg_mlp_tape_free(&s->vtape[i]);
  bcg_mlp_tape_free(&s->row);
  lu_track_free(&s->trk);
  void *bufs[] = {s->x,    s->clk,  s->prev_a, s->ep_ret, s->ep_len, s->ret,  s->X,     s->XN,    s->CLK,
                  s->CLKN, s->PREV, s->A,      s->EPS,    s->OBS,    s->OBSP, s->OBSX,  s->R,     s->RW,
                  s->DONE, s->live, s->CR,     s->CV,     s->NV,     s->TV,   s->ptape, s->vtape, s->obs,
                  s->obsn, s->mu,   s->rew,    s->v,      s->xb,     s->xbn,  s->ab,    s->pab,   s->dmu,
                  s->dobs, s->dobs2, s->dv,    s->lsb,    s->mub,    s->done, s->envs,  s->seg,   s->g,
                  s->cbuf_y, s->cbuf_dy, s->perm, s->closs_mb, s->gvar, s->pend};
  lu_free_all(bufs, sizeof bufs / sizeof bufs[0]);
  free(s);
}

/* Reset envs[0..n-1] with the task's draw counter k, which is also the draw
 * index of their domain randomisation (friction, masses, com offsets). The
 * re-draw cannot happen here inside a horizon (defer = 1): the backward pass
 * of this horizon's steps BEFORE the reset reads the env's domain when it
 * runs, so it must still find the model those steps were taken with
 * (docs/design.md section 12). It is deferred to the horizon boundary (after
 * the backward, lu_domain_apply in iterate); the new episode runs on the
 * previous draw until then. Outside a horizon (creation, the NaN check
 * before the rollout) it happens at once (defer = 0). */
static int reset_envs(shac *s, const int *envs, int n, bcg_real *x, int defer) {
  if (n == 0) return 0;
  uint64_t k = s->draw++;
  for (int i = 0; i < n; i++) s->pend[envs[i]] = defer ? (int64_t)k : -1;
  if (!defer) bcg_env_randomize(s->env, envs, n, k); /* no-op without DR */
  int rc = s->task_ops->reset(s->task, envs, n, k, x, s->clk);
  for (int i = 0; i < n; i++) {
    int e = envs[i];
    memset(s->prev_a + (size_t)e * s->nu, 0, sizeof(bcg_real) * s->nu);
    s->ep_ret[e] = 0;
    s->ep_len[e] = 0;
    s->ret[e] = 0;
  }
  return rc;
}

static void *create(const bcg_services *svc, const bcg_params *p, bcg_trainer *tr, char *err, size_t errlen) {
  shac *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  LU_BIND_TRAINER(s, svc, tr);
  s->nxb = 2 * s->env->nv;
  s->T = (int)svc->get_int(p, "horizon");
  s->gamma = svc->get_real(p, "gamma");
  s->lam = svc->get_real(p, "lambda");
  s->actor_lr = svc->get_real(p, "actor_lr");
  s->critic_lr = svc->get_real(p, "critic_lr");
  s->lr_end = svc->get_real(p, "lr_end");
  s->lr_linear = !strcmp(svc->get_string(p, "lr_schedule"), "linear");
  s->beta1 = svc->get_real(p, "beta1");
  s->beta2 = svc->get_real(p, "beta2");
  s->adam_eps = svc->get_real(p, "adam_eps");
  s->actor_clip = svc->get_real(p, "actor_grad_clip");
  s->critic_clip = svc->get_real(p, "critic_grad_clip");
  s->critic_iters = (int)svc->get_int(p, "critic_iterations");
  s->nbatch = (int)svc->get_int(p, "minibatches");
  s->shuffle = svc->get_bool(p, "critic_shuffle");
  s->alpha = svc->get_real(p, "target_alpha");
  s->K = (int)svc->get_int(p, "critics");
  s->logstd_init = svc->get_real(p, "logstd_init");
  s->squash = !strcmp(svc->get_string(p, "squash"), "tanh");
  s->obs_norm = svc->get_bool(p, "obs_norm");
  s->ret_norm = svc->get_bool(p, "ret_norm");
  s->rew_scale = svc->get_real(p, "reward_scale");
  s->per_step = !strcmp(svc->get_string(p, "actor_loss_mean"), "env_steps");
  s->grad_var_every = (int)svc->get_int(p, "grad_var_every");
  const char *ov = svc->get_string(p, "critic_overlap");
  s->overlap = !strcmp(ov, "true") ? 1 : !strcmp(ov, "false") ? 0 : 2;
  int N = s->N, T = s->T, nu = s->nu, od = s->od, nx = s->nx, nxb = s->nxb, K = s->K;
  if (T <= 0 || K < 1 || K > MAXCRIT || od <= 0 || nu <= 0) {
    snprintf(err, errlen, "shac: bad dimensions (horizon %d, critics %d, obs %d, actions %d)", T, K, od, nu);
    goto fail;
  }
  int M = T * N, bs = (M + s->nbatch - 1) / s->nbatch;
  char e2[512];
  if (lu_mlp(&s->actor, svc, p, "actor_layers", od, nu, nu, (bcg_real)s->logstd_init, N, e2, sizeof e2)) {
    snprintf(err, errlen, "shac: %s", e2);
    goto fail;
  }
  bcg_mlp_init_params(&s->actor, tr->seed, 1);
  if (bcg_adam_init(&s->aopt, s->actor.nparams, (bcg_real)s->actor_lr, (bcg_real)s->beta1, (bcg_real)s->beta2,
                    (bcg_real)s->adam_eps))
    goto oom;
  for (int k = 0; k < K; k++) {
    int cap = bs > N ? bs : N;
    if (lu_mlp(&s->critic[k], svc, p, "critic_layers", od, 1, 0, 0, cap, e2, sizeof e2) ||
        lu_mlp(&s->target[k], svc, p, "critic_layers", od, 1, 0, 0, N, e2, sizeof e2)) {
      snprintf(err, errlen, "shac: %s", e2);
      goto fail;
    }
    bcg_mlp_init_params(&s->critic[k], tr->seed, (uint32_t)(10 + k));
    memcpy(s->target[k].params, s->critic[k].params, s->critic[k].nparams * sizeof(bcg_real));
    if (bcg_adam_init(&s->copt[k], s->critic[k].nparams, (bcg_real)s->critic_lr, (bcg_real)s->beta1,
                      (bcg_real)s->beta2, (bcg_real)s->adam_eps))
      goto oom;
  }
  /* SHAC's RunningMeanStd: count 1e-4, var epsilon 1e-5, no clipping */
  if (bcg_normalizer_init(&s->obs_rms, od, 0, 1e-4) || bcg_normalizer_init(&s->ret_rms, 1, 0, 1e-4) ||
      bcg_normalizer_init(&s->snap, od, 0, 1e-4))
    goto oom;
  if (bcg_mlp_tape_init(&s->row, &s->actor, 1, NULL)) goto oom;
  if (!ALLOC(s->ptape, T) || !ALLOC(s->vtape, T * K)) goto oom;
  for (int t = 0; t < T; t++)
    if (bcg_mlp_tape_init(&s->ptape[t], &s->actor, N, NULL)) goto oom;
  for (int t = 0; t < T; t++)
    for (int k = 0; k < K; k++)
      if (bcg_mlp_tape_init(&s->vtape[t * K + k], &s->target[k], N, NULL)) goto oom;
  if (!ALLOC(s->x, N * nx) || !ALLOC(s->clk, N) || !ALLOC(s->prev_a, N * nu) || !ALLOC(s->ep_ret, N) ||
      !ALLOC(s->ep_len, N) || !ALLOC(s->ret, N) || !ALLOC(s->X, (T + 1) * N * nx) || !ALLOC(s->XN, T * N * nx) ||
      !ALLOC(s->CLK, T * N) || !ALLOC(s->CLKN, T * N) || !ALLOC(s->PREV, T * N * nu) || !ALLOC(s->A, T * N * nu) ||
      !ALLOC(s->EPS, T * N * nu) || !ALLOC(s->OBS, T * N * od) || !ALLOC(s->OBSP, T * N * od) ||
      !ALLOC(s->OBSX, T * N * od) || !ALLOC(s->R, T * N) || !ALLOC(s->RW, T * N) || !ALLOC(s->DONE, T * N) ||
      !ALLOC(s->live, T * N) || !ALLOC(s->CR, T * N) || !ALLOC(s->CV, T * N) || !ALLOC(s->NV, T * N) ||
      !ALLOC(s->TV, T * N) || !ALLOC(s->obs, N * od) || !ALLOC(s->obsn, N * od) || !ALLOC(s->mu, N * nu) ||
      !ALLOC(s->rew, N) || !ALLOC(s->v, N) || !ALLOC(s->xb, N * nxb) || !ALLOC(s->xbn, N * nxb) ||
      !ALLOC(s->ab, N * nu) || !ALLOC(s->pab, N * nu) || !ALLOC(s->dmu, N * nu) || !ALLOC(s->dobs, N * od) ||
      !ALLOC(s->dobs2, N * od) || !ALLOC(s->dv, N) || !ALLOC(s->lsb, N * nu) || !ALLOC(s->mub, T * N * nu) ||
      !ALLOC(s->done, N) || !ALLOC(s->envs, N) || !ALLOC(s->seg, N) || !ALLOC(s->g, N) ||
      !ALLOC(s->cbuf_y, K * bs) || !ALLOC(s->cbuf_dy, K * bs) ||
      !ALLOC(s->perm, K * M) || !ALLOC(s->closs_mb, K * s->nbatch) ||
      !ALLOC(s->gvar, s->actor.nparams) || !ALLOC(s->pend, N) || lu_track_init(&s->trk, s->task_ops, N) ||
      bcg_nn_rows_init(&s->obsp_rows, s->OBSP, (long)M, od))
    goto oom;
  for (int e = 0; e < N; e++) s->pend[e] = -1;
  /* the first episodes */
  for (int e = 0; e < N; e++) s->envs[e] = e;
  if (reset_envs(s, s->envs, N, s->x, 0)) {
    snprintf(err, errlen, "shac: the task's reset failed");
    goto fail;
  }
  return s;
oom:
  snprintf(err, errlen, "shac: out of memory");
fail:
  destroy(s);
  return NULL;
}

/* observations of states x under prev with clocks clk into obs; returns a
 * bitmask-free count of environments whose observation is not finite (their
 * indices into bad[]) */
static int observe(shac *s, const bcg_real *x, const bcg_real *prev, const bcg_task_clock *clk, bcg_real *obs,
                   int *bad) {
  return lu_observe(s->task_ops, s->task, s->N, s->od, x, prev, clk, obs, bad);
}

static void normalise(shac *s, const bcg_real *obs, bcg_real *out) {
  lu_normalise(s->obs_norm ? &s->snap : NULL, obs, s->N, s->od, out);
}

static void normalise_vjp(shac *s, const bcg_real *obs, const bcg_real *dy, bcg_real *dx) {
  if (s->obs_norm)
    bcg_normalizer_vjp(&s->snap, obs, dy, s->N, dx);
  else
    memcpy(dx, dy, sizeof(bcg_real) * (size_t)s->N * s->od);
}

static bcg_real lr_at(shac *s, double lr0) {
  if (!s->lr_linear || s->tr->max_iterations <= 0) return (bcg_real)lr0;
  return bcg_lr_linear((bcg_real)lr0, (bcg_real)s->lr_end, s->tr->iteration, s->tr->max_iterations);
}

/* ensemble-mean target value of normalised observations obsn [N][od] into v,
 * recording the tapes of step t */
static int target_values(shac *s, int t, const bcg_real *obsn, bcg_real *v) {
  for (int e = 0; e < s->N; e++) v[e] = 0;
  for (int k = 0; k < s->K; k++) {
    bcg_mlp_tape *tp = &s->vtape[t * s->K + k];
    if (bcg_mlp_forward(&s->target[k], tp, obsn, s->N, NULL)) return -1;
    const bcg_real *y = bcg_mlp_tape_output(&s->target[k], tp);
    for (int e = 0; e < s->N; e++) v[e] += y[e] / (bcg_real)s->K;
  }
  return 0;
}

/* step 1 of the module header: T steps from s->x into the rollout buffers,
 * with the loss coefficients of step 2 (CR, CV); rs: the return normaliser's
 * scale at the iteration's start */
/* step t's rewards: a non-finite reward, state or observation makes the
 * environment's transition a NaN reset (done 3: its segment contributes
 * nothing); the rest go into R, RW (scaled and normalised for the critic),
 * CR (the loss coefficient), the return normaliser's running return, the
 * episode sums and S. Returns the number of environments to reset, listed
 * in s->envs. */
static int record_rewards(shac *s, int t, double rs, double norm, const bcg_real *XNt, bcg_real *OBSXt, int *Dt,
                          lu_sums *S) {
  int N = s->N, nx = s->nx, od = s->od, nreset = 0;
  for (int e = 0; e < N; e++) {
    int bad = !isfinite((double)s->rew[e]) || !lu_finite(XNt + (size_t)e * nx, (size_t)nx) ||
              !lu_finite(OBSXt + (size_t)e * od, (size_t)od);
    size_t te = (size_t)t * N + e;
    if (bad) {
      Dt[e] = 3;
      S->nan_resets++;
      for (int u = s->seg[e]; u <= t; u++) {
        s->live[(size_t)u * N + e] = 0;
        s->CR[(size_t)u * N + e] = 0;
        s->CV[(size_t)u * N + e] = 0;
      }
      s->rew[e] = 0;
      memset(OBSXt + (size_t)e * od, 0, sizeof(bcg_real) * od); /* keep the critic's input finite */
    }
    double r = (double)s->rew[e];
    s->R[te] = (bcg_real)r;
    double rw = r * s->rew_scale;
    if (s->ret_norm && !bad) {
      s->ret[e] = s->ret[e] * s->gamma + rw;
    }
    s->RW[te] = (bcg_real)(rw / rs);
    s->CR[te] = bad ? 0 : (bcg_real)(-s->g[e] * s->rew_scale * norm);
    if (!bad) {
      S->rew += r;
      S->nrew++;
      s->ep_ret[e] += r;
      s->ep_len[e]++;
      S->loss += (double)s->CR[te] * r;
    }
    if (Dt[e]) s->envs[nreset++] = e;
  }
  return nreset;
}

static int rollout(shac *s, double rs, lu_sums *S) {
  int N = s->N, T = s->T, nu = s->nu, od = s->od, nx = s->nx;
  const bcg_task_ops *to = s->task_ops;
  const bcg_real *ls = s->actor.extra_params;
  double norm = s->per_step ? 1.0 / ((double)N * T) : 1.0 / N;
  memcpy(s->X, s->x, sizeof(bcg_real) * (size_t)N * nx);
  lu_track_begin(&s->trk);
  for (int e = 0; e < N; e++) s->g[e] = 1, s->seg[e] = 0;
  memset(s->live, 1, (size_t)T * N);
  /* the observation the rollout starts from */
  int nb = observe(s, s->X, s->prev_a, s->clk, s->obs, s->envs);
  if (nb < 0) return -1;
  if (nb > 0) {
    S->nan_resets += nb;
    if (reset_envs(s, s->envs, nb, s->X, 0) || s->est_ops->reset_envs(s->est, s->envs, nb)) return -1;
    if (observe(s, s->X, s->prev_a, s->clk, s->obs, s->envs) != 0) {
      s->svc->log(2, "shac: the task's observation is not finite right after a reset");
      return -1;
    }
  }

  for (int t = 0; t < T; t++) {
    bcg_real *Xt = s->X + (size_t)t * N * nx, *XNt = s->XN + (size_t)t * N * nx, *Xt1 = Xt + (size_t)N * nx;
    bcg_real *At = s->A + (size_t)t * N * nu, *Et = s->EPS + (size_t)t * N * nu;
    bcg_task_clock *CLKt = s->CLK + (size_t)t * N, *CLKNt = s->CLKN + (size_t)t * N;
    int *Dt = s->DONE + (size_t)t * N;
    bcg_real *PREVt = s->PREV + (size_t)t * N * nu;
    memcpy(CLKt, s->clk, sizeof(bcg_task_clock) * N);
    memcpy(PREVt, s->prev_a, sizeof(bcg_real) * (size_t)N * nu);
    memcpy(s->OBS + (size_t)t * N * od, s->obs, sizeof(bcg_real) * (size_t)N * od);
    if (s->obs_norm) bcg_normalizer_update(&s->obs_rms, s->obs, N);
    bcg_real *OBSPt = s->OBSP + (size_t)t * N * od;
    normalise(s, s->obs, OBSPt);
    /* policy */
    if (bcg_mlp_forward(&s->actor, &s->ptape[t], OBSPt, N, s->mu)) return -1;
    for (int e = 0; e < N; e++)
      bcg_rng_fill_normal(Et + (size_t)e * nu, nu, s->tr->seed, BCG_RNG_ACTION, (uint32_t)e, (uint32_t)s->step);
    s->step++;
    bcg_gauss_sample_batch(N, nu, s->mu, ls, Et, At);
    if (s->squash)
      for (int i = 0; i < N * nu; i++) At[i] = tanh(At[i]);
    /* physics, reward, the observation of x_{t+1} */
    if (s->est_ops->forward(s->est, t, Xt, At, XNt)) return -1;
    for (int e = 0; e < N; e++) s->clk[e].t++;
    memcpy(CLKNt, s->clk, sizeof(bcg_task_clock) * N);
    bcg_real *OBSXt = s->OBSX + (size_t)t * N * od;
    if (lu_step_outputs(&s->trk, to, s->task, N, XNt, At, PREVt, CLKNt, s->rew, Dt, OBSXt)) return -1;
    int nreset = record_rewards(s, t, rs, norm, XNt, OBSXt, Dt, S);
    if (s->ret_norm) {
      bcg_real rb[1];
      for (int e = 0; e < N; e++) {
        rb[0] = (bcg_real)s->ret[e];
        if (Dt[e] != 3) bcg_normalizer_update(&s->ret_rms, rb, 1);
      }
    }
    /* target values at x_{t+1} (before any reset) */
    normalise(s, OBSXt, s->obsn);
    if (target_values(s, t, s->obsn, s->v)) return -1;
    for (int e = 0; e < N; e++) {
      size_t te = (size_t)t * N + e;
      int term = Dt[e] == 1 || Dt[e] == 3;
      s->NV[te] = term ? 0 : s->v[e];
      int boot = !term && (Dt[e] == 2 || t == T - 1);
      s->CV[te] = boot ? (bcg_real)(-s->gamma * s->g[e] * rs * norm) : 0;
      if (boot) S->loss += (double)s->CV[te] * (double)s->v[e];
      s->g[e] *= s->gamma;
    }
    /* resets after step t */
    memcpy(Xt1, XNt, sizeof(bcg_real) * (size_t)N * nx);
    memcpy(s->prev_a, At, sizeof(bcg_real) * (size_t)N * nu);
    for (int i = 0; i < nreset; i++) {
      int e = s->envs[i];
      if (Dt[e] != 3) {
        S->episodes++;
        S->ret += s->ep_ret[e];
        S->len += (double)s->ep_len[e];
      }
      s->g[e] = 1;
      s->seg[e] = t + 1;
    }
    if (nreset) {
      if (reset_envs(s, s->envs, nreset, Xt1, 1) || s->est_ops->reset_envs(s->est, s->envs, nreset)) return -1;
      /* the others' rows are OBSX's (their next states, observed above): observe the reset ones only */
      memcpy(s->obs, OBSXt, sizeof(bcg_real) * (size_t)N * od);
      nb = lu_observe_envs(s->task_ops, s->task, s->envs, nreset, od, Xt1, s->prev_a, s->clk, s->obs, s->done);
      if (nb < 0) return -1;
      for (int i = 0; i < nb; i++)
        if (Dt[s->done[i]] != 0) {
          s->svc->log(2, "shac: the task's observation is not finite right after a reset");
          return -1;
        }
      /* nb == 0 here: envs not reset have the finite OBSX rows checked above */
    } else {
      memcpy(s->obs, OBSXt, sizeof(bcg_real) * (size_t)N * od);
    }
  }
  memcpy(s->x, s->X + (size_t)T * N * nx, sizeof(bcg_real) * (size_t)N * nx);
  return 0;
}

/* step 3: the backward pass in reverse time into the actor's gradient (and
 * the log-std's), then the domain re-draws deferred to the horizon boundary */
static int backward(shac *s) {
  int N = s->N, T = s->T, nu = s->nu, od = s->od, nx = s->nx, nxb = s->nxb, K = s->K;
  const bcg_real *ls = s->actor.extra_params;
  bcg_mlp_zero_grad(&s->actor);
  bcg_real *lsg = s->actor.extra_grad;
  memset(s->xbn, 0, sizeof(bcg_real) * (size_t)N * nxb);
  memset(s->pab, 0, sizeof(bcg_real) * (size_t)N * nu);
  memset(s->lsb, 0, sizeof(bcg_real) * (size_t)N * nu);
  for (int t = T - 1; t >= 0; t--) {
    bcg_real *Xt = s->X + (size_t)t * N * nx, *XNt = s->XN + (size_t)t * N * nx;
    bcg_real *At = s->A + (size_t)t * N * nu, *Et = s->EPS + (size_t)t * N * nu;
    const bcg_real *PREVt = s->PREV + (size_t)t * N * nu;
    const bcg_task_clock *CLKt = s->CLK + (size_t)t * N, *CLKNt = s->CLKN + (size_t)t * N;
    int *Dt = s->DONE + (size_t)t * N;
    const unsigned char *lv = s->live + (size_t)t * N;
    /* adjoints of x_{t+1} (pre-reset) and a_t from the future (step t+1's
     * observation and reward took a_t as their previous action): cut at
     * resets; pab now collects the adjoint of a_{t-1} */
    memcpy(s->ab, s->pab, sizeof(bcg_real) * (size_t)N * nu);
    memset(s->pab, 0, sizeof(bcg_real) * (size_t)N * nu);
    for (int e = 0; e < N; e++)
      if (Dt[e]) {
        memset(s->xbn + (size_t)e * nxb, 0, sizeof(bcg_real) * nxb);
        memset(s->ab + (size_t)e * nu, 0, sizeof(bcg_real) * nu);
      }
    /* reward */
    for (int e = 0; e < N; e++) s->rew[e] = lv[e] ? s->CR[(size_t)t * N + e] : 0;
    if (s->task_ops->reward_vjp(s->task, XNt, At, PREVt, CLKNt, s->rew, s->xbn, s->ab, s->pab)) return -1;
    /* bootstrap value */
    int anyv = 0;
    for (int e = 0; e < N; e++) {
      s->dv[e] = lv[e] ? s->CV[(size_t)t * N + e] / (bcg_real)K : 0;
      anyv |= s->dv[e] != 0;
    }
    if (anyv) {
      memset(s->dobs2, 0, sizeof(bcg_real) * (size_t)N * od);
      for (int k = 0; k < K; k++) {
        if (bcg_mlp_backward(&s->target[k], &s->vtape[t * K + k], s->dv, NULL, s->dobs)) return -1;
        for (int i = 0; i < N * od; i++) s->dobs2[i] += s->dobs[i];
      }
      normalise_vjp(s, s->OBSX + (size_t)t * N * od, s->dobs2, s->dobs);
      if (s->task_ops->observe_vjp(s->task, XNt, At, CLKNt, s->dobs, s->xbn, s->ab)) return -1;
    }
    for (int e = 0; e < N; e++)
      if (!lv[e]) {
        memset(s->xbn + (size_t)e * nxb, 0, sizeof(bcg_real) * nxb);
        memset(s->ab + (size_t)e * nu, 0, sizeof(bcg_real) * nu);
      }
    /* physics */
    if (s->est_ops->backward(s->est, t, s->xbn, s->xb, s->ab)) return -1;
    for (int e = 0; e < N; e++)
      if (!lv[e]) {
        memset(s->xb + (size_t)e * nxb, 0, sizeof(bcg_real) * nxb);
        memset(s->ab + (size_t)e * nu, 0, sizeof(bcg_real) * nu);
      }
    /* policy: squash, sample, MLP */
    bcg_real *mub = s->mub + (size_t)t * N * nu;
    for (int e = 0; e < N; e++)
      for (int j = 0; j < nu; j++) {
        size_t i = (size_t)e * nu + j;
        bcg_real d = s->ab[i];
        if (s->squash) d *= 1 - At[i] * At[i];
        mub[i] = d;
        s->lsb[i] += d * exp(ls[j]) * Et[i];
      }
    if (bcg_mlp_backward(&s->actor, &s->ptape[t], mub, s->actor.grad, s->dobs)) return -1;
    normalise_vjp(s, s->OBS + (size_t)t * N * od, s->dobs, s->dobs2);
    if (s->task_ops->observe_vjp(s->task, Xt, PREVt, CLKt, s->dobs2, s->xb, s->pab)) return -1;
    for (int e = 0; e < N; e++)
      if (!lv[e]) {
        memset(s->xb + (size_t)e * nxb, 0, sizeof(bcg_real) * nxb);
        memset(s->pab + (size_t)e * nu, 0, sizeof(bcg_real) * nu);
      }
    memcpy(s->xbn, s->xb, sizeof(bcg_real) * (size_t)N * nxb);
  }
  for (int e = 0; e < N; e++)
    for (int j = 0; j < nu; j++) lsg[j] += s->lsb[(size_t)e * nu + j];
  /* the horizon boundary: no backward pass reads this horizon's domain any
   * more, so the environments reset inside it get their new draw now */
  lu_domain_apply(s->env, s->pend, N);
  return 0;
}

/* grad_var (every grad_var_every iterations, else NaN): the variance across
 * environments of their own policy gradients (module header) */
static int grad_variance(shac *s, double *gvar) {
  int N = s->N, T = s->T, nu = s->nu, od = s->od;
  *gvar = NAN;
  if (s->grad_var_every > 0 && s->tr->iteration % s->grad_var_every == 0 && N > 1) {
    size_t np = s->actor.nparams;
    double sq = 0;
    for (int e = 0; e < N; e++) {
      memset(s->gvar, 0, np * sizeof(bcg_real));
      for (int t = 0; t < T; t++) {
        if (bcg_mlp_forward(&s->actor, &s->row, s->OBSP + ((size_t)t * N + e) * od, 1, NULL) ||
            bcg_mlp_backward(&s->actor, &s->row, s->mub + ((size_t)t * N + e) * nu, s->gvar, NULL))
          return -1;
      }
      for (int j = 0; j < nu; j++) s->gvar[s->actor.nnet + j] += s->lsb[(size_t)e * nu + j];
      for (size_t i = 0; i < np; i++) sq += (double)N * N * (double)s->gvar[i] * (double)s->gvar[i];
    }
    double G2 = 0;
    for (size_t i = 0; i < np; i++) G2 += (double)s->actor.grad[i] * (double)s->actor.grad[i];
    *gvar = (sq - N * G2) / (N - 1);
  }
  return 0;
}

/* step 4: clip and Adam at the scheduled LR; returns 1 when a non-finite
 * gradient skipped the update, with the gradient norm and the LR */
static int actor_update(shac *s, double *gnp, bcg_real *lrp) {
  int skipped = 0;
  bcg_real lr = *lrp = lr_at(s, s->actor_lr);
  double gn = *gnp = (double)bcg_vec_norm(s->actor.grad, s->actor.nparams);
  if (isfinite(gn)) {
    bcg_clip_grad_norm(s->actor.grad, s->actor.nparams, (bcg_real)s->actor_clip);
    s->aopt.lr = lr;
    bcg_adam_step(&s->aopt, s->actor.params, s->actor.grad);
  } else {
    skipped++;
    s->svc->log(1, "shac: iteration %lld: non-finite policy gradient, update skipped", (long long)s->tr->iteration);
  }
  return skipped;
}

/* step 5's targets into TV */
static void critic_targets(shac *s) {
  int N = s->N, T = s->T;
  /* ---- critic: TD(lambda) targets, the truncated lambda-return
   *   G_t = r_t + gamma V_{t+1}                                 at a done or the horizon end
   *   G_t = r_t + gamma ((1 - lambda) V_{t+1} + lambda G_{t+1})  otherwise
   * (V_{t+1}: target-critic value, 0 after a termination), the recursion
   * SHAC's compute_target_values implements. ---- */
  for (int e = 0; e < N; e++) {
    double G = 0;
    for (int t = T - 1; t >= 0; t--) {
      size_t te = (size_t)t * N + e;
      double nv = (double)s->NV[te], r = (double)s->RW[te];
      if (s->DONE[te] != 0 || t == T - 1)
        G = r + s->gamma * nv;
      else
        G = r + s->gamma * ((1 - s->lam) * nv + s->lam * G);
      s->TV[te] = (bcg_real)G;
    }
  }
}

/* step 5: the critics' minibatch passes and the targets' Polyak update;
 * skipped counts the non-finite gradients, closs the last pass's mean loss.
 *
 * Each critic of the ensemble trains on its own (its passes read only the
 * shared samples and targets), so with several OpenMP threads the critics are
 * trained side by side, one thread per critic, in ONE parallel region for the
 * whole update (a fork per minibatch GEMM costs more than the GEMM at these
 * sizes when idle threads sleep). Threads beyond one per critic (16 threads,
 * 3 critics: 5 each) split each critic's large GEMMs in nested regions
 * (core/nn.c). With at most one thread per critic a critic's arithmetic is
 * that of one thread (its GEMMs are not split), so the parameters do not
 * depend on the thread count; the loss is summed in the serial order
 * afterwards. Each thread orders and gathers the samples itself (the same
 * order for every critic; cheap beside the GEMMs, and no barrier). With one
 * thread, one critic, or the networks on the GPU (whose calls are
 * serialised), the critics take turns per minibatch and a GEMM may be split
 * over the threads instead. */
static void critic_pass_perm(shac *s, int j, int *perm, int M) {
  if (!s->shuffle) return;
  for (int i = M - 1; i > 0; i--) { /* Fisher-Yates from (MINIBATCH, iteration, pass) */
    bcg_real u = bcg_rng_uniform(s->tr->seed, BCG_RNG_MINIBATCH, (uint32_t)j, (uint32_t)s->tr->iteration,
                                 (uint32_t)i);
    int k = (int)(u * (bcg_real)(i + 1));
    if (k > i) k = i;
    int tmp = perm[i];
    perm[i] = perm[k];
    perm[k] = tmp;
  }
}

/* one minibatch step of critic k on samples perm[b0 .. b0+n) (their
 * observations gathered by the network from OBSP's rows); the mean squared
 * error into *loss; 1 if the gradient was not finite */
static int critic_step(shac *s, int k, const int *perm, int b0, int n, bcg_real *y, bcg_real *dy, bcg_real clr,
                       double *loss, int *rc) {
  if (bcg_mlp_forward_rows(&s->critic[k], NULL, &s->obsp_rows, 0, perm + b0, n, y)) {
    *rc = -1;
    return 0;
  }
  double l = 0;
  for (int i = 0; i < n; i++) {
    double d = (double)y[i] - (double)s->TV[perm[b0 + i]];
    l += d * d;
    dy[i] = (bcg_real)(2 * d / n);
  }
  *loss = l / n;
  bcg_mlp_zero_grad(&s->critic[k]);
  if (bcg_mlp_backward(&s->critic[k], NULL, dy, s->critic[k].grad, NULL)) {
    *rc = -1;
    return 0;
  }
  bcg_real cn;
  s->copt[k].lr = clr;
  if (bcg_mlp_clip_adam(&s->critic[k], &s->copt[k], (bcg_real)s->critic_clip, &cn)) {
    *rc = -1;
    return 0;
  }
  return !isfinite((double)cn);
}

/* bcg_mlp_hold of nets[0..K) with opts[k] (opts NULL: parameters only); on a
 * failure the ones held are released again. -1 on failure */
static int hold_nets(bcg_mlp *nets, bcg_adam *opts, int K) {
  for (int k = 0; k < K; k++)
    if (bcg_mlp_hold(&nets[k], opts ? &opts[k] : NULL)) {
      while (k-- > 0) bcg_mlp_release(&nets[k], opts ? &opts[k] : NULL);
      return -1;
    }
  return 0;
}

/* bcg_mlp_release of all K (each tried); -1 if any failed */
static int release_nets(bcg_mlp *nets, bcg_adam *opts, int K) {
  int rc = 0;
  for (int k = 0; k < K; k++)
    if (bcg_mlp_release(&nets[k], opts ? &opts[k] : NULL)) rc = -1;
  return rc;
}

static int critic_train(shac *s, int *skipped, double *closs) {
  int N = s->N, T = s->T, K = s->K;
  int M = T * N, bs = (M + s->nbatch - 1) / s->nbatch, nb = (M + bs - 1) / bs;
  bcg_real clr = lr_at(s, s->critic_lr);
  double *lb = s->closs_mb; /* [K][nb]: the last pass's loss per critic and minibatch */
  int nt = omp_get_max_threads(), minb = 0, rc = 0, hold = 0;
  if (nt > K) nt = K;
  if (bcg_nn_cuda_enabled(&minb) && bs >= minb) nt = 1, hold = 1;
  *closs = NAN;
  if (bcg_nn_rows_put(&s->obsp_rows, 0, M)) return -1;
  if (nt >= 2) {
    int skip = 0;
    /* threads beyond one per critic split each critic's GEMMs (nested regions) */
    int inner = omp_get_max_threads() / nt, levels = omp_get_max_active_levels();
    if (inner > 1 && levels < 2) omp_set_max_active_levels(2);
#pragma omp parallel for num_threads(nt) schedule(static, 1) reduction(+ : skip)
    for (int k = 0; k < K; k++) {
      int krc = 0;
      omp_set_num_threads(inner);
      int *perm = s->perm + (size_t)k * M;
      bcg_real *y = s->cbuf_y + (size_t)k * bs, *dy = s->cbuf_dy + (size_t)k * bs;
      for (int i = 0; i < M; i++) perm[i] = i;
      for (int j = 0; j < s->critic_iters && !krc; j++) {
        critic_pass_perm(s, j, perm, M);
        for (int b = 0, b0 = 0; b0 < M && !krc; b++, b0 += bs) {
          int n = M - b0 < bs ? M - b0 : bs;
          skip += critic_step(s, k, perm, b0, n, y, dy, clr, &lb[(size_t)k * nb + b], &krc);
        }
      }
      if (krc) __atomic_store_n(&rc, krc, __ATOMIC_RELAXED);
    }
    if (inner > 1 && levels < 2) omp_set_max_active_levels(levels);
    if (rc) return -1;
    *skipped += skip;
  } else {
    /* with the minibatches on the GPU, the critics' parameters, gradients and
     * Adam moments stay there for the whole update (bcg_mlp_hold): no copies
     * per step, the clip and Adam on the device, bit for bit the host's */
    if (hold && hold_nets(s->critic, s->copt, K)) return -1;
    for (int i = 0; i < M; i++) s->perm[i] = i;
    for (int j = 0; j < s->critic_iters && !rc; j++) {
      critic_pass_perm(s, j, s->perm, M);
      for (int b = 0, b0 = 0; b0 < M && !rc; b++, b0 += bs) {
        int n = M - b0 < bs ? M - b0 : bs;
        for (int k = 0; k < K && !rc; k++)
          *skipped += critic_step(s, k, s->perm, b0, n, s->cbuf_y, s->cbuf_dy, clr, &lb[(size_t)k * nb + b], &rc);
      }
    }
    if (hold && release_nets(s->critic, s->copt, K)) rc = -1;
    if (rc) return -1;
  }
  double tot = 0;
  for (int b = 0; b < nb; b++) {
    double lsum = 0;
    for (int k = 0; k < K; k++) lsum += lb[(size_t)k * nb + b];
    tot += lsum / K;
  }
  *closs = tot / nb;
  return 0;
}

/* the critics' update beside the backward pass ([learner] critic_overlap):
 * its minibatches read only what the rollout left (OBSP, TV) and write only
 * the critics, their Adam moments and the update's own scratch, none of which
 * the backward pass, grad_var or the actor update touch (they read the target
 * critics, which change after both, in critic_polyak). So the results are
 * bit for bit those of the update after the actor's: the same operations on
 * the same data, in one thread's order. */
typedef struct critic_job {
  shac *s;
  int threads, skipped, rc;
  double closs;
} critic_job;

static void *critic_thread(void *p) {
  critic_job *j = p;
  omp_set_num_threads(j->threads); /* the caller's team size (a new thread starts from the process default) */
  bcg_nn_time_beside(1);
  j->rc = critic_train(j->s, &j->skipped, &j->closs);
  bcg_nn_time_beside(0);
  return NULL;
}

/* critic_overlap's auto: beside the backward pass when the critics'
 * minibatches run on the GPU (the thread mostly waits for the device while
 * the backward pass has the cores), or on the CPU with at least 2 OpenMP
 * threads (the two passes share the cores: on 2 cores the iteration took
 * 10-16% less, docs/performance.md); not with 1 thread, where the overlap
 * would take a second core the run was not given */
static int overlap_on(const shac *s) {
  if (s->overlap != 2) return s->overlap;
  int M = s->T * s->N, bs = (M + s->nbatch - 1) / s->nbatch, minb = 0;
  return (bcg_nn_cuda_enabled(&minb) && bs >= minb) || omp_get_max_threads() >= 2;
}

static void critic_polyak(shac *s) {
  for (int k = 0; k < s->K; k++)
    bcg_vec_polyak(s->target[k].params, s->critic[k].params, s->critic[k].nparams, (bcg_real)s->alpha);
}

static int iterate(void *p, bcg_learner_stats *st) {
  shac *s = p;
  bcg_estimator_stats es0;
  s->est_ops->stats(s->est, &es0);
  if (s->est_ops->begin(s->est)) return -1;
  lu_norm_copy(&s->snap, &s->obs_rms);
  double rs = s->ret_norm ? sqrt((double)s->ret_rms.var[0] + 1e-6) : 1.0;
  lu_sums S = {0, 0, 0, 0, 0, 0, 0};
  double gvar, gn, closs;
  bcg_real lr;
  /* with the rollout's batches on the GPU, the target critics' parameters stay
   * there through the rollout and its backward pass (bcg_mlp_hold; Polyak
   * averaging changes them after, in critic_polyak) */
  int minb = 0, hold = bcg_nn_cuda_enabled(&minb) && s->N >= minb;
  if (hold && hold_nets(s->target, NULL, s->K)) return -1;
  int rc = rollout(s, rs, &S);
  /* the critics' targets and minibatches need only the rollout: with
   * critic_overlap they train on a thread of their own from here on */
  if (!rc) critic_targets(s);
  critic_job job = {s, omp_get_max_threads(), 0, 0, NAN};
  pthread_t th;
  int beside = 0;
  if (!rc && overlap_on(s)) {
    beside = pthread_create(&th, NULL, critic_thread, &job) == 0;
    if (!beside) s->svc->log(1, "shac: critic_overlap: no thread could be started; the critics train after the actor");
  }
  rc = rc || backward(s);
  if (hold && release_nets(s->target, NULL, s->K)) rc = 1;
  rc = rc || grad_variance(s, &gvar);
  int skipped = rc ? 0 : actor_update(s, &gn, &lr);
  if (beside) {
    pthread_join(th, NULL);
    if (job.rc) rc = 1;
    skipped += job.skipped;
    closs = job.closs;
  }
  if (rc || (!beside && critic_train(s, &skipped, &closs))) return -1;
  critic_polyak(s);
  lu_stats_common(st, s->est_ops, s->est, &es0, S.episodes, S.ret, S.len, S.nrew, S.rew, s->actor.extra_params, s->nu,
                  S.nan_resets, skipped);
  st->actor_loss = S.loss;
  st->critic_loss = closs;
  st->grad_norm = gn;
  st->grad_var = gvar;
  st->lr = (double)lr;
  st->track_err = lu_track_mean(&s->trk);
  return 0;
}

/* ---- checkpoints ---- */

static int save(void *p, int64_t g) {
  shac *s = p;
  int N = s->N;
  int64_t ctr[3] = {(int64_t)s->draw, (int64_t)s->step, (int64_t)s->K};
  int rc = lu_save_mlp(g, "actor", &s->actor) || lu_save_adam(g, "actor/adam", &s->aopt) ||
           lu_save_norm(g, "obs_rms", &s->obs_rms) || lu_save_norm(g, "ret_rms", &s->ret_rms) ||
           lu_save_env_state(g, N, s->nx, s->nu, s->x, s->clk, s->prev_a, s->ep_ret, s->ep_len) ||
           lu_save_doubles(g, "state/disc_return", s->ret, N) || lu_save_i64(g, "counters", ctr, 3) ||
           lu_save_domain(g, s->env);
  for (int k = 0; k < s->K && !rc; k++) {
    char n[64];
    snprintf(n, sizeof n, "critic%d", k);
    rc = lu_save_mlp(g, n, &s->critic[k]);
    snprintf(n, sizeof n, "critic%d/adam", k);
    rc = rc || lu_save_adam(g, n, &s->copt[k]);
    snprintf(n, sizeof n, "target_critic%d", k);
    rc = rc || lu_save_mlp(g, n, &s->target[k]);
  }
  return rc ? -1 : 0;
}

static int load(void *p, int64_t g) {
  shac *s = p;
  int N = s->N;
  int64_t ctr[3];
  int rc = lu_load_i64(g, "counters", ctr, 3) || ctr[2] != s->K || lu_load_mlp(g, "actor", &s->actor) ||
           lu_load_adam(g, "actor/adam", &s->aopt) || lu_load_norm(g, "obs_rms", &s->obs_rms) ||
           lu_load_norm(g, "ret_rms", &s->ret_rms) ||
           lu_load_env_state(g, N, s->nx, s->nu, s->x, s->clk, s->prev_a, s->ep_ret, s->ep_len) ||
           lu_load_doubles(g, "state/disc_return", s->ret, N) || lu_load_domain(g, s->env);
  for (int e = 0; e < N; e++) s->pend[e] = -1;
  for (int k = 0; k < s->K && !rc; k++) {
    char n[64];
    snprintf(n, sizeof n, "critic%d", k);
    rc = lu_load_mlp(g, n, &s->critic[k]);
    snprintf(n, sizeof n, "critic%d/adam", k);
    rc = rc || lu_load_adam(g, n, &s->copt[k]);
    snprintf(n, sizeof n, "target_critic%d", k);
    rc = rc || lu_load_mlp(g, n, &s->target[k]);
  }
  if (rc) return -1;
  s->draw = (uint64_t)ctr[0];
  s->step = (uint64_t)ctr[1];
  return 0;
}

/* mean action (squashed like the rollout's) for raw observations */
static int act(void *p, const bcg_real *obs, int n, bcg_real *a) {
  shac *s = p;
  return lu_act(&s->actor, s->obs_norm ? &s->obs_rms : NULL, s->squash, s->od, s->nu, obs, n, a);
}

static const bcg_key_spec keys[] = {
    {"horizon", BCG_KEY_INT, "32", 1, 100000, NULL, "differentiable rollout length T (SHAC steps_num = 32)"},
    {"gamma", BCG_KEY_REAL, "0.99", 0, 1, NULL, "discount (SHAC gamma = 0.99)"},
    {"lambda", BCG_KEY_REAL, "0.95", 0, 0.999999, NULL, "TD(lambda) of the critic targets (SHAC lambda = 0.95)"},
    {"actor_lr", BCG_KEY_REAL, "2e-3", 0, 10, NULL, "actor Adam learning rate (SHAC actor_learning_rate = 2e-3)"},
    {"critic_lr", BCG_KEY_REAL, "2e-3", 0, 10, NULL,
     "critic Adam learning rate (SHAC critic_learning_rate = 2e-3; BCG paper 2e-3)"},
    {"lr_schedule", BCG_KEY_CHOICE, "linear", 0, 0, "linear|constant",
     "linear: both rates decay linearly to lr_end over [run] iterations (SHAC lr_schedule = linear); constant "
     "without an iteration budget"},
    {"lr_end", BCG_KEY_REAL, "1e-5", 0, 10, NULL, "learning rate at the last iteration (SHAC decays to 1e-5)"},
    {"beta1", BCG_KEY_REAL, "0.7", 0, 0.999999, NULL, "Adam beta1 (SHAC betas = [0.7, 0.95])"},
    {"beta2", BCG_KEY_REAL, "0.95", 0, 0.999999, NULL, "Adam beta2 (SHAC betas = [0.7, 0.95])"},
    {"adam_eps", BCG_KEY_REAL, "1e-8", 0, 1, NULL, "Adam epsilon (PyTorch default 1e-8)"},
    {"actor_grad_clip", BCG_KEY_REAL, "1.0", 0, 1e30, NULL, "actor gradient-norm clip (SHAC grad_norm = 1.0)"},
    {"critic_grad_clip", BCG_KEY_REAL, "1.0", 0, 1e30, NULL,
     "critic gradient-norm clip (SHAC grad_norm = 1.0; BCG paper 10.0)"},
    {"critic_iterations", BCG_KEY_INT, "16", 1, 100000, NULL, "passes over the rollout per iteration (SHAC 16)"},
    {"minibatches", BCG_KEY_INT, "4", 1, 100000, NULL, "critic minibatches per pass (SHAC num_batch = 4)"},
    {"critic_shuffle", BCG_KEY_BOOL, "false", 0, 0, NULL,
     "shuffle the critic samples each pass (SHAC: no, minibatches are consecutive time blocks)"},
    {"target_alpha", BCG_KEY_REAL, "0.2", 0, 1, NULL,
     "target critic Polyak th' <- alpha th' + (1 - alpha) th (SHAC target_critic_alpha = 0.2)"},
    {"critics", BCG_KEY_INT, "1", 1, MAXCRIT, NULL,
     "critic ensemble size; the value is the ensemble mean (SHAC 1; BCG paper 3)"},
    {"actor_layers", BCG_KEY_LIST, "128,64,32", 1, 65536, NULL,
     "actor hidden layers (SHAC Ant actor_mlp = [128, 64, 32]; BCG paper 512,256,128)"},
    {"critic_layers", BCG_KEY_LIST, "64,64", 1, 65536, NULL,
     "critic hidden layers (SHAC Ant critic_mlp = [64, 64]; BCG paper 256,256)"},
    {"activation", BCG_KEY_CHOICE, "elu", 0, 0, "elu|relu|tanh|identity", "hidden activation (SHAC elu)"},
    {"layernorm", BCG_KEY_CHOICE, "post", 0, 0, "post|pre|none",
     "LayerNorm of hidden layers: post = Linear, act, LayerNorm (DiffRL's actor and critic MLPs)"},
    {"init", BCG_KEY_CHOICE, "uniform", 0, 0, "uniform|orthogonal",
     "weight init: uniform = PyTorch's nn.Linear default (DiffRL)"},
    {"logstd_init", BCG_KEY_REAL, "-1.0", -20, 5, NULL,
     "initial log standard deviation (DiffRL actor_logstd_init = -1; BCG paper std 1.0, i.e. 0)"},
    {"squash", BCG_KEY_CHOICE, "tanh", 0, 0, "tanh|none", "actions sent to the env: tanh(sample) (SHAC) or raw"},
    {"obs_norm", BCG_KEY_BOOL, "true", 0, 0, NULL, "running observation normalisation (SHAC obs_rms = True)"},
    {"ret_norm", BCG_KEY_BOOL, "false", 0, 0, NULL,
     "running return normalisation of rewards (SHAC ret_rms = False; BCG paper true)"},
    {"reward_scale", BCG_KEY_REAL, "1.0", 0, 1e6, NULL, "reward multiplier (SHAC rew_scale = 1)"},
    {"actor_loss_mean", BCG_KEY_CHOICE, "envs", 0, 0, "envs|env_steps",
     "actor loss is the mean over environments (docs/design.md section 7.1) or over env x steps (SHAC's code)"},
    {"critic_overlap", BCG_KEY_CHOICE, "auto", 0, 0, "auto|true|false",
     "train the critics on a thread of their own while the backward pass and the actor update run (they need "
     "only the rollout; bit for bit the same results); auto: when their minibatches run on the GPU, or with "
     "[run] threads >= 2 (not with 1 thread: the overlap would take a second core)"},
    {"grad_var_every", BCG_KEY_INT, "0", 0, 1e9, NULL,
     "measure the policy-gradient variance across environments every this many iterations (0: off; costs "
     "horizon x envs single-row MLP passes)"},
};

LU_LEARNER_PLUGIN("shac", "Short-Horizon Actor-Critic: first-order policy gradients through short rollouts",
                  BCG_CAP_NEEDS_BACKWARD)
