/* core/eval.c - sim-to-sim transfer evaluation (see bcg/eval.h). */
#include "bcg/eval.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/mjref.h"
#include "bcg/rng.h"
#include "bcg/runlog.h"
#include "util.h"

int bcg_eval_learner_policy(void *session, const bcg_real *obs, int n, bcg_real *a) {
  bcg_session *S = session;
  return S->lops->act(S->learner, obs, n, a);
}

/* contact slots on bodies whose name contains "foot" (all slots if none) */
static int foot_slots(const bcg_model *M, int *mask) {
  int n = 0;
  for (int i = 0; i < M->m.ncp; i++) {
    char name[BCG_NAME_LEN];
    const char *s = M->body_name[M->m.cp_body[i]];
    int k = 0;
    for (; s[k] && k < BCG_NAME_LEN - 1; k++) name[k] = (char)tolower((unsigned char)s[k]);
    name[k] = 0;
    mask[i] = strstr(name, "foot") != NULL;
    n += mask[i];
  }
  if (!n)
    for (int i = 0; i < M->m.ncp; i++) mask[i] = 1;
  return n;
}

/* deepest penetration (m, >= 0) of the masked slots at state x, and whether any is in contact */
static double foot_penetration(const bcg_model *M, const int *mask, const bcg_real *x, bcg_kin *k, int *contact) {
  const bcg_mdata *m = &M->m;
  bcg_kinematics(m, x, k);
  double deepest = 0;
  *contact = 0;
  for (int i = 0; i < m->ncp; i++) {
    if (!mask[i]) continue;
    bcg_real pc[3];
    bcg_contact_point(m, k, i, pc);
    double g = pc[2] + k->o[2] - m->floor_z;
    if (g <= 0) {
      *contact = 1;
      if (-g > deepest) deepest = -g;
    }
  }
  return deepest;
}

/* world position of the root body (the first body with a joint) at kinematics k */
static void root_pos(const bcg_model *M, const bcg_kin *k, double *p) {
  int r = 1;
  for (int b = 1; b < M->m.nbody; b++)
    if (M->m.body_jntnum[b] > 0) { r = b; break; }
  for (int i = 0; i < 3; i++) p[i] = k->p[r][i] + k->o[i];
}

static void summarise(const bcg_eval_run *run, int n, bcg_eval_stats *st) {
  memset(st, 0, sizeof *st);
  st->n = n;
  double s[7] = {0}, s2[7] = {0};
  for (int r = 0; r < n; r++) {
    double v[7] = {run[r].length_s, run[r].pen_mm, run[r].etrack_cm, run[r].efixed_cm, run[r].up_frac,
                   run[r].travel_m, run[r].selfc_frac};
    st->falls += run[r].fell;
    for (int i = 0; i < 7; i++) { s[i] += v[i]; s2[i] += v[i] * v[i]; }
  }
  double mean[7], sd[7];
  for (int i = 0; i < 7; i++) {
    mean[i] = n ? s[i] / n : NAN;
    sd[i] = n > 1 ? sqrt(fmax(0, (s2[i] - n * mean[i] * mean[i]) / (n - 1))) : 0;
  }
  st->length_mean = mean[0]; st->length_std = sd[0];
  st->pen_mean = mean[1]; st->pen_std = sd[1];
  st->etrack_mean = mean[2]; st->etrack_std = sd[2];
  st->efixed_mean = mean[3]; st->efixed_std = sd[3];
  st->up_mean = mean[4]; st->up_std = sd[4];
  st->travel_mean = mean[5]; st->travel_std = sd[5];
  st->selfc_mean = mean[6]; st->selfc_std = sd[6];
}

/* how MuJoCo was driven, for a replay of its steps (tools/trace_mismatch.py --replay) */
typedef struct trace_mj {
  const double *ctrl;  /* [runs][steps][nu] */
  int pd;              /* bcg's PD law as servos: kp, kd, tau_max */
  double servo[BCG_MAX_ACT][3];
  double timestep;
  int substeps;
} trace_mj;

static int write_trace(const char *path, const bcg_eval_result *res, int N, int steps, int nq, int nx, int nu, double **tr_x,
                       double **tr_a, double **tr_r, const double *tr_self, const double *tr_pred,
                       int tr_len[2][BCG_EVAL_MAX_RUNS], const bcg_task_clock *clk0, const trace_mj *mjt,
                       char *err, size_t errlen) {
  bcg_checkpoint *ck = bcg_checkpoint_begin(path, err, errlen);
  if (!ck) return -1;
  int64_t root = bcg_checkpoint_root(ck);
  static const char *names[2] = {"bcg", "mujoco"};
  const int64_t dims[3] = {nq, nx - nq, nu}; /* how to split a state row: qpos, qvel */
  int rc = bcg_h5_write_i64(root, "dims_nq_nv_nu", dims, 3, err, errlen);
  if (!rc && res->have[1]) {
    const double step[2] = {mjt->timestep, mjt->substeps};
    size_t ss[2] = {(size_t)nu, 3};
    rc = bcg_h5_write_doubles(root, "mujoco_timestep_substeps", step, 2, err, errlen) ||
         (mjt->pd && bcg_h5_write_doubles_nd(root, "mujoco_pd_kp_kd_taumax", &mjt->servo[0][0], 2, ss, err, errlen));
  }
  for (int s = 0; s < 2 && !rc; s++) {
    if (!res->have[s]) continue;
    int64_t g = bcg_h5_group(root, names[s], 1, err, errlen);
    if (g < 0) { rc = -1; break; }
    size_t sx[3] = {(size_t)N, (size_t)steps + 1, (size_t)nx}, sa[3] = {(size_t)N, (size_t)steps, (size_t)nu};
    size_t sr[2] = {(size_t)N, (size_t)steps}, sa2[3] = {(size_t)N, (size_t)steps, (size_t)nx};
    int64_t len[BCG_EVAL_MAX_RUNS];
    double phase[BCG_EVAL_MAX_RUNS]; /* the clock of x[r][t] is {t, 0, phase[r]} */
    for (int r = 0; r < N; r++) len[r] = tr_len[s][r], phase[r] = clk0[r].phase;
    rc = bcg_h5_write_doubles_nd(g, "x", tr_x[s], 3, sx, err, errlen) ||
         bcg_h5_write_doubles_nd(g, "action", tr_a[s], 3, sa, err, errlen) ||
         bcg_h5_write_doubles_nd(g, "reward", tr_r[s], 2, sr, err, errlen) ||
         (s == 1 && bcg_h5_write_doubles_nd(g, "self_contact", tr_self, 2, sr, err, errlen)) ||
         (s == 1 && bcg_h5_write_doubles_nd(g, "bcg_next", tr_pred, 3, sa2, err, errlen)) ||
         (s == 1 && bcg_h5_write_doubles_nd(g, "ctrl", mjt->ctrl, 3, sa, err, errlen)) ||
         bcg_h5_write_i64(g, "length", len, N, err, errlen) ||
         bcg_h5_write_doubles(g, "phase", phase, N, err, errlen);
    bcg_h5_group_close(g);
  }
  if (rc) {
    bcg_checkpoint_abort(ck);
    return -1;
  }
  return bcg_checkpoint_commit(ck, err, errlen);
}

/* One evaluation's buffers and the per-run sums of the simulator being run. */
typedef struct ev {
  bcg_session *S;
  const bcg_eval_opts *o;
  bcg_eval_result *res;
  bcg_env *env;
  const bcg_model *M;
  const bcg_task_ops *T;
  int nenv, nx, nu, nq, nv, N, steps, window;
  size_t xs;
  double P; /* E_fixed's penalty and clip (m) */
  bcg_real *x0, *x, *xn, *a, *pa, *obs, *rew, *et;
  int *done, *envs, *mask;
  bcg_task_clock *clk0, *clk;
  bcg_kin *k;
  /* --trace */
  double *tr_x[2], *tr_a[2], *tr_r[2], *tr_self, *tr_pred, *tr_ctrl;
  int tr_len[2][BCG_EVAL_MAX_RUNS];
  /* the simulator being run */
  bcg_mjref *ref[BCG_EVAL_MAX_RUNS];
  int alive[BCG_EVAL_MAX_RUNS], ncont[BCG_EVAL_MAX_RUNS];
  double pen_sum[BCG_EVAL_MAX_RUNS], et_sum[BCG_EVAL_MAX_RUNS], fx_sum[BCG_EVAL_MAX_RUNS], x_start[BCG_EVAL_MAX_RUNS];
  int et_n[BCG_EVAL_MAX_RUNS], up_n[BCG_EVAL_MAX_RUNS], self_n[BCG_EVAL_MAX_RUNS], step_n[BCG_EVAL_MAX_RUNS];
} ev;

#define TRX(E, si, r, t) ((E)->tr_x[si] + ((size_t)(r) * ((E)->steps + 1) + (t)) * (E)->nx)

static void ev_free(ev *E) {
  for (int si = 0; si < 2; si++) free(E->tr_x[si]), free(E->tr_a[si]), free(E->tr_r[si]);
  free(E->tr_self), free(E->tr_pred), free(E->tr_ctrl);
  free(E->x0); free(E->x); free(E->xn); free(E->a); free(E->pa); free(E->obs); free(E->rew); free(E->et);
  free(E->done); free(E->envs); free(E->mask); free(E->clk0); free(E->clk); free(E->k);
}

static int ev_alloc(ev *E, char *err, size_t errlen) {
  int nenv = E->nenv, od = E->T->obs_dim(E->S->task);
  E->xs = (size_t)nenv * E->nx;
  E->x0 = calloc(E->xs, sizeof *E->x0), E->x = calloc(E->xs, sizeof *E->x), E->xn = calloc(E->xs, sizeof *E->xn);
  E->a = calloc((size_t)nenv * E->nu, sizeof *E->a), E->pa = calloc((size_t)nenv * E->nu, sizeof *E->pa);
  E->obs = calloc((size_t)nenv * od, sizeof *E->obs), E->rew = calloc(nenv, sizeof *E->rew);
  E->et = calloc(nenv, sizeof *E->et);
  E->done = calloc(nenv, sizeof *E->done), E->envs = calloc(nenv, sizeof *E->envs);
  E->mask = calloc(BCG_MAX_CP, sizeof(int));
  E->clk0 = calloc(nenv, sizeof *E->clk0), E->clk = calloc(nenv, sizeof *E->clk);
  E->k = malloc(sizeof *E->k);
  if (!E->x0 || !E->x || !E->xn || !E->a || !E->pa || !E->obs || !E->rew || !E->et || !E->done || !E->envs ||
      !E->mask || !E->clk0 || !E->clk || !E->k) {
    bcg_setf(err, errlen, "out of memory");
    return -1;
  }
  return 0;
}

/* initial states: the task's reset (reference-state initialisation) plus small seeded noise */
static int ev_initial_states(ev *E, char *err, size_t errlen) {
  const bcg_mdata *m = &E->M->m;
  const bcg_eval_opts *o = E->o;
  for (int e = 0; e < E->nenv; e++) E->envs[e] = e;
  if (E->T->reset(E->S->task, E->envs, E->nenv, o->seed, E->x0, E->clk0)) {
    bcg_setf(err, errlen, "the task's reset failed");
    return -1;
  }
  for (int r = 0; r < E->N; r++) {
    bcg_real dq[BCG_MAX_DOF] = {0}, du[BCG_MAX_DOF];
    for (int j = 0; j < m->njnt; j++)
      if (m->jnt_type[j] == BCG_JNT_HINGE || m->jnt_type[j] == BCG_JNT_SLIDE)
        dq[m->jnt_dofadr[j]] = (bcg_real)o->noise_q * bcg_rng_normal(o->seed, BCG_RNG_TEST, (uint32_t)r, 0, (uint32_t)j);
    for (int d = 0; d < E->nv; d++)
      du[d] = (bcg_real)o->noise_u * bcg_rng_normal(o->seed, BCG_RNG_TEST, (uint32_t)r, 1, (uint32_t)d);
    bcg_real xr[BCG_MAX_Q + BCG_MAX_DOF];
    bcg_env_perturb(E->env, E->x0 + (size_t)r * E->nx, dq, du, xr);
    memcpy(E->x0 + (size_t)r * E->nx, xr, sizeof(bcg_real) * E->nx);
  }
  return 0;
}

static int ev_trace_alloc(ev *E, char *err, size_t errlen) {
  int N = E->N, steps = E->steps, nx = E->nx, nu = E->nu;
  if ((double)N * (steps + 1) * (nx + nu + 2) > 2e8) {
    snprintf(err, errlen, "--trace: %d episodes of %d steps are too many to keep (at most 2e8 numbers)", N, steps);
    return -1;
  }
  for (int si = 0; si < 2; si++) {
    E->tr_x[si] = calloc((size_t)N * (steps + 1) * nx, sizeof(double));
    E->tr_a[si] = calloc((size_t)N * steps * nu, sizeof(double));
    E->tr_r[si] = calloc((size_t)N * steps, sizeof(double));
    if (!E->tr_x[si] || !E->tr_a[si] || !E->tr_r[si]) return bcg_setf(err, errlen, "--trace: out of memory"), -1;
  }
  E->tr_self = calloc((size_t)N * steps, sizeof(double));
  E->tr_pred = calloc((size_t)N * steps * nx, sizeof(double));
  E->tr_ctrl = calloc((size_t)N * steps * nu, sizeof(double));
  if (!E->tr_self || !E->tr_pred || !E->tr_ctrl) return bcg_setf(err, errlen, "--trace: out of memory"), -1;
  return 0;
}

/* Simulator si starts from the initial states: the per-run sums zeroed and,
 * for MuJoCo, one model per run (PD actuation as servos with bcg's law). */
static int ev_sim_open(ev *E, int si, int which, char *err, size_t errlen) {
  const bcg_mdata *m = &E->M->m;
  const bcg_simparams *sp = &E->env->sim->sp;
  int nx = E->nx;
  memcpy(E->x, E->x0, sizeof(bcg_real) * E->xs);
  memcpy(E->clk, E->clk0, sizeof(bcg_task_clock) * E->nenv);
  memset(E->pa, 0, sizeof(bcg_real) * (size_t)E->nenv * E->nu);
  memset(E->ref, 0, sizeof E->ref);
  for (int r = 0; r < E->N; r++) {
    E->self_n[r] = 0; E->step_n[r] = 0;
    E->alive[r] = 1; E->ncont[r] = 0; E->pen_sum[r] = 0; E->et_sum[r] = 0; E->et_n[r] = 0; E->fx_sum[r] = 0;
    E->up_n[r] = 0;
    E->res->run[si][r].length_s = 0;
    double p0[3];
    bcg_kinematics(m, E->x + (size_t)r * nx, E->k);
    root_pos(E->M, E->k, p0);
    E->x_start[r] = p0[0];
    E->res->run[si][r].travel_m = 0;
    if (E->o->trace)
      for (int i = 0; i < nx; i++) TRX(E, si, r, 0)[i] = E->x[(size_t)r * nx + i];
  }
  if (which != BCG_EVAL_MUJOCO) return 0;
  double kp[BCG_MAX_ACT], kd[BCG_MAX_ACT], tm[BCG_MAX_ACT];
  for (int i = 0; i < E->nu; i++) { kp[i] = sp->kp[i]; kd[i] = sp->kd[i]; tm[i] = sp->tau_max[i]; }
  for (int r = 0; r < E->N; r++) {
    E->ref[r] = bcg_mjref_new(E->M, 0);
    if (!E->ref[r] || (sp->actuation == BCG_ACTUATION_PD && bcg_mjref_use_pd(E->ref[r], kp, kd, tm))) {
      bcg_setf(err, errlen, "cannot set up MuJoCo for the evaluation (PD needs joint motors)");
      return -1;
    }
    bcg_mjref_set_timestep(E->ref[r], E->res->mj_timestep);
    double qd[BCG_MAX_Q], ud[BCG_MAX_DOF];
    for (int i = 0; i < E->nq; i++) qd[i] = E->x[(size_t)r * nx + i];
    for (int i = 0; i < E->nv; i++) ud[i] = E->x[(size_t)r * nx + E->nq + i];
    bcg_mjref_set_state(E->ref[r], qd, ud);
  }
  return 0;
}

static void ev_sim_close(ev *E) {
  for (int r = 0; r < E->N; r++) bcg_mjref_free(E->ref[r]), E->ref[r] = NULL;
}

/* One control step of the simulator from x to xn (MuJoCo: the runs still up;
 * with --trace also bcg's own step from MuJoCo's state, the one-step model
 * mismatch). */
static void ev_step(ev *E, int which, int step) {
  const bcg_mdata *m = &E->M->m;
  const bcg_simparams *sp = &E->env->sim->sp;
  int N = E->N, nx = E->nx, nu = E->nu;
  if (which == BCG_EVAL_BCG) {
    bcg_env_step(E->env, N, E->x, E->a, E->xn, NULL);
    return;
  }
  if (E->tr_pred) {
    bcg_env_step(E->env, N, E->x, E->a, E->xn, NULL);
    for (int r = 0; r < N; r++)
      for (int i = 0; i < nx; i++) E->tr_pred[((size_t)r * E->steps + step) * nx + i] = E->xn[(size_t)r * nx + i];
  }
  for (int r = 0; r < N; r++) {
    if (!E->alive[r]) continue;
    double ctrl[BCG_MAX_ACT], qd[BCG_MAX_Q], ud[BCG_MAX_DOF];
    for (int i = 0; i < nu; i++) {
      double ai = E->a[(size_t)r * nu + i];
      ctrl[i] = sp->actuation == BCG_ACTUATION_PD ? sp->qdef[m->jnt_qposadr[m->act_jnt[i]]] + sp->action_scale * ai : ai;
    }
    if (E->tr_ctrl) memcpy(E->tr_ctrl + ((size_t)r * E->steps + step) * nu, ctrl, sizeof(double) * nu);
    bcg_mjref_step(E->ref[r], ctrl, E->res->mj_steps);
    int sc = bcg_mjref_self_contacts(E->ref[r]) > 0;
    E->self_n[r] += sc;
    if (E->tr_self) E->tr_self[(size_t)r * E->steps + step] = sc;
    bcg_mjref_state(E->ref[r], qd, ud);
    for (int i = 0; i < E->nq; i++) E->xn[(size_t)r * nx + i] = (bcg_real)qd[i];
    for (int i = 0; i < E->nv; i++) E->xn[(size_t)r * nx + E->nq + i] = (bcg_real)ud[i];
  }
}

/* After a step: the trace, then per run still up its length, foot
 * penetration, tracking error, travel, fall, and E_fixed's sums; a run whose
 * clip or episode ended (done = 2) stops and shortens E_fixed's window. */
static void ev_account(ev *E, int si, int step) {
  bcg_eval_result *res = E->res;
  int N = E->N, nx = E->nx, nu = E->nu;
  if (E->o->trace)
    for (int r = 0; r < N; r++) {
      if (E->alive[r]) {
        E->tr_len[si][r] = step + 1;
        E->tr_r[si][(size_t)r * E->steps + step] = E->rew[r];
      }
      for (int i = 0; i < nu; i++)
        E->tr_a[si][((size_t)r * E->steps + step) * nu + i] = E->alive[r] ? E->a[(size_t)r * nu + i] : 0;
      for (int i = 0; i < nx; i++) TRX(E, si, r, step + 1)[i] = E->xn[(size_t)r * nx + i];
    }
  for (int r = 0; r < N; r++) {
    if (!E->alive[r]) continue;
    const bcg_real *xr = E->xn + (size_t)r * nx;
    int finite = 1;
    for (int i = 0; i < nx; i++) finite &= isfinite(xr[i]) != 0;
    res->run[si][r].length_s += E->env->control_dt;
    E->step_n[r]++;
    if (!finite) { res->run[si][r].fell = 1; E->alive[r] = 0; continue; }
    int c;
    double p = foot_penetration(E->M, E->mask, xr, E->k, &c);
    if (c) { E->pen_sum[r] += p; E->ncont[r]++; }
    if (E->T->tracking_error) { E->et_sum[r] += E->et[r]; E->et_n[r]++; }
    double pr[3];
    root_pos(E->M, E->k, pr); /* k: the kinematics of xr from foot_penetration */
    res->run[si][r].travel_m = pr[0] - E->x_start[r];
    if (pr[2] < E->o->fall_height) { res->run[si][r].fell = 1; E->alive[r] = 0; }
    else {
      /* up at the end of this step: it counts in E_fixed with its own error (clipped at P) */
      if (step < E->window) {
        E->up_n[r]++;
        if (E->T->tracking_error) E->fx_sum[r] += fmin((double)E->et[r], E->P);
      }
      if (E->done[r] == 2) { /* the clip or the episode ended */
        E->alive[r] = 0;
        if (step + 1 < E->window) E->window = step + 1;
      }
    }
  }
}

/* Simulator si's runs: every control step until all are down or the window
 * ends. */
static int ev_run(ev *E, bcg_policy_fn policy, void *ctx, int si, int which, char *err, size_t errlen) {
  int N = E->N, nx = E->nx;
  const bcg_task_ops *T = E->T;
  for (int step = 0; step < E->steps; step++) {
    int any = 0;
    for (int r = 0; r < N; r++) any |= E->alive[r];
    if (!any) break;
    if (T->observe(E->S->task, E->x, E->pa, E->clk, E->obs) || policy(ctx, E->obs, N, E->a)) {
      bcg_setf(err, errlen, "the task's observation or the policy failed");
      return -1;
    }
    ev_step(E, which, step);
    for (int r = N; r < E->nenv; r++) memcpy(E->xn + (size_t)r * nx, E->x + (size_t)r * nx, sizeof(bcg_real) * nx);
    for (int r = 0; r < N; r++) {
      if (!E->alive[r]) memcpy(E->xn + (size_t)r * nx, E->x + (size_t)r * nx, sizeof(bcg_real) * nx);
      else E->clk[r].t++;
    }
    T->reward(E->S->task, E->xn, E->a, E->pa, E->clk, E->rew, E->done);
    if (T->tracking_error) T->tracking_error(E->S->task, E->xn, E->clk, E->et);
    ev_account(E, si, step);
    memcpy(E->x, E->xn, sizeof(bcg_real) * E->xs);
    memcpy(E->pa, E->a, sizeof(bcg_real) * (size_t)E->nenv * E->nu);
  }
  return 0;
}

/* Simulator si's results from its sums: penetration, E_track, self-contact,
 * the window, up fraction and E_fixed per run, and their statistics. */
static void ev_results(ev *E, int si, int which) {
  bcg_eval_result *res = E->res;
  int N = E->N, window = E->window;
  for (int r = 0; r < N; r++) {
    res->run[si][r].pen_mm = E->ncont[r] ? 1000 * E->pen_sum[r] / E->ncont[r] : 0;
    res->run[si][r].etrack_cm = E->et_n[r] ? 100 * E->et_sum[r] / E->et_n[r] : NAN;
    res->run[si][r].selfc_frac = which == BCG_EVAL_MUJOCO && E->step_n[r] ? (double)E->self_n[r] / E->step_n[r] : NAN;
  }
  res->window_steps = window;
  res->window_s = window * E->env->control_dt;
  for (int r = 0; r < N; r++) {
    int up = E->up_n[r] < window ? E->up_n[r] : window;
    res->run[si][r].up_frac = window ? (double)up / window : NAN;
    res->run[si][r].efixed_cm =
        E->T->tracking_error && window ? 100 * (E->fx_sum[r] + (double)(window - up) * E->P) / window : NAN;
  }
  summarise(res->run[si], N, &res->stats[si]);
  if (E->o->trace) /* steps after the loop ended early (every run down) hold the last state */
    for (int r = 0; r < N; r++)
      for (int t = E->tr_len[si][r]; t < E->steps; t++)
        memcpy(TRX(E, si, r, t + 1), TRX(E, si, r, t), sizeof(double) * E->nx);
}

int bcg_eval(bcg_session *S, bcg_policy_fn policy, void *ctx, const bcg_eval_opts *o, bcg_eval_result *res,
             char *err, size_t errlen) {
  bcg_env *env = S->env;
  memset(res, 0, sizeof *res);
  int N = o->runs;
  if (N < 1 || N > BCG_EVAL_MAX_RUNS || N > env->nenv) {
    snprintf(err, errlen, "%d episodes ([eval] episodes or --runs) must be in [1, min(%d, num_envs = %d)]", N,
             BCG_EVAL_MAX_RUNS, env->nenv);
    return -1;
  }
  /* the window in control steps must fit an int (seconds 1e9 used to wrap to -2^31 steps) */
  double nsteps = bcg_steps_for(o->seconds, env->control_dt);
  if (!(nsteps >= 1 && nsteps <= 1e9)) {
    snprintf(err, errlen, "seconds = %g is %g control steps of %g s: must be between 1 and 1e9 steps", o->seconds,
             nsteps, (double)env->control_dt);
    return -1;
  }
  {
    /* MuJoCo's timestep: bcg's substep, or opts->mj_timestep when it divides the control step */
    const bcg_simparams *sp = &env->sim->sp;
    const double ctl = (double)sp->dt * sp->substeps;
    res->mj_timestep = sp->dt, res->mj_steps = sp->substeps;
    if (o->mj_timestep > 0) {
      const double k = floor(ctl / o->mj_timestep + 0.5);
      if (!(k >= 1) || k > 1e6 || fabs(k * o->mj_timestep - ctl) > 1e-6 * ctl) { /* float: dt is a float */
        bcg_setf(err, errlen,
                 "[eval] mujoco_timestep = %g s does not divide the control step (%g s) into a whole number of "
                 "MuJoCo steps",
                 o->mj_timestep, ctl);
        return -1;
      }
      res->mj_timestep = ctl / k, res->mj_steps = (int)k;
    }
  }
  res->runs = N;
  ev *E = calloc(1, sizeof *E);
  if (!E) return bcg_setf(err, errlen, "out of memory"), -1;
  E->S = S, E->o = o, E->res = res, E->env = env, E->M = env->model, E->T = S->task_ops;
  E->nenv = env->nenv, E->nx = env->nx, E->nu = env->nu, E->nq = env->nq, E->nv = env->nv, E->N = N;
  E->steps = (int)nsteps;
  E->P = o->fall_penalty > 0 ? o->fall_penalty : 1.0;
  /* E_fixed's window: `steps`, or up to the step at which a run that is up
   * reaches the end of the clip or of the episode (done = 2): every run
   * starts at the same clip phase, so that step is the same for all */
  E->window = E->steps;
  int rc = -1;
  if (ev_alloc(E, err, errlen)) goto out;
  foot_slots(E->M, E->mask);
  if (ev_initial_states(E, err, errlen)) goto out;
  if (o->trace && ev_trace_alloc(E, err, errlen)) goto out;
  res->penalty_m = E->P;
  for (int si = 0; si < 2; si++) {
    int which = si == 0 ? BCG_EVAL_BCG : BCG_EVAL_MUJOCO;
    if (!(o->sims & which)) continue;
    res->have[si] = 1;
    int bad = ev_sim_open(E, si, which, err, errlen) || ev_run(E, policy, ctx, si, which, err, errlen);
    ev_sim_close(E);
    if (bad) goto out;
    ev_results(E, si, which);
  }
  if (o->trace) {
    const bcg_simparams *sp = &env->sim->sp;
    trace_mj mjt = {E->tr_ctrl, sp->actuation == BCG_ACTUATION_PD, {{0}}, res->mj_timestep, res->mj_steps};
    for (int i = 0; i < E->nu; i++) mjt.servo[i][0] = sp->kp[i], mjt.servo[i][1] = sp->kd[i], mjt.servo[i][2] = sp->tau_max[i];
    if (write_trace(o->trace, res, N, E->steps, E->nq, E->nx, E->nu, E->tr_x, E->tr_a, E->tr_r, E->tr_self, E->tr_pred,
                    E->tr_len, E->clk0, &mjt, err, errlen))
      goto out;
  }
  rc = 0;
out:
  ev_free(E);
  free(E);
  return rc;
}
#undef TRX

void bcg_eval_print(const bcg_eval_result *res, FILE *f) {
  static const char *names[2] = {"bcg", "mujoco"};
  fprintf(f,
          "E_track: mean body-position error until the fall or the end (not comparable between policies);\n"
          "E_fixed: mean over a fixed window of %d control steps (%.2f s from the clip's start), each step's\n"
          "  error clipped at %.2f m and every step after a fall counted as %.2f m; up: fraction of that\n"
          "  window before the fall. E_fixed = up * (clipped error while up) + (1 - up) * %.2f m.\n",
          res->window_steps, res->window_s, res->penalty_m, res->penalty_m, res->penalty_m);
  fprintf(f, "%-8s %7s %16s %18s %18s %14s %18s %16s %16s\n", "sim", "fell", "length s", "foot pen. mm", "E_track cm", "up",
          "E_fixed cm", "root x travel m", "self-contact %");
  for (int s = 0; s < 2; s++) {
    if (!res->have[s]) continue;
    const bcg_eval_stats *st = &res->stats[s];
    fprintf(f, "%-8s %4d/%-2d %8.2f +- %-5.2f %9.2f +- %-6.2f %9.2f +- %-6.2f %5.3f +- %-5.3f %9.2f +- %-6.2f %7.2f +- %-5.2f",
            names[s], st->falls, st->n, st->length_mean, st->length_std, st->pen_mean, st->pen_std, st->etrack_mean,
            st->etrack_std, st->up_mean, st->up_std, st->efixed_mean, st->efixed_std, st->travel_mean, st->travel_std);
    if (s == 1) fprintf(f, " %6.1f +- %-5.1f\n", 100 * st->selfc_mean, 100 * st->selfc_std);
    else fprintf(f, "    (not modelled)\n");
  }
  if (res->have[0] && res->have[1])
    fprintf(f, "Delta d (bcg - mujoco foot penetration): %+.2f mm\n", res->stats[0].pen_mean - res->stats[1].pen_mean);
  if (res->have[1])
    fprintf(f, "MuJoCo's timestep: %g ms, %d steps per control step\n", 1e3 * res->mj_timestep, res->mj_steps);
}

int bcg_eval_write(const bcg_eval_result *res, const bcg_eval_opts *o, const char *path, char *err, size_t errlen) {
  bcg_checkpoint *ck = bcg_checkpoint_begin(path, err, errlen);
  if (!ck) return -1;
  int64_t root = bcg_checkpoint_root(ck);
  static const char *names[2] = {"bcg", "mujoco"};
  int rc = 0;
  for (int s = 0; s < 2 && !rc; s++) {
    if (!res->have[s]) continue;
    int64_t g = bcg_h5_group(root, names[s], 1, err, errlen);
    if (g < 0) { rc = -1; break; }
    int n = res->runs;
    double v[7][BCG_EVAL_MAX_RUNS];
    for (int r = 0; r < n; r++) {
      v[0][r] = res->run[s][r].fell;
      v[1][r] = res->run[s][r].length_s;
      v[2][r] = res->run[s][r].pen_mm;
      v[3][r] = res->run[s][r].etrack_cm;
      v[4][r] = res->run[s][r].efixed_cm;
      v[5][r] = res->run[s][r].up_frac;
      v[6][r] = res->run[s][r].selfc_frac;
    }
    const bcg_eval_stats *st = &res->stats[s];
    double summ[7] = {st->falls, st->length_mean, st->length_std, st->pen_mean, st->pen_std, st->etrack_mean,
                      st->etrack_std};
    double summ2[4] = {st->efixed_mean, st->efixed_std, st->up_mean, st->up_std};
    rc = bcg_h5_write_doubles(g, "fell", v[0], n, err, errlen) || bcg_h5_write_doubles(g, "length_s", v[1], n, err, errlen) ||
         bcg_h5_write_doubles(g, "foot_penetration_mm", v[2], n, err, errlen) ||
         bcg_h5_write_doubles(g, "etrack_cm", v[3], n, err, errlen) ||
         bcg_h5_write_doubles(g, "summary_falls_len_mean_std_pen_mean_std_etrack_mean_std", summ, 7, err, errlen) ||
         bcg_h5_write_doubles(g, "efixed_cm", v[4], n, err, errlen) ||
         bcg_h5_write_doubles(g, "up_frac", v[5], n, err, errlen) ||
         (s == 1 && bcg_h5_write_doubles(g, "self_contact_frac", v[6], n, err, errlen)) ||
         bcg_h5_write_doubles(g, "summary_efixed_mean_std_up_mean_std", summ2, 4, err, errlen);
    bcg_h5_group_close(g);
  }
  if (!rc) {
    double opts[5] = {o->runs, o->seconds, o->fall_height, o->noise_q, o->noise_u};
    int64_t seed[1] = {(int64_t)o->seed};
    rc = bcg_h5_write_doubles(root, "options_runs_seconds_fall_noiseq_noiseu", opts, 5, err, errlen) ||
         bcg_h5_write_i64(root, "seed", seed, 1, err, errlen);
    double win[3] = {res->window_steps, res->window_s, res->penalty_m};
    rc = rc || bcg_h5_write_doubles(root, "efixed_window_steps_seconds_penalty_m", win, 3, err, errlen);
    double mjs[2] = {res->mj_timestep, res->mj_steps};
    if (res->have[1]) rc = rc || bcg_h5_write_doubles(root, "mujoco_timestep_steps", mjs, 2, err, errlen);
    if (!rc && res->have[0] && res->have[1]) {
      double dd[1] = {res->stats[0].pen_mean - res->stats[1].pen_mean};
      rc = bcg_h5_write_doubles(root, "delta_d_mm", dd, 1, err, errlen);
    }
  }
  if (rc) {
    bcg_checkpoint_abort(ck);
    return -1;
  }
  return bcg_checkpoint_commit(ck, err, errlen);
}
