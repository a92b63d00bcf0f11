/* test_learners - the training loop and the SHAC and PPO learners on the
 * pendulum of tests/models/pendulum.xml (tests/plugins/learn_task.c) with the
 * exact test estimator (tests/plugins/test_exact_estimator.c):
 *   short learning checks (clear improvement over the initial policy),
 *   bit-identical resume (SHAC and PPO), NaN injection, checkpoint contents,
 *   the track_err curve (imitation on humanoid.xml: present and finite; the
 *   pendulum: absent), budgets by samples and seconds, a resumed run's log.h5, and SIGINT
 *   through the bcg binary (checkpoint written, exit status 0). */
#include <errno.h>
#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/env.h"
#include "bcg/loader.h"
#include "bcg/runlog.h"
#include "bcg/sim.h"
#include "bcg/sim_cuda.h"
#include "bcg/train.h"
#include "testutil.h"

static char tmpdir[256];
static bcg_registry *reg;

static void setup(void) {
  if (reg) return;
  snprintf(tmpdir, sizeof tmpdir, "%s", bcg_test_tmpdir()); /* removed at exit */
  reg = bcg_registry_new();
  const char *b = bcg_test_build_dir();
  const char *files[] = {"plugins/shac.so",         "plugins/ppo.so",       "tests/plugins/learn_task.so",
                         "tests/plugins/test_exact_estimator.so", "plugins/imitation.so", "plugins/autodiff.so",
                         "plugins/smoothed_kappa.so", "plugins/bcg.so"};
  for (int i = 0; i < 8; i++) {
    char p[PATH_MAX], e[1024];
    snprintf(p, sizeof p, "%s/%s", b, files[i]);
    if (bcg_registry_load_file(reg, p, e, sizeof e)) fprintf(stderr, "%s\n", e);
  }
}

/* the small configurations: few envs, small networks, one thread */
static const char *write_ini(const char *name, const char *learner, const char *extra) {
  static char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s.ini", tmpdir, name);
  FILE *f = fopen(path, "w");
  if (!f) abort();
  fprintf(f,
          "[run]\nname = %s\nseed = 3\nnum_envs = 16\nthreads = 1\niterations = 8\ncheckpoint_every = 0\n"
          "out_dir = %s/runs\n[model]\npath = tests/models/pendulum.xml\n[estimator]\nplugin = "
          "test_exact_estimator\n",
          name, tmpdir);
  if (!strcmp(learner, "shac"))
    fprintf(f, "[learner]\nplugin = shac\nhorizon = 16\nactor_layers = 32,32\ncritic_layers = 32,32\n"
               "critic_iterations = 4\n");
  else
    fprintf(f, "[learner]\nplugin = ppo\nsteps_per_env = 16\nactor_layers = 32,32\ncritic_layers = 32,32\n");
  fprintf(f, "[task]\nplugin = learn_task\n%s", extra ? extra : "");
  fclose(f);
  return path;
}

/* domain randomisation for the pendulum, appended after the task's keys: it
 * has no contact and no free root, so masses and com offsets are what
 * changes (friction is drawn, unused; pushes need a free root) */
#define DR_INI "[sim]\ndr_mass_scale = 0.3\ndr_com_offset = 0.05\ndr_friction_min = 0.5\ndr_friction_max = 1.25\n"

static bcg_config *load(const char *path, int nov, char **ov) {
  bcg_config *cfg = NULL;
  char err[2048];
  if (bcg_config_load_with(&cfg, reg, path, nov, ov, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return NULL;
  }
  return cfg;
}

typedef struct counters {
  int nan_resets, skipped, iters;
  double first_return, best_return, last_return;
  int64_t stop_after; /* on_iteration stops here (0: never) */
  int sum_all;        /* accumulate every iteration's mean return */
  double sum_ret;
  int nret;
} counters;

static int on_it(void *ctx, int64_t it, uint64_t samples, double wall, const bcg_learner_stats *st) {
  counters *c = ctx;
  c->nan_resets += st->nan_resets;
  c->skipped += st->skipped_updates;
  c->iters++;
  if (!isnan(st->mean_return)) {
    if (isnan(c->first_return)) c->first_return = st->mean_return;
    if (isnan(c->best_return) || st->mean_return > c->best_return) c->best_return = st->mean_return;
    c->last_return = st->mean_return;
    if (c->sum_all) c->sum_ret += st->mean_return, c->nret++;
  }
  return c->stop_after > 0 && it >= c->stop_after;
}

/* train cfg in a fresh run directory (dir out) or resume dir */
static int train(const bcg_config *cfg, char *dir, int resume, counters *c, bcg_train_result *res) {
  char err[2048];
  if (!resume && bcg_rundir_create(tmpdir, "runs", dir, PATH_MAX, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return -1;
  }
  bcg_train_options opt;
  memset(&opt, 0, sizeof opt);
  opt.run_dir = dir;
  opt.resume = resume;
  opt.on_iteration = on_it;
  opt.ctx = c;
  c->first_return = c->best_return = c->last_return = NAN;
  int rc = bcg_train_run(cfg, &opt, res, err, sizeof err);
  if (rc) fprintf(stderr, "train: %s\n", err);
  return rc;
}

/* ---- HDF5 helpers ---- */

typedef struct dsets {
  char names[256][128];
  int n;
} dsets;

static herr_t list_cb(hid_t o, const char *name, const H5O_info_t *info, void *data) {
  dsets *d = data;
  if (info->type == H5O_TYPE_DATASET && d->n < 256) snprintf(d->names[d->n++], 128, "%s", name);
  return 0;
}

static void *read_raw(hid_t f, const char *name, size_t *bytes) {
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  if (d < 0) return NULL;
  hid_t t = H5Dget_type(d), sp = H5Dget_space(d);
  hssize_t n = H5Sget_simple_extent_npoints(sp);
  size_t sz = H5Tget_size(t) * (size_t)n;
  void *buf = malloc(sz ? sz : 1);
  if (n > 0) H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
  *bytes = sz;
  H5Sclose(sp);
  H5Tclose(t);
  H5Dclose(d);
  return buf;
}

/* every dataset under /learner of a and b, byte for byte; also /trainer's counters */
static int same_checkpoints(const char *a, const char *b, int *ndsets, int verbose) {
  hid_t fa = H5Fopen(a, H5F_ACC_RDONLY, H5P_DEFAULT), fb = H5Fopen(b, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (fa < 0 || fb < 0) return 0;
  hid_t ga = H5Gopen2(fa, "learner", H5P_DEFAULT);
  dsets d = {.n = 0};
  H5Ovisit(ga, H5_INDEX_NAME, H5_ITER_INC, list_cb, &d);
  H5Gclose(ga);
  int same = d.n > 0;
  for (int i = 0; i < d.n; i++) {
    char full[160];
    snprintf(full, sizeof full, "learner/%s", d.names[i]);
    size_t na = 0, nb = 0;
    void *x = read_raw(fa, full, &na), *y = read_raw(fb, full, &nb);
    if (!x || !y || na != nb || memcmp(x, y, na) != 0) {
      if (verbose) fprintf(stderr, "checkpoints differ in %s\n", full);
      same = 0;
    }
    free(x);
    free(y);
  }
  const char *tr[] = {"trainer/iteration", "trainer/samples"};
  for (int i = 0; i < 2; i++) {
    size_t na = 0, nb = 0;
    void *x = read_raw(fa, tr[i], &na), *y = read_raw(fb, tr[i], &nb);
    if (!x || !y || na != nb || memcmp(x, y, na) != 0) same = 0;
    free(x);
    free(y);
  }
  *ndsets = d.n;
  H5Fclose(fa);
  H5Fclose(fb);
  return same;
}

static long curve(const char *log, const char *name, double *v, size_t cap) {
  hid_t f = H5Fopen(log, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return -1;
  char e[512];
  long n = bcg_h5_read_doubles(f, name, v, cap, e, sizeof e);
  H5Fclose(f);
  return n;
}

/* ---- tests ---- */

/* mean return of an unlearned Gaussian policy (PPO with learning rate 0:
 * std 1 around the initial network's mean) */
static double baseline = NAN;

static double random_baseline(void) {
  if (!isnan(baseline)) return baseline;
  char *ov[] = {"run.iterations=20", "learner.lr=0", "learner.schedule=fixed"};
  bcg_config *cfg = load(write_ini("random", "ppo", NULL), 3, ov);
  if (!cfg) return NAN;
  char dir[PATH_MAX];
  counters c = {0};
  c.sum_all = 1;
  bcg_train_result res;
  if (train(cfg, dir, 0, &c, &res) == 0 && c.nret) baseline = c.sum_ret / c.nret;
  bcg_config_free(cfg);
  printf("\n  random policy: mean return %.2f", baseline);
  bcg_test_report("random policy return", baseline);
  return baseline;
}

static void learn(const char *learner, int iters, double need) {
  setup();
  double base = random_baseline();
  CU_ASSERT_FATAL(isfinite(base));
  char ov[64];
  snprintf(ov, sizeof ov, "run.iterations=%d", iters);
  char *ovp[] = {ov};
  bcg_config *cfg = load(write_ini(learner, learner, NULL), 1, ovp);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  char dir[PATH_MAX];
  counters c = {0};
  bcg_train_result res;
  CU_ASSERT_EQUAL_FATAL(train(cfg, dir, 0, &c, &res), 0);
  printf("\n  %s: first return %.2f, best %.2f, last %.2f after %llu samples, %.1f s\n", learner, c.first_return,
         c.best_return, c.last_return, (unsigned long long)res.samples, res.wall);
  char what[64];
  snprintf(what, sizeof what, "%s final return", learner);
  bcg_test_report(what, c.last_return);
  CU_ASSERT(c.last_return > need);
  CU_ASSERT(c.last_return > base + 40);
  CU_ASSERT_EQUAL(res.iterations, iters);
  CU_ASSERT_EQUAL(c.nan_resets, 0);
  CU_ASSERT_EQUAL(c.skipped, 0);
  bcg_config_free(cfg);
}

/* 16 envs; reward cos q - 0.01 u^2 - 0.01 a^2 per step, 100 steps: hanging
 * still is -100, balancing upright about 100; an unlearned Gaussian policy
 * returns about -85 (measured above), a policy that swings up and balances
 * 60-85. SHAC: horizon 16, 45 iterations (11.5k samples); PPO: 16 steps per
 * env, 90 iterations (23k samples). Each must end above 50. */
static void test_shac_learns(void) { learn("shac", 45, 50); }
static void test_ppo_learns(void) { learn("ppo", 90, 50); }

/* extra: more ini text after the task's keys (NULL: none); dr: domain
 * randomisation is on, and the checkpoints must hold its draw indices */
static void resume_identical(const char *learner, const char *extra, int dr) {
  setup();
  char name[64], ex[512];
  snprintf(name, sizeof name, "%s_resume%s", learner, dr ? "_dr" : "");
  snprintf(ex, sizeof ex, "episode_length = 40\n%s", extra ? extra : "");
  const char *ini = write_ini(name, learner, ex);
  /* uninterrupted: 8 iterations */
  bcg_config *full = load(ini, 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(full);
  char d1[PATH_MAX], d2[PATH_MAX];
  counters c = {0};
  bcg_train_result r1, r2, r3;
  CU_ASSERT_EQUAL_FATAL(train(full, d1, 0, &c, &r1), 0);
  CU_ASSERT_EQUAL(r1.iterations, 8);
  /* 4 iterations (budget by samples, the schedule still of 8), then resume to 8 */
  char ov[64];
  snprintf(ov, sizeof ov, "run.samples=%llu", (unsigned long long)(r1.samples / 2));
  char *ovp[] = {ov};
  bcg_config *half = load(ini, 1, ovp);
  CU_ASSERT_PTR_NOT_NULL_FATAL(half);
  CU_ASSERT_EQUAL_FATAL(train(half, d2, 0, &c, &r2), 0);
  CU_ASSERT_EQUAL(r2.iterations, 4);
  CU_ASSERT_EQUAL_FATAL(train(full, d2, 1, &c, &r3), 0);
  CU_ASSERT_EQUAL(r3.iterations, 8);
  CU_ASSERT_EQUAL(r3.samples, r1.samples);
  int n = 0;
  CU_ASSERT(same_checkpoints(r1.checkpoint, r3.checkpoint, &n, 1));
  CU_ASSERT(n >= 10);
  /* the interrupted half is not the end point (the comparison can fail) */
  CU_ASSERT(!same_checkpoints(r1.checkpoint, r2.checkpoint, &n, 0));
  if (dr) {
    /* the checkpoints hold the domain's draw indices and push clocks; by the
     * half-way checkpoint every environment has been re-drawn (episodes of
     * 40 steps), so a resume that restored draw 0 would have diverged */
    int64_t dw[16] = {0}, ck[16] = {0};
    hid_t f = H5Fopen(r2.checkpoint, H5F_ACC_RDONLY, H5P_DEFAULT);
    char e[256];
    CU_ASSERT_EQUAL(bcg_h5_read_i64(f, "learner/domain/draw", dw, 16, e, sizeof e), 16);
    CU_ASSERT_EQUAL(bcg_h5_read_i64(f, "learner/domain/clock", ck, 16, e, sizeof e), 16);
    H5Fclose(f);
    int redrawn = 0;
    for (int i = 0; i < 16; i++) redrawn += dw[i] > 0 && ck[i] > 0;
    CU_ASSERT_EQUAL(redrawn, 16);
  }
  /* the resumed log continues: 8 rows, iteration 0..7, samples increasing */
  char log[PATH_MAX + 16];
  snprintf(log, sizeof log, "%s/log.h5", d2);
  double it[64], sm[64], sm1[64], ret[64], ret1[64];
  CU_ASSERT_EQUAL(curve(log, "iteration", it, 64), 8);
  CU_ASSERT_EQUAL(curve(log, "samples", sm, 64), 8);
  for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(it[i], i);
  snprintf(log, sizeof log, "%s/log.h5", d1);
  CU_ASSERT_EQUAL(curve(log, "samples", sm1, 64), 8);
  CU_ASSERT_EQUAL(memcmp(sm, sm1, sizeof(double) * 8), 0);
  /* and its learning curve is the uninterrupted one */
  long n1 = curve(log, "mean_return", ret1, 64);
  snprintf(log, sizeof log, "%s/log.h5", d2);
  long n2 = curve(log, "mean_return", ret, 64);
  CU_ASSERT_EQUAL(n1, 8);
  CU_ASSERT_EQUAL(n2, 8);
  for (int i = 0; i < 8 && n1 == 8 && n2 == 8; i++)
    CU_ASSERT((isnan(ret[i]) && isnan(ret1[i])) || ret[i] == ret1[i]);
  hid_t f = H5Fopen(log, H5F_ACC_RDONLY, H5P_DEFAULT);
  CU_ASSERT(H5Aexists(f, "resumed_4") > 0);
  char s[256], e[256];
  int rr = bcg_h5_read_str(f, "learner_plugin", s, sizeof s, e, sizeof e);
  if (rr || strcmp(s, learner)) fprintf(stderr, "[%s] %s\n", s, e);
  CU_ASSERT_EQUAL(rr, 0);
  CU_ASSERT_STRING_EQUAL(s, learner);
  H5Fclose(f);
  bcg_config_free(full);
  bcg_config_free(half);
}

/* A resumed run rebuilds log.h5 from the old file's curves and attributes:
 * attributes read as one value that hold several (a damaged or edited log)
 * are skipped (found with the checkpoint fuzz harness's finding of the same
 * kind in core/runlog.c: a curve's first_iteration of 3 values was written
 * over the 8 bytes read into, a root string attribute of 2 values over its
 * buffer). */
static void test_resume_damaged_log(void) {
  setup();
  const char *ini = write_ini("damaged_log", "shac", "episode_length = 20\n");
  char *ov[] = {"run.iterations=2"};
  bcg_config *two = load(ini, 1, ov), *full = load(ini, 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(two);
  CU_ASSERT_PTR_NOT_NULL_FATAL(full);
  char d[PATH_MAX], log[PATH_MAX + 16];
  counters c = {0};
  bcg_train_result r;
  CU_ASSERT_EQUAL_FATAL(train(two, d, 0, &c, &r), 0);
  snprintf(log, sizeof log, "%s/log.h5", d);
  hid_t f = H5Fopen(log, H5F_ACC_RDWR, H5P_DEFAULT);
  CU_ASSERT_FATAL(f >= 0);
  hid_t ds = H5Dopen2(f, "mean_return", H5P_DEFAULT);
  CU_ASSERT_FATAL(ds >= 0);
  if (H5Aexists(ds, "first_iteration") > 0) H5Adelete(ds, "first_iteration");
  hsize_t three = 3, two_ = 2;
  hid_t sp = H5Screate_simple(1, &three, NULL);
  hid_t a = H5Acreate2(ds, "first_iteration", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
  int64_t fi[3] = {0, 7, 9};
  H5Awrite(a, H5T_NATIVE_INT64, fi);
  H5Aclose(a), H5Sclose(sp), H5Dclose(ds);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, 4);
  sp = H5Screate_simple(1, &two_, NULL);
  a = H5Acreate2(f, "extra", t, sp, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, t, "abcdefgh");
  H5Aclose(a), H5Sclose(sp), H5Tclose(t), H5Fclose(f);
  CU_ASSERT_EQUAL(train(full, d, 1, &c, &r), 0);
  CU_ASSERT_EQUAL(r.iterations, 8);
  double ret[64];
  CU_ASSERT_EQUAL(curve(log, "mean_return", ret, 64), 8);
  bcg_config_free(two);
  bcg_config_free(full);
}

/* ---- SHAC's policy gradient vs central FD of its actor loss ----
 * Short episodes (5 steps: three resets inside the 16-step horizon), a
 * per-episode target angle in the task clock's phase and an action-rate
 * penalty: the gradient is exact only if every reward/observation VJP of a
 * step reads the clock of that step (not the clock of the episode that
 * replaced it) and the reward's prev-action adjoint reaches a_{t-1} (cut at
 * resets). The gradient of iteration 2 is recovered from the Adam moments
 * (actor_lr = 0 leaves the parameters alone: m2 = b1 m1 + (1 - b1) g); the
 * loss at perturbed parameters is iteration 2's actor_loss resumed from the
 * same checkpoint with the parameters written into it. */
static int rw_dset(const char *file, const char *name, double *x, size_t n, int write) {
  hid_t f = H5Fopen(file, write ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return -1;
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  int rc = -1;
  if (d >= 0) {
    hid_t sp = H5Dget_space(d);
    if ((size_t)H5Sget_simple_extent_npoints(sp) == n)
      rc = (write ? H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, x)
                  : H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, x)) < 0
               ? -1
               : 0;
    H5Sclose(sp);
    H5Dclose(d);
  }
  H5Fclose(f);
  char e[512];
  if (write && rc == 0 && bcg_checkpoint_seal(file, e, sizeof e)) { /* edited on purpose: a new checksum */
    fprintf(stderr, "%s\n", e);
    rc = -1;
  }
  return rc;
}

/* the whole dataset NAME of FILE (malloc'd) and its length in *n; NULL when
 * the file or the dataset cannot be read */
static double *read_dset(const char *file, const char *name, long *n) {
  hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return NULL;
  *n = bcg_h5_length(f, name);
  H5Fclose(f);
  double *x = *n > 0 ? malloc(sizeof(double) * (size_t)*n) : NULL;
  if (x && rw_dset(file, name, x, (size_t)*n, 0)) free(x), x = NULL;
  return x;
}

/* resume dir (latest checkpoint ckpt1) for one iteration with the actor's
 * parameters th written into ckpt1; returns that iteration's actor loss and
 * removes the checkpoint it wrote (ckpt2), so that ckpt1 is the latest again */
static double loss_at(const bcg_config *cfg, char *dir, const char *ckpt1, const char *ckpt2, double *th,
                      size_t np, double *m2) {
  counters c = {0};
  bcg_train_result r;
  if (rw_dset(ckpt1, "learner/actor/params", th, np, 1)) return NAN;
  if (train(cfg, dir, 1, &c, &r) || r.iterations != 2) return NAN;
  if (m2 && rw_dset(ckpt2, "learner/actor/adam/m", m2, np, 0)) return NAN;
  unlink(ckpt2);
  return r.last.actor_loss;
}

static void shac_gradient_case(const char *name, const char *extra, const char *label) {
  setup();
  char ex[512];
  snprintf(ex, sizeof ex, "episode_length = 5\nrate_cost = 0.3\ntarget_angle = 1.5\n%s", extra ? extra : "");
  const char *ini = write_ini(name, "shac", ex);
  char *ov[] = {"run.iterations=2", "learner.actor_lr=0", "learner.lr_schedule=constant",
                "learner.actor_grad_clip=1e30", "run.checkpoint_every=1"};
  bcg_config *cfg = load(ini, 5, ov);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  char dir[PATH_MAX], ck1[PATH_MAX + 64], ck2[PATH_MAX + 64];
  counters c = {0};
  c.stop_after = 1;
  bcg_train_result r;
  CU_ASSERT_EQUAL_FATAL(train(cfg, dir, 0, &c, &r), 0);
  CU_ASSERT_EQUAL_FATAL(r.iterations, 1);
  snprintf(ck1, sizeof ck1, "%s/checkpoints/ckpt_000000001.h5", dir);
  snprintf(ck2, sizeof ck2, "%s/checkpoints/ckpt_000000002.h5", dir);
  hid_t f = H5Fopen(ck1, H5F_ACC_RDONLY, H5P_DEFAULT);
  CU_ASSERT_FATAL(f >= 0);
  if (extra) { /* DR: every environment was re-drawn at the end of iteration 1 */
    int64_t dw[16] = {0};
    char e[256];
    CU_ASSERT_EQUAL(bcg_h5_read_i64(f, "learner/domain/draw", dw, 16, e, sizeof e), 16);
    int redrawn = 0;
    for (int i = 0; i < 16; i++) redrawn += dw[i] > 0;
    CU_ASSERT_EQUAL(redrawn, 16);
  }
  long np = bcg_h5_length(f, "learner/actor/params");
  H5Fclose(f);
  CU_ASSERT_FATAL(np > 10);
  double *th = malloc(sizeof(double) * np), *tp = malloc(sizeof(double) * np), *d = malloc(sizeof(double) * np);
  double *m1 = malloc(sizeof(double) * np), *m2 = malloc(sizeof(double) * np);
  CU_ASSERT_EQUAL_FATAL(rw_dset(ck1, "learner/actor/params", th, np, 0), 0);
  CU_ASSERT_EQUAL_FATAL(rw_dset(ck1, "learner/actor/adam/m", m1, np, 0), 0);
  double l0 = loss_at(cfg, dir, ck1, ck2, th, np, m2);
  CU_ASSERT_FATAL(isfinite(l0));
  /* the same loss again: the resumed iteration is deterministic */
  CU_ASSERT(loss_at(cfg, dir, ck1, ck2, th, np, NULL) == l0);
  double gn = 0, dn = 0;
  unsigned long long st = 0x2545F4914F6CDD1Dull;
  for (long i = 0; i < np; i++) {
    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
    d[i] = (double)(st >> 11) / 9007199254740992.0 - 0.5;
    dn += d[i] * d[i];
  }
  double gd = 0;
  for (long i = 0; i < np; i++) {
    d[i] /= sqrt(dn);
    double g = (m2[i] - 0.7 * m1[i]) / 0.3; /* beta1 = 0.7 */
    gd += g * d[i];
    gn += g * g;
  }
  double h = 1e-5;
  for (long i = 0; i < np; i++) tp[i] = th[i] + h * d[i];
  double lp = loss_at(cfg, dir, ck1, ck2, tp, np, NULL);
  for (long i = 0; i < np; i++) tp[i] = th[i] - h * d[i];
  double lm = loss_at(cfg, dir, ck1, ck2, tp, np, NULL);
  double fd = (lp - lm) / (2 * h), rel = fabs(fd - gd) / fmax(fabs(fd), 1e-12);
  printf("\n  SHAC gradient . d = %.10g, FD %.10g (|g| %.4g)\n", gd, fd, sqrt(gn));
  bcg_test_report(label, rel);
  CU_ASSERT(fabs(gd) > 1e-6);
  CU_ASSERT(rel < 1e-5);
  free(th), free(tp), free(d), free(m1), free(m2);
  bcg_config_free(cfg);
}

static void test_shac_gradient(void) {
  shac_gradient_case("shac_grad", NULL,
                     "SHAC policy gradient vs FD of the actor loss, resets + clock phase + action rate (rel)");
}

/* The same with domain randomisation (masses, com offsets): three resets
 * inside each 16-step horizon, and the environments reset in iteration 1 got
 * their new draws at its end (checked in the checkpoint). The gradient
 * matches FD only if the backward of the steps before a reset reads the model
 * they were taken with, i.e. the re-draw waits for the horizon boundary, and
 * if the resumed iteration restores every environment's draw. */
static void test_shac_gradient_dr(void) {
  shac_gradient_case("shac_grad_dr", DR_INI,
                     "SHAC policy gradient vs FD of the actor loss with DR re-drawn at resets (rel)");
}

/* ---- re-draws at resets ----
 * Episodes of 5 steps: in two iterations every environment is reset several
 * times, and each reset re-draws its masses, com offsets and friction from
 * (seed, env, the reset's draw index) (SHAC at the horizon boundary, PPO at
 * the reset). Two sessions of one configuration agree bit for bit, another
 * seed differs, and every environment's model differs from its creation
 * draw. */
static void dr_redraw_case(const char *learner) {
  setup();
  char name[64], err[2048];
  snprintf(name, sizeof name, "%s_redraw", learner);
  const char *ini = write_ini(name, learner, "episode_length = 5\n" DR_INI);
  char *ov[] = {"run.seed=4"};
  bcg_config *cfg = load(ini, 0, NULL), *cfg2 = load(ini, 1, ov);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg2);
  bcg_session S[3];
  memset(S, 0, sizeof S);
  int ok = 1;
  for (int k = 0; k < 3 && ok; k++) {
    ok = bcg_session_open(&S[k], k < 2 ? cfg : cfg2, err, sizeof err) == 0;
    if (!ok) fprintf(stderr, "session: %s\n", err);
  }
  CU_ASSERT_FATAL(ok);
  const bcg_domain *d = S[0].env->dom, *d1 = S[1].env->dom, *d2 = S[2].env->dom;
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d->m);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d->mu);
  int N = d->n;
  size_t ms = sizeof(bcg_mdata);
  bcg_mdata *m0 = malloc(ms * (size_t)N);
  bcg_real *mu0 = malloc(sizeof(bcg_real) * (size_t)N);
  memcpy(m0, d->m, ms * (size_t)N);
  memcpy(mu0, d->mu, sizeof(bcg_real) * (size_t)N);
  for (int it = 0; it < 2; it++)
    for (int k = 0; k < 3; k++) {
      bcg_learner_stats st;
      S[k].tr.iteration = it;
      CU_ASSERT_EQUAL_FATAL(S[k].lops->iterate(S[k].learner, &st), 0);
    }
  int redrawn = 0, same_seed = 1, other_seed = 0;
  for (int e = 0; e < N; e++) {
    redrawn += d->draw[e] > 0 && memcmp(&m0[e], &d->m[e], ms) != 0 && mu0[e] != d->mu[e] &&
               d->m[e].body_mass[1] != m0[e].body_mass[1];
    same_seed &= d->draw[e] == d1->draw[e] && memcmp(&d->m[e], &d1->m[e], ms) == 0 && d->mu[e] == d1->mu[e];
    other_seed += memcmp(&d->m[e], &d2->m[e], ms) != 0;
  }
  printf("\n  %s: %d of %d environments re-drawn (env 0: draw %llu, mass %.4f -> %.4f)", learner, redrawn, N,
         (unsigned long long)d->draw[0], (double)m0[0].body_mass[1], (double)d->m[0].body_mass[1]);
  CU_ASSERT_EQUAL(redrawn, N);
  CU_ASSERT(same_seed);
  CU_ASSERT_EQUAL(other_seed, N);
  free(m0);
  free(mu0);
  for (int k = 0; k < 3; k++) bcg_session_close(&S[k]);
  bcg_config_free(cfg);
  bcg_config_free(cfg2);
}

/* SHAC trains the critics of its ensemble side by side, one OpenMP thread
 * per critic (learners/shac.c critic_update): the critics after two
 * iterations (actor frozen, so the rollouts do not depend on the thread
 * count) and the reported critic loss are bit-identical with 1, 2, 3 and 6
 * threads (6: two per critic, nested regions; these GEMMs are too small to
 * be split), in consecutive and in shuffled minibatches. */
static void test_shac_critics_threads(void) {
  setup();
  const char *ini = write_ini("critic_threads", "shac", "episode_length = 5\n");
  for (int shuffle = 0; shuffle < 2; shuffle++) {
    double *ref[3] = {NULL, NULL, NULL}, loss_ref = NAN;
    long np = 0;
    const int thrs[4] = {1, 2, 3, 6};
    for (int ti = 0; ti < 4; ti++) {
      int thr = thrs[ti];
      char t[32], sh[48];
      snprintf(t, sizeof t, "run.threads=%d", thr);
      snprintf(sh, sizeof sh, "learner.critic_shuffle=%s", shuffle ? "true" : "false");
      char *ov[] = {"run.iterations=2", "learner.actor_lr=0", "learner.critics=3", t, sh};
      bcg_config *cfg = load(ini, 5, ov);
      CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
      char dir[PATH_MAX], ck[PATH_MAX + 64];
      counters c = {0};
      bcg_train_result r;
      CU_ASSERT_EQUAL_FATAL(train(cfg, dir, 0, &c, &r), 0);
      CU_ASSERT_EQUAL(r.iterations, 2);
      CU_ASSERT(isfinite(r.last.critic_loss));
      snprintf(ck, sizeof ck, "%s/checkpoints/ckpt_000000002.h5", dir);
      for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "learner/critic%d/params", k);
        long nk = 0;
        double *x = read_dset(ck, name, &nk);
        CU_ASSERT_PTR_NOT_NULL_FATAL(x);
        if (!np) np = nk;
        CU_ASSERT_FATAL(np > 10 && nk == np);
        if (thr == 1) {
          ref[k] = x;
        } else {
          CU_ASSERT(memcmp(x, ref[k], sizeof(double) * np) == 0);
          free(x);
        }
      }
      if (thr == 1) {
        loss_ref = r.last.critic_loss;
        CU_ASSERT(memcmp(ref[0], ref[1], sizeof(double) * np) != 0); /* the critics differ */
      } else {
        CU_ASSERT(r.last.critic_loss == loss_ref);
      }
      bcg_config_free(cfg);
    }
    for (int k = 0; k < 3; k++) free(ref[k]);
  }
}

/* SHAC's critics train on a thread of their own during the backward pass
 * ([learner] critic_overlap = true; auto does so with the minibatches on the
 * GPU): after three learning iterations the actor, every critic, its Adam
 * moments and its target, and the logged losses and gradient norms are bit
 * for bit those of the sequential update, with 1 and 2 OpenMP threads and an
 * ensemble of 3 (side by side inside the thread with 2). The critics' time
 * goes to its own clock (time_nn_beside), and only with the overlap. Where a
 * GPU is found the same again with every network batch on it (run.device =
 * cuda, nn_min_batch 1): the two threads' calls then share the device. */
static void test_shac_critic_overlap(void) {
  setup();
  const char *ini = write_ini("critic_overlap", "shac", "episode_length = 5\n");
  char why[512] = "";
  const int gpu = bcg_cuda_available(why, sizeof why);
  if (!gpu) printf("\n  (no GPU: %s; the CPU networks only)", why);
  static const char *dsets[] = {"learner/actor/params", "learner/actor/adam/m", "learner/critic0/params",
                                "learner/critic1/params", "learner/critic2/params", "learner/critic2/adam/v",
                                "learner/target_critic0/params", "learner/target_critic2/params"};
  static const char *curves[] = {"critic_loss", "actor_loss", "grad_norm", "mean_return", "skipped_updates"};
  enum { ND = sizeof dsets / sizeof dsets[0], NC = sizeof curves / sizeof curves[0] };
  for (int run = 0; run < 2 * (1 + gpu); run++) {
    const int dev = run / 2, thr = 1 + run % 2; /* CPU then GPU networks, 1 and 2 threads */
    double *ref[ND] = {0}, cref[NC][8];
    long nref[ND] = {0};
    for (int ov_on = 0; ov_on < 2; ov_on++) {
      char t[32], o[48];
      snprintf(t, sizeof t, "run.threads=%d", thr);
      snprintf(o, sizeof o, "learner.critic_overlap=%s", ov_on ? "true" : "false");
      char *ov[] = {"run.iterations=3", "learner.critics=3", t, o, "run.device=cuda", "run.nn_min_batch=1"};
      bcg_config *cfg = load(ini, dev ? 6 : 4, ov);
      CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
      char dir[PATH_MAX], ck[PATH_MAX + 64], log[PATH_MAX + 16];
      counters c = {0};
      bcg_train_result r;
      CU_ASSERT_EQUAL_FATAL(train(cfg, dir, 0, &c, &r), 0);
      CU_ASSERT_EQUAL(r.iterations, 3);
      snprintf(ck, sizeof ck, "%s/checkpoints/ckpt_000000003.h5", dir);
      snprintf(log, sizeof log, "%s/log.h5", dir);
      for (int i = 0; i < ND; i++) {
        long n = 0;
        double *x = read_dset(ck, dsets[i], &n);
        CU_ASSERT_PTR_NOT_NULL_FATAL(x);
        CU_ASSERT_FATAL(n > 2);
        if (!ov_on) {
          ref[i] = x, nref[i] = n;
        } else {
          CU_ASSERT(n == nref[i] && memcmp(x, ref[i], sizeof(double) * n) == 0);
          free(x);
        }
      }
      for (int i = 0; i < NC; i++) {
        double v[8];
        CU_ASSERT_EQUAL_FATAL(curve(log, curves[i], v, 8), 3);
        for (int j = 0; j < 3; j++) {
          if (!ov_on)
            cref[i][j] = v[j];
          else
            CU_ASSERT(memcmp(&v[j], &cref[i][j], sizeof(double)) == 0);
        }
      }
      double b[8], nn[8];
      CU_ASSERT_EQUAL(curve(log, "time_nn_beside", b, 8), 3);
      CU_ASSERT_EQUAL(curve(log, "time_nn", nn, 8), 3);
      for (int j = 0; j < 3; j++) {
        CU_ASSERT(ov_on ? b[j] > 0 : b[j] == 0);
        CU_ASSERT(nn[j] > 0); /* the rollout's and the backward pass's networks stay on the main clock */
      }
      bcg_config_free(cfg);
    }
    CU_ASSERT(memcmp(ref[0], ref[2], sizeof(double) * (nref[0] < nref[2] ? nref[0] : nref[2])) != 0);
    for (int i = 0; i < ND; i++) free(ref[i]);
  }
}

/* PPO's row-wise host work (action noise, squashing, the normaliser's
 * update and application, the batched Gaussian, minibatch gathers) runs on
 * the OpenMP threads from a few hundred rows on, each row or dimension on
 * one thread: the actor, critic and normaliser after two iterations of 8192
 * environments are bit-identical with 1, 2 and 3 threads. */
static void test_ppo_threads(void) {
  setup();
  const char *ini = write_ini("ppo_threads", "ppo", NULL);
  static const char *names[] = {"learner/actor/params", "learner/critic/params", "learner/obs_rms/mean",
                                "learner/obs_rms/var"};
  double *ref[4] = {NULL, NULL, NULL, NULL};
  long len[4] = {0, 0, 0, 0};
  for (int thr = 1; thr <= 3; thr++) {
    char t[32];
    snprintf(t, sizeof t, "run.threads=%d", thr);
    char *ov[] = {"run.iterations=2", "run.num_envs=8192", "learner.steps_per_env=2", "learner.obs_norm=true", t};
    bcg_config *cfg = load(ini, 5, ov);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
    char dir[PATH_MAX], ck[PATH_MAX + 64];
    counters c = {0};
    bcg_train_result r;
    CU_ASSERT_EQUAL_FATAL(train(cfg, dir, 0, &c, &r), 0);
    CU_ASSERT_EQUAL(r.iterations, 2);
    snprintf(ck, sizeof ck, "%s/checkpoints/ckpt_000000002.h5", dir);
    for (int k = 0; k < 4; k++) {
      long nk = 0;
      double *x = read_dset(ck, names[k], &nk);
      CU_ASSERT_PTR_NOT_NULL_FATAL(x);
      if (!len[k]) len[k] = nk;
      CU_ASSERT_FATAL(len[k] > 0 && nk == len[k]);
      if (thr == 1) ref[k] = x;
      else {
        if (memcmp(x, ref[k], sizeof(double) * len[k])) fprintf(stderr, "ppo threads %d: %s differs\n", thr, names[k]);
        CU_ASSERT(memcmp(x, ref[k], sizeof(double) * len[k]) == 0);
        free(x);
      }
    }
    bcg_config_free(cfg);
  }
  for (int k = 0; k < 4; k++) free(ref[k]);
}

static void test_dr_redraw(void) {
  dr_redraw_case("shac");
  dr_redraw_case("ppo");
}

/* Resume with estimator = bcg is bit-identical: its draw counter is in the
 * checkpoint (group "estimator", the estimator's save/load hooks). The
 * humanoid stands on its feet (imitation of the stand clip) and every
 * transition in contact bundles (force_threshold 1 N), so the branches'
 * random offsets shape every gradient: a resume that restarted the counter
 * would draw other offsets and diverge. */
static void test_resume_bcg(void) {
  setup();
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/bcg_resume.ini", tmpdir);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "[run]\nname = bcg_resume\nseed = 3\nnum_envs = 2\nthreads = 1\niterations = 4\ncheckpoint_every = 0\n"
          "out_dir = %s/runs\n[sim]\nactuation = pd\n[contact]\nplugin = smoothed_kappa\n[estimator]\n"
          "plugin = bcg\nbranches = 2\nduration = 1\nforce_threshold = 1\n[learner]\nplugin = shac\nhorizon = 4\n"
          "actor_layers = 16\ncritic_layers = 16\ncritic_iterations = 1\n"
          "[task]\nplugin = imitation\nmotion = models/motions/stand.csv\n",
          tmpdir);
  fclose(f);
  bcg_config *full = load(path, 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(full);
  char d1[PATH_MAX], d2[PATH_MAX];
  counters c = {0};
  bcg_train_result r1, r2, r3;
  CU_ASSERT_EQUAL_FATAL(train(full, d1, 0, &c, &r1), 0);
  CU_ASSERT_EQUAL(r1.iterations, 4);
  /* the branches are in use */
  char log[PATH_MAX + 16];
  snprintf(log, sizeof log, "%s/log.h5", d1);
  double bf[8];
  CU_ASSERT_EQUAL(curve(log, "bundle_frac", bf, 8), 4);
  CU_ASSERT(bf[3] > 0.5);
  /* stopped early by a samples budget (the schedule still of 4 iterations), then resumed to 4 */
  char ov[64];
  snprintf(ov, sizeof ov, "run.samples=%llu", (unsigned long long)(r1.samples / 2));
  char *ovp[] = {ov};
  bcg_config *half = load(path, 1, ovp);
  CU_ASSERT_PTR_NOT_NULL_FATAL(half);
  CU_ASSERT_EQUAL_FATAL(train(half, d2, 0, &c, &r2), 0);
  CU_ASSERT(r2.iterations >= 1 && r2.iterations < 4);
  hid_t h = H5Fopen(r2.checkpoint, H5F_ACC_RDONLY, H5P_DEFAULT);
  CU_ASSERT(h >= 0 && H5Lexists(h, "estimator", H5P_DEFAULT) > 0);
  if (h >= 0) H5Fclose(h);
  CU_ASSERT_EQUAL_FATAL(train(full, d2, 1, &c, &r3), 0);
  CU_ASSERT_EQUAL(r3.iterations, 4);
  CU_ASSERT_EQUAL(r3.samples, r1.samples);
  int n = 0;
  CU_ASSERT(same_checkpoints(r1.checkpoint, r3.checkpoint, &n, 1));
  CU_ASSERT(n >= 10);
  bcg_config_free(full);
  bcg_config_free(half);
}

static void test_resume_shac(void) { resume_identical("shac", NULL, 0); }
static void test_resume_ppo(void) { resume_identical("ppo", NULL, 0); }
static void test_resume_shac_dr(void) { resume_identical("shac", DR_INI, 1); }
static void test_resume_ppo_dr(void) { resume_identical("ppo", DR_INI, 1); }

static int params_finite(const char *ck) {
  hid_t f = H5Fopen(ck, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return 0;
  hid_t g = H5Gopen2(f, "learner", H5P_DEFAULT);
  dsets d = {.n = 0};
  H5Ovisit(g, H5_INDEX_NAME, H5_ITER_INC, list_cb, &d);
  H5Gclose(g);
  int ok = d.n > 0;
  for (int i = 0; i < d.n; i++) {
    char full[160];
    snprintf(full, sizeof full, "learner/%s", d.names[i]);
    static double v[1 << 16];
    char e[256];
    long n = bcg_h5_read_doubles(f, full, v, 1 << 16, e, sizeof e);
    for (long j = 0; j < n; j++)
      if (!isfinite(v[j])) ok = 0;
  }
  H5Fclose(f);
  return ok;
}

static void nan_case(const char *learner, const char *what) {
  setup();
  char extra[256];
  snprintf(extra, sizeof extra, "nan_env = 0\nnan_step = 5\nnan_what = %s\nepisode_length = 30\n", what);
  char name[64];
  snprintf(name, sizeof name, "%s_nan_%s", learner, what);
  bcg_config *cfg = load(write_ini(name, learner, extra), 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  char dir[PATH_MAX];
  counters c = {0};
  bcg_train_result res;
  CU_ASSERT_EQUAL_FATAL(train(cfg, dir, 0, &c, &res), 0);
  /* env 0 hits a NaN at its 5th step of every episode: reset each time */
  CU_ASSERT(c.nan_resets >= 8 * 16 / 6);
  CU_ASSERT_EQUAL(c.skipped, 0);
  CU_ASSERT(params_finite(res.checkpoint));
  char log[PATH_MAX + 16];
  snprintf(log, sizeof log, "%s/log.h5", dir);
  double v[64];
  CU_ASSERT_EQUAL(curve(log, "nan_resets", v, 64), 8);
  double tot = 0;
  for (int i = 0; i < 8; i++) tot += v[i];
  CU_ASSERT_EQUAL(tot, c.nan_resets);
  CU_ASSERT_EQUAL(curve(log, "grad_norm", v, 64), 8);
  for (int i = 0; i < 8; i++) CU_ASSERT(isfinite(v[i]));
  CU_ASSERT_EQUAL(curve(log, "mean_reward", v, 64), 8);
  for (int i = 0; i < 8; i++) CU_ASSERT(isfinite(v[i]));
  bcg_config_free(cfg);
}

/* a NaN reward / observation of env 0 must not reach the parameters; with the
 * NaN env's adjoints cut, the SHAC gradient equals the one of the same
 * rollout without env 0's poisoned segments: checked indirectly by finite
 * parameters, finite gradient norms and no skipped update */
static void test_nan_shac(void) {
  nan_case("shac", "reward");
  nan_case("shac", "obs");
}
static void test_nan_ppo(void) {
  nan_case("ppo", "reward");
  nan_case("ppo", "obs");
}

static void test_checkpoint_contents(void) {
  setup();
  char *ov[] = {"run.iterations=3", "run.checkpoint_every=2", "learner.critics=2", "learner.grad_var_every=1"};
  bcg_config *cfg = load(write_ini("ckpt", "shac", NULL), 4, ov);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  char dir[PATH_MAX];
  counters c = {0};
  bcg_train_result res;
  CU_ASSERT_EQUAL_FATAL(train(cfg, dir, 0, &c, &res), 0);
  char p[PATH_MAX + 64];
  snprintf(p, sizeof p, "%s/checkpoints/ckpt_000000002.h5", dir);
  CU_ASSERT_EQUAL(access(p, R_OK), 0);
  snprintf(p, sizeof p, "%s/checkpoints/ckpt_000000003.h5", dir);
  CU_ASSERT_STRING_EQUAL(res.checkpoint, p);
  char latest[PATH_MAX + 64];
  CU_ASSERT_EQUAL(bcg_train_latest_checkpoint(dir, latest, sizeof latest), 3);
  CU_ASSERT_STRING_EQUAL(latest, p);
  hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
  CU_ASSERT_FATAL(f >= 0);
  const char *names[] = {"trainer/iteration", "trainer/samples", "trainer/wall_time", "trainer/log_iterations",
                         "learner/actor/params", "learner/actor/adam/m", "learner/actor/adam/v",
                         "learner/actor/adam/step", "learner/critic0/params", "learner/critic1/params",
                         "learner/critic1/adam/v", "learner/target_critic1/params", "learner/obs_rms/mean",
                         "learner/obs_rms/var", "learner/obs_rms/count", "learner/ret_rms/var", "learner/state/x",
                         "learner/state/clock/t", "learner/state/clock/flags", "learner/state/clock/phase",
                         "learner/state/prev_a", "learner/state/ep_return", "learner/counters"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    long n = bcg_h5_length(f, names[i]);
    if (n <= 0) fprintf(stderr, "missing %s\n", names[i]);
    CU_ASSERT(n > 0);
  }
  char e[256];
  int64_t v[3];
  CU_ASSERT_EQUAL(bcg_h5_read_i64(f, "trainer/iteration", v, 1, e, sizeof e), 1);
  CU_ASSERT_EQUAL(v[0], 3);
  CU_ASSERT_EQUAL(bcg_h5_read_i64(f, "trainer/samples", v, 1, e, sizeof e), 1);
  CU_ASSERT_EQUAL(v[0], 3 * 16 * 16);
  CU_ASSERT_EQUAL(bcg_h5_read_i64(f, "learner/actor/adam/step", v, 1, e, sizeof e), 1);
  CU_ASSERT_EQUAL(v[0], 3);
  CU_ASSERT_EQUAL(bcg_h5_read_i64(f, "learner/counters", v, 3, e, sizeof e), 3);
  CU_ASSERT_EQUAL(v[1], 3 * 16); /* global action-noise step */
  CU_ASSERT_EQUAL(bcg_h5_length(f, "learner/state/x"), 16 * 2);
  char s[64];
  CU_ASSERT_EQUAL(bcg_h5_read_str(f, "bcg_version", s, sizeof s, e, sizeof e), 0);
  H5Fclose(f);
  /* the curves: one row per iteration, grad_var measured */
  char log[PATH_MAX + 16];
  snprintf(log, sizeof log, "%s/log.h5", dir);
  const char *curves[] = {"iteration", "samples", "wall_time", "mean_return", "mean_ep_len", "mean_reward",
                          "actor_loss", "critic_loss", "grad_norm", "grad_var", "lr", "action_std", "bundle_frac",
                          "iteration_samples", "nan_resets", "episodes", "skipped_updates"};
  double d[16];
  for (size_t i = 0; i < sizeof curves / sizeof curves[0]; i++) CU_ASSERT_EQUAL(curve(log, curves[i], d, 16), 3);
  CU_ASSERT_EQUAL(curve(log, "grad_var", d, 16), 3);
  for (int i = 0; i < 3; i++) CU_ASSERT(isfinite(d[i]) && d[i] > 0);
  CU_ASSERT_EQUAL(curve(log, "lr", d, 16), 3);
  CU_ASSERT(d[0] > d[1] && d[1] > d[2]); /* linear decay */
  CU_ASSERT_EQUAL(curve(log, "action_std", d, 16), 3);
  CU_ASSERT(fabs(d[0] - exp(-1.0)) < 0.05);
  /* where the time went: SHAC steps, differentiates through the stepper and
   * runs its networks every iteration, so all three clocks advance, and
   * their sum is within the iteration's wall time */
  double ts[16], tv[16], tn[16], wt[16];
  CU_ASSERT_EQUAL(curve(log, "time_sim", ts, 16), 3);
  CU_ASSERT_EQUAL(curve(log, "time_sim_vjp", tv, 16), 3);
  CU_ASSERT_EQUAL(curve(log, "time_nn", tn, 16), 3);
  CU_ASSERT_EQUAL(curve(log, "wall_time", wt, 16), 3);
  for (int i = 0; i < 3; i++) {
    CU_ASSERT(ts[i] > 0 && tv[i] > 0 && tn[i] > 0);
    CU_ASSERT(ts[i] + tv[i] + tn[i] <= wt[i] - (i ? wt[i - 1] : 0) + 1e-3);
  }
  CU_ASSERT(fabs(res.time_sim - (ts[0] + ts[1] + ts[2])) < 1e-9 && fabs(res.time_nn - (tn[0] + tn[1] + tn[2])) < 1e-9);
  CU_ASSERT(res.time_sim + res.time_sim_vjp + res.time_nn <= res.session_wall);
  /* the pendulum task has no tracking_error: no track_err curve (rather than a curve of NaN) */
  hid_t lf = H5Fopen(log, H5F_ACC_RDONLY, H5P_DEFAULT);
  CU_ASSERT_FATAL(lf >= 0);
  CU_ASSERT_EQUAL(H5Lexists(lf, "track_err", H5P_DEFAULT), 0);
  H5Fclose(lf);
  bcg_config_free(cfg);
}

/* the track_err curve of a task with the tracking_error op: imitation of the
 * jump clip on humanoid.xml, two short iterations of SHAC and of PPO; one
 * finite row per iteration in log.h5 (metres: between 0 and 2) and the
 * progress line shows it */
static void track_err_case(const char *learner) {
  setup();
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/track_%s.ini", tmpdir, learner);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "[run]\nname = track_%s\nseed = 3\nnum_envs = 4\nthreads = 1\niterations = 2\ncheckpoint_every = 0\n"
          "out_dir = %s/runs\n[sim]\nactuation = pd\n[contact]\nplugin = smoothed_kappa\n[estimator]\n"
          "plugin = autodiff\n[learner]\nplugin = %s\nactor_layers = 16\ncritic_layers = 16\n%s"
          "[task]\nplugin = imitation\nmotion = models/motions/jump.csv\n",
          learner, tmpdir, learner, !strcmp(learner, "shac") ? "horizon = 4\ncritic_iterations = 1\n" : "steps_per_env = 4\n");
  fclose(f);
  bcg_config *cfg = load(path, 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  char dir[PATH_MAX], err[2048];
  CU_ASSERT_EQUAL_FATAL(bcg_rundir_create(tmpdir, "runs", dir, PATH_MAX, err, sizeof err), 0);
  char prog[PATH_MAX + 32];
  snprintf(prog, sizeof prog, "%s/progress.txt", dir);
  FILE *pf = fopen(prog, "w+");
  CU_ASSERT_PTR_NOT_NULL_FATAL(pf);
  bcg_train_options opt;
  memset(&opt, 0, sizeof opt);
  opt.run_dir = dir;
  opt.progress = pf;
  opt.progress_tty = 0;
  bcg_train_result res;
  int rc = bcg_train_run(cfg, &opt, &res, err, sizeof err);
  if (rc) fprintf(stderr, "train: %s\n", err);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT(isfinite(res.last.track_err));
  rewind(pf);
  char line[512];
  int shown = 0;
  while (fgets(line, sizeof line, pf)) shown += strstr(line, "track_err ") != NULL && strstr(line, "cm") != NULL;
  fclose(pf);
  CU_ASSERT_EQUAL(shown, 2);
  char log[PATH_MAX + 16];
  snprintf(log, sizeof log, "%s/log.h5", dir);
  double d[4];
  CU_ASSERT_EQUAL(curve(log, "track_err", d, 4), 2);
  for (int i = 0; i < 2; i++) CU_ASSERT(isfinite(d[i]) && d[i] >= 0 && d[i] < 2);
  printf("\n  %s on jump: track_err %.4f, %.4f m", learner, d[0], d[1]);
  bcg_config_free(cfg);
}

static void test_track_err(void) {
  track_err_case("shac");
  track_err_case("ppo");
}

static void test_budgets(void) {
  setup();
  /* samples: 16 envs x 16 steps = 256 per iteration; 600 -> 3 iterations */
  char *ov[] = {"run.iterations=0", "run.samples=600"};
  bcg_config *cfg = load(write_ini("budget", "shac", NULL), 2, ov);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  char dir[PATH_MAX];
  counters c = {0};
  bcg_train_result res;
  CU_ASSERT_EQUAL_FATAL(train(cfg, dir, 0, &c, &res), 0);
  CU_ASSERT_EQUAL(res.iterations, 3);
  CU_ASSERT_EQUAL(res.samples, 768);
  CU_ASSERT_EQUAL(res.stopped, 0);
  bcg_config_free(cfg);
  /* seconds */
  char *ov2[] = {"run.iterations=0", "run.seconds=1"};
  cfg = load(write_ini("budget2", "ppo", NULL), 2, ov2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  CU_ASSERT_EQUAL_FATAL(train(cfg, dir, 0, &c, &res), 0);
  CU_ASSERT(res.wall >= 1.0);
  CU_ASSERT(res.wall < 10.0);
  CU_ASSERT(res.iterations >= 1);
  CU_ASSERT_EQUAL(res.stopped, 0);
  bcg_config_free(cfg);
  /* on_iteration stops like SIGINT and the checkpoint follows */
  cfg = load(write_ini("budget3", "shac", NULL), 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  counters c3 = {0};
  c3.stop_after = 2;
  CU_ASSERT_EQUAL_FATAL(train(cfg, dir, 0, &c3, &res), 0);
  CU_ASSERT_EQUAL(res.iterations, 2);
  CU_ASSERT_EQUAL(res.stopped, 1);
  CU_ASSERT_EQUAL(bcg_train_latest_checkpoint(dir, NULL, 0), 2);
  bcg_config_free(cfg);
}

/* bcg train in a child process: SIGINT after the first progress line */
static void test_sigint(void) {
  setup();
  char plug[PATH_MAX];
  snprintf(plug, sizeof plug, "%s/plugins", tmpdir);
  mkdir(plug, 0777);
  const char *b = bcg_test_build_dir();
  char cwd[PATH_MAX];
  CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
  const char *files[] = {"learn_task.so", "test_exact_estimator.so"};
  for (int i = 0; i < 2; i++) {
    char src[PATH_MAX * 2], dst[PATH_MAX * 2];
    snprintf(src, sizeof src, "%s%s%s/tests/plugins/%s", b[0] == '/' ? "" : cwd, b[0] == '/' ? "" : "/", b,
             files[i]);
    snprintf(dst, sizeof dst, "%s/%s", plug, files[i]);
    unlink(dst);
    CU_ASSERT_EQUAL(symlink(src, dst), 0);
  }
  const char *ini = write_ini("sigint", "shac", NULL);
  char bin[PATH_MAX];
  snprintf(bin, sizeof bin, "%s/bcg", b);
  int pipefd[2];
  CU_ASSERT_EQUAL_FATAL(pipe(pipefd), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], 1);
    close(pipefd[0]);
    setenv("BCG_PLUGIN_PATH", plug, 1);
    execl(bin, bin, "train", ini, "run.iterations=100000", (char *)NULL);
    _exit(127);
  }
  close(pipefd[1]);
  FILE *out = fdopen(pipefd[0], "r");
  char line[1024], dir[PATH_MAX] = "";
  int sent = 0;
  while (fgets(line, sizeof line, out)) {
    if (!strncmp(line, "bcg: train: run directory ", 26)) {
      snprintf(dir, sizeof dir, "%s", line + 26);
      dir[strcspn(dir, "\n")] = 0;
    }
    if (!sent && !strncmp(line, "it 2/", 5)) {
      kill(pid, SIGINT);
      sent = 1;
    }
  }
  fclose(out);
  int status = 0;
  waitpid(pid, &status, 0);
  CU_ASSERT(sent);
  CU_ASSERT(WIFEXITED(status));
  CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
  CU_ASSERT_FATAL(dir[0] != 0);
  char ck[PATH_MAX + 64];
  int64_t it = bcg_train_latest_checkpoint(dir, ck, sizeof ck);
  CU_ASSERT(it >= 2 && it < 100000);
  CU_ASSERT(params_finite(ck));
  /* and it resumes from there through the CLI, with a larger budget */
  char cmd[PATH_MAX * 4];
  snprintf(cmd, sizeof cmd, "BCG_PLUGIN_PATH='%s' '%s' train --resume '%s' run.iterations=%lld > /dev/null", plug,
           bin, dir, (long long)it + 2);
  CU_ASSERT_EQUAL(system(cmd), 0);
  CU_ASSERT_EQUAL(bcg_train_latest_checkpoint(dir, NULL, 0), it + 2);
  /* a resume may not change the learner */
  snprintf(cmd, sizeof cmd, "'%s' train --resume '%s' learner.gamma=0.5 2> /dev/null", bin, dir);
  int rc = system(cmd);
  CU_ASSERT(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
}

/* Whether a float product that lands in the subnormal range (1e-30 * 1e-10)
 * and a subnormal input (1e-40) come out as zero, in this thread */
static int flushes_here(void) {
  volatile float a = 1e-30f, b = 1e-10f, s = 1e-40f, one = 1.0f;
  float p = a * b, q = s * one;
  return p == 0.0f && q == 0.0f;
}

/* [run] flush_denormals: the x86 flush-to-zero and denormals-are-zero modes
 * in the calling thread and in the OpenMP pool's threads (and in threads a
 * flushed thread starts later, which inherit the mode), set and cleared; a
 * session sets them as the key says (auto: set in the float build, left as
 * they are in the double build). */
static void test_flush_denormals(void) {
  setup();
  if (bcg_cpu_flush_denormals(1) != 0) {
    printf("\n  this CPU has no flush-to-zero mode: skipped");
    return;
  }
  int all = 1;
  CU_ASSERT_EQUAL(bcg_cpu_denormals_flushed(), 1);
  int np = omp_get_num_procs();
#pragma omp parallel num_threads(np) reduction(&& : all)
  all = all && flushes_here() && bcg_cpu_denormals_flushed() == 1;
  /* threads started after the call, by a flushed thread, inherit the mode */
  int nested = 1, levels = omp_get_max_active_levels();
  omp_set_max_active_levels(2);
#pragma omp parallel num_threads(1) reduction(&& : nested)
  {
#pragma omp parallel num_threads(3) reduction(&& : nested)
    nested = nested && flushes_here();
  }
  omp_set_max_active_levels(levels);
  CU_ASSERT(nested);
  CU_ASSERT(all);
  CU_ASSERT(flushes_here());
  CU_ASSERT_EQUAL(bcg_cpu_flush_denormals(0), 0);
  int none = 1;
#pragma omp parallel num_threads(np) reduction(&& : none)
  none = none && !flushes_here() && bcg_cpu_denormals_flushed() == 0;
  CU_ASSERT(none);
  const char *ini = write_ini("flush", "shac", "");
  /* auto after true: set in the float build, left set in the double build */
  const char *vals[] = {"true", "false", "auto", "true", "auto"};
  int want[] = {1, 0, sizeof(bcg_real) == sizeof(float), 1, 1};
  for (int k = 0; k < 5; k++) {
    char kv[64], err[2048];
    snprintf(kv, sizeof kv, "run.flush_denormals=%s", vals[k]);
    char *ov[] = {kv};
    bcg_config *cfg = load(ini, 1, ov);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
    bcg_session S;
    int ok = bcg_session_open(&S, cfg, err, sizeof err) == 0;
    if (!ok) fprintf(stderr, "session: %s\n", err);
    CU_ASSERT_FATAL(ok);
    int w = want[k], agree = 1;
#pragma omp parallel reduction(&& : agree)
    agree = agree && flushes_here() == w;
    CU_ASSERT(agree);
    CU_ASSERT_EQUAL(bcg_cpu_denormals_flushed(), w);
    bcg_session_close(&S);
    bcg_config_free(cfg);
  }
  bcg_cpu_flush_denormals(0);
  /* a value outside the choices is an error naming the key */
  char *bad[] = {"run.flush_denormals=yes"}, err[2048] = "";
  bcg_config *cfg = NULL;
  CU_ASSERT_NOT_EQUAL(bcg_config_load_with(&cfg, reg, ini, 1, bad, err, sizeof err), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "flush_denormals"));
  bcg_config_free(cfg);
}

static void test_cleanup(void) {
  bcg_registry_free(reg);
  reg = NULL;
}

BCG_TESTS({"SHAC learns the pendulum (short)", test_shac_learns}, {"SHAC gradient vs FD (resets, clock, action rate)", test_shac_gradient},
          {"SHAC gradient vs FD with DR re-drawn at resets", test_shac_gradient_dr}, {"PPO learns the pendulum (short)", test_ppo_learns},
          {"SHAC resume is bit-identical", test_resume_shac}, {"PPO resume is bit-identical", test_resume_ppo},
          {"SHAC resume with DR is bit-identical", test_resume_shac_dr},
          {"PPO resume with DR is bit-identical", test_resume_ppo_dr},
          {"SHAC resume with estimator bcg is bit-identical", test_resume_bcg},
          {"resume with a damaged log.h5 attribute", test_resume_damaged_log},
          {"DR re-drawn at resets, reproducibly (SHAC, PPO)", test_dr_redraw},
          {"SHAC critics side by side: bit-identical over thread counts", test_shac_critics_threads},
          {"SHAC critic_overlap: the critics beside the backward pass, bit-identical", test_shac_critic_overlap},
          {"PPO's row-wise host work on threads: bit-identical over thread counts", test_ppo_threads},
          {"NaN injection (SHAC)", test_nan_shac}, {"NaN injection (PPO)", test_nan_ppo},
          {"checkpoint contents and curves", test_checkpoint_contents},
          {"track_err curve (imitation, SHAC and PPO)", test_track_err}, {"budgets", test_budgets},
          {"SIGINT through bcg train", test_sigint},
          {"flush_denormals: FTZ/DAZ on every thread, per the run's key", test_flush_denormals},
          {"cleanup", test_cleanup});
BCG_RUN("learners")
