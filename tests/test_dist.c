/* test_dist.c - data-parallel training (bcg/dist.h): `mpirun -np 2 bcg train`
 * with PPO on the pendulum of tests/models/pendulum.xml (tests/plugins/
 * learn_task.c): the replicas' parameters stay the same while their
 * environments differ, rank 0 alone logs and each rank checkpoints, a resume
 * continues both ranks bit for bit, the reductions average (ranks that step
 * identical environments train as one process does), the replica check
 * catches ranks that diverge, and what cannot run as several processes says
 * so. Skipped where bcg was built without MPI or mpirun is missing. */
#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bcg/dist.h"
#include "bcg/runlog.h"
#include "h5same.h"
#include "testutil.h"

static char out[1 << 16];
static char tmpdir[512];

/* mpirun with the test plugins on the path, as root where CI runs, without
 * Open MPI's single-copy transport (containers forbid its ptrace), without
 * LeakSanitizer (Open MPI keeps its allocations to the end); np 0: no mpirun.
 * stdout+stderr into out; the exit status. */
static int run(int np, const char *fmt, ...) {
  char args[4096], cmd[16384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  const char *b = bcg_test_build_dir();
  char mpi[256] = "";
  if (np > 0)
    snprintf(mpi, sizeof mpi, "mpirun --oversubscribe --allow-run-as-root -np %d ", np);
  snprintf(cmd, sizeof cmd,
           "OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1 "
           "ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0 BCG_PLUGIN_PATH=%s/tests/plugins %s%s/bcg %s 2>&1",
           b, mpi, b, args);
  return bcg_test_capture(cmd, out, sizeof out);
}

static int have_mpi(void) {
  if (!bcg_dist_built()) {
    bcg_test_skip("bcg was built without MPI (make deps installs libopenmpi-dev)");
    return 0;
  }
  if (system("command -v mpirun >/dev/null 2>&1") != 0) {
    bcg_test_skip("no mpirun (Debian: openmpi-bin)");
    return 0;
  }
  if (!tmpdir[0]) snprintf(tmpdir, sizeof tmpdir, "%s", bcg_test_tmpdir());
  return 1;
}

#define PPO_INI "[learner]\nplugin = ppo\nsteps_per_env = 16\nactor_layers = 32,32\ncritic_layers = 32,32\nobs_norm = true\n"

/* the pendulum, 16 environments per rank, one thread; learner: its section
 * (NULL: PPO, 16 steps per environment) */
static const char *write_ini(const char *name, const char *learner) {
  static char path[8][PATH_MAX];
  static int k;
  char *p = path[k++ % 8];
  snprintf(p, PATH_MAX, "%s/%s.ini", tmpdir, name);
  FILE *f = fopen(p, "w");
  if (!f) abort();
  fprintf(f,
          "[run]\nname = %s\nseed = 3\nnum_envs = 16\nthreads = 1\niterations = 4\ncheckpoint_every = 2\n"
          "out_dir = %s/runs\n[model]\npath = tests/models/pendulum.xml\n[estimator]\nplugin = "
          "test_exact_estimator\n%s[task]\nplugin = learn_task\n",
          name, tmpdir, learner ? learner : PPO_INI);
  fclose(f);
  return p;
}

/* the run directory `bcg train` printed */
static int run_dir(char *dir, size_t len) {
  const char *m = strstr(out, "run directory ");
  if (!m) return -1;
  m += strlen("run directory ");
  size_t n = strcspn(m, " \n");
  if (n >= len) return -1;
  memcpy(dir, m, n);
  dir[n] = 0;
  return 0;
}

/* the 1-D dataset name of the HDF5 file path as doubles (bcg_h5_read_doubles); the count, or -1 */
static int ckpt_read(const char *path, const char *name, double *v, int cap) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return -1;
  char e[512];
  long n = bcg_h5_read_doubles(f, name, v, (size_t)cap, e, sizeof e);
  H5Fclose(f);
  return (int)n;
}

/* curve name of RUN/log.h5 into v (at most cap values); the count, or -1 */
static int curve(const char *dir, const char *name, double *v, int cap) {
  char p[PATH_MAX + 16];
  snprintf(p, sizeof p, "%s/log.h5", dir);
  return ckpt_read(p, name, v, cap);
}

static int exists(const char *fmt, ...) {
  char p[PATH_MAX + 128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p, sizeof p, fmt, ap);
  va_end(ap);
  return access(p, F_OK) == 0;
}

/* two ranks, 4 iterations, the replicas compared after each: one run
 * directory, one log with both ranks' samples, the main checkpoint and rank
 * 1's shard at each checkpoint; the shard holds the same parameters as the
 * main checkpoint and other environments */
static void test_two_ranks(void) {
  if (!have_mpi()) return;
  const char *ini = write_ini("two", NULL);
  /* each rank gets its entry of the launcher's GPU list */
  char *cvd = getenv("CUDA_VISIBLE_DEVICES") ? strdup(getenv("CUDA_VISIBLE_DEVICES")) : NULL;
  setenv("CUDA_VISIBLE_DEVICES", "3,5", 1);
  int rc = run(2, "train %s run.check_replicas=true", ini);
  if (cvd) setenv("CUDA_VISIBLE_DEVICES", cvd, 1);
  else unsetenv("CUDA_VISIBLE_DEVICES");
  free(cvd);
  if (rc) fprintf(stderr, "%s\n", out);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "(2 processes, 16 environments each; CUDA_VISIBLE_DEVICES by rank: 3, 5)"));
  char dir[PATH_MAX];
  CU_ASSERT_EQUAL_FATAL(run_dir(dir, sizeof dir), 0);
  /* rank 0 prints the progress alone: one "finished" line */
  const char *fin = strstr(out, "bcg: train: finished after 4 iterations, 2048 samples");
  CU_ASSERT_PTR_NOT_NULL(fin);
  if (fin) CU_ASSERT_PTR_NULL(strstr(fin + 1, "bcg: train: finished"));
  double v[16];
  CU_ASSERT_EQUAL(curve(dir, "iteration_samples", v, 16), 4);
  for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(v[i], 2 * 16 * 16);
  CU_ASSERT_EQUAL(curve(dir, "samples", v, 16), 4);
  CU_ASSERT_EQUAL(v[3], 2048);
  for (int it = 2; it <= 4; it += 2) {
    CU_ASSERT(exists("%s/checkpoints/ckpt_%09d.h5", dir, it));
    CU_ASSERT(exists("%s/checkpoints/ranks/ckpt_%09d.r001.h5", dir, it));
    CU_ASSERT_FALSE(exists("%s/checkpoints/ranks/ckpt_%09d.r000.h5", dir, it));
  }
  char a[PATH_MAX + 64], b[PATH_MAX + 64];
  snprintf(a, sizeof a, "%s/checkpoints/ckpt_%09d.h5", dir, 4);
  snprintf(b, sizeof b, "%s/checkpoints/ranks/ckpt_%09d.r001.h5", dir, 4);
  static double pa[1 << 16], pb[1 << 16];
  int na = ckpt_read(a, "learner/actor/params", pa, 1 << 16), nb = ckpt_read(b, "learner/actor/params", pb, 1 << 16);
  CU_ASSERT(na > 0 && na == nb);
  if (na > 0 && na == nb) CU_ASSERT_EQUAL(memcmp(pa, pb, sizeof(double) * na), 0);
  na = ckpt_read(a, "learner/critic/params", pa, 1 << 16);
  nb = ckpt_read(b, "learner/critic/params", pb, 1 << 16);
  CU_ASSERT(na > 0 && na == nb);
  if (na > 0 && na == nb) CU_ASSERT_EQUAL(memcmp(pa, pb, sizeof(double) * na), 0);
  /* the ranks' environments are their own */
  na = ckpt_read(a, "learner/state/x", pa, 1 << 16);
  nb = ckpt_read(b, "learner/state/x", pb, 1 << 16);
  CU_ASSERT(na > 0 && na == nb);
  if (na > 0 && na == nb) CU_ASSERT_NOT_EQUAL(memcmp(pa, pb, sizeof(double) * na), 0);
  double rk[2];
  CU_ASSERT_EQUAL(ckpt_read(b, "trainer/rank", rk, 2), 2);
  CU_ASSERT(rk[0] == 1 && rk[1] == 2);
  /* a run of two ranks resumes with two: one process refuses it */
  CU_ASSERT_NOT_EQUAL(run(0, "train --resume %s run.iterations=6", dir), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "written by rank 0 of a run of 2 processes: resume it with mpirun -np 2"));
  CU_ASSERT_FALSE(exists("%s/checkpoints/ckpt_%09d.h5", dir, 6));
}

/* 4 iterations at once against 2 and a resume to 4, two ranks each: the
 * main checkpoint, rank 1's shard and the log the same bytes */
static void test_resume(void) {
  if (!have_mpi()) return;
  const char *ini = write_ini("whole", NULL);
  CU_ASSERT_EQUAL_FATAL(run(2, "train %s", ini), 0);
  char d1[PATH_MAX], d2[PATH_MAX];
  CU_ASSERT_EQUAL_FATAL(run_dir(d1, sizeof d1), 0);
  if (!getenv("CUDA_VISIBLE_DEVICES") && access("/dev/nvidia0", F_OK) != 0) /* no GPU: none listed */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "(2 processes, 16 environments each)"));
  ini = write_ini("parts", NULL);
  CU_ASSERT_EQUAL_FATAL(run(2, "train %s run.iterations=2", ini), 0);
  CU_ASSERT_EQUAL_FATAL(run_dir(d2, sizeof d2), 0);
  int rc = run(2, "train --resume %s run.iterations=4", d2);
  if (rc) fprintf(stderr, "%s\n", out);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  char a[PATH_MAX + 64], b[PATH_MAX + 64];
  int n = 0;
  snprintf(a, sizeof a, "%s/checkpoints/ckpt_%09d.h5", d1, 4);
  snprintf(b, sizeof b, "%s/checkpoints/ckpt_%09d.h5", d2, 4);
  CU_ASSERT_EQUAL(h5same(a, b, h5same_skip_ckpt, "rank 0", &n), 0);
  CU_ASSERT(n > 10);
  snprintf(a, sizeof a, "%s/checkpoints/ranks/ckpt_%09d.r001.h5", d1, 4);
  snprintf(b, sizeof b, "%s/checkpoints/ranks/ckpt_%09d.r001.h5", d2, 4);
  CU_ASSERT_EQUAL(h5same(a, b, h5same_skip_ckpt, "rank 1", &n), 0);
  CU_ASSERT(n > 10);
  snprintf(a, sizeof a, "%s/log.h5", d1);
  snprintf(b, sizeof b, "%s/log.h5", d2);
  CU_ASSERT_EQUAL(h5same(a, b, h5same_skip_log, "log", &n), 0);
}

/* Two ranks that step identical environments ([run] rank_seed = same) train
 * as one process with their environments: the gradients are averaged (a sum
 * would double the logged gradient norm), the advantages and the normaliser
 * differ from one process's only by the counts' weights (n - 1 against 2n -
 * 1 in the advantages' deviation, the normaliser's prior count of 1e-4), so
 * the first iterations' losses and norms agree to 1e-3 (relative, or of
 * 0.01 for the surrogate loss near 0) */
static void test_same_seed(void) {
  if (!have_mpi()) return;
  const char *ini = write_ini("same2", NULL);
  CU_ASSERT_EQUAL_FATAL(run(2, "train %s run.rank_seed=same run.iterations=2 run.check_replicas=true", ini), 0);
  char d2[PATH_MAX], d1[PATH_MAX];
  CU_ASSERT_EQUAL_FATAL(run_dir(d2, sizeof d2), 0);
  ini = write_ini("same1", NULL);
  CU_ASSERT_EQUAL_FATAL(run(0, "train %s run.iterations=2", ini), 0);
  CU_ASSERT_EQUAL_FATAL(run_dir(d1, sizeof d1), 0);
  const char *names[] = {"actor_loss", "critic_loss", "grad_norm", "mean_reward", "action_std", "lr"};
  for (int k = 0; k < 6; k++) {
    double x[4], y[4];
    CU_ASSERT_EQUAL(curve(d1, names[k], x, 4), 2);
    CU_ASSERT_EQUAL(curve(d2, names[k], y, 4), 2);
    for (int i = 0; i < 2; i++) {
      double e = bcg_relerr(x[i], y[i], 1e-2); /* the surrogate loss is near 0 */
      if (e > 1e-3) fprintf(stderr, "%s[%d]: one process %.9g, two ranks %.9g\n", names[k], i, x[i], y[i]);
      CU_ASSERT(e <= 1e-3);
    }
  }
  double s1[4], s2[4];
  CU_ASSERT_EQUAL(curve(d1, "iteration_samples", s1, 4), 2);
  CU_ASSERT_EQUAL(curve(d2, "iteration_samples", s2, 4), 2);
  CU_ASSERT_EQUAL(s2[0], 2 * s1[0]);
}

/* the replica check: two ranks started with different learning rates (an
 * MPMD launch; one command line cannot do this) diverge at the first update,
 * and [run] check_replicas stops the run naming what differs */
static void test_check_replicas(void) {
  if (!have_mpi()) return;
  const char *a = write_ini("div_a", NULL), *b = write_ini("div_b", NULL);
  const char *bin = bcg_test_build_dir();
  int rc = run(1, "train %s run.check_replicas=true learner.lr=1e-3 : -np 1 %s/bcg train %s run.check_replicas=true "
               "learner.lr=2e-3", a, bin, b);
  CU_ASSERT_NOT_EQUAL(rc, 0);
  if (!strstr(out, "check_replicas: the actor parameters differ between the ranks after iteration 0"))
    fprintf(stderr, "%s\n", out);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "check_replicas: the actor parameters differ between the ranks after iteration 0"));
}

/* what does not run as several processes: a learner without data-parallel
 * support (SHAC), and every command but train */
static void test_refused(void) {
  if (!have_mpi()) return;
  const char *ini = write_ini("shac2", "[learner]\nplugin = shac\nhorizon = 16\nactor_layers = 32,32\n"
                                       "critic_layers = 32,32\n");
  CU_ASSERT_NOT_EQUAL(run(2, "train %s", ini), 0);
  if (!strstr(out, "does not train with several processes")) fprintf(stderr, "%s\n", out);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[learner] shac does not train with several processes (2 ranks: mpirun -np 2)"));
  CU_ASSERT_NOT_EQUAL(run(2, "check %s", ini), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "check: started as 2 processes (mpirun, srun); only 'bcg train' runs as several"));
}

BCG_TESTS({"two ranks: one log, replicas the same, shards beside the checkpoints", test_two_ranks},
          {"two ranks: resume bit-identical", test_resume},
          {"two ranks on identical environments train as one process", test_same_seed},
          {"check_replicas catches ranks that diverge", test_check_replicas},
          {"SHAC and other commands refuse several processes", test_refused});
BCG_RUN("dist")
