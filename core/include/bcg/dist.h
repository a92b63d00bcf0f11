/* bcg/dist.h - several training processes of one run (data-parallel
 * training), through MPI.
 *
 * A run started by an MPI launcher (`mpirun -np P bcg train ...`, or Slurm's
 * `srun` with PMI/PMIx) has P processes ("ranks"), one per GPU or per group
 * of cores; each steps its own [run] num_envs environments and the learner
 * averages its gradients over the ranks (docs/usage.md, "Several GPUs").
 * Started any other way, or by a launcher with one process, there is one
 * rank and every function below is the identity: a single process never
 * calls MPI.
 *
 * bcg_dist_init() is called once by the bcg command before anything else
 * (it also points each rank at its own GPU: CUDA_VISIBLE_DEVICES := the
 * local rank's entry of the launcher's list, or the local rank's index, so
 * it must run before the first CUDA call). A bcg built without MPI (no
 * MPI found by pkg-config when it was built) refuses to run under a launcher with more
 * than one process, rather than running P independent copies of one run.
 *
 * The reductions are collective: every rank calls them in the same order
 * with the same sizes. They return 0, or -1 when MPI reports an error (the
 * message is printed; the caller ends the run, and bcg_dist_abort() ends
 * the others). */
#ifndef BCG_DIST_H
#define BCG_DIST_H

#include <stddef.h>
#include <stdint.h>
#include "bcg/real.h"

BCG_BEGIN_DECLS

/* the GPUs this process may use, into gpus[0..cap) (names as CUDA takes them):
 * the entries of CUDA_VISIBLE_DEVICES when it is set, else N of every
 * /dev/nvidia<N> (N < 64); returns their count. bcg sweep places runs on
 * them, and bcg_dist_init gives each rank one. */
int bcg_visible_gpus(char (*gpus)[32], int cap);
/* 0, or -1 with the reason in err (MPI's init failed; launched with several
 * processes by a bcg built without MPI) */
int bcg_dist_init(int *argc, char ***argv, char *err, size_t errlen);
/* MPI_Finalize when initialised (idempotent; registered with atexit by init) */
void bcg_dist_finalize(void);
/* 1 if this bcg was built with MPI */
int bcg_dist_built(void);
int bcg_dist_rank(void);       /* 0 .. size-1 */
int bcg_dist_size(void);       /* 1 without a launcher */
int bcg_dist_local_rank(void); /* rank among the processes of this host */

/* in place: x[i] := the sum over ranks of x[i] (reduced in rank order by
 * MPI; every rank gets the same bits) */
int bcg_dist_sum(double *x, size_t n);
int bcg_dist_sum_real(bcg_real *x, size_t n);
/* in place: x[i] := the maximum over ranks */
int bcg_dist_max_i64(int64_t *x, size_t n);
/* every rank's `bytes` bytes at mine into all[rank * bytes ...] on every
 * rank (all holds size() * bytes) */
int bcg_dist_allgather(const void *mine, size_t bytes, void *all);
/* rank root's bytes to every rank */
int bcg_dist_bcast(void *buf, size_t bytes, int root);
/* 1 if the n bytes at p are the same on every rank (a 64-bit hash
 * compared), 0 if not, -1 on an MPI error */
int bcg_dist_same(const void *p, size_t n);
/* every rank waits for the others */
int bcg_dist_barrier(void);
/* ends every rank of the run (MPI_Abort) when size > 1; returns otherwise */
void bcg_dist_abort(int code);

BCG_END_DECLS

#endif
