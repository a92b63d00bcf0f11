/* cmd.h - the bcg command's subcommands (internal to the CLI).
 *
 * Each subcommand is `int bcg_cmd_NAME(int argc, char **argv)` with argv[0]
 * the subcommand's name, returning the process exit status: 0 success,
 * 1 a user error (one line "bcg: error: ..." on stderr), 2 a usage error.
 * main.c holds the dispatch table; a new subcommand is a cmd_NAME.c file
 * plus one row there. */
#ifndef BCG_CMD_H
#define BCG_CMD_H

#include "bcg/config.h"

#define BCG_EXIT_OK 0
#define BCG_EXIT_ERROR 1
#define BCG_EXIT_USAGE 2

int bcg_cmd_train(int argc, char **argv);
int bcg_cmd_plugins(int argc, char **argv);
int bcg_cmd_describe(int argc, char **argv);
int bcg_cmd_check(int argc, char **argv);
int bcg_cmd_bench(int argc, char **argv);
int bcg_cmd_eval(int argc, char **argv);
int bcg_cmd_gradstats(int argc, char **argv);
int bcg_cmd_sweep(int argc, char **argv);
int bcg_cmd_report(int argc, char **argv);
int bcg_cmd_feasibility(int argc, char **argv);
int bcg_cmd_render(int argc, char **argv);

/* Shared helpers (cli.c). */

/* "bcg: error: <msg>" on stderr; returns BCG_EXIT_ERROR. */
int bcg_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* 1 when path names a directory (following links) */
int bcg_cli_is_dir(const char *path);
/* The overrides a resumed run may take (bcg train --resume, bcg bench --train
 * RUN_DIR): its budget and bookkeeping keys, and those that leave its results
 * bit for bit as they are (the thread count; SHAC's critic_overlap), listed
 * in BCG_CLI_RESUME_KEYS. 1 when the override "section.key=value" names one
 * of them. */
#define BCG_CLI_RESUME_KEYS \
  "run.iterations, run.samples, run.seconds, run.checkpoint_every, run.keep_last, run.keep_every, run.threads, " \
  "run.check_replicas, learner.critic_overlap"
int bcg_cli_resume_override(const char *kv);
/* bcg bench --train RUN_DIR, a measurement that leaves the run as it is,
 * also takes the keys that decide where and how the iterations run (CPU or
 * GPU stepper, CPU or GPU networks, subnormals), which a resumed training
 * may not change: its results would then round differently from an
 * uninterrupted run's. 1 when kv names one of these or a resume key. */
#define BCG_CLI_BENCH_KEYS "run.sim_min_batch, run.nn_min_batch, run.flush_denormals"
int bcg_cli_bench_override(const char *kv);
/* "bcg: <cmd>: <msg>\nusage: ..." on stderr; returns BCG_EXIT_USAGE. */
int bcg_cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parse "CONFIG [section.key=value ...]" and load the config; on failure
 * prints the message and returns the exit status (cfg stays NULL). */
int bcg_cli_load_config(const char *cmd, int argc, char **argv, bcg_config **cfg);
/* Checks beyond the key specs that need the file system (model file exists
 * and compiles, device available, the floor a task needs); under
 * actuation = pd one line of PD gains and a warning when they are
 * implausible. Returns 0 or prints and returns BCG_EXIT_ERROR. */
int bcg_cli_check_semantics(const bcg_config *cfg);
/* The same; it also compiles the model ([model] path), checks the floor a
 * task needs and prints the PD gains under actuation = pd (every joint when
 * verbose: bcg check; one line otherwise) with a warning when implausible. */
int bcg_cli_check_semantics_ex(const bcg_config *cfg, int verbose);
/* A training config's whole session created once and closed (the env with its
 * model, the task with its data, the estimator, the learner): what bcg train
 * would fail on, before any run directory exists. Configs without all three
 * plugin sections are not asked. 0 or an error printed (exit code). */
int bcg_cli_check_session(const bcg_config *cfg);
/* [sweep] mode = zip needs lists of one length: 0, or the error printed and 1. */
int bcg_cli_check_sweep(const bcg_config *cfg);

/* What a run directory's log.h5 says (cmd_report.c; bcg report and bcg sweep):
 * iterations logged and the last (first, best) values of its curves, NAN
 * where a curve is absent or never finite. Returns 0, or -1 with the reason
 * ("<dir>/log.h5: cannot open: ...") when the log cannot be read. */
typedef struct bcg_cli_runlog {
  long iters;
  double samples, wall, ret_first, ret_last, ret_best, track_last;
} bcg_cli_runlog;
int bcg_cli_read_runlog(const char *dir, bcg_cli_runlog *s, char *err, size_t errlen);

#endif
