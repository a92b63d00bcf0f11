/* core/train.c - the training loop behind `bcg train` (see bcg/train.h).
 *
 * One iteration = one learner iterate() (collect, losses, update), then the
 * task's optional update(), then one row of every curve in log.h5 and, every
 * checkpoint_every iterations, a checkpoint. Everything a resumed run needs
 * to continue bit for bit lives in the learner's checkpoint group (the
 * learner owns rollout states, counters and RNG positions); the loop adds
 * its own counters. Wall-clock time is the only thing that differs.
 *
 * A data-parallel run (bcg/dist.h: P ranks, each a process with its own
 * [run] num_envs environments) runs this loop on every rank in step: rank 0
 * alone holds the lock, writes log.h5 and the checkpoint
 * checkpoints/ckpt_<it>.h5 (its own session's state, which bcg eval and
 * bcg render read as any run's); rank r > 0 writes its session's state to
 * checkpoints/ranks/ckpt_<it>.r<r>.h5 first, so a committed main checkpoint
 * has every shard beside it. The learner's statistics are reduced over the
 * ranks before they are logged (sums of samples and episodes, means weighted
 * by them), and every stop (budget, signal, error in a checkpoint) is
 * decided by all ranks together. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/dist.h"
#include "bcg/loader.h"
#include "bcg/nn.h"
#include "bcg/runlog.h"
#include "bcg/train.h"
#include "clock.h"
#include "est_device.h"
#include "session_time.h"
#include "plugin_err.h"
#include "util.h"

static double now_s(void) { return 1e-9 * (double)bcg_mono_ns(); }

/* ---- checkpoints ------------------------------------------------------------ */

int64_t bcg_train_checkpoint_iteration(const char *name) {
  long long it;
  int n = 0;
  return sscanf(name, "ckpt_%lld.h5%n", &it, &n) == 1 && n > 0 && name[n] == 0 && it >= 0 ? (int64_t)it : -1;
}

void bcg_train_checkpoint_path(const char *run_dir, int64_t it, char *buf, size_t len) {
  snprintf(buf, len, "%s/checkpoints/ckpt_%09lld.h5", run_dir, (long long)it);
}

/* rank r's checkpoint of iteration it: the main one for rank 0, else its shard */
static void rank_checkpoint_path(const char *run_dir, int64_t it, int r, char *buf, size_t len) {
  if (r == 0) bcg_train_checkpoint_path(run_dir, it, buf, len);
  else snprintf(buf, len, "%s/checkpoints/ranks/ckpt_%09lld.r%03d.h5", run_dir, (long long)it, r);
}

/* max over the ranks of a failure flag: 1 when any rank failed */
static int any_failed(int failed) {
  int64_t f = failed != 0;
  if (bcg_dist_max_i64(&f, 1)) return 1;
  return f != 0;
}

static int cmp_asc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The one scan of a run's checkpoints (resume, the rotation, eval's
 * RUN_DIR and --select-best): only the names the loop writes
 * (bcg_train_checkpoint_path), so every iteration listed has one file. */
int bcg_train_checkpoints(const char *run_dir, int64_t **its, size_t *n) {
  *its = NULL;
  *n = 0;
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/checkpoints", run_dir);
  DIR *d = opendir(dir);
  if (!d) return -1;
  size_t cap = 0;
  int rc = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    const int64_t it = bcg_train_checkpoint_iteration(de->d_name);
    char canon[64];
    if (it < 0 || (snprintf(canon, sizeof canon, "ckpt_%09lld.h5", (long long)it), strcmp(canon, de->d_name)))
      continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 64;
      int64_t *t = realloc(*its, cap * sizeof **its);
      if (!t) {
        rc = -1;
        break;
      }
      *its = t;
    }
    (*its)[(*n)++] = it;
  }
  closedir(d);
  if (rc) {
    free(*its);
    *its = NULL;
    *n = 0;
    return -1;
  }
  if (*n) qsort(*its, *n, sizeof **its, cmp_asc);
  return 0;
}

int64_t bcg_train_latest_checkpoint(const char *run_dir, char *buf, size_t len) {
  int64_t *its;
  size_t n;
  if (bcg_train_checkpoints(run_dir, &its, &n) || n == 0) return -1;
  const int64_t best = its[n - 1];
  free(its);
  if (buf) bcg_train_checkpoint_path(run_dir, best, buf, len);
  return best;
}

/* The newest checkpoint of run_dir whose format and checksum are intact
 * (bcg_checkpoint_verify); every damaged newer one is a warning on stderr.
 * Returns its iteration (path in buf) or -1 with the reason in err. */
static int64_t newest_good_checkpoint(const char *run_dir, char *buf, size_t len, char *err, size_t errlen) {
  int64_t *its;
  size_t n;
  if (bcg_train_checkpoints(run_dir, &its, &n))
    return bcg_setf(err, errlen, "%s: no checkpoint to resume from (checkpoints/ckpt_*.h5)", run_dir), -1;
  int64_t found = -1;
  char first[2048] = "";
  for (size_t i = n; i-- > 0 && found < 0;) {
    char p[PATH_MAX + 64], why[2048];
    bcg_train_checkpoint_path(run_dir, its[i], p, sizeof p);
    if (bcg_checkpoint_verify(p, why, sizeof why) == 0) {
      found = its[i];
      snprintf(buf, len, "%s", p);
      if (first[0]) fprintf(stderr, "bcg: warning: resuming from %s, the newest intact checkpoint\n", p);
    } else {
      if (!first[0]) snprintf(first, sizeof first, "%s", why);
      fprintf(stderr, "bcg: warning: %s\n", why);
    }
  }
  free(its);
  if (found < 0) {
    if (n) bcg_setf(err, errlen, "%s: no intact checkpoint to resume from (the newest: %s)", run_dir, first);
    else bcg_setf(err, errlen, "%s: no checkpoint to resume from (checkpoints/ckpt_*.h5)", run_dir);
  }
  return found;
}

/* One training process per run directory: RUN/train.lock, flock'ed for the
 * session (released by the kernel when the process ends, kill -9 included)
 * and holding the owner's pid for the message. Returns the fd or -1. */
static int lock_run(const char *run_dir, char *err, size_t errlen) {
  char p[PATH_MAX + 16];
  snprintf(p, sizeof p, "%s/train.lock", run_dir);
  int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return bcg_setf(err, errlen, "%s: cannot create: %s", p, strerror(errno)), -1;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = "";
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = 0;
    long pid = atol(buf);
    if (errno == EWOULDBLOCK || errno == EAGAIN) {
      if (pid > 0)
        bcg_setf(err, errlen, "%s: this run is being trained by process %ld (%s); wait for it or stop it first", run_dir,
             pid, p);
      else
        bcg_setf(err, errlen, "%s: this run is being trained by another process (%s)", run_dir, p);
    } else {
      bcg_setf(err, errlen, "%s: cannot lock: %s", p, strerror(errno));
    }
    close(fd);
    return -1;
  }
  char pid[32];
  int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
    /* the lock holds without the pid; only the message loses it */
  }
  return fd;
}

int bcg_train_lock_probe(const char *run_dir, char *err, size_t errlen) {
  int fd = lock_run(run_dir, err, errlen);
  if (fd < 0) return -1;
  close(fd);
  return 0;
}

typedef struct loop {
  const bcg_config *cfg;
  const bcg_train_options *opt;
  bcg_session S; /* env, task, estimator, learner */
  bcg_runlog *log;
  int64_t it;       /* completed iterations */
  uint64_t samples; /* total */
  double wall0;     /* wall time of earlier sessions */
} loop;

static const char *plugin_name(const bcg_config *cfg, bcg_kind k) {
  const bcg_plugin *p = bcg_config_plugin(cfg, k);
  return p ? p->desc->name : "";
}

/* the estimator's optional checkpoint entries (bcg_estimator_ops grew them at its end) */
#define EST_HAS_IO(o) (BCG_OPS_HAS(o, bcg_estimator_ops, load) && (o)->save)

/* the task's optional checkpoint entries (bcg_task_ops grew them at its end) */
#define TASK_HAS_IO(o) (BCG_OPS_HAS(o, bcg_task_ops, load) && (o)->save)

/* [run] keep_last and keep_every: once checkpoint L->it is committed (its
 * data fsynced, renamed into place and the rename made durable), the older
 * checkpoints that neither keeps are deleted, so a crash at any point leaves
 * the new checkpoint, or the old ones, to resume from. keep_last counts the
 * new one, so the checkpoint --resume would take is never deleted. Newer
 * checkpoints than L->it (left by a session that resumed from an older,
 * intact one) are not touched: the loop replaces them when it gets there.
 * A checkpoint that cannot be deleted is a warning, not an error. */
static void rotate_checkpoints(loop *L) {
  const long keep_last = bcg_config_get_int(L->cfg, "run", "keep_last");
  const long keep_every = bcg_config_get_int(L->cfg, "run", "keep_every");
  if (keep_last <= 0) return;
  int64_t *its;
  size_t n, m = 0;
  if (bcg_train_checkpoints(L->opt->run_dir, &its, &n)) {
    fprintf(stderr, "bcg: warning: %s/checkpoints: cannot list the checkpoints to rotate them: %s\n", L->opt->run_dir,
            strerror(errno));
    return;
  }
  while (m < n && its[m] <= L->it) m++; /* its[0, m): this checkpoint and the older ones, ascending */
  for (size_t i = 0; i + (size_t)keep_last < m; i++) {
    if (keep_every > 0 && its[i] % keep_every == 0) continue;
    for (int r = 0; r < L->S.tr.world; r++) { /* the main checkpoint and the other ranks' shards */
      char p[PATH_MAX + 64];
      rank_checkpoint_path(L->opt->run_dir, its[i], r, p, sizeof p);
      if (unlink(p) != 0 && errno != ENOENT)
        fprintf(stderr, "bcg: warning: checkpoint rotation: cannot delete %s: %s\n", p, strerror(errno));
    }
  }
  free(its);
}

static int write_one_checkpoint(loop *L, double wall, char *path, size_t pathlen, char *err, size_t errlen) {
  rank_checkpoint_path(L->opt->run_dir, L->it, L->S.tr.rank, path, pathlen);
  bcg_checkpoint *ck = bcg_checkpoint_begin(path, err, errlen);
  if (!ck) return -1;
  int64_t root = bcg_checkpoint_root(ck);
  int64_t g = bcg_h5_group(root, "trainer", 1, err, errlen);
  if (g < 0) goto fail;
  int64_t iv[1] = {L->it}, sv[1] = {(int64_t)L->samples}, lv[1] = {L->log ? bcg_runlog_iterations(L->log) : L->it},
          seed[1] = {(int64_t)L->S.tr.seed}, rk[2] = {L->S.tr.rank, L->S.tr.world};
  double wv[1] = {wall};
  int rc = bcg_h5_write_i64(g, "iteration", iv, 1, err, errlen) || bcg_h5_write_i64(g, "samples", sv, 1, err, errlen) ||
           bcg_h5_write_i64(g, "log_iterations", lv, 1, err, errlen) ||
           bcg_h5_write_i64(g, "seed", seed, 1, err, errlen) ||
           (L->S.tr.world > 1 && bcg_h5_write_i64(g, "rank", rk, 2, err, errlen)) ||
           bcg_h5_write_doubles(g, "wall_time", wv, 1, err, errlen);
  static const bcg_kind kinds[] = {BCG_KIND_CONTACT, BCG_KIND_ESTIMATOR, BCG_KIND_LEARNER, BCG_KIND_TASK};
  for (int k = 0; k < 4 && !rc; k++) {
    char attr[32];
    snprintf(attr, sizeof attr, "%s_plugin", bcg_kind_name(kinds[k]));
    rc = bcg_h5_write_str(g, attr, plugin_name(L->cfg, kinds[k]), err, errlen);
  }
  bcg_h5_group_close(g);
  if (rc) goto fail;
  g = bcg_h5_group(root, "learner", 1, err, errlen);
  if (g < 0) goto fail;
  rc = L->S.lops->save(L->S.learner, g);
  bcg_h5_group_close(g);
  if (rc) {
    bcg_setf(err, errlen, "checkpoint %s: learner %s: save failed", path, L->S.plearn->desc->name);
    goto fail;
  }
  if (EST_HAS_IO(L->S.est_ops)) {
    g = bcg_h5_group(root, "estimator", 1, err, errlen);
    if (g < 0) goto fail;
    rc = L->S.est_ops->save(L->S.est, g);
    bcg_h5_group_close(g);
    if (rc) {
      bcg_setf(err, errlen, "checkpoint %s: estimator %s: save failed", path, L->S.pest->desc->name);
      goto fail;
    }
  }
  if (TASK_HAS_IO(L->S.task_ops)) {
    g = bcg_h5_group(root, "task", 1, err, errlen);
    if (g < 0) goto fail;
    rc = L->S.task_ops->save(L->S.task, g);
    bcg_h5_group_close(g);
    if (rc) {
      bcg_setf(err, errlen, "checkpoint %s: task %s: save failed", path, L->S.ptask->desc->name);
      goto fail;
    }
  }
  return bcg_checkpoint_commit(ck, err, errlen) ? -1 : 0;
fail:
  bcg_checkpoint_abort(ck);
  return -1;
}

/* The checkpoint of iteration L->it: every other rank's shard first, then,
 * once all are on disk, rank 0's main checkpoint and the rotation. A
 * failure on any rank fails every rank (the others with a note naming it). */
static int write_checkpoint(loop *L, double wall, char *path, size_t pathlen, char *err, size_t errlen) {
  const int rank = L->S.tr.rank;
  if (L->S.tr.world == 1) {
    if (write_one_checkpoint(L, wall, path, pathlen, err, errlen)) return -1;
    rotate_checkpoints(L); /* only now that the new checkpoint is on disk */
    return 0;
  }
  int failed = 0;
  if (rank > 0) {
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/checkpoints/ranks", L->opt->run_dir);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
      bcg_setf(err, errlen, "%s: cannot create: %s", dir, strerror(errno));
      failed = 1;
    } else {
      failed = write_one_checkpoint(L, wall, path, pathlen, err, errlen) != 0;
    }
  }
  if (any_failed(failed)) {
    if (!failed) bcg_setf(err, errlen, "iteration %" PRId64 ": another rank could not write its checkpoint", L->it);
    return -1;
  }
  if (rank == 0) {
    failed = write_one_checkpoint(L, wall, path, pathlen, err, errlen) != 0;
    if (!failed) rotate_checkpoints(L);
  }
  if (any_failed(failed)) {
    if (!failed) bcg_setf(err, errlen, "iteration %" PRId64 ": rank 0 could not write the checkpoint", L->it);
    return -1;
  }
  return 0;
}

int bcg_session_load(bcg_session *S, const char *path, int64_t *iteration, uint64_t *samples, double *wall,
                     int64_t *log_iters, char *err, size_t errlen) {
  int64_t f = bcg_checkpoint_open(path, err, errlen);
  if (f < 0) return -1;
  int rc = -1;
  int64_t g = bcg_h5_group(f, "trainer", 0, err, errlen);
  if (g < 0) goto out;
  int64_t iv[1], sv[1], lv[1], rk[2] = {0, 1};
  double wv[1];
  char name[256];
  if (bcg_h5_read_i64(g, "iteration", iv, 1, err, errlen) != 1 || bcg_h5_read_i64(g, "samples", sv, 1, err, errlen) != 1 ||
      bcg_h5_read_i64(g, "log_iterations", lv, 1, err, errlen) != 1 ||
      bcg_h5_read_doubles(g, "wall_time", wv, 1, err, errlen) != 1 ||
      bcg_h5_read_str(g, "learner_plugin", name, sizeof name, err, errlen) ||
      (H5Lexists((hid_t)g, "rank", H5P_DEFAULT) > 0 && bcg_h5_read_i64(g, "rank", rk, 2, err, errlen) != 2)) {
    bcg_h5_group_close(g);
    goto out;
  }
  bcg_h5_group_close(g);
  /* a data-parallel run resumes with as many ranks, each from its own file
   * (bcg eval and render read rank 0's, the main checkpoint, alone) */
  S->ckpt_ranks = (int)rk[1];
  if (S->tr.world > 1 && (rk[1] != S->tr.world || rk[0] != S->tr.rank)) {
    bcg_setf(err, errlen, "checkpoint %s: written by rank %lld of %lld, but this is rank %d of %d (resume a run with "
             "the number of processes it was started with)", path, (long long)rk[0], (long long)rk[1], S->tr.rank,
             S->tr.world);
    goto out;
  }
  if (strcmp(name, S->plearn->desc->name) != 0) {
    bcg_setf(err, errlen, "checkpoint %s: written by learner '%s', the config selects '%s'", path, name,
         S->plearn->desc->name);
    goto out;
  }
  g = bcg_h5_group(f, "learner", 0, err, errlen);
  if (g < 0) goto out;
  int lrc = S->lops->load(S->learner, g);
  bcg_h5_group_close(g);
  if (lrc) {
    bcg_setf(err, errlen, "checkpoint %s: learner %s: load failed (a checkpoint of another configuration?)", path,
         name);
    goto out;
  }
  /* likewise "estimator": absent in checkpoints written before estimators
   * had save/load, or by an estimator without them */
  if (EST_HAS_IO(S->est_ops) && H5Lexists((hid_t)f, "estimator", H5P_DEFAULT) > 0 &&
      (g = bcg_h5_group(f, "estimator", 0, err, errlen)) >= 0) {
    lrc = S->est_ops->load(S->est, g);
    bcg_h5_group_close(g);
    if (lrc) {
      bcg_setf(err, errlen, "checkpoint %s: estimator %s: load failed (a checkpoint of another configuration?)", path,
           S->pest->desc->name);
      goto out;
    }
  }
  /* a checkpoint written before tasks had state has no group "task": the
   * task keeps its created state (no task with save/load existed then) */
  if (TASK_HAS_IO(S->task_ops) && (g = bcg_h5_group(f, "task", 0, err, errlen)) >= 0) {
    lrc = S->task_ops->load(S->task, g);
    bcg_h5_group_close(g);
    if (lrc) {
      bcg_setf(err, errlen, "checkpoint %s: task %s: load failed (a checkpoint of another configuration?)", path,
           S->ptask->desc->name);
      goto out;
    }
  }
  if (iteration) *iteration = iv[0];
  if (samples) *samples = (uint64_t)sv[0];
  if (wall) *wall = wv[0];
  if (log_iters) *log_iters = lv[0];
  rc = 0;
out:
  bcg_checkpoint_close(f);
  return rc;
}

/* ---- log.h5 on resume ------------------------------------------------------------
 *
 * runlog.h can only create a log, so a resumed run rebuilds it: every curve of
 * the old file is read (values and first_iteration), a new log is built in
 * memory (bcg_runlog_open_held) with the old root attributes, the values of
 * the first `keep` iterations are appended iteration by iteration, and
 * bcg_runlog_sync replaces log.h5 with it in one step. Iterations logged
 * after the checkpoint are dropped (they are run again). */

typedef struct oldcurve {
  char *name;
  int64_t first;
  double *v;
  hsize_t n;
} oldcurve;

typedef struct oldlog {
  oldcurve *c;
  int n, cap;
  char **attr_name, **attr_val;
  int nattr, capattr;
} oldlog;

#if H5_VERSION_GE(1, 12, 0)
typedef H5O_info2_t obj_info;
#define VISIT(f, cb, data) H5Ovisit3(f, H5_INDEX_NAME, H5_ITER_INC, cb, data, H5O_INFO_BASIC)
#else
typedef H5O_info_t obj_info;
#define VISIT(f, cb, data) H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_INC, cb, data, H5O_INFO_BASIC)
#endif

static herr_t visit_cb(hid_t obj, const char *name, const obj_info *info, void *data) {
  oldlog *o = data;
  if (info->type != H5O_TYPE_DATASET) return 0;
  hid_t d = H5Dopen2(obj, name, H5P_DEFAULT);
  if (d < 0) return -1;
  hid_t sp = H5Dget_space(d);
  hsize_t dims[1] = {0};
  int ok = H5Sget_simple_extent_ndims(sp) == 1 && H5Sget_simple_extent_dims(sp, dims, NULL) == 1;
  H5Sclose(sp);
  if (!ok) {
    H5Dclose(d);
    return 0;
  }
  if (o->n == o->cap) {
    o->cap = o->cap ? 2 * o->cap : 32;
    o->c = realloc(o->c, (size_t)o->cap * sizeof *o->c);
    if (!o->c) return -1;
  }
  oldcurve *c = &o->c[o->n];
  c->name = strdup(name);
  c->n = dims[0];
  c->v = malloc((size_t)(dims[0] ? dims[0] : 1) * sizeof(double));
  c->first = 0;
  if (!c->name || !c->v) return -1;
  if (dims[0] && H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, c->v) < 0) {
    H5Dclose(d);
    return -1;
  }
  if (H5Aexists(d, "first_iteration") > 0) {
    hid_t a = H5Aopen(d, "first_iteration", H5P_DEFAULT);
    if (a >= 0) {
      hid_t t = H5Aget_type(a);
      if (t >= 0 && H5Tget_class(t) == H5T_INTEGER && bcg_h5_attr_single(a))
        H5Aread(a, H5T_NATIVE_INT64, &c->first);
      if (t >= 0) H5Tclose(t);
      H5Aclose(a);
    }
  }
  H5Dclose(d);
  o->n++;
  return 0;
}

static herr_t attr_cb(hid_t loc, const char *name, const H5A_info_t *info, void *data) {
  oldlog *o = data;
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  if (a < 0) return 0;
  hid_t t = H5Aget_type(a);
  /* one fixed-length string (the config's text is the longest, a few KB) */
  if (H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) <= 0 && bcg_h5_attr_single(a) &&
      H5Tget_size(t) <= ((size_t)1 << 20)) {
    size_t n = H5Tget_size(t);
    char *v = calloc(n + 2, 1);
    hid_t mt = H5Tcopy(H5T_C_S1);
    H5Tset_size(mt, n + 1); /* room for the terminator the conversion writes */
    if (v && H5Aread(a, mt, v) >= 0) {
      if (o->nattr == o->capattr) {
        o->capattr = o->capattr ? 2 * o->capattr : 16;
        o->attr_name = realloc(o->attr_name, (size_t)o->capattr * sizeof(char *));
        o->attr_val = realloc(o->attr_val, (size_t)o->capattr * sizeof(char *));
      }
      o->attr_name[o->nattr] = strdup(name);
      o->attr_val[o->nattr++] = v;
      v = NULL;
    }
    free(v);
    H5Tclose(mt);
  }
  H5Tclose(t);
  H5Aclose(a);
  return 0;
}

static void oldlog_free(oldlog *o) {
  for (int i = 0; i < o->n; i++) free(o->c[i].name), free(o->c[i].v);
  for (int i = 0; i < o->nattr; i++) free(o->attr_name[i]), free(o->attr_val[i]);
  free(o->c);
  free(o->attr_name);
  free(o->attr_val);
}

static bcg_runlog *log_resume(const char *path, const bcg_runlog_meta *meta, int64_t keep, char *err, size_t errlen) {
  oldlog o = {0};
  H5E_auto2_t ef;
  void *ed;
  H5Eget_auto2(H5E_DEFAULT, &ef, &ed);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  int bad = f < 0;
  if (!bad) {
    bad = VISIT(f, visit_cb, &o) < 0;
    hsize_t idx = 0;
    if (!bad) H5Aiterate2(f, H5_INDEX_NAME, H5_ITER_INC, &idx, attr_cb, &o);
    H5Fclose(f);
  }
  H5Eclear2(H5E_DEFAULT);
  H5Eset_auto2(H5E_DEFAULT, ef, ed);
  if (bad) {
    bcg_setf(err, errlen, "%s: cannot read the run's log to continue it", path);
    oldlog_free(&o);
    return NULL;
  }
  bcg_runlog *log = bcg_runlog_open_held(path, meta, err, errlen);
  if (!log) {
    oldlog_free(&o);
    return NULL;
  }
  int rc = 0;
  for (int i = 0; i < o.nattr && !rc; i++)
    if (strcmp(o.attr_name[i], "version") && strcmp(o.attr_name[i], "hdf5_version"))
      rc = bcg_runlog_set_attr(log, o.attr_name[i], o.attr_val[i], err, errlen);
  for (int64_t it = 0; it < keep && !rc; it++) {
    for (int i = 0; i < o.n; i++) {
      oldcurve *c = &o.c[i];
      if (it >= c->first && it < c->first + (int64_t)c->n) bcg_runlog_append(log, c->name, c->v[it - c->first]);
    }
    rc = bcg_runlog_flush_iteration(log, err, errlen);
  }
  oldlog_free(&o);
  if (!rc) rc = bcg_runlog_sync(log, err, errlen);
  if (rc) {
    char e2[64];
    bcg_runlog_close(log, e2, sizeof e2); /* held: log.h5 is left as it was */
    return NULL;
  }
  return log;
}

/* ---- progress ----------------------------------------------------------------- */

static void fmt_count(char *b, size_t n, double v) {
  if (v >= 1e9) snprintf(b, n, "%.2fG", v / 1e9);
  else if (v >= 1e6) snprintf(b, n, "%.2fM", v / 1e6);
  else if (v >= 1e4) snprintf(b, n, "%.1fk", v / 1e3);
  else snprintf(b, n, "%.0f", v);
}

static void fmt_time(char *b, size_t n, double s) {
  if (!(s >= 0) || s > 1e8) snprintf(b, n, "-");
  else if (s >= 3600) snprintf(b, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
  else if (s >= 60) snprintf(b, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
  else snprintf(b, n, "%.0fs", s);
}

/* fraction of the tightest budget spent, or -1 without a budget */
static double budget_frac(int64_t iters, uint64_t samples, double secs, int64_t it, uint64_t s, double wall) {
  double f = -1;
  if (iters > 0) f = fmax(f, (double)it / (double)iters);
  if (samples > 0) f = fmax(f, (double)s / (double)samples);
  if (secs > 0) f = fmax(f, wall / secs);
  return f;
}

/* ---- the loop -------------------------------------------------------------------- */

static int task_has_tracking(const bcg_task_ops *to) {
  return BCG_OPS_HAS(to, bcg_task_ops, tracking_error);
}

/* the process-wide stepper and network clocks (bcg_env_time, bcg_nn_time) */
typedef struct { double sim, vjp, nn, task, est, beside; } time_split;

static time_split time_now(void) {
  time_split t;
  double f, b;
  bcg_env_time(&t.sim, &t.vjp);
  bcg_nn_time(&f, &b);
  t.nn = f + b;
  t.beside = bcg_nn_time_overlapped();
  bcg_session_time(&t.task, &t.est);
  return t;
}

static void log_stats(bcg_runlog *log, int64_t it, uint64_t samples, double wall, const bcg_learner_stats *st,
                      int tracking, const time_split *dt) {
  bcg_runlog_append(log, "iteration", (double)it);
  bcg_runlog_append(log, "samples", (double)samples);
  bcg_runlog_append(log, "wall_time", wall);
  bcg_runlog_append(log, "mean_return", st->mean_return);
  bcg_runlog_append(log, "mean_ep_len", st->mean_ep_len);
  bcg_runlog_append(log, "mean_reward", st->mean_reward);
  bcg_runlog_append(log, "actor_loss", st->actor_loss);
  bcg_runlog_append(log, "critic_loss", st->critic_loss);
  bcg_runlog_append(log, "grad_norm", st->grad_norm);
  bcg_runlog_append(log, "grad_var", st->grad_var);
  bcg_runlog_append(log, "lr", st->lr);
  bcg_runlog_append(log, "action_std", st->action_std);
  bcg_runlog_append(log, "bundle_frac", st->bundle_frac);
  bcg_runlog_append(log, "iteration_samples", (double)st->samples);
  bcg_runlog_append(log, "nan_resets", (double)st->nan_resets);
  bcg_runlog_append(log, "episodes", (double)st->episodes);
  bcg_runlog_append(log, "skipped_updates", (double)st->skipped_updates);
  if (tracking) bcg_runlog_append(log, "track_err", st->track_err);
  bcg_runlog_append(log, "time_sim", dt->sim);
  bcg_runlog_append(log, "time_sim_vjp", dt->vjp);
  bcg_runlog_append(log, "time_nn", dt->nn);
  bcg_runlog_append(log, "time_nn_beside", dt->beside);
}

void bcg_session_close(bcg_session *S) {
  if (S->learner) S->lops->destroy(S->learner);
  if (S->est) S->est_ops->destroy(S->est);
  if (S->task) S->task_ops->destroy(S->task);
  bcg_env_free(S->env);
  bcg_session_time_free(S);
  memset(S, 0, sizeof *S);
}

static void teardown(loop *L) { bcg_session_close(&L->S); }

/* rank r's seed in a data-parallel run ([run] rank_seed = offset): the run's
 * seed mixed with r (splitmix64's finaliser), in the [run] seed key's range,
 * so that rank 1 of seed s does not draw what rank 0 of seed s + 1 does */
static uint64_t rank_seed(uint64_t seed, int r) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (uint64_t)r;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z & 0x7fffffffull;
}

/* dist: the training loop's session, one of the ranks of a data-parallel
 * run (its seed, its collective calls); every other session (bcg check's,
 * eval's, a rank's validation of the config) is a process of its own */
static int session_open(bcg_session *S, const bcg_config *cfg, int dist, char *err, size_t errlen) {
  memset(S, 0, sizeof *S);
  S->cfg = cfg;
  const bcg_services *svc = bcg_services_host();
  char e2[2048];
  S->ptask = bcg_config_plugin(cfg, BCG_KIND_TASK);
  S->pest = bcg_config_plugin(cfg, BCG_KIND_ESTIMATOR);
  S->plearn = bcg_config_plugin(cfg, BCG_KIND_LEARNER);
  if (!S->ptask || !S->pest || !S->plearn) {
    bcg_setf(err, errlen, "%s: training needs [task], [estimator] and [learner] sections with 'plugin = NAME'",
         bcg_config_path(cfg));
    return -1;
  }
  long threads = bcg_config_get_int(cfg, "run", "threads");
  if (threads > 0) {
    omp_set_num_threads((int)threads); /* OpenBLAS stays single-threaded: core/nn.c splits GEMMs over these */
  }
  if (bcg_cpu_denormals_setting(bcg_config_get_string(cfg, "run", "flush_denormals")))
    fprintf(stderr, "bcg: [run] flush_denormals: this CPU has no flush-to-zero mode; subnormals stay\n");
  int nenv = (int)bcg_config_get_int(cfg, "run", "num_envs");
  S->env = bcg_env_create(cfg, nenv, err, errlen);
  if (!S->env) goto fail;
  if (bcg_nn_set_cuda(S->env->device, (int)bcg_config_get_int(cfg, "run", "nn_min_batch"), e2, sizeof e2))
    fprintf(stderr, "bcg: device = cuda, but the MLPs stay on the CPU: %s\n", e2); /* e.g. bench/emu */
  long smb = bcg_config_get_int(cfg, "run", "sim_min_batch");
  if (S->env->device && smb > nenv)
    fprintf(stderr,
            "bcg: device = cuda: batches under [run] sim_min_batch = %ld environments step on the CPU, so this run's "
            "%d environments do (their larger batches, e.g. branches, may not); sim_min_batch = 1 puts every "
            "batch on the GPU\n",
            smb, nenv);

  const bcg_params *tp = bcg_config_section(cfg, "task");
  S->task_ops = S->ptask->desc->ops;
  S->task = S->task_ops->create(svc, tp, S->env, e2, sizeof e2);
  if (!S->task) {
    bcg_setf(err, errlen, "[task] %s (%s): %s", S->ptask->desc->name, S->ptask->path, e2);
    goto fail;
  }
  S->env->task_ops = S->task_ops;
  S->env->task = S->task;
  if (S->task_ops->act_dim(S->task) != S->env->nu) {
    bcg_setf(err, errlen, "[task] %s: %d action dimensions, but the model has %d actuators", S->ptask->desc->name,
         S->task_ops->act_dim(S->task), S->env->nu);
    goto fail;
  }

  const bcg_params *lp = bcg_config_section(cfg, "learner");
  int horizon = 0;
  if (S->plearn->desc->caps & BCG_CAP_NEEDS_BACKWARD) {
    if (!bcg_params_value(lp, "horizon")) {
      bcg_setf(err, errlen, "[learner] %s uses the estimator's backward pass but declares no 'horizon' key",
           S->plearn->desc->name);
      goto fail;
    }
    horizon = (int)bcg_params_get_int(lp, "horizon");
  }
  S->est_ops = S->pest->desc->ops;
  S->est = S->est_ops->create(svc, bcg_config_section(cfg, "estimator"), S->env, horizon, e2, sizeof e2);
  if (!S->est) {
    bcg_setf(err, errlen, "[estimator] %s (%s): %s", S->pest->desc->name, S->pest->path, e2);
    goto fail;
  }
  /* a GPU estimator on a GPU env: its device entries, behind host arrays (core/est_device.c) */
  if (bcg_env_on_cuda(S->env) && bcg_est_has_cuda(S->est_ops) &&
      bcg_est_device_wrap(&S->est_ops, &S->est, S->env, S->pest->desc->name, err, errlen))
    goto fail;

  S->tr.env = S->env;
  S->tr.task_ops = S->task_ops;
  S->tr.task = S->task;
  S->tr.est_ops = S->est_ops;
  S->tr.est = S->est;
  S->tr.estimator = S->pest;
  S->tr.cfg = cfg;
  S->tr.seed = (uint64_t)bcg_config_get_int(cfg, "run", "seed");
  S->tr.rank = dist ? bcg_dist_rank() : 0;
  S->tr.world = dist ? bcg_dist_size() : 1;
  S->tr.check_replicas = S->tr.world > 1 && bcg_config_get_bool(cfg, "run", "check_replicas");
  if (S->tr.rank > 0 && strcmp(bcg_config_get_string(cfg, "run", "rank_seed"), "same") != 0)
    S->tr.seed = rank_seed(S->tr.seed, S->tr.rank);
  if (S->tr.world > 1 && !(S->plearn->desc->caps & BCG_CAP_DATA_PARALLEL)) {
    bcg_setf(err, errlen, "[learner] %s does not train with several processes (%d ranks: mpirun -np %d); only "
             "learners with data-parallel support do (bcg describe learner/NAME lists the capability)",
             S->plearn->desc->name, S->tr.world, S->tr.world);
    goto fail;
  }
  S->tr.iteration = 0;
  S->tr.max_iterations = bcg_config_get_int(cfg, "run", "iterations");
  S->tr.threads = threads > 0 ? (int)threads : omp_get_max_threads();
  if (bcg_session_time_wrap(S)) {
    bcg_setf(err, errlen, "out of memory");
    goto fail;
  }
  S->lops = S->plearn->desc->ops;
  S->learner = S->lops->create(svc, lp, &S->tr, e2, sizeof e2);
  if (!S->learner) {
    bcg_setf(err, errlen, "[learner] %s (%s): %s", S->plearn->desc->name, S->plearn->path, e2);
    goto fail;
  }

  return 0;
fail:
  bcg_session_close(S);
  return -1;
}

int bcg_session_open(bcg_session *S, const bcg_config *cfg, char *err, size_t errlen) {
  return session_open(S, cfg, 0, err, errlen);
}

/* the progress line of one iteration (on a terminal redrawn in place):
 * iteration, samples, return, episode length, tracking error, rate, ETA */
static void print_progress(FILE *o, int tty, int64_t it, int64_t max_it, uint64_t samples, double rate_s, double eta_s,
                           const bcg_learner_stats *st, int tracking) {
  char sm[32], rate[32], eta[32], ret[32], len[32];
  fmt_count(sm, sizeof sm, (double)samples);
  fmt_count(rate, sizeof rate, rate_s);
  fmt_time(eta, sizeof eta, eta_s);
  if (isnan(st->mean_return)) snprintf(ret, sizeof ret, "-");
  else snprintf(ret, sizeof ret, "%.4g", st->mean_return);
  if (isnan(st->mean_ep_len)) snprintf(len, sizeof len, "-");
  else snprintf(len, sizeof len, "%.1f", st->mean_ep_len);
  char itb[48], trk[48] = "";
  if (tracking) {
    if (isnan(st->track_err)) snprintf(trk, sizeof trk, "  track_err -");
    else snprintf(trk, sizeof trk, "  track_err %.1fcm", 100 * st->track_err);
  }
  if (max_it > 0) snprintf(itb, sizeof itb, "%" PRId64 "/%" PRId64, it, max_it);
  else snprintf(itb, sizeof itb, "%" PRId64, it);
  fprintf(o, "%sit %s  samples %s  return %s  ep_len %s%s  %s samples/s  ETA %s%s", tty ? "\r" : "", itb, sm, ret, len,
          trk, rate, eta, tty ? "\033[K" : "\n");
  fflush(o);
}

/* the run's log (a new run's exists from the start, so a run that fails to
 * set up still records what it was) and its session; on resume, the state
 * of the newest good checkpoint and the log rebuilt up to it */
static int loop_open(loop *L, const bcg_config *cfg, const bcg_train_options *opt, char *err, size_t errlen) {
  char e2[2048];
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/log.h5", opt->run_dir);
  bcg_runlog_meta meta = {bcg_config_get_string(cfg, "run", "name"), bcg_config_path(cfg),
                          bcg_config_get_string(cfg, "run", "device"), bcg_config_get_int(cfg, "run", "seed")};
  const int rank = bcg_dist_rank(), world = bcg_dist_size();
  if (!opt->resume && rank == 0) {
    L->log = bcg_runlog_open(path, &meta, err, errlen);
    if (!L->log) return -1;
    static const bcg_kind kinds[] = {BCG_KIND_CONTACT, BCG_KIND_ESTIMATOR, BCG_KIND_LEARNER, BCG_KIND_TASK};
    for (int k = 0; k < 4; k++) {
      char attr[32];
      snprintf(attr, sizeof attr, "%s_plugin", bcg_kind_name(kinds[k]));
      bcg_runlog_set_attr(L->log, attr, plugin_name(cfg, kinds[k]), e2, sizeof e2);
    }
    if (world > 1) {
      char w[32];
      snprintf(w, sizeof w, "%d", world);
      bcg_runlog_set_attr(L->log, "ranks", w, e2, sizeof e2);
    }
  }
  int failed = session_open(&L->S, cfg, 1, err, errlen) != 0;
  if (any_failed(failed)) {
    if (!failed) bcg_setf(err, errlen, "another rank could not set up its session");
    return -1;
  }

  /* on resume: the state, then the log rebuilt up to it; with several ranks
   * rank 0 picks the checkpoint and each loads its own file of it */
  if (opt->resume) {
    char ck[PATH_MAX + 64];
    int64_t pick = -1;
    if (rank == 0) pick = newest_good_checkpoint(opt->run_dir, ck, sizeof ck, err, errlen);
    if (bcg_dist_bcast(&pick, sizeof pick, 0) || pick < 0) {
      if (rank > 0) bcg_setf(err, errlen, "rank 0 found no checkpoint to resume from");
      return -1;
    }
    int64_t keep = 0;
    rank_checkpoint_path(opt->run_dir, pick, rank, ck, sizeof ck);
    failed = bcg_session_load(&L->S, ck, &L->it, &L->samples, &L->wall0, &keep, err, errlen) != 0;
    if (!failed && world == 1 && L->S.ckpt_ranks > 1) {
      bcg_setf(err, errlen, "%s: written by rank 0 of a run of %d processes: resume it with mpirun -np %d (bcg "
               "eval and bcg render read it alone)", ck, L->S.ckpt_ranks, L->S.ckpt_ranks);
      failed = 1;
    }
    if (any_failed(failed)) {
      if (!failed) bcg_setf(err, errlen, "another rank could not load its checkpoint of iteration %lld", (long long)pick);
      return -1;
    }
    if (rank > 0) return 0;
    L->log = log_resume(path, &meta, keep, err, errlen);
    if (!L->log) return -1;
    char stamp[64];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char key[64];
    snprintf(key, sizeof key, "resumed_%" PRId64, L->it);
    bcg_runlog_set_attr(L->log, key, stamp, e2, sizeof e2);
  }
  return 0;
}

/* what bcg_train_run reports */
static void fill_result(bcg_train_result *res, const loop *L, double wall, int stopped, const bcg_learner_stats *st,
                        const char *ckpath, const time_split *tsum, double session_wall) {
  res->iterations = L->it;
  res->samples = L->samples;
  res->wall = wall;
  res->stopped = stopped;
  res->last = *st;
  snprintf(res->checkpoint, sizeof res->checkpoint, "%s", ckpath);
  res->time_sim = tsum->sim;
  res->time_sim_vjp = tsum->vjp;
  res->time_nn = tsum->nn;
  res->time_task = tsum->task;
  res->time_est = tsum->est;
  res->session_wall = session_wall;
}

/* The estimator's own per-iteration values (bcg_estimator_ops.log_values,
 * an optional entry) as curves "est_<name>". */
static int log_est_values(loop *L, char *err, size_t errlen) {
  const bcg_estimator_ops *eo = L->S.est_ops;
  if (!BCG_OPS_HAS(eo, bcg_estimator_ops, log_values)) return 0;
  enum { CAP = 32 };
  const char *names[CAP] = {0};
  double values[CAP];
  bcg_plugin_err_clear();
  int n = eo->log_values(L->S.est, names, values, CAP);
  if (n < 0 || n > CAP) {
    char why[2048];
    int have = bcg_plugin_err_take(why, sizeof why);
    bcg_setf(err, errlen, "[estimator] %s: log_values returned %d%s%s", L->S.pest->desc->name, n, have ? ": " : "",
             have ? why : "");
    return -1;
  }
  for (int i = 0; i < n; i++) {
    char curve[40];
    if (!names[i] || strlen(names[i]) > 27 || snprintf(curve, sizeof curve, "est_%s", names[i]) <= 4 ||
        bcg_runlog_append(L->log, curve, values[i])) {
      bcg_setf(err, errlen, "[estimator] %s: log_values: value %d has no valid name ([a-z0-9_]+, at most 27 "
               "characters): '%.40s'", L->S.pest->desc->name, i, names[i] ? names[i] : "(null)");
      return -1;
    }
  }
  return 0;
}

/* a data-parallel run's iteration statistics over the ranks, the same on
 * every rank: samples, episodes, NaN resets summed; the episodes' return and
 * length weighted by the episodes, the per-step means (reward, bundled
 * fraction, tracking error) by the samples; the losses averaged; what the
 * reduced gradient makes equal on every rank (its norm, skipped updates, the
 * learning rate, the action std) taken from rank 0. A mean no rank has a
 * value for stays NaN. */
static int reduce_stats(bcg_learner_stats *st) {
  if (bcg_dist_size() == 1) return 0;
  enum { N_SUM = 14 };
  const double sm = (double)st->samples, ep = st->episodes;
#define W(v, w) (isnan(v) ? 0.0 : (v) * (w)), (isnan(v) ? 0.0 : (w))
  double a[N_SUM] = {sm, ep, W(st->mean_return, ep), W(st->mean_ep_len, ep), W(st->mean_reward, sm),
                     W(st->bundle_frac, sm), W(st->track_err, sm), (double)st->nan_resets, 0};
#undef W
  /* the losses and the variance: plain means over the ranks that have them */
  double l[6] = {isnan(st->actor_loss) ? 0 : st->actor_loss, !isnan(st->actor_loss),
                 isnan(st->critic_loss) ? 0 : st->critic_loss, !isnan(st->critic_loss),
                 isnan(st->grad_var) ? 0 : st->grad_var, !isnan(st->grad_var)};
  if (bcg_dist_sum(a, N_SUM) || bcg_dist_sum(l, 6)) return -1;
  /* the values the reduced gradient makes the same on every rank: rank 0's */
  double mx[4] = {st->grad_norm, st->lr, st->action_std, (double)st->skipped_updates};
  if (bcg_dist_bcast(mx, sizeof mx, 0)) return -1;
  st->samples = (uint64_t)a[0];
  st->episodes = (int)a[1];
  st->mean_return = a[3] > 0 ? a[2] / a[3] : NAN;
  st->mean_ep_len = a[5] > 0 ? a[4] / a[5] : NAN;
  st->mean_reward = a[7] > 0 ? a[6] / a[7] : NAN;
  st->bundle_frac = a[9] > 0 ? a[8] / a[9] : NAN;
  st->track_err = a[11] > 0 ? a[10] / a[11] : NAN;
  st->nan_resets = (int)a[12];
  st->actor_loss = l[1] > 0 ? l[0] / l[1] : NAN;
  st->critic_loss = l[3] > 0 ? l[2] / l[3] : NAN;
  st->grad_var = l[5] > 0 ? l[4] / l[5] : NAN;
  st->grad_norm = mx[0];
  st->lr = mx[1];
  st->action_std = mx[2];
  st->skipped_updates = (int)mx[3];
  return 0;
}

/* One learner iteration and what follows it: the task's update, the time
 * split, the log row and the NaN warning. 0, or -1 with the message in err
 * (a plugin's own, through the error channel, with its context). */
static int one_iteration(loop *L, bcg_learner_stats *st, time_split *tsum, int tracking, int64_t *nan_iters,
                         double t0, char *err, size_t errlen) {
  memset(st, 0, sizeof *st);
  st->mean_return = st->mean_ep_len = st->grad_var = st->bundle_frac = NAN;
  st->actor_loss = st->critic_loss = st->grad_norm = st->lr = st->action_std = st->mean_reward = st->track_err = NAN;
  L->S.tr.iteration = L->it;
  time_split ta = time_now();
  char why[2048];
  bcg_plugin_err_clear();
  if (L->S.lops->iterate(L->S.learner, st)) {
    int have = bcg_plugin_err_take(why, sizeof why);
    bcg_setf(err, errlen, "[learner] %s: iteration %" PRId64 " failed%s%s", L->S.plearn->desc->name, L->it,
             have ? ": " : "", have ? why : "");
    return -1;
  }
  if (L->S.tr.task_ops->update && L->S.tr.task_ops->update(L->S.tr.task, L->it)) { /* timed (bcg_session_time) */
    int have = bcg_plugin_err_take(why, sizeof why);
    bcg_setf(err, errlen, "iteration %" PRId64 ": %s", L->it, have ? why : "[task] update failed");
    return -1;
  }
  time_split tb = time_now(),
             dt = {tb.sim - ta.sim, tb.vjp - ta.vjp, tb.nn - ta.nn, tb.task - ta.task, tb.est - ta.est,
                   tb.beside - ta.beside};
  tsum->sim += dt.sim;
  tsum->vjp += dt.vjp;
  tsum->nn += dt.nn;
  tsum->task += dt.task;
  tsum->est += dt.est;
  if (reduce_stats(st)) {
    bcg_setf(err, errlen, "iteration %" PRId64 ": the reduction of the statistics over the ranks failed", L->it);
    return -1;
  }
  L->it++;
  L->samples += st->samples;
  if (!L->log) return 0; /* ranks other than 0 log nothing */
  double wall = L->wall0 + (now_s() - t0);
  log_stats(L->log, L->it - 1, L->samples, wall, st, tracking, &dt);
  if (log_est_values(L, err, errlen)) return -1;
  /* an iteration with at least one NaN/Inf reset per environment: the run
   * is not learning anything (a broken model, contact or motion); say so
   * the first time and then every 100th such iteration */
  const int nenv_all = L->S.env->nenv * L->S.tr.world;
  if (st->nan_resets > 0 && st->nan_resets >= nenv_all && (*nan_iters)++ % 100 == 0)
    fprintf(stderr,
            "\nbcg: warning: iteration %" PRId64 ": %d NaN/Inf resets (a state, observation or reward not "
            "finite) for %d environments: every environment, on average; the physics or the task produces "
            "non-finite values (curve nan_resets in log.h5)\n",
            L->it - 1, st->nan_resets, nenv_all);
  return bcg_runlog_flush_iteration(L->log, err, errlen) ? -1 : 0;
}

int bcg_train_run(const bcg_config *cfg, const bcg_train_options *opt, bcg_train_result *res, char *err,
                  size_t errlen) {
  loop L;
  memset(&L, 0, sizeof L);
  L.cfg = cfg;
  L.opt = opt;
  if (res) {
    memset(res, 0, sizeof *res);
    res->last.mean_return = res->last.mean_ep_len = NAN;
  }
  if (!bcg_config_plugin(cfg, BCG_KIND_TASK) || !bcg_config_plugin(cfg, BCG_KIND_ESTIMATOR) ||
      !bcg_config_plugin(cfg, BCG_KIND_LEARNER)) {
    bcg_setf(err, errlen, "%s: training needs [task], [estimator] and [learner] sections with 'plugin = NAME'",
         bcg_config_path(cfg));
    return -1;
  }
  /* one lock per run: rank 0's (the others write only their shards) */
  int lock = -1;
  if (any_failed(bcg_dist_rank() == 0 && (lock = lock_run(opt->run_dir, err, errlen)) < 0)) {
    if (bcg_dist_rank() > 0) bcg_setf(err, errlen, "rank 0 could not lock the run directory");
    return -1;
  }
  char e2[2048];
  if (loop_open(&L, cfg, opt, err, errlen)) goto fail;
  L.S.tr.log = L.log;

  int64_t max_it = bcg_config_get_int(cfg, "run", "iterations");
  uint64_t max_s = (uint64_t)bcg_config_get_int(cfg, "run", "samples");
  double max_t = bcg_config_get_real(cfg, "run", "seconds");
  long ck_every = bcg_config_get_int(cfg, "run", "checkpoint_every");
  int tty = opt->progress_tty;
  if (tty < 0) tty = opt->progress ? isatty(fileno(opt->progress)) : 0;
  double t0 = now_s();
  uint64_t s0 = L.samples;
  double f0 = budget_frac(max_it, max_s, max_t, L.it, L.samples, L.wall0);
  int64_t last_ck = opt->resume ? L.it : -1;
  int stopped = 0, rc = 0;
  char ckpath[PATH_MAX + 64] = "";
  bcg_learner_stats st;
  memset(&st, 0, sizeof st);
  st.mean_return = st.mean_ep_len = st.track_err = NAN;
  int tracking = task_has_tracking(L.S.task_ops);
  int64_t nan_iters = 0;
  time_split tsum = {0, 0, 0, 0, 0, 0};
  int64_t cb_stop = 0; /* opt->on_iteration asked to stop (decided with the others at the next turn) */
  for (;;) {
    double wall = L.wall0 + (now_s() - t0);
    /* [budget spent, stop asked]: with several ranks, any rank's reason stops all of them at the same iteration */
    int64_t why[2] = {(max_it > 0 && L.it >= max_it) || (max_s > 0 && L.samples >= max_s) || (max_t > 0 && wall >= max_t),
                      (opt->stop && *opt->stop) || cb_stop};
    if (bcg_dist_max_i64(why, 2)) {
      bcg_setf(err, errlen, "the ranks could not agree on whether to stop (MPI)");
      rc = -1;
      break;
    }
    if (why[0]) break;
    if (why[1]) {
      stopped = 1;
      break;
    }
    if (one_iteration(&L, &st, &tsum, tracking, &nan_iters, t0, err, errlen)) {
      rc = -1;
      break;
    }
    wall = L.wall0 + (now_s() - t0);
    if (opt->progress) {
      double el = now_s() - t0, f = budget_frac(max_it, max_s, max_t, L.it, L.samples, wall);
      print_progress(opt->progress, tty, L.it, max_it, L.samples, el > 0 ? (double)(L.samples - s0) / el : 0,
                     f > f0 && f >= 0 ? el * (1 - f) / (f - f0) : -1, &st, tracking);
    }
    if (ck_every > 0 && L.it % ck_every == 0) {
      if (write_checkpoint(&L, wall, ckpath, sizeof ckpath, err, errlen)) {
        rc = -1;
        break;
      }
      last_ck = L.it;
    }
    if (opt->on_iteration && opt->on_iteration(opt->ctx, L.it, L.samples, wall, &st)) {
      if (L.S.tr.world == 1) {
        stopped = 1;
        break;
      }
      cb_stop = 1;
    }
  }
  if (opt->progress && tty) fprintf(opt->progress, "\n");
  double wall = L.wall0 + (now_s() - t0);
  if (rc == 0 && last_ck != L.it) {
    if (write_checkpoint(&L, wall, ckpath, sizeof ckpath, err, errlen)) rc = -1;
  }
  if (L.log && bcg_runlog_close(L.log, rc ? e2 : err, rc ? sizeof e2 : errlen)) rc = -1;
  L.log = NULL;
  if (res) fill_result(res, &L, wall, stopped, &st, ckpath, &tsum, now_s() - t0);
  teardown(&L);
  if (lock >= 0) close(lock);
  return rc;
fail:
  if (L.log) bcg_runlog_close(L.log, e2, sizeof e2);
  teardown(&L);
  if (lock >= 0) close(lock);
  return -1;
}
