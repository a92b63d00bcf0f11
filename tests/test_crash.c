/* test_crash.c - `bcg train` killed with SIGKILL at random points, then
 * `bcg train --resume`, again and again until the run is done: its log.h5
 * curves and its checkpoints agree bit for bit with an uninterrupted run's
 * (wall-clock time aside), and the same checkpoints are left after rotation.
 *
 * One case per plugin combination of the shipped configs (the .ini files of
 * configs/, configs/ladder/, configs/experiments/ and configs/sweeps/), on
 * humanoid.xml with actuation = pd and domain randomisation on (friction,
 * masses, centre-of-mass offsets, and random pushes as the experiments):
 *
 *   contact         estimator  learner  task        shipped in
 *   smoothed_kappa  bcg        shac     imitation   demo; ladder: {stand,walk,jump,run}_shac_bcg;
 *                                                   experiments: every *_shac_bcg; sweeps: kappa
 *   smoothed_kappa  autodiff   shac     imitation   ladder: {stand,walk,jump,run}_shac; experiments: *_shac
 *   smoothed_kappa  autodiff   ppo      imitation   ladder: {jump,run}_ppo; experiments: *_ppo
 *   smoothed_kappa  truncate   shac     imitation   experiments: *_shac_truncate
 *   soft            bcg        shac     imitation   experiments: *_shac_bcg_soft
 *   smoothed_kappa  autodiff   shac     locomotion  ladder: locomotion_shac
 *   smoothed_kappa  bcg        shac     locomotion  ladder: locomotion_shac_bcg
 *
 * Tiny runs (2 environments, 6 iterations, a checkpoint every iteration,
 * keep_last = 2 and keep_every = 4, so rotation deletes while it is killed).
 * The kill points: a session's progress line "it K/6" is printed after
 * iteration K's log row is on disk and before its checkpoint is written, so
 * a kill a random 0-20 ms after a random K lands in the checkpoint write, in
 * the rotation after it, or in the next iteration; a resumed session is also
 * killed while it starts (reloading the checkpoint, rebuilding log.h5). The
 * points come from a seed printed with the results; BCG_CRASH_SEED=N repeats
 * them (the timing of a kill within its window still varies). */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bcg/train.h"
#include "h5same.h"
#include "testutil.h"

#define ITERS 6

static uint64_t rng;
static unsigned rnd(unsigned n) { /* uniform in [0, n) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (unsigned)((rng >> 11) % n);
}

typedef struct crash_case {
  const char *name, *contact, *estimator, *learner, *task;
} crash_case;

static const crash_case cases[] = {
    {"kappa_bcg_shac_imit", "plugin = smoothed_kappa\nkappa = 300\nerp = 0.2\n", "plugin = bcg\nbranches = 2\n",
     "shac", "plugin = imitation\nmotion = models/motions/jump.csv\nrsi = true\n"},
    {"kappa_autodiff_shac_imit", "plugin = smoothed_kappa\n", "plugin = autodiff\n", "shac",
     "plugin = imitation\nmotion = models/motions/run.csv\nrsi = true\n"},
    {"kappa_autodiff_ppo_imit", "plugin = smoothed_kappa\n", "plugin = autodiff\n", "ppo",
     "plugin = imitation\nmotion = models/motions/dance.csv\nrsi = true\n"},
    {"kappa_truncate_shac_imit", "plugin = smoothed_kappa\n", "plugin = truncate\n", "shac",
     "plugin = imitation\nmotion = models/motions/fight.csv\nrsi = true\n"},
    {"soft_bcg_shac_imit", "plugin = soft\n", "plugin = bcg\nbranches = 2\n", "shac",
     "plugin = imitation\nmotion = models/motions/jump.csv\nrsi = true\n"},
    {"kappa_autodiff_shac_loco", "plugin = smoothed_kappa\n", "plugin = autodiff\n", "shac",
     "plugin = locomotion\ntarget_speed = 2.0\n"},
    {"kappa_bcg_shac_loco", "plugin = smoothed_kappa\n", "plugin = bcg\nbranches = 2\n", "shac",
     "plugin = locomotion\ntarget_speed = 2.0\n"},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static const char *write_case_ini(const crash_case *c) {
  char name[128];
  snprintf(name, sizeof name, "%s.ini", c->name);
  const char *path = bcg_test_tmp_path(name);
  FILE *f = fopen(path, "w");
  if (!f) return NULL;
  fprintf(f,
          "[run]\nseed = 3\nnum_envs = 2\niterations = %d\nthreads = 1\ncheckpoint_every = 1\nkeep_last = 2\n"
          "keep_every = 4\nout_dir = %s/runs\n"
          "[model]\npath = /usr/share/mujoco/model/humanoid/humanoid.xml\n"
          "[sim]\nsubsteps = 2\nactuation = pd\ndr_friction_min = 0.5\ndr_friction_max = 1.25\n"
          "dr_mass_scale = 0.1\ndr_com_offset = 0.02\ndr_push_interval = 0.1\ndr_push_velocity = 0.5\n"
          "[contact]\n%s[estimator]\n%s[learner]\nplugin = %s\nactor_layers = 8\ncritic_layers = 8\n%s"
          "[task]\n%s",
          ITERS, bcg_test_tmpdir(), c->contact, c->estimator, c->learner,
          !strcmp(c->learner, "shac") ? "horizon = 4\ncritic_iterations = 2\n"
                                      : "steps_per_env = 4\nepochs = 2\nminibatches = 2\n",
          c->task);
  fclose(f);
  return path;
}

/* The single run directory under out_dir/<name>/ into rd; 0 or -1. */
static int run_dir_of(const char *name, char *rd, size_t len) {
  char parent[2048];
  snprintf(parent, sizeof parent, "%s/runs/%s", bcg_test_tmpdir(), name);
  DIR *d = opendir(parent);
  if (!d) return -1;
  int found = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    if (de->d_name[0] != '.') found++, snprintf(rd, len, "%.2000s/%.255s", parent, de->d_name);
  closedir(d);
  return found == 1 ? 0 : -1;
}

/* One bcg process: argv after "bcg"; stdout read line by line. kill_at > 0:
 * SIGKILL delay_us after the line "it kill_at/..."; kill_at == 0: delay_us
 * after the first line. stderr goes to <tmp>/<name>.err. Returns the exit
 * status (128 + signal when killed) and the last iteration printed. */
static int run_session(const char *name, char *const args[], int kill_at, unsigned delay_us, int *last_it) {
  char bin[PATH_MAX], errpath[PATH_MAX];
  snprintf(bin, sizeof bin, "%s/bcg", bcg_test_build_dir());
  snprintf(errpath, sizeof errpath, "%s/%s.err", bcg_test_tmpdir(), name);
  int fd[2];
  if (pipe(fd)) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int e = open(errpath, O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd[1], 1);
    if (e >= 0) dup2(e, 2);
    close(fd[0]);
    close(fd[1]);
    char *av[16];
    int n = 0;
    av[n++] = bin;
    for (int i = 0; args[i] && n < 15; i++) av[n++] = args[i];
    av[n] = NULL;
    execv(bin, av);
    _exit(127);
  }
  close(fd[1]);
  FILE *p = fdopen(fd[0], "r");
  char line[4096];
  int killed = 0, nline = 0;
  *last_it = -1;
  while (p && fgets(line, sizeof line, p)) {
    int k;
    nline++;
    if (sscanf(line, "it %d/", &k) == 1) *last_it = k;
    if (!killed && (kill_at > 0 ? *last_it == kill_at : (kill_at == 0 && nline == 1))) {
      usleep(delay_us);
      kill(pid, SIGKILL);
      killed = 1;
    }
  }
  if (p) fclose(p);
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* the checkpoint iterations left in a run directory, as a string "4 5 6" */
static void ckpt_list(const char *rd, char *buf, size_t len) {
  int64_t *its;
  size_t n;
  buf[0] = 0;
  if (bcg_train_checkpoints(rd, &its, &n)) return;
  for (size_t i = 0; i < n; i++)
    snprintf(buf + strlen(buf), len - strlen(buf), "%s%lld", i ? " " : "", (long long)its[i]);
  free(its);
}

/* a kill that left a checkpoint's or the log's temporary file: it came
 * while a write was under way (counted, to show the windows are hit) */
static int left_tmp(const char *rd) {
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/log.h5.tmp", rd);
  int n = access(p, F_OK) == 0;
  snprintf(p, sizeof p, "%s/checkpoints", rd);
  DIR *d = opendir(p);
  struct dirent *de;
  while (d && (de = readdir(d))) {
    size_t l = strlen(de->d_name);
    n += l > 4 && !strcmp(de->d_name + l - 4, ".tmp");
  }
  if (d) closedir(d);
  return n > 0;
}

static int crash_case_run(const crash_case *c, int *kills, int *in_write) {
  const char *ini = write_case_ini(c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ini);
  char ref_name[160], crash_name[160], ov_ref[200], ov_crash[200], ref[PATH_MAX], rd[PATH_MAX];
  snprintf(ref_name, sizeof ref_name, "%s_ref", c->name);
  snprintf(crash_name, sizeof crash_name, "%s_crash", c->name);
  snprintf(ov_ref, sizeof ov_ref, "run.name=%s", ref_name);
  snprintf(ov_crash, sizeof ov_crash, "run.name=%s", crash_name);
  int last = -1, ok = 1;
  /* uninterrupted */
  char *a_ref[] = {"train", (char *)ini, ov_ref, NULL};
  int rc = run_session(ref_name, a_ref, -1, 0, &last);
  if (rc != 0 || last != ITERS || run_dir_of(ref_name, ref, sizeof ref)) {
    fprintf(stderr, "\n  %s: the uninterrupted run failed (exit %d, last iteration %d)\n", c->name, rc, last);
    return 0;
  }
  /* killed after a checkpoint exists (iteration 2 or 3), then resumed and
   * killed again 1-2 more times, then resumed to the end */
  char *a_new[] = {"train", (char *)ini, ov_crash, NULL};
  int at = 2 + (int)rnd(2);
  rc = run_session(crash_name, a_new, at, rnd(20000), &last);
  *kills += rc == 128 + SIGKILL;
  int seen = last;
  if (rc == 128 + SIGKILL && !run_dir_of(crash_name, rd, sizeof rd)) *in_write += left_tmp(rd);
  if (run_dir_of(crash_name, rd, sizeof rd)) {
    fprintf(stderr, "\n  %s: no run directory after the first session (exit %d)\n", c->name, rc);
    return 0;
  }
  char *a_res[] = {"train", "--resume", rd, NULL};
  int more = 1 + (int)rnd(2), done = rc == 0 && last == ITERS, sessions = 1;
  char trail[512];
  snprintf(trail, sizeof trail, "killed at it %d (exit %d)", at, rc);
  while (!done && sessions < 8) {
    int k = -1;
    unsigned delay = 0;
    if (more > 0) {
      more--;
      /* 0: while the resumed session starts; else after a later iteration */
      /* a resumed session starts at a checkpoint <= seen: it prints "it seen + 1" */
      k = rnd(3) == 0 ? 0 : seen + 1 + (int)rnd(2);
      if (k > ITERS) k = ITERS;
      delay = k == 0 ? rnd(60000) : rnd(20000);
    }
    rc = run_session(crash_name, a_res, k, delay, &last);
    sessions++;
    *kills += rc == 128 + SIGKILL;
    if (rc == 128 + SIGKILL) *in_write += left_tmp(rd);
    if (last > seen) seen = last;
    snprintf(trail + strlen(trail), sizeof trail - strlen(trail), "; resumed, %s%d (exit %d)",
             rc == 0 ? "to the end, last it " : k == 0 ? "killed while starting, last it " : "killed at it ",
             rc == 0 || k == 0 ? last : k, rc);
    if (rc != 0 && rc != 128 + SIGKILL) {
      fprintf(stderr, "\n  %s: --resume failed (exit %d; %s/%s.err): %s\n", c->name, rc, bcg_test_tmpdir(), crash_name,
              trail);
      return 0;
    }
    done = rc == 0;
  }
  if (!done) {
    fprintf(stderr, "\n  %s: not finished: %s\n", c->name, trail);
    return 0;
  }
  /* the curves and every checkpoint left, bit for bit */
  char la[PATH_MAX + 16], lb[PATH_MAX + 16], ka[64], kb[64];
  snprintf(la, sizeof la, "%s/log.h5", ref);
  snprintf(lb, sizeof lb, "%s/log.h5", rd);
  int nc = 0, d = h5same(la, lb, h5same_skip_log, c->name, &nc);
  if (d != 0 || nc < 10) ok = 0, fprintf(stderr, "  %s: log.h5 differs (%d curves the same)\n", c->name, nc);
  ckpt_list(ref, ka, sizeof ka);
  ckpt_list(rd, kb, sizeof kb);
  if (strcmp(ka, "4 5 6") || strcmp(ka, kb))
    ok = 0, fprintf(stderr, "  %s: checkpoints left: %s, after the kills: %s\n", c->name, ka, kb);
  for (int it = 4; it <= ITERS; it++) {
    char pa[PATH_MAX + 64], pb[PATH_MAX + 64];
    bcg_train_checkpoint_path(ref, it, pa, sizeof pa);
    bcg_train_checkpoint_path(rd, it, pb, sizeof pb);
    d = h5same(pa, pb, h5same_skip_ckpt, c->name, &nc);
    if (d != 0 || nc < 10) ok = 0, fprintf(stderr, "  %s: checkpoint %d differs (%d datasets the same)\n", c->name, it, nc);
  }
  printf("  %-26s %s: %s\n", c->name, ok ? "same" : "DIFFERENT", trail);
  return ok;
}

static void test_kill_resume(void) {
  const char *s = getenv("BCG_CRASH_SEED");
  uint64_t seed = s && *s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
  rng = seed * 0x9E3779B97F4A7C15ull + 1;
  printf("\n  kill points from seed %llu (BCG_CRASH_SEED=%llu repeats them)\n", (unsigned long long)seed,
         (unsigned long long)seed);
  int kills = 0, in_write = 0, failed = 0;
  for (int i = 0; i < NCASES; i++) {
    int ok = crash_case_run(&cases[i], &kills, &in_write);
    if (!ok) failed++;
    CU_ASSERT(ok);
  }
  bcg_test_report("plugin combinations killed and resumed", NCASES);
  bcg_test_report("kills", kills);
  bcg_test_report("kills that left a log.h5 or checkpoint write unfinished (*.tmp)", in_write);
  bcg_test_report("combinations differing from the uninterrupted run", failed);
}

BCG_TESTS({"kill -9 and resume: bit-identical curves and checkpoints", test_kill_resume});
BCG_RUN("crash")
