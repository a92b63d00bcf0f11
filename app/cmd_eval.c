/* cmd_eval.c - `bcg eval RUN_DIR|CHECKPOINT`: the trained policy (mean
 * action) in MuJoCo and in bcg from the same initial states (bcg/eval.h);
 * prints the table and writes eval.h5 into the run directory. */
#include <errno.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <hdf5.h>
#include <unistd.h>
#include <sys/stat.h>

#include "bcg/config.h"
#include "bcg/eval.h"
#include "bcg/loader.h"
#include "bcg/runlog.h"
#include "cmd.h"
#include "evalrun.h"


typedef struct ckpt_name {
  int64_t it;
  char name[NAME_MAX + 1];
} ckpt_name;

/* the checkpoints of run_dir (the names bcg_train_latest_checkpoint
 * recognises) in iteration order into *out (free it); -1 with err */
static int list_checkpoints(const char *run_dir, ckpt_name **out, size_t *n, char *err, size_t errlen) {
  int64_t *its; /* ascending (core/train.c) */
  *n = 0;
  if (bcg_train_checkpoints(run_dir, &its, n))
    return snprintf(err, errlen, "%.1000s/checkpoints: cannot open", run_dir), -1;
  ckpt_name *ck = calloc(*n ? *n : 1, sizeof *ck);
  for (size_t i = 0; ck && i < *n; i++) {
    ck[i].it = its[i];
    snprintf(ck[i].name, sizeof ck[i].name, "ckpt_%09lld.h5", (long long)its[i]);
  }
  free(its);
  if (!ck) return snprintf(err, errlen, "out of memory"), -1;
  if (*n == 0) {
    free(ck);
    return snprintf(err, errlen, "%.1000s/checkpoints: no checkpoint", run_dir), -1;
  }
  *out = ck;
  return 0;
}

/* --select-best: every checkpoint of run_dir/checkpoints (the names
 * bcg_train_latest_checkpoint recognises), in iteration order, evaluated in
 * bcg only (the training simulator: MuJoCo plays no part in the choice); the
 * one with the lowest E_fixed (ties: the later one) written into ckpt. */
static int select_best(bcg_session *E, bcg_session *S, const bcg_eval_opts *o0, const char *run_dir, char *ckpt,
                       size_t ckptlen, char *err, size_t errlen) {
  char dir[2 * PATH_MAX];
  snprintf(dir, sizeof dir, "%.*s/checkpoints", PATH_MAX, run_dir);
  ckpt_name *ck;
  size_t n;
  if (list_checkpoints(run_dir, &ck, &n, err, errlen)) return -1;
  int rc = -1;
  bcg_eval_result *r = NULL;
  bcg_eval_opts o = *o0;
  o.sims = BCG_EVAL_BCG;
  double best = INFINITY, best_travel = -INFINITY;
  if (!(r = calloc(1, sizeof *r))) goto done;
  printf("--select-best: E_fixed in bcg (%d episodes, %g s) of %zu checkpoint%s (a task without a reference, such as\n"
         "  locomotion, has no tracking error: its E_fixed counts only the steps after a fall, ties go to the longer\n"
         "  root x travel):\n",
         o.runs, o.seconds, n, n == 1 ? "" : "s");
  for (size_t i = 0; i < n; i++) {
    char path[3 * PATH_MAX];
    snprintf(path, sizeof path, "%.*s/%.*s", PATH_MAX, dir, NAME_MAX, ck[i].name);
    if (bcg_session_load(S, path, NULL, NULL, NULL, NULL, err, errlen) ||
        bcg_eval(E, bcg_eval_learner_policy, S, &o, r, err, errlen))
      goto done;
    /* without a reference E_fixed is NaN; the same formula with a zero
     * error while up is the fallen share of the window times the penalty */
    double e = r->stats[0].efixed_mean;
    if (!isfinite(e)) e = 100 * r->penalty_m * (1 - r->stats[0].up_mean);
    const double tr = r->stats[0].travel_mean;
    printf("  %-24s iteration %8lld  falls %d/%d  E_fixed %6.2f cm  travel %6.2f m\n", ck[i].name, (long long)ck[i].it,
           r->stats[0].falls, r->stats[0].n, e, tr);
    const int better = isfinite(e) && (e < best - 1e-9 || (fabs(e - best) <= 1e-9 && tr >= best_travel));
    if ((better || (!isfinite(best) && !isfinite(e))) && strlen(path) < ckptlen) {
      best = e;
      best_travel = tr;
      memcpy(ckpt, path, strlen(path) + 1);
    }
  }
  printf("--select-best: %s (E_fixed %.2f cm in bcg)\n", ckpt, best);
  rc = 0;
done:
  free(r);
  free(ck);
  return rc;
}

enum { CV_IT, CV_SAMPLES, CV_WALL, CV_EF_BCG, CV_EF_MJ, CV_FALLS_BCG, CV_FALLS_MJ, CV_UP_BCG, CV_UP_MJ, CV_PEN_BCG, CV_PEN_MJ, NCV };
static const char *const cv_name[NCV] = {"iteration",    "samples",      "wall_time", "efixed_bcg_cm", "efixed_mujoco_cm",
                                         "falls_bcg",    "falls_mujoco", "up_bcg",    "up_mujoco",     "pen_bcg_mm",
                                         "pen_mujoco_mm"};

/* the columns of the curve into path (replaced atomically) */
static int write_curve(const char *path, double *const *col, size_t n, const bcg_eval_opts *o, const bcg_eval_result *r,
                       char *err, size_t errlen) {
  char tmp[PATH_MAX + 16];
  snprintf(tmp, sizeof tmp, "%.*s.tmp", PATH_MAX, path);
  hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) return snprintf(err, errlen, "%.1000s: cannot create", tmp), -1;
  int bad = 0;
  char e2[256];
  for (int c = 0; c < NCV; c++) bad |= bcg_h5_write_doubles(f, cv_name[c], col[c], n, e2, sizeof e2);
  const double attr[3] = {o->runs, r->window_s, r->penalty_m};
  bad |= bcg_h5_write_doubles(f, "episodes_window_s_penalty_m", attr, 3, e2, sizeof e2);
  if (H5Fclose(f) < 0 || bad || rename(tmp, path)) {
    unlink(tmp);
    return snprintf(err, errlen, "%.1000s: cannot write", path), -1;
  }
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One line over the curve's trained checkpoints (iteration > 0): how many
 * had no fall in either simulator (and in MuJoCo alone), the range of those
 * ones' E_fixed in MuJoCo, and Delta d (bcg's foot penetration minus
 * MuJoCo's) as median and range over all trained checkpoints: a run's
 * checkpoints swing, so the paper's Table 1 reads better from all of them
 * than from the last. Without a MuJoCo evaluation (--sim bcg), bcg's falls. */
static void print_curve_summary(double *const *col, size_t n) {
  size_t nt = 0, both = 0, mj = 0, nd = 0, has_mj = 0;
  double emin = INFINITY, emax = -INFINITY;
  double *dd = malloc(sizeof(double) * (n ? n : 1));
  for (size_t i = 0; i < n; i++) {
    if (!(col[CV_IT][i] > 0)) continue;
    nt++;
    double fb = col[CV_FALLS_BCG][i], fm = col[CV_FALLS_MJ][i], d = col[CV_PEN_BCG][i] - col[CV_PEN_MJ][i];
    has_mj |= isfinite(fm);
    mj += fm == 0;
    if (fb == 0 && (fm == 0 || !isfinite(fm))) {
      both++;
      double e = isfinite(fm) ? col[CV_EF_MJ][i] : col[CV_EF_BCG][i]; /* NaN without a reference motion */
      if (e < emin) emin = e;
      if (e > emax) emax = e;
    }
    if (dd && isfinite(d)) dd[nd++] = d;
  }
  if (!nt) {
    free(dd);
    return;
  }
  if (has_mj)
    printf("summary: %zu trained checkpoint%s, %zu with no fall in either simulator (%zu in MuJoCo)", nt, nt == 1 ? "" : "s", both, mj);
  else
    printf("summary: %zu trained checkpoint%s, %zu with no fall in bcg (MuJoCo not evaluated)", nt, nt == 1 ? "" : "s", both);
  if (both == 1 && isfinite(emin))
    printf(", its E_fixed in %s %.2f cm", has_mj ? "MuJoCo" : "bcg", emin);
  else if (both && isfinite(emin))
    printf(", their E_fixed in %s %.2f-%.2f cm", has_mj ? "MuJoCo" : "bcg", emin, emax);
  if (nd) {
    qsort(dd, nd, sizeof *dd, cmp_double);
    double med = nd % 2 ? dd[nd / 2] : 0.5 * (dd[nd / 2 - 1] + dd[nd / 2]);
    printf("; Delta d median %+.2f mm [%+.2f, %+.2f]", med, dd[0], dd[nd - 1]);
  }
  printf("\n");
  free(dd);
}

/* --curve: the untrained policy (S as opened: the run's seed, iteration 0)
 * and every checkpoint of run_dir evaluated as the final policy is (the
 * same episodes, simulators and window), the learning curve of E_fixed,
 * falls and the foot penetration per simulator (Delta d, the paper's Table 1)
 * against samples and wall time written to run_dir/eval_curve.h5
 * (bcg report --plots draws it) */
static int eval_curve(bcg_session *E, bcg_session *S, const bcg_eval_opts *o, const char *run_dir, char *err,
                      size_t errlen) {
  ckpt_name *ck;
  size_t n;
  if (list_checkpoints(run_dir, &ck, &n, err, errlen)) return -1;
  double *col[NCV] = {0};
  bcg_eval_result *r = calloc(1, sizeof *r);
  int rc = r ? 0 : -1;
  for (int c = 0; c < NCV && !rc; c++) rc = (col[c] = malloc(sizeof(double) * (n + 1))) ? 0 : -1;
  if (rc) snprintf(err, errlen, "out of memory");
  printf("--curve: the untrained policy and %zu checkpoint%s, each %d episodes of up to %g s:\n", n, n == 1 ? "" : "s", o->runs,
         o->seconds);
  for (size_t i = 0; i <= n && !rc; i++) {
    char path[3 * PATH_MAX];
    int64_t it = 0;
    uint64_t samples = 0;
    double wall = 0;
    if (i) snprintf(path, sizeof path, "%.*s/checkpoints/%.*s", PATH_MAX, run_dir, NAME_MAX, ck[i - 1].name);
    if ((i && bcg_session_load(S, path, &it, &samples, &wall, NULL, err, errlen)) ||
        bcg_eval(E, bcg_eval_learner_policy, S, o, r, err, errlen)) {
      rc = -1;
      break;
    }
    const double v[NCV] = {(double)it, (double)samples, wall,
                           r->have[0] ? r->stats[0].efixed_mean : NAN, r->have[1] ? r->stats[1].efixed_mean : NAN,
                           r->have[0] ? r->stats[0].falls : NAN, r->have[1] ? r->stats[1].falls : NAN,
                           r->have[0] ? r->stats[0].up_mean : NAN, r->have[1] ? r->stats[1].up_mean : NAN,
                           r->have[0] ? r->stats[0].pen_mean : NAN, r->have[1] ? r->stats[1].pen_mean : NAN};
    for (int c = 0; c < NCV; c++) col[c][i] = v[c];
    printf("  iteration %8lld  samples %12llu  wall %8.0f s  E_fixed bcg %7.2f cm  MuJoCo %7.2f cm  falls %g / %g  "
           "Delta d %+.2f mm\n",
           (long long)it, (unsigned long long)samples, wall, v[CV_EF_BCG], v[CV_EF_MJ], v[CV_FALLS_BCG], v[CV_FALLS_MJ],
           v[CV_PEN_BCG] - v[CV_PEN_MJ]);
  }
  char out[PATH_MAX + 32];
  snprintf(out, sizeof out, "%.*s/eval_curve.h5", PATH_MAX, run_dir);
  if (!rc) print_curve_summary(col, n + 1);
  if (!rc && !(rc = write_curve(out, col, n + 1, o, r, err, errlen))) printf("written: %s\n", out);
  for (int c = 0; c < NCV; c++) free(col[c]);
  free(r);
  free(ck);
  return rc;
}

/* the command line of bcg eval */
typedef struct eval_args {
  const char *target, *sim, *outpath, *trace;
  int runs, initial, compare, select, curve;
  double seconds, penalty;
  char *ov[270]; /* overrides, then the evaluation's own (nominal model, no RSI, num_envs) */
  int nov;
} eval_args;

/* parses argv into A; returns -1 when it is complete, else the exit status
 * of the usage error it printed */
static int parse_args(int argc, char **argv, eval_args *A) {
  memset(A, 0, sizeof *A);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--sim") && i + 1 < argc) A->sim = argv[++i];
    else if (!strcmp(a, "--runs") && i + 1 < argc) {
      if (bcg_cli_opt_int(argv[++i], 1, BCG_EVAL_MAX_RUNS, &A->runs))
        return bcg_cli_usage("eval", "--runs '%s': must be a whole number of episodes in [1, %d]", argv[i],
                             BCG_EVAL_MAX_RUNS);
    } else if (!strcmp(a, "--seconds") && i + 1 < argc) {
      if (bcg_cli_opt_real(argv[++i], 0.01, 1e6, &A->seconds))
        return bcg_cli_usage("eval", "--seconds '%s': must be a number of seconds in [0.01, 1e6]", argv[i]);
    } else if (!strcmp(a, "--fall-penalty") && i + 1 < argc) {
      if (bcg_cli_opt_real(argv[++i], 1e-9, 1e6, &A->penalty) || !(A->penalty > 0))
        return bcg_cli_usage("eval", "--fall-penalty '%s': must be a positive error in m (at most 1e6)", argv[i]);
    } else if ((!strcmp(a, "--runs") || !strcmp(a, "--seconds") || !strcmp(a, "--fall-penalty") ||
                !strcmp(a, "--sim") || !strcmp(a, "--out") || !strcmp(a, "--trace")) && i + 1 == argc)
      return bcg_cli_usage("eval", "%s needs a value", a);
    else if (!strcmp(a, "--out") && i + 1 < argc) A->outpath = argv[++i];
    else if (!strcmp(a, "--trace") && i + 1 < argc) A->trace = argv[++i];
    else if (!strcmp(a, "--initial")) A->initial = 1;
    else if (!strcmp(a, "--compare-initial")) A->compare = 1;
    else if (!strcmp(a, "--select-best")) A->select = 1;
    else if (!strcmp(a, "--curve")) A->curve = 1;
    else if (a[0] == '-') return bcg_cli_usage("eval", "unknown option '%s'", a);
    else if (strchr(a, '=')) {
      if (A->nov >= 250) return bcg_cli_usage("eval", "too many overrides");
      A->ov[A->nov++] = argv[i];
    } else if (!A->target) A->target = a;
    else return bcg_cli_usage("eval", "unexpected argument '%s'", a);
  }
  if (!A->target) return bcg_cli_usage("eval", "missing RUN_DIR or CHECKPOINT");
  if (A->sim && strcmp(A->sim, "bcg") && strcmp(A->sim, "mujoco") && strcmp(A->sim, "both"))
    return bcg_cli_usage("eval", "--sim must be mujoco, bcg or both");
  if (A->select && (!bcg_cli_is_dir(A->target) || A->initial))
    return bcg_cli_usage("eval", "--select-best needs a RUN_DIR (and no --initial)");
  if (A->curve && (!bcg_cli_is_dir(A->target) || A->initial))
    return bcg_cli_usage("eval", "--curve needs a RUN_DIR (and no --initial)");
  return -1;
}

/* the evaluation's options: the command line's where given, else [eval]'s */
static bcg_eval_opts eval_opts(const eval_args *A, const bcg_config *cfg) {
  bcg_eval_opts o;
  memset(&o, 0, sizeof o);
  o.runs = A->runs > 0 ? A->runs : (int)bcg_config_get_int(cfg, "eval", "episodes");
  o.seconds = A->seconds > 0 ? A->seconds : bcg_config_get_real(cfg, "eval", "seconds");
  o.fall_height = bcg_config_get_real(cfg, "eval", "fall_height");
  o.mj_timestep = bcg_config_get_real(cfg, "eval", "mujoco_timestep");
  o.seed = (uint64_t)bcg_config_get_int(cfg, "eval", "seed");
  o.noise_q = bcg_config_get_real(cfg, "eval", "noise_q");
  o.noise_u = bcg_config_get_real(cfg, "eval", "noise_u");
  o.fall_penalty = A->penalty > 0 ? A->penalty : 1.0;
  const char *sim = A->sim ? A->sim : bcg_config_get_string(cfg, "eval", "simulator");
  o.sims = !strcmp(sim, "bcg") ? BCG_EVAL_BCG : !strcmp(sim, "mujoco") ? BCG_EVAL_MUJOCO : BCG_EVAL_BCG | BCG_EVAL_MUJOCO;
  return o;
}

/* --compare-initial: the line "result: ..." (untrained -> trained, both
 * simulators) and the verdict on MuJoCo (else bcg) */
static void print_comparison(const bcg_eval_result *before, const bcg_eval_result *res) {
  static const char *nm[2] = {"bcg", "MuJoCo"};
  printf("result:");
  for (int k = 0; k < 2; k++) {
    if (!res->have[k]) continue;
    const bcg_eval_stats *b = &before->stats[k], *a = &res->stats[k];
    printf("%s %s: ", k ? ";" : "", nm[k]);
    /* a task without a reference (locomotion) has no tracking error: its
     * root's travel along x instead */
    if (isfinite(b->efixed_mean) && isfinite(a->efixed_mean))
      printf("E_track %.1f -> %.1f cm, E_fixed %.1f -> %.1f cm", b->etrack_mean, a->etrack_mean, b->efixed_mean,
             a->efixed_mean);
    else
      printf("root x travel %.2f -> %.2f m", b->travel_mean, a->travel_mean);
    printf(", falls %d/%d -> %d/%d, time to the fall or the end %.2f -> %.2f s", b->falls, b->n, a->falls, a->n,
           b->length_mean, a->length_mean);
  }
  printf(" (untrained -> trained)\n");
  /* the verdict on the simulator the policy was not trained in when it ran
   * (MuJoCo), else bcg: clearly better = fewer falls or none left, and
   * E_fixed at most half the untrained policy's */
  int k = res->have[1] ? 1 : 0;
  const double e0 = before->stats[k].efixed_mean, e1 = res->stats[k].efixed_mean;
  const int f0 = before->stats[k].falls, f1 = res->stats[k].falls, n = res->stats[k].n;
  /* a task without a reference (locomotion) has no E_fixed: then the time
   * to the fall must at least double instead */
  const double l0 = before->stats[k].length_mean, l1 = res->stats[k].length_mean;
  const int better = (f1 < f0 || f1 == 0) && (isfinite(e0) && isfinite(e1) ? e1 <= 0.5 * e0 : l1 >= 2 * l0);
  printf("verdict (%s): the trained policy is %s than the untrained one: falls %d/%d -> %d/%d, ", nm[k],
         better ? "clearly better" : "NOT clearly better", f0, before->stats[k].n, f1, n);
  if (isfinite(e0) && isfinite(e1))
    printf("E_fixed %.1f -> %.1f cm (%.1fx)\n", e0, e1, e1 > 0 ? e0 / e1 : 0.0);
  else
    printf("time to the fall or the end %.2f -> %.2f s\n", l0, l1);
}

int bcg_cmd_eval(int argc, char **argv) {
  eval_args A;
  int rc = parse_args(argc, argv, &A);
  if (rc >= 0) return rc;
  char run_dir[PATH_MAX + 8], ckpt[PATH_MAX + 64], cfgpath[PATH_MAX + 32];
  rc = bcg_cli_resolve_run(A.target, A.initial, "(train first, or --initial)", run_dir, sizeof run_dir, ckpt,
                           sizeof ckpt, cfgpath, sizeof cfgpath);
  if (rc >= 0) return rc;
  bcg_config *cfg = bcg_cli_eval_config(cfgpath, A.ov, &A.nov);
  if (!cfg) return BCG_EXIT_ERROR;
  bcg_eval_opts o = eval_opts(&A, cfg);
  char err[4096];
  bcg_session S;
  if (bcg_session_open(&S, cfg, err, sizeof err)) {
    bcg_config_free(cfg);
    return bcg_cli_error("%s", err);
  }
  /* The simulators of the evaluation need only `runs` environments: the env
   * and the task come from a session with num_envs = runs (evalrun.h), the
   * policy from the session that loads the checkpoint. The same when the run
   * had fewer environments than episodes asked for. */
  bcg_session Ssmall;
  bcg_config *cfg_small = NULL;
  bcg_session *E = bcg_cli_eval_session(&S, cfg, cfgpath, A.ov, A.nov, o.runs, &Ssmall, &cfg_small);
  rc = BCG_EXIT_OK;
  bcg_eval_result *before = NULL, *res = calloc(1, sizeof *res);
  if (A.compare || A.initial) {
    before = calloc(1, sizeof *before);
    o.trace = A.initial ? A.trace : NULL; /* --initial: the untrained policy's episodes are the ones traced */
    if (!before || bcg_eval(E, bcg_eval_learner_policy, &S, &o, before, err, sizeof err)) {
      rc = bcg_cli_error("eval of the initial policy: %s", err);
      goto out;
    }
    o.trace = NULL;
    if (A.initial && A.trace) printf("trace: %s\n", A.trace);
    printf("initial policy (untrained), %d episodes of up to %g s:\n", o.runs, o.seconds);
    bcg_eval_print(before, stdout);
    if (A.initial) goto out;
  }
  if ((A.curve || bcg_config_get_bool(cfg, "eval", "curve")) && !A.initial && bcg_cli_is_dir(A.target) &&
      eval_curve(E, &S, &o, run_dir, err, sizeof err)) {
    rc = bcg_cli_error("--curve: %s", err);
    goto out;
  }
  if (A.select && select_best(E, &S, &o, run_dir, ckpt, sizeof ckpt, err, sizeof err)) {
    rc = bcg_cli_error("--select-best: %s", err);
    goto out;
  }
  int64_t it = 0;
  uint64_t samples = 0;
  double wall = 0;
  if (bcg_session_load(&S, ckpt, &it, &samples, &wall, NULL, err, sizeof err)) {
    rc = bcg_cli_error("%s", err);
    goto out;
  }
  o.trace = A.trace; /* the final policy's episodes only (not --compare-initial's untrained ones, not --select-best's scan) */
  if (!res || bcg_eval(E, bcg_eval_learner_policy, &S, &o, res, err, sizeof err)) {
    rc = bcg_cli_error("eval: %s", err);
    goto out;
  }
  if (A.trace) printf("trace: %s\n", A.trace);
  printf("policy of %s (iteration %lld, %llu samples, %.0f s of training), %d episodes of up to %g s, fall below %g m:\n",
         ckpt, (long long)it, (unsigned long long)samples, wall, o.runs, o.seconds, o.fall_height);
  bcg_eval_print(res, stdout);
  char out[PATH_MAX + 16];
  if (A.outpath) snprintf(out, sizeof out, "%s", A.outpath);
  else snprintf(out, sizeof out, "%s/eval.h5", run_dir);
  if (!strcmp(out, "-")) { /* not written */
  } else if (bcg_eval_write(res, &o, out, err, sizeof err)) rc = bcg_cli_error("%s", err);
  else printf("written: %s\n", out);
  if (A.compare) print_comparison(before, res);
out:
  free(before);
  free(res);
  if (E != &S) bcg_session_close(&Ssmall);
  bcg_config_free(cfg_small);
  bcg_session_close(&S);
  bcg_config_free(cfg);
  return rc;
}
