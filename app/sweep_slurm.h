/* sweep_slurm.h - the Slurm side of `bcg sweep --slurm`: the job array's
 * batch script, its submission (sbatch) and the scheduler's view of its
 * tasks (squeue, else sacct). The sweep itself (which runs, their states,
 * the manifest) stays in cmd_sweep.c. */
#ifndef BCG_SWEEP_SLURM_H
#define BCG_SWEEP_SLURM_H

#include <stddef.h>
#include <stdio.h>

#define BCG_SLURM_MAX_EXTRA 16

/* what the user asked of the scheduler; NULL / 0: Slurm's (or the cluster's) default */
typedef struct bcg_slurm_opts {
  const char *partition, *time, *mem, *account, *qos, *constraint;
  int cpus_per_run;  /* --cpus-per-task of every array task (>= 1) */
  int gpus_per_run;  /* --gres=gpu:G, 0: none */
  int max_running;   /* the array's %N throttle, 0: none */
  const char *extra[BCG_SLURM_MAX_EXTRA]; /* further sbatch options, verbatim (--sbatch-arg) */
  int nextra;
} bcg_slurm_opts;

/* Writes the batch script of one job array to f: #SBATCH lines from o,
 * the array over tasks[0..ntasks) (the runs' 1-based indices), each task's
 * output to logdir/%A_%a.out, and the command argv[0..nargv) followed by
 * the task's index ($SLURM_ARRAY_TASK_ID), every argument shell-quoted.
 * 0, or -1 when it could not be written. */
int bcg_slurm_write_script(FILE *f, const bcg_slurm_opts *o, const char *job_name, const char *logdir,
                           const int *tasks, int ntasks, char *const *argv, int nargv);

/* sbatch --parsable SCRIPT: the job id into jobid; 0, or -1 with err (sbatch's own message). */
int bcg_slurm_submit(const char *script, char *jobid, size_t len, char *err, size_t errlen);

/* The scheduler's state of array task "JOBID_TASK" (e.g. "PENDING",
 * "RUNNING", "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED") and, for a
 * pending task, its reason, asked of squeue (jobs the controller still
 * remembers), else of sacct (where accounting is enabled). Answers are
 * cached per job id for the process's lifetime. 1 when known, 0 when
 * neither knows the task. */
int bcg_slurm_task_state(const char *task, char *state, size_t slen, char *reason, size_t rlen);

/* 1 for the states of a task that may still run (pending, running, being
 * requeued or suspended), 0 for the ended ones */
int bcg_slurm_active(const char *state);
/* 1 for the ended states that mean the run failed (FAILED, OUT_OF_MEMORY,
 * NODE_FAIL, BOOT_FAIL, DEADLINE), 0 otherwise (COMPLETED, and CANCELLED,
 * TIMEOUT or PREEMPTED, after which the run checkpointed and can resume) */
int bcg_slurm_failed(const char *state);

#endif
