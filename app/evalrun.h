/* evalrun.h - what bcg eval and bcg render share (internal to the CLI;
 * evalrun.c): opening a trained run for evaluation, strict option values. */
#ifndef BCG_EVALRUN_H
#define BCG_EVALRUN_H

#include <stddef.h>

#include "bcg/config.h"
#include "bcg/train.h"

/* The run directory, the checkpoint and the run's config.ini of target (a run
 * directory: its latest checkpoint, unless no_ckpt; or a checkpoint file
 * RUN_DIR/checkpoints/ckpt_NNNNNNNNN.h5). hint ends the message of a run
 * directory without checkpoints, "(train first, or --initial)". Returns -1
 * when found, else the exit status of the error it printed. */
int bcg_cli_resolve_run(const char *target, int no_ckpt, const char *hint, char *run_dir, size_t rdlen, char *ckpt,
                        size_t cklen, char *cfgpath, size_t cflen);

/* The run's configuration as an evaluation runs it: run.device = cpu put
 * before the overrides ov[0..*nov) (which may set it back), and after them
 * the evaluation's own, appended to ov (room for 9 more in all): the nominal
 * model (no domain randomisation, no pushes: the MuJoCo side runs the plain
 * MJCF), from the beginning of the clip (task.rsi = false). NULL after
 * printing the error. */
bcg_config *bcg_cli_eval_config(const char *cfgpath, char **ov, int *nov);

/* The session whose env and task an evaluation of `runs` episodes runs in:
 * S itself when its num_envs is runs, else a second session of the same
 * configuration (cfgpath with ov[0..nov) and run.num_envs = runs; ov has room
 * for one more) opened into small, its config into *cfg_small (close small
 * when the result is small; bcg_config_free(*cfg_small) in any case). The task observes and rewards all num_envs of
 * its env every step (4096 for PPO: most of the time of an evaluation); the
 * model, initial states and noise are the same. If that session cannot be
 * built (a learner that needs more environments), S. */
bcg_session *bcg_cli_eval_session(bcg_session *S, const bcg_config *cfg, const char *cfgpath, char **ov, int nov,
                                  int runs, bcg_session *small, bcg_config **cfg_small);

/* Strict option values: the whole argument is the number and it lies in
 * [lo, hi] (so 0, negatives, nan, inf and "10s" are refused, not ignored).
 * 0, or -1 with *v untouched. */
int bcg_cli_opt_int(const char *s, long lo, long hi, int *v);
int bcg_cli_opt_real(const char *s, double lo, double hi, double *v);

#endif
