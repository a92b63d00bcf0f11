/* tasks/motion.h - reference motions: loading (CSV, HDF5), interpolation and
 * reference velocities. Header-only (static functions) so that the imitation
 * plugin, tools/motiongen.c and tests/test_tasks.c share one implementation.
 *
 * A motion is a sequence of qpos frames in MuJoCo's layout for one model, at a
 * fixed rate. Quaternions (free and ball joints) are stored w x y z in memory.
 *
 * CSV format (one frame per line, tasks/README.md has the full description):
 *
 *   # fps=30 quat=wxyz          keys in comment lines: fps, quat (wxyz|xyzw)
 *   root_x,root_y,...,knee,...  optional header row of column names
 *   0.0,0.0,1.28,1,0,0,0,...    nq numbers per line: qpos in MuJoCo's order
 *
 * Lines starting with '#' and empty lines are skipped. Header keys may also
 * appear as `# fps: 30`. With quat=xyzw every quaternion of the row (the free
 * root's, and ball joints') is read x y z w. If a header row of names is
 * given, a hinge/slide column must carry its joint's name (a layout check);
 * the 7 (free) and 4 (ball) columns of quaternion joints are not checked by
 * name. Any count or name mismatch is an error naming the file and line.
 *
 * HDF5 format: dataset "qpos" [T][nq] (any float type), attribute "fps" (one
 * number) on the dataset or on the file's root group, optional string
 * attribute "quat" ("wxyz" or "xyzw", default wxyz; fixed- or variable-length,
 * ASCII or UTF-8, as h5py writes it).
 *
 * A file's own fps must be finite and within [BCG_MOTION_FPS_MIN,
 * BCG_MOTION_FPS_MAX]; an attribute holding more than one value is an error.
 * A clip holds at most BCG_MOTION_MAX_FRAMES frames, and qpos and fps must
 * have a number type (float or integer, at most 16 bytes): a damaged file
 * that declares more is refused before anything is allocated for it.
 *
 * LAFAN format (the public LAFAN1 retargeting data set's CSVs, read as they
 * are): no header and no comment lines, one frame per line at 30 fps, nq
 * numbers: root x y z, root quaternion x y z w (w LAST), then the joints in
 * qpos order. Formats (bcg_motion_opts.format): BCG_MOTION_BCG (the CSV above
 * or HDF5), BCG_MOTION_LAFAN, BCG_MOTION_AUTO: .h5/.hdf5 is HDF5; a CSV whose
 * first non-empty line is a '#' line or a row of names is bcg's; a bare CSV
 * (its first line already numbers) is LAFAN.
 *
 * Every quaternion's norm must be within BCG_MOTION_QNORM_TOL of 1 (an error
 * naming the file, line and joint); rows are then normalised. A segment
 * [start, end] (seconds of the file, snapped to the nearest frame) keeps part
 * of a long clip. bcg_motion_check then counts what loads but looks wrong
 * (root upside down in the first frames, joints outside their ranges, contact
 * points below the floor) and bcg_motion_warnings words it. */
#ifndef BCG_TASKS_MOTION_H
#define BCG_TASKS_MOTION_H

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "bcg/dyn.h"
#include "bcg/model.h"
#include "bcg/step.h"

enum { BCG_QUAT_FILE = 0, BCG_QUAT_WXYZ = 1, BCG_QUAT_XYZW = 2 };
enum { BCG_MOTION_AUTO = 0, BCG_MOTION_BCG = 1, BCG_MOTION_LAFAN = 2 };
static inline const char *bcg_motion_format_name(int f) {
  return f == BCG_MOTION_LAFAN ? "lafan" : f == BCG_MOTION_BCG ? "bcg" : "auto";
}

/* frame rate of the LAFAN format (it has no header to say so) */
#define BCG_LAFAN_FPS 30.0
/* a quaternion whose norm is further than this from 1 is an error */
#define BCG_MOTION_QNORM_TOL 0.01
/* bcg_motion_check: frames looked at for an upside-down root, tolerance of
 * the joint ranges (rad or m), depth below the floor that counts (m) */
#define BCG_MOTION_UPSIDE_FRAMES 10
#define BCG_MOTION_RANGE_TOL 0.01
#define BCG_MOTION_FLOOR_TOL 0.005

typedef struct bcg_motion_opts {
  int format;        /* BCG_MOTION_AUTO | _BCG | _LAFAN */
  double fps;        /* > 0 replaces the file's (LAFAN: BCG_LAFAN_FPS) */
  int quat;          /* BCG_QUAT_FILE: the file's (bcg: its quat key, else wxyz; LAFAN: xyzw) */
  double start, end; /* segment in seconds of the file; end <= 0: to the clip's end */
} bcg_motion_opts;

/* The frame rate a motion file may declare (a finite number in this range;
 * the task's fps key, when set, replaces the file's and is not checked here). */
#define BCG_MOTION_FPS_MIN 1.0
#define BCG_MOTION_FPS_MAX 10000.0
static inline int mo_fps_ok(double fps) { return isfinite(fps) && fps >= BCG_MOTION_FPS_MIN && fps <= BCG_MOTION_FPS_MAX; }
/* frames a clip may hold (28 hours at 10 fps, 100 s at the highest rate;
 * 640 MB of qpos for the largest model) */
#define BCG_MOTION_MAX_FRAMES 1000000
/* a number type of a file (float or integer, 1 to 16 bytes per value) */
static inline int mo_h5_number_type(hid_t t) {
  H5T_class_t c = H5Tget_class(t);
  size_t sz = H5Tget_size(t);
  return (c == H5T_FLOAT || c == H5T_INTEGER) && sz >= 1 && sz <= 16;
}

typedef struct bcg_motion {
  int nframes, nq;
  double fps;
  double *qpos; /* [nframes][nq], quaternions w x y z, normalised */
  char path[1024];
  int format;      /* BCG_MOTION_BCG or BCG_MOTION_LAFAN: how it was read */
  int first_frame; /* index in the file of frame 0 (a segment's start) */
  /* loop transform (free root only): one clip maps the first frame's root
   * horizontal pose onto the last one's: yaw dpsi about z, then xy shift */
  double loop_dpsi, loop_dxy[2];
} bcg_motion;

static inline double bcg_motion_duration(const bcg_motion *mo) {
  return mo->nframes > 1 ? (mo->nframes - 1) / mo->fps : 0.0;
}

static inline void bcg_motion_free(bcg_motion *mo) {
  if (mo) free(mo->qpos), mo->qpos = NULL;
}

/* ---- small quaternion helpers (double, whatever bcg_real is) ------------- */

static inline void mo_qmul(double *r, const double *a, const double *b) {
  double w = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3];
  double x = a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2];
  double y = a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1];
  double z = a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0];
  r[0] = w; r[1] = x; r[2] = y; r[3] = z;
}
static inline void mo_qnormalize(double *q) {
  double n = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  if (n < 1e-12) { q[0] = 1; q[1] = q[2] = q[3] = 0; return; }
  for (int i = 0; i < 4; i++) q[i] /= n;
}
static inline void mo_qexp(double *q, const double *phi) {
  double th = sqrt(phi[0] * phi[0] + phi[1] * phi[1] + phi[2] * phi[2]), s;
  if (th < 1e-6) { s = 0.5 - th * th / 48; q[0] = 1 - th * th / 8; }
  else { s = sin(th / 2) / th; q[0] = cos(th / 2); }
  q[1] = s * phi[0]; q[2] = s * phi[1]; q[3] = s * phi[2];
}
static inline void mo_q2mat(double *R, const double *q) {
  double w = q[0], x = q[1], y = q[2], z = q[3];
  R[0] = 1 - 2 * (y * y + z * z); R[1] = 2 * (x * y - w * z);     R[2] = 2 * (x * z + w * y);
  R[3] = 2 * (x * y + w * z);     R[4] = 1 - 2 * (x * x + z * z); R[5] = 2 * (y * z - w * x);
  R[6] = 2 * (x * z - w * y);     R[7] = 2 * (y * z + w * x);     R[8] = 1 - 2 * (x * x + y * y);
}

static inline void mo_quat_conj_mul(double *r, const double *a, const double *b) { /* a^-1 b */
  double ac[4] = {a[0], -a[1], -a[2], -a[3]};
  mo_qmul(r, ac, b);
}
/* log map of a unit quaternion: rotation vector */
static inline void mo_quat_log(double *phi, const double *q) {
  double w = q[0], x = q[1], y = q[2], z = q[3];
  if (w < 0) w = -w, x = -x, y = -y, z = -z;
  double n = sqrt(x * x + y * y + z * z);
  double s = n < 1e-12 ? 2.0 / (w > 0 ? w : 1) : 2 * atan2(n, w) / n;
  phi[0] = s * x; phi[1] = s * y; phi[2] = s * z;
}
static inline void mo_slerp(double *r, const double *a, const double *b, double t) {
  double bb[4] = {b[0], b[1], b[2], b[3]};
  if (a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] < 0)
    for (int i = 0; i < 4; i++) bb[i] = -bb[i];
  double d[4], phi[3], e[4];
  mo_quat_conj_mul(d, a, bb);
  mo_quat_log(phi, d);
  for (int i = 0; i < 3; i++) phi[i] *= t;
  mo_qexp(e, phi);
  mo_qmul(r, a, e);
  mo_qnormalize(r);
}
/* heading (yaw) of a rotation: angle of the body x axis in the xy plane */
static inline double mo_quat_heading(const double *q) {
  double R[9];
  mo_q2mat(R, q);
  return atan2(R[3], R[0]);
}

/* ---- loading -------------------------------------------------------------- */

static inline int mo_is_quat_joint(int type) { return type == BCG_JNT_FREE || type == BCG_JNT_BALL; }

/* normalise quaternions, reorder xyzw -> wxyz; line (0: unknown) for errors */
static inline int mo_fix_row(const bcg_model *model, double *row, int xyzw, const char *path, int line,
                             char *err, size_t errlen) {
  const bcg_mdata *m = &model->m;
  for (int j = 0; j < m->njnt; j++) {
    if (!mo_is_quat_joint(m->jnt_type[j])) continue;
    double *q = row + m->jnt_qposadr[j] + (m->jnt_type[j] == BCG_JNT_FREE ? 3 : 0);
    if (xyzw) {
      double t[4] = {q[3], q[0], q[1], q[2]};
      memcpy(q, t, sizeof t);
    }
    double n = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    if (!(n > 1e-6) || !isfinite(n) || fabs(n - 1) > BCG_MOTION_QNORM_TOL) {
      snprintf(err, errlen, "%s:%d: quaternion of joint '%s' has norm %g (must be 1 within %g: is the column layout "
               "right?)", path, line, model->jnt_name[j], n, BCG_MOTION_QNORM_TOL);
      return -1;
    }
    for (int i = 0; i < 4; i++) q[i] /= n;
  }
  for (int i = 0; i < m->nq; i++)
    if (!isfinite(row[i])) {
      snprintf(err, errlen, "%s:%d: column %d is not finite", path, line, i + 1);
      return -1;
    }
  return 0;
}

/* expected name of qpos column c (hinge/slide: the joint name), or NULL */
static inline const char *mo_column_joint(const bcg_model *model, int c, int *jnt) {
  const bcg_mdata *m = &model->m;
  for (int j = 0; j < m->njnt; j++) {
    int a = m->jnt_qposadr[j], n = m->jnt_type[j] == BCG_JNT_FREE ? 7 : m->jnt_type[j] == BCG_JNT_BALL ? 4 : 1;
    if (c >= a && c < a + n) {
      *jnt = j;
      return n == 1 ? model->jnt_name[j] : NULL;
    }
  }
  *jnt = -1;
  return NULL;
}

/* a file's text quoted in a one-line message (control characters as '?',
 * at most 200 bytes); the buffer is one of a few rotating ones */
static inline const char *mo_q(const char *s) {
  static char buf[4][204];
  static int k;
  char *b = buf[k++ & 3];
  size_t i = 0;
  for (; s[i] && i < 200; i++) b[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
  b[i] = 0;
  return b;
}

static inline char *mo_trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
  return s;
}

static inline void mo_finish(bcg_motion *mo, const bcg_model *model) {
  const bcg_mdata *m = &model->m;
  mo->loop_dpsi = 0;
  mo->loop_dxy[0] = mo->loop_dxy[1] = 0;
  if (bcg_has_free_root(m) && mo->nframes > 1) {
    int a = m->jnt_qposadr[m->body_jntadr[1]];
    const double *f0 = mo->qpos, *f1 = mo->qpos + (size_t)(mo->nframes - 1) * mo->nq;
    double dpsi = mo_quat_heading(f1 + a + 3) - mo_quat_heading(f0 + a + 3);
    double c = cos(dpsi), s = sin(dpsi);
    mo->loop_dpsi = dpsi;
    mo->loop_dxy[0] = f1[a] - (c * f0[a] - s * f0[a + 1]);
    mo->loop_dxy[1] = f1[a + 1] - (s * f0[a] + c * f0[a + 1]);
  }
}

/* state of one CSV read: the caller's options, what the file's header said,
 * the frames read so far and where errors go */
typedef struct mo_csv_reader {
  const bcg_model *model;
  const char *path;
  double fps;      /* the caller's (> 0 replaces the file's) */
  int quat;        /* the caller's BCG_QUAT_* (0: the file's) */
  int format;      /* BCG_MOTION_AUTO until the first non-empty line */
  int nq, line;
  double file_fps; /* the header's fps key (0: none) */
  int file_quat;   /* the header's quat key (0: none) */
  int seen_data;   /* a row of names or numbers was read */
  double *q;       /* [cap][nq] */
  int cap, n;
  char *err;
  size_t errlen;
} mo_csv_reader;

/* BCG_MOTION_AUTO: the first non-empty line s decides ('#' or names: bcg;
 * numbers: LAFAN); any other format is kept */
static inline int mo_csv_detect_format(int format, const char *s) {
  if (format != BCG_MOTION_AUTO) return format;
  char *end;
  strtod(s, &end);
  return (*s != '#' && end != s) ? BCG_MOTION_LAFAN : BCG_MOTION_BCG;
}

/* one "key=value" (or "key: value") of a '#' line: fps or quat; others are
 * ignored. 0, or -1 with a message */
static inline int mo_csv_header_key(mo_csv_reader *r, const char *key, const char *val) {
  if (strcmp(key, "fps") == 0) {
    char *end;
    r->file_fps = strtod(val, &end);
    if (*end || !(r->file_fps > 0)) {
      snprintf(r->err, r->errlen, "%s:%d: fps '%s' is not a positive number", r->path, r->line, mo_q(val));
      return -1;
    }
    if (r->fps <= 0 && !mo_fps_ok(r->file_fps)) {
      snprintf(r->err, r->errlen, "%s:%d: fps %s is out of range [%g, %g] (frames per second)", r->path, r->line,
               mo_q(val), BCG_MOTION_FPS_MIN, BCG_MOTION_FPS_MAX);
      return -1;
    }
  } else if (strcmp(key, "quat") == 0 || strcmp(key, "quat_order") == 0) {
    if (strcmp(val, "wxyz") == 0) r->file_quat = BCG_QUAT_WXYZ;
    else if (strcmp(val, "xyzw") == 0) r->file_quat = BCG_QUAT_XYZW;
    else {
      snprintf(r->err, r->errlen, "%s:%d: quat '%s' is not wxyz or xyzw", r->path, r->line, mo_q(val));
      return -1;
    }
  }
  return 0;
}

/* the keys of a comment line s (starting with '#'): 0, or -1 with a message */
static inline int mo_csv_header_line(mo_csv_reader *r, const char *s) {
  for (const char *t = s + 1; *t;) {
    while (*t && (isspace((unsigned char)*t) || *t == ',')) t++;
    char key[32], val[64];
    int used = 0;
    if (sscanf(t, " %31[a-zA-Z_] %*[=:] %63[^ \t,]%n", key, val, &used) == 2 && used > 0) {
      if (mo_csv_header_key(r, key, val)) return -1;
      t += used;
    } else {
      while (*t && !isspace((unsigned char)*t)) t++;
    }
  }
  return 0;
}

/* split s on commas (whitespace around fields allowed) into fields (at most
 * BCG_MAX_Q + 2 kept); returns the number of fields */
static inline int mo_csv_split(char *s, char **fields) {
  int nf = 0;
  for (char *t = s;;) {
    char *c = strchr(t, ',');
    if (nf < BCG_MAX_Q + 2) fields[nf] = mo_trim(t);
    nf++;
    if (!c) break;
    *c = 0;
    t = c + 1;
  }
  return nf;
}

/* a header row of names: only before any data, and each hinge/slide column
 * must carry its joint's name. 0, or -1 with a message */
static inline int mo_csv_names_row(mo_csv_reader *r, char **fields) {
  if (r->seen_data || r->n > 0) {
    snprintf(r->err, r->errlen, "%s:%d: column 1 '%s' is not a number", r->path, r->line, mo_q(fields[0]));
    return -1;
  }
  r->seen_data = 1;
  for (int c = 0; c < r->nq; c++) {
    int j;
    const char *want = mo_column_joint(r->model, c, &j);
    if (want && strcmp(want, fields[c]) != 0) {
      snprintf(r->err, r->errlen, "%s:%d: column %d is '%s' but qpos[%d] of model %s is joint '%s'", r->path,
               r->line, c + 1, mo_q(fields[c]), c, r->model->path, want);
      return -1;
    }
  }
  return 0;
}

/* a row of nq numbers: appended as a frame, quaternions reordered and
 * normalised. 0, or -1 with a message */
static inline int mo_csv_data_row(mo_csv_reader *r, char **fields) {
  const int nq = r->nq;
  r->seen_data = 1;
  if (r->n == BCG_MOTION_MAX_FRAMES) {
    snprintf(r->err, r->errlen, "%s:%d: more than BCG_MOTION_MAX_FRAMES = %d frames", r->path, r->line,
             BCG_MOTION_MAX_FRAMES);
    return -1;
  }
  if (r->n == r->cap) {
    r->cap *= 2;
    double *nqp = realloc(r->q, sizeof(double) * nq * r->cap);
    if (!nqp) {
      snprintf(r->err, r->errlen, "%s: out of memory", r->path);
      return -1;
    }
    r->q = nqp;
  }
  double *row = r->q + (size_t)r->n * nq;
  for (int c = 0; c < nq; c++) {
    char *end;
    row[c] = strtod(fields[c], &end);
    if (end == fields[c] || *mo_trim(end)) {
      snprintf(r->err, r->errlen, "%s:%d: column %d '%s' is not a number", r->path, r->line, c + 1, mo_q(fields[c]));
      return -1;
    }
  }
  int order = r->quat ? r->quat
                      : (r->file_quat ? r->file_quat : r->format == BCG_MOTION_LAFAN ? BCG_QUAT_XYZW : BCG_QUAT_WXYZ);
  if (mo_fix_row(r->model, row, order == BCG_QUAT_XYZW, r->path, r->line, r->err, r->errlen)) return -1;
  r->n++;
  return 0;
}

/* one trimmed, non-empty line s: a comment line of keys, a row of names or a
 * frame. 0, or -1 with a message */
static inline int mo_csv_line(mo_csv_reader *r, char *s) {
  r->format = mo_csv_detect_format(r->format, s);
  if (r->format == BCG_MOTION_LAFAN && (*s == '#' || !(isdigit((unsigned char)*s) || strchr("+-.", *s)))) {
    snprintf(r->err, r->errlen,
             "%s:%d: a header or comment line, but the LAFAN format has none (motion_format = lafan: numbers only, "
             "30 fps, root x y z, root quaternion x y z w, joints); use motion_format = bcg or auto",
             r->path, r->line);
    return -1;
  }
  if (*s == '#') return mo_csv_header_line(r, s);
  char *fields[BCG_MAX_Q + 2];
  const int nf = mo_csv_split(s, fields);
  if (nf != r->nq) {
    snprintf(r->err, r->errlen, "%s:%d: %d columns, but model %s has nq = %d (%s)", r->path, r->line, nf,
             r->model->path, r->nq,
             r->format == BCG_MOTION_LAFAN ? "LAFAN format: root x y z, root quaternion x y z w, the joints in qpos order"
                                           : "one qpos frame per line in MuJoCo's order");
    return -1;
  }
  char *end;
  strtod(fields[0], &end);
  if (end == fields[0]) return mo_csv_names_row(r, fields);
  return mo_csv_data_row(r, fields);
}

/* after the last line: enough frames and a frame rate; the frames move into
 * mo. 0, or -1 with a message */
static inline int mo_csv_finish(mo_csv_reader *r, bcg_motion *mo) {
  if (r->format == BCG_MOTION_LAFAN) r->file_fps = BCG_LAFAN_FPS;
  if (r->n < 2) {
    snprintf(r->err, r->errlen, "%s: %d frames (need at least 2)", r->path, r->n);
    return -1;
  }
  double fps = r->fps;
  if (fps <= 0) fps = r->file_fps;
  if (!(fps > 0)) {
    snprintf(r->err, r->errlen, "%s: no frame rate (add a header line '# fps=30' or set the task's fps key)", r->path);
    return -1;
  }
  mo->nframes = r->n;
  mo->nq = r->nq;
  mo->fps = fps;
  mo->qpos = r->q;
  mo->format = r->format == BCG_MOTION_LAFAN ? BCG_MOTION_LAFAN : BCG_MOTION_BCG;
  r->q = NULL;
  snprintf(mo->path, sizeof mo->path, "%s", r->path);
  mo_finish(mo, r->model);
  return 0;
}

/* format: BCG_MOTION_AUTO decides on the first non-empty line ('#' or names:
 * bcg; numbers: LAFAN) */
static inline int mo_load_csv(bcg_motion *mo, const bcg_model *model, const char *path, double fps, int quat,
                              int format, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return -1;
  }
  mo_csv_reader r = {0};
  r.model = model;
  r.path = path;
  r.fps = fps;
  r.quat = quat;
  r.format = format;
  r.nq = model->m.nq;
  r.cap = 256;
  r.err = err;
  r.errlen = errlen;
  int rc = -1;
  r.q = malloc(sizeof(double) * r.nq * r.cap);
  char *buf = malloc(1 << 16);
  if (!r.q || !buf) {
    snprintf(err, errlen, "%s: out of memory", path);
    goto done;
  }
  while (fgets(buf, 1 << 16, f)) {
    r.line++;
    char *s = mo_trim(buf);
    if (!*s) continue;
    if (mo_csv_line(&r, s)) goto done;
  }
  rc = mo_csv_finish(&r, mo);
done:
  free(r.q);
  free(buf);
  fclose(f);
  return rc;
}

static inline int bcg_motion_load_csv(bcg_motion *mo, const bcg_model *model, const char *path, double fps,
                                      int quat, char *err, size_t errlen) {
  return mo_load_csv(mo, model, path, fps, quat, BCG_MOTION_AUTO, err, errlen);
}

/* Attributes are read only when they hold exactly one value (a scalar or a
 * 1-element array): 0 read, -1 absent, -2 present but unusable (err set). */
static inline int mo_h5_attr_open(hid_t obj, const char *name, const char *where, const char *path, hid_t *a,
                                  char *err, size_t errlen) {
  if (H5Aexists(obj, name) <= 0) return -1;
  *a = H5Aopen(obj, name, H5P_DEFAULT);
  if (*a < 0) return snprintf(err, errlen, "%s: cannot open attribute '%s' of %s", path, name, where), -2;
  hid_t sp = H5Aget_space(*a);
  hssize_t n = sp < 0 ? -1 : H5Sget_simple_extent_npoints(sp);
  if (sp >= 0) H5Sclose(sp);
  if (n != 1) {
    H5Aclose(*a);
    snprintf(err, errlen, "%s: attribute '%s' of %s holds %lld values (need exactly one)", path, name, where,
             (long long)n);
    return -2;
  }
  return 0;
}
static inline int mo_h5_read_real_attr(hid_t obj, const char *name, const char *where, const char *path, double *out,
                                       char *err, size_t errlen) {
  hid_t a;
  int rc = mo_h5_attr_open(obj, name, where, path, &a, err, errlen);
  if (rc) return rc;
  hid_t t = H5Aget_type(a);
  int num = t >= 0 && mo_h5_number_type(t);
  if (t >= 0) H5Tclose(t);
  if (!num || H5Aread(a, H5T_NATIVE_DOUBLE, out) < 0) {
    snprintf(err, errlen, "%s: attribute '%s' of %s is not a number", path, name, where);
    rc = -2;
  }
  H5Aclose(a);
  return rc;
}
/* A string attribute: variable-length (h5py's default, UTF-8 or ASCII) or
 * fixed-length (any padding); read in the file's own character set and
 * padding, trailing NULs and blanks dropped. */
static inline int mo_h5_read_str_attr(hid_t obj, const char *name, const char *where, const char *path, char *out,
                                      size_t len, char *err, size_t errlen) {
  hid_t a;
  int rc = mo_h5_attr_open(obj, name, where, path, &a, err, errlen);
  if (rc) return rc;
  hid_t t = H5Aget_type(a);
  rc = -2;
  if (H5Tget_class(t) == H5T_STRING) {
    hid_t mt = H5Tcopy(t);
    if (H5Tis_variable_str(t) > 0) {
      char *s = NULL;
      if (H5Aread(a, mt, &s) >= 0) {
        snprintf(out, len, "%s", s ? s : "");
        rc = 0;
      }
      if (s) H5free_memory(s);
    } else {
      /* a quat value is a few characters: a damaged size is not allocated */
      size_t sz = H5Tget_size(t);
      char *s = sz > 0 && sz <= 4096 ? calloc(sz + 1, 1) : NULL;
      if (s && H5Aread(a, mt, s) >= 0) {
        snprintf(out, len, "%s", mo_trim(s));
        rc = 0;
      }
      free(s);
    }
    H5Tclose(mt);
  }
  H5Tclose(t);
  H5Aclose(a);
  if (rc) snprintf(err, errlen, "%s: attribute '%s' of %s is not a readable string", path, name, where);
  return rc;
}

static inline int bcg_motion_load_h5(bcg_motion *mo, const bcg_model *model, const char *path, double fps,
                                     int quat, char *err, size_t errlen) {
  const bcg_mdata *m = &model->m;
  H5E_auto2_t old_fn;
  void *old_data;
  H5Eget_auto2(H5E_DEFAULT, &old_fn, &old_data);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  int rc = -1;
  double *q = NULL;
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = -1, sp = -1;
  if (f < 0) {
    snprintf(err, errlen, "%s: cannot open as HDF5", path);
    goto done;
  }
  if (H5Lexists(f, "qpos", H5P_DEFAULT) <= 0 || (d = H5Dopen2(f, "qpos", H5P_DEFAULT)) < 0) {
    snprintf(err, errlen, "%s: no dataset 'qpos' ([frames][nq])", path);
    goto done;
  }
  sp = H5Dget_space(d);
  hsize_t dims[2] = {0, 0};
  if (H5Sget_simple_extent_ndims(sp) != 2 || H5Sget_simple_extent_dims(sp, dims, NULL) < 0) {
    snprintf(err, errlen, "%s: dataset 'qpos' is not 2-D ([frames][nq])", path);
    goto done;
  }
  if (dims[1] != (hsize_t)m->nq) {
    snprintf(err, errlen, "%s: dataset 'qpos' has %llu columns, but model %s has nq = %d", path,
             (unsigned long long)dims[1], model->path, m->nq);
    goto done;
  }
  if (dims[0] < 2) {
    snprintf(err, errlen, "%s: dataset 'qpos' has %d frames (need at least 2)", path, (int)dims[0]);
    goto done;
  }
  if (dims[0] > BCG_MOTION_MAX_FRAMES) {
    snprintf(err, errlen, "%s: dataset 'qpos' has %llu frames, more than BCG_MOTION_MAX_FRAMES = %d", path,
             (unsigned long long)dims[0], BCG_MOTION_MAX_FRAMES);
    goto done;
  }
  {
    hid_t t = H5Dget_type(d);
    int num = t >= 0 && mo_h5_number_type(t);
    size_t tsz = t >= 0 ? H5Tget_size(t) : 0;
    if (t >= 0) H5Tclose(t);
    if (!num) {
      snprintf(err, errlen, "%s: dataset 'qpos' does not hold numbers (its type has %zu-byte values; need float or "
               "integer values of at most 16 bytes)", path, tsz);
      goto done;
    }
    /* unfiltered data is stored whole: fewer bytes are frames the file does
     * not hold (a damaged file, or one declaring a shape it never wrote) */
    hid_t dcpl = H5Dget_create_plist(d);
    int nfilt = dcpl >= 0 ? H5Pget_nfilters(dcpl) : -1;
    if (dcpl >= 0) H5Pclose(dcpl);
    hsize_t stored = H5Dget_storage_size(d), need = dims[0] * dims[1] * (hsize_t)tsz;
    if (nfilt == 0 && stored < need) {
      snprintf(err, errlen, "%s: dataset 'qpos' declares %llu frames (%llu bytes) but the file stores %llu bytes", path,
               (unsigned long long)dims[0], (unsigned long long)need, (unsigned long long)stored);
      goto done;
    }
  }
  q = malloc(sizeof(double) * dims[0] * dims[1]);
  if (!q || H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, q) < 0) {
    snprintf(err, errlen, "%s: cannot read dataset 'qpos'", path);
    goto done;
  }
  double file_fps = 0;
  const char *fps_where = "dataset 'qpos'";
  int arc = mo_h5_read_real_attr(d, "fps", fps_where, path, &file_fps, err, errlen);
  if (arc == -1) arc = mo_h5_read_real_attr(f, "fps", fps_where = "the root group", path, &file_fps, err, errlen);
  if (arc == -2) goto done;
  if (arc == -1) file_fps = 0;
  else if (fps <= 0 && !mo_fps_ok(file_fps)) {
    snprintf(err, errlen, "%s: attribute 'fps' of %s is %g, out of range [%g, %g] (frames per second)", path,
             fps_where, file_fps, BCG_MOTION_FPS_MIN, BCG_MOTION_FPS_MAX);
    goto done;
  }
  char qs[32] = "";
  int file_quat = 0;
  arc = mo_h5_read_str_attr(d, "quat", "dataset 'qpos'", path, qs, sizeof qs, err, errlen);
  if (arc == -1) arc = mo_h5_read_str_attr(f, "quat", "the root group", path, qs, sizeof qs, err, errlen);
  if (arc == -2) goto done;
  if (arc == 0) {
    if (strcmp(qs, "wxyz") == 0) file_quat = BCG_QUAT_WXYZ;
    else if (strcmp(qs, "xyzw") == 0) file_quat = BCG_QUAT_XYZW;
    else {
      snprintf(err, errlen, "%s: attribute quat '%s' is not wxyz or xyzw", path, mo_q(qs));
      goto done;
    }
  }
  int order = quat ? quat : (file_quat ? file_quat : BCG_QUAT_WXYZ);
  for (hsize_t i = 0; i < dims[0]; i++) {
    if (mo_fix_row(model, q + i * dims[1], order == BCG_QUAT_XYZW, path, (int)i + 1, err, errlen)) goto done;
  }
  if (fps <= 0) fps = file_fps;
  if (!(fps > 0)) {
    snprintf(err, errlen, "%s: no frame rate (attribute 'fps' on 'qpos' or the task's fps key)", path);
    goto done;
  }
  mo->nframes = (int)dims[0];
  mo->nq = m->nq;
  mo->fps = fps;
  mo->qpos = q;
  mo->format = BCG_MOTION_BCG;
  q = NULL;
  snprintf(mo->path, sizeof mo->path, "%s", path);
  mo_finish(mo, model);
  rc = 0;
done:
  free(q);
  if (sp >= 0) H5Sclose(sp);
  if (d >= 0) H5Dclose(d);
  if (f >= 0) H5Fclose(f);
  H5Eset_auto2(H5E_DEFAULT, old_fn, old_data);
  return rc;
}

/* Keep frames [round(start fps), round(end fps)] of the file (end <= 0: to
 * its last frame); at least 2 frames must remain. */
static inline int mo_segment(bcg_motion *mo, const bcg_model *model, double start, double end, char *err,
                             size_t errlen) {
  if (start <= 0 && end <= 0) return 0;
  int n = mo->nframes;
  double D = bcg_motion_duration(mo);
  if (!(start >= 0) || !isfinite(start) || !(end >= 0) || !isfinite(end)) {
    snprintf(err, errlen, "%s: segment motion_start = %g s, motion_end = %g s: must be finite and >= 0", mo->path,
             start, end);
    return -1;
  }
  long a = lround(start * mo->fps), b = end > 0 ? lround(end * mo->fps) : n - 1;
  if (a > n - 2) {
    snprintf(err, errlen, "%s: motion_start = %g s is at or beyond the clip's end (%d frames at %g fps = %g s)",
             mo->path, start, n, mo->fps, D);
    return -1;
  }
  if (b > n - 1) {
    snprintf(err, errlen, "%s: motion_end = %g s is beyond the clip's end (%d frames at %g fps = %g s)", mo->path, end,
             n, mo->fps, D);
    return -1;
  }
  if (b < a + 1) {
    snprintf(err, errlen, "%s: segment [motion_start = %g s, motion_end = %g s] holds %ld frame(s) at %g fps (need at "
             "least 2: motion_end must be after motion_start)", mo->path, start, end, b - a + 1, mo->fps);
    return -1;
  }
  int nq = mo->nq, k = (int)(b - a + 1);
  memmove(mo->qpos, mo->qpos + (size_t)a * nq, sizeof(double) * (size_t)k * nq);
  mo->nframes = k;
  mo->first_frame = (int)a;
  mo_finish(mo, model);
  return 0;
}

/* Load by o->format (auto: .h5/.hdf5 as HDF5, a CSV by its first line), then
 * keep the segment o->start..o->end. */
static inline int bcg_motion_load_opts(bcg_motion *mo, const bcg_model *model, const char *path,
                                       const bcg_motion_opts *o, char *err, size_t errlen) {
  memset(mo, 0, sizeof *mo);
  const char *dot = strrchr(path, '.');
  int h5 = dot && (strcmp(dot, ".h5") == 0 || strcmp(dot, ".hdf5") == 0), rc;
  if (h5 && o->format == BCG_MOTION_LAFAN) {
    snprintf(err, errlen, "%s: motion_format = lafan reads CSV files, not HDF5 (use auto or bcg)", path);
    return -1;
  }
  if (h5) rc = bcg_motion_load_h5(mo, model, path, o->fps, o->quat, err, errlen);
  else rc = mo_load_csv(mo, model, path, o->fps, o->quat, o->format, err, errlen);
  if (rc == 0 && mo_segment(mo, model, o->start, o->end, err, errlen)) {
    bcg_motion_free(mo);
    rc = -1;
  }
  return rc;
}

/* bcg_motion_load_opts with format auto and the whole clip. fps <= 0 takes
 * the file's rate; quat BCG_QUAT_FILE takes the file's order. */
static inline int bcg_motion_load(bcg_motion *mo, const bcg_model *model, const char *path, double fps, int quat,
                                  char *err, size_t errlen) {
  bcg_motion_opts o = {BCG_MOTION_AUTO, fps, quat, 0, 0};
  return bcg_motion_load_opts(mo, model, path, &o, err, errlen);
}

/* ---- load-time checks --------------------------------------------------------- */

typedef struct bcg_motion_checks {
  /* free root: frames among the first BCG_MOTION_UPSIDE_FRAMES whose root z
   * axis points down (world z component < 0), and the lowest component */
  int upside_frames, upside_checked;
  double upside_zz;
  /* limited hinge/slide joints beyond their range by more than
   * BCG_MOTION_RANGE_TOL: frames with any, values in all; the worst one */
  int range_frames, range_values, range_jnt, range_frame;
  double range_value, range_excess;
  /* frames whose lowest contact point is more than BCG_MOTION_FLOOR_TOL
   * below the floor (models with a floor); the deepest */
  int floor_frames, floor_frame, floor_cp;
  double floor_depth;
} bcg_motion_checks;

static inline void bcg_motion_check(const bcg_motion *mo, const bcg_model *model, bcg_motion_checks *c) {
  const bcg_mdata *m = &model->m;
  memset(c, 0, sizeof *c);
  c->range_jnt = c->range_frame = c->floor_frame = c->floor_cp = -1;
  c->upside_zz = 1;
  int root = bcg_has_free_root(m) ? m->jnt_qposadr[m->body_jntadr[1]] : -1;
  bcg_kin k;
  bcg_real q[BCG_MAX_Q];
  for (int i = 0; i < mo->nframes; i++) {
    const double *f = mo->qpos + (size_t)i * mo->nq;
    if (root >= 0 && i < BCG_MOTION_UPSIDE_FRAMES) {
      double R[9];
      mo_q2mat(R, f + root + 3);
      c->upside_checked++;
      if (R[8] < 0) c->upside_frames++;
      if (R[8] < c->upside_zz) c->upside_zz = R[8];
    }
    int bad = 0;
    for (int j = 0; j < m->njnt; j++) {
      int t = m->jnt_type[j];
      if (!m->jnt_limited[j] || (t != BCG_JNT_HINGE && t != BCG_JNT_SLIDE)) continue;
      double v = f[m->jnt_qposadr[j]], lo = m->jnt_range[j][0], hi = m->jnt_range[j][1];
      double ex = v < lo ? lo - v : v > hi ? v - hi : 0;
      if (ex > BCG_MOTION_RANGE_TOL) {
        bad = 1;
        c->range_values++;
        if (ex > c->range_excess) {
          c->range_excess = ex;
          c->range_value = v;
          c->range_jnt = j;
          c->range_frame = mo->first_frame + i;
        }
      }
    }
    c->range_frames += bad;
    if (m->has_floor && m->ncp > 0) {
      for (int r = 0; r < mo->nq; r++) q[r] = (bcg_real)f[r];
      bcg_kinematics(m, q, &k);
      double lo = 1e30;
      int cp = -1;
      for (int p = 0; p < m->ncp; p++) {
        bcg_real pc[3];
        bcg_contact_point(m, &k, p, pc);
        double g = (double)(pc[2] + k.o[2] - m->floor_z);
        if (g < lo) lo = g, cp = p;
      }
      if (lo < -BCG_MOTION_FLOOR_TOL) {
        c->floor_frames++;
        if (-lo > c->floor_depth) {
          c->floor_depth = -lo;
          c->floor_frame = mo->first_frame + i;
          c->floor_cp = cp;
        }
      }
    }
  }
}

/* The warnings of c, one line each (no trailing newline), naming the file;
 * frames are indices in the file (0 = its first frame). Returns the count. */
static inline int bcg_motion_warnings(const bcg_motion *mo, const bcg_model *model, const bcg_motion_checks *c,
                                      char (*line)[1600], int cap) {
  int n = 0;
  const bcg_mdata *m = &model->m;
  if (c->upside_frames > 0 && n < cap)
    snprintf(line[n++], 1600,
             "%s: the root is upside down in %d of the first %d frames (its z axis has world z %.2f): is the "
             "quaternion order right? (read as %s; set [task] quat_order or motion_format)",
             mo->path, c->upside_frames, c->upside_checked, c->upside_zz,
             mo->format == BCG_MOTION_LAFAN ? "x y z w, the LAFAN format" : "the file's order");
  if (c->range_frames > 0 && n < cap) {
    int j = c->range_jnt;
    snprintf(line[n++], 1600,
             "%s: %d of %d frames have joints outside their ranges (%d values beyond %g); worst: joint '%s' = %.3f at "
             "frame %d, %.3f beyond [%.3f, %.3f]",
             mo->path, c->range_frames, mo->nframes, c->range_values, BCG_MOTION_RANGE_TOL, model->jnt_name[j],
             c->range_value, c->range_frame, c->range_excess, (double)m->jnt_range[j][0], (double)m->jnt_range[j][1]);
  }
  if (c->floor_frames > 0 && n < cap) {
    int p = c->floor_cp, b = m->cp_body[p];
    snprintf(line[n++], 1600,
             "%s: %d of %d frames have a contact point more than %g m below the floor; deepest %.4f m at frame %d "
             "(geom '%s' of body '%s')",
             mo->path, c->floor_frames, mo->nframes, BCG_MOTION_FLOOR_TOL, c->floor_depth, c->floor_frame,
             model->cp_geom_name[p][0] ? model->cp_geom_name[p] : "(unnamed)", model->body_name[b]);
  }
  return n;
}

/* ---- sampling --------------------------------------------------------------- */

/* qpos at time t (s). Linear between frames, slerp for quaternions. With loop,
 * time wraps and every completed cycle applies the loop transform to a free
 * root (yaw about z, horizontal shift), and adds the first-to-last offset to
 * root slide joints with a horizontal axis; without loop, t is clamped. */
static inline void bcg_motion_qpos(const bcg_motion *mo, const bcg_mdata *m, double t, int loop, double *q) {
  double D = bcg_motion_duration(mo);
  long cyc = 0;
  if (loop && D > 0) {
    cyc = (long)floor(t / D);
    t -= cyc * D;
  } else {
    t = t < 0 ? 0 : (t > D ? D : t);
  }
  double f = t * mo->fps;
  int i = (int)floor(f);
  if (i > mo->nframes - 2) i = mo->nframes - 2;
  if (i < 0) i = 0;
  double al = f - i;
  if (al > 1) al = 1;
  const double *a = mo->qpos + (size_t)i * mo->nq, *b = a + mo->nq;
  for (int c = 0; c < mo->nq; c++) q[c] = (1 - al) * a[c] + al * b[c];
  for (int j = 0; j < m->njnt; j++) {
    if (!mo_is_quat_joint(m->jnt_type[j])) continue;
    int o = m->jnt_qposadr[j] + (m->jnt_type[j] == BCG_JNT_FREE ? 3 : 0);
    mo_slerp(q + o, a + o, b + o, al);
  }
  if (cyc == 0) return;
  const double *f0 = mo->qpos, *f1 = mo->qpos + (size_t)(mo->nframes - 1) * mo->nq;
  if (bcg_has_free_root(m)) {
    int r = m->jnt_qposadr[m->body_jntadr[1]];
    double c = cos(mo->loop_dpsi), s = sin(mo->loop_dpsi);
    for (long k = 0; k < (cyc > 0 ? cyc : -cyc); k++) {
      double x = q[r], y = q[r + 1], qz[4];
      if (cyc > 0) {
        q[r] = c * x - s * y + mo->loop_dxy[0];
        q[r + 1] = s * x + c * y + mo->loop_dxy[1];
        double h[3] = {0, 0, mo->loop_dpsi};
        mo_qexp(qz, h);
      } else {
        x -= mo->loop_dxy[0];
        y -= mo->loop_dxy[1];
        q[r] = c * x + s * y;
        q[r + 1] = -s * x + c * y;
        double h[3] = {0, 0, -mo->loop_dpsi};
        mo_qexp(qz, h);
      }
      double qr[4];
      mo_qmul(qr, qz, q + r + 3);
      mo_qnormalize(qr);
      memcpy(q + r + 3, qr, sizeof qr);
    }
  } else if (m->nbody > 1) {
    int b = 1;
    while (b < m->nbody && m->body_jntnum[b] == 0) b++;
    for (int jj = 0; b < m->nbody && jj < m->body_jntnum[b]; jj++) {
      int j = m->body_jntadr[b] + jj, a2 = m->jnt_qposadr[j];
      if (m->jnt_type[j] == BCG_JNT_SLIDE && fabs(m->jnt_axis[j][2]) < 1e-9)
        q[a2] += cyc * (f1[a2] - f0[a2]);
    }
  }
}

/* qpos and qvel at time t: velocities are central differences of the
 * interpolated motion over half a frame each side (one-sided at the ends of
 * a clip that does not loop); the free root's angular velocity is in its body
 * frame (MuJoCo's convention), ball joints likewise. */
static inline void bcg_motion_state(const bcg_motion *mo, const bcg_mdata *m, double t, int loop, double *q,
                                    double *u) {
  bcg_motion_qpos(mo, m, t, loop, q);
  if (!u) return;
  double D = bcg_motion_duration(mo), h = 0.5 / mo->fps;
  double t0 = t - h, t1 = t + h;
  if (!loop) {
    double tc = t < 0 ? 0 : (t > D ? D : t);
    t0 = tc - h < 0 ? 0 : tc - h;
    t1 = tc + h > D ? D : tc + h;
  }
  double qa[BCG_MAX_Q], qb[BCG_MAX_Q], dt = t1 - t0;
  bcg_motion_qpos(mo, m, t0, loop, qa);
  bcg_motion_qpos(mo, m, t1, loop, qb);
  for (int j = 0; j < m->njnt; j++) {
    int qa0 = m->jnt_qposadr[j], da = m->jnt_dofadr[j], type = m->jnt_type[j];
    if (type == BCG_JNT_FREE || type == BCG_JNT_BALL) {
      if (type == BCG_JNT_FREE) {
        for (int i = 0; i < 3; i++) u[da + i] = (qb[qa0 + i] - qa[qa0 + i]) / dt;
        qa0 += 3;
        da += 3;
      }
      double d[4], phi[3];
      mo_quat_conj_mul(d, qa + qa0, qb + qa0);
      mo_quat_log(phi, d);
      for (int i = 0; i < 3; i++) u[da + i] = phi[i] / dt;
    } else {
      u[da] = (qb[qa0] - qa[qa0]) / dt;
    }
  }
}

#endif
