/* cmd_bench.c - `bcg bench`: physics steps per second on the CPU beside
 * MuJoCo's own mj_step on the same model and state, measured in the same run;
 * `bcg bench --train CONFIG`: seconds per training iteration of any config
 * and where they go (bench_train below); `bcg bench --train RUN_DIR`: the
 * same for a run resumed from its latest checkpoint (a copy of it).
 *
 * Unit: one substep at the model's timestep (the same unit as one mj_step).
 * Forward = bcg_sim_substep; forward+backward = a substep plus its adjoint
 * (which recomputes the substep from its saved input, as training does).
 * The state is the model's default pose standing on the floor (lowest
 * contact point 1 mm deep), zero action, PD actuation holding the pose.
 *
 * Statistic: by default each rate is that of the fastest of many short
 * repetitions (one batch call of bcg, 16 mj_steps of MuJoCo from the same
 * state), so that another process's load on a shared machine, which only
 * ever slows a repetition down, drops out of both sides of the ratio alike;
 * --mean reports total work over total time instead (both sides). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <mujoco/mujoco.h>

#include "bcg/config.h"
#include "bcg/loader.h"
#include "bcg/mjref.h"
#include "bcg/nn.h"
#include "bcg/sim.h"
#include "bcg/train.h"
#include "bcg/version.h"
#include "cmd.h"

int openblas_get_num_threads(void); /* libopenblas */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void cpu_name(char *buf, size_t len) {
  snprintf(buf, len, "unknown CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "model name", 10) == 0) {
      char *c = strchr(line, ':');
      if (c) {
        c += 2;
        c[strcspn(c, "\n")] = 0;
        snprintf(buf, len, "%s", c);
      }
      break;
    }
  fclose(f);
}

/* "machine: CPU, cores online, the process's affinity mask (host); load
 * average at the start" (both benchmarks) */
static void print_machine(void) {
  char cpu[256], host[256] = "?";
  cpu_name(cpu, sizeof cpu);
  gethostname(host, sizeof host);
  cpu_set_t cs;
  int naff = sched_getaffinity(0, sizeof cs, &cs) == 0 ? CPU_COUNT(&cs) : -1;
  double la[3] = {-1, -1, -1};
  FILE *lf = fopen("/proc/loadavg", "r");
  if (lf) {
    if (fscanf(lf, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = -1;
    fclose(lf);
  }
  printf("machine: %s, %ld cores online, %d in this process's affinity mask (%s); load average %.2f %.2f %.2f at the "
         "start\n",
         cpu, sysconf(_SC_NPROCESSORS_ONLN), naff, host, la[0], la[1], la[2]);
}

/* the benchmark state: default pose, lowest contact point at -1 mm */
static void bench_state(const bcg_model *model, bcg_real *q, bcg_real *u) {
  const bcg_mdata *m = &model->m;
  for (int i = 0; i < m->nq; i++) q[i] = m->qpos0[i];
  for (int i = 0; i < m->nv; i++) u[i] = 0;
  if (!m->has_floor || m->ncp == 0) return;
  static bcg_kin k;
  bcg_kinematics(m, q, &k);
  if (bcg_has_free_root(m)) q[m->jnt_qposadr[m->body_jntadr[1]] + 2] -= (bcg_real)0.001 + bcg_lowest_gap(m, &k);
}

typedef struct result {
  double fwd, fwdbwd;
  int nact;
  double stage_us[BCG_SIM_NSTAGE]; /* split: microseconds per environment-substep in each stage */
} result;

/* the statistic of a set of repetitions: the fastest one, or the mean */
typedef struct rep_stat {
  double best, sum;
  long n;
} rep_stat;
static void rep_add(rep_stat *s, double t) {
  if (!s->n || t < s->best) s->best = t;
  s->sum += t;
  s->n++;
}
/* seconds per repetition */
static double rep_time(const rep_stat *s, int mean) { return mean ? s->sum / (double)s->n : s->best; }

/* time one batch of n environments on the current OpenMP thread count:
 * repetitions of one call each for `seconds` (forward, then forward +
 * backward), then `seconds` more with the stage timing on for the split */
static int time_sim(bcg_sim *sim, const bcg_model *model, int n, double seconds, int mean, result *r) {
  const bcg_mdata *m = &model->m;
  int nq = m->nq, nv = m->nv, nu = m->nu;
  bcg_real *q = malloc(sizeof(bcg_real) * n * nq), *u = malloc(sizeof(bcg_real) * n * nv);
  bcg_real *qo = malloc(sizeof(bcg_real) * n * nq), *uo = malloc(sizeof(bcg_real) * n * nv);
  bcg_real *a = calloc((size_t)n * nu, sizeof(bcg_real)), *ab = calloc((size_t)n * nu, sizeof(bcg_real));
  bcg_real *qb = malloc(sizeof(bcg_real) * n * nv), *ub = malloc(sizeof(bcg_real) * n * nv);
  bcg_real *qob = calloc((size_t)n * nv, sizeof(bcg_real)), *uob = calloc((size_t)n * nv, sizeof(bcg_real));
  if (!q || !u || !qo || !uo || !a || !ab || !qb || !ub || !qob || !uob) return -1;
  bcg_real q0[BCG_MAX_Q], u0[BCG_MAX_DOF];
  bench_state(model, q0, u0);
  for (int e = 0; e < n; e++) {
    memcpy(q + (size_t)e * nq, q0, sizeof(bcg_real) * nq);
    memcpy(u + (size_t)e * nv, u0, sizeof(bcg_real) * nv);
  }
  for (int i = 0; i < n * nv; i++) uob[i] = 1;
  /* forward: step the same input repeatedly (the state stays in contact) */
  bcg_sim_substep(sim, n, q, u, a, qo, uo); /* warm-up */
  bcg_sim_substep_vjp(sim, n, q, u, a, qob, uob, qb, ub, ab);
  r->nact = sim->nact[0];
  rep_stat f = {0, 0, 0}, fb = {0, 0, 0};
  double t0 = now(), t = t0;
  while (t - t0 < seconds) {
    double ta = now();
    bcg_sim_substep(sim, n, q, u, a, qo, uo);
    t = now();
    rep_add(&f, t - ta);
  }
  t0 = t = now();
  while (t - t0 < seconds) {
    double ta = now();
    bcg_sim_substep(sim, n, q, u, a, qo, uo);
    bcg_sim_substep_vjp(sim, n, q, u, a, qob, uob, qb, ub, ab);
    t = now();
    rep_add(&fb, t - ta);
  }
  r->fwd = n / rep_time(&f, mean);
  r->fwdbwd = n / rep_time(&fb, mean);
  /* the split: forward + backward again with the stepper's stage timing on
   * (off above, so the rates carry none of its clock reads); each stage's
   * time per repetition, the fastest or the mean as the rates */
  rep_stat st[BCG_SIM_NSTAGE];
  memset(st, 0, sizeof st);
  t0 = now();
  do {
    bcg_sim_set_timing(sim, 1);
    bcg_sim_substep(sim, n, q, u, a, qo, uo);
    bcg_sim_substep_vjp(sim, n, q, u, a, qob, uob, qb, ub, ab);
    double sec[BCG_SIM_NSTAGE];
    bcg_sim_stage_seconds(sim, sec);
    bcg_sim_set_timing(sim, 0);
    for (int i = 0; i < BCG_SIM_NSTAGE; i++) rep_add(&st[i], sec[i]);
  } while (now() - t0 < seconds);
  for (int i = 0; i < BCG_SIM_NSTAGE; i++) r->stage_us[i] = 1e6 * rep_time(&st[i], mean) / n;
  free(q); free(u); free(qo); free(uo); free(a); free(ab); free(qb); free(ub); free(qob); free(uob);
  return 0;
}

static int make_config(const char *contact, const char *model_path, bcg_config **cfg, char *err, size_t errlen) {
  char path[PATH_MAX];
  const char *td = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/bcg_bench_XXXXXX", td && td[0] ? td : "/tmp");
  int fd = mkstemp(path);
  if (fd < 0) return snprintf(err, errlen, "cannot create a temporary config"), -1;
  FILE *f = fdopen(fd, "w");
  fprintf(f, "[model]\npath = %s\n[sim]\nactuation = pd\n", model_path);
  if (contact) fprintf(f, "[contact]\nplugin = %s\n", contact);
  fclose(f);
  int rc = bcg_config_load_with(cfg, bcg_registry_global(), path, 0, NULL, err, errlen);
  unlink(path);
  return rc;
}

/* ---- bcg bench --train CONFIG [--iterations N] [section.key=value ...] ----
 *
 * The training loop itself (bcg_train_run, so the numbers are those of `bcg
 * train`) for 1 + N iterations into a temporary run directory that is removed
 * afterwards; the first iteration is a warm-up (first-touch allocations,
 * caches, OpenMP and OpenBLAS thread start-up). Over the N measured
 * iterations: wall time per iteration split into the process-wide clocks
 * `bcg train` prints at its end (physics forward and adjoint, networks,
 * task, estimator; bcg_env_time, bcg_nn_time, bcg_session_time) and the rest
 * (learner bookkeeping, optimiser, logging), samples per second, the thread
 * counts and the machine. Periodic checkpoints are off (checkpoint_every = 0;
 * the final one is written after the measurement).
 *
 * With a run directory instead of CONFIG, its config.ini, log.h5 and latest
 * checkpoint are copied into the temporary directory and the copy is
 * resumed (`bcg train --resume`'s path) for the 1 + N iterations: the
 * iterations a long run is at, not an untrained policy's first ones (which
 * for SHAC+BCG cost several times more: fallen robots, many contacts and
 * bundles). The run directory itself is only read. Overrides are those
 * `bcg train --resume` allows (run.threads, ...). */

typedef struct bt_snap {
  double t, sim, vjp, nn, task, est, beside;
  uint64_t samples;
  bcg_nn_cuda_split gpu; /* --nn-split */
} bt_snap;

typedef struct bt_ctx {
  int64_t warm, last;
  bt_snap s[2];
  int threads, blas_threads;
} bt_ctx;

static bt_snap bt_now(uint64_t samples) {
  bt_snap s;
  double f, b;
  s.t = now();
  bcg_env_time(&s.sim, &s.vjp);
  bcg_nn_time(&f, &b);
  s.nn = f + b;
  s.beside = bcg_nn_time_overlapped();
  bcg_session_time(&s.task, &s.est);
  bcg_nn_cuda_profile_read(&s.gpu);
  s.samples = samples;
  return s;
}

static int bt_on_iteration(void *ctx, int64_t done, uint64_t samples, double wall, const bcg_learner_stats *st) {
  bt_ctx *c = ctx;
  (void)wall;
  (void)st;
  if (done == c->warm) {
    c->s[0] = bt_now(samples);
    c->threads = omp_get_max_threads();
    (void)bcg_blas_describe(); /* bcg's OpenBLAS set-up (one thread) runs at the first CPU GEMM: a run whose
                                   GEMMs all went to cuBLAS has not had one yet, and would print OpenBLAS's default */
    c->blas_threads = openblas_get_num_threads();
  }
  if (done == c->last) c->s[1] = bt_now(samples);
  return 0;
}

static void rm_run_dir(const char *dir) {
  char p[PATH_MAX + 300];
  snprintf(p, sizeof p, "%s/checkpoints", dir);
  DIR *d = opendir(p);
  struct dirent *de;
  if (d) {
    while ((de = readdir(d)))
      if (de->d_name[0] != '.') {
        snprintf(p, sizeof p, "%s/checkpoints/%s", dir, de->d_name);
        unlink(p);
      }
    closedir(d);
  }
  snprintf(p, sizeof p, "%s/checkpoints", dir);
  rmdir(p);
  if ((d = opendir(dir))) {
    while ((de = readdir(d)))
      if (de->d_name[0] != '.') {
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
      }
    closedir(d);
  }
  rmdir(dir);
}

/* the commit of the checkout bcg runs in, when there is one */
static void git_commit(char *buf, size_t len) {
  snprintf(buf, len, "unknown (not run in a git checkout)");
  FILE *p = popen("git rev-parse --short=12 HEAD 2>/dev/null && git status --porcelain -uno 2>/dev/null | head -n 1", "r");
  if (!p) return;
  char line[256] = "", dirty[256] = "";
  if (fgets(line, sizeof line, p) && line[0]) {
    line[strcspn(line, "\n")] = 0;
    int d = fgets(dirty, sizeof dirty, p) != NULL;
    snprintf(buf, len, "%s%s", line, d ? " (with uncommitted changes)" : "");
  }
  pclose(p);
}

/* --nn-split: the networks' time per iteration split into the device calls'
 * phases (bcg_nn_cuda_profile) and the calls that ran on the CPU */
static void print_nn_split(const bcg_nn_cuda_split *a, const bcg_nn_cuda_split *b, double n, double nn) {
  long nf = b->forwards - a->forwards, nb = b->backwards - a->backwards;
  printf("\nnetworks per iteration (--nn-split: each phase of a device call waits for the device, so the calls\n"
         "are a little slower than without it):\n");
  if (nf + nb == 0) {
    printf("  no call ran on the GPU ([run] device = cuda and batches of at least [run] nn_min_batch rows do)\n");
    return;
  }
  double ph[7] = {b->params - a->params, b->inputs - a->inputs, b->gemm - a->gemm, b->elementwise - a->elementwise,
                  b->layernorm - a->layernorm, b->sums - a->sums, b->outputs - a->outputs};
  static const char *nm[7] = {"parameters in", "inputs in", "GEMM (cuBLAS)", "bias, activation",
                              "LayerNorm", "batch sums", "outputs back"};
  double tot = (b->total - a->total) / n, sum = 0;
  printf("  on the GPU: %.1f forwards (%.0f rows each on average), %.1f backwards\n", nf / n,
         nf ? (double)(b->rows - a->rows) / nf : 0.0, nb / n);
  printf("  %-34s %10s %8s\n", "per iteration", "s", "share");
  for (int k = 0; k < 7; k++) {
    sum += ph[k] / n;
    printf("  %-34s %10.6f %7.1f%%\n", nm[k], ph[k] / n, nn > 0 ? 100 * ph[k] / n / nn : 0);
  }
  printf("  %-34s %10.6f %7.1f%%\n", "the rest of the device calls", tot - sum, nn > 0 ? 100 * (tot - sum) / nn : 0);
  printf("  %-34s %10.6f %7.1f%%\n", "device calls", tot, nn > 0 ? 100 * tot / nn : 0);
  printf("  %-34s %10.6f %7.1f%%\n", "CPU calls, host work around GPU calls", nn - tot,
         nn > 0 ? 100 * (nn - tot) / nn : 0);
  long ns = b->steps - a->steps;
  if (ns) /* bcg_mlp_clip_adam of held networks: the learner's own time, outside the calls above */
    printf("  optimiser steps on the GPU (held networks): %.1f per iteration, %.6f s (in \"the rest\")\n", ns / n,
           (b->optimizer - a->optimizer) / n);
}

/* dst = the file src (bytes); 0 or -1 with errno */
static int copy_file(const char *src, const char *dst) {
  FILE *a = fopen(src, "rb"), *b = a ? fopen(dst, "wb") : NULL;
  int rc = a && b ? 0 : -1;
  char buf[1 << 16];
  size_t k;
  while (!rc && (k = fread(buf, 1, sizeof buf, a)) > 0)
    if (fwrite(buf, 1, k, b) != k) rc = -1;
  if (!rc && ferror(a)) rc = -1;
  if (a) fclose(a);
  if (b && fclose(b)) rc = -1;
  return rc;
}

/* --train RUN_DIR: config.ini, log.h5 (if any) and the latest checkpoint into
 * tmp; returns the checkpoint's iteration, or -1 after printing why */
static int64_t copy_run(const char *dir, const char *tmp) {
  char src[PATH_MAX + 32], dst[2 * PATH_MAX + 96], ck[PATH_MAX + 64];
  snprintf(src, sizeof src, "%s/config.ini", dir);
  if (access(src, R_OK)) return bcg_cli_error("%s: cannot read: %s (not a run directory?)", src, strerror(errno)), -1;
  int64_t it = bcg_train_latest_checkpoint(dir, ck, sizeof ck);
  if (it < 0) return bcg_cli_error("%s: no checkpoint to resume from (checkpoints/ckpt_*.h5)", dir), -1;
  snprintf(dst, sizeof dst, "%s/config.ini", tmp);
  if (copy_file(src, dst)) return bcg_cli_error("%s: cannot copy to %s: %s", src, dst, strerror(errno)), -1;
  snprintf(src, sizeof src, "%s/log.h5", dir);
  snprintf(dst, sizeof dst, "%s/log.h5", tmp);
  if (!access(src, R_OK) && copy_file(src, dst))
    return bcg_cli_error("%s: cannot copy to %s: %s", src, dst, strerror(errno)), -1;
  const char *base = strrchr(ck, '/');
  snprintf(dst, sizeof dst, "%s/checkpoints/%s", tmp, base ? base + 1 : ck);
  if (copy_file(ck, dst)) return bcg_cli_error("%s: cannot copy to %s: %s", ck, dst, strerror(errno)), -1;
  return it;
}

static int bench_train(int argc, char **argv) {
  const char *path = NULL;
  long iters = 3;
  const char *ov[300];
  int nov = 0, nn_split = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--nn-split")) nn_split = 1;
    else if (!strcmp(argv[i], "--train")) {
      if (i + 1 == argc) return bcg_cli_usage("bench", "--train needs CONFIG");
      path = argv[++i];
    }
    else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) {
      char *e;
      iters = strtol(argv[++i], &e, 10);
      if (e == argv[i]) iters = 0;
      if (*e || iters < 1 || iters > 1000000) return bcg_cli_usage("bench", "--iterations must be a positive integer");
    } else if (argv[i][0] != '-' && strchr(argv[i], '=') && nov < 256) ov[nov++] = argv[i];
    else
      return bcg_cli_usage("bench", "unknown argument '%s' (with --train: --iterations N, --nn-split and section.key=value)",
                           argv[i]);
  }
  if (!path) return bcg_cli_usage("bench", "--train needs CONFIG");
  int from_run = bcg_cli_is_dir(path);
  for (int i = 0; from_run && i < nov; i++)
    if (!bcg_cli_bench_override(ov[i]))
      return bcg_cli_usage("bench",
                           "'%.*s' cannot change when resuming a run (only " BCG_CLI_RESUME_KEYS
                           ", and for a measurement " BCG_CLI_BENCH_KEYS ")",
                           (int)(strchr(ov[i], '=') - ov[i]), ov[i]);
  char tmpl[PATH_MAX];
  const char *td = getenv("TMPDIR");
  snprintf(tmpl, sizeof tmpl, "%s/bcg_bench_train_XXXXXX", td && td[0] ? td : "/tmp");
  if (!mkdtemp(tmpl)) return bcg_cli_error("%s: cannot create a temporary run directory: %s", tmpl, strerror(errno));
  char ck[PATH_MAX + 16];
  snprintf(ck, sizeof ck, "%s/checkpoints", tmpl);
  if (mkdir(ck, 0755)) {
    rmdir(tmpl);
    return bcg_cli_error("%s: cannot create: %s", ck, strerror(errno));
  }
  int64_t it0 = 0; /* the iteration the measurement starts from */
  char run_cfg[PATH_MAX + 32];
  if (from_run) {
    if ((it0 = copy_run(path, tmpl)) < 0) {
      rm_run_dir(tmpl);
      return BCG_EXIT_ERROR;
    }
    snprintf(run_cfg, sizeof run_cfg, "%s/config.ini", tmpl);
  }
  /* the budget is the bench's: these come after the caller's overrides */
  char it_ov[64];
  snprintf(it_ov, sizeof it_ov, "run.iterations=%lld", (long long)(it0 + iters + 1));
  char *av[320];
  int ac = 0;
  av[ac++] = "bench";
  av[ac++] = from_run ? run_cfg : (char *)path;
  for (int i = 0; i < nov; i++) av[ac++] = (char *)ov[i];
  av[ac++] = it_ov;
  av[ac++] = "run.samples=0";
  av[ac++] = "run.seconds=0";
  av[ac++] = "run.checkpoint_every=0";
  bcg_config *cfg = NULL;
  int rc = bcg_cli_load_config("bench", ac, av, &cfg);
  if (!rc) rc = bcg_cli_check_semantics(cfg);
  if (rc) {
    rm_run_dir(tmpl);
    bcg_config_free(cfg);
    return rc;
  }

  char commit[300], stamp[64];
  git_commit(commit, sizeof commit);
  time_t tt = time(NULL);
  strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC", gmtime(&tt));
  const char *wp = getenv("OMP_WAIT_POLICY");
  const bcg_plugin *pl[4] = {bcg_config_plugin(cfg, BCG_KIND_LEARNER), bcg_config_plugin(cfg, BCG_KIND_ESTIMATOR),
                             bcg_config_plugin(cfg, BCG_KIND_CONTACT), bcg_config_plugin(cfg, BCG_KIND_TASK)};
  printf("bcg %s bench --train %s  %s\n", BCG_VERSION, path, stamp);
  print_machine();
  printf("commit: %s\nprecision: %s; device: %s; OMP_WAIT_POLICY %s\n", commit, BCG_REAL_NAME,
         bcg_config_get_string(cfg, "run", "device"), wp && wp[0] ? wp : "unset");
  printf("config: %s (learner %s, estimator %s, contact %s, task %s), %ld environments\n",
         from_run ? "the run's config.ini" : path, pl[0] ? pl[0]->desc->name : "-",
         pl[1] ? pl[1]->desc->name : "-", pl[2] ? pl[2]->desc->name : "-", pl[3] ? pl[3]->desc->name : "-",
         bcg_config_get_int(cfg, "run", "num_envs"));
  if (from_run) printf("resumed: %s at iteration %lld (a copy; the run is not changed)\n", path, (long long)it0);
  fflush(stdout);

  bt_ctx c;
  memset(&c, 0, sizeof c);
  c.warm = it0 + 1;
  c.last = it0 + 1 + iters;
  bcg_train_options opt;
  memset(&opt, 0, sizeof opt);
  opt.run_dir = tmpl;
  opt.resume = from_run;
  opt.on_iteration = bt_on_iteration;
  opt.ctx = &c;
  bcg_train_result res;
  char err[4096];
  bcg_nn_cuda_profile(nn_split);
  rc = bcg_train_run(cfg, &opt, &res, err, sizeof err);
  bcg_nn_cuda_profile(0);
  rm_run_dir(tmpl);
  char fdk[16];
  snprintf(fdk, sizeof fdk, "%s", bcg_config_get_string(cfg, "run", "flush_denormals"));
  bcg_config_free(cfg);
  if (rc) return bcg_cli_error("%s", err);
  if (res.iterations < c.last)
    return bcg_cli_error("bench --train: the run stopped after %lld iterations", (long long)res.iterations);

  const bt_snap *a = &c.s[0], *b = &c.s[1];
  double n = (double)iters, wall = b->t - a->t;
  double part[6] = {(b->sim - a->sim) / n, (b->vjp - a->vjp) / n, (b->nn - a->nn) / n, (b->task - a->task) / n,
                    (b->est - a->est) / n, 0};
  double total = wall / n;
  part[5] = total - part[0] - part[1] - part[2] - part[3] - part[4];
  static const char *names[6] = {"physics forward", "physics adjoint", "networks", "task", "estimator",
                                 "the rest"};
  int ftz = bcg_cpu_denormals_flushed();
  printf("threads: %d (OpenMP), OpenBLAS %d; %s; %s; subnormals %s ([run] flush_denormals = %s)\n", c.threads,
         c.blas_threads, bcg_blas_describe(), bcg_nn_act_describe(),
         ftz > 0 ? "flushed to zero" : ftz == 0 ? "kept" : "as the CPU has them", fdk);
  printf("iterations: %ld measured after 1 warm-up, %.3f s\n\n", iters, wall);
  printf("%-18s %12s %8s\n", "per iteration", "s", "share");
  for (int k = 0; k < 6; k++) printf("%-18s %12.6f %7.1f%%\n", names[k], part[k], total > 0 ? 100 * part[k] / total : 0);
  printf("%-18s %12.6f %7.1f%%\n", "total", total, 100.0);
  double beside = (b->beside - a->beside) / n;
  if (beside > 0)
    printf("%-18s %12.6f          (on a thread of its own during the backward pass, [learner] critic_overlap:\n"
           "%-18s %12s           overlapped with the rows above, not in the total)\n",
           "networks beside", beside, "", "");
  double spi = (double)(b->samples - a->samples) / n;
  printf("\nsamples: %.0f per iteration, %.0f samples/s\n", spi, wall > 0 ? spi * n / wall : 0);
  printf("(the rest: the learner's own work: sampling, losses, advantages, gathers, Adam, normalisers; logging)\n");
  if (nn_split) print_nn_split(&a->gpu, &b->gpu, n, part[2]);
  return BCG_EXIT_OK;
}

int bcg_cmd_bench(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--train")) return bench_train(argc, argv);
  const char *model_path = NULL, *only = NULL;
  double seconds = 1.0;
  int envs = 64, mean = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--mean")) mean = 1;
    else if (!strcmp(argv[i], "--model") && i + 1 < argc) model_path = argv[++i];
    else if (!strcmp(argv[i], "--contact") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--envs") && i + 1 < argc) envs = atoi(argv[++i]);
    else return bcg_cli_usage("bench", "unknown argument '%s'", argv[i]);
  }
  if (!(seconds > 0) || envs < 1) return bcg_cli_usage("bench", "--seconds and --envs must be positive");
  if (only && strcmp(only, "none") && strcmp(only, "soft") && strcmp(only, "smoothed_kappa") && strcmp(only, "hard"))
    return bcg_cli_usage("bench", "--contact '%s': one of none, soft, smoothed_kappa, hard", only);
  if (!model_path) model_path = bcg_model_default_path();
  char err[2048];
  bcg_model *model = bcg_model_load(model_path, err, sizeof err);
  if (!model) return bcg_cli_error("%s", err);
  const bcg_mdata *m = &model->m;

  char commit[300], stamp[64];
  git_commit(commit, sizeof commit);
  time_t tt = time(NULL);
  strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC", gmtime(&tt));
  int maxthr = omp_get_max_threads();
  /* as a training's [run] flush_denormals = auto: subnormals flushed in the float build */
  bcg_cpu_denormals_setting("auto");
  int ftz = bcg_cpu_denormals_flushed() > 0;
  printf("bcg %s bench  %s\n", BCG_VERSION, stamp);
  print_machine();
  char thr[64];
  if (maxthr > 1) snprintf(thr, sizeof thr, "1 and %d (OpenMP; a row each)", maxthr);
  else snprintf(thr, sizeof thr, "1 (OpenMP)");
  printf("commit: %s\nthreads: %s\nprecision: %s%s\nmodel: %s (nq %d, nv %d, nu %d, "
         "%d contact slots)\nunit: physics steps (one substep of %g s, the unit of one mj_step) per second\n"
         "state: default pose %s, PD holding it, %d environments per batch\n\n",
         commit, thr, BCG_REAL_NAME,
         ftz ? " (subnormals flushed to zero, as training's [run] flush_denormals = auto does in this build)" : "",
         model_path, m->nq, m->nv, m->nu, m->ncp,
         (double)m->timestep,
         !m->has_floor ? "in the air: the model has no floor, so no contact is simulated"
         : m->ncp == 0 ? "in the air: no geom can touch the floor, so no contact is simulated"
         : bcg_has_free_root(m) ? "standing on the floor (lowest contact point 1 mm deep)"
                                : "(fixed or planar root, not moved onto the floor)",
         envs);

  /* MuJoCo reference: mj_step on the same model and state, one thread */
  double mj = 0;
  {
    bcg_mjref *r = bcg_mjref_new(model, 0);
    if (!r) return bcg_cli_error("cannot create the MuJoCo reference for %s", model_path);
    bcg_real q0[BCG_MAX_Q], u0[BCG_MAX_DOF];
    bench_state(model, q0, u0);
    double qd[BCG_MAX_Q], ud[BCG_MAX_DOF];
    for (int i = 0; i < m->nq; i++) qd[i] = q0[i];
    for (int i = 0; i < m->nv; i++) ud[i] = u0[i];
    bcg_mjref_steps_per_sec(r, qd, ud, NULL, 200); /* warm-up */
    /* repetitions of 16 steps from the state (it stays in contact) */
    const int nst = 16;
    rep_stat ms = {0, 0, 0};
    double t0 = now();
    do {
      double sps = bcg_mjref_steps_per_sec(r, qd, ud, NULL, nst);
      if (sps > 0) rep_add(&ms, nst / sps);
    } while (now() - t0 < seconds || !ms.n);
    mj = nst / rep_time(&ms, mean);
    printf("MuJoCo %s mj_step, 1 thread, same model and state: %.0f steps/s (%d contacts; %s of %ld repetitions of "
           "%d steps)\n\n",
           mj_versionString(), mj, bcg_mjref_ncon(r), mean ? "mean" : "fastest", ms.n, nst);
    bcg_mjref_free(r);
  }

  const char *contacts[] = {NULL, "soft", "smoothed_kappa", "hard"};
  result split[4];
  int nsplit = 0, split_ci[4];
  printf("%-16s %8s %14s %10s %14s %10s %12s %8s\n", "contact", "threads", "forward/s", "vs mj_step",
         "fwd+bwd/s", "vs mj_step", "bwd/fwd cost", "active");
  for (int ci = 0; ci < 4; ci++) {
    const char *cname = contacts[ci];
    if (only && strcmp(only, cname ? cname : "none")) continue;
    if (cname && !bcg_registry_find(bcg_registry_global(), BCG_KIND_CONTACT, cname)) {
      printf("%-16s (plugin not found)\n", cname);
      continue;
    }
    bcg_config *cfg = NULL;
    if (make_config(cname, model_path, &cfg, err, sizeof err)) return bcg_cli_error("%s", err);
    bcg_simparams sp;
    const bcg_contact_ops *ops;
    void *self;
    if (bcg_simparams_from_config(cfg, model, &sp, err, sizeof err) ||
        bcg_contact_from_config(cfg, model, &ops, &self, err, sizeof err))
      return bcg_cli_error("%s", err);
    int thr[2] = {1, maxthr};
    for (int ti = 0; ti < (maxthr > 1 ? 2 : 1); ti++) {
      omp_set_num_threads(thr[ti]);
      int n = ti == 0 ? (envs < 16 ? envs : 16) : envs;
      bcg_sim *sim = bcg_sim_create(model, &sp, n, ops, self, err, sizeof err);
      if (!sim) return bcg_cli_error("%s", err);
      result r;
      if (time_sim(sim, model, n, seconds, mean, &r)) return bcg_cli_error("out of memory");
      /* fwd+bwd costs one forward + one (recompute + adjoint) */
      printf("%-16s %8d %14.0f %9.2fx %14.0f %9.2fx %11.2fx %8d\n", cname ? cname : "none", thr[ti], r.fwd,
             r.fwd / mj, r.fwdbwd, r.fwdbwd / mj, r.fwd / r.fwdbwd, r.nact);
      if (ti == 0) split_ci[nsplit] = ci, split[nsplit++] = r;
      bcg_sim_free(sim);
    }
    omp_set_num_threads(maxthr);
    if (ops) ops->destroy(self);
    bcg_config_free(cfg);
  }
  printf("\nvs mj_step: bcg steps/s divided by MuJoCo's; bwd/fwd cost: forward rate / forward+backward rate.\n"
         "%s\n"
         "MuJoCo's step solves its own contact model (soft constraints, PGS/Newton) and computes no gradient.\n",
         mean ? "Rates: total work over total time of all repetitions (--mean), bcg's and MuJoCo's alike."
              : "Rates: the fastest of the repetitions (one batch call of bcg, 16 mj_steps), bcg's and MuJoCo's\n"
                "alike: another process's load only slows repetitions down. --mean: total work over total time.");
  if (nsplit) {
    printf("\nper-stage split, 1 thread: microseconds per physics step (bcg_sim_set_timing; measured apart from the\n"
           "rates above; each stage's %s), and the adjoint's total in forwards (the adjoint\n"
           "recomputes the substep first)\n", mean ? "mean over the repetitions" : "fastest repetition");
    printf("%-16s %8s %8s %8s %8s | %8s %8s %8s %8s %8s %8s %8s\n", "contact", "pre", "contact", "post", "forward",
           "pre(rc)", "cont(rc)", "post+vjp", "cont_vjp", "pre_vjp", "adjoint", "x fwd");
    for (int i = 0; i < nsplit; i++) {
      const double *u = split[i].stage_us;
      double f = u[0] + u[1] + u[2], b = 0;
      for (int k = BCG_SIM_STAGE_PRE_RC; k < BCG_SIM_NSTAGE; k++) b += u[k];
      const char *cname = contacts[split_ci[i]];
      printf("%-16s %8.2f %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %7.2fx\n", cname ? cname : "none",
             u[0], u[1], u[2], f, u[3], u[4], u[5], u[6], u[7], b, b / f);
    }
    printf("pre: kinematics, mass matrix and its factor, bias forces, contact points, Jacobians, Delassus matrix;\n"
           "contact: the plugin's solve; post: the second half; (rc): the adjoint's recompute; cont_vjp: the\n"
           "plugin's solve_vjp (which recomputes its sweeps on a tape).\n");
  }
  bcg_model_free(model);
  return BCG_EXIT_OK;
}
