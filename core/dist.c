/* core/dist.c - bcg/dist.h: the ranks of a data-parallel run through MPI
 * (Open MPI or any MPI-3 library: mpicc's flags, found by the Makefile), or
 * one rank without it. */
#include "bcg/dist.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

#ifdef BCG_HAVE_MPI
#include <mpi.h>
#endif

static int d_rank = 0, d_size = 1, d_local = 0, d_mpi = 0;

int bcg_dist_built(void) {
#ifdef BCG_HAVE_MPI
  return 1;
#else
  return 0;
#endif
}

/* the launcher's process count from its environment (Open MPI, MPICH / Intel
 * MPI / Slurm PMI-1 and PMI-2, PMIx), 0 when no launcher started us */
static int launcher_size(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return atoi(v);
  }
  /* srun --mpi=pmix sets PMIX_RANK but not always PMIX_SIZE: then MPI says */
  return getenv("PMIX_RANK") ? -1 : 0;
}

static int launcher_local_rank(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                                     "PMI_LOCAL_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return atoi(v);
  }
  return -1;
}

int bcg_visible_gpus(char (*gpus)[32], int cap) {
  int n = 0;
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  if (v) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", v);
    for (char *save = NULL, *t = strtok_r(tmp, ",", &save); t && n < cap; t = strtok_r(NULL, ",", &save)) {
      while (isspace((unsigned char)*t)) t++;
      if (*t) snprintf(gpus[n++], sizeof gpus[0], "%s", t);
    }
    return n;
  }
  for (int k = 0; k < 64 && n < cap; k++) {
    char p[32];
    snprintf(p, sizeof p, "/dev/nvidia%d", k);
    if (access(p, F_OK) == 0) snprintf(gpus[n++], sizeof gpus[0], "%d", k);
  }
  return n;
}

/* CUDA_VISIBLE_DEVICES := the local rank's GPU among the visible ones
 * (round-robin when there are fewer GPUs than ranks on the host); none
 * visible (or a list of none): left as it is */
static void pick_gpu(int local) {
  char list[64][32];
  int n = bcg_visible_gpus(list, 64);
  if (n > 0) setenv("CUDA_VISIBLE_DEVICES", list[local % n], 1);
}

int bcg_dist_init(int *argc, char ***argv, char *err, size_t errlen) {
  int ls = launcher_size();
  if (ls == 0 || ls == 1) return 0;
#ifndef BCG_HAVE_MPI
  (void)argc;
  (void)argv;
  bcg_setf(err, errlen,
           "started by an MPI launcher with %d processes, but this bcg was built without MPI (none found when it was "
           "built: install libopenmpi-dev and rebuild); the processes would train %d independent copies of one run",
           ls, ls);
  return -1;
#else
  int rc = MPI_Init(argc, argv);
  if (rc != MPI_SUCCESS) {
    bcg_setf(err, errlen, "MPI_Init failed (code %d)", rc);
    return -1;
  }
  d_mpi = 1;
  atexit(bcg_dist_finalize);
  MPI_Comm_rank(MPI_COMM_WORLD, &d_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &d_size);
  int local = launcher_local_rank();
  if (local < 0) { /* ranks sharing this host, by MPI */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d_rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
  }
  d_local = local;
  if (d_size > 1) pick_gpu(local);
  return 0;
#endif
}

void bcg_dist_finalize(void) {
#ifdef BCG_HAVE_MPI
  if (d_mpi) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
    d_mpi = 0;
  }
#endif
}

int bcg_dist_rank(void) { return d_rank; }
int bcg_dist_size(void) { return d_size; }
int bcg_dist_local_rank(void) { return d_local; }

#ifdef BCG_HAVE_MPI
static int mpi_ok(int rc, const char *what) {
  if (rc == MPI_SUCCESS) return 0;
  char s[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, s, &n);
  fprintf(stderr, "bcg: rank %d: %s failed: %s\n", d_rank, what, s);
  return -1;
}
/* one call moves at most INT_MAX elements: larger arrays in pieces */
#define CHUNK ((size_t)1 << 30)
#endif

int bcg_dist_sum(double *x, size_t n) {
  if (d_size <= 1) return 0;
#ifdef BCG_HAVE_MPI
  for (size_t o = 0; o < n; o += CHUNK) {
    size_t k = n - o < CHUNK ? n - o : CHUNK;
    if (mpi_ok(MPI_Allreduce(MPI_IN_PLACE, x + o, (int)k, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce"))
      return -1;
  }
#endif
  return 0;
}

int bcg_dist_sum_real(bcg_real *x, size_t n) {
  if (d_size <= 1) return 0;
#ifdef BCG_HAVE_MPI
  MPI_Datatype t = sizeof(bcg_real) == sizeof(float) ? MPI_FLOAT : MPI_DOUBLE;
  for (size_t o = 0; o < n; o += CHUNK) {
    size_t k = n - o < CHUNK ? n - o : CHUNK;
    if (mpi_ok(MPI_Allreduce(MPI_IN_PLACE, x + o, (int)k, t, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce")) return -1;
  }
#endif
  return 0;
}

int bcg_dist_max_i64(int64_t *x, size_t n) {
  if (d_size <= 1) return 0;
#ifdef BCG_HAVE_MPI
  if (mpi_ok(MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce")) return -1;
#endif
  return 0;
}

int bcg_dist_allgather(const void *mine, size_t bytes, void *all) {
  if (d_size <= 1) {
    memmove(all, mine, bytes);
    return 0;
  }
#ifdef BCG_HAVE_MPI
  if (bytes > (size_t)1 << 30) return fprintf(stderr, "bcg: rank %d: allgather of %zu bytes\n", d_rank, bytes), -1;
  return mpi_ok(MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD), "MPI_Allgather");
#else
  return 0;
#endif
}

int bcg_dist_bcast(void *buf, size_t bytes, int root) {
  if (d_size <= 1) return 0;
#ifdef BCG_HAVE_MPI
  for (size_t o = 0; o < bytes; o += CHUNK) {
    size_t k = bytes - o < CHUNK ? bytes - o : CHUNK;
    if (mpi_ok(MPI_Bcast((char *)buf + o, (int)k, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast")) return -1;
  }
#endif
  return 0;
}

int bcg_dist_same(const void *p, size_t n) {
  if (d_size <= 1) return 1;
  /* FNV-1a, 64 bits */
  uint64_t h = 1469598103934665603ull;
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  /* equal everywhere iff max(h) == max(-h)'s negation, i.e. max == min */
  int64_t v[2] = {(int64_t)(h >> 1), -(int64_t)(h >> 1)};
  if (bcg_dist_max_i64(v, 2)) return -1;
  return v[0] == -v[1];
}

int bcg_dist_barrier(void) {
  if (d_size <= 1) return 0;
#ifdef BCG_HAVE_MPI
  return mpi_ok(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
#else
  return 0;
#endif
}

void bcg_dist_abort(int code) {
#ifdef BCG_HAVE_MPI
  if (d_mpi && d_size > 1) {
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
  }
#else
  (void)code;
#endif
}
