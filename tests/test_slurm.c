/* test_slurm.c - bcg sweep --slurm through a real single-node Slurm
 * (slurmctld + slurmd + munged from Debian's slurm-wlm and munge, started
 * by tests/slurm_cluster.sh in this suite's temporary directory and stopped
 * at its end): submission as one job array, --status from the scheduler's
 * state, a sweep cancelled midway and submitted again (finished runs
 * skipped, interrupted ones resumed), the errors, and a data-parallel
 * training under Slurm's own launcher (srun --mpi=pmix -n 2). Skipped where the
 * packages are missing or the tests do not run as root (slurmd needs it);
 * CI installs the packages (make deps) and runs as root. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bcg/dist.h"
#include "testutil.h"

static char out[1 << 16];
static char tmpdir[256], cluster[400], conf[512], why_not[512];
static int up = -1; /* the cluster: 1 running, 0 cannot run here (why_not), -1 not tried */

static void stop_cluster(void) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "sh tests/slurm_cluster.sh stop '%s' >/dev/null 2>&1", cluster);
  if (system(cmd) != 0) { /* nothing more to do at exit */
  }
}

/* the cluster, started once for the suite; 0 when this machine cannot run
 * one (the test is then skipped), 1 when it runs. A start that fails for
 * another reason fails the test with the daemons' logs. */
static int cluster_up(void) {
  if (up >= 0) return up;
  snprintf(tmpdir, sizeof tmpdir, "%s", bcg_test_tmpdir());
  snprintf(cluster, sizeof cluster, "%s/slurm", tmpdir);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "sh tests/slurm_cluster.sh start '%s' 2>&1", cluster);
  int rc = bcg_test_capture(cmd, out, sizeof out);
  atexit(stop_cluster); /* before the temporary directory goes (atexit runs in reverse) */
  if (rc == 77) {
    snprintf(why_not, sizeof why_not, "%.*s", (int)strcspn(out, "\n"), out);
    return up = 0;
  }
  if (rc != 0) {
    fprintf(stderr, "slurm_cluster.sh start failed (%d):\n%s\n", rc, out);
    CU_FAIL_FATAL("the test cluster did not start");
  }
  snprintf(conf, sizeof conf, "%s/slurm.conf", cluster);
  setenv("SLURM_CONF", conf, 1);
  return up = 1;
}

/* a shell command with the cluster's and the test plugins' environment;
 * stdout+stderr into out; its exit status */
static int sh(const char *fmt, ...) {
  char body[8192], cmd[8192 + 2 * PATH_MAX + 128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  char b[PATH_MAX];
  if (!realpath(bcg_test_build_dir(), b)) return -1;
  snprintf(cmd, sizeof cmd, "export BCG_PLUGIN_PATH=%s/tests/plugins; bcg=%s/bcg; { %s; } 2>&1", b, b, body);
  return bcg_test_capture(cmd, out, sizeof out);
}

/* waits (up to 3 min) until Slurm runs no task of the job array JOB */
static int wait_job(const char *job) {
  return sh("for i in $(seq 900); do [ -z \"$(squeue -h -j %s -o %%i 2>/dev/null)\" ] && exit 0; sleep 0.2; done; "
            "squeue -j %s; exit 1",
            job, job);
}

/* the job array's id from bcg sweep --slurm's "submitted Slurm job array ID:" */
static void job_of(char *job, size_t len) {
  const char *s = strstr(out, "submitted Slurm job array ");
  job[0] = 0;
  if (s) snprintf(job, len, "%.*s", (int)strcspn(s + 26, ":"), s + 26);
}

static const char *sweep_ini(const char *hold) {
  static char path[600];
  snprintf(path, sizeof path, "%s/sw.ini", tmpdir);
  FILE *f = fopen(path, "w");
  if (!f) return path;
  fprintf(f,
          "[run]\nname = sw\nnum_envs = 4\niterations = 2\ncheckpoint_every = 1\nout_dir = %s/runs\n"
          "[model]\npath = tests/models/pendulum.xml\n[estimator]\nplugin = test_exact_estimator\n"
          "[learner]\nplugin = shac\nhorizon = 8\nactor_layers = 8\ncritic_layers = 8\n"
          "[task]\nplugin = learn_task\nepisode_length = 8\nhold_file = %s\n"
          "[sweep]\ntask.step_sleep_ms = 0, 20\nrun.seed = 0, 1\n",
          tmpdir, hold);
  fclose(f);
  return path;
}

/* 2 configurations x 2 seeds x 2 iterations as one job array. The
 * configuration with task.step_sleep_ms = 20 is held inside its first
 * iteration while the file hold exists, so the array is cancelled (scancel)
 * with the two fast runs finished and the two slow ones training: they get
 * SIGTERM from Slurm, checkpoint and stop (interrupted at 1/2, the
 * scheduler's state CANCELLED). Submitting the same sweep again skips the
 * finished runs and resumes the others in their own directories. */
static void test_sweep_slurm(void) {
  if (!cluster_up()) {
    bcg_test_skip(why_not);
    return;
  }
  char hold[600], dir[600], job[64], job2[64];
  snprintf(hold, sizeof hold, "%s/hold", tmpdir);
  snprintf(dir, sizeof dir, "%s/runs/sw", tmpdir);
  const char *p = sweep_ini(hold);
  /* the script it would submit */
  CU_ASSERT_EQUAL(sh("$bcg sweep %s --slurm --dry-run --time 10 --cpus-per-run 1 --sbatch-arg=--requeue", p), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "would submit 4 runs as the job array of "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n#SBATCH --array=1-4\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n#SBATCH --time=10\n#SBATCH --requeue\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "' '--task' \"$SLURM_ARRAY_TASK_ID\"\n"));
  CU_ASSERT_NOT_EQUAL(access(dir, F_OK), 0); /* a dry run makes nothing */
  /* GPUs per run, a throttle, the other options */
  CU_ASSERT_EQUAL(sh("$bcg sweep %s --slurm --dry-run --gpus-per-run 2 --jobs 3 --cpus-per-run 4 --partition gpu "
                     "--mem 8G --account lab --qos high --constraint h100",
                     p),
                  0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n#SBATCH --array=1-4%3\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n#SBATCH --cpus-per-task=4\n#SBATCH --gres=gpu:2\n#SBATCH --partition=gpu\n"
                                     "#SBATCH --mem=8G\n#SBATCH --account=lab\n#SBATCH --qos=high\n"
                                     "#SBATCH --constraint=h100\n"));

  CU_ASSERT_EQUAL_FATAL(sh("touch %s && $bcg sweep %s --slurm --time 10", hold, p), 0);
  job_of(job, sizeof job);
  CU_ASSERT_FATAL(job[0] != 0);
  /* the slow runs held, the fast ones finished: then cancel the array */
  CU_ASSERT_EQUAL(sh("for i in $(seq 900); do [ $(ls %s.* 2>/dev/null | wc -l) = 2 ] && "
                     "[ $($bcg sweep --status %s | grep -c ' finished ') = 2 ] && exit 0; sleep 0.2; done; "
                     "$bcg sweep --status %s; cat %s/slurm/*.out; exit 1",
                     hold, dir, dir, dir),
                  0);
  CU_ASSERT_EQUAL(sh("$bcg sweep --status %s", dir), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "3/4 running "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[slurm "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, " RUNNING]\n"));
  /* the same sweep run here while Slurm trains it: refused */
  CU_ASSERT_EQUAL(sh("$bcg sweep %s", p), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "runs of this sweep are queued or running in Slurm"));
  /* nor is anything submitted twice */
  CU_ASSERT_EQUAL(sh("$bcg sweep %s --slurm", p), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "nothing to submit"));
  CU_ASSERT_EQUAL(sh("scancel %s && sleep 0.5 && rm -f %s %s.*", job, hold, hold), 0);
  CU_ASSERT_EQUAL(wait_job(job), 0);
  CU_ASSERT_EQUAL(sh("$bcg sweep --status %s", dir), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "1/4 finished     2/2 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "2/4 finished     2/2 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "3/4 interrupted  1/2 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "4/4 interrupted  1/2 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, " CANCELLED]\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n4 runs: 2 finished, 2 interrupted\n"));
  if (!strstr(out, "2 interrupted")) sh("cat %s/slurm/*.out %s/*/train.out >&2", dir, dir);

  /* again: only the interrupted runs, resumed */
  CU_ASSERT_EQUAL(sh("$bcg sweep %s --slurm --time 10", p), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "earlier sessions: 2 finished (skipped), 2 to resume, 0 failed"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, ": 2 runs (script "));
  job_of(job2, sizeof job2);
  CU_ASSERT_FATAL(job2[0] != 0);
  CU_ASSERT_EQUAL(sh("grep -qx '#SBATCH --array=3-4' %s/slurm/array-*.sbatch", dir), 0);
  CU_ASSERT_EQUAL(wait_job(job2), 0);
  CU_ASSERT_EQUAL(sh("$bcg sweep --status %s", dir), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n4 runs: 4 finished\n"));
  char want[800];
  snprintf(want, sizeof want, "[slurm %s_4 COMPLETED]", job2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  CU_ASSERT_EQUAL(sh("p=%s/sw-task.step_sleep_ms_20-run.seed_1; test $(ls -d $p/*/ | wc -l) = 1 && "
                     "grep -q 'interrupted after 1 iterations' $p/train.out && "
                     "grep -q 'finished after 2 iterations' $p/train.out && grep -q '^== bcg sweep: resume' $p/train.out",
                     dir),
                  0);
  /* every task's own output says what it did */
  snprintf(want, sizeof want, "%s/slurm/%s_4.out", dir, job2);
  CU_ASSERT_EQUAL(sh("grep -q 'resumed from its checkpoint, threads 1' %s && grep -q 'finished ' %s", want, want), 0);
  /* nothing left to do */
  CU_ASSERT_EQUAL(sh("$bcg sweep %s --slurm", p), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "earlier sessions: 4 finished (skipped)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "nothing to submit"));
  /* and the report of the runs */
  CU_ASSERT_EQUAL(sh("$bcg report %s", dir), 0);
}

/* what sbatch refuses is reported with its message and nothing is recorded;
 * --task of a run that is not there; Slurm options without --slurm */
static void test_slurm_errors(void) {
  if (!cluster_up()) {
    bcg_test_skip(why_not);
    return;
  }
  char hold[600], dir[600];
  snprintf(hold, sizeof hold, "%s/nohold", tmpdir);
  snprintf(dir, sizeof dir, "%s/runs/bad", tmpdir);
  const char *p = sweep_ini(hold);
  CU_ASSERT_EQUAL(sh("$bcg sweep %s --dir %s --slurm --partition nosuch", p, dir), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "bcg: error: sbatch "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "nvalid partition"));
  CU_ASSERT_EQUAL(sh("grep -c '^slurm' %s/sweep.manifest", dir), 1); /* grep: no line */
  CU_ASSERT_EQUAL(sh("$bcg sweep %s --dir %s --task 9", p, dir), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--task 9: the sweep has 4 runs"));
  CU_ASSERT_EQUAL(sh("$bcg sweep %s --dir %s/none --task 1", p, tmpdir), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--task trains a run of a sweep that bcg sweep --slurm submitted"));
  CU_ASSERT_EQUAL(sh("$bcg sweep %s --partition debug", p), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "go with --slurm"));
  CU_ASSERT_EQUAL(sh("$bcg sweep %s --slurm --gpus-per-run x", p), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--gpus-per-run 'x'"));
  CU_ASSERT_EQUAL(sh("$bcg sweep %s --slurm --task 1", p), 2);
  /* a failing run: its task fails in Slurm and the run says so */
  CU_ASSERT_EQUAL(sh("$bcg sweep %s --dir %s/fail --slurm model.path=nosuch.xml", p, tmpdir), 0);
  char job[64];
  job_of(job, sizeof job);
  CU_ASSERT_EQUAL(wait_job(job), 0);
  CU_ASSERT_EQUAL(sh("$bcg sweep --status %s/fail", tmpdir), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n4 runs: 4 failed\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, " FAILED]\n"));
}

/* a data-parallel training started by Slurm's own launcher: srun --mpi=pmix
 * -n 2 bcg train (Open MPI through Slurm's PMIx plugin, docs/usage.md
 * section 8.1): two ranks, one run directory, rank 1's shard beside the
 * checkpoint, the replicas the same */
static void test_srun_ranks(void) {
  if (!cluster_up()) {
    bcg_test_skip(why_not);
    return;
  }
  if (!bcg_dist_built()) {
    bcg_test_skip("bcg was built without MPI (make deps installs libopenmpi-dev)");
    return;
  }
  if (sh("srun --mpi=list 2>&1 | grep -qw pmix") != 0) {
    bcg_test_skip("this Slurm has no PMIx plugin (srun --mpi=list)");
    return;
  }
  char ini[600];
  snprintf(ini, sizeof ini, "%s/dp.ini", tmpdir);
  FILE *f = fopen(ini, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "[run]\nname = dp\nnum_envs = 8\nthreads = 1\niterations = 2\ncheckpoint_every = 2\nout_dir = %s/dpruns\n"
          "[model]\npath = tests/models/pendulum.xml\n[estimator]\nplugin = test_exact_estimator\n"
          "[learner]\nplugin = ppo\nsteps_per_env = 8\nactor_layers = 8\ncritic_layers = 8\n"
          "[task]\nplugin = learn_task\n",
          tmpdir);
  fclose(f);
  /* LeakSanitizer off for the ranks (make test-asan): Open MPI keeps its allocations to the end */
  int rc = sh("OMPI_MCA_btl_vader_single_copy_mechanism=none ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0 timeout 300 "
              "srun --mpi=pmix -n 2 $bcg train '%s' run.check_replicas=true",
              ini);
  if (rc) fprintf(stderr, "%s\n", out);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "(2 processes, 8 environments each)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "bcg: train: finished after 2 iterations, 256 samples"));
  CU_ASSERT_EQUAL(sh("ls %s/dpruns/dp/*/checkpoints/ckpt_000000002.h5 %s/dpruns/dp/*/checkpoints/ranks/"
                     "ckpt_000000002.r001.h5",
                     tmpdir, tmpdir),
                  0);
}

BCG_TESTS({"sweep_slurm", test_sweep_slurm}, {"slurm_errors", test_slurm_errors},
          {"srun --mpi=pmix: two ranks of one training", test_srun_ranks});
BCG_RUN("slurm")
