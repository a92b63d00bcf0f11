/* runlog.c - run directories, the HDF5 training log, atomic checkpoints.
 *
 * HDF5 prints its error stack by default; every public function here turns
 * that off for its duration (H5_QUIET/H5_LOUD) and turns the innermost HDF5
 * message into part of a one-line error instead. */
#include "bcg/runlog.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bcg/version.h"
#include "util.h"

#define CHUNK 1024

/* Silence HDF5's automatic error printing for one public call. */
#define H5_QUIET                         \
  H5E_auto2_t old_func_;                 \
  void *old_data_;                       \
  H5Eget_auto2(H5E_DEFAULT, &old_func_, &old_data_); \
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL)
#define H5_LOUD H5Eset_auto2(H5E_DEFAULT, old_func_, old_data_)

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
  char *buf = data;
  if (e->desc && *e->desc) snprintf(buf, 512, "%s", e->desc); /* the innermost wins */
  return 0;
}

/* A file's own text (an object's name) quoted in a one-line message: control
 * characters become '?'. */
static void printable(char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

/* The innermost message of the current HDF5 error stack (then cleared). */
static const char *h5_cause(char *buf) {
  buf[0] = 0;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk_cb, buf);
  H5Eclear2(H5E_DEFAULT);
  if (!buf[0]) snprintf(buf, 512, "HDF5 error");
  /* low-level I/O failures carry the system's message: keep just that */
  const char *m = strstr(buf, "error message = '");
  if (m) {
    char sys[256];
    m += strlen("error message = '");
    size_t n = strcspn(m, "'");
    snprintf(sys, sizeof sys, "%.*s", (int)n, m);
    snprintf(buf, 512, "I/O error: %s", sys);
  }
  printable(buf);
  return buf;
}

/* File name behind an id, for messages. */
static const char *h5_file(hid_t loc, char *buf, size_t len) {
  if (H5Fget_name(loc, buf, len) <= 0) snprintf(buf, len, "(hdf5 file)");
  return buf;
}

static int h5_fail(hid_t loc, const char *name, const char *what, char *err, size_t errlen) {
  char f[PATH_MAX], c[512];
  h5_cause(c);
  bcg_setf(err, errlen, "%s: %s: %s failed: %s", h5_file(loc, f, sizeof f), name, what, c);
  return -1;
}

/* ---- run directory ------------------------------------------------------------ */

static int mkdir_p(const char *path, char *err, size_t errlen) {
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return bcg_setf(err, errlen, "%s: path too long", path), -1;
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
      return bcg_setf(err, errlen, "%s: cannot create directory: %s", tmp, strerror(errno)), -1;
    *p = '/';
  }
  if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
    return bcg_setf(err, errlen, "%s: cannot create directory: %s", tmp, strerror(errno)), -1;
  struct stat st;
  if (stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode)) return bcg_setf(err, errlen, "%s: not a directory", tmp), -1;
  return 0;
}

int bcg_rundir_create(const char *out_dir, const char *name, char *dir, size_t dirlen, char *err, size_t errlen) {
  if (!name || !*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
    return bcg_setf(err, errlen, "run name '%s' must be one path component (no '/')", name ? name : ""), -1;
  if (!out_dir || !*out_dir) out_dir = ".";
  char base[PATH_MAX];
  if (snprintf(base, sizeof base, "%s/%s", out_dir, name) >= (int)sizeof base)
    return bcg_setf(err, errlen, "%s/%s: path too long", out_dir, name), -1;
  if (mkdir_p(base, err, errlen)) return -1;
  char stamp[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  char path[PATH_MAX + 64];
  for (int k = 1; k < 1000; k++) {
    if (k == 1)
      snprintf(path, sizeof path, "%s/%s", base, stamp);
    else
      snprintf(path, sizeof path, "%s/%s-%d", base, stamp, k);
    if (mkdir(path, 0777) == 0) {
      char ck[PATH_MAX + 96];
      snprintf(ck, sizeof ck, "%s/checkpoints", path);
      if (mkdir(ck, 0777) != 0) return bcg_setf(err, errlen, "%s: cannot create directory: %s", ck, strerror(errno)), -1;
      if (strlen(path) >= dirlen) return bcg_setf(err, errlen, "%s: path too long", path), -1;
      snprintf(dir, dirlen, "%s", path);
      return 0;
    }
    if (errno != EEXIST) return bcg_setf(err, errlen, "%s: cannot create directory: %s", path, strerror(errno)), -1;
  }
  return bcg_setf(err, errlen, "%s/%s: too many runs in the same second", base, stamp), -1;
}

/* ---- string attributes ---------------------------------------------------------- */

int bcg_h5_attr_single(int64_t attr) {
  hid_t a = (hid_t)attr;
  hid_t sp = H5Aget_space(a);
  hssize_t n = sp < 0 ? -1 : H5Sget_simple_extent_npoints(sp);
  if (sp >= 0) H5Sclose(sp);
  return n == 1;
}

static int write_str_attr(hid_t loc, const char *name, const char *value, char *err, size_t errlen) {
  size_t n = strlen(value);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, n ? n : 1);
  H5Tset_strpad(t, H5T_STR_NULLPAD);
  hid_t sp = H5Screate(H5S_SCALAR);
  if (H5Aexists(loc, name) > 0) H5Adelete(loc, name);
  hid_t a = H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
  int rc = 0;
  if (a < 0 || H5Awrite(a, t, n ? value : "") < 0) rc = h5_fail(loc, name, "writing attribute", err, errlen);
  if (a >= 0) H5Aclose(a);
  H5Sclose(sp);
  H5Tclose(t);
  return rc;
}

int bcg_h5_write_str(int64_t loc, const char *name, const char *value, char *err, size_t errlen) {
  H5_QUIET;
  int rc = write_str_attr((hid_t)loc, name, value, err, errlen);
  H5_LOUD;
  return rc;
}

int bcg_h5_read_str(int64_t loc, const char *name, char *buf, size_t len, char *err, size_t errlen) {
  H5_QUIET;
  int rc = -1;
  hid_t a = H5Aopen((hid_t)loc, name, H5P_DEFAULT);
  hid_t t = -1, mt = -1;
  if (a < 0) {
    h5_fail((hid_t)loc, name, "opening attribute", err, errlen);
    goto out;
  }
  t = H5Aget_type(a);
  if (H5Tget_class(t) != H5T_STRING || H5Tis_variable_str(t) > 0) {
    char f[PATH_MAX];
    bcg_setf(err, errlen, "%s: %s: not a fixed-length string attribute", h5_file((hid_t)loc, f, sizeof f), name);
    goto out;
  }
  size_t n = H5Tget_size(t);
  if (!bcg_h5_attr_single(a) || n > ((size_t)1 << 20)) {
    char f[PATH_MAX];
    bcg_setf(err, errlen, "%s: %s: not one string (of at most 1 MiB)", h5_file((hid_t)loc, f, sizeof f), name);
    goto out;
  }
  char *tmp = calloc(n + 2, 1);
  if (!tmp) {
    bcg_setf(err, errlen, "out of memory");
    goto out;
  }
  mt = H5Tcopy(H5T_C_S1); /* NULLTERM: room for the terminator */
  H5Tset_size(mt, n + 1);
  if (H5Aread(a, mt, tmp) < 0) {
    free(tmp);
    h5_fail((hid_t)loc, name, "reading attribute", err, errlen);
    goto out;
  }
  if (strlen(tmp) >= len) {
    free(tmp);
    bcg_setf(err, errlen, "%s: attribute longer than %zu bytes", name, len);
    goto out;
  }
  snprintf(buf, len, "%s", tmp);
  free(tmp);
  rc = 0;
out:
  if (mt >= 0) H5Tclose(mt);
  if (t >= 0) H5Tclose(t);
  if (a >= 0) H5Aclose(a);
  H5_LOUD;
  return rc;
}

/* ---- arrays ------------------------------------------------------------------------ */

static hid_t lcpl_intermediate(void) {
  hid_t p = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(p, 1);
  return p;
}

static int write_array_nd(hid_t loc, const char *name, hid_t filetype, hid_t memtype, const void *x, int rank,
                          const size_t *shape, char *err, size_t errlen) {
  if (H5Lexists(loc, name, H5P_DEFAULT) > 0 && H5Ldelete(loc, name, H5P_DEFAULT) < 0)
    return h5_fail(loc, name, "replacing dataset", err, errlen);
  hsize_t dims[8];
  size_t n = 1;
  for (int i = 0; i < rank; i++) dims[i] = (hsize_t)shape[i], n *= shape[i];
  hid_t sp = H5Screate_simple(rank, dims, NULL);
  hid_t lp = lcpl_intermediate();
  hid_t d = H5Dcreate2(loc, name, filetype, sp, lp, H5P_DEFAULT, H5P_DEFAULT);
  int rc = 0;
  if (d < 0)
    rc = h5_fail(loc, name, "creating dataset", err, errlen);
  else if (n > 0 && H5Dwrite(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) < 0)
    rc = h5_fail(loc, name, "writing dataset", err, errlen);
  if (d >= 0) H5Dclose(d);
  H5Pclose(lp);
  H5Sclose(sp);
  return rc;
}

static int write_array(hid_t loc, const char *name, hid_t filetype, hid_t memtype, const void *x, size_t n,
                       char *err, size_t errlen) {
  return write_array_nd(loc, name, filetype, memtype, x, 1, &n, err, errlen);
}

/* a number type (float or integer of 1 to 16 bytes): what the readers
 * convert; HDF5 would allocate a conversion buffer of whatever size a
 * damaged file gives its values */
static int number_type(hid_t t) {
  H5T_class_t c = H5Tget_class(t);
  size_t sz = H5Tget_size(t);
  return (c == H5T_FLOAT || c == H5T_INTEGER) && sz >= 1 && sz <= 16;
}

static long read_array(hid_t loc, const char *name, hid_t memtype, void *x, size_t cap, char *err, size_t errlen) {
  hid_t d = H5Dopen2(loc, name, H5P_DEFAULT);
  if (d < 0) return h5_fail(loc, name, "opening dataset", err, errlen);
  hid_t sp = H5Dget_space(d), t = H5Dget_type(d);
  long rc = -1;
  hsize_t dims[1] = {0};
  if (t < 0 || !number_type(t)) {
    char f[PATH_MAX];
    bcg_setf(err, errlen, "%s: %s: not an array of numbers (its values have %zu bytes)", h5_file(loc, f, sizeof f), name,
         t < 0 ? (size_t)0 : H5Tget_size(t));
  } else if (H5Sget_simple_extent_ndims(sp) != 1) {
    char f[PATH_MAX];
    bcg_setf(err, errlen, "%s: %s: not a 1-D array", h5_file(loc, f, sizeof f), name);
  } else {
    H5Sget_simple_extent_dims(sp, dims, NULL);
    if (dims[0] > cap) {
      char f[PATH_MAX];
      bcg_setf(err, errlen, "%s: %s: has %llu elements, room for %zu", h5_file(loc, f, sizeof f), name,
           (unsigned long long)dims[0], cap);
    } else if (dims[0] > 0 && H5Dread(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) < 0) {
      h5_fail(loc, name, "reading dataset", err, errlen);
    } else {
      rc = (long)dims[0];
    }
  }
  if (t >= 0) H5Tclose(t);
  H5Sclose(sp);
  H5Dclose(d);
  return rc;
}

#ifdef BCG_REAL_FLOAT
#define REAL_FILE H5T_IEEE_F32LE
#define REAL_MEM H5T_NATIVE_FLOAT
#else
#define REAL_FILE H5T_IEEE_F64LE
#define REAL_MEM H5T_NATIVE_DOUBLE
#endif

int bcg_h5_write_reals(int64_t loc, const char *name, const bcg_real *x, size_t n, char *err, size_t errlen) {
  H5_QUIET;
  int rc = write_array((hid_t)loc, name, REAL_FILE, REAL_MEM, x, n, err, errlen);
  H5_LOUD;
  return rc;
}
long bcg_h5_read_reals(int64_t loc, const char *name, bcg_real *x, size_t cap, char *err, size_t errlen) {
  H5_QUIET;
  long rc = read_array((hid_t)loc, name, REAL_MEM, x, cap, err, errlen);
  H5_LOUD;
  return rc;
}
int bcg_h5_write_doubles(int64_t loc, const char *name, const double *x, size_t n, char *err, size_t errlen) {
  H5_QUIET;
  int rc = write_array((hid_t)loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, x, n, err, errlen);
  H5_LOUD;
  return rc;
}
int bcg_h5_write_doubles_nd(int64_t loc, const char *name, const double *x, int rank, const size_t *shape, char *err,
                            size_t errlen) {
  if (rank < 1 || rank > 8) {
    bcg_setf(err, errlen, "%s: rank %d (1 to 8)", name, rank);
    return -1;
  }
  H5_QUIET;
  int rc = write_array_nd((hid_t)loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, x, rank, shape, err, errlen);
  H5_LOUD;
  return rc;
}
long bcg_h5_read_doubles(int64_t loc, const char *name, double *x, size_t cap, char *err, size_t errlen) {
  H5_QUIET;
  long rc = read_array((hid_t)loc, name, H5T_NATIVE_DOUBLE, x, cap, err, errlen);
  H5_LOUD;
  return rc;
}
int bcg_h5_write_i64(int64_t loc, const char *name, const int64_t *x, size_t n, char *err, size_t errlen) {
  H5_QUIET;
  int rc = write_array((hid_t)loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, x, n, err, errlen);
  H5_LOUD;
  return rc;
}
long bcg_h5_read_i64(int64_t loc, const char *name, int64_t *x, size_t cap, char *err, size_t errlen) {
  H5_QUIET;
  long rc = read_array((hid_t)loc, name, H5T_NATIVE_INT64, x, cap, err, errlen);
  H5_LOUD;
  return rc;
}

long bcg_h5_length(int64_t loc, const char *name) {
  H5_QUIET;
  long rc = -1;
  if (H5Lexists((hid_t)loc, name, H5P_DEFAULT) > 0) {
    hid_t d = H5Dopen2((hid_t)loc, name, H5P_DEFAULT);
    if (d >= 0) {
      hid_t sp = H5Dget_space(d);
      hsize_t dims[1];
      if (H5Sget_simple_extent_ndims(sp) == 1 && H5Sget_simple_extent_dims(sp, dims, NULL) == 1) rc = (long)dims[0];
      H5Sclose(sp);
      H5Dclose(d);
    }
  }
  H5Eclear2(H5E_DEFAULT);
  H5_LOUD;
  return rc;
}

int64_t bcg_h5_group(int64_t loc, const char *name, int create, char *err, size_t errlen) {
  H5_QUIET;
  hid_t g;
  if (create) {
    hid_t lp = lcpl_intermediate();
    g = H5Gcreate2((hid_t)loc, name, lp, H5P_DEFAULT, H5P_DEFAULT);
    H5Pclose(lp);
  } else {
    g = H5Gopen2((hid_t)loc, name, H5P_DEFAULT);
  }
  if (g < 0) h5_fail((hid_t)loc, name, create ? "creating group" : "opening group", err, errlen);
  H5_LOUD;
  return g < 0 ? -1 : (int64_t)g;
}

void bcg_h5_group_close(int64_t group) {
  if (group < 0) return;
  H5_QUIET;
  H5Gclose((hid_t)group);
  H5_LOUD;
}

/* ---- the training log ------------------------------------------------------------------ */

typedef struct curve {
  char *name;
  hid_t dset;
  hsize_t len;
} curve;

typedef struct pending {
  int curve;
  double value;
} pending;

/* The log is an HDF5 file in memory (the core driver, no backing store),
 * like a checkpoint being built. Every flush writes its whole image to
 * PATH.tmp with plain write() calls and renames it over PATH. So PATH is
 * always a complete file a reader can open at any time (HDF5 holds no lock
 * on it, h5py and bcg report read it during training), a killed writer
 * leaves the last complete iteration, and a write error (a full disk) is
 * ours to report: PATH keeps the previous image and HDF5 never holds a
 * half-written file it would try again to flush at exit. */
struct bcg_runlog {
  hid_t file;
  char *path;
  curve *curves;
  int ncurves, capcurves;
  pending *pend;
  int npend, cappend;
  int64_t iterations;
  int64_t written; /* iterations in PATH (-1: PATH not written yet) */
  int hold;        /* bcg_runlog_open_held: nothing written until bcg_runlog_sync */
  int dirty;       /* changed since PATH was written */
};

static int valid_curve(const char *s) {
  if (!s || !*s || *s == '/' || strlen(s) > 200) return 0;
  for (const char *c = s; *c; c++) {
    if (!(isalnum((unsigned char)*c) || *c == '_' || *c == '.' || *c == '-' || *c == '/')) return 0;
    if (*c == '/' && (c[1] == '/' || c[1] == 0)) return 0;
  }
  return 1;
}

static void runlog_free(bcg_runlog *log) {
  for (int i = 0; i < log->ncurves; i++) {
    if (log->curves[i].dset >= 0) H5Dclose(log->curves[i].dset);
    free(log->curves[i].name);
  }
  free(log->curves);
  free(log->pend);
  free(log->path);
  free(log);
}

static int write_i64_attr(hid_t loc, const char *name, int64_t v) {
  hid_t sp = H5Screate(H5S_SCALAR);
  if (H5Aexists(loc, name) > 0) H5Adelete(loc, name);
  hid_t a = H5Acreate2(loc, name, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
  int rc = (a >= 0 && H5Awrite(a, H5T_NATIVE_INT64, &v) >= 0) ? 0 : -1;
  if (a >= 0) H5Aclose(a);
  H5Sclose(sp);
  return rc;
}

static int write_all(int fd, const char *buf, size_t n);

/* Write the in-memory file's image to PATH.tmp and rename it over PATH. */
static int write_image(bcg_runlog *log, int sync, char *err, size_t errlen) {
  char c[512], tmp[PATH_MAX + 8];
  snprintf(tmp, sizeof tmp, "%s.tmp", log->path);
  char keeps[128];
  if (log->written < 0) snprintf(keeps, sizeof keeps, "it is not written");
  else snprintf(keeps, sizeof keeps, "it keeps its first %lld iterations", (long long)log->written);
  ssize_t size = -1;
  char *image = NULL;
  if (H5Fflush(log->file, H5F_SCOPE_GLOBAL) >= 0) size = H5Fget_file_image(log->file, NULL, 0);
  if (size > 0 && (image = malloc((size_t)size)) && H5Fget_file_image(log->file, image, (size_t)size) != size) size = -1;
  if (size <= 0 || !image) {
    bcg_setf(err, errlen, "%s: building the log failed: %s; %s", log->path, image ? h5_cause(c) : "out of memory", keeps);
    free(image);
    return -1;
  }
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int rc = 0;
  if (fd < 0) {
    if (log->written < 0)
      bcg_setf(err, errlen, "%s: cannot create log: %s", log->path, strerror(errno));
    else
      bcg_setf(err, errlen, "%s: cannot create %s: %s; %s", log->path, tmp, strerror(errno), keeps);
    rc = -1;
  } else {
    int bad = write_all(fd, image, (size_t)size) != 0 || (sync && fsync(fd) != 0);
    int e = errno;
    if (close(fd) != 0 && !bad) bad = 1, e = errno;
    if (bad) {
      bcg_setf(err, errlen, "%s: writing %s failed: %s; %s", log->path, tmp, strerror(e), keeps);
      rc = -1;
    } else if (rename(tmp, log->path) != 0) {
      bcg_setf(err, errlen, "%s: rename from %s failed: %s; %s", log->path, tmp, strerror(errno), keeps);
      rc = -1;
    }
    if (rc) unlink(tmp);
  }
  free(image);
  if (rc == 0) {
    log->written = log->iterations;
    log->dirty = 0;
  }
  return rc;
}

static bcg_runlog *runlog_create(const char *path, const bcg_runlog_meta *meta, int hold, char *err,
                                 size_t errlen) {
  H5_QUIET;
  bcg_runlog *log = calloc(1, sizeof *log);
  if (!log || !(log->path = strdup(path))) {
    free(log);
    bcg_setf(err, errlen, "out of memory");
    H5_LOUD;
    return NULL;
  }
  log->written = -1;
  log->hold = hold;
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_core(fapl, 1 << 20, 0);
  log->file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  H5Pclose(fapl);
  if (log->file < 0) {
    char c[512];
    bcg_setf(err, errlen, "%s: cannot create log: %s", path, h5_cause(c));
    runlog_free(log);
    H5_LOUD;
    return NULL;
  }
  char now[64], host[256] = "unknown";
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = 0;
  unsigned maj, min, rel;
  H5get_libversion(&maj, &min, &rel);
  char h5v[64];
  snprintf(h5v, sizeof h5v, "%u.%u.%u", maj, min, rel);
  const char *names[] = {"version", "start_time", "host", "backend", "precision", "name", "config", "hdf5_version"};
  const char *vals[] = {BCG_VERSION,
                        now,
                        host,
                        meta && meta->backend ? meta->backend : "cpu",
                        BCG_REAL_NAME,
                        meta && meta->name ? meta->name : "",
                        meta && meta->config ? meta->config : "",
                        h5v};
  for (int i = 0; i < 8; i++)
    if (write_str_attr(log->file, names[i], vals[i], err, errlen)) goto fail;
  if (write_i64_attr(log->file, "seed", meta ? meta->seed : 0) || write_i64_attr(log->file, "iterations", 0)) {
    h5_fail(log->file, "seed", "writing attribute", err, errlen);
    goto fail;
  }
  log->dirty = 1;
  if (!hold && write_image(log, 0, err, errlen)) goto fail;
  H5_LOUD;
  return log;
fail:
  H5Fclose(log->file);
  H5Eclear2(H5E_DEFAULT);
  runlog_free(log);
  H5_LOUD;
  return NULL;
}

bcg_runlog *bcg_runlog_open(const char *path, const bcg_runlog_meta *meta, char *err, size_t errlen) {
  return runlog_create(path, meta, 0, err, errlen);
}

bcg_runlog *bcg_runlog_open_held(const char *path, const bcg_runlog_meta *meta, char *err, size_t errlen) {
  return runlog_create(path, meta, 1, err, errlen);
}

int bcg_runlog_sync(bcg_runlog *log, char *err, size_t errlen) {
  H5_QUIET;
  log->hold = 0;
  int rc = write_image(log, 1, err, errlen);
  if (rc) log->hold = 1; /* PATH stays as it was */
  H5_LOUD;
  return rc;
}

int bcg_runlog_set_attr(bcg_runlog *log, const char *name, const char *value, char *err, size_t errlen) {
  H5_QUIET;
  int rc = write_str_attr(log->file, name, value, err, errlen);
  if (rc == 0) {
    log->dirty = 1;
    if (!log->hold) rc = write_image(log, 0, err, errlen);
  }
  H5_LOUD;
  return rc;
}

int bcg_runlog_append(bcg_runlog *log, const char *name, double value) {
  if (!valid_curve(name)) return -1;
  int c = -1;
  for (int i = 0; i < log->ncurves; i++)
    if (strcmp(log->curves[i].name, name) == 0) {
      c = i;
      break;
    }
  if (c < 0) {
    if (log->ncurves == log->capcurves) {
      int cap = log->capcurves ? 2 * log->capcurves : 16;
      curve *nc = realloc(log->curves, (size_t)cap * sizeof *nc);
      if (!nc) return -1;
      log->curves = nc, log->capcurves = cap;
    }
    curve *cv = &log->curves[log->ncurves];
    if (!(cv->name = strdup(name))) return -1;
    cv->dset = -1;
    cv->len = 0;
    c = log->ncurves++;
  }
  if (log->npend == log->cappend) {
    int cap = log->cappend ? 2 * log->cappend : 64;
    pending *np = realloc(log->pend, (size_t)cap * sizeof *np);
    if (!np) return -1;
    log->pend = np, log->cappend = cap;
  }
  log->pend[log->npend].curve = c;
  log->pend[log->npend].value = value;
  log->npend++;
  return 0;
}

static int create_curve(bcg_runlog *log, curve *cv, char *err, size_t errlen) {
  hsize_t dims[1] = {0}, maxd[1] = {H5S_UNLIMITED}, chunk[1] = {CHUNK};
  hid_t sp = H5Screate_simple(1, dims, maxd);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, chunk);
  double nan = NAN;
  H5Pset_fill_value(dcpl, H5T_NATIVE_DOUBLE, &nan);
  hid_t lp = lcpl_intermediate();
  cv->dset = H5Dcreate2(log->file, cv->name, H5T_IEEE_F64LE, sp, lp, dcpl, H5P_DEFAULT);
  H5Pclose(lp);
  H5Pclose(dcpl);
  H5Sclose(sp);
  if (cv->dset < 0) return h5_fail(log->file, cv->name, "creating curve", err, errlen);
  if (write_i64_attr(cv->dset, "first_iteration", log->iterations))
    return h5_fail(log->file, cv->name, "writing attribute", err, errlen);
  return 0;
}

int bcg_runlog_flush_iteration(bcg_runlog *log, char *err, size_t errlen) {
  H5_QUIET;
  int rc = -1;
  for (int i = 0; i < log->npend; i++) {
    curve *cv = &log->curves[log->pend[i].curve];
    if (cv->dset < 0 && create_curve(log, cv, err, errlen)) goto out;
    hsize_t nd[1] = {cv->len + 1}, start[1] = {cv->len}, count[1] = {1};
    if (H5Dset_extent(cv->dset, nd) < 0) {
      h5_fail(log->file, cv->name, "extending curve", err, errlen);
      goto out;
    }
    hid_t fs = H5Dget_space(cv->dset);
    hid_t ms = H5Screate_simple(1, count, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    herr_t w = H5Dwrite(cv->dset, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, &log->pend[i].value);
    H5Sclose(ms);
    H5Sclose(fs);
    if (w < 0) {
      h5_fail(log->file, cv->name, "writing curve", err, errlen);
      goto out;
    }
    cv->len++;
  }
  log->npend = 0;
  log->iterations++;
  if (write_i64_attr(log->file, "iterations", log->iterations)) {
    h5_fail(log->file, "iterations", "writing attribute", err, errlen);
    goto out;
  }
  log->dirty = 1;
  if (!log->hold && write_image(log, 0, err, errlen)) goto out;
  rc = 0;
out:
  log->npend = 0;
  H5_LOUD;
  return rc;
}

int64_t bcg_runlog_iterations(const bcg_runlog *log) { return log->iterations; }

int bcg_runlog_close(bcg_runlog *log, char *err, size_t errlen) {
  if (!log) return 0;
  int rc = 0;
  if (log->npend) rc = bcg_runlog_flush_iteration(log, err, errlen);
  H5_QUIET;
  /* the last image, made durable (an earlier failure was reported already) */
  if (rc == 0 && !log->hold && (log->dirty || log->written >= 0) && write_image(log, 1, err, errlen)) rc = -1;
  for (int i = 0; i < log->ncurves; i++)
    if (log->curves[i].dset >= 0) {
      H5Dclose(log->curves[i].dset);
      log->curves[i].dset = -1;
    }
  H5Fclose(log->file); /* in memory: cannot fail on the disk */
  H5Eclear2(H5E_DEFAULT);
  runlog_free(log);
  H5_LOUD;
  return rc;
}

/* ---- checkpoints ------------------------------------------------------------------------- */

/* Integrity: a committed checkpoint carries root attributes format_version
 * (BCG_CHECKPOINT_FORMAT) and checksum_crc32, a CRC-32 (the IEEE polynomial,
 * as zlib's) over every dataset in name order: its path, then its raw bytes
 * as stored in the file. Opening a checkpoint recomputes it; a mismatch, an
 * unreadable dataset or a newer format is refused. Files without
 * format_version (format 1, before checksums) are accepted as they are. */
static uint32_t crc32_update(uint32_t crc, const void *data, size_t n) {
  static uint32_t table[256];
  static int ready;
  if (!ready) {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = 1;
  }
  const unsigned char *p = data;
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

#if H5_VERSION_GE(1, 12, 0)
typedef H5O_info2_t ck_obj_info;
#define CK_VISIT(f, cb, data) H5Ovisit3(f, H5_INDEX_NAME, H5_ITER_INC, cb, data, H5O_INFO_BASIC)
#else
typedef H5O_info_t ck_obj_info;
#define CK_VISIT(f, cb, data) H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_INC, cb, data, H5O_INFO_BASIC)
#endif

typedef struct crc_ctx {
  uint32_t crc;
  long ndsets;
  char bad[256]; /* the dataset that could not be read */
  char why[128]; /* why not, when not a read error */
} crc_ctx;

/* The largest dataset a checkpoint holds is a learner's or a task's buffer
 * (the discriminator's replay: at most tens of MB); a file declaring more is
 * damaged, and is refused before its size is allocated. */
#define CK_MAX_DATASET_BYTES ((size_t)1 << 30)

static herr_t crc_cb(hid_t obj, const char *name, const ck_obj_info *info, void *data) {
  crc_ctx *c = data;
  if (info->type != H5O_TYPE_DATASET) return 0;
  c->crc = crc32_update(c->crc, name, strlen(name) + 1);
  c->ndsets++;
  hid_t d = H5Dopen2(obj, name, H5P_DEFAULT);
  if (d < 0) return snprintf(c->bad, sizeof c->bad, "%s", name), printable(c->bad), -1;
  hid_t t = H5Dget_type(d), sp = H5Dget_space(d), dcpl = H5Dget_create_plist(d);
  hssize_t np = H5Sget_simple_extent_npoints(sp);
  size_t ts = H5Tget_size(t);
  int rc = 0;
  if (np < 0 || H5Tdetect_class(t, H5T_VLEN) > 0 || H5Tis_variable_str(t) > 0) {
    rc = np < 0 ? -1 : 0; /* variable-length data: the name only */
  } else if (np > 0 && (ts == 0 || (size_t)np > CK_MAX_DATASET_BYTES / ts)) {
    snprintf(c->why, sizeof c->why, "declares %llu values of %zu bytes (more than %zu MiB)", (unsigned long long)np,
             ts, CK_MAX_DATASET_BYTES >> 20);
    rc = -1;
  } else if (np > 0 && dcpl >= 0 && H5Pget_nfilters(dcpl) == 0 && H5Dget_storage_size(d) < (hsize_t)np * ts) {
    /* unfiltered data is stored whole: less is a damaged (or forged) size */
    snprintf(c->why, sizeof c->why, "declares %llu bytes but the file stores %llu",
             (unsigned long long)((hsize_t)np * ts), (unsigned long long)H5Dget_storage_size(d));
    rc = -1;
  } else if (np > 0) {
    char *buf = malloc((size_t)np * ts);
    if (!buf || H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) rc = -1;
    else c->crc = crc32_update(c->crc, buf, (size_t)np * ts);
    free(buf);
  }
  if (dcpl >= 0) H5Pclose(dcpl);
  H5Sclose(sp);
  H5Tclose(t);
  H5Dclose(d);
  if (rc) {
    snprintf(c->bad, sizeof c->bad, "%s", name);
    printable(c->bad);
  }
  return rc;
}

static int read_i64_root(hid_t f, const char *name, int64_t *v) {
  if (H5Aexists(f, name) <= 0) return -1;
  hid_t a = H5Aopen(f, name, H5P_DEFAULT);
  if (a < 0) return -2;
  hid_t t = H5Aget_type(a);
  int num = t >= 0 && number_type(t);
  if (t >= 0) H5Tclose(t);
  int rc = (!num || !bcg_h5_attr_single(a) || H5Aread(a, H5T_NATIVE_INT64, v) < 0) ? -2 : 0;
  H5Aclose(a);
  return rc;
}

/* 0 when intact (or format 1), else -1 with the reason in err */
static int checkpoint_verify(hid_t f, const char *path, char *err, size_t errlen) {
  int64_t fmt = 0, stored = 0;
  int r = read_i64_root(f, "format_version", &fmt);
  if (r == -1) return 0; /* format 1: no checksum to check */
  if (r == -2) return bcg_setf(err, errlen, "checkpoint %s: damaged: its format_version cannot be read", path), -1;
  if (fmt > BCG_CHECKPOINT_FORMAT || fmt < 2)
    return bcg_setf(err, errlen, "checkpoint %s: format %lld, this bcg reads formats 1 to %d (written by a newer bcg?)",
                path, (long long)fmt, BCG_CHECKPOINT_FORMAT), -1;
  if (read_i64_root(f, "checksum_crc32", &stored))
    return bcg_setf(err, errlen, "checkpoint %s: damaged: no readable checksum_crc32", path), -1;
  crc_ctx c = {0, 0, "", ""};
  if (CK_VISIT(f, crc_cb, &c) < 0) {
    if (c.bad[0])
      return bcg_setf(err, errlen, "checkpoint %s: damaged: dataset '%s' %s", path, c.bad,
                  c.why[0] ? c.why : "cannot be read"), -1;
    return bcg_setf(err, errlen, "checkpoint %s: damaged: its groups cannot be read", path), -1;
  }
  if ((uint32_t)stored != c.crc)
    return bcg_setf(err, errlen,
                "checkpoint %s: damaged: the CRC-32 of its %ld datasets is %08x, it was written with %08x", path,
                c.ndsets, (unsigned)c.crc, (unsigned)(uint32_t)stored), -1;
  return 0;
}

/* The checkpoint is built in memory (HDF5's core driver, no backing store) and
 * written to PATH.tmp by plain write() calls at commit. So every disk error
 * (a full disk, a file size limit) is ours to report cleanly, and HDF5 never
 * holds a half-written file it cannot close. */
struct bcg_checkpoint {
  hid_t file;
  int fd; /* PATH.tmp, created by begin() */
  char path[PATH_MAX];
  char tmp[PATH_MAX + 8];
};

bcg_checkpoint *bcg_checkpoint_begin(const char *path, char *err, size_t errlen) {
  H5_QUIET;
  bcg_checkpoint *ck = calloc(1, sizeof *ck);
  hid_t fapl = -1;
  if (!ck) {
    bcg_setf(err, errlen, "out of memory");
    goto fail;
  }
  ck->file = -1;
  snprintf(ck->path, sizeof ck->path, "%s", path);
  snprintf(ck->tmp, sizeof ck->tmp, "%s.tmp", path);
  ck->fd = open(ck->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (ck->fd < 0) {
    bcg_setf(err, errlen, "checkpoint %s: cannot create %s: %s", path, ck->tmp, strerror(errno));
    goto fail;
  }
  fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_core(fapl, 1 << 20, 0);
  ck->file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  H5Pclose(fapl);
  if (ck->file < 0) {
    char c[512];
    bcg_setf(err, errlen, "checkpoint %s: cannot create: %s", path, h5_cause(c));
    goto fail;
  }
  char e2[64];
  write_str_attr(ck->file, "bcg_version", BCG_VERSION, e2, sizeof e2);
  write_str_attr(ck->file, "precision", BCG_REAL_NAME, e2, sizeof e2);
  H5_LOUD;
  return ck;
fail:
  if (ck && ck->fd >= 0) {
    close(ck->fd);
    unlink(ck->tmp);
  }
  free(ck);
  H5_LOUD;
  return NULL;
}

int64_t bcg_checkpoint_root(const bcg_checkpoint *ck) { return (int64_t)ck->file; }

void bcg_checkpoint_abort(bcg_checkpoint *ck) {
  if (!ck) return;
  H5_QUIET;
  if (ck->file >= 0) H5Fclose(ck->file);
  H5Eclear2(H5E_DEFAULT);
  close(ck->fd);
  unlink(ck->tmp);
  free(ck);
  H5_LOUD;
}

static int write_all(int fd, const char *buf, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, buf, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    buf += w, n -= (size_t)w;
  }
  return 0;
}

int bcg_checkpoint_commit(bcg_checkpoint *ck, char *err, size_t errlen) {
  H5_QUIET;
  char c[512];
  int rc = -1;
  char *image = NULL;
  ssize_t size = -1;
  crc_ctx cc = {0, 0, "", ""};
  if (CK_VISIT(ck->file, crc_cb, &cc) < 0 || write_i64_attr(ck->file, "format_version", BCG_CHECKPOINT_FORMAT) ||
      write_i64_attr(ck->file, "checksum_crc32", (int64_t)cc.crc)) {
    bcg_setf(err, errlen, "checkpoint %s: building the file failed: %s; the previous checkpoint is unchanged", ck->path,
         h5_cause(c));
    goto out;
  }
  if (H5Fflush(ck->file, H5F_SCOPE_GLOBAL) >= 0) size = H5Fget_file_image(ck->file, NULL, 0);
  if (size > 0 && (image = malloc((size_t)size)) && H5Fget_file_image(ck->file, image, (size_t)size) != size) size = -1;
  if (size <= 0 || !image) {
    bcg_setf(err, errlen, "checkpoint %s: building the file failed: %s; the previous checkpoint is unchanged", ck->path,
         image ? h5_cause(c) : "out of memory");
    goto out;
  }
  if (write_all(ck->fd, image, (size_t)size) != 0 || fsync(ck->fd) != 0) {
    bcg_setf(err, errlen, "checkpoint %s: writing %s failed: %s; the previous checkpoint is unchanged", ck->path, ck->tmp,
         strerror(errno));
    goto out;
  }
  int fd = ck->fd;
  ck->fd = -1;
  if (close(fd) != 0) {
    bcg_setf(err, errlen, "checkpoint %s: writing %s failed: %s; the previous checkpoint is unchanged", ck->path, ck->tmp,
         strerror(errno));
    goto out;
  }
  if (rename(ck->tmp, ck->path) != 0) {
    bcg_setf(err, errlen, "checkpoint %s: rename from %s failed: %s; the previous checkpoint is unchanged", ck->path,
         ck->tmp, strerror(errno));
    goto out;
  }
  /* make the rename itself durable */
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", ck->path);
  char *slash = strrchr(dir, '/');
  if (slash)
    *(slash == dir ? slash + 1 : slash) = 0;
  else
    snprintf(dir, sizeof dir, ".");
  int dfd = open(dir, O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  rc = 0;
out:
  free(image);
  H5Fclose(ck->file); /* in memory: cannot fail on the disk */
  H5Eclear2(H5E_DEFAULT);
  if (ck->fd >= 0) close(ck->fd);
  if (rc) unlink(ck->tmp);
  free(ck);
  H5_LOUD;
  return rc;
}

int64_t bcg_h5_open(const char *path, char *err, size_t errlen) {
  H5_QUIET;
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    char c[512];
    bcg_setf(err, errlen, "%s: cannot open: %s", path, h5_cause(c));
  }
  H5_LOUD;
  return f < 0 ? -1 : (int64_t)f;
}

int64_t bcg_checkpoint_open(const char *path, char *err, size_t errlen) {
  H5_QUIET;
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    char c[512];
    bcg_setf(err, errlen, "checkpoint %s: cannot open: %s", path, h5_cause(c));
  } else if (checkpoint_verify(f, path, err, errlen)) {
    H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    f = -1;
  }
  H5_LOUD;
  return f < 0 ? -1 : (int64_t)f;
}

int bcg_checkpoint_seal(const char *path, char *err, size_t errlen) {
  H5_QUIET;
  int rc = -1;
  char c[512];
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  crc_ctx cc = {0, 0, "", ""};
  if (f < 0)
    bcg_setf(err, errlen, "checkpoint %s: cannot open for writing: %s", path, h5_cause(c));
  else if (CK_VISIT(f, crc_cb, &cc) < 0)
    bcg_setf(err, errlen, "checkpoint %s: damaged: dataset '%s' %s", path, cc.bad, cc.why[0] ? cc.why : "cannot be read");
  else if (write_i64_attr(f, "format_version", BCG_CHECKPOINT_FORMAT) ||
           write_i64_attr(f, "checksum_crc32", (int64_t)cc.crc))
    bcg_setf(err, errlen, "checkpoint %s: writing the checksum failed: %s", path, h5_cause(c));
  else
    rc = 0;
  if (f >= 0 && H5Fclose(f) < 0 && rc == 0) {
    bcg_setf(err, errlen, "checkpoint %s: closing failed: %s", path, h5_cause(c));
    rc = -1;
  }
  H5_LOUD;
  return rc;
}

int bcg_checkpoint_verify(const char *path, char *err, size_t errlen) {
  int64_t f = bcg_checkpoint_open(path, err, errlen);
  if (f < 0) return -1;
  bcg_checkpoint_close(f);
  return 0;
}

void bcg_checkpoint_close(int64_t file) {
  if (file < 0) return;
  H5_QUIET;
  H5Fclose((hid_t)file);
  H5_LOUD;
}
