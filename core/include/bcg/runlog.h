/* bcg/runlog.h - run directories, the HDF5 training log and checkpoints.
 *
 * A run lives in <out_dir>/<name>/<UTC stamp>/ with config.ini (resolved),
 * log.h5 and checkpoints/. log.h5 holds run metadata as root attributes
 * (version, start_time, host, backend, precision, seed, name, config) and one
 * extendible, chunked 1-D double dataset per curve, created on first use.
 * The log is built in memory; bcg_runlog_flush_iteration() writes the values
 * appended during an iteration and replaces the file on disk with the whole
 * log (written to PATH.tmp, then renamed over PATH). So the file is always
 * complete and readable, also while training (no lock: h5py, h5dump and bcg
 * report can read it at any time), a crash loses at most that iteration, and
 * a write error (a full disk) leaves the previous file; the root attribute
 * "iterations" counts the complete ones.
 *
 * Checkpoints are HDF5 files written atomically: begin() creates PATH.tmp,
 * commit() flushes, fsyncs and renames it over PATH. On any failure the tmp
 * file is removed and PATH is left as it was. A checkpoint carries root
 * attributes format_version (BCG_CHECKPOINT_FORMAT) and checksum_crc32 (a
 * CRC-32 over every dataset's path and stored bytes); opening one checks
 * them and refuses a damaged file or a newer format with a message. Sizes
 * are checked before anything is allocated for them: a dataset that
 * declares more than 1 GiB, or (unfiltered) more bytes than the file stores,
 * is damaged. Files of format 1 (no format_version: written before
 * checksums) open unchecked; the array readers below take only number
 * types (float or integer, at most 16 bytes a value) in any case.
 *
 * HDF5 handles appear as int64_t (hid_t) so that this header does not need
 * hdf5.h. Every function returns errors as one line in err; none prints. */
#ifndef BCG_RUNLOG_H
#define BCG_RUNLOG_H

#include <stddef.h>
#include <stdint.h>
#include "bcg/real.h"

BCG_BEGIN_DECLS

/* ---- run directory ----------------------------------------------------------- */

/* Create <out_dir>/<name>/<YYYYmmddTHHMMSSZ>[-N]/ and its checkpoints/ folder,
 * writing the new directory's path into dir. name must be a single path
 * component. Returns 0 or -1. */
int bcg_rundir_create(const char *out_dir, const char *name, char *dir, size_t dirlen, char *err,
                      size_t errlen);

/* ---- the training log --------------------------------------------------------- */

typedef struct bcg_runlog bcg_runlog;

typedef struct bcg_runlog_meta {
  const char *name;    /* run name */
  const char *config;  /* path of the config it came from */
  const char *backend; /* "cpu" or "cuda" */
  int64_t seed;
} bcg_runlog_meta;

/* Create (truncate) the log file and write the metadata. */
bcg_runlog *bcg_runlog_open(const char *path, const bcg_runlog_meta *meta, char *err, size_t errlen);
/* The same, but nothing is written to PATH (an existing file stays as it is)
 * until bcg_runlog_sync(): a resumed run rebuilds its log this way and
 * replaces the old one in one step. */
bcg_runlog *bcg_runlog_open_held(const char *path, const bcg_runlog_meta *meta, char *err, size_t errlen);
/* Write the log to PATH now (fsynced), and from then on at every flush. */
int bcg_runlog_sync(bcg_runlog *log, char *err, size_t errlen);
/* Add a string attribute to the root (extra metadata). */
int bcg_runlog_set_attr(bcg_runlog *log, const char *name, const char *value, char *err, size_t errlen);
/* Queue one value of a curve for the current iteration. Curve names are
 * [A-Za-z0-9_.-] with '/' for groups ("loss/actor"). Returns 0, or -1 on an
 * invalid name or out of memory. */
int bcg_runlog_append(bcg_runlog *log, const char *curve, double value);
/* Write the queued values (creating datasets as needed), bump "iterations",
 * and flush the file. */
int bcg_runlog_flush_iteration(bcg_runlog *log, char *err, size_t errlen);
/* Complete iterations written so far. */
int64_t bcg_runlog_iterations(const bcg_runlog *log);
/* Flush what is queued as a last iteration (if any), write the file a last
 * time (fsynced) and close; always frees. */
int bcg_runlog_close(bcg_runlog *log, char *err, size_t errlen);

/* ---- checkpoints ---------------------------------------------------------------- */

typedef struct bcg_checkpoint bcg_checkpoint;
#define BCG_CHECKPOINT_FORMAT 2

bcg_checkpoint *bcg_checkpoint_begin(const char *path, char *err, size_t errlen);
/* The file's root group: pass it (or a group below it) to the helpers. */
int64_t bcg_checkpoint_root(const bcg_checkpoint *ck);
/* Flush, fsync, rename PATH.tmp to PATH. Always frees ck. */
int bcg_checkpoint_commit(bcg_checkpoint *ck, char *err, size_t errlen);
/* Give up: close and remove PATH.tmp. Always frees ck. */
void bcg_checkpoint_abort(bcg_checkpoint *ck);

/* Open a committed checkpoint read-only after checking its format and
 * checksum: a file id (>= 0) or -1 ("checkpoint PATH: damaged: ..."). */
int64_t bcg_checkpoint_open(const char *path, char *err, size_t errlen);
/* The same check without keeping the file open: 0 intact, -1 with the reason. */
int bcg_checkpoint_verify(const char *path, char *err, size_t errlen);
/* Recompute and store the checksum of a checkpoint edited on purpose (a test
 * that writes perturbed parameters into one, surgery with h5py). 0 or -1. */
int bcg_checkpoint_seal(const char *path, char *err, size_t errlen);
void bcg_checkpoint_close(int64_t file);

/* ---- HDF5 helpers (for checkpoints and plugins' save/load) ------------------------ */

/* Create (create != 0) or open a group below loc; -1 on error. Close it with
 * bcg_h5_group_close. */
int64_t bcg_h5_group(int64_t loc, const char *name, int create, char *err, size_t errlen);
void bcg_h5_group_close(int64_t group);

/* Named 1-D arrays. bcg_real arrays are stored in the build's precision and
 * converted on read, so a float build reads a double checkpoint and back.
 * Readers return the number of elements (which must not exceed cap), or -1. */
int bcg_h5_write_reals(int64_t loc, const char *name, const bcg_real *x, size_t n, char *err, size_t errlen);
long bcg_h5_read_reals(int64_t loc, const char *name, bcg_real *x, size_t cap, char *err, size_t errlen);
int bcg_h5_write_doubles(int64_t loc, const char *name, const double *x, size_t n, char *err, size_t errlen);
long bcg_h5_read_doubles(int64_t loc, const char *name, double *x, size_t cap, char *err, size_t errlen);
int bcg_h5_write_i64(int64_t loc, const char *name, const int64_t *x, size_t n, char *err, size_t errlen);
/* A C-ordered array of rank 1 to 8 with the given shape (readers above take 1-D only). */
int bcg_h5_write_doubles_nd(int64_t loc, const char *name, const double *x, int rank, const size_t *shape, char *err,
                            size_t errlen);
long bcg_h5_read_i64(int64_t loc, const char *name, int64_t *x, size_t cap, char *err, size_t errlen);
/* Elements of a named array, or -1 if absent. */
long bcg_h5_length(int64_t loc, const char *name);

/* Open any HDF5 file read-only (a log, an evaluation): a file id (>= 0, close
 * it with bcg_checkpoint_close) or -1 with "<path>: cannot open: <cause>". */
int64_t bcg_h5_open(const char *path, char *err, size_t errlen);
/* 1 when the attribute attr (an HDF5 attribute id) holds exactly one
 * element (a scalar or a 1-element array), as an attribute read as one value
 * must: HDF5 writes every element it holds into the reader's buffer. */
int bcg_h5_attr_single(int64_t attr);
/* String attributes of a group (or file). */
int bcg_h5_write_str(int64_t loc, const char *name, const char *value, char *err, size_t errlen);
int bcg_h5_read_str(int64_t loc, const char *name, char *buf, size_t len, char *err, size_t errlen);

BCG_END_DECLS

#endif
