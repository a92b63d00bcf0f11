/* bcg/train.h - what the training loop hands a learner, and what a learner
 * reports each iteration. */
#ifndef BCG_TRAIN_H
#define BCG_TRAIN_H

#include <stdint.h>
#include "bcg/env.h"
#include "bcg/plugin.h"

BCG_BEGIN_DECLS

typedef struct bcg_runlog bcg_runlog; /* bcg/runlog.h */
typedef struct bcg_config bcg_config; /* bcg/config.h */

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
  bcg_runlog *log;        /* extra curves: bcg_runlog_append(log, name, value) */
  int threads;
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
};

BCG_END_DECLS

#endif
