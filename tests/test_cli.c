/* test_cli.c - the bcg command run as a process: exit statuses, messages,
 * plugins, describe, check and train (up to the run directory). */
#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bcg/runlog.h"
#include "bcg/train.h"
#include "bcg/version.h"
#include "h5same.h"
#include "testutil.h"

static char out[1 << 16];

static char tmpdir[256];
static char extra_plugin_dir[512]; /* searched before the test plugins when set */

static void setup(void) {
  if (!tmpdir[0]) snprintf(tmpdir, sizeof tmpdir, "%s", bcg_test_tmpdir()); /* removed at exit */
}

/* Run bcg with the test plugins on the path; stdout+stderr into out (mode 0),
 * stderr only (1) or stdout only (2); returns the exit status. */
static int run_mode(int mode, const char *fmt, ...) {
  setup();
  char args[4096], cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  const char *b = bcg_test_build_dir();
  snprintf(cmd, sizeof cmd, "BCG_PLUGIN_PATH=%s%s%s/tests/plugins %s/bcg %s %s", extra_plugin_dir,
           extra_plugin_dir[0] ? ":" : "", b, b, args, mode == 1 ? "2>&1 >/dev/null" : mode == 2 ? "2>/dev/null" : "2>&1");
  return bcg_test_capture(cmd, out, sizeof out);
}
#define run(...) run_mode(0, __VA_ARGS__)
#define run_err(...) run_mode(1, __VA_ARGS__)
#define run_out(...) run_mode(2, __VA_ARGS__)

static const char *write_ini(const char *name, const char *text) {
  setup();
  static char paths[8][512];
  static int k;
  char *path = paths[k++ % 8];
  snprintf(path, 512, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
  return path;
}

static void test_basics(void) {
  CU_ASSERT_EQUAL(run("--version"), 0);
  char want[128];
  snprintf(want, sizeof want, "bcg %s (%s precision)\n", BCG_VERSION, BCG_REAL_NAME);
  CU_ASSERT_STRING_EQUAL(out, want);
  CU_ASSERT_EQUAL(run("--help"), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: bcg COMMAND"));
  const char *cmds[] = {"train", "eval", "bench", "plugins", "describe", "check", "gradstats", "sweep", "report"};
  for (int i = 0; i < 9; i++) {
    char l[64];
    snprintf(l, sizeof l, "\n  %s ", cmds[i]);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, l));
  }
  CU_ASSERT_EQUAL(run(""), 2);
  CU_ASSERT_EQUAL(run("chekc x"), 2);
  CU_ASSERT_STRING_EQUAL(out, "bcg: unknown command 'chekc' (did you mean check?); see 'bcg --help'\n");
  CU_ASSERT_EQUAL(run("--frobnicate"), 2);
  CU_ASSERT_EQUAL(run("help check"), 0);
  CU_ASSERT_EQUAL(strncmp(out, "usage: bcg check CONFIG", 23), 0);
  CU_ASSERT_EQUAL(run("check --help"), 0);
  CU_ASSERT_EQUAL(strncmp(out, "usage: bcg check CONFIG", 23), 0);
  CU_ASSERT_EQUAL(run("help nope"), 2);
  CU_ASSERT_EQUAL(run("check"), 2);
  CU_ASSERT_EQUAL(strncmp(out, "bcg: check: missing CONFIG", 26), 0);
  CU_ASSERT_EQUAL(run("check a.ini --weird"), 2);
  CU_ASSERT_EQUAL(run("check a.ini notanoverride"), 2);
  CU_ASSERT_EQUAL(strncmp(out, "bcg: check: 'notanoverride' is not an override section.key=value", 64), 0);
  CU_ASSERT_EQUAL(run("describe"), 2);
  CU_ASSERT_EQUAL(run("plugins extra"), 2);
}

/* bcg report: a run directory written with the runlog API (three iterations
 * of known curves, a config.ini), found directly and by searching its parent;
 * the table, --csv, and the errors */
static void test_report(void) {
  setup();
  char root[512], run1[600], p[700], err[256];
  snprintf(root, sizeof root, "%s/reportruns", tmpdir);
  snprintf(run1, sizeof run1, "%s/exp/20260101T000000Z", root);
  char cmd[2200];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", run1);
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  snprintf(p, sizeof p, "%s/config.ini", run1);
  FILE *f = fopen(p, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("[learner]\nplugin = shac\n[estimator]\nplugin = bcg\n[contact]\nplugin = smoothed_kappa\nkappa = 300\n", f);
  fclose(f);
  snprintf(p, sizeof p, "%s/log.h5", run1);
  bcg_runlog_meta meta = {"exp", "x.ini", "cpu", 1};
  bcg_runlog *log = bcg_runlog_open(p, &meta, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(log);
  const double ret[3] = {1.5, 7.25, 4.0}, trk[3] = {0.5, 0.25, 0.125};
  for (int i = 0; i < 3; i++) {
    bcg_runlog_append(log, "samples", 1000.0 * (i + 1));
    bcg_runlog_append(log, "wall_time", 2.0 * (i + 1));
    bcg_runlog_append(log, "mean_return", ret[i]);
    bcg_runlog_append(log, "track_err", trk[i]);
    CU_ASSERT_EQUAL(bcg_runlog_flush_iteration(log, err, sizeof err), 0);
  }
  CU_ASSERT_EQUAL(bcg_runlog_close(log, err, sizeof err), 0);
  CU_ASSERT_EQUAL(run_out("report %s --runs", run1), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "shac+bcg smoothed_kappa k=300"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, " 3000 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "1.50 ->  4.00     7.25    0.125"));
  CU_ASSERT_EQUAL(run_out("report %s --csv --runs", root), 0); /* found by searching */
  char want[900];
  snprintf(want, sizeof want, "%s,shac+bcg smoothed_kappa k=300,3,3000,6.0,1.5,4,7.25,0.125,nan,nan,nan,nan,nan,\n", run1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  CU_ASSERT_EQUAL(run("report"), 2);
  CU_ASSERT_EQUAL(run("report %s --bogus", run1), 2);
  CU_ASSERT_EQUAL(run("report %s/nope", root), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "not a directory"));
  snprintf(p, sizeof p, "%s/empty", root);
  snprintf(cmd, sizeof cmd, "mkdir -p %s", p);
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  CU_ASSERT_EQUAL(run("report %s", p), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "no run directory"));
  /* an unreadable log: listed with the reason, exit status 1 */
  snprintf(p, sizeof p, "%s/exp/broken", root);
  snprintf(cmd, sizeof cmd, "mkdir -p %s && echo garbage > %s/log.h5", p, p);
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  CU_ASSERT_EQUAL(run("report %s --runs", root), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "error:"));
  snprintf(want, sizeof want, "error: %s/log.h5: cannot open: ", p); /* a log, not "checkpoint ..." */
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  CU_ASSERT_PTR_NULL(strstr(out, "checkpoint"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "shac+bcg"));
  /* grouped (the default): the table of the readable run, the other named below it */
  CU_ASSERT_EQUAL(run("report %s", root), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "| shac+bcg smoothed_kappa k=300 | 1 | ? | 3 | 3000 | 6.00 | 4.00 | 12.50 |"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "(the run is left out)"));
}

/* A run directory of known numbers for the report's groups: log.h5 with
 * three iterations (samples 1000, 2000, 3000; wall_time, mean_return rising
 * to wall and ret; track_err falling to trk), config.ini with the seed, the
 * threads and kappa, and eval.h5 when ef (E_fixed of two episodes per
 * simulator, bcg then MuJoCo) and fell are given. */
static void fixture_run(const char *dir, int seed, int threads, const char *kappa, double wall, double ret, double trk,
                        const double *ef, const double *fell) {
  char cmd[1200], p[700], err[256];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  snprintf(p, sizeof p, "%s/config.ini", dir);
  FILE *f = fopen(p, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "[run]\nseed = %d\nname = fx-%d\nthreads = %d\n[learner]\nplugin = shac\n[estimator]\nplugin = bcg\n"
          "[contact]\nplugin = smoothed_kappa\nkappa = %s\n[sweep]\nrun.seed = 0, 1, 2\n",
          seed, seed, threads, kappa);
  fclose(f);
  snprintf(p, sizeof p, "%s/log.h5", dir);
  bcg_runlog_meta meta = {"fx", "x.ini", "cpu", seed};
  bcg_runlog *log = bcg_runlog_open(p, &meta, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(log);
  for (int i = 0; i < 3; i++) {
    bcg_runlog_append(log, "samples", 1000.0 * (i + 1));
    bcg_runlog_append(log, "wall_time", wall * (i + 1) / 3);
    bcg_runlog_append(log, "mean_return", ret * (i + 1) / 3);
    bcg_runlog_append(log, "track_err", trk * (3 - i));
    CU_ASSERT_EQUAL(bcg_runlog_flush_iteration(log, err, sizeof err), 0);
  }
  CU_ASSERT_EQUAL(bcg_runlog_close(log, err, sizeof err), 0);
  if (!ef) return;
  snprintf(p, sizeof p, "%s/eval.h5", dir);
  hid_t e = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  CU_ASSERT_FATAL(e >= 0);
  static const char *sims[2] = {"bcg", "mujoco"};
  for (int s = 0; s < 2; s++) {
    int64_t g = bcg_h5_group((int64_t)e, sims[s], 1, err, sizeof err);
    CU_ASSERT_FATAL(g >= 0);
    CU_ASSERT_EQUAL(bcg_h5_write_doubles(g, "efixed_cm", ef + 2 * s, 2, err, sizeof err), 0);
    CU_ASSERT_EQUAL(bcg_h5_write_doubles(g, "fell", fell + 2 * s, 2, err, sizeof err), 0);
    bcg_h5_group_close(g);
  }
  H5Fclose(e);
}

/* bcg report groups runs by configuration (bookkeeping keys such as
 * run.seed, run.threads and [sweep] aside) and prints mean +- std over each
 * group: kappa 50 with two seeds (one evaluated), kappa 300 with three */
static char fixture_root[600];
static void make_fixtures(void) {
  if (fixture_root[0]) return;
  setup();
  snprintf(fixture_root, sizeof fixture_root, "%s/groupruns", tmpdir);
  char d[800];
  const double ef[4] = {2, 4, 6, 8}, fell[4] = {0, 1, 1, 1};
  snprintf(d, sizeof d, "%s/k50-s0/20260101T000000Z", fixture_root);
  fixture_run(d, 0, 1, "50", 6, 2, 0.125, ef, fell);
  snprintf(d, sizeof d, "%s/k50-s1/20260101T000000Z", fixture_root);
  fixture_run(d, 1, 2, "50", 8, 4, 0.25, NULL, NULL);
  for (int k = 0; k < 3; k++) {
    snprintf(d, sizeof d, "%s/k300-s%d/20260101T000000Z", fixture_root, k);
    fixture_run(d, k, 1, "300", 6, k + 1, 0.1 * (k + 1), NULL, NULL);
  }
}

static void test_report_groups(void) {
  make_fixtures();
  CU_ASSERT_EQUAL(run_out("report %s", fixture_root), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "5 runs in 2 configurations\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "| configuration | runs | seeds | iterations | samples | wall s | final return | "
                                     "track_err cm | E_fixed bcg cm | falls bcg | E_fixed MuJoCo cm | falls MuJoCo |\n"));
  const char *a = strstr(out, "| contact.kappa=50 | 2 | 0 1 | 3 ± 0 | 3000 ± 0 | 7.00 ± 1.41 | 3.00 ± 1.41 | "
                              "18.75 ± 8.84 | 3.00 (1) | 1.0 of 2 (1) | 7.00 (1) | 2.0 of 2 (1) |\n");
  const char *b = strstr(out, "| contact.kappa=300 | 3 | 0 1 2 | 3 ± 0 | 3000 ± 0 | 6.00 ± 0.00 | 2.00 ± 1.00 | "
                              "20.00 ± 10.00 | - | - | - | - |\n");
  CU_ASSERT_PTR_NOT_NULL(a);
  CU_ASSERT_PTR_NOT_NULL(b);
  CU_ASSERT(a && b && a < b); /* 50 before 300 */
  if (!a || !b) fprintf(stderr, "%s", out);
  CU_ASSERT_EQUAL(run_out("report %s --csv", fixture_root), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "configuration,runs,seeds,iterations_mean,iterations_std,samples_mean,"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\ncontact.kappa=50,2,0 1,3,0,3000,0,7,1.414213562,3,1.414213562,18.75,"
                                     "8.838834765,3,nan,1,nan,7,nan,2,nan,1,2\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\ncontact.kappa=300,3,0 1 2,3,0,3000,0,6,0,2,1,20,10,nan,nan,nan,nan,nan,nan,"
                                     "nan,nan,0,0\n"));
  /* --runs: one row per run, as before */
  CU_ASSERT_EQUAL(run_out("report %s --runs", fixture_root), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "k300-s2/20260101T000000Z"));
  CU_ASSERT_EQUAL(run("report %s --plots", fixture_root), 2);
  /* a core key at its default is the same experiment whether config.ini
   * lists it (a newer bcg) or not (a run made before the key existed);
   * another value of it is another configuration */
  char root[700], d[800], cmd[2000];
  snprintf(root, sizeof root, "%s/defaultruns", tmpdir);
  for (int k = 0; k < 3; k++) {
    snprintf(d, sizeof d, "%s/r%d/20260101T000000Z", root, k);
    fixture_run(d, k, 1, "50", 6, 2, 0.125, NULL, NULL);
    snprintf(cmd, sizeof cmd, "printf '[eval]\\ncurve = %s\\nfall_height = 0.30\\n' >> %s/config.ini",
             k == 2 ? "true" : "false", d);
    if (k) CU_ASSERT_EQUAL(system(cmd), 0);
  }
  CU_ASSERT_EQUAL(run_out("report %s", root), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "3 runs in 2 configurations\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "| eval.curve=false | 2 | 0 1 |"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "| eval.curve=true | 1 | 2 |"));
}

/* A run for --paper: fixture_run's files with this config (motion, method,
 * kappa), E_track and E_fixed of two MuJoCo episodes, falls and Delta d. */
static void paper_run_erp(const char *dir, const char *learner, const char *estimator, int kappa, const char *erp,
                          const char *motion, double et, double ef, double falls, double dd) {
  const double efx[4] = {ef, ef, ef, ef}, fell[4] = {0, 0, falls > 0, falls > 1};
  fixture_run(dir, 0, 1, "300", 6, 2, 0.1, efx, fell);
  char p[900], err[256];
  snprintf(p, sizeof p, "%s/config.ini", dir);
  FILE *f = fopen(p, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f, "[learner]\nplugin = %s\n[estimator]\nplugin = %s\n[contact]\nplugin = smoothed_kappa\nkappa = %d\n%s%s%s"
             "[task]\nplugin = imitation\nmotion = /data/lafan1_g1/%s.csv\n", learner, estimator, kappa,
          erp ? "erp = " : "", erp ? erp : "", erp ? "\n" : "", motion);
  fclose(f);
  snprintf(p, sizeof p, "%s/eval.h5", dir);
  hid_t e = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
  CU_ASSERT_FATAL(e >= 0);
  int64_t g = bcg_h5_group((int64_t)e, "mujoco", 0, err, sizeof err);
  const double etv[2] = {et - 1, et + 1}, penm[2] = {2, 2}, penb[2] = {2 + dd, 2 + dd};
  CU_ASSERT_EQUAL(bcg_h5_write_doubles(g, "etrack_cm", etv, 2, err, sizeof err), 0);
  CU_ASSERT_EQUAL(bcg_h5_write_doubles(g, "foot_penetration_mm", penm, 2, err, sizeof err), 0);
  bcg_h5_group_close(g);
  g = bcg_h5_group((int64_t)e, "bcg", 0, err, sizeof err);
  CU_ASSERT_EQUAL(bcg_h5_write_doubles(g, "foot_penetration_mm", penb, 2, err, sizeof err), 0);
  bcg_h5_group_close(g);
  CU_ASSERT_EQUAL(bcg_h5_write_doubles((int64_t)e, "delta_d_mm", &dd, 1, err, sizeof err), 0);
  H5Fclose(e);
}

static void paper_run(const char *dir, const char *learner, const char *estimator, int kappa, const char *motion,
                      double et, double ef, double falls, double dd) {
  paper_run_erp(dir, learner, estimator, kappa, NULL, motion, et, ef, falls, dd);
}

/* --paper: Table 1 per kappa, erp and motion (SHAC+BCG), Table 2 per motion,
 * method and contact setting (a kappa sweep's runs stay out of the kappa-300
 * cell), runs without an evaluation or of another method counted and left out */
static void test_report_paper(void) {
  setup();
  char root[700], d[900];
  snprintf(root, sizeof root, "%s/paperruns", tmpdir);
  for (int s = 0; s < 2; s++) {
    snprintf(d, sizeof d, "%s/jump_k50_s%d/20260101T000000Z", root, s);
    paper_run(d, "shac", "bcg", 50, "jump", 30, 60 + 10 * s, 2, 12 + s);
    snprintf(d, sizeof d, "%s/jump_k300_s%d/20260101T000000Z", root, s);
    paper_run(d, "shac", "bcg", 300, "jump", 18 + 2 * s, 20, 0, 3);
  }
  snprintf(d, sizeof d, "%s/jump_ppo/20260101T000000Z", root);
  paper_run(d, "ppo", "autodiff", 300, "jump", 25, 40, 1, 4);
  snprintf(d, sizeof d, "%s/jump_trunc/20260101T000000Z", root);
  paper_run(d, "shac", "truncate", 300, "jump", 25, 40, 1, 4);
  snprintf(d, sizeof d, "%s/jump_k50_erp/20260101T000000Z", root); /* the position correction: a row of its own */
  paper_run_erp(d, "shac", "bcg", 50, "0.2", "jump", 10, 12, 0, 4);
  snprintf(d, sizeof d, "%s/noeval/20260101T000000Z", root); /* no eval.h5 */
  fixture_run(d, 0, 1, "300", 6, 2, 0.1, NULL, NULL);
  CU_ASSERT_EQUAL(run_out("report %s --paper", root), 0);
  const char *a = strstr(out, "| 50 | 0 | jump | 2 | 2.0 ± 0.0 of 2 | 12.5 ± 0.7 | 5/5 falls, 11-13 mm |\n");
  const char *a2 = strstr(out, "| 50 | 0.2 | jump | 1 | 0.0 of 2 | 4.0 | 5/5 falls, 11-13 mm |\n");
  const char *b = strstr(out, "| 300 | 0 | jump | 2 | 0.0 ± 0.0 of 2 | 3.0 ± 0.0 | 0/5 falls, about 3 mm |\n");
  CU_ASSERT(a && a2 && b && a < a2 && a2 < b);
  /* Table 2: each contact setting's SHAC+BCG runs of jump, then PPO */
  const char *c50 = strstr(out, "| jump | SHAC+BCG | kappa 50, erp 0 | 2 | 30.0 ± 0.0 | 65.0 ± 7.1 | 2.0 ± 0.0 | 18.6 |\n");
  const char *c50e = strstr(out, "| jump | SHAC+BCG | kappa 50, erp 0.2 | 1 | 10.0 | 12.0 | 0.0 | 18.6 |\n");
  const char *c300 = strstr(out, "| jump | SHAC+BCG | kappa 300, erp 0 | 2 | 19.0 ± 1.4 | 20.0 ± 0.0 | 0.0 ± 0.0 | 18.6 |\n");
  const char *cp = strstr(out, "| jump | PPO | kappa 300, erp 0 | 1 | 25.0 | 40.0 | 1.0 | 18.0 |\n");
  CU_ASSERT(c50 && c50e && c300 && cp && b < c50 && c50 < c50e && c50e < c300 && c300 < cp);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "runs: 8 read, 1 without a MuJoCo evaluation (bcg eval RUN), 1 of another method "
                                     "left out\n"));
  if (!a || !b || !c50 || !c300) fprintf(stderr, "%s", out);
  CU_ASSERT_EQUAL(run_out("report %s --paper --csv", root), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n1,50,0,jump,2,2,0,2,12.5,0.7071,\"5/5 falls, 11-13 mm\"\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n1,50,0.2,jump,1,0,0,2,4,0,\"5/5 falls, 11-13 mm\"\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n2,jump,PPO,smoothed_kappa,300,0,1,25,0,40,0,1,18\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n2,jump,SHAC+BCG,smoothed_kappa,50,0.2,1,10,0,12,0,0,18.6\n"));
  CU_ASSERT_EQUAL(run("report %s --paper --runs", root), 2);
  /* a gradstats.h5 beside a run (bcg gradstats: the paper's Figure 4) */
  {
    char gp[1000], err[256];
    snprintf(gp, sizeof gp, "%s/jump_k50_s0/gradstats.h5", root);
    hid_t e = H5Fcreate(gp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    CU_ASSERT_FATAL(e >= 0);
    static const char *ests[2] = {"autodiff", "bcg"};
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < 2; k++) {
        char name[64];
        double kap = k ? 300 : 50, v[7] = {kap, (i ? 2.0 : 40.0) * (k + 1), 0.5, 1, 0.1, i ? 0.2 : 0, 8};
        snprintf(name, sizeof name, "%s_kappa%g", ests[i], kap);
        int64_t g = bcg_h5_group((int64_t)e, name, 1, err, sizeof err);
        CU_ASSERT_FATAL(g >= 0);
        CU_ASSERT_EQUAL(bcg_h5_write_doubles(g, "kappa_var_mean_std_norm_mean_std_bundled_n", v, 7, err, sizeof err), 0);
        CU_ASSERT_EQUAL(bcg_h5_write_str(g, "estimator", ests[i], err, sizeof err), 0);
        bcg_h5_group_close(g);
      }
    H5Fclose(e);
  }
  /* --plots of evaluated runs with a kappa: kappa_penetration.png, and the
   * gradstats figure */
  char plots[900], mpl[900];
  snprintf(plots, sizeof plots, "%s/paperplots", tmpdir);
  snprintf(mpl, sizeof mpl, "%s/mplconfig", tmpdir);
  setenv("MPLCONFIGDIR", mpl, 1);
  CU_ASSERT_EQUAL(run("report %s --plots %s", root, plots), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "kappa_penetration.png"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "gradient_variance.png"));
  char png[1000];
  snprintf(png, sizeof png, "%s/kappa_penetration.png", plots);
  unsigned char h[24] = {0};
  FILE *f = fopen(png, "rb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(fread(h, 1, 24, f), 24);
  fclose(f);
  CU_ASSERT_EQUAL(memcmp(h, "\x89PNG\r\n\x1a\n", 8), 0);
  CU_ASSERT_EQUAL((h[16] << 24 | h[17] << 16 | h[18] << 8 | h[19]), 700);
  CU_ASSERT_EQUAL((h[20] << 24 | h[21] << 16 | h[22] << 8 | h[23]), 450);
}

/* --plots: learning curves as PNG files of 700 x 450 pixels (the PNG
 * signature and the IHDR chunk's width and height); a missing python is a
 * one-line error */
static void test_report_plots(void) {
  make_fixtures();
  char plots[700], mpl[700];
  snprintf(plots, sizeof plots, "%s/plots", tmpdir);
  snprintf(mpl, sizeof mpl, "%s/mplconfig", tmpdir); /* matplotlib's cache stays in the suite's directory */
  setenv("MPLCONFIGDIR", mpl, 1);
  /* two runs with an E_fixed curve (eval_curve.h5 of bcg eval --curve) */
  for (int k = 0; k < 2; k++) {
    char ecp[800];
    snprintf(ecp, sizeof ecp, "%s/k50-s%d/20260101T000000Z/eval_curve.h5", fixture_root, k);
    hid_t ef = H5Fcreate(ecp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const double smp[3] = {0, 1000, 3000}, wall[3] = {0, 2, 7}, e[3] = {90, 40 + 5 * k, 10 + k}, eb[3] = {80, 30, 8};
    const int n3 = 3;
    char e2[128];
    CU_ASSERT(bcg_h5_write_doubles(ef, "samples", smp, n3, e2, sizeof e2) == 0 &&
              bcg_h5_write_doubles(ef, "wall_time", wall, n3, e2, sizeof e2) == 0 &&
              bcg_h5_write_doubles(ef, "efixed_mujoco_cm", e, n3, e2, sizeof e2) == 0 &&
              bcg_h5_write_doubles(ef, "efixed_bcg_cm", eb, n3, e2, sizeof e2) == 0);
    H5Fclose(ef);
  }
  CU_ASSERT_EQUAL(run("report %s --plots %s", fixture_root, plots), 0);
  if (!strstr(out, "wrote ")) fprintf(stderr, "%s", out);
  static const char *names[6] = {"return_vs_samples",         "return_vs_wall",         "track_err_vs_samples",
                                 "track_err_vs_wall",         "efixed_mujoco_vs_samples", "efixed_bcg_vs_wall"};
  for (int i = 0; i < 6; i++) {
    char p[800];
    snprintf(p, sizeof p, "%s/%s.png", plots, names[i]);
    unsigned char h[24] = {0};
    FILE *f = fopen(p, "rb");
    CU_ASSERT_PTR_NOT_NULL(f);
    if (!f) continue;
    CU_ASSERT_EQUAL(fread(h, 1, sizeof h, f), sizeof h);
    fclose(f);
    CU_ASSERT_EQUAL(memcmp(h, "\x89PNG\r\n\x1a\n", 8), 0);
    CU_ASSERT_EQUAL(memcmp(h + 12, "IHDR", 4), 0);
    unsigned w = (unsigned)h[16] << 24 | (unsigned)h[17] << 16 | (unsigned)h[18] << 8 | h[19];
    unsigned ht = (unsigned)h[20] << 24 | (unsigned)h[21] << 16 | (unsigned)h[22] << 8 | h[23];
    CU_ASSERT_EQUAL(w, 700);
    CU_ASSERT_EQUAL(ht, 450);
  }
  /* a python3 first on PATH without the modules (a pyenv or virtualenv
   * one) does not hide the system's, where make deps installed them */
  if (access("/usr/bin/python3", X_OK) == 0) {
    char fake[700], fpy[800], path[8192];
    snprintf(fake, sizeof fake, "%s/fakepy", tmpdir);
    mkdir(fake, 0755);
    snprintf(fpy, sizeof fpy, "%s/python3", fake);
    FILE *fp = fopen(fpy, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    fputs("#!/bin/sh\necho 'No module named matplotlib' >&2\nexit 1\n", fp);
    fclose(fp);
    chmod(fpy, 0755);
    const char *old = getenv("PATH");
    char *saved = strdup(old ? old : "");
    snprintf(path, sizeof path, "%s:%s", fake, saved);
    setenv("PATH", path, 1);
    snprintf(fpy, sizeof fpy, "%s/return_vs_samples.png", plots);
    remove(fpy);
    CU_ASSERT_EQUAL(run("report %s --plots %s", fixture_root, plots), 0);
    CU_ASSERT_EQUAL(access(fpy, R_OK), 0);
    setenv("PATH", saved, 1);
    free(saved);
  }
  setenv("BCG_PYTHON", "/nonexistent/python3", 1);
  CU_ASSERT_EQUAL(run("report %s --plots %s", fixture_root, plots), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "bcg: error: report --plots: cannot run /nonexistent/python3: --plots needs "
                                     "python3 with matplotlib and h5py"));
  unsetenv("BCG_PYTHON");
  unsetenv("MPLCONFIGDIR");
}

static void test_plugins(void) {
  CU_ASSERT_EQUAL(run_out("plugins"), 0);
  const char *b = bcg_test_build_dir();
  const char *rows[][2] = {{"contact", "test_contact"},
                           {"estimator", "test_estimator"},
                           {"learner", "test_learner"},
                           {"task", "test_task"}};
  for (int i = 0; i < 4; i++) {
    char *line = strstr(out, rows[i][1]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(line);
    while (line > out && line[-1] != '\n') line--;
    CU_ASSERT_EQUAL(strncmp(line, rows[i][0], strlen(rows[i][0])), 0);
    char file[512];
    snprintf(file, sizeof file, "%s/tests/plugins/%s.so", b, rows[i][1]);
    char *eol = strchr(line, '\n');
    CU_ASSERT_PTR_NOT_NULL(strstr(line, file) && strstr(line, file) < eol ? line : NULL);
  }
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "zero impulses (test plugin)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "search path: "));
  CU_ASSERT_PTR_NULL(strstr(out, "warning"));
  /* broken ones are warnings on stderr */
  CU_ASSERT_EQUAL(run_err("plugins"), 0);
  char want[1024];
  snprintf(want, sizeof want,
           "bcg: warning: %s/tests/plugins/bad_abi.so: plugin ABI version 99, this bcg expects 1 (rebuild the plugin "
           "against this bcg)\n",
           b);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  snprintf(want, sizeof want, "bcg: warning: %s/tests/plugins/twin_contact.so: duplicate contact plugin 'test_contact'",
           b);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  int nwarn = 0;
  for (char *p = out; (p = strstr(p, "bcg: warning: ")); p++) nwarn++;
  CU_ASSERT(nwarn >= 12);
}

/* A truncated copy of a plugin on the search path (the first 30000 bytes of
 * soft.so) killed every command with SIGBUS inside dlopen: now it is a
 * warning naming the file, and commands that do not need it work. */
static void test_truncated_plugin(void) {
  setup();
  char src[512], cmd[2200];
  snprintf(extra_plugin_dir, sizeof extra_plugin_dir, "%s/cutplugins", tmpdir);
  snprintf(src, sizeof src, "%s/plugins/soft.so", bcg_test_build_dir());
  snprintf(cmd, sizeof cmd, "mkdir -p %s && head -c 30000 %s > %s/soft.so", extra_plugin_dir, src, extra_plugin_dir);
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  char want[1024];
  snprintf(want, sizeof want, "bcg: warning: %s/soft.so: not a loadable shared object: truncated or corrupt ELF file (",
           extra_plugin_dir);
  CU_ASSERT_EQUAL(run_err("plugins"), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  CU_ASSERT_EQUAL(run_out("plugins"), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "test_contact"));
  CU_ASSERT_EQUAL(run("describe test_contact"), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "contact plugin test_contact"));
  const char *p = write_ini("cutcheck.ini", "[contact]\nplugin = test_contact\n");
  CU_ASSERT_EQUAL(run_out("check %s", p), 0);
  /* the build's own soft.so (a built-in, found first) still serves a config selecting soft */
  p = write_ini("cutsoft.ini", "[contact]\nplugin = soft\n");
  CU_ASSERT_EQUAL(run_out("check %s", p), 0);
  /* describe of a plugin whose file failed to load says why, not just "no plugin named" */
  snprintf(cmd, sizeof cmd, "cp %s/soft.so %s/mycut.so", extra_plugin_dir, extra_plugin_dir);
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  snprintf(want, sizeof want, "bcg: error: no plugin named 'mycut' is loaded: %s/mycut.so: not a loadable shared object",
           extra_plugin_dir);
  CU_ASSERT_EQUAL(run_err("describe mycut"), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  extra_plugin_dir[0] = 0;
}

/* bcg sweep --dry-run with mode = zip and lists of unequal length read the
 * config after freeing it (SIGSEGV, an empty "bcg: error: "); the message
 * names both keys and their lengths. */
static void test_sweep_zip_lengths(void) {
  setup();
  const char *p = write_ini("zip.ini", "[run]\nname = z\n[contact]\nplugin = test_contact\n"
                                       "[sweep]\nmode = zip\ncontact.kappa = 50, 100\ncontact.iterations = 1, 2, 3\n");
  CU_ASSERT_EQUAL(run("sweep %s --dry-run", p), 1);
  char want[1024];
  snprintf(want, sizeof want,
           "bcg: error: %s: [sweep] mode = zip needs lists of one length (contact.kappa has 2 values, "
           "contact.iterations has 3)\n",
           p);
  if (strcmp(out, want)) printf("\n  got:  %s  want: %s", out, want);
  CU_ASSERT_STRING_EQUAL(out, want);
  /* bcg check says so too (it passed such a config) */
  CU_ASSERT_EQUAL(run("check %s", p), 1);
  CU_ASSERT_STRING_EQUAL(out, want);
}

/* bcg check compiles the model: conversion errors, the floor a task needs
 * ([model] allow_no_floor), and under actuation = pd every joint's effective
 * gains (kp * gear / 100) with a warning when they cannot hold the robot up;
 * bcg bench --model says when it simulates no contact. */
static void test_check_model(void) {
  setup();
  const char *p = write_ini("pd.ini", "[sim]\nactuation = pd\n");
  CU_ASSERT_EQUAL(run_err("check %s", p), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "bcg:   joint 'right_hip_y' (actuator 'right_hip_y', gear 120): kp 600 N m/rad, "
                                     "kd 12 N m s/rad, torque limit 120 N m\n"));
  CU_ASSERT_PTR_NULL(strstr(out, "warning"));
  CU_ASSERT_EQUAL(run_err("check %s sim.kp=200", p), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "bcg: warning: command line: [sim] kp: the stiffest PD joint gets kp = 240 N m/rad "
                                     "(joint 'right_hip_y', gear 120), below M g h = "));
  /* per-joint gains by name pattern: the first pattern that matches wins,
   * unmatched joints keep kp * gear / 100 */
  CU_ASSERT_EQUAL(run_err("check %s sim.kp_joints=hip_y:300,hip:100 sim.kd_joints=knee:7", p), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "joint 'right_hip_y' (actuator 'right_hip_y', gear 120): kp 300 N m/rad, kd 12 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "joint 'right_hip_x' (actuator 'right_hip_x', gear 40): kp 100 N m/rad, kd 4 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "joint 'right_knee' (actuator 'right_knee', gear 80): kp 400 N m/rad, kd 7 "));
  CU_ASSERT_EQUAL(run("check %s sim.kp_joints=hip:100,elbow", p), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[sim] kp_joints: 'elbow': expected pattern:value"));
  CU_ASSERT_EQUAL(run("check %s sim.kp_joints=wing:100", p), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[sim] kp_joints: pattern 'wing' matches no actuated joint of "));
  CU_ASSERT_EQUAL(run("check %s sim.kd_joints=knee:-3", p), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[sim] kd_joints: 'knee': value '-3' is not a non-negative number"));
  /* PD targets that ignore the action: an error naming the key; with motor
   * actuation the scale is unused */
  CU_ASSERT_EQUAL(run("check %s sim.action_scale=0", p), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[sim] action_scale: 0 with actuation = pd: every PD target would be the default "
                                     "pose, whatever the action"));
  CU_ASSERT_EQUAL(run_err("check %s sim.actuation=motor sim.action_scale=0", p), 0);
  /* motor actuation: gains unused, nothing printed */
  CU_ASSERT_EQUAL(run_err("check %s sim.actuation=motor", p), 0);
  CU_ASSERT_STRING_EQUAL(out, "");
  /* a floorless robot file for a task that stands on the floor */
  char text[1024], want[1024];
  const char *body = "/usr/share/mujoco/model/humanoid100/humanoid_body.xml";
  snprintf(text, sizeof text, "[model]\npath = %s\n[task]\nplugin = locomotion\n", body);
  p = write_ini("nofloor.ini", text);
  CU_ASSERT_EQUAL(run("check %s", p), 1);
  snprintf(want, sizeof want, "bcg: error: %s:2: [model] path: %s: no floor (no collidable plane on the world body), "
           "but task 'locomotion' stands on a floor", p, body);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "or set [model] allow_no_floor = true\n"));
  CU_ASSERT_EQUAL(run_out("check %s model.allow_no_floor=true", p), 0);
  /* a conversion error names the geom and its body */
  const char *x = write_ini("egg.xml", "<mujoco><worldbody><geom type='plane' size='1 1 .1'/>\n"
                                       "<body name='torso' pos='0 0 1'><freejoint/><geom name='egg' type='ellipsoid' "
                                       "size='.1 .2 .3'/></body></worldbody></mujoco>\n");
  snprintf(text, sizeof text, "[model]\npath = %s\n", x);
  p = write_ini("egg.ini", text);
  CU_ASSERT_EQUAL(run("check %s", p), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "geom 'egg' (#1) of body 'torso': ellipsoid collision geom"));
  /* ... or leaving its body out of contact_bodies lets it load; a name the
   * model lacks is an error naming the key */
  CU_ASSERT_EQUAL(run_out("check %s model.contact_bodies=world model.allow_no_floor=true", p), 0);
  CU_ASSERT_EQUAL(run("check %s model.contact_bodies=torso,nosuch", p), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[model] contact_bodies: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "contact_bodies: no body named 'nosuch' in the model"));
  /* bench says what it simulates */
  CU_ASSERT_EQUAL(run_out("bench --model %s --seconds 0.01 --envs 1", body), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "state: default pose in the air: the model has no floor, so no contact is simulated"));
  CU_ASSERT_PTR_NULL(strstr(out, "standing on the floor"));
  /* --contact: that contact model's row alone; an unknown name is a usage error naming it */
  CU_ASSERT_EQUAL(run_out("bench --model %s --seconds 0.01 --envs 1 --contact none", body), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nnone "));
  CU_ASSERT_PTR_NULL(strstr(out, "\nsoft "));
  CU_ASSERT_PTR_NULL(strstr(out, "\nsmoothed_kappa "));
  /* the machine and the code the numbers came from */
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "cores online"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\ncommit: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nthreads: 1"));
  /* the statistic it states, on both sides of the ratio, and finite positive rates */
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "steps/s (0 contacts; fastest of "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "Rates: the fastest of the repetitions"));
  const char *row = strstr(out, "\nnone ");
  double fw = 0, ratio = 0;
  int thr = 0;
  CU_ASSERT(row && sscanf(row, " none %d %lf %lfx", &thr, &fw, &ratio) == 3 && thr == 1 && isfinite(fw) && fw > 0 &&
            isfinite(ratio) && ratio > 0);
  CU_ASSERT_EQUAL(run_out("bench --model %s --seconds 0.01 --envs 1 --contact none --mean", body), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "steps/s (0 contacts; mean of "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "Rates: total work over total time"));
  row = strstr(out, "\nnone ");
  CU_ASSERT(row && sscanf(row, " none %d %lf", &thr, &fw) == 2 && isfinite(fw) && fw > 0);
  CU_ASSERT_EQUAL(run_err("bench --contact nosuch"), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--contact 'nosuch': one of none, soft, smoothed_kappa, hard"));
}

static void test_describe(void) {
  CU_ASSERT_EQUAL(run("describe test_contact"), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "contact plugin test_contact: zero impulses (test plugin)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "capabilities: differentiable"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "kappa       real in [1, 1000000]  \"300\"    stiffness (test)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "one of soft|hard"));
  CU_ASSERT_EQUAL(run("describe task/test_task"), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "(required)"));
  CU_ASSERT_EQUAL(run("describe sim"), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "core section [sim]:"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "substeps"));
  CU_ASSERT_EQUAL(run("describe contact"), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "plugin section [contact]"));
  CU_ASSERT_EQUAL(run_err("describe test_contcat"), 1);
  CU_ASSERT_STRING_EQUAL(out,
                         "bcg: error: no plugin or section named 'test_contcat' (did you mean test_contact?); 'bcg "
                         "plugins' lists them\n");
  CU_ASSERT_EQUAL(run("describe bogus/x"), 1);
}

static void test_check(void) {
  const char *p = write_ini("good.ini", "[run]\nseed = 9\n[contact]\nplugin = test_contact\nkappa = 50\n");
  CU_ASSERT_EQUAL(run_out("check %s contact.iterations=20", p), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[run]\nname = good\nseed = 9\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[contact]\nplugin = test_contact\nkappa = 50\niterations = 20\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[sim]\nsubsteps = 4\n"));
  /* the printed configuration is itself valid */
  const char *p2 = write_ini("resolved.ini", out);
  CU_ASSERT_EQUAL(run("check %s", p2), 0);

  /* a plugin replaced on the command line: the file's keys the new plugin lacks are
   * ignored with a warning naming each (estimator.plugin=autodiff over bcg's keys) */
  const char *sw = write_ini("swap.ini", "[estimator]\nplugin = bcg\nbranches = 4\nsigma_p = 0.02\n");
  CU_ASSERT_EQUAL(run_err("check %s estimator.plugin=autodiff", sw), 0);
  char wantw[1024];
  snprintf(wantw, sizeof wantw,
           "bcg: warning: %s:3: [estimator] branches: not a key of estimator plugin 'autodiff', which the command "
           "line selected: ignored\n",
           sw);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, wantw));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[estimator] sigma_p: not a key"));
  CU_ASSERT_EQUAL(run_out("check %s estimator.plugin=autodiff", sw), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[estimator]\nplugin = autodiff\n\n"));
  /* without the override the same keys are the file's own plugin's; an unknown key is still an error */
  CU_ASSERT_EQUAL(run("check %s", sw), 0);
  CU_ASSERT_EQUAL(run("check %s estimator.plugin=autodiff estimator.branches=4", sw), 1);
  const char *sw2 = write_ini("swap2.ini", "[estimator]\nplugin = bcg\nbranchez = 4\n");
  CU_ASSERT_EQUAL(run("check %s", sw2), 1);

  /* a training config whose task data is missing: check creates the task
   * and fails naming the key; train fails the same way before any run
   * directory exists (nothing for bcg report to list) */
  char nodata[2048];
  snprintf(nodata, sizeof nodata,
           "[run]\nout_dir = %s\nnum_envs = 2\n[estimator]\nplugin = autodiff\n[learner]\nplugin = shac\n"
           "[task]\nplugin = imitation\nmotion = %s\n",
           bcg_test_tmp_path("nodata_runs"), bcg_test_tmp_path("no_such_clip.csv"));
  const char *nd = write_ini("nodata.ini", nodata);
  CU_ASSERT_EQUAL(run("check %s", nd), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[task] motion: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "no_such_clip.csv: cannot open"));
  CU_ASSERT_EQUAL(run("train %s", nd), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "no_such_clip.csv: cannot open"));
  CU_ASSERT_NOT_EQUAL(access(bcg_test_tmp_path("nodata_runs"), F_OK), 0);

  const char *bad = write_ini("bad.ini", "# bad\n[run]\nseed = abc\n");
  CU_ASSERT_EQUAL(run("check %s", bad), 1);
  char want[1024];
  snprintf(want, sizeof want, "bcg: error: %s:3: [run] seed: 'abc' is not an integer\n", bad);
  CU_ASSERT_STRING_EQUAL(out, want);
  bad = write_ini("bad2.ini", "[contact]\nplugin = test_contact\n\nkapa = 1\n");
  CU_ASSERT_EQUAL(run("check %s", bad), 1);
  snprintf(want, sizeof want,
           "bcg: error: %s:4: [contact] kapa: unknown key for contact plugin 'test_contact' (did you mean kappa?)\n",
           bad);
  CU_ASSERT_STRING_EQUAL(out, want);
  CU_ASSERT_EQUAL(run("check %s run.seed=-4", p), 1);
  CU_ASSERT_STRING_EQUAL(out,
                         "bcg: error: command line: [run] seed: -4 is out of range [0, 2147483647] (override "
                         "run.seed=-4)\n");
  CU_ASSERT_EQUAL(run("check %s/missing.ini", tmpdir), 1);
  snprintf(want, sizeof want, "bcg: error: %s/missing.ini: cannot open: No such file or directory\n", tmpdir);
  CU_ASSERT_STRING_EQUAL(out, want);
  bad = write_ini("bad3.ini", "[model]\npath = /nonexistent/h.xml\n");
  CU_ASSERT_EQUAL(run("check %s", bad), 1);
  snprintf(want, sizeof want,
           "bcg: error: %s:2: [model] path: cannot read '/nonexistent/h.xml': No such file or directory\n", bad);
  CU_ASSERT_STRING_EQUAL(out, want);
  /* a plugin that failed to load: a hint to look at bcg plugins */
  bad = write_ini("bad4.ini", "[contact]\nplugin = bad_abi\n");
  CU_ASSERT_EQUAL(run("check %s", bad), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "'bcg plugins' says why"));
}

static void test_train(void) {
  setup();
  char text[2048];
  /* a session that cannot be created (the test task's 2 actions against
   * humanoid.xml's 21 actuators): an error, and no run directory */
  snprintf(text, sizeof text,
           "[run]\nname = clitest\nseed = 5\nout_dir = %s/runs\n[contact]\nplugin = test_contact\n"
           "[estimator]\nplugin = test_estimator\n[learner]\nplugin = test_learner\n"
           "[task]\nplugin = test_task\nmotion = walk\n",
           tmpdir);
  const char *p = write_ini("train.ini", text);
  CU_ASSERT_EQUAL(run("train %s", p), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "bcg: error: [task] test_task: 2 action dimensions, but the model has 21 actuators"));
  char f[PATH_MAX + 32];
  snprintf(f, sizeof f, "%s/runs/clitest", tmpdir);
  CU_ASSERT_NOT_EQUAL(access(f, F_OK), 0);
  /* one that trains: the run directory with its config, checkpoints and log */
  snprintf(text, sizeof text,
           "[run]\nname = clitest\nseed = 5\nnum_envs = 4\niterations = 1\nthreads = 1\nout_dir = %s/runs\n"
           "[model]\npath = tests/models/pendulum.xml\n[contact]\nplugin = test_contact\n"
           "[estimator]\nplugin = test_exact_estimator\n[learner]\nplugin = shac\nhorizon = 8\nactor_layers = 8\n"
           "critic_layers = 8\n[task]\nplugin = learn_task\n",
           tmpdir);
  p = write_ini("train_ok.ini", text);
  CU_ASSERT_EQUAL(run("train %s", p), 0);
  char prefix[512];
  snprintf(prefix, sizeof prefix, "bcg: train: run directory %s/runs/clitest/", tmpdir);
  char *line = strstr(out, prefix);
  CU_ASSERT_PTR_NOT_NULL_FATAL(line);
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", line + strlen("bcg: train: run directory "));
  dir[strcspn(dir, "\n")] = 0;
  snprintf(f, sizeof f, "%s/config.ini", dir);
  CU_ASSERT_EQUAL(access(f, R_OK), 0);
  CU_ASSERT_EQUAL(run("check %s", f), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[task]\nplugin = learn_task\n"));
  snprintf(f, sizeof f, "%s/checkpoints", dir);
  CU_ASSERT_EQUAL(access(f, X_OK), 0);
  snprintf(f, sizeof f, "%s/log.h5", dir);
  hid_t h = H5Fopen(f, H5F_ACC_RDONLY, H5P_DEFAULT);
  CU_ASSERT_FATAL(h >= 0);
  char s[256], e[512];
  CU_ASSERT_EQUAL(bcg_h5_read_str(h, "name", s, sizeof s, e, sizeof e), 0);
  CU_ASSERT_STRING_EQUAL(s, "clitest");
  CU_ASSERT_EQUAL(bcg_h5_read_str(h, "contact_plugin", s, sizeof s, e, sizeof e), 0);
  CU_ASSERT_STRING_EQUAL(s, "test_contact");
  CU_ASSERT_EQUAL(bcg_h5_read_str(h, "version", s, sizeof s, e, sizeof e), 0);
  CU_ASSERT_STRING_EQUAL(s, BCG_VERSION);
  H5Fclose(h);

  /* training needs every plugin section */
  const char *q = write_ini("train2.ini", "[contact]\nplugin = test_contact\n");
  CU_ASSERT_EQUAL(run("train %s", q), 1);
  char want[1024];
  snprintf(want, sizeof want,
           "bcg: error: %s: [estimator]: training needs this section with 'plugin = NAME' (available: ", q);
  CU_ASSERT_EQUAL(strncmp(out, want, strlen(want)), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "test_estimator"));
}


/* A plugin built against an older plugin.h (old_abi_task: its task table
 * ends at reward_vjp, poison beyond) trains, checkpoints and evaluates on
 * this core, which never reads past the table (the poison would abort). */
static void test_old_abi_plugin(void) {
  setup();
  char text[2048];
  snprintf(text, sizeof text,
           "[run]\nname = oldabi\nnum_envs = 4\niterations = 2\nthreads = 1\nout_dir = %s/runs\n"
           "[model]\npath = tests/models/pendulum.xml\n[estimator]\nplugin = test_exact_estimator\n"
           "[learner]\nplugin = shac\nhorizon = 8\nactor_layers = 8\ncritic_layers = 8\n[task]\nplugin = old_abi_task\n",
           tmpdir);
  const char *p = write_ini("oldabi.ini", text);
  CU_ASSERT_EQUAL(run("train %s", p), 0);
  /* the estimator's own per-iteration values (log_values) as curves of
   * log.h5: test_exact_estimator counts its backward calls, the horizon (8)
   * per iteration */
  {
    const char *line = strstr(out, "bcg: train: run directory ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(line);
    char lp[PATH_MAX + 16];
    snprintf(lp, sizeof lp, "%s", line + strlen("bcg: train: run directory "));
    lp[strcspn(lp, "\n")] = 0;
    strncat(lp, "/log.h5", sizeof lp - strlen(lp) - 1);
    hid_t h = H5Fopen(lp, H5F_ACC_RDONLY, H5P_DEFAULT);
    CU_ASSERT_FATAL(h >= 0);
    hid_t d = H5Dopen2(h, "est_backward_calls", H5P_DEFAULT);
    CU_ASSERT(d >= 0);
    if (d >= 0) {
      double v[4] = {0};
      hid_t sp = H5Dget_space(d);
      CU_ASSERT_EQUAL(H5Sget_simple_extent_npoints(sp), 2);
      H5Sclose(sp);
      CU_ASSERT(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
      CU_ASSERT_DOUBLE_EQUAL(v[0], 8, 0);
      CU_ASSERT_DOUBLE_EQUAL(v[1], 8, 0);
      H5Dclose(d);
    }
    H5Fclose(h);
  }
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/runs/oldabi", tmpdir);
  CU_ASSERT_EQUAL(run("eval \"$(ls -d %s/*/ | head -n 1)\" --runs 2 --seconds 0.2 --out - eval.fall_height=0", dir), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "fell"));
  /* --initial --trace: the untrained policy's episodes are traced */
  {
    char tp[PATH_MAX];
    snprintf(tp, sizeof tp, "%s/initial_trace.h5", tmpdir);
    CU_ASSERT_EQUAL(run("eval \"$(ls -d %s/*/ | head -n 1)\" --initial --trace %s --runs 2 --seconds 0.2 --sim bcg "
                        "eval.fall_height=0", dir, tp), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "trace: "));
    hid_t h = H5Fopen(tp, H5F_ACC_RDONLY, H5P_DEFAULT);
    CU_ASSERT_FATAL(h >= 0);
    CU_ASSERT(H5Lexists(h, "bcg", H5P_DEFAULT) > 0);
    H5Fclose(h);
  }
  /* a runtime failure reported through the error channel: the plugin's
   * message and code with its kind, name, call and step */
  CU_ASSERT_EQUAL(run("train %s run.name=failing estimator.fail_backward_at=3", p), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "bcg: error: [learner] shac: iteration 0 failed: [estimator] "
                                     "test_exact_estimator: backward at step 3 returned -1: adjoint of step 3 not "
                                     "finite (fail_backward_at) (code 7)"));
}

/* sweep, eval and gradstats end to end on the learners' pendulum task (fast) */
static void test_sweep_eval_gradstats(void) {
  setup();
  char text[2048];
  snprintf(text, sizeof text,
           "[run]\nname = sw\nnum_envs = 4\niterations = 1\nthreads = 1\nout_dir = %s/runs\n"
           "[model]\npath = tests/models/pendulum.xml\n[estimator]\nplugin = test_exact_estimator\n"
           "[learner]\nplugin = shac\nhorizon = 8\nactor_layers = 8\ncritic_layers = 8\n"
           "[task]\nplugin = learn_task\n[eval]\nafter_train = true\nepisodes = 2\nseconds = 0.5\nfall_height = 0\n"
           "[sweep]\nlearner.gamma = 0.9, 0.99\n",
           tmpdir);
  const char *p = write_ini("sweep.ini", text);
  CU_ASSERT_EQUAL(run("sweep %s --dry-run", p), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "sweep "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[2/2] train"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "learner.gamma=0.99 run.name=sw-learner.gamma_0.99"));
  CU_ASSERT_EQUAL(run("sweep %s", p), 0);
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/runs/sw/sw-learner.gamma_0.9", tmpdir);
  CU_ASSERT_EQUAL(access(dir, X_OK), 0);
  snprintf(dir, sizeof dir, "%s/runs/sw/sw-learner.gamma_0.99", tmpdir);
  CU_ASSERT_EQUAL_FATAL(access(dir, X_OK), 0);
  /* [eval] after_train: each finished run evaluated into its eval.h5 */
  char chk[3 * PATH_MAX];
  snprintf(chk, sizeof chk,
           "test $(ls %s/runs/sw/*/*/eval.h5 | wc -l) = 2 && grep -q '^bcg: train: \\[eval\\] after_train: bcg eval ' "
           "%s/train.out && grep -q 'Delta d' %s/train.out",
           tmpdir, dir, dir);
  CU_ASSERT_EQUAL(system(chk), 0);
  /* a sweep without [sweep] keys is an error */
  const char *q = write_ini("nosweep.ini", "[run]\nname = x\n");
  CU_ASSERT_EQUAL(run("sweep %s", q), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "no [sweep] keys"));
  /* eval of the first run, in both simulators */
  char cmd[PATH_MAX + 64];
  snprintf(cmd, sizeof cmd, "ls -d %s/*/ | head -n 1", dir);
  FILE *ls = popen(cmd, "r");
  char rd[PATH_MAX] = "";
  CU_ASSERT_PTR_NOT_NULL_FATAL(fgets(rd, sizeof rd, ls));
  pclose(ls);
  rd[strcspn(rd, "\n")] = 0;
  CU_ASSERT_EQUAL(run("eval %s --runs 2 --seconds 0.5 eval.fall_height=0", rd), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "mujoco"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "Delta d"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "root x travel m"));
  char f[PATH_MAX + 32];
  snprintf(f, sizeof f, "%s/eval.h5", rd);
  CU_ASSERT_EQUAL(access(f, R_OK), 0);
  /* a run trained with device = cuda evaluates on the CPU (here, with or
   * without a GPU): the same episodes as the run itself */
  {
    char cp[3 * PATH_MAX + 128], rows[2][4096];
    snprintf(cp, sizeof cp, "rm -rf %s/cudarun && cp -r %s %s/cudarun && sed -i 's/^device = cpu$/device = cuda/' "
             "%s/cudarun/config.ini && grep -q '^device = cuda$' %s/cudarun/config.ini", tmpdir, rd, tmpdir, tmpdir,
             tmpdir);
    CU_ASSERT_EQUAL_FATAL(system(cp), 0);
    for (int k = 0; k < 2; k++) {
      int rc = k ? run("eval %s/cudarun --runs 2 --seconds 0.5 --out - eval.fall_height=0", tmpdir)
                 : run("eval %s --runs 2 --seconds 0.5 --out - eval.fall_height=0", rd);
      CU_ASSERT_EQUAL(rc, 0);
      const char *b = strstr(out, "\nbcg ");
      snprintf(rows[k], sizeof rows[k], "%.*s", b ? (int)strcspn(b + 1, "\n") : 0, b ? b + 1 : "");
    }
    CU_ASSERT(rows[0][0] != 0);
    CU_ASSERT_STRING_EQUAL(rows[0], rows[1]);
  }
  /* --curve: every checkpoint evaluated the same way, the curve in eval_curve.h5 */
  CU_ASSERT_EQUAL(run("eval %s --runs 2 --seconds 0.5 --curve --out - eval.fall_height=0", rd), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--curve: the untrained policy and 1 checkpoint, each 2 episodes of up to 0.5 s:\n"
                                     "  iteration        0  samples            0  wall        0 s"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n  iteration        1 "));
  snprintf(f, sizeof f, "%s/eval_curve.h5", rd);
  hid_t ec = H5Fopen(f, H5F_ACC_RDONLY, H5P_DEFAULT);
  CU_ASSERT_FATAL(ec >= 0);
  double itv[2] = {0}, smp[2] = {0}, fl[2] = {-1, -1}, ew[3] = {0}, pb[2] = {NAN, NAN}, pm[2] = {NAN, NAN};
  char e2[128];
  CU_ASSERT(bcg_h5_read_doubles(ec, "pen_bcg_mm", pb, 2, e2, sizeof e2) == 2 &&
            bcg_h5_read_doubles(ec, "pen_mujoco_mm", pm, 2, e2, sizeof e2) == 2);
  CU_ASSERT(isfinite(pb[0]) && pb[0] >= 0 && isfinite(pm[1]) && pm[1] >= 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, " mm\n  iteration        1 "));
  CU_ASSERT(bcg_h5_read_doubles(ec, "iteration", itv, 2, e2, sizeof e2) == 2 &&
            bcg_h5_read_doubles(ec, "samples", smp, 2, e2, sizeof e2) == 2 &&
            bcg_h5_read_doubles(ec, "falls_mujoco", fl, 2, e2, sizeof e2) == 2 &&
            bcg_h5_read_doubles(ec, "episodes_window_s_penalty_m", ew, 3, e2, sizeof e2) == 3);
  /* the summary over the trained checkpoints, from the same numbers */
  {
    double fb[2] = {-1, -1}, em[2] = {NAN, NAN};
    CU_ASSERT(bcg_h5_read_doubles(ec, "falls_bcg", fb, 2, e2, sizeof e2) == 2 &&
              bcg_h5_read_doubles(ec, "efixed_mujoco_cm", em, 2, e2, sizeof e2) == 2);
    int both = fb[1] == 0 && fl[1] == 0, mj = fl[1] == 0;
    char want[512], tail[128];
    double d = pb[1] - pm[1];
    snprintf(want, sizeof want, "summary: 1 trained checkpoint, %d with no fall in either simulator (%d in MuJoCo)",
             both, mj);
    snprintf(tail, sizeof tail, "; Delta d median %+.2f mm [%+.2f, %+.2f]\n", d, d, d);
    if (both && isfinite(em[1]))
      snprintf(want + strlen(want), sizeof want - strlen(want), ", its E_fixed in MuJoCo %.2f cm", em[1]);
    strncat(want, tail, sizeof want - strlen(want) - 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
    if (!strstr(out, want)) fprintf(stderr, "want: %s\nout:\n%s\n", want, out);
  }
  H5Fclose(ec);
  CU_ASSERT_EQUAL(itv[0], 0);
  CU_ASSERT_EQUAL(itv[1], 1);
  CU_ASSERT_EQUAL(smp[0], 0);
  CU_ASSERT_EQUAL(smp[1], 32); /* 4 environments x horizon 8 */
  CU_ASSERT(fl[0] >= 0 && fl[0] <= 2 && fl[1] >= 0 && fl[1] <= 2);
  CU_ASSERT_EQUAL(ew[0], 2);
  /* bcg alone: the summary says so */
  CU_ASSERT_EQUAL(run("eval %s --runs 2 --seconds 0.5 --curve --sim bcg --out - eval.fall_height=0", rd), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "summary: 1 trained checkpoint, "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, " with no fall in bcg (MuJoCo not evaluated)"));
  CU_ASSERT_EQUAL(run("eval %s --curve --initial", rd), 2);
  /* --compare-initial ends with a verdict line */
  CU_ASSERT_EQUAL(run("eval %s --runs 2 --seconds 0.5 --compare-initial --out - eval.fall_height=0", rd), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "result: bcg:"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "verdict (MuJoCo): the trained policy is "));
  /* --select-best: every checkpoint in bcg, then the chosen one in both */
  CU_ASSERT_EQUAL(run("eval %s --runs 2 --seconds 0.5 --select-best --out - eval.fall_height=0", rd), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--select-best: E_fixed in bcg (2 episodes, 0.5 s) of "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--select-best: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "mujoco"));
  CU_ASSERT_EQUAL(run("eval %s --select-best --initial", rd), 2);
  /* --runs / --seconds out of range or not numbers are refused (1e9 s wrapped
   * to a window of -2^31 steps; 0, negative and nan fell back to the config) */
  const char *bad_opts[][2] = {{"--seconds", "1e9"}, {"--seconds", "0"},  {"--seconds", "-2"}, {"--seconds", "nan"},
                               {"--seconds", "3s"},  {"--runs", "0"},     {"--runs", "-1"},    {"--runs", "nan"},
                               {"--runs", "2.5"},    {"--runs", "100000"}, {"--fall-penalty", "inf"}};
  for (int i = 0; i < 11; i++) {
    CU_ASSERT_EQUAL(run_err("eval %s %s %s --out -", rd, bad_opts[i][0], bad_opts[i][1]), 2);
    char w[128];
    snprintf(w, sizeof w, "bcg: eval: %s '%s': must be ", bad_opts[i][0], bad_opts[i][1]);
    if (strncmp(out, w, strlen(w))) printf("\n  %s %s: %s", bad_opts[i][0], bad_opts[i][1], out);
    CU_ASSERT_EQUAL(strncmp(out, w, strlen(w)), 0);
  }
  CU_ASSERT_EQUAL(run_err("eval %s --runs", rd), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--runs needs a value"));
  /* more episodes than the run had environments (4): the evaluation builds its own */
  CU_ASSERT_EQUAL(run("eval %s --runs 5 --seconds 0.2 --out - eval.fall_height=0", rd), 0);
  /* a window too long in control steps, through the config */
  CU_ASSERT_EQUAL(run_err("eval %s --runs 2 --out - eval.seconds=1000000 sim.control_dt=0.00001", rd), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "seconds = 1e+06 is 1e+11 control steps of 1e-05 s: must be between 1 and 1e9 steps"));
  CU_ASSERT_EQUAL(run("eval %s/nonexistent", tmpdir), 1);
  CU_ASSERT_EQUAL(run("eval"), 2);
  CU_ASSERT_EQUAL(run("eval %s --sim gpu", rd), 2);
  /* gradstats with two estimators at the run's checkpoint */
  snprintf(cmd, sizeof cmd, "ls %s/checkpoints/ckpt_*.h5 | tail -n 1", rd);
  ls = popen(cmd, "r");
  char ck[PATH_MAX] = "";
  CU_ASSERT_PTR_NOT_NULL_FATAL(fgets(ck, sizeof ck, ls));
  pclose(ls);
  ck[strcspn(ck, "\n")] = 0;
  snprintf(f, sizeof f, "%s/config.ini", rd);
  CU_ASSERT_EQUAL(run("gradstats %s --checkpoint %s --estimators test_exact_estimator,autodiff --repeats 2", f, ck), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "test_exact_estimator"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "autodiff"));
  snprintf(f, sizeof f, "%s/gradstats.h5", rd);
  CU_ASSERT_EQUAL(access(f, R_OK), 0);
  CU_ASSERT_EQUAL(run("gradstats %s", p), 2);
}

/* The policy make demo ships (models/policies/stand_shac_bcg) still loads and
 * still stands: in 2 episodes of 4 s the untrained policy falls in both and
 * the shipped one in none, with E_fixed at most half (the verdict). Guards the
 * checkpoint format and the physics it was trained on. */
static void test_shipped_policy(void) {
  if (access("models/policies/stand_shac_bcg/config.ini", R_OK) != 0 ||
      access("/usr/share/mujoco/model/humanoid/humanoid.xml", R_OK) != 0) {
    CU_FAIL("models/policies/stand_shac_bcg or humanoid.xml missing");
    return;
  }
  CU_ASSERT_EQUAL_FATAL(run("eval models/policies/stand_shac_bcg --runs 2 --seconds 4 --compare-initial --out -"), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "verdict (MuJoCo): the trained policy is clearly better than the untrained one: "
                                     "falls 2/2 -> 0/2"));
  /* the running policy (rung 0): in 2 episodes of 5 s none falls in either
   * simulator (the untrained one falls after about 1.3 s), and it runs: the
   * MuJoCo verdict (time to the fall doubled) and at least 6 m along x */
  if (access("models/policies/locomotion_shac_bcg/config.ini", R_OK) != 0) {
    CU_FAIL("models/policies/locomotion_shac_bcg missing");
    return;
  }
  CU_ASSERT_EQUAL_FATAL(run("eval models/policies/locomotion_shac_bcg --runs 2 --seconds 5 --compare-initial --out -"), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "verdict (MuJoCo): the trained policy is clearly better than the untrained one: "
                                     "falls 2/2 -> 0/2"));
  const char *r = strstr(out, "result: bcg: root x travel ");
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  double t0, t1, m0, m1;
  CU_ASSERT_EQUAL_FATAL(sscanf(r, "result: bcg: root x travel %lf -> %lf m", &t0, &t1), 2);
  const char *rm = strstr(r, "MuJoCo: root x travel ");
  CU_ASSERT_PTR_NOT_NULL_FATAL(rm);
  CU_ASSERT_EQUAL_FATAL(sscanf(rm, "MuJoCo: root x travel %lf -> %lf m", &m0, &m1), 2);
  CU_ASSERT(t1 >= 6.0 && m1 >= 6.0);
  CU_ASSERT(strstr(r, "falls 2/2 -> 0/2") != NULL || strstr(r, "falls 1/2 -> 0/2") != NULL);
}

/* the first run directory under DIR (its path into rd) */
static int first_run(const char *dir, char *rd, size_t len) {
  char cmd[PATH_MAX + 64];
  snprintf(cmd, sizeof cmd, "ls -d %s/*/ | head -n 1", dir);
  FILE *ls = popen(cmd, "r");
  rd[0] = 0;
  int ok = ls && fgets(rd, (int)len, ls) != NULL;
  if (ls) pclose(ls);
  rd[strcspn(rd, "\n")] = 0;
  size_t n = strlen(rd);
  if (n > 1 && rd[n - 1] == '/') rd[n - 1] = 0;
  return ok && rd[0] ? 0 : -1;
}

/* A run stores its file paths absolute in config.ini ([model] path, [task]
 * motion: BCG_KEY_PATH), so resume and eval work from another directory; a
 * relative path in the config stays relative to the working directory. */
static const char *pend_ini =
    "[run]\nname = %s\nnum_envs = %d\niterations = %d\nthreads = 1\nout_dir = %s/runs\n"
    "[model]\npath = tests/models/pendulum.xml\n[estimator]\nplugin = test_exact_estimator\n"
    "[learner]\nplugin = shac\nhorizon = 8\nactor_layers = 8\ncritic_layers = 8\n"
    "[task]\nplugin = learn_task\n%s";

/* --select-best on a task without a reference (locomotion): E_fixed is NaN
 * there, and every checkpoint used to tie at NaN (the last one won); it
 * ranks by the fallen share of the window, ties by the root's travel */
static void test_select_best_locomotion(void) {
  setup();
  char text[2048];
  snprintf(text, sizeof text,
           "[run]\nname = loco\nnum_envs = 2\niterations = 3\ncheckpoint_every = 1\nthreads = 1\nout_dir = %s/runs\n"
           "[model]\npath = /usr/share/mujoco/model/humanoid/humanoid.xml\n[contact]\nplugin = smoothed_kappa\n[estimator]\nplugin = autodiff\n"
           "[learner]\nplugin = shac\nhorizon = 4\nactor_layers = 8\ncritic_layers = 8\n"
           "[task]\nplugin = locomotion\n",
           tmpdir);
  const char *p = write_ini("loco.ini", text);
  CU_ASSERT_EQUAL_FATAL(run("train %s", p), 0);
  char dir[PATH_MAX], rd[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/runs/loco", tmpdir);
  CU_ASSERT_EQUAL_FATAL(first_run(dir, rd, sizeof rd), 0);
  CU_ASSERT_EQUAL(run("eval %s --runs 2 --seconds 0.5 --select-best --out - eval.fall_height=0", rd), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "travel"));
  CU_ASSERT_PTR_NULL(strstr(out, "(E_fixed nan"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "(E_fixed 0.00 cm in bcg)")); /* nothing falls in 0.5 s */
  /* --compare-initial without a reference: the result line reports the
   * root's travel, not tracking errors it does not have */
  CU_ASSERT_EQUAL(run("eval %s --runs 2 --seconds 0.5 --compare-initial --out - eval.fall_height=0", rd), 0);
  const char *res = strstr(out, "result: bcg:");
  CU_ASSERT_PTR_NOT_NULL_FATAL(res);
  CU_ASSERT_PTR_NULL(strstr(res, "nan"));
  CU_ASSERT_PTR_NOT_NULL(strstr(res, "root x travel"));
}

static void test_run_paths(void) {
  setup();
  char text[2048], cwd[PATH_MAX], want[PATH_MAX + 64];
  CU_ASSERT_FATAL(getcwd(cwd, sizeof cwd) != NULL);
  snprintf(text, sizeof text, pend_ini, "paths", 4, 1, tmpdir, "");
  const char *p = write_ini("paths.ini", text);
  CU_ASSERT_EQUAL_FATAL(run("train %s", p), 0);
  char dir[PATH_MAX], rd[PATH_MAX], f[PATH_MAX + 32];
  snprintf(dir, sizeof dir, "%s/runs/paths", tmpdir);
  CU_ASSERT_EQUAL_FATAL(first_run(dir, rd, sizeof rd), 0);
  snprintf(f, sizeof f, "%s/config.ini", rd);
  static char cfgtext[1 << 15];
  FILE *fp = fopen(f, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  size_t n = fread(cfgtext, 1, sizeof cfgtext - 1, fp);
  cfgtext[n] = 0;
  fclose(fp);
  snprintf(want, sizeof want, "[model]\npath = %s/tests/models/pendulum.xml\n", cwd);
  CU_ASSERT_PTR_NOT_NULL(strstr(cfgtext, want));
  /* resume and eval from another directory */
  char b[PATH_MAX], cmd[8 * PATH_MAX];
  CU_ASSERT_FATAL(realpath(bcg_test_build_dir(), b) != NULL);
  snprintf(cmd, sizeof cmd,
           "cd / && BCG_PLUGIN_PATH=%s/tests/plugins %s/bcg train --resume %s run.iterations=2 >/dev/null 2>&1 && "
           "BCG_PLUGIN_PATH=%s/tests/plugins %s/bcg eval %s --runs 2 --seconds 0.2 --out - eval.fall_height=0 "
           ">/dev/null 2>&1",
           b, b, rd, b, b, rd);
  CU_ASSERT_EQUAL(system(cmd), 0);
}

/* bcg sweep --jobs 2 of 2 configurations x 2 seeds x 2 iterations: the
 * configuration with task.step_sleep_ms = 20 is held inside its first
 * iteration while the file hold exists (each held process says so with
 * hold.<pid>), so the sweep is stopped there every time: the two fast runs
 * have finished (they ran first), the two slow ones train.
 * First kill -9 of the sweep: its runs get SIGTERM, checkpoint and stop
 * (interrupted at 1/2); --status; the same command again skips the finished
 * runs and resumes the others in their own directories. Then SIGTERM to a
 * second sweep of the same config (--dir): it stops its runs the same way
 * and exits 0. Each run got run.threads = max(1, cores / 2). */
static void test_sweep_jobs(void) {
  setup();
  char text[2048], hold[600], b[PATH_MAX], cmd[8 * PATH_MAX], dir[700], p2[800], bcg[2 * PATH_MAX + 64];
  snprintf(hold, sizeof hold, "%s/hold", tmpdir);
  snprintf(text, sizeof text,
           "[run]\nname = swk\nnum_envs = 4\niterations = 2\ncheckpoint_every = 1\nout_dir = %s/runs\n"
           "[model]\npath = tests/models/pendulum.xml\n[estimator]\nplugin = test_exact_estimator\n"
           "[learner]\nplugin = shac\nhorizon = 8\nactor_layers = 8\ncritic_layers = 8\n"
           "[task]\nplugin = learn_task\nepisode_length = 8\nhold_file = %s\n"
           "[sweep]\ntask.step_sleep_ms = 0, 20\nrun.seed = 0, 1\n",
           tmpdir, hold);
  const char *p = write_ini("swk.ini", text);
  CU_ASSERT_FATAL(realpath(bcg_test_build_dir(), b) != NULL);
  snprintf(bcg, sizeof bcg, "BCG_PLUGIN_PATH=%s/tests/plugins %s/bcg", b, b);
  snprintf(dir, sizeof dir, "%s/runs/swk", tmpdir);
  /* kill -9 once both slow runs train (their logs exist), then let them go */
  snprintf(cmd, sizeof cmd,
           "touch %s; %s sweep %s --jobs 2 > %s/swk1.out 2>&1 & pid=$!; "
           "for i in $(seq 1500); do [ $(ls %s.* 2>/dev/null | wc -l) = 2 ] && break; sleep 0.02; done; "
           "kill -9 $pid; { wait $pid; } 2>/dev/null; rm %s %s.*; "
           "for i in $(seq 1500); do %s sweep --status %s | grep -q ' running ' || break; sleep 0.02; done",
           hold, bcg, p, tmpdir, hold, hold, hold, bcg, dir);
  CU_ASSERT_EQUAL(system(cmd), 0);
  CU_ASSERT_EQUAL(run_out("sweep --status %s", dir), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "no bcg sweep process runs it now\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "1/4 finished     2/2 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "2/4 finished     2/2 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "3/4 interrupted  1/2 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "4/4 interrupted  1/2 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n4 runs: 2 finished, 2 interrupted\n"));
  if (!strstr(out, "2 interrupted")) {
    snprintf(cmd, sizeof cmd, "cat %s/swk1.out %s/*/train.out >&2", tmpdir, dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
  }
  /* each run's share of the cores */
  cpu_set_t set;
  int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  snprintf(cmd, sizeof cmd, "grep -qx 'threads = %d' %s/swk-task.step_sleep_ms_0-run.seed_0/*/config.ini",
           cores / 2 > 1 ? cores / 2 : 1, dir);
  CU_ASSERT_EQUAL(system(cmd), 0);
  /* what the same command would do; another configuration is refused */
  CU_ASSERT_EQUAL(run_out("sweep %s --jobs 2 --dry-run", p), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "earlier sessions: 2 finished (skipped), 2 to resume, 0 failed"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[1/4] finished: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[4/4] train --resume "));
  CU_ASSERT_EQUAL(run("sweep %s learner.gamma=0.5", p), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "a sweep of another configuration"));
  /* again: the finished runs skipped, the interrupted ones resumed */
  CU_ASSERT_EQUAL(run_out("sweep %s --jobs 2", p), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[3/4] resume      swk-task.step_sleep_ms_20-run.seed_0 from iteration 1\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[4/4] resume      swk-task.step_sleep_ms_20-run.seed_1 from iteration 1\n"));
  CU_ASSERT_PTR_NULL(strstr(out, "] start "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, ": 4 runs: 4 finished\n"));
  CU_ASSERT_EQUAL(run_out("sweep --status %s", dir), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "3/4 finished     2/2 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "4/4 finished     2/2 "));
  snprintf(p2, sizeof p2, "%s/swk-task.step_sleep_ms_20-run.seed_1", dir);
  snprintf(cmd, sizeof cmd,
           "test $(ls -d %s/*/ | wc -l) = 1 && grep -q 'interrupted after 1 iterations' %s/train.out && "
           "grep -q 'finished after 2 iterations' %s/train.out && test $(grep -c '^== bcg sweep: ' %s/train.out) = 2",
           p2, p2, p2, p2);
  CU_ASSERT_EQUAL(system(cmd), 0);
  /* a larger budget continues the finished runs (the budget is not part of the sweep's identity) */
  CU_ASSERT_EQUAL(run_out("sweep %s --jobs 2 --dry-run run.iterations=3", p), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "earlier sessions: 0 finished (skipped), 4 to resume, 0 failed"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, " run.iterations=3 run.samples=0 run.seconds=0"));
  CU_ASSERT_EQUAL(run_out("sweep %s --jobs 2 run.iterations=3", p), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[1/4] resume      swk-task.step_sleep_ms_0-run.seed_0 from iteration 2\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, ": 4 runs: 4 finished\n"));
  CU_ASSERT_EQUAL(run_out("sweep --status %s", dir), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "1/4 finished     3/3 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "4/4 finished     3/3 "));
  /* and the same configuration with the smaller budget: all finished, nothing to do */
  CU_ASSERT_EQUAL(run_out("sweep %s --jobs 2 --dry-run", p), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "earlier sessions: 4 finished (skipped), 0 to resume, 0 failed"));
  /* SIGTERM to a sweep: its runs stop the same way, and it exits 0 */
  snprintf(cmd, sizeof cmd,
           "touch %s; %s sweep %s --jobs 2 --dir %s/swk_term > %s/swk2.out 2>&1 & pid=$!; "
           "for i in $(seq 1500); do [ $(ls %s.* 2>/dev/null | wc -l) = 2 ] && break; sleep 0.02; done; kill -TERM $pid; "
           "for i in $(seq 1500); do grep -q 'stopping: SIGTERM' %s/swk2.out && break; sleep 0.02; done; "
           "rm %s %s.*; wait $pid",
           hold, bcg, p, tmpdir, tmpdir, hold, tmpdir, hold, hold);
  int st = system(cmd);
  CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CU_ASSERT_EQUAL(run_out("sweep --status %s/swk_term", tmpdir), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n4 runs: 2 finished, 2 interrupted\n"));
  snprintf(cmd, sizeof cmd,
           "grep -q 'stopping: SIGTERM to 2 runs' %s/swk2.out && grep -q 'interrupted swk-task.step_sleep_ms_20-run.seed_0 "
           "at iteration 1/2' %s/swk2.out && grep -q 'run the same command again' %s/swk2.out",
           tmpdir, tmpdir, tmpdir);
  CU_ASSERT_EQUAL(system(cmd), 0);
  /* run.device = cuda: each run on one of the visible GPUs (in turn, as --dry-run shows it) */
  char *cvd = getenv("CUDA_VISIBLE_DEVICES") ? strdup(getenv("CUDA_VISIBLE_DEVICES")) : NULL;
  setenv("CUDA_VISIBLE_DEVICES", "3,5", 1);
  CU_ASSERT_EQUAL(run_out("sweep %s run.device=cuda --dir %s/swk_gpu --dry-run", p, tmpdir), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n[1/4] CUDA_VISIBLE_DEVICES=3 train "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n[2/4] CUDA_VISIBLE_DEVICES=5 train "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n[3/4] CUDA_VISIBLE_DEVICES=3 train "));
  if (cvd) setenv("CUDA_VISIBLE_DEVICES", cvd, 1);
  else unsetenv("CUDA_VISIBLE_DEVICES");
  free(cvd);
  snprintf(p2, sizeof p2, "%s/swk_gpu", tmpdir);
  CU_ASSERT_NOT_EQUAL(access(p2, F_OK), 0); /* a dry run makes nothing */
  /* usage */
  CU_ASSERT_EQUAL(run("sweep %s --jobs 0", p), 2);
  CU_ASSERT_EQUAL(run("sweep --status %s %s", dir, p), 2);
  CU_ASSERT_EQUAL(run("sweep --status %s", tmpdir), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "not a sweep directory"));
}

/* SIGTERM is Ctrl-C: the run checkpoints and exits 0 ("interrupted"). While
 * it trains, a second --resume of the run is refused naming the process (its
 * log is not locked any more, so nothing else would stop it). */
static void test_sigterm(void) {
  setup();
  char text[2048];
  snprintf(text, sizeof text, pend_ini, "term", 4, 1000000, tmpdir, "");
  const char *p = write_ini("term.ini", text);
  char b[PATH_MAX], cmd[8 * PATH_MAX], dir[PATH_MAX];
  CU_ASSERT_FATAL(realpath(bcg_test_build_dir(), b) != NULL);
  snprintf(dir, sizeof dir, "%s/runs/term", tmpdir);
  /* signal once the run's log exists (the handler is installed before it) */
  snprintf(cmd, sizeof cmd,
           "BCG_PLUGIN_PATH=%s/tests/plugins %s/bcg train %s > %s/term.out 2>&1 & pid=$!; "
           "for i in $(seq 600); do ls %s/*/log.h5 >/dev/null 2>&1 && break; sleep 0.05; done; sleep 0.3; "
           "BCG_PLUGIN_PATH=%s/tests/plugins %s/bcg train --resume $(ls -d %s/*/) run.iterations=5 > %s/second.out 2>&1; "
           "echo $? >> %s/second.out; kill -TERM $pid; wait $pid",
           b, b, p, tmpdir, dir, b, b, dir, tmpdir, tmpdir);
  int st = system(cmd);
  CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  snprintf(cmd, sizeof cmd, "grep -q 'this run is being trained by process [0-9]' %s/second.out && tail -n 1 %s/second.out | grep -qx 1",
           tmpdir, tmpdir);
  CU_ASSERT_EQUAL(system(cmd), 0);
  /* and config.ini was left as it was (the override was not written) */
  snprintf(cmd, sizeof cmd, "grep -q '^iterations = 1000000$' %s/*/config.ini", dir);
  CU_ASSERT_EQUAL(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "grep -q 'bcg: train: interrupted after' %s/term.out && ls %s/*/checkpoints/ckpt_*.h5 >/dev/null",
           tmpdir, dir);
  CU_ASSERT_EQUAL(system(cmd), 0);
}

/* Every environment reset for a NaN in an iteration: a warning. */
static void test_nan_warning(void) {
  setup();
  char text[2048];
  snprintf(text, sizeof text, pend_ini, "nan", 2, 2, tmpdir, "nan_env = 0\nnan_step = 1\nnan_what = reward\n");
  const char *p = write_ini("nan.ini", text);
  run_err("train %s run.num_envs=1", p);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "bcg: warning: iteration 0: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, " NaN/Inf resets (a state, observation or reward not finite) for 1 environments"));
  /* an ordinary run: none */
  snprintf(text, sizeof text, pend_ini, "nonan", 2, 2, tmpdir, "");
  p = write_ini("nonan.ini", text);
  CU_ASSERT_EQUAL(run_err("train %s", p), 0);
  CU_ASSERT_PTR_NULL(strstr(out, "warning"));
}

/* A planar model (models/biped2d.xml: its contacts cannot move across the
 * plane, so the contact's Delassus blocks are singular there) trains with
 * every contact model without a single NaN reset: smoothed_kappa and hard
 * once produced NaN at every step */
static void test_planar_model(void) {
  setup();
  static const char *contact[3] = {"smoothed_kappa\nerp = 0.2\n", "hard\n", "soft\n"};
  for (int c = 0; c < 3; c++) {
    char text[2048];
    snprintf(text, sizeof text,
             "[run]\nname = planar\nnum_envs = 4\niterations = 3\nthreads = 1\nout_dir = %s/runs\n"
             "[model]\npath = %s\n[sim]\nactuation = pd\n[contact]\nplugin = %s[estimator]\nplugin = autodiff\n"
             "[learner]\nplugin = shac\nhorizon = 16\nactor_layers = 8\ncritic_layers = 8\n[task]\nplugin = locomotion\n",
             tmpdir, "models/biped2d.xml", contact[c]);
    const char *p = write_ini("planar.ini", text);
    CU_ASSERT_EQUAL(run_err("train %s", p), 0);
    if (strstr(out, "NaN") || strstr(out, "non-finite")) fprintf(stderr, "planar model, contact %s%s\n", contact[c], out);
    CU_ASSERT_PTR_NULL(strstr(out, "NaN"));
    CU_ASSERT_PTR_NULL(strstr(out, "non-finite"));
  }
}

/* bcg bench --train: seconds per iteration split into physics forward and
 * adjoint, networks, task, estimator and the rest; the parts are disjoint
 * (none negative) and add up to the total; the temporary run is removed. */
static double bench_row(const char *name) {
  char key[64];
  snprintf(key, sizeof key, "\n%s ", name);
  const char *l = strstr(out, key);
  if (!l) return NAN;
  l += strlen(key);
  while (*l == ' ') l++;
  return atof(l);
}

static void test_bench_train(void) {
  setup();
  char text[2048], tdir[PATH_MAX], cmd[PATH_MAX + 64];
  snprintf(text, sizeof text, pend_ini, "bench", 4, 1000, tmpdir, "");
  const char *p = write_ini("bench.ini", text);
  snprintf(tdir, sizeof tdir, "%s/benchtmp", tmpdir);
  CU_ASSERT_EQUAL_FATAL(mkdir(tdir, 0755), 0);
  setenv("TMPDIR", tdir, 1);
  int rc = run_out("bench --train %s --iterations 2 learner.horizon=4", p);
  unsetenv("TMPDIR");
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "machine: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "commit: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "threads: 1 (OpenMP)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "iterations: 2 measured after 1 warm-up"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "samples/s"));
  static const char *parts[] = {"physics forward", "physics adjoint", "networks", "task", "estimator", "the rest"};
  double sum = 0, total = bench_row("total");
  CU_ASSERT(total > 0);
  for (int k = 0; k < 6; k++) {
    double v = bench_row(parts[k]);
    CU_ASSERT(isfinite(v));
    CU_ASSERT(v >= -2e-6); /* printed to 1e-6 */
    sum += v;
  }
  CU_ASSERT(fabs(sum - total) <= 5e-6 + 1e-6 * total);
  CU_ASSERT(bench_row("physics forward") > 0 && bench_row("physics adjoint") > 0 && bench_row("networks") > 0);
  /* the BLAS kernels in use are printed; never OpenBLAS's generic Prescott
   * ones on a CPU with AVX2 and FMA unless the user asked for them */
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "OpenBLAS 1; OpenBLAS "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "; ELU: ")); /* and how the activations are computed */
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    CU_ASSERT_PTR_NULL(strstr(out, "OpenBLAS Prescott kernels"));
  /* OPENBLAS_CORETYPE set by the user is kept */
  setenv("TMPDIR", tdir, 1);
  setenv("OPENBLAS_CORETYPE", "Prescott", 1);
  rc = run_out("bench --train %s --iterations 1 learner.horizon=4", p);
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv("TMPDIR");
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "OpenBLAS Prescott kernels; ELU: "));
  /* nothing left of the temporary run */
  snprintf(cmd, sizeof cmd, "rmdir %s", tdir);
  CU_ASSERT_EQUAL(system(cmd), 0);
  /* usage */
  CU_ASSERT_EQUAL(run_err("bench --train"), 2);
  CU_ASSERT_EQUAL(run_err("bench --train %s --iterations 0", p), 2);
  /* --train RUN_DIR: a copy of the run resumed from its latest checkpoint;
   * the run directory is left exactly as it was */
  snprintf(text, sizeof text, pend_ini, "benchrun", 4, 3, tmpdir, "");
  p = write_ini("benchrun.ini", text);
  CU_ASSERT_EQUAL_FATAL(run("train %s", p), 0);
  char dir[PATH_MAX], rd[PATH_MAX], want[PATH_MAX + 64], before[4096], after[4096];
  snprintf(dir, sizeof dir, "%s/runs/benchrun", tmpdir);
  CU_ASSERT_EQUAL_FATAL(first_run(dir, rd, sizeof rd), 0);
  snprintf(cmd, sizeof cmd, "cd %s && ls -lR --time-style=full-iso . | md5sum", rd);
  FILE *f = popen(cmd, "r");
  CU_ASSERT_FATAL(f && fgets(before, sizeof before, f));
  pclose(f);
  CU_ASSERT_EQUAL(mkdir(tdir, 0755), 0);
  setenv("TMPDIR", tdir, 1);
  rc = run_out("bench --train %s --iterations 2 run.threads=1", rd);
  unsetenv("TMPDIR");
  CU_ASSERT_EQUAL(rc, 0);
  snprintf(want, sizeof want, "resumed: %s at iteration 3 ", rd);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "iterations: 2 measured after 1 warm-up"));
  CU_ASSERT(bench_row("total") > 0);
  f = popen(cmd, "r");
  CU_ASSERT_FATAL(f && fgets(after, sizeof after, f));
  pclose(f);
  CU_ASSERT_STRING_EQUAL(before, after);
  snprintf(cmd, sizeof cmd, "rmdir %s", tdir); /* nothing left of the copy */
  CU_ASSERT_EQUAL(system(cmd), 0);
  /* only the keys a resume may change, and the placement keys of a measurement */
  CU_ASSERT_EQUAL(run_err("bench --train %s run.num_envs=2", rd), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "'run.num_envs' cannot change when resuming a run"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "and for a measurement run.sim_min_batch, run.nn_min_batch, run.flush_denormals"));
  rc = run_out("bench --train %s --iterations 1 run.threads=1 run.sim_min_batch=1 run.nn_min_batch=1 "
               "run.flush_denormals=true",
               rd);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "subnormals flushed to zero ([run] flush_denormals = true)"));
  /* SHAC's critics beside the backward pass: no change of results, so a resume may switch it */
  rc = run_out("bench --train %s --iterations 1 run.threads=1 learner.critic_overlap=true", rd);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT(bench_row("networks beside") > 0);
  rc = run_out("bench --train %s --iterations 1 run.threads=1 learner.critic_overlap=false", rd);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_PTR_NULL(strstr(out, "networks beside"));
  /* the key's own range still holds */
  CU_ASSERT_EQUAL(run_err("bench --train %s run.sim_min_batch=0", rd), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[run] sim_min_batch: 0 is out of range"));
  /* a directory that is not a run */
  CU_ASSERT_EQUAL(run_err("bench --train %s", tdir), 1);
}

/* A checkpoint copied out of its run directory: the message names the
 * checkpoint and the missing config (was "../config.ini: cannot open"). */
static void test_checkpoint_elsewhere(void) {
  setup();
  char dir[PATH_MAX], rd[PATH_MAX], cmd[3 * PATH_MAX], ck[PATH_MAX + 64], want[3 * PATH_MAX];
  snprintf(dir, sizeof dir, "%s/runs/paths", tmpdir);
  CU_ASSERT_EQUAL_FATAL(first_run(dir, rd, sizeof rd), 0);
  snprintf(cmd, sizeof cmd, "mkdir -p %s/loose && cp %s/checkpoints/ckpt_000000001.h5 %s/loose/", tmpdir, rd, tmpdir);
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  snprintf(ck, sizeof ck, "%s/loose/ckpt_000000001.h5", tmpdir);
  CU_ASSERT_EQUAL(run_err("eval %s", ck), 1);
  snprintf(want, sizeof want,
           "bcg: error: %s: a checkpoint outside its run directory: its configuration %s/loose/../config.ini is "
           "missing",
           ck, tmpdir);
  if (strncmp(out, want, strlen(want))) printf("\n  got:  %s  want: %s\n", out, want);
  CU_ASSERT_EQUAL(strncmp(out, want, strlen(want)), 0);
}

/* A checkpoint with a flipped bit is refused by eval with the reason, and
 * --resume falls back to the newest intact one and says so. */
static void test_damaged_checkpoint(void) {
  setup();
  char dir[PATH_MAX], rd[PATH_MAX], ck[PATH_MAX + 64], want[2 * PATH_MAX];
  snprintf(dir, sizeof dir, "%s/runs/paths", tmpdir);
  CU_ASSERT_EQUAL_FATAL(first_run(dir, rd, sizeof rd), 0);
  snprintf(ck, sizeof ck, "%s/checkpoints/ckpt_000000002.h5", rd);
  hid_t f = H5Fopen(ck, H5F_ACC_RDONLY, H5P_DEFAULT);
  CU_ASSERT_FATAL(f >= 0);
  hid_t d = H5Dopen2(f, "learner/actor/params", H5P_DEFAULT);
  haddr_t off = d >= 0 ? H5Dget_offset(d) : HADDR_UNDEF;
  if (d >= 0) H5Dclose(d);
  H5Fclose(f);
  CU_ASSERT_FATAL(off != HADDR_UNDEF);
  FILE *fp = fopen(ck, "r+b");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  fseek(fp, (long)off + 13, SEEK_SET);
  int c = fgetc(fp);
  fseek(fp, (long)off + 13, SEEK_SET);
  fputc(c ^ 0x04, fp);
  fclose(fp);
  CU_ASSERT_EQUAL(run_err("eval %s --runs 2 --seconds 0.2 --out - eval.fall_height=0", rd), 1);
  snprintf(want, sizeof want, "checkpoint %s: damaged: the CRC-32 of its ", ck);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  CU_ASSERT_EQUAL(run_err("train --resume %s run.iterations=3", rd), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  snprintf(want, sizeof want, "bcg: warning: resuming from %s/checkpoints/ckpt_000000001.h5, the newest intact checkpoint",
           rd);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  /* the resumed run ends with an intact checkpoint 3, the latest */
  CU_ASSERT_EQUAL(run_err("eval %s --runs 2 --seconds 0.2 --out - eval.fall_height=0", rd), 0);
}

/* the checkpoint iterations of a run directory as "1 2 3" */
static const char *ckpts_of(const char *rd) {
  static char buf[512];
  int64_t *its;
  size_t n;
  buf[0] = 0;
  if (bcg_train_checkpoints(rd, &its, &n)) return "(none)";
  for (size_t i = 0; i < n; i++)
    snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%lld", i ? " " : "", (long long)its[i]);
  free(its);
  return buf;
}

/* Checkpoint rotation ([run] keep_last, keep_every). A run of 12 iterations
 * with a checkpoint every iteration keeps all 12 with keep_last = 0; with
 * keep_last = 3 and keep_every = 5 a run stopped at 7 keeps 5 6 7 (stopped
 * by [run] samples: [run] iterations sets the learning-rate schedule). Its
 * resume skips a damaged newer checkpoint 9 (what a crashed session can
 * leave behind) and leaves it alone while rotating (5 6 7 8 9), the next
 * resume replaces it and ends with 5 10 11 12; those checkpoints and log.h5
 * equal the uninterrupted run's bit for bit (wall-clock time aside). */
static void test_checkpoint_rotation(void) {
  setup();
  char text[2048], dir[PATH_MAX], ref[PATH_MAX], rd[PATH_MAX], bad[PATH_MAX + 64];
  snprintf(text, sizeof text, pend_ini, "rot", 4, 12, tmpdir, "");
  const char *p = write_ini("rot.ini", text);
  CU_ASSERT_EQUAL_FATAL(run("train %s run.name=rot_all run.checkpoint_every=1 run.keep_last=0", p), 0);
  snprintf(dir, sizeof dir, "%s/runs/rot_all", tmpdir);
  CU_ASSERT_EQUAL_FATAL(first_run(dir, ref, sizeof ref), 0);
  CU_ASSERT_STRING_EQUAL(ckpts_of(ref), "1 2 3 4 5 6 7 8 9 10 11 12");
  const char *fin = strstr(out, "bcg: train: finished after 12 iterations, ");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fin);
  const long per_it = atol(fin + strlen("bcg: train: finished after 12 iterations, ")) / 12; /* samples */
  CU_ASSERT_FATAL(per_it > 0);

  CU_ASSERT_EQUAL_FATAL(
      run("train %s run.name=rot run.samples=%ld run.checkpoint_every=1 run.keep_last=3 run.keep_every=5", p,
          7 * per_it),
      0);
  snprintf(dir, sizeof dir, "%s/runs/rot", tmpdir);
  CU_ASSERT_EQUAL_FATAL(first_run(dir, rd, sizeof rd), 0);
  CU_ASSERT_STRING_EQUAL(ckpts_of(rd), "5 6 7");
  bcg_train_checkpoint_path(rd, 9, bad, sizeof bad);
  FILE *f = fopen(bad, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("not a checkpoint\n", f);
  fclose(f);
  CU_ASSERT_EQUAL(run_err("train --resume %s run.samples=%ld run.keep_every=5", rd, 8 * per_it), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "ckpt_000000007.h5, the newest intact checkpoint"));
  CU_ASSERT_STRING_EQUAL(ckpts_of(rd), "5 6 7 8 9");
  CU_ASSERT_EQUAL(run("train --resume %s run.samples=0", rd), 0);
  CU_ASSERT_STRING_EQUAL(ckpts_of(rd), "5 10 11 12");

  static const int its[] = {5, 10, 11, 12};
  for (int i = 0; i < 4; i++) {
    char a[PATH_MAX + 64], b[PATH_MAX + 64];
    bcg_train_checkpoint_path(ref, its[i], a, sizeof a);
    bcg_train_checkpoint_path(rd, its[i], b, sizeof b);
    int n = 0;
    CU_ASSERT_EQUAL(h5same(a, b, h5same_skip_ckpt, "rotation", &n), 0);
    CU_ASSERT(n >= 10);
  }
  char la[PATH_MAX + 16], lb[PATH_MAX + 16];
  snprintf(la, sizeof la, "%s/log.h5", ref);
  snprintf(lb, sizeof lb, "%s/log.h5", rd);
  int n = 0;
  CU_ASSERT_EQUAL(h5same(la, lb, h5same_skip_log, "rotation", &n), 0);
  CU_ASSERT(n >= 10);
}

BCG_TESTS({"basics and usage errors", test_basics}, {"report", test_report}, {"report groups", test_report_groups}, {"report --paper", test_report_paper},
          {"report --plots", test_report_plots},
          {"plugins", test_plugins}, {"truncated plugin", test_truncated_plugin},
          {"sweep zip of unequal lengths", test_sweep_zip_lengths}, {"describe", test_describe}, {"check", test_check}, {"check compiles the model", test_check_model}, {"train", test_train},
          {"sweep, eval, gradstats", test_sweep_eval_gradstats}, {"sweep --jobs, stopped and resumed", test_sweep_jobs},
          {"the shipped policy stands (make demo)", test_shipped_policy}, {"run paths absolute", test_run_paths},
          {"select-best without a reference", test_select_best_locomotion},
          {"SIGTERM checkpoints", test_sigterm}, {"NaN warning", test_nan_warning}, {"planar model", test_planar_model}, {"bench --train", test_bench_train},
          {"checkpoint outside its run", test_checkpoint_elsewhere}, {"damaged checkpoint", test_damaged_checkpoint},
          {"checkpoint rotation", test_checkpoint_rotation}, {"old-ABI plugin", test_old_abi_plugin});
BCG_RUN("cli")
