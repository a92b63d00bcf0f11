/* tests/test_eval.c - the transfer evaluation (bcg/eval.h):
 * replaying the reference gives E_track = 0; a zero-action policy in MuJoCo
 * and in bcg from the same airborne state follows the same trajectory up to
 * the integrators' difference (which shrinks with the step); a deliberately
 * bad policy falls and is counted in both simulators; eval.h5 is written;
 * the fixed-window E_fixed ranks a falling policy below a standing one. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <hdf5.h>

#include "bcg/config.h"
#include "bcg/eval.h"
#include "bcg/loader.h"
#include "bcg/mjref.h"
#include "testutil.h"

static char tmpdir[128];

static bcg_config *load_cfg(const char *extra) {
  if (!tmpdir[0]) snprintf(tmpdir, sizeof tmpdir, "%s", bcg_test_tmpdir()); /* removed at exit */
  char path[256];
  snprintf(path, sizeof path, "%s/eval.ini", tmpdir);
  FILE *f = fopen(path, "w");
  if (!f) return NULL;
  fprintf(f,
          "[run]\nnum_envs = 4\nthreads = 1\n[sim]\nactuation = pd\n[contact]\nplugin = smoothed_kappa\n"
          "[estimator]\nplugin = autodiff\n[learner]\nplugin = shac\nactor_layers = 16\ncritic_layers = 16\n"
          "[task]\nplugin = imitation\nmotion = models/motions/jump.csv\n%s",
          extra);
  fclose(f);
  char err[2048];
  bcg_config *cfg = NULL;
  if (bcg_config_load_with(&cfg, bcg_registry_global(), path, 0, NULL, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return NULL;
  }
  return cfg;
}

static int zero_policy(void *ctx, const bcg_real *obs, int n, bcg_real *a) {
  bcg_session *S = ctx;
  memset(a, 0, sizeof(bcg_real) * (size_t)n * S->env->nu);
  return 0;
}
/* every joint driven half a radian off its default: the body folds up and falls */
static int bad_policy(void *ctx, const bcg_real *obs, int n, bcg_real *a) {
  bcg_session *S = ctx;
  for (int i = 0; i < n * S->env->nu; i++) a[i] = 1;
  return 0;
}

static void test_replay_etrack_zero(void) {
  bcg_config *cfg = load_cfg("rsi = true\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  bcg_session S;
  char err[2048];
  CU_ASSERT_EQUAL_FATAL(bcg_session_open(&S, cfg, err, sizeof err), 0);
  int n = S.env->nenv, nx = S.env->nx;
  bcg_real *x = calloc((size_t)n * nx, sizeof(bcg_real)), et[16];
  bcg_task_clock clk[16];
  int envs[16];
  for (int e = 0; e < n; e++) envs[e] = e;
  double worst = 0;
  /* reference-state initialisation places each env exactly on the reference
   * at a random phase; step the clock along the clip with the state set to
   * the reference by further resets of the same draw is not possible, so use
   * several draws (phases) */
  for (uint64_t draw = 0; draw < 20; draw++) {
    CU_ASSERT_EQUAL(S.task_ops->reset(S.task, envs, n, draw, x, clk), 0);
    CU_ASSERT_EQUAL(S.task_ops->tracking_error(S.task, x, clk, et), 0);
    for (int e = 0; e < n; e++) worst = fmax(worst, fabs(et[e]));
  }
  bcg_test_report("E_track of the replayed reference (m)", worst);
  CU_ASSERT(worst < 1e-12);
  free(x);
  bcg_session_close(&S);
  bcg_config_free(cfg);
}

/* the same zero-action PD policy from the same airborne state: MuJoCo and bcg
 * agree to integration tolerance, and the gap shrinks when the step halves */
static double airborne_gap(int substeps) {
  char extra[64];
  snprintf(extra, sizeof extra, "rsi = false\n");
  bcg_config *cfg = load_cfg(extra);
  if (!cfg) return NAN;
  char ov[64];
  snprintf(ov, sizeof ov, "sim.substeps=%d", substeps);
  char *ovs[1] = {ov};
  char err[2048];
  bcg_config *cfg2 = NULL;
  char path[256];
  snprintf(path, sizeof path, "%s/eval.ini", tmpdir);
  if (bcg_config_load_with(&cfg2, bcg_registry_global(), path, 1, ovs, err, sizeof err)) return NAN;
  bcg_config_free(cfg);
  bcg_session S;
  if (bcg_session_open(&S, cfg2, err, sizeof err)) return NAN;
  bcg_env *env = S.env;
  const bcg_model *M = env->model;
  const bcg_simparams *sp = &env->sim->sp;
  int nq = env->nq, nv = env->nv, nu = env->nu;
  bcg_real x[BCG_MAX_Q + BCG_MAX_DOF], xn[BCG_MAX_Q + BCG_MAX_DOF], a[BCG_MAX_ACT] = {0};
  for (int i = 0; i < nq; i++) x[i] = M->m.qpos0[i];
  for (int i = 0; i < nv; i++) x[nq + i] = 0.3 * sin(1.0 + i); /* some motion of every joint */
  x[2] += 2.0;                                                   /* far above the floor */
  bcg_mjref *r = bcg_mjref_new(M, 0);
  double kp[BCG_MAX_ACT], kd[BCG_MAX_ACT], tm[BCG_MAX_ACT], ctrl[BCG_MAX_ACT];
  for (int i = 0; i < nu; i++) {
    kp[i] = sp->kp[i]; kd[i] = sp->kd[i]; tm[i] = sp->tau_max[i];
    ctrl[i] = sp->qdef[M->m.jnt_qposadr[M->m.act_jnt[i]]];
  }
  bcg_mjref_use_pd(r, kp, kd, tm);
  bcg_mjref_set_timestep(r, sp->dt);
  double qd[BCG_MAX_Q], ud[BCG_MAX_DOF];
  for (int i = 0; i < nq; i++) qd[i] = x[i];
  for (int i = 0; i < nv; i++) ud[i] = x[nq + i];
  bcg_mjref_set_state(r, qd, ud);
  for (int k = 0; k < 10; k++) { /* 0.2 s, still airborne */
    bcg_env_step(env, 1, x, a, xn, NULL);
    memcpy(x, xn, sizeof(bcg_real) * env->nx);
    bcg_mjref_step(r, ctrl, sp->substeps);
  }
  bcg_mjref_state(r, qd, ud);
  double gap = 0;
  for (int i = 0; i < nq; i++) gap = fmax(gap, fabs(qd[i] - x[i]));
  bcg_mjref_free(r);
  bcg_session_close(&S);
  bcg_config_free(cfg2);
  return gap;
}

static void test_airborne_matches_mujoco(void) {
  double g4 = airborne_gap(4), g16 = airborne_gap(16);
  bcg_test_report("airborne qpos gap to MuJoCo after 0.2 s, dt 5 ms", g4);
  bcg_test_report("airborne qpos gap to MuJoCo after 0.2 s, dt 1.25 ms", g16);
  CU_ASSERT(g4 < 0.05);    /* both integrators are first order in the step */
  CU_ASSERT(g16 < g4 / 2); /* and the gap is theirs: it shrinks with the step */
}

static void test_bad_policy_falls(void) {
  bcg_config *cfg = load_cfg("rsi = false\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  bcg_session S;
  char err[2048];
  CU_ASSERT_EQUAL_FATAL(bcg_session_open(&S, cfg, err, sizeof err), 0);
  bcg_eval_opts o = {3, 4.0, 0.3, 7, 0.01, 0.05, BCG_EVAL_BCG | BCG_EVAL_MUJOCO, 0, NULL, 0};
  bcg_eval_result *res = calloc(1, sizeof *res);
  CU_ASSERT_EQUAL_FATAL(bcg_eval(&S, bad_policy, &S, &o, res, err, sizeof err), 0);
  CU_ASSERT_EQUAL(res->stats[0].falls, 3);
  CU_ASSERT_EQUAL(res->stats[1].falls, 3);
  /* the zero policy (PD holding the default pose) from the clip's first frame */
  CU_ASSERT_EQUAL_FATAL(bcg_eval(&S, zero_policy, &S, &o, res, err, sizeof err), 0);
  CU_ASSERT(res->have[0] && res->have[1]);
  CU_ASSERT(isfinite(res->stats[0].etrack_mean) && isfinite(res->stats[1].etrack_mean));
  char path[256];
  snprintf(path, sizeof path, "%s/eval.h5", tmpdir);
  CU_ASSERT_EQUAL(bcg_eval_write(res, &o, path, err, sizeof err), 0);
  CU_ASSERT_EQUAL(access(path, R_OK), 0);
  free(res);
  bcg_session_close(&S);
  bcg_config_free(cfg);
}

/* --trace: the episodes written step by step. Exact relations between the
 * groups: both simulators start from the same states; bcg's first step from
 * MuJoCo's first state (mujoco/bcg_next[:, 0]) is bcg's own first step
 * (bcg/x[:, 1]), the policy being deterministic; the lengths are the
 * simulated steps (the bad policy falls before the window's end, after which
 * the state is held); the rewards are the task's */
static double *read_all(hid_t f, const char *name, int rank, hsize_t *dims) {
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  if (d < 0) return NULL;
  hid_t sp = H5Dget_space(d);
  double *x = NULL;
  if (H5Sget_simple_extent_ndims(sp) == rank) {
    H5Sget_simple_extent_dims(sp, dims, NULL);
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    x = malloc(sizeof(double) * n);
    if (H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) < 0) free(x), x = NULL;
  }
  H5Sclose(sp);
  H5Dclose(d);
  return x;
}

static void test_trace(void) {
  bcg_config *cfg = load_cfg("rsi = false\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  bcg_session S;
  char err[2048], path[256];
  CU_ASSERT_EQUAL_FATAL(bcg_session_open(&S, cfg, err, sizeof err), 0);
  snprintf(path, sizeof path, "%s/trace.h5", tmpdir);
  bcg_eval_opts o = {3, 1.0, 0.3, 7, 0.01, 0.05, BCG_EVAL_BCG | BCG_EVAL_MUJOCO, 0, path, 0};
  bcg_eval_result *res = calloc(1, sizeof *res);
  CU_ASSERT_EQUAL_FATAL(bcg_eval(&S, bad_policy, &S, &o, res, err, sizeof err), 0);
  int nx = S.env->nx, nu = S.env->nu, T = 50;
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  CU_ASSERT_FATAL(f >= 0);
  hsize_t dx[3], dm[3], da[3], dp[3], dr[2], dl[1];
  double *xb = read_all(f, "bcg/x", 3, dx), *xm = read_all(f, "mujoco/x", 3, dm), *ab = read_all(f, "bcg/action", 3, da);
  double *pm = read_all(f, "mujoco/bcg_next", 3, dp), *rb = read_all(f, "bcg/reward", 2, dr);
  double *lm = read_all(f, "mujoco/length", 1, dl);
  CU_ASSERT_FATAL(xb && xm && ab && pm && rb && lm);
  CU_ASSERT(dx[0] == 3 && dx[1] == (hsize_t)T + 1 && dx[2] == (hsize_t)nx);
  CU_ASSERT(dm[0] == 3 && dm[1] == (hsize_t)T + 1 && dm[2] == (hsize_t)nx);
  CU_ASSERT(da[0] == 3 && da[1] == (hsize_t)T && da[2] == (hsize_t)nu);
  CU_ASSERT(dp[0] == 3 && dp[1] == (hsize_t)T && dp[2] == (hsize_t)nx);
  double d0 = 0, d1 = 0, anorm = 0, rsum = 0;
  for (int r = 0; r < 3; r++) {
    for (int i = 0; i < nx; i++) {
      d0 = fmax(d0, fabs(xb[((size_t)r * (T + 1)) * nx + i] - xm[((size_t)r * (T + 1)) * nx + i]));
      d1 = fmax(d1, fabs(xb[((size_t)r * (T + 1) + 1) * nx + i] - pm[((size_t)r * T) * nx + i]));
    }
    for (int i = 0; i < nu; i++) anorm += fabs(ab[(size_t)r * T * nu + i]);
    for (int t = 0; t < T; t++) rsum += fabs(rb[(size_t)r * T + t]);
    int len = (int)lm[r];
    CU_ASSERT(len >= 1 && len <= T);
    CU_ASSERT(fabs(len * (double)S.env->control_dt - res->run[1][r].length_s) < 1e-9);
    if (len < T) /* held after the fall */
      CU_ASSERT(memcmp(xm + ((size_t)r * (T + 1) + len) * nx, xm + ((size_t)r * (T + 1) + T) * nx, sizeof(double) * nx) == 0);
  }
  /* phase [runs]: the clock of x[r][t] is {t, 0, phase[r]}, the task's reset's (the eval's seed as the draw) */
  hsize_t dph[1], dpm[1];
  double *phb = read_all(f, "bcg/phase", 1, dph), *phm = read_all(f, "mujoco/phase", 1, dpm);
  CU_ASSERT_FATAL(phb && phm && dph[0] == 3 && dpm[0] == 3);
  int envs[3] = {0, 1, 2};
  bcg_task_clock clk[64];
  bcg_real *x0 = calloc((size_t)S.env->nenv * nx, sizeof *x0);
  CU_ASSERT_FATAL(S.env->nenv <= 64 && x0);
  CU_ASSERT_EQUAL(S.task_ops->reset(S.task, envs, 3, o.seed, x0, clk), 0);
  for (int r = 0; r < 3; r++) CU_ASSERT(phb[r] == clk[r].phase && phm[r] == clk[r].phase);
  free(phb), free(phm), free(x0);
  printf("\n  trace: initial states differ by %.3g, bcg's first step from MuJoCo's state vs bcg's own by %.3g", d0, d1);
  CU_ASSERT_EQUAL(d0, 0);
  CU_ASSERT_EQUAL(d1, 0);
  CU_ASSERT(anorm > 0 && rsum > 0);
  /* how to split a state row, for the tools */
  {
    hsize_t dd[1];
    double *dims = read_all(f, "dims_nq_nv_nu", 1, dd);
    CU_ASSERT_FATAL(dims && dd[0] == 3);
    CU_ASSERT(dims[0] == S.env->nq && dims[1] == S.env->nv && dims[2] == nu);
    free(dims);
  }
  /* how MuJoCo was driven: ctrl = qdef + action_scale * action (pd), and
   * MuJoCo re-stepped from each recorded state with the recorded ctrl, the
   * servos and the step of the trace reproduces the next state (what
   * trace_mismatch.py --replay relies on; to the constraint solver's
   * tolerance, as the run's solver started warm from the step before) */
  {
    hsize_t dc[3], dpd[2], dts[1];
    double *cm = read_all(f, "mujoco/ctrl", 3, dc), *pd = read_all(f, "mujoco_pd_kp_kd_taumax", 2, dpd);
    double *ts = read_all(f, "mujoco_timestep_substeps", 1, dts), *am = read_all(f, "mujoco/action", 3, da);
    CU_ASSERT_FATAL(cm && pd && ts && am && dc[0] == 3 && dc[1] == (hsize_t)T && dc[2] == (hsize_t)nu);
    CU_ASSERT_FATAL(dpd[0] == (hsize_t)nu && dpd[1] == 3 && dts[0] == 2);
    const bcg_simparams *sp = &S.env->sim->sp;
    const bcg_mdata *m = &S.env->model->m;
    double cerr = 0, rerr = 0, kerr = 0;
    for (int i = 0; i < nu; i++)
      kerr = fmax(kerr, fabs(pd[3 * i] - sp->kp[i]) + fabs(pd[3 * i + 1] - sp->kd[i]) + fabs(pd[3 * i + 2] - sp->tau_max[i]));
    CU_ASSERT(ts[0] == (double)sp->dt && ts[1] == sp->substeps);
    bcg_mjref *ref = bcg_mjref_new(S.env->model, 0);
    CU_ASSERT_FATAL(ref != NULL);
    double kp[BCG_MAX_ACT], kd[BCG_MAX_ACT], tm[BCG_MAX_ACT];
    for (int i = 0; i < nu; i++) kp[i] = pd[3 * i], kd[i] = pd[3 * i + 1], tm[i] = pd[3 * i + 2];
    CU_ASSERT_EQUAL_FATAL(bcg_mjref_use_pd(ref, kp, kd, tm), 0);
    bcg_mjref_set_timestep(ref, ts[0]);
    int nq = S.env->nq, nv = S.env->nv, steps = 0;
    for (int r = 0; r < 3; r++)
      for (int t = 0; t < (int)lm[r]; t++) {
        const double *c = cm + ((size_t)r * T + t) * nu, *a = am + ((size_t)r * T + t) * nu;
        for (int i = 0; i < nu; i++)
          cerr = fmax(cerr, fabs(c[i] - (sp->qdef[m->jnt_qposadr[m->act_jnt[i]]] + sp->action_scale * a[i])));
        const double *x0 = xm + ((size_t)r * (T + 1) + t) * nx, *x1 = x0 + nx;
        double q[BCG_MAX_Q], u[BCG_MAX_DOF];
        bcg_mjref_set_state(ref, x0, x0 + nq);
        bcg_mjref_step(ref, c, (int)ts[1]);
        bcg_mjref_state(ref, q, u);
        for (int i = 0; i < nq; i++) rerr = fmax(rerr, fabs(q[i] - x1[i]));
        for (int i = 0; i < nv; i++) rerr = fmax(rerr, fabs(u[i] - x1[nq + i]));
        steps++;
      }
    bcg_mjref_free(ref);
    printf("\n  trace: MuJoCo replayed from %d recorded states: %.3g from the recorded next states", steps, rerr);
    CU_ASSERT(steps > 10);
    CU_ASSERT_EQUAL(kerr, 0);
    CU_ASSERT(cerr < 1e-12);
    CU_ASSERT(rerr < 1e-9);
    free(cm), free(pd), free(ts), free(am);
  }
  H5Fclose(f);
  free(xb), free(xm), free(ab), free(pm), free(rb), free(lm);
  /* tools/trace_mismatch.py reads it (where python3 has numpy and h5py, as make deps installs) */
  if (system("python3 -c 'import numpy, h5py' >/dev/null 2>&1") == 0) {
    char cmd[2600], line[512];
    snprintf(cmd, sizeof cmd, "python3 tools/trace_mismatch.py '%s' --top 2 2>&1", path);
    FILE *p = popen(cmd, "r");
    CU_ASSERT_FATAL(p != NULL);
    int saw_size = 0, saw_share = 0, saw_top = 0;
    while (fgets(line, sizeof line, p)) {
      saw_size |= strstr(line, "one-step velocity mismatch") != NULL;
      saw_share |= strstr(line, "share of the squared mismatch by dof") != NULL;
      saw_top += strstr(line, "  episode ") != NULL;
    }
    CU_ASSERT_EQUAL(pclose(p), 0);
    CU_ASSERT(saw_size && saw_share && saw_top == 2);
    /* --replay through the mujoco Python package (where python3 has it):
     * with MuJoCo's settings as run it reproduces the trace */
    if (system("python3 -c 'import mujoco' >/dev/null 2>&1") == 0) {
      snprintf(cmd, sizeof cmd, "python3 tools/trace_mismatch.py '%s' --model '%s' --replay 2>&1", path,
               S.env->model->path);
      p = popen(cmd, "r");
      CU_ASSERT_FATAL(p != NULL);
      double med = -1, big = -1;
      while (fgets(line, sizeof line, p))
        if (strstr(line, "replay vs MuJoCo's recorded step:")) sscanf(strstr(line, "median"), "median %lf, 90%% %*f, 99%% %*f, largest %lf", &med, &big);
      CU_ASSERT_EQUAL(pclose(p), 0);
      printf("\n  trace_mismatch.py --replay: median %.3g, largest %.3g from the recorded steps", med, big);
      CU_ASSERT(med >= 0 && med < 1e-9);
    } else {
      printf("\n  trace_mismatch.py --replay not run: python3 has no mujoco package");
    }
  } else {
    printf("\n  tools/trace_mismatch.py not run: python3 lacks numpy or h5py");
  }
  unlink(path);
  free(res);
  bcg_session_close(&S);
  bcg_config_free(cfg);
}

/* E_fixed (the fixed-window tracking error): a policy that folds up and falls
 * scores worse than the zero policy on the same short window in both
 * simulators, even where its E_track (averaged until the fall) is not worse;
 * the steps after the fall count as the penalty, so E_fixed >= (1 - up) P,
 * and E_fixed <= P; the window is the same for both policies */
static void test_fixed_window(void) {
  bcg_config *cfg = load_cfg("rsi = false\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  bcg_session S;
  char err[2048];
  CU_ASSERT_EQUAL_FATAL(bcg_session_open(&S, cfg, err, sizeof err), 0);
  bcg_eval_opts o = {3, 2.0, 0.3, 7, 0.01, 0.05, BCG_EVAL_BCG | BCG_EVAL_MUJOCO, 0, NULL, 0};
  bcg_eval_result *bad = calloc(1, sizeof *bad), *zero = calloc(1, sizeof *zero);
  CU_ASSERT_EQUAL_FATAL(bcg_eval(&S, bad_policy, &S, &o, bad, err, sizeof err), 0);
  CU_ASSERT_EQUAL_FATAL(bcg_eval(&S, zero_policy, &S, &o, zero, err, sizeof err), 0);
  CU_ASSERT_EQUAL(bad->window_steps, 100); /* 2 s of 20 ms control steps */
  CU_ASSERT_EQUAL(zero->window_steps, bad->window_steps);
  CU_ASSERT_DOUBLE_EQUAL(bad->penalty_m, 1.0, 0);
  for (int s = 0; s < 2; s++) {
    const bcg_eval_stats *b = &bad->stats[s], *z = &zero->stats[s];
    printf("\n  %s: bad policy: falls %d, up %.3f, E_track %.1f cm, E_fixed %.1f cm; zero policy: falls %d, up %.3f, "
           "E_track %.1f cm, E_fixed %.1f cm",
           s ? "mujoco" : "bcg", b->falls, b->up_mean, b->etrack_mean, b->efixed_mean, z->falls, z->up_mean,
           z->etrack_mean, z->efixed_mean);
    CU_ASSERT_EQUAL(b->falls, 3);
    CU_ASSERT(b->up_mean < 1);
    CU_ASSERT(z->up_mean > b->up_mean);
    CU_ASSERT(isfinite(b->efixed_mean) && isfinite(z->efixed_mean));
    CU_ASSERT(b->efixed_mean > z->efixed_mean);
    for (int r = 0; r < 3; r++) {
      const bcg_eval_run *br = &bad->run[s][r], *zr = &zero->run[s][r];
      CU_ASSERT(br->efixed_cm >= 100 * (1 - br->up_frac) - 1e-9 && br->efixed_cm <= 100 + 1e-9);
      CU_ASSERT(zr->efixed_cm >= 100 * (1 - zr->up_frac) - 1e-9 && zr->efixed_cm <= 100 + 1e-9);
      if (!zr->fell) CU_ASSERT_DOUBLE_EQUAL(zr->up_frac, 1, 0);
      CU_ASSERT(isfinite(br->travel_m) && isfinite(zr->travel_m));
    }
    /* the zero-action PD policy cannot balance humanoid.xml's standing pose: it
     * topples forward (+x), the root moving tens of cm before it is down */
    printf("\n  %s: zero policy root x travel %.2f +- %.2f m", s ? "mujoco" : "bcg", z->travel_mean, z->travel_std);
    CU_ASSERT(z->travel_mean > 0.1 && z->travel_mean < 3);
  }
  bcg_test_report("E_fixed in bcg, falling policy (cm)", bad->stats[0].efixed_mean);
  bcg_test_report("E_fixed in bcg, zero policy (cm)", zero->stats[0].efixed_mean);
  /* the penalty is a parameter: a larger one raises the falling policy's score by (1 - up) dP */
  o.fall_penalty = 2.0;
  bcg_eval_result *bad2 = calloc(1, sizeof *bad2);
  CU_ASSERT_EQUAL_FATAL(bcg_eval(&S, bad_policy, &S, &o, bad2, err, sizeof err), 0);
  for (int r = 0; r < 3; r++) {
    const bcg_eval_run *b1 = &bad->run[0][r], *b2 = &bad2->run[0][r];
    CU_ASSERT_DOUBLE_EQUAL(b2->up_frac, b1->up_frac, 0);
    CU_ASSERT(b2->efixed_cm >= b1->efixed_cm + 100 * (1 - b1->up_frac) - 1e-6);
  }
  printf("\n");
  bcg_eval_print(zero, stdout);
  free(bad2);
  free(bad);
  free(zero);
  bcg_session_close(&S);
  bcg_config_free(cfg);
}

/* control steps covering a duration (evaluation windows, episode lengths):
 * whole multiples of a step that bcg_real rounded (0.02 in float is
 * 0.0199999996) count as whole, not one step more (a float build evaluated
 * 51 steps for 1 s); anything past a whole number is one step more */
/* [eval] mujoco_timestep: MuJoCo's own step in the transfer evaluation. bcg's
 * substep given explicitly is the default, bit for bit; a quarter of it runs 4x
 * the MuJoCo steps per control step, changes MuJoCo's result and leaves bcg's;
 * a timestep that does not divide the control step is refused by name; eval.h5
 * records what MuJoCo ran at. */
static void test_mujoco_timestep(void) {
  bcg_config *cfg = load_cfg("rsi = false\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  bcg_session S;
  char err[2048];
  CU_ASSERT_EQUAL_FATAL(bcg_session_open(&S, cfg, err, sizeof err), 0);
  const bcg_simparams *sp = &S.env->sim->sp;
  bcg_eval_opts o = {2, 1.0, 0.3, 7, 0.01, 0.05, BCG_EVAL_BCG | BCG_EVAL_MUJOCO, 0, NULL, 0};
  bcg_eval_result *r0 = calloc(1, sizeof *r0), *r1 = calloc(1, sizeof *r1), *r4 = calloc(1, sizeof *r4);
  CU_ASSERT_EQUAL_FATAL(bcg_eval(&S, zero_policy, &S, &o, r0, err, sizeof err), 0);
  CU_ASSERT_EQUAL(r0->mj_steps, sp->substeps);
  CU_ASSERT_DOUBLE_EQUAL(r0->mj_timestep, (double)sp->dt, 1e-15);
  o.mj_timestep = (double)sp->dt;
  CU_ASSERT_EQUAL_FATAL(bcg_eval(&S, zero_policy, &S, &o, r1, err, sizeof err), 0);
  CU_ASSERT_EQUAL(memcmp(&r0->stats, &r1->stats, sizeof r0->stats), 0);
  o.mj_timestep = (double)sp->dt / 4;
  CU_ASSERT_EQUAL_FATAL(bcg_eval(&S, zero_policy, &S, &o, r4, err, sizeof err), 0);
  CU_ASSERT_EQUAL(r4->mj_steps, 4 * sp->substeps);
  CU_ASSERT_EQUAL(memcmp(&r0->stats[0], &r4->stats[0], sizeof r0->stats[0]), 0); /* bcg: unchanged */
  CU_ASSERT(r0->stats[1].pen_mean != r4->stats[1].pen_mean);                     /* MuJoCo: another step */
  char path[256];
  snprintf(path, sizeof path, "%s/eval_mjdt.h5", tmpdir);
  CU_ASSERT_EQUAL_FATAL(bcg_eval_write(r4, &o, path, err, sizeof err), 0);
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  CU_ASSERT_FATAL(f >= 0);
  double v[2] = {0, 0};
  hid_t d = H5Dopen2(f, "mujoco_timestep_steps", H5P_DEFAULT);
  CU_ASSERT(d >= 0 && H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
  if (d >= 0) H5Dclose(d);
  H5Fclose(f);
  CU_ASSERT_DOUBLE_EQUAL(v[0], (double)sp->dt / 4, 1e-12);
  CU_ASSERT_EQUAL(v[1], 4 * sp->substeps);
  o.mj_timestep = 0.003; /* 0.02 s is not a whole number of 3 ms steps */
  err[0] = 0;
  CU_ASSERT_NOT_EQUAL(bcg_eval(&S, zero_policy, &S, &o, r1, err, sizeof err), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "[eval] mujoco_timestep"));
  free(r0), free(r1), free(r4);
  bcg_session_close(&S);
  bcg_config_free(cfg);
}

static void test_steps_for(void) {
  CU_ASSERT_EQUAL(bcg_steps_for(1.0, 0.02), 50);
  CU_ASSERT_EQUAL(bcg_steps_for(1.0, (double)0.02f), 50);
  CU_ASSERT_EQUAL(bcg_steps_for(10.0, (double)(0.005f * 4)), 500);
  CU_ASSERT_EQUAL(bcg_steps_for(20.0, (double)(float)(1.0 / 60)), 1200);
  CU_ASSERT_EQUAL(bcg_steps_for(1.01, 0.02), 51);
  CU_ASSERT_EQUAL(bcg_steps_for(0.99, 0.02), 50);
  CU_ASSERT_EQUAL(bcg_steps_for(0.001, 0.02), 1);
  CU_ASSERT_EQUAL(bcg_steps_for(3.0, 1.0), 3);
}

/* The learner gets timing wrappers of the task's and the estimator's tables
 * (bcg_session_time): every entry the plugin's table has and sets must be set
 * in the wrapper too, or the learner silently takes a slower fallback (an
 * optional entry such as observe_envs dropped by the wrapper). The tables
 * are a size field and function pointers, compared entry by entry. */
static int ops_entries_kept(const void *in, const void *out, size_t first, size_t total, const char *what) {
  uint32_t in_size, out_size;
  memcpy(&in_size, in, sizeof in_size);
  memcpy(&out_size, out, sizeof out_size);
  int missing = 0;
  for (size_t off = first; off + sizeof(void (*)(void)) <= total; off += sizeof(void (*)(void))) {
    void (*fi)(void) = NULL, (*fo)(void) = NULL;
    if (off + sizeof fi <= in_size) memcpy(&fi, (const char *)in + off, sizeof fi);
    if (off + sizeof fo <= out_size) memcpy(&fo, (const char *)out + off, sizeof fo);
    if (fi && !fo) {
      fprintf(stderr, "  %s: the plugin's entry at offset %zu is not in the timing wrapper's table\n", what, off);
      missing++;
    }
  }
  return missing;
}

static void test_timing_wrappers_keep_ops(void) {
  bcg_config *cfg = load_cfg("");
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  bcg_session S;
  char err[2048];
  CU_ASSERT_EQUAL_FATAL(bcg_session_open(&S, cfg, err, sizeof err), 0);
  CU_ASSERT_PTR_NOT_EQUAL(S.tr.task_ops, S.task_ops); /* the wrapper is in place */
  CU_ASSERT_PTR_NOT_NULL(S.task_ops->observe_envs);  /* imitation has it */
  CU_ASSERT_EQUAL(ops_entries_kept(S.task_ops, S.tr.task_ops, offsetof(bcg_task_ops, create), sizeof(bcg_task_ops),
                                   "task"), 0);
  CU_ASSERT_EQUAL(ops_entries_kept(S.est_ops, S.tr.est_ops, offsetof(bcg_estimator_ops, create),
                                   sizeof(bcg_estimator_ops), "estimator"), 0);
  bcg_session_close(&S);
  bcg_config_free(cfg);
}

BCG_TESTS({"steps_for", test_steps_for}, {"replay_etrack_zero", test_replay_etrack_zero}, {"airborne_matches_mujoco", test_airborne_matches_mujoco},
          {"bad_policy_falls", test_bad_policy_falls}, {"trace", test_trace}, {"fixed_window", test_fixed_window},
          {"mujoco_timestep", test_mujoco_timestep}, {"timing_wrappers_keep_ops", test_timing_wrappers_keep_ops});
BCG_RUN("eval")
