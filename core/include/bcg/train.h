/* bcg/train.h - what the training loop hands a learner, and what a learner
 * reports each iteration. */
#ifndef BCG_TRAIN_H
#define BCG_TRAIN_H

#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include "bcg/env.h"
#include "bcg/plugin.h"

BCG_BEGIN_DECLS

typedef struct bcg_runlog bcg_runlog; /* bcg/runlog.h */
typedef struct bcg_config bcg_config; /* bcg/config.h */
typedef struct bcg_plugin bcg_plugin; /* bcg/loader.h */

struct bcg_trainer {
  bcg_env *env;
  const bcg_task_ops *task_ops;
  void *task;
  const bcg_estimator_ops *est_ops;
  void *est;
  const bcg_plugin *estimator; /* descriptor and file, for messages */
  const bcg_config *cfg;
  uint64_t seed;
  int64_t iteration;      /* the iteration about to run (0-based) */
  int64_t max_iterations; /* the budget in iterations, for schedules */
  bcg_runlog *log;        /* extra curves: bcg_runlog_append(log, name, value); NULL on ranks other than 0 */
  int threads;
  /* (appended in SDK 1.2, with the services' dist_* entries: read them only
   * when BCG_SVC_HAS(svc, dist_same), an older host has neither) a
   * data-parallel run (bcg/dist.h): this process's rank and the number of
   * ranks (1: one process); seed above is the rank's own ([run] rank_seed);
   * check_replicas: compare the parameters across the ranks after every
   * update ([run] check_replicas) */
  int rank, world, check_replicas;
};

/* Filled by a learner's iterate(); the loop logs every field. */
struct bcg_learner_stats {
  double mean_return;    /* mean undiscounted return of episodes finished this iteration (NaN if none) */
  double mean_ep_len;    /* mean length (steps) of those episodes (NaN if none) */
  double mean_reward;    /* mean per-step reward over the iteration's rollout */
  double actor_loss, critic_loss;
  double grad_norm;      /* policy-gradient norm before clipping */
  double grad_var;       /* policy-gradient variance across environments (NaN if not measured) */
  double lr;             /* actor learning rate used */
  double action_std;     /* mean action standard deviation */
  double bundle_frac;    /* fraction of transitions that bundled / truncated (NaN if n/a) */
  uint64_t samples;      /* simulated control steps this iteration, every branch counted */
  int nan_resets;        /* environments reset because of a NaN/Inf this iteration */
  int episodes;          /* episodes finished this iteration */
  int skipped_updates;   /* parameter updates skipped because a gradient was not finite */
  double track_err;      /* mean tracking error (m) of the rollout's transitions, for tasks with the optional
                            tracking_error op (else NaN, and the curve is not logged) */
};

/* ---- the training loop (core/train.c) -------------------------------------
 *
 * bcg_train_run builds the env ([model] [sim] [contact], [run] num_envs), the
 * task ([task]), the estimator ([estimator], with the learner's horizon: the
 * [learner] key `horizon` when the learner has BCG_CAP_NEEDS_BACKWARD, else
 * 0) and the learner ([learner]), then iterates until the first of the [run]
 * budgets (iterations, samples, seconds) is spent or *stop becomes non-zero.
 * Each iteration appends to log.h5 the curves iteration, samples (total),
 * wall_time (s) and every field of bcg_learner_stats (iteration_samples for
 * its `samples`; track_err only when the task has the tracking_error op),
 * and the seconds the iteration spent in the stepper (time_sim, its adjoint
 * time_sim_vjp) and in the networks (time_nn, forward and backward).
 * Checkpoints checkpoints/ckpt_<iterations, 9 digits>.h5 are
 * written every [run] checkpoint_every iterations and at the end; each holds
 * the group /trainer (iteration, samples, wall_time, log_iterations, plugin
 * names) and the group /learner (the learner's save()). A resumed run loads
 * the latest checkpoint, rewrites log.h5 truncated to it, and continues; on
 * the CPU it equals the uninterrupted run bit for bit. */

typedef struct bcg_train_options {
  const char *run_dir;        /* holds config.ini, log.h5 (created here) and checkpoints/ */
  int resume;                 /* continue from the latest checkpoint in run_dir */
  FILE *progress;             /* one progress line per iteration; NULL: none */
  int progress_tty;           /* 1: rewrite one line with \r; 0: plain lines; -1: isatty(progress) */
  volatile sig_atomic_t *stop;/* non-zero: finish the iteration, checkpoint, return (SIGINT) */
  /* optional: called after each iteration (after logging); non-zero stops
   * the run like *stop (used by tests and learning checks) */
  int (*on_iteration)(void *ctx, int64_t iterations_done, uint64_t samples, double wall,
                      const bcg_learner_stats *st);
  void *ctx;
} bcg_train_options;

typedef struct bcg_train_result {
  int64_t iterations;     /* completed iterations, all sessions of the run */
  uint64_t samples;       /* simulated control steps, all sessions */
  double wall;            /* training wall time (s), all sessions */
  int stopped;            /* 1: stopped by *stop or on_iteration, 0: a budget was spent */
  bcg_learner_stats last; /* stats of the last iteration of this session */
  char checkpoint[PATH_MAX + 64]; /* the last checkpoint written (the run directory, PATH_MAX, and its name) */
  /* where this session's time went (s): the stepper forward and adjoint
   * (bcg_env_time), the networks forward and backward (bcg_nn_time); the
   * rest of the wall time is the learner, estimator and task bookkeeping,
   * the optimiser, logging and checkpoints */
  double time_sim, time_sim_vjp, time_nn;
  double session_wall; /* wall time of this session (s) */
  /* the task's and the estimator's own time, without the stepper and the
   * networks they call (bcg_session_time); the rest is then the learner's
   * bookkeeping, the optimiser, logging and checkpoints */
  double time_task, time_est;
} bcg_train_result;

/* Run (or resume) training into opt->run_dir. Returns 0, or -1 with a
 * one-line message. res may be NULL. */
int bcg_train_run(const bcg_config *cfg, const bcg_train_options *opt, bcg_train_result *res, char *err,
                  size_t errlen);

/* Process-wide seconds spent in the task's and the estimator's calls made by
 * learners of sessions (bcg_session_open), less the stepper's (bcg_env_time)
 * and the networks' (bcg_nn_time) time inside those calls: with them, the
 * parts of a training iteration that do not overlap. */
void bcg_session_time(double *task_s, double *est_s);
typedef struct bcg_session_timing bcg_session_timing;

/* A training session without the loop: the env, task, estimator and learner
 * a config describes, as bcg_train_run builds them ([run] threads applied).
 * Evaluation and gradient statistics open one and load a checkpoint into it. */
typedef struct bcg_session {
  const bcg_config *cfg;
  bcg_env *env;
  const bcg_plugin *ptask, *pest, *plearn;
  const bcg_task_ops *task_ops;
  void *task;
  const bcg_estimator_ops *est_ops;
  void *est;
  const bcg_learner_ops *lops;
  void *learner;
  bcg_trainer tr;
  bcg_session_timing *timing; /* tr's task and estimator are timing wrappers of task and est (bcg_session_time) */
  int ckpt_ranks; /* the number of ranks of the run that wrote the checkpoint last loaded (1: one process) */
} bcg_session;

int bcg_session_open(bcg_session *S, const bcg_config *cfg, char *err, size_t errlen);
/* Load a checkpoint's learner state; the trainer counters it holds are
 * returned through the optional pointers. */
int bcg_session_load(bcg_session *S, const char *path, int64_t *iteration, uint64_t *samples, double *wall,
                     int64_t *log_iters, char *err, size_t errlen);
void bcg_session_close(bcg_session *S);

/* The iteration of a checkpoint file name "ckpt_<iteration>.h5", or -1 when
 * the name is not one. */
int64_t bcg_train_checkpoint_iteration(const char *name);
/* The path of a run's checkpoint of iteration it:
 * RUN_DIR/checkpoints/ckpt_<it, nine digits or more>.h5. */
void bcg_train_checkpoint_path(const char *run_dir, int64_t it, char *buf, size_t len);
/* The checkpoints of a run directory: the iterations of its files named as
 * bcg_train_checkpoint_path names them, ascending, in a malloc'd *its (free
 * it; NULL when there are none) and their count in *n. Returns 0, or -1 when
 * RUN_DIR/checkpoints cannot be read. */
int bcg_train_checkpoints(const char *run_dir, int64_t **its, size_t *n);
/* The latest checkpoint of a run directory: its path into buf and its
 * iteration count, or -1 when there is none. */
int64_t bcg_train_latest_checkpoint(const char *run_dir, char *buf, size_t len);

/* bcg_train_run holds RUN_DIR/train.lock (flock, with its pid) for the
 * session: a second training of the same run directory is refused with
 * "RUN_DIR: this run is being trained by process N". This probes it: 0 when
 * no process trains run_dir now, else -1 with that message. */
int bcg_train_lock_probe(const char *run_dir, char *err, size_t errlen);

BCG_END_DECLS

#endif
