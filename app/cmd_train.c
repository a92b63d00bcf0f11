/* cmd_train.c - bcg train CONFIG [section.key=value ...]
 *               bcg train --resume RUN_DIR [run.key=value ...]
 *
 * A new run validates the config, creates runs/<name>/<stamp>/ with
 * config.ini (resolved) and checkpoints/, and runs the training loop
 * (core/train.c), which writes log.h5 and the checkpoints. --resume reloads
 * RUN_DIR/config.ini and the latest checkpoint and continues; overrides on
 * resume may change only the [run] budget and bookkeeping keys (iterations,
 * samples, seconds, checkpoint_every, keep_last, keep_every, threads) and
 * are written back to config.ini.
 *
 * SIGINT (Ctrl-C) and SIGTERM (what schedulers send before killing a job)
 * finish the current iteration, write a checkpoint and exit 0; a second one
 * kills the process at once.
 *
 * Under an MPI launcher with P processes (bcg/dist.h), rank 0 validates the
 * config, creates the run directory (or, on resume, checks and updates it)
 * and tells the others where it is; only rank 0 prints progress and runs
 * [eval] after_train. An error on any rank ends every rank (MPI_Abort), since
 * the others would wait for it forever. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/dist.h"
#include "bcg/nn.h"
#include "bcg/loader.h"
#include "bcg/runlog.h"
#include "bcg/train.h"
#include "cmd.h"

static volatile sig_atomic_t stop_requested; /* set by the SIGINT / SIGTERM handler only */

static void on_sigint(int sig) {
  (void)sig;
  stop_requested = 1;
}

static int write_config(const bcg_config *cfg, const char *dir) {
  char path[PATH_MAX + 32], tmp[PATH_MAX + 40];
  snprintf(path, sizeof path, "%s/config.ini", dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return bcg_cli_error("%s: cannot create: %s", tmp, strerror(errno));
  int werr = bcg_config_run_write(cfg, f); /* paths made absolute */
  if (fclose(f) != 0 || werr) {
    unlink(tmp);
    return bcg_cli_error("%s: write failed", tmp);
  }
  if (rename(tmp, path) != 0) {
    unlink(tmp);
    return bcg_cli_error("%s: cannot replace: %s", path, strerror(errno));
  }
  return 0;
}

static int run(const bcg_config *cfg, const char *dir, int resume) {
  struct sigaction sa, old, old_term;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sa.sa_flags = SA_RESETHAND; /* a second Ctrl-C kills */
  sigemptyset(&sa.sa_mask);
  stop_requested = 0;
  sigaction(SIGINT, &sa, &old);
  sigaction(SIGTERM, &sa, &old_term);
  bcg_train_options opt;
  memset(&opt, 0, sizeof opt);
  opt.run_dir = dir;
  opt.resume = resume;
  const int rank0 = bcg_dist_rank() == 0;
  opt.progress = rank0 ? stdout : NULL;
  opt.progress_tty = -1;
  opt.stop = &stop_requested;
  bcg_train_result res;
  char err[4096];
  int rc = bcg_train_run(cfg, &opt, &res, err, sizeof err);
  sigaction(SIGINT, &old, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  if (rc) {
    if (bcg_dist_size() > 1) {
      bcg_cli_error("rank %d: %s", bcg_dist_rank(), err);
      bcg_dist_abort(BCG_EXIT_ERROR);
    }
    return bcg_cli_error("%s", err);
  }
  if (!rank0) return BCG_EXIT_OK;
  printf("bcg: train: %s after %lld iterations, %llu samples, %.1f s; checkpoint %s\n",
         res.stopped ? (stop_requested ? "interrupted" : "stopped") : "finished", (long long)res.iterations,
         (unsigned long long)res.samples, res.wall, res.checkpoint);
  double sess = res.time_sim + res.time_sim_vjp + res.time_nn + res.time_task + res.time_est; /* lower bound */
  printf("bcg: train: time in this session: physics forward %.1f s, physics adjoint %.1f s, networks %.1f s, "
         "task %.1f s, estimator %.1f s, the rest (learner bookkeeping, optimiser, logging, checkpoints) %.1f s\n",
         res.time_sim, res.time_sim_vjp, res.time_nn, res.time_task, res.time_est, fmax(0, res.session_wall - sess));
  double beside = bcg_nn_time_overlapped();
  if (beside > 0)
    printf("bcg: train: beside these, on a thread of their own: networks %.1f s (the critics' update during the backward "
           "pass, [learner] critic_overlap)\n",
           beside);
  fflush(stdout);
  if (!res.stopped && bcg_config_get_bool(cfg, "eval", "after_train")) {
    /* [eval] after_train: the finished run's policy evaluated as `bcg eval
     * RUN_DIR` would (eval.h5 in the run directory; bcg report reads it) */
    printf("bcg: train: [eval] after_train: bcg eval %s\n", dir);
    fflush(stdout);
    char *av[] = {"eval", (char *)dir, NULL};
    int erc = bcg_cmd_eval(2, av);
    if (erc) return bcg_cli_error("%s: the training finished, its evaluation ([eval] after_train) failed", dir);
  }
  return BCG_EXIT_OK;
}

/* rank 0's outcome of the setup (rc) and the run directory (dir), sent to
 * the other ranks of a data-parallel run: each returns rank 0's rc (rank 0
 * printed why), with dir filled in */
static int share_setup(int rc, char *dir, size_t len) {
  if (bcg_dist_size() == 1) return rc;
  int64_t v = rc;
  if (bcg_dist_bcast(&v, sizeof v, 0) || bcg_dist_bcast(dir, len, 0)) return BCG_EXIT_ERROR;
  return (int)v;
}

static int resume(int argc, char **argv) {
  if (argc < 3) return bcg_cli_usage(argv[0], "--resume needs RUN_DIR");
  const char *dir = argv[2];
  for (int i = 3; i < argc; i++) {
    const char *eq = strchr(argv[i], '=');
    if (!eq) return bcg_cli_usage(argv[0], "'%s' is not an override section.key=value", argv[i]);
    if (!bcg_cli_resume_override(argv[i]))
      return bcg_cli_usage(argv[0], "'%.*s' cannot change on resume (only " BCG_CLI_RESUME_KEYS ")",
                           (int)(eq - argv[i]), argv[i]);
  }
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/config.ini", dir);
  if (access(path, R_OK) != 0) return bcg_cli_error("%s: cannot read: %s (not a run directory?)", path, strerror(errno));
  if (bcg_train_latest_checkpoint(dir, NULL, 0) < 0)
    return bcg_cli_error("%s: no checkpoint to resume from (checkpoints/ckpt_*.h5)", dir);
  char *av[260];
  int ac = 0;
  av[ac++] = argv[0];
  av[ac++] = path;
  for (int i = 3; i < argc && ac < 258; i++) av[ac++] = argv[i];
  bcg_config *cfg;
  int rc = bcg_cli_load_config(argv[0], ac, av, &cfg);
  if (rc) return rc;
  rc = bcg_cli_check_semantics(cfg);
  char err[2048];
  if (bcg_dist_rank() == 0) { /* the other ranks read config.ini as it was: only run keys may change */
    if (!rc && bcg_train_lock_probe(dir, err, sizeof err)) rc = bcg_cli_error("%s", err); /* before config.ini changes */
    if (!rc && argc > 3) rc = write_config(cfg, dir);
  }
  char d[PATH_MAX];
  snprintf(d, sizeof d, "%s", dir);
  rc = share_setup(rc, d, sizeof d);
  if (!rc) {
    if (bcg_dist_rank() == 0) printf("bcg: train: resuming %s\n", dir);
    fflush(stdout);
    rc = run(cfg, dir, 1);
  }
  bcg_config_free(cfg);
  return rc;
}

/* the GPU each rank was given (bcg_dist_init: CUDA_VISIBLE_DEVICES), as
 * "3, 5" in rank order into out, or "" when no rank has one; collective */
static void rank_gpus(char *out, size_t len) {
  enum { W = 32 };
  const int n = bcg_dist_size();
  out[0] = 0;
  char mine[W] = "", *all = calloc((size_t)n, W);
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  if (v) snprintf(mine, W, "%s", v);
  if (all && !bcg_dist_allgather(mine, W, all)) {
    int any = 0;
    for (int r = 0; r < n; r++) any |= all[(size_t)r * W] != 0;
    for (int r = 0; r < n && any; r++) {
      size_t u = strlen(out);
      snprintf(out + u, len - u, "%s%.*s", r ? ", " : "", W, all[(size_t)r * W] ? all + (size_t)r * W : "-");
    }
  }
  free(all);
}

/* a new run's checks, its directory and config.ini (rank 0) */
static int setup_new(const bcg_config *cfg, char *dir, size_t len, const char *gpus) {
  int rc = bcg_cli_check_session(cfg);
  if (rc) return rc;
  char err[2048];
  const char *name = bcg_config_get_string(cfg, "run", "name");
  if (bcg_rundir_create(bcg_config_get_string(cfg, "run", "out_dir"), name, dir, len, err, sizeof err)) {
    char e2[2200];
    bcg_config_errorf(cfg, "run", strchr(name, '/') ? "name" : "out_dir", e2, sizeof e2, "%s", err);
    return bcg_cli_error("%s", e2);
  }
  if ((rc = write_config(cfg, dir))) return rc;
  if (bcg_dist_size() > 1)
    printf("bcg: train: run directory %s (%d processes, %ld environments each%s%s)\n", dir, bcg_dist_size(),
           bcg_config_get_int(cfg, "run", "num_envs"), gpus[0] ? "; CUDA_VISIBLE_DEVICES by rank: " : "", gpus);
  else
    printf("bcg: train: run directory %s\n", dir);
  fflush(stdout);
  return 0;
}

int bcg_cmd_train(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--resume")) return resume(argc, argv);
  bcg_config *cfg;
  int rc = bcg_cli_load_config(argv[0], argc, argv, &cfg);
  if (rc) return rc;
  rc = bcg_cli_check_semantics(cfg);
  for (int k = BCG_KIND_ESTIMATOR; k <= BCG_KIND_TASK && rc == 0; k++)
    if (!bcg_config_plugin(cfg, (bcg_kind)k)) {
      char names[1024];
      bcg_registry_names(bcg_registry_global(), (bcg_kind)k, names, sizeof names);
      rc = bcg_cli_error("%s: [%s]: training needs this section with 'plugin = NAME' (available: %s)",
                         bcg_config_path(cfg), bcg_kind_name((bcg_kind)k), names[0] ? names : "none");
    }
  char dir[PATH_MAX] = "", gpus[1024];
  rank_gpus(gpus, sizeof gpus); /* every rank: collective */
  /* everything created once before the run directory is: a config that
   * cannot train leaves nothing behind (rank 0 alone, for every rank: the
   * ranks run the same config) */
  if (!rc && bcg_dist_rank() == 0) rc = setup_new(cfg, dir, sizeof dir, gpus);
  if ((rc = share_setup(rc, dir, sizeof dir))) goto out;
  rc = run(cfg, dir, 0);
out:
  bcg_config_free(cfg);
  return rc;
}
