/* tests/test_tasks.c - the task plugins (tasks/imitation.c, tasks/locomotion.c)
 * loaded from the build tree through a config, the motion loader
 * (tasks/motion.h) and the shipped motions (models/motions/). FD checks are
 * central differences in tangent coordinates, in double. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/dyn.h"
#include "bcg/env.h"
#include "bcg/loader.h"
#include "bcg/model.h"
#include "bcg/step.h"
#include "../tasks/motion.h"
#include "../tasks/add.h"
#include "../tasks/task_util.h"
#include "bcg/runlog.h"
#include "bcg/train.h"
#include "testutil.h"
#include "testrng.h"

#define HUMANOID "/usr/share/mujoco/model/humanoid/humanoid.xml"

static const char *repo_path(const char *rel, char *buf, size_t len) {
  if (rel[0] == '/' || access(rel, R_OK) == 0) return snprintf(buf, len, "%s", rel), buf;
  snprintf(buf, len, "%s/../%s", bcg_test_build_dir(), rel);
  return buf;
}


/* ---- a task instance from a config ------------------------------------------- */

typedef struct inst {
  bcg_registry *reg;
  bcg_config *cfg;
  bcg_env *env;
  const bcg_task_ops *ops;
  void *task;
  char err[2048];
} inst;

static void inst_free(inst *I) {
  if (I->task) I->ops->destroy(I->task);
  bcg_env_free(I->env);
  bcg_config_free(I->cfg);
  bcg_registry_free(I->reg);
  memset(I, 0, sizeof *I);
}

/* task_lines: the [task] section's body. Returns 0 or -1 with I->err. */
static int inst_make(inst *I, const char *model, const char *task_lines, int nenv) {
  memset(I, 0, sizeof *I);
  char dir[1024], mp[1024], path[1024];
  snprintf(path, sizeof path, "%s", bcg_test_tmp_path("tasks_XXXXXX.ini"));
  I->reg = bcg_registry_new();
  snprintf(dir, sizeof dir, "%s/plugins", bcg_test_build_dir());
  bcg_registry_scan_dir(I->reg, dir, 1);
  int fd = mkstemps(path, 4);
  if (fd < 0) return snprintf(I->err, sizeof I->err, "mkstemps"), -1;
  FILE *f = fdopen(fd, "w");
  fprintf(f, "[run]\nseed = 5\n[model]\npath = %s\n[task]\n%s\n", repo_path(model, mp, sizeof mp), task_lines);
  fclose(f);
  int rc = bcg_config_load_with(&I->cfg, I->reg, path, 0, NULL, I->err, sizeof I->err);
  unlink(path);
  if (rc) return -1;
  I->env = bcg_env_create(I->cfg, nenv, I->err, sizeof I->err);
  if (!I->env) return -1;
  const bcg_plugin *pl = bcg_config_plugin(I->cfg, BCG_KIND_TASK);
  if (!pl) return snprintf(I->err, sizeof I->err, "no task plugin"), -1;
  I->ops = pl->desc->ops;
  I->task = I->ops->create(bcg_services_host(), bcg_config_section(I->cfg, "task"), I->env, I->err, sizeof I->err);
  return I->task ? 0 : -1;
}

static const char *motion_file(const char *name) {
  static char buf[8][1024];
  static int slot;
  char rel[256];
  snprintf(rel, sizeof rel, "models/motions/%s", name);
  char *b = buf[slot++ & 7];
  return repo_path(rel, b, 1024);
}

/* ---- motion files --------------------------------------------------------------- */

static bcg_model *load_model(const char *p) {
  char err[1024], mp[1024];
  bcg_model *m = bcg_model_load(repo_path(p, mp, sizeof mp), err, sizeof err);
  if (!m) fprintf(stderr, "%s\n", err);
  return m;
}

/* write frames [n][nq] of the humanoid as CSV, quaternions in the given order */
static void write_csv(const char *path, const bcg_model *model, const double *Q, int n, int xyzw, int header_quat,
                      int names) {
  const bcg_mdata *m = &model->m;
  FILE *f = fopen(path, "w");
  if (header_quat) fprintf(f, "# fps=30 quat=%s\n", xyzw ? "xyzw" : "wxyz");
  else fprintf(f, "# fps: 30\n");
  if (names) {
    int free_root = bcg_has_free_root(m);
    for (int j = 0; j < m->njnt; j++) {
      if (m->jnt_type[j] == BCG_JNT_FREE) fprintf(f, "rx,ry,rz,q0,q1,q2,q3");
      else fprintf(f, "%s%s", (j || free_root) ? "," : "", model->jnt_name[j]);
    }
    fprintf(f, "\n");
  }
  for (int i = 0; i < n; i++) {
    const double *q = Q + (size_t)i * m->nq;
    for (int c = 0; c < m->nq; c++) {
      double v = q[c];
      if (xyzw && bcg_has_free_root(m) && c >= 3 && c < 7) v = c == 6 ? q[3] : q[c + 1];
      fprintf(f, c ? ",%.17g" : "%.17g", v);
    }
    fprintf(f, "\n");
  }
  fclose(f);
}

static void test_csv_quat_orders(void) {
  bcg_model *model = load_model(HUMANOID);
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  bcg_motion mo;
  char err[2048];
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&mo, model, motion_file("run.csv"), 0, 0, err, sizeof err), 0);
  int n = 20, nq = model->m.nq;
  const char *pw = bcg_test_tmp_path("wxyz.csv"), *px = bcg_test_tmp_path("xyzw.csv"), *pn = bcg_test_tmp_path("xyzw_nohdr.csv");
  write_csv(pw, model, mo.qpos, n, 0, 1, 1);
  write_csv(px, model, mo.qpos, n, 1, 1, 0);
  write_csv(pn, model, mo.qpos, n, 1, 0, 1);
  bcg_motion a, b, c, d;
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&a, model, pw, 0, BCG_QUAT_FILE, err, sizeof err), 0);
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&b, model, px, 0, BCG_QUAT_FILE, err, sizeof err), 0);
  /* no quat key in the file: the caller's order decides */
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&c, model, pn, 0, BCG_QUAT_XYZW, err, sizeof err), 0);
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&d, model, pn, 0, BCG_QUAT_FILE, err, sizeof err), 0); /* read as wxyz */
  double worst = 0, wrong = 0;
  for (int i = 0; i < n * nq; i++) {
    worst = fmax(worst, fabs(a.qpos[i] - mo.qpos[i]));
    worst = fmax(worst, fabs(b.qpos[i] - mo.qpos[i]));
    worst = fmax(worst, fabs(c.qpos[i] - mo.qpos[i]));
    wrong = fmax(wrong, fabs(d.qpos[i] - mo.qpos[i]));
  }
  CU_ASSERT(worst < 1e-12);
  CU_ASSERT(wrong > 0.1);
  CU_ASSERT(a.fps == 30 && c.fps == 30);
  /* through the plugin: quat_order key */
  inst I;
  char lines[2048];
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nquat_order = xyzw\n", pn);
  CU_ASSERT_EQUAL(inst_make(&I, HUMANOID, lines, 1), 0);
  if (I.err[0]) fprintf(stderr, "%s\n", I.err);
  inst_free(&I);
  bcg_motion_free(&mo), bcg_motion_free(&a), bcg_motion_free(&b), bcg_motion_free(&c), bcg_motion_free(&d);
  unlink(pw), unlink(px), unlink(pn);
  bcg_model_free(model);
}

static void test_csv_mismatch(void) {
  const char *p = bcg_test_tmp_path("bad.csv");
  /* a biped2d clip (9 columns) given to the humanoid: error names file and line */
  FILE *f = fopen(p, "w");
  fprintf(f, "# fps=30\n# a comment\n0,1.2,0,0,0,0,0,0,0\n");
  fclose(f);
  inst I;
  char lines[1024], want[256];
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\n", p);
  CU_ASSERT_NOT_EQUAL(inst_make(&I, HUMANOID, lines, 1), 0);
  snprintf(want, sizeof want, "%s:3:", p);
  CU_ASSERT_PTR_NOT_NULL(strstr(I.err, want));
  CU_ASSERT_PTR_NOT_NULL(strstr(I.err, "nq = 28"));
  printf("\n  mismatch message: %s\n", I.err);
  inst_free(&I);
  /* the right count but a wrong layout (swapped joint names) */
  bcg_model *model = load_model("models/biped2d.xml");
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  f = fopen(p, "w");
  fprintf(f, "# fps=30\nrootx,rootz,rooty,right_hip,right_knee,right_ankle,left_knee,left_hip,left_ankle\n");
  fprintf(f, "0,0,0,0,0,0,0,0,0\n0,0,0,0,0,0,0,0,0\n");
  fclose(f);
  bcg_motion mo;
  char err[2048];
  CU_ASSERT_NOT_EQUAL(bcg_motion_load(&mo, model, p, 0, 0, err, sizeof err), 0);
  snprintf(want, sizeof want, "%s:2: column 7 is 'left_knee'", p);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
  printf("  layout message: %s\n", err);
  /* a short row in the middle */
  f = fopen(p, "w");
  fprintf(f, "# fps=30\n0,0,0,0,0,0,0,0,0\n\n0,0,0,0,0,0,0,0\n");
  fclose(f);
  CU_ASSERT_NOT_EQUAL(bcg_motion_load(&mo, model, p, 0, 0, err, sizeof err), 0);
  snprintf(want, sizeof want, "%s:4: 8 columns", p);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
  /* no frame rate: bcg's CSV without a header (format auto reads a bare CSV
   * as LAFAN, 30 fps) */
  f = fopen(p, "w");
  fprintf(f, "0,0,0,0,0,0,0,0,0\n0,0,0,0,0,0,0,0,0\n");
  fclose(f);
  bcg_motion_opts o = {BCG_MOTION_BCG, 0, BCG_QUAT_FILE, 0, 0};
  CU_ASSERT_NOT_EQUAL(bcg_motion_load_opts(&mo, model, p, &o, err, sizeof err), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "fps"));
  o.fps = 50;
  CU_ASSERT_EQUAL(bcg_motion_load_opts(&mo, model, p, &o, err, sizeof err), 0);
  CU_ASSERT_EQUAL(mo.fps, 50);
  bcg_motion_free(&mo);
  CU_ASSERT_EQUAL(bcg_motion_load(&mo, model, p, 0, 0, err, sizeof err), 0);
  CU_ASSERT_EQUAL(mo.format, BCG_MOTION_LAFAN);
  CU_ASSERT_EQUAL(mo.fps, 30);
  bcg_motion_free(&mo);
  unlink(p);
  bcg_model_free(model);
}

/* ---- the LAFAN format, segments, load-time checks (generated data) -------------- */

/* frames [n][nq] of the humanoid in the LAFAN1 retargeting CSV format: no
 * header, root x y z, root quaternion x y z w, joints; 6 decimals like the
 * public files */
static void write_bare(const char *path, const bcg_model *model, const double *Q, int n, int xyzw) {
  const bcg_mdata *m = &model->m;
  FILE *f = fopen(path, "w");
  for (int i = 0; i < n; i++) {
    const double *q = Q + (size_t)i * m->nq;
    for (int c = 0; c < m->nq; c++) {
      double v = (xyzw && c >= 3 && c < 7) ? (c == 6 ? q[3] : q[c + 1]) : q[c];
      fprintf(f, c ? ",%.6f" : "%.6f", v);
    }
    fprintf(f, "\n");
  }
  fclose(f);
}

static void write_lafan(const char *path, const bcg_model *model, const double *Q, int n) {
  write_bare(path, model, Q, n, 1);
}

static double max_diff(const double *a, const double *b, size_t n) {
  double w = 0;
  for (size_t i = 0; i < n; i++) w = fmax(w, fabs(a[i] - b[i]));
  return w;
}

static void test_lafan_format(void) {
  bcg_model *model = load_model(HUMANOID);
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  bcg_motion ref, mo;
  char err[2048];
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&ref, model, motion_file("run.csv"), 0, 0, err, sizeof err), 0);
  CU_ASSERT_EQUAL(ref.format, BCG_MOTION_BCG);
  int n = 60, nq = model->m.nq;
  const char *p = bcg_test_tmp_path("lafan.csv");
  write_lafan(p, model, ref.qpos, n);
  /* auto: a bare CSV is LAFAN (30 fps, x y z w) */
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&mo, model, p, 0, BCG_QUAT_FILE, err, sizeof err), 0);
  CU_ASSERT_EQUAL(mo.format, BCG_MOTION_LAFAN);
  CU_ASSERT_EQUAL(mo.nframes, n);
  CU_ASSERT_EQUAL(mo.fps, 30);
  CU_ASSERT(max_diff(mo.qpos, ref.qpos, (size_t)n * nq) < 2e-6);
  bcg_motion_free(&mo);
  /* explicit lafan, the task's fps replacing 30 */
  bcg_motion_opts o = {BCG_MOTION_LAFAN, 60, BCG_QUAT_FILE, 0, 0};
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load_opts(&mo, model, p, &o, err, sizeof err), 0);
  CU_ASSERT_EQUAL(mo.fps, 60);
  CU_ASSERT(max_diff(mo.qpos, ref.qpos, (size_t)n * nq) < 2e-6);
  bcg_motion_free(&mo);
  /* bcg's CSV reading of the same file: no frame rate */
  o.format = BCG_MOTION_BCG, o.fps = 0;
  CU_ASSERT_NOT_EQUAL(bcg_motion_load_opts(&mo, model, p, &o, err, sizeof err), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "no frame rate"));
  /* lafan on a file with a header: an error naming file and line */
  o.format = BCG_MOTION_LAFAN;
  char want[512];
  CU_ASSERT_NOT_EQUAL(bcg_motion_load_opts(&mo, model, motion_file("run.csv"), &o, err, sizeof err), 0);
  snprintf(want, sizeof want, "%s:1: a header or comment line, but the LAFAN format has none", motion_file("run.csv"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
  /* ... and on HDF5 */
  CU_ASSERT_NOT_EQUAL(bcg_motion_load_opts(&mo, model, bcg_test_tmp_path("missing.h5"), &o, err, sizeof err), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "lafan reads CSV files"));
  /* a G1 clip (36 columns) given to the humanoid: the message names the LAFAN layout */
  FILE *f = fopen(p, "w");
  for (int i = 0; i < 3; i++) {
    for (int c = 0; c < 36; c++) fprintf(f, c ? ",%.6f" : "%.6f", c == 6 ? 1.0 : 0.0);
    fprintf(f, "\n");
  }
  fclose(f);
  CU_ASSERT_NOT_EQUAL(bcg_motion_load(&mo, model, p, 0, 0, err, sizeof err), 0);
  snprintf(want, sizeof want, "%s:1: 36 columns, but model %s has nq = 28 (LAFAN format: root x y z, root quaternion x y z w", p, HUMANOID);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
  /* through the plugin: motion_format = lafan */
  write_lafan(p, model, ref.qpos, n);
  inst I;
  char lines[1024];
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nmotion_format = lafan\n", p);
  CU_ASSERT_EQUAL(inst_make(&I, HUMANOID, lines, 1), 0);
  if (I.err[0]) fprintf(stderr, "%s\n", I.err);
  inst_free(&I);
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nmotion_format = bcg\n", p);
  CU_ASSERT_NOT_EQUAL(inst_make(&I, HUMANOID, lines, 1), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(I.err, "[task] motion: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(I.err, "no frame rate"));
  inst_free(&I);
  bcg_motion_free(&ref);
  unlink(p);
  bcg_model_free(model);
}

/* motion_start / motion_end: seconds of the file, nearest frame, end included */
static void test_motion_segment(void) {
  bcg_model *model = load_model(HUMANOID);
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  bcg_motion ref, mo;
  char err[2048], want[512];
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&ref, model, motion_file("run.csv"), 0, 0, err, sizeof err), 0);
  int n = 90, nq = model->m.nq;
  const char *p = bcg_test_tmp_path("lafan_seg.csv");
  write_lafan(p, model, ref.qpos, n);
  bcg_motion_opts o = {BCG_MOTION_AUTO, 0, BCG_QUAT_FILE, 1.0, 2.01};
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load_opts(&mo, model, p, &o, err, sizeof err), 0);
  CU_ASSERT_EQUAL(mo.nframes, 31);
  CU_ASSERT_EQUAL(mo.first_frame, 30);
  CU_ASSERT(max_diff(mo.qpos, ref.qpos + 30 * nq, (size_t)31 * nq) < 2e-6);
  CU_ASSERT_DOUBLE_EQUAL(bcg_motion_duration(&mo), 1.0, 1e-12);
  bcg_motion_free(&mo);
  /* start only: to the end */
  o.end = 0;
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load_opts(&mo, model, p, &o, err, sizeof err), 0);
  CU_ASSERT_EQUAL(mo.nframes, n - 30);
  bcg_motion_free(&mo);
  /* errors name the file and the key */
  o.start = 5, o.end = 0;
  CU_ASSERT_NOT_EQUAL(bcg_motion_load_opts(&mo, model, p, &o, err, sizeof err), 0);
  snprintf(want, sizeof want, "%s: motion_start = 5 s is at or beyond the clip's end (90 frames at 30 fps", p);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
  o.start = 0, o.end = 4;
  CU_ASSERT_NOT_EQUAL(bcg_motion_load_opts(&mo, model, p, &o, err, sizeof err), 0);
  snprintf(want, sizeof want, "%s: motion_end = 4 s is beyond the clip's end", p);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
  o.start = 2, o.end = 1;
  CU_ASSERT_NOT_EQUAL(bcg_motion_load_opts(&mo, model, p, &o, err, sizeof err), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "motion_end must be after motion_start"));
  /* through the plugin: a reset without rsi starts at the segment's first frame */
  inst I;
  char lines[1024];
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nmotion_start = 1\nmotion_end = 2\nrsi = false\n", p);
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, lines, 1), 0);
  bcg_real x[BCG_MAX_Q + BCG_MAX_DOF];
  bcg_task_clock clk;
  int e0 = 0;
  CU_ASSERT_EQUAL(I.ops->reset(I.task, &e0, 1, 0, x, &clk), 0);
  double d = 0;
  for (int c = 0; c < nq; c++) d = fmax(d, fabs((double)x[c] - ref.qpos[30 * nq + c]));
  CU_ASSERT(d < 2e-6);
  inst_free(&I);
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nmotion_start = 10\n", p);
  CU_ASSERT_NOT_EQUAL(inst_make(&I, HUMANOID, lines, 1), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(I.err, "[task] motion: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(I.err, "motion_start = 10 s"));
  inst_free(&I);
  bcg_motion_free(&ref);
  unlink(p);
  bcg_model_free(model);
}

/* quaternion norm (error), upside-down root (the wrong order), joints out of
 * range and contact points below the floor (warnings with counts) */
static void test_motion_checks(void) {
  bcg_model *model = load_model(HUMANOID);
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  const bcg_mdata *m = &model->m;
  bcg_motion ref, mo;
  bcg_motion_checks c;
  char err[2048], want[512], wl[3][1600];
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&ref, model, motion_file("run.csv"), 0, 0, err, sizeof err), 0);
  int n = 40, nq = m->nq;
  const char *p = bcg_test_tmp_path("lafan_chk.csv");
  double *Q = malloc(sizeof(double) * (size_t)n * nq);
  CU_ASSERT_PTR_NOT_NULL_FATAL(Q);
  /* clean: nothing to say */
  write_lafan(p, model, ref.qpos, n);
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&mo, model, p, 0, 0, err, sizeof err), 0);
  bcg_motion_check(&mo, model, &c);
  CU_ASSERT_EQUAL(c.upside_checked, BCG_MOTION_UPSIDE_FRAMES);
  CU_ASSERT_EQUAL(c.upside_frames + c.range_frames + c.floor_frames, 0);
  CU_ASSERT_EQUAL(bcg_motion_warnings(&mo, model, &c, wl, 3), 0);
  bcg_motion_free(&mo);
  /* the wrong quaternion order: a bare CSV in w x y z read as LAFAN (x y z
   * w) turns the upright root upside down (the other mistake, x y z w read
   * as w x y z, turns it 180 degrees about z and is not seen) */
  bcg_motion_opts o = {BCG_MOTION_AUTO, 0, BCG_QUAT_FILE, 0, 0};
  write_bare(p, model, ref.qpos, n, 0);
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load_opts(&mo, model, p, &o, err, sizeof err), 0);
  bcg_motion_check(&mo, model, &c);
  CU_ASSERT_EQUAL(c.upside_frames, BCG_MOTION_UPSIDE_FRAMES);
  CU_ASSERT(c.upside_zz < -0.9);
  CU_ASSERT_EQUAL_FATAL(bcg_motion_warnings(&mo, model, &c, wl, 3) >= 1, 1);
  snprintf(want, sizeof want, "%s: the root is upside down in 10 of the first 10 frames", p);
  CU_ASSERT_PTR_NOT_NULL(strstr(wl[0], want));
  CU_ASSERT_PTR_NOT_NULL(strstr(wl[0], "quaternion order right? (read as x y z w, the LAFAN format"));
  printf("\n  %s\n", wl[0]);
  bcg_motion_free(&mo);
  /* a joint out of range in frames 3..7, 0.3 rad beyond */
  memcpy(Q, ref.qpos, sizeof(double) * (size_t)n * nq);
  int j = -1;
  for (int k = 0; k < m->njnt; k++)
    if (!strcmp(model->jnt_name[k], "right_knee")) j = k;
  CU_ASSERT_FATAL(j >= 0 && m->jnt_limited[j]);
  for (int i = 3; i < 8; i++) Q[(size_t)i * nq + m->jnt_qposadr[j]] = m->jnt_range[j][0] - 0.3 - 0.01 * i;
  write_lafan(p, model, Q, n);
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&mo, model, p, 0, 0, err, sizeof err), 0);
  bcg_motion_check(&mo, model, &c);
  CU_ASSERT_EQUAL(c.range_frames, 5);
  CU_ASSERT_EQUAL(c.range_values, 5);
  CU_ASSERT_EQUAL(c.range_jnt, j);
  CU_ASSERT_EQUAL(c.range_frame, 7);
  CU_ASSERT_DOUBLE_EQUAL(c.range_excess, 0.37, 2e-6);
  CU_ASSERT_EQUAL_FATAL(bcg_motion_warnings(&mo, model, &c, wl, 3), 1 + (c.floor_frames > 0));
  snprintf(want, sizeof want, "%s: 5 of 40 frames have joints outside their ranges (5 values beyond 0.01); worst: joint 'right_knee'", p);
  CU_ASSERT_PTR_NOT_NULL(strstr(wl[0], want));
  printf("  %s\n", wl[0]);
  bcg_motion_free(&mo);
  /* the body 5 cm below the floor in frames 10..19 */
  memcpy(Q, ref.qpos, sizeof(double) * (size_t)n * nq);
  for (int i = 10; i < 20; i++) Q[(size_t)i * nq + 2] -= 0.05;
  write_lafan(p, model, Q, n);
  o.quat = BCG_QUAT_FILE, o.start = 0.1, o.end = 0;
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load_opts(&mo, model, p, &o, err, sizeof err), 0);
  bcg_motion_check(&mo, model, &c);
  CU_ASSERT_EQUAL(c.floor_frames, 10);
  CU_ASSERT(c.floor_depth > 0.049 && c.floor_depth < 0.052);
  CU_ASSERT(c.floor_frame >= 10 && c.floor_frame < 20); /* a frame of the file, not of the segment */
  CU_ASSERT_EQUAL_FATAL(bcg_motion_warnings(&mo, model, &c, wl, 3), 1);
  snprintf(want, sizeof want, "%s: 10 of 37 frames have a contact point more than 0.005 m below the floor; deepest 0.05", p);
  CU_ASSERT_PTR_NOT_NULL(strstr(wl[0], want));
  CU_ASSERT_PTR_NOT_NULL(strstr(wl[0], "of body '"));
  printf("  %s\n", wl[0]);
  bcg_motion_free(&mo);
  /* a quaternion far from unit norm: an error naming file, line and joint */
  memcpy(Q, ref.qpos, sizeof(double) * (size_t)n * nq);
  for (int k = 3; k < 7; k++) Q[(size_t)4 * nq + k] *= 1.5;
  write_lafan(p, model, Q, n);
  CU_ASSERT_NOT_EQUAL(bcg_motion_load(&mo, model, p, 0, 0, err, sizeof err), 0);
  snprintf(want, sizeof want, "%s:5: quaternion of joint '%s' has norm 1.5", p, model->jnt_name[0]);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
  printf("  %s\n", err);
  /* 6 decimals (the public files) are within the tolerance */
  for (int k = 3; k < 7; k++) Q[(size_t)4 * nq + k] /= 1.5 * (1 + 4e-3);
  write_lafan(p, model, Q, n);
  CU_ASSERT_EQUAL(bcg_motion_load(&mo, model, p, 0, 0, err, sizeof err), 0);
  bcg_motion_free(&mo);
  free(Q);
  bcg_motion_free(&ref);
  unlink(p);
  bcg_model_free(model);
}

/* the task made with stderr into a file, whose text is returned (NUL-terminated, in buf) */
static int inst_make_stderr(inst *I, const char *model, const char *task_lines, int nenv, char *buf, size_t len) {
  const char *p = bcg_test_tmp_path("tasks_stderr.txt");
  fflush(stderr);
  int saved = dup(2);
  FILE *f = fopen(p, "w+");
  if (saved < 0 || !f) {
    if (saved >= 0) close(saved);
    if (f) fclose(f);
    return -2;
  }
  dup2(fileno(f), 2);
  int rc = inst_make(I, model, task_lines, nenv);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(f);
  size_t n = fread(buf, 1, len - 1, f);
  buf[n] = 0;
  fclose(f);
  unlink(p);
  return rc;
}

/* PD targets within action_scale of the default pose (SHAC's tanh-squashed
 * actions): a clip whose joints go more than 4 action_scales away gets a
 * note with the counts and the farthest joint; a wide enough scale, or
 * motor actuation, none */
static void test_motion_reach_note(void) {
  char lines[2048], out[8192];
  const char *clip = motion_file("run.csv");
  inst I;
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\n[sim]\nactuation = pd\naction_scale = 0.05", clip);
  CU_ASSERT_EQUAL_FATAL(inst_make_stderr(&I, HUMANOID, lines, 1, out, sizeof out), 0);
  const char *n = strstr(out, "an actuated joint is more than 4 x action_scale = 0.2 rad from the default pose");
  CU_ASSERT_PTR_NOT_NULL(n);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "out of the policy's reach"));
  /* the counts: frames over 4 x 0.05 rad, and the farthest joint, recomputed here */
  const bcg_mdata *m = &I.env->model->m;
  const bcg_simparams *sp = &I.env->sim->sp;
  bcg_motion mo;
  char err[1024];
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&mo, I.env->model, clip, 0, 0, err, sizeof err), 0);
  int over = 0, wj = -1;
  double worst = 0;
  for (int f = 0; f < mo.nframes; f++) {
    int o = 0;
    for (int i = 0; i < m->nu; i++) {
      int qa = m->jnt_qposadr[m->act_jnt[i]];
      double d = fabs(mo.qpos[(size_t)f * mo.nq + qa] - (double)sp->qdef[qa]);
      if (d > 4 * 0.05) o = 1;
      if (d > worst) worst = d, wj = m->act_jnt[i];
    }
    over += o;
  }
  char want[512];
  snprintf(want, sizeof want, "in %d of %d frames", over, mo.nframes);
  CU_ASSERT(over > 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  CU_ASSERT_FATAL(wj >= 0);
  snprintf(want, sizeof want, "the farthest: joint '%s', %.2f rad", I.env->model->jnt_name[wj], worst);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  if (n) printf("\n  %.*s\n", (int)strcspn(n, "\n"), n);
  bcg_motion_free(&mo);
  inst_free(&I);
  /* a scale that covers the clip: no note */
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\n[sim]\nactuation = pd\naction_scale = %g", clip,
           worst / 4 + 0.01);
  CU_ASSERT_EQUAL_FATAL(inst_make_stderr(&I, HUMANOID, lines, 1, out, sizeof out), 0);
  CU_ASSERT_PTR_NULL(strstr(out, "out of the policy's reach"));
  inst_free(&I);
  /* motor actuation: actions are torques, no note */
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\n[sim]\nactuation = motor\naction_scale = 0.05", clip);
  CU_ASSERT_EQUAL_FATAL(inst_make_stderr(&I, HUMANOID, lines, 1, out, sizeof out), 0);
  CU_ASSERT_PTR_NULL(strstr(out, "out of the policy's reach"));
  inst_free(&I);
}

/* The real LAFAN1 G1 clips on Unitree's G1, where ../shared/motions and
 * ../shared/robots exist (never copied into the repository): each clip's
 * first 4 s, read as the public files are (motion_format = auto finds
 * lafan, segment keys), replayed as the state of the imitation task: the
 * reward is its maximum (E_track 0, no termination), and the loader's
 * checks report nothing fatal. */
static void test_lafan_real_clip(void) {
  static const char *clips[] = {"run", "jump", "fight", "dance"};
  char g1[1024], clip[1024], rel[256];
  repo_path("../shared/robots/unitree_g1/scene_29dof.xml", g1, sizeof g1);
  int ran = 0;
  for (int c = 0; c < 4; c++) {
    snprintf(rel, sizeof rel, "../shared/motions/lafan1_g1/%s.csv", clips[c]);
    repo_path(rel, clip, sizeof clip);
    if (access(clip, R_OK) != 0 || access(g1, R_OK) != 0) continue;
    inst I;
    char lines[2048];
    snprintf(lines, sizeof lines,
             "plugin = imitation\nmotion = %s\nmotion_start = 1\nmotion_end = 5\nrsi = false\nepisode_seconds = 4\n"
             "w_self = 0\n", clip);
    int rc = inst_make(&I, "../shared/robots/unitree_g1/scene_29dof.xml", lines, 2);
    if (rc) fprintf(stderr, "%s: %s\n", clips[c], I.err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    bcg_model *model = load_model("../shared/robots/unitree_g1/scene_29dof.xml");
    CU_ASSERT_PTR_NOT_NULL_FATAL(model);
    bcg_motion mo;
    char err[2048];
    bcg_motion_opts o = {BCG_MOTION_AUTO, 0, BCG_QUAT_FILE, 1, 5};
    CU_ASSERT_EQUAL_FATAL(bcg_motion_load_opts(&mo, model, clip, &o, err, sizeof err), 0);
    CU_ASSERT_EQUAL(mo.format, BCG_MOTION_LAFAN);
    CU_ASSERT_DOUBLE_EQUAL(mo.fps, 30, 0);
    CU_ASSERT(bcg_motion_duration(&mo) > 3.9 && bcg_motion_duration(&mo) < 4.1);
    bcg_env *env = I.env;
    int nx = env->nx, envs[2] = {0, 1}, done[2], bad = 0;
    bcg_task_clock clk[2];
    bcg_real x[2 * 80], a[2 * 32] = {0}, rew[2];
    CU_ASSERT_EQUAL(I.ops->reset(I.task, envs, 2, 0, x, clk), 0);
    double worst = 0, dt = env->control_dt;
    for (int t = 1; t < 200; t += 3) {
      for (int e = 0; e < 2; e++) {
        bcg_motion_state(&mo, &model->m, t * dt, 0, x + e * nx, x + e * nx + env->nq);
        clk[e].t = t;
      }
      I.ops->reward(I.task, x, a, a, clk, rew, done);
      for (int e = 0; e < 2; e++) worst = fmax(worst, fabs(rew[e] - 1.0)), bad += done[e] != 0;
    }
    char label[128];
    snprintf(label, sizeof label, "G1 %s: replayed clip, |reward - max|", clips[c]);
    bcg_test_report(label, worst);
    CU_ASSERT(worst < 1e-9);
    CU_ASSERT_EQUAL(bad, 0);
    bcg_motion_free(&mo);
    bcg_model_free(model);
    inst_free(&I);
    ran++;
  }
  if (!ran) bcg_test_skip("../shared/motions/lafan1_g1 or ../shared/robots/unitree_g1 absent");
}

/* A task that stands on a floor refuses a model without one, naming the
 * config's [model] path, unless [model] allow_no_floor = true. */
static void test_floor_required(void) {
  const char *xml = bcg_test_tmp_path("nofloor.xml");
  FILE *f = fopen(xml, "w");
  fprintf(f, "<mujoco><worldbody><body name='torso' pos='0 0 1'><freejoint/><geom name='t' size='.1'/>\n"
             "<body name='leg' pos='0 0 -.3'><joint name='hip' axis='0 1 0'/><geom name='foot' size='.05'/></body>\n"
             "</body></worldbody><actuator><motor joint='hip' gear='10'/></actuator></mujoco>\n");
  fclose(f);
  inst I;
  CU_ASSERT_NOT_EQUAL(inst_make(&I, xml, "plugin = locomotion\n", 1), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(I.err, "[model] path: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(I.err, "no floor (no collidable plane on the world body), but task 'locomotion'"));
  CU_ASSERT_PTR_NOT_NULL(strstr(I.err, "allow_no_floor = true"));
  printf("\n  %s\n", I.err);
  inst_free(&I);
  /* a floor that nothing can touch */
  f = fopen(xml, "w");
  fprintf(f, "<mujoco><worldbody><geom type='plane' size='1 1 .1'/><body name='torso' pos='0 0 1'><freejoint/>"
             "<geom size='.1' contype='2' conaffinity='2'/>\n"
             "<body name='leg' pos='0 0 -.3'><joint name='hip' axis='0 1 0'/><geom size='.05' contype='2' "
             "conaffinity='2'/></body>\n</body></worldbody><actuator><motor joint='hip' gear='10'/></actuator></mujoco>\n");
  fclose(f);
  CU_ASSERT_NOT_EQUAL(inst_make(&I, xml, "plugin = locomotion\n", 1), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(I.err, "the floor has no contact points"));
  inst_free(&I);
  /* allowed explicitly */
  char dir[1024], path[1024], e[2048];
  snprintf(path, sizeof path, "%s", bcg_test_tmp_path("floor_XXXXXX.ini"));
  bcg_registry *reg = bcg_registry_new();
  snprintf(dir, sizeof dir, "%s/plugins", bcg_test_build_dir());
  bcg_registry_scan_dir(reg, dir, 1);
  int fd = mkstemps(path, 4);
  CU_ASSERT_FATAL(fd >= 0);
  f = fdopen(fd, "w");
  fprintf(f, "[model]\npath = %s\nallow_no_floor = true\n[task]\nplugin = locomotion\n", xml);
  fclose(f);
  bcg_config *cfg = NULL;
  CU_ASSERT_EQUAL_FATAL(bcg_config_load_with(&cfg, reg, path, 0, NULL, e, sizeof e), 0);
  bcg_env *env = bcg_env_create(cfg, 1, e, sizeof e);
  CU_ASSERT_PTR_NOT_NULL(env);
  bcg_env_free(env);
  bcg_config_free(cfg);
  bcg_registry_free(reg);
  unlink(path);
  unlink(xml);
}

static void test_hdf5(void) {
  bcg_model *model = load_model(HUMANOID);
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  bcg_motion mo, h;
  char err[2048];
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&mo, model, motion_file("jump.csv"), 0, 0, err, sizeof err), 0);
  const char *p = bcg_test_tmp_path("motion.h5");
  hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t dims[2] = {(hsize_t)mo.nframes, (hsize_t)mo.nq}, one = 1;
  hid_t sp = H5Screate_simple(2, dims, NULL);
  hid_t d = H5Dcreate2(f, "qpos", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, mo.qpos);
  hid_t as = H5Screate_simple(1, &one, NULL);
  hid_t a = H5Acreate2(d, "fps", H5T_IEEE_F64LE, as, H5P_DEFAULT, H5P_DEFAULT);
  double fps = 30;
  H5Awrite(a, H5T_NATIVE_DOUBLE, &fps);
  H5Aclose(a), H5Sclose(as), H5Dclose(d), H5Sclose(sp), H5Fclose(f);
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&h, model, p, 0, 0, err, sizeof err), 0);
  CU_ASSERT_EQUAL(h.nframes, mo.nframes);
  CU_ASSERT_EQUAL(h.fps, 30);
  double worst = 0;
  for (int i = 0; i < mo.nframes * mo.nq; i++) worst = fmax(worst, fabs(h.qpos[i] - mo.qpos[i]));
  CU_ASSERT(worst < 1e-15);
  /* through the plugin too */
  inst I;
  char lines[1024];
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\n", p);
  CU_ASSERT_EQUAL(inst_make(&I, HUMANOID, lines, 1), 0);
  inst_free(&I);
  bcg_motion_free(&mo), bcg_motion_free(&h);
  unlink(p);
  bcg_model_free(model);
}

/* A motion file qpos [n][nq] (free-root quaternion written x y z w when xyzw)
 * with an fps attribute of nfps values (0: none; -1: a scalar) and a quat
 * attribute: 0 none, 1 variable-length UTF-8 (h5py's default for str), 2
 * fixed-length NULLPAD (h5py's numpy.bytes_), both on the root group. */
static void write_h5_motion(const char *p, const bcg_motion *mo, int xyzw, int nfps, double fps, int quat_kind,
                            const char *quat) {
  hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t dims[2] = {(hsize_t)mo->nframes, (hsize_t)mo->nq};
  double *q = malloc(sizeof(double) * mo->nframes * mo->nq);
  memcpy(q, mo->qpos, sizeof(double) * mo->nframes * mo->nq);
  for (int i = 0; xyzw && i < mo->nframes; i++) {
    double *r = q + (size_t)i * mo->nq, w = r[3];
    r[3] = r[4], r[4] = r[5], r[5] = r[6], r[6] = w;
  }
  hid_t sp = H5Screate_simple(2, dims, NULL);
  hid_t d = H5Dcreate2(f, "qpos", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, q);
  if (nfps) {
    hsize_t n = nfps > 0 ? (hsize_t)nfps : 1;
    double *v = malloc(sizeof(double) * n);
    for (hsize_t i = 0; i < n; i++) v[i] = fps;
    hid_t as = nfps > 0 ? H5Screate_simple(1, &n, NULL) : H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(d, "fps", H5T_IEEE_F64LE, as, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_DOUBLE, v);
    H5Aclose(a), H5Sclose(as), free(v);
  }
  if (quat_kind) {
    hid_t t = H5Tcopy(H5T_C_S1), as = H5Screate(H5S_SCALAR);
    if (quat_kind == 1) {
      H5Tset_size(t, H5T_VARIABLE);
      H5Tset_cset(t, H5T_CSET_UTF8);
    } else {
      H5Tset_size(t, strlen(quat));
      H5Tset_strpad(t, H5T_STR_NULLPAD);
    }
    hid_t a = H5Acreate2(f, "quat", t, as, H5P_DEFAULT, H5P_DEFAULT);
    if (quat_kind == 1) H5Awrite(a, t, &quat);
    else H5Awrite(a, t, quat);
    H5Aclose(a), H5Sclose(as), H5Tclose(t);
  }
  H5Dclose(d), H5Sclose(sp), H5Fclose(f);
  free(q);
}

/* qpos [frames][cols] of file type t declared without data (HDF5 stores
 * nothing for it, so the file is small whatever the shape), fps 30. */
static void write_h5_declared(const char *p, hsize_t frames, hsize_t cols, hid_t t) {
  hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t dims[2] = {frames, cols};
  hid_t sp = H5Screate_simple(2, dims, NULL);
  hid_t d = H5Dcreate2(f, "qpos", t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t as = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(d, "fps", H5T_IEEE_F64LE, as, H5P_DEFAULT, H5P_DEFAULT);
  double fps = 30;
  H5Awrite(a, H5T_NATIVE_DOUBLE, &fps);
  H5Aclose(a), H5Sclose(as), H5Dclose(d), H5Sclose(sp), H5Fclose(f);
}

/* Sizes a damaged (or crafted) motion file declares are checked before
 * anything is allocated for them (found by tests/fuzz/fuzz_motion_h5): 2e8
 * frames made the reader allocate 45 GB, 2^32 + 28 columns passed as 28 (an
 * int cast) and allocated 68 GB, and a float type of 1 MB per value made
 * libhdf5 allocate conversion buffers of that many bytes per value. A CSV
 * holds at most as many frames. */
static void test_motion_declared_sizes(void) {
  bcg_model *model = load_model(HUMANOID), *biped = load_model("models/biped2d.xml");
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  CU_ASSERT_PTR_NOT_NULL_FATAL(biped);
  bcg_motion h;
  char err[2048], want[2048];
  const char *p = bcg_test_tmp_path("declared.h5");
  write_h5_declared(p, 200000000, 28, H5T_IEEE_F64LE);
  CU_ASSERT_NOT_EQUAL(bcg_motion_load(&h, model, p, 0, 0, err, sizeof err), 0);
  snprintf(want, sizeof want, "%s: dataset 'qpos' has 200000000 frames, more than BCG_MOTION_MAX_FRAMES = 1000000", p);
  CU_ASSERT_STRING_EQUAL(err, want);
  write_h5_declared(p, 3, ((hsize_t)1 << 32) + 28, H5T_IEEE_F64LE);
  CU_ASSERT_NOT_EQUAL(bcg_motion_load(&h, model, p, 0, 0, err, sizeof err), 0);
  snprintf(want, sizeof want, "%s: dataset 'qpos' has 4294967324 columns, but model %s has nq = 28", p, model->path);
  CU_ASSERT_STRING_EQUAL(err, want);
  hid_t big = H5Tcopy(H5T_IEEE_F64LE);
  CU_ASSERT_FATAL(H5Tset_size(big, 1 << 20) >= 0);
  write_h5_declared(p, 3, 28, big);
  H5Tclose(big);
  CU_ASSERT_NOT_EQUAL(bcg_motion_load(&h, model, p, 0, 0, err, sizeof err), 0);
  snprintf(want, sizeof want, "%s: dataset 'qpos' does not hold numbers (its type has 1048576-byte values; need float "
           "or integer values of at most 16 bytes)", p);
  CU_ASSERT_STRING_EQUAL(err, want);
  hid_t str = H5Tcopy(H5T_C_S1);
  H5Tset_size(str, 8);
  write_h5_declared(p, 3, 28, str);
  H5Tclose(str);
  CU_ASSERT_NOT_EQUAL(bcg_motion_load(&h, model, p, 0, 0, err, sizeof err), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "dataset 'qpos' does not hold numbers (its type has 8-byte values"));
  /* a shape within the limits, declared but not stored: 500000 frames of
   * fill values loaded as a clip of zeros (biped2d has no quaternion), and
   * took seconds of load-time checks */
  write_h5_declared(p, 500000, 9, H5T_IEEE_F64LE);
  CU_ASSERT_NOT_EQUAL(bcg_motion_load(&h, biped, p, 0, 0, err, sizeof err), 0);
  snprintf(want, sizeof want, "%s: dataset 'qpos' declares 500000 frames (36000000 bytes) but the file stores 0 bytes", p);
  CU_ASSERT_STRING_EQUAL(err, want);
  unlink(p);
  /* a CSV of 1000001 frames of biped2d (no quaternion) */
  const char *pc = bcg_test_tmp_path("long.csv");
  FILE *f = fopen(pc, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f, "# fps=1000\n");
  for (int i = 0; i <= 1000000; i++) fputs("0,0,0,0,0,0,0,0,0\n", f);
  fclose(f);
  CU_ASSERT_NOT_EQUAL(bcg_motion_load(&h, biped, pc, 0, 0, err, sizeof err), 0);
  snprintf(want, sizeof want, "%s:1000002: more than BCG_MOTION_MAX_FRAMES = 1000000 frames", pc);
  CU_ASSERT_STRING_EQUAL(err, want);
  unlink(pc);
  bcg_model_free(model);
  bcg_model_free(biped);
}

/* Text of the file quoted in an error message keeps it one line (found by
 * the fuzz harnesses: a checkpoint's dataset name held a newline, and so can
 * a quat attribute or a CSV field with other control characters). */
static void test_motion_messages_one_line(void) {
  bcg_model *model = load_model(HUMANOID);
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  bcg_motion mo, h;
  char err[2048], want[2048];
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&mo, model, motion_file("jump.csv"), 0, 0, err, sizeof err), 0);
  const char *p = bcg_test_tmp_path("nl.h5");
  write_h5_motion(p, &mo, 0, 1, 30, 1, "wx\nyz\x1b[0m");
  CU_ASSERT_NOT_EQUAL(bcg_motion_load(&h, model, p, 0, 0, err, sizeof err), 0);
  snprintf(want, sizeof want, "%s: attribute quat 'wx?yz?[0m' is not wxyz or xyzw", p);
  CU_ASSERT_STRING_EQUAL(err, want);
  const char *pc = bcg_test_tmp_path("esc.csv");
  FILE *f = fopen(pc, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f, "# fps=30\n");
  for (int c = 0; c < 28; c++) fprintf(f, "%s%s", c ? "," : "", c == 7 ? "\x1b[31mred\rx" : "j");
  fprintf(f, "\n");
  fclose(f);
  CU_ASSERT_NOT_EQUAL(bcg_motion_load(&h, model, pc, 0, 0, err, sizeof err), 0);
  snprintf(want, sizeof want, "%s:2: column 8 is '?[31mred?x' but qpos[7] of model %s", pc, model->path);
  CU_ASSERT_EQUAL(strncmp(err, want, strlen(want)), 0);
  if (strncmp(err, want, strlen(want))) printf("\n  got:  %s\n  want: %s\n", err, want);
  bcg_motion_free(&mo);
  unlink(p), unlink(pc);
  bcg_model_free(model);
}

/* Attributes as other tools write them: an fps array (was a stack overflow
 * with 100 values, silently the first of 3), an fps out of range (1e300 made
 * every transition a NaN reset), h5py's variable-length UTF-8 quat (was
 * ignored) and a fixed-length NULLPAD one (was misread as "xyz"). */
static void test_hdf5_attributes(void) {
  bcg_model *model = load_model(HUMANOID);
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  bcg_motion mo, h;
  char err[2048], want[512];
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&mo, model, motion_file("jump.csv"), 0, 0, err, sizeof err), 0);
  const char *p = bcg_test_tmp_path("attrs.h5");
  const int counts[] = {100, 3};
  for (int i = 0; i < 2; i++) {
    write_h5_motion(p, &mo, 0, counts[i], 30, 0, NULL);
    CU_ASSERT_NOT_EQUAL(bcg_motion_load(&h, model, p, 0, 0, err, sizeof err), 0);
    snprintf(want, sizeof want, "%s: attribute 'fps' of dataset 'qpos' holds %d values (need exactly one)", p,
             counts[i]);
    CU_ASSERT_STRING_EQUAL(err, want);
  }
  write_h5_motion(p, &mo, 0, -1, 30, 0, NULL); /* a scalar, as h5py writes a number */
  CU_ASSERT_EQUAL(bcg_motion_load(&h, model, p, 0, 0, err, sizeof err), 0);
  CU_ASSERT_EQUAL(h.fps, 30);
  bcg_motion_free(&h);
  const double bad[] = {1e300, INFINITY, 0.5, 20000};
  for (int i = 0; i < 4; i++) {
    write_h5_motion(p, &mo, 0, 1, bad[i], 0, NULL);
    CU_ASSERT_NOT_EQUAL(bcg_motion_load(&h, model, p, 0, 0, err, sizeof err), 0);
    snprintf(want, sizeof want, "%s: attribute 'fps' of dataset 'qpos' is %g, out of range [1, 10000]", p, bad[i]);
    CU_ASSERT_EQUAL(strncmp(err, want, strlen(want)), 0);
    /* the task's fps key replaces the file's */
    CU_ASSERT_EQUAL(bcg_motion_load(&h, model, p, 60, 0, err, sizeof err), 0);
    bcg_motion_free(&h);
  }
  for (int kind = 1; kind <= 2; kind++) {
    write_h5_motion(p, &mo, 1, 1, 30, kind, "xyzw");
    int rc = bcg_motion_load(&h, model, p, 0, 0, err, sizeof err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    double worst = 0;
    for (int i = 0; i < mo.nframes * mo.nq; i++) worst = fmax(worst, fabs(h.qpos[i] - mo.qpos[i]));
    CU_ASSERT(worst < 1e-12);
    bcg_motion_free(&h);
    write_h5_motion(p, &mo, 0, 1, 30, kind, "wxyz");
    CU_ASSERT_EQUAL(bcg_motion_load(&h, model, p, 0, 0, err, sizeof err), 0);
    worst = 0;
    for (int i = 0; i < mo.nframes * mo.nq; i++) worst = fmax(worst, fabs(h.qpos[i] - mo.qpos[i]));
    CU_ASSERT(worst < 1e-12);
    bcg_motion_free(&h);
    write_h5_motion(p, &mo, 0, 1, 30, kind, "zyxw");
    CU_ASSERT_NOT_EQUAL(bcg_motion_load(&h, model, p, 0, 0, err, sizeof err), 0);
    snprintf(want, sizeof want, "%s: attribute quat 'zyxw' is not wxyz or xyzw", p);
    CU_ASSERT_STRING_EQUAL(err, want);
  }
  /* a CSV's fps out of range names the file and line */
  const char *pc = bcg_test_tmp_path("fps.csv");
  write_csv(pc, model, mo.qpos, 3, 0, 0, 0);
  static char body[1 << 16];
  FILE *f = fopen(pc, "r");
  size_t nb = fread(body, 1, sizeof body - 1, f);
  fclose(f);
  body[nb] = 0;
  f = fopen(pc, "w");
  fprintf(f, "# fps=1e300\n%s", strchr(body, '\n') + 1); /* the header line replaced */
  fclose(f);
  CU_ASSERT_NOT_EQUAL(bcg_motion_load(&h, model, pc, 0, 0, err, sizeof err), 0);
  snprintf(want, sizeof want, "%s:1: fps 1e300 is out of range [1, 10000]", pc);
  CU_ASSERT_EQUAL(strncmp(err, want, strlen(want)), 0);
  if (strncmp(err, want, strlen(want))) printf("\n  got: %s\n", err);
  unlink(p), unlink(pc);
  bcg_motion_free(&mo);
  bcg_model_free(model);
}

/* ---- interpolation ------------------------------------------------------------------ */

static void test_interpolation(void) {
  bcg_model *model = load_model(HUMANOID);
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  const bcg_mdata *m = &model->m;
  bcg_motion mo;
  char err[2048];
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&mo, model, motion_file("dance.csv"), 0, 0, err, sizeof err), 0);
  double q[BCG_MAX_Q], u[BCG_MAX_DOF], qa[BCG_MAX_Q], qb[BCG_MAX_Q];
  /* at frames: the frames */
  double w = 0;
  for (int i = 0; i < mo.nframes; i += 37) {
    bcg_motion_qpos(&mo, m, i / mo.fps, 0, q);
    for (int c = 0; c < m->nq; c++) w = fmax(w, fabs(q[c] - mo.qpos[(size_t)i * m->nq + c]));
  }
  CU_ASSERT(w < 1e-9);
  /* joint velocities are central differences of the interpolated motion
   * over half a frame each side */
  double t = 3.3 + 0.1 / mo.fps, h = 1e-6, worst = 0;
  bcg_motion_state(&mo, m, t, 0, q, u);
  double h2 = 0.5 / mo.fps;
  bcg_motion_qpos(&mo, m, t - h2, 0, qa);
  bcg_motion_qpos(&mo, m, t + h2, 0, qb);
  for (int c = 7; c < m->nq; c++) worst = fmax(worst, fabs(u[c - 1] - (qb[c] - qa[c]) / (2 * h2)));
  CU_ASSERT(worst < 1e-9);
  /* root angular velocity in the body frame (MuJoCo's convention): at the
   * middle of a segment the half-frame window lies inside it, where slerp
   * turns at a constant body rate: q(t+h) = q(t-h) * exp(2h w) */
  double tm = (100 + 0.5) / mo.fps, dq[4], phi[3], wf[3];
  bcg_motion_state(&mo, m, tm, 0, q, u);
  bcg_motion_qpos(&mo, m, tm - h, 0, qa);
  bcg_motion_qpos(&mo, m, tm + h, 0, qb);
  mo_quat_conj_mul(dq, qa + 3, qb + 3);
  mo_quat_log(phi, dq);
  for (int i = 0; i < 3; i++) wf[i] = phi[i] / (2 * h);
  double ew = 0;
  for (int i = 0; i < 3; i++) ew = fmax(ew, fabs(wf[i] - u[3 + i]));
  bcg_test_report("reference root angular velocity vs body-frame FD (abs)", ew);
  CU_ASSERT(ew < 1e-6);
  /* and it is not the world-frame rate (the dance turns while tilted) */
  double R[9], ww[3];
  mo_q2mat(R, q + 3);
  for (int i = 0; i < 3; i++) ww[i] = R[3 * i] * u[3] + R[3 * i + 1] * u[4] + R[3 * i + 2] * u[5];
  CU_ASSERT(fabs(ww[0] - u[3]) + fabs(ww[1] - u[4]) + fabs(ww[2] - u[5]) > 1e-3);
  /* loop: the root keeps going, the joints repeat */
  double D = bcg_motion_duration(&mo);
  bcg_motion_qpos(&mo, m, 0.4, 1, qa);
  bcg_motion_qpos(&mo, m, D + 0.4, 1, qb);
  double jd = 0;
  for (int c = 7; c < m->nq; c++) jd = fmax(jd, fabs(qa[c] - qb[c]));
  CU_ASSERT(jd < 1e-9);
  bcg_motion_free(&mo);
  bcg_model_free(model);
}

/* ---- replay: zero tracking error, maximal reward --------------------------------------------- */

static void test_replay(void) {
  inst I;
  char lines[1024];
  /* w_self = 0: the fight clip's right arm passes through the waist in 13
   * frames, where the self-collision penalty lowers the reward below 1 */
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nrsi = false\nloop = true\nepisode_seconds = 100\n"
           "w_self = 0\n", motion_file("fight.csv"));
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, lines, 2), 0);
  bcg_model *model = load_model(HUMANOID);
  bcg_motion mo;
  char err[2048];
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&mo, model, motion_file("fight.csv"), 0, 0, err, sizeof err), 0);
  bcg_env *env = I.env;
  int nx = env->nx, nu = env->nu, envs[2] = {0, 1};
  bcg_task_clock clk[2];
  bcg_real x[2 * 64], a[2 * 32] = {0}, rew[2];
  int done[2];
  CU_ASSERT_EQUAL(I.ops->reset(I.task, envs, 2, 0, x, clk), 0);
  CU_ASSERT(clk[0].t == 0 && clk[0].flags == 0 && clk[0].phase == 0 && clk[1].phase == 0); /* rsi = false */
  double worst = 0, dt = env->control_dt;
  int bad = 0;
  for (int t = 1; t < 600; t += 7) { /* 600 steps: past the clip's end (loop) */
    for (int e = 0; e < 2; e++) {
      bcg_motion_state(&mo, &model->m, t * dt, 1, x + e * nx, x + e * nx + env->nq);
      clk[e].t = t;
    }
    I.ops->reward(I.task, x, a, a, clk, rew, done);
    for (int e = 0; e < 2; e++) {
      worst = fmax(worst, fabs(rew[e] - 1.0)); /* the weights sum to 1 */
      bad += done[e] != 0;
    }
  }
  bcg_test_report("replayed reference: |reward - max|", worst);
  CU_ASSERT(worst < 1e-9);
  CU_ASSERT_EQUAL(bad, 0);
  (void)nu;
  bcg_motion_free(&mo);
  bcg_model_free(model);
  inst_free(&I);
}

/* observe_envs: the rows of the listed environments bit for bit what observe
 * writes there (random perturbed states, clocks and previous actions), the
 * other rows untouched; both built-in tasks (imitation with future frames
 * and key bodies, locomotion) */
static void test_observe_envs(void) {
  enum { N = 12 };
  char lines[1024];
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nrsi = true\nw_self = 0\nepisode_seconds = 100\n",
           motion_file("walk.csv"));
  const char *cfgs[2] = {lines, "plugin = locomotion\n"};
  for (int c = 0; c < 2; c++) {
    inst I;
    CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, cfgs[c], N), 0);
    CU_ASSERT_FATAL(I.ops->size >= offsetof(bcg_task_ops, observe_envs) + sizeof I.ops->observe_envs);
    CU_ASSERT_PTR_NOT_NULL_FATAL(I.ops->observe_envs);
    bcg_env *env = I.env;
    int nx = env->nx, nv = env->nv, nu = env->nu, od = I.ops->obs_dim(I.task), envs[N];
    for (int e = 0; e < N; e++) envs[e] = e;
    bcg_real *x = calloc((size_t)N * nx, sizeof(bcg_real)), *pa = calloc((size_t)N * nu, sizeof(bcg_real));
    bcg_real *full = malloc(sizeof(bcg_real) * N * od), *part = malloc(sizeof(bcg_real) * N * od);
    bcg_task_clock clk[N];
    I.ops->reset(I.task, envs, N, 7, x, clk);
    for (int e = 0; e < N; e++) {
      bcg_real dq[BCG_MAX_DOF], du[BCG_MAX_DOF], y[BCG_MAX_Q + BCG_MAX_DOF];
      for (int d = 0; d < nv; d++) dq[d] = 0.1 * nrand(), du[d] = 0.5 * nrand();
      bcg_env_perturb(env, x + e * nx, dq, du, y);
      memcpy(x + e * nx, y, sizeof(bcg_real) * nx);
      clk[e].t = 2 * e + 1;
      for (int i = 0; i < nu; i++) pa[e * nu + i] = 0.3 * nrand();
    }
    CU_ASSERT_EQUAL(I.ops->observe(I.task, x, pa, clk, full), 0);
    for (size_t i = 0; i < (size_t)N * od; i++) part[i] = (bcg_real)-12345.0;
    static const int sub[5] = {9, 0, 4, 11, 5};
    CU_ASSERT_EQUAL(I.ops->observe_envs(I.task, sub, 5, x, pa, clk, part), 0);
    int rows_equal = 1, others_kept = 1;
    for (int e = 0; e < N; e++) {
      int listed = 0;
      for (int i = 0; i < 5; i++) listed |= sub[i] == e;
      for (int j = 0; j < od; j++) {
        bcg_real v = part[(size_t)e * od + j];
        if (listed && memcmp(&v, &full[(size_t)e * od + j], sizeof v)) rows_equal = 0;
        if (!listed && v != (bcg_real)-12345.0) others_kept = 0;
      }
    }
    if (!rows_equal || !others_kept) printf("\n  %s: listed rows equal %d, others kept %d", c ? "locomotion" : "imitation",
                                            rows_equal, others_kept);
    CU_ASSERT(rows_equal);
    CU_ASSERT(others_kept);
    free(x);
    free(pa);
    free(full);
    free(part);
    inst_free(&I);
  }
}

/* reward_observe: one pass bit for bit what reward, tracking_error and
 * observe (with the action taken as the previous action) write, with and
 * without the error array; with ADD (whose reward part runs over all
 * environments) and with the self-collision penalty. Two instances made
 * alike take the two paths, since ADD's reward pushes to its buffer. */
static void test_reward_observe(void) {
  enum { N = 12 };
  char lines[2][1024];
  snprintf(lines[0], sizeof lines[0], "plugin = imitation\nmotion = %s\nrsi = true\nepisode_seconds = 100\n",
           motion_file("walk.csv"));
  snprintf(lines[1], sizeof lines[1], "plugin = imitation\nmotion = %s\nrsi = true\nadd = true\nadd_batch = 8\n",
           motion_file("walk.csv"));
  for (int c = 0; c < 2; c++) {
    inst I, J;
    CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, lines[c], N), 0);
    CU_ASSERT_EQUAL_FATAL(inst_make(&J, HUMANOID, lines[c], N), 0);
    CU_ASSERT_FATAL(BCG_OPS_HAS(J.ops, bcg_task_ops, reward_observe));
    bcg_env *env = I.env;
    int nx = env->nx, nv = env->nv, nu = env->nu, od = I.ops->obs_dim(I.task), envs[N];
    for (int e = 0; e < N; e++) envs[e] = e;
    bcg_real *x = calloc((size_t)N * nx, sizeof(bcg_real)), *a = calloc((size_t)N * nu, sizeof(bcg_real));
    bcg_real *pa = calloc((size_t)N * nu, sizeof(bcg_real));
    bcg_real *o1 = malloc(sizeof(bcg_real) * N * od), *o2 = malloc(sizeof(bcg_real) * N * od);
    bcg_real r1[N], r2[N], e1[N], e2[N];
    int d1[N], d2[N];
    bcg_task_clock clk[N], clk2[N];
    I.ops->reset(I.task, envs, N, 7, x, clk);
    J.ops->reset(J.task, envs, N, 7, x, clk2);
    int same = 1;
    for (int round = 0; round < 3; round++) {
      for (int e = 0; e < N; e++) {
        bcg_real dq[BCG_MAX_DOF], du[BCG_MAX_DOF], y[BCG_MAX_Q + BCG_MAX_DOF];
        for (int d = 0; d < nv; d++) dq[d] = 0.1 * nrand(), du[d] = 0.5 * nrand();
        bcg_env_perturb(env, x + e * nx, dq, du, y);
        memcpy(x + e * nx, y, sizeof(bcg_real) * nx);
        clk[e].t = 2 * e + 1 + round;
        for (int i = 0; i < nu; i++) pa[e * nu + i] = 0.3 * nrand(), a[e * nu + i] = 0.3 * nrand();
      }
      memcpy(clk2, clk, sizeof clk);
      CU_ASSERT_EQUAL(I.ops->reward(I.task, x, a, pa, clk, r1, d1), 0);
      CU_ASSERT_EQUAL(I.ops->tracking_error(I.task, x, clk, e1), 0);
      CU_ASSERT_EQUAL(I.ops->observe(I.task, x, a, clk, o1), 0);
      CU_ASSERT_EQUAL(J.ops->reward_observe(J.task, x, a, pa, clk2, r2, d2, round == 1 ? NULL : e2, o2), 0);
      if (memcmp(r1, r2, sizeof r1) || memcmp(d1, d2, sizeof d1) || memcmp(o1, o2, sizeof(bcg_real) * N * od) ||
          (round != 1 && memcmp(e1, e2, sizeof e1)))
        same = 0;
    }
    if (!same) printf("\n  %s: reward_observe differs from the three calls", c ? "ADD" : "imitation");
    CU_ASSERT(same);
    free(x);
    free(a);
    free(pa);
    free(o1);
    free(o2);
    inst_free(&I);
    inst_free(&J);
  }
}

/* reference_qpos (bcg render's ghost): at clocks whose time phase + t *
 * control_dt falls on a frame of the clip, that frame; past the end of a
 * clip that does not loop, its last frame; and the pose the reward compares
 * with (replayed with the clip's velocity it scores the maximum). Locomotion
 * has no reference: NULL. */
static void test_reference_qpos(void) {
  inst I;
  char lines[1024];
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nrsi = true\nw_self = 0\nepisode_seconds = 100\n",
           motion_file("walk.csv"));
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, lines, 3), 0);
  CU_ASSERT_FATAL(I.ops->size >= offsetof(bcg_task_ops, reference_qpos) + sizeof I.ops->reference_qpos);
  CU_ASSERT_PTR_NOT_NULL_FATAL(I.ops->reference_qpos);
  bcg_model *model = load_model(HUMANOID);
  bcg_motion mo;
  char err[2048];
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&mo, model, motion_file("walk.csv"), 0, 0, err, sizeof err), 0);
  bcg_env *env = I.env;
  const int nq = env->nq, nx = env->nx, nf = mo.nframes;
  const double dt = env->control_dt;
  static const int frames[3] = {0, 17, 40};
  bcg_task_clock clk[3];
  bcg_real q[3 * BCG_MAX_Q], x[3 * (BCG_MAX_Q + BCG_MAX_DOF)], a[3 * BCG_MAX_ACT] = {0}, rew[3];
  int done[3];
  double worst = 0;
  for (int k = 0; k < 3; k++) {
    CU_ASSERT_FATAL(frames[k] < nf);
    clk[k].t = 3 * k + 1, clk[k].flags = 0;
    clk[k].phase = frames[k] / mo.fps - clk[k].t * dt;
  }
  CU_ASSERT_EQUAL_FATAL(I.ops->reference_qpos(I.task, clk, 3, q), 0);
  for (int k = 0; k < 3; k++)
    for (int c = 0; c < nq; c++) worst = fmax(worst, fabs(q[k * nq + c] - mo.qpos[(size_t)frames[k] * nq + c]));
  /* past the end of the clip (loop = false): the last frame */
  clk[0].t = 1000, clk[0].phase = 0;
  CU_ASSERT_EQUAL(I.ops->reference_qpos(I.task, clk, 1, q), 0);
  for (int c = 0; c < nq; c++) worst = fmax(worst, fabs(q[c] - mo.qpos[(size_t)(nf - 1) * nq + c]));
  bcg_test_report("reference_qpos vs the clip's frames (abs)", worst);
  CU_ASSERT(worst < 1e-9);
  /* between frames, as the reward sees it: the returned pose with the clip's
   * velocity there scores the maximum (the weights sum to 1) */
  for (int k = 0; k < 3; k++) clk[k].t = 5 + 11 * k, clk[k].phase = 0.013 * k;
  CU_ASSERT_EQUAL(I.ops->reference_qpos(I.task, clk, 3, q), 0);
  for (int k = 0; k < 3; k++) {
    double qm[BCG_MAX_Q], um[BCG_MAX_DOF];
    bcg_motion_state(&mo, &model->m, clk[k].phase + clk[k].t * dt, 0, qm, um);
    for (int c = 0; c < nq; c++) x[k * nx + c] = q[k * nq + c];
    for (int d = 0; d < env->nv; d++) x[k * nx + nq + d] = um[d];
  }
  CU_ASSERT_EQUAL(I.ops->reward(I.task, x, a, a, clk, rew, done), 0);
  for (int k = 0; k < 3; k++) CU_ASSERT(fabs(rew[k] - 1.0) < 1e-9);
  bcg_motion_free(&mo);
  bcg_model_free(model);
  inst_free(&I);
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, "plugin = locomotion\n", 1), 0);
  CU_ASSERT_PTR_NULL(I.ops->reference_qpos);
  inst_free(&I);
}

/* ---- VJPs vs central FD ---------------------------------------------------------------------- */

static double fd_task(inst *I, int which, const char *label) {
  bcg_env *env = I->env;
  int n = env->nenv, nx = env->nx, nv = env->nv, nq = env->nq, nu = env->nu, od = I->ops->obs_dim(I->task);
  int envs[8];
  bcg_task_clock clk[8];
  bcg_real *x = calloc((size_t)n * nx, sizeof(bcg_real)), *a = calloc((size_t)n * nu, sizeof(bcg_real));
  bcg_real *pa = calloc((size_t)n * nu, sizeof(bcg_real)), *pab = calloc((size_t)n * nu, sizeof(bcg_real));
  bcg_real *ob = calloc((size_t)n * od, sizeof(bcg_real)), *obar = calloc((size_t)n * od, sizeof(bcg_real));
  bcg_real *xb = calloc((size_t)n * 2 * nv, sizeof(bcg_real)), *ab = calloc((size_t)n * nu, sizeof(bcg_real));
  bcg_real *xp = calloc((size_t)n * nx, sizeof(bcg_real)), rew[8], rb[8];
  int done[8];
  for (int e = 0; e < n; e++) envs[e] = e;
  I->ops->reset(I->task, envs, n, 11, x, clk);
  /* real states near the reference (random phases), perturbed */
  for (int e = 0; e < n; e++) {
    bcg_real dq[BCG_MAX_DOF], du[BCG_MAX_DOF], y[BCG_MAX_Q + BCG_MAX_DOF];
    for (int d = 0; d < nv; d++) dq[d] = 0.05 * nrand(), du[d] = 0.3 * nrand();
    bcg_env_perturb(env, x + e * nx, dq, du, y);
    memcpy(x + e * nx, y, sizeof(bcg_real) * nx);
    for (int i = 0; i < nu; i++) a[e * nu + i] = 0.5 * nrand(), pa[e * nu + i] = 0.5 * nrand();
    clk[e].t = 1 + 5 * e;
    rb[e] = nrand();
  }
  for (int i = 0; i < n * od; i++) obar[i] = nrand();
  /* observe(x, prev_a = a); reward(x, a, prev_a = pa): the adjoints of both
   * action arguments are checked (observe has no a, so pab stays 0) */
  /* the loss of environment e only: a perturbation of e's state or actions
   * changes nothing else, and the other environments' terms would only add
   * rounding noise to the difference quotient */
#define EVAL(xx, aa, pp)                                                                          \
  ({                                                                                              \
    double s_ = 0;                                                                                \
    if (which == 0) {                                                                             \
      I->ops->observe(I->task, xx, aa, clk, ob);                                                  \
      for (int i_ = e * od; i_ < (e + 1) * od; i_++) s_ += obar[i_] * ob[i_];                     \
    } else {                                                                                      \
      I->ops->reward(I->task, xx, aa, pp, clk, rew, done);                                        \
      s_ = rb[e] * rew[e];                                                                        \
    }                                                                                             \
    s_;                                                                                           \
  })
  if (which == 0) I->ops->observe_vjp(I->task, x, a, clk, obar, xb, ab);
  else I->ops->reward_vjp(I->task, x, a, pa, clk, rb, xb, ab, pab);
  /* Two step sizes, and per environment and argument the better of the two
   * agreements: a difference quotient is rounding-bound where the gradient
   * is small beside the loss (the ADD-only reward: relerr 5.1e-6, 5.8e-7,
   * 5.5e-8 at eps 1e-7, 1e-6, 1e-5, proportional to 1/eps) and wrong where
   * the loss has a kink within eps (the low-root penalty on a drawn state:
   * 5.8e-7, 6.1e-8, 1.1e-3). A wrong adjoint disagrees at both. */
  static const double epss[2] = {1e-6, 1e-5};
  double worst = 0;
  for (int e = 0; e < n; e++) {
    double ex = INFINITY, ea = INFINITY, ep = INFINITY;
    double g[2 * BCG_MAX_DOF], gb[2 * BCG_MAX_DOF], ga[BCG_MAX_ACT], gab[BCG_MAX_ACT], gp[BCG_MAX_ACT],
        gpb[BCG_MAX_ACT];
    for (int k = 0; k < 2; k++) {
      const double eps = epss[k];
      for (int d = 0; d < 2 * nv; d++) {
        bcg_real dq[BCG_MAX_DOF] = {0}, du[BCG_MAX_DOF] = {0};
        memcpy(xp, x, sizeof(bcg_real) * n * nx);
        if (d < nv) dq[d] = eps; else du[d - nv] = eps;
        bcg_env_perturb(env, x + e * nx, dq, du, xp + e * nx);
        double lp = EVAL(xp, a, pa);
        if (d < nv) dq[d] = -eps; else du[d - nv] = -eps;
        bcg_env_perturb(env, x + e * nx, dq, du, xp + e * nx);
        double lm = EVAL(xp, a, pa);
        g[d] = (lp - lm) / (2 * eps);
        gb[d] = xb[e * 2 * nv + d];
      }
      for (int i = 0; i < nu; i++) {
        bcg_real s = a[e * nu + i];
        a[e * nu + i] = s + eps;
        double lp = EVAL(x, a, pa);
        a[e * nu + i] = s - eps;
        double lm = EVAL(x, a, pa);
        a[e * nu + i] = s;
        ga[i] = (lp - lm) / (2 * eps);
        gab[i] = ab[e * nu + i];
        s = pa[e * nu + i];
        pa[e * nu + i] = s + eps;
        lp = EVAL(x, a, pa);
        pa[e * nu + i] = s - eps;
        lm = EVAL(x, a, pa);
        pa[e * nu + i] = s;
        gp[i] = (lp - lm) / (2 * eps);
        gpb[i] = pab[e * nu + i];
      }
      ex = fmin(ex, bcg_vec_relerr(gb, g, 2 * nv));
      ea = fmin(ea, bcg_vec_relerr(gab, ga, nu));
      /* an all-zero prev_a gradient (no action-rate term) must be exactly zero */
      double gpn = 0, epk = 0;
      for (int i = 0; i < nu; i++) gpn = fmax(gpn, fabs(gp[i]));
      if (gpn > 0) epk = bcg_vec_relerr(gpb, gp, nu);
      else
        for (int i = 0; i < nu; i++) epk = fmax(epk, fabs(gpb[i]));
      ep = fmin(ep, epk);
    }
    if (ex > 1e-6 || ea > 1e-6 || ep > 1e-6) {
      fprintf(stderr, "%s env %d: x relerr %.3g a relerr %.3g prev_a relerr %.3g\n", label, e, ex, ea, ep);
      for (int d = 0; d < 2 * nv; d++) /* (the FD at the larger step) */
        if (fabs(g[d] - gb[d]) > 1e-7 * (1 + fabs(g[d]))) fprintf(stderr, "  %2d %s %.9g %.9g\n", d % nv, d < nv ? "q" : "u", gb[d], g[d]);
    }
    worst = fmax(worst, fmax(ex, fmax(ea, ep)));
  }
#undef EVAL
  (void)nq;
  free(x), free(a), free(pa), free(pab), free(ob), free(obar), free(xb), free(ab), free(xp);
  bcg_test_report(label, worst);
  return worst;
}

static void test_imitation_vjp(void) {
  inst I;
  char lines[1024];
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\n", motion_file("run.csv"));
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, lines, 3), 0);
  CU_ASSERT(fd_task(&I, 0, "imitation humanoid observe VJP vs FD (rel)") < 1e-6);
  CU_ASSERT(fd_task(&I, 1, "imitation humanoid reward VJP vs FD (rel)") < 1e-6);
  inst_free(&I);
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nloop = true\nkey_bodies = right_hand,left_foot\n"
           "future = 1,4\nw_action = 0.1\nw_action_rate = 0.3\n", motion_file("dance.csv"));
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, lines, 3), 0);
  CU_ASSERT(fd_task(&I, 0, "imitation humanoid observe VJP vs FD (rel)") < 1e-6);
  CU_ASSERT(fd_task(&I, 1, "imitation humanoid reward VJP vs FD, action rate (rel)") < 1e-6);
  inst_free(&I);
}

/* the self-collision penalty of the imitation task: a clip of the standing
 * pose with both hips adducted by 0.3 rad crosses the legs (MuJoCo reports
 * thigh-thigh, thigh-shin and shin-shin contacts there); the reset states
 * of that clip are perturbed by fd_task, so the FD check runs on overlapping
 * capsules, and the penalty must lower the reward */
static double imit_pen_rewards(const char *clip, double w_self, double margin, double w_limit, const char *fd_label) {
  inst I;
  char lines[1024];
  snprintf(lines, sizeof lines,
           "plugin = imitation\nmotion = %s\nw_self = %g\nself_margin = %g\nw_limit = %g\nmax_error = 10\nterm_height = 0\n",
           clip, w_self, margin, w_limit);
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, lines, 3), 0);
  if (fd_label) CU_ASSERT(fd_task(&I, 1, fd_label) < 1e-6);
  int nx = I.env->nx, nu = I.env->nu, envs[3] = {0, 1, 2}, done[3];
  bcg_real *x = calloc(3 * nx, sizeof *x), *a = calloc(3 * nu, sizeof *a), rew[3];
  bcg_task_clock clk[3];
  CU_ASSERT_EQUAL(I.ops->reset(I.task, envs, 3, 5, x, clk), 0);
  I.ops->reward(I.task, x, a, a, clk, rew, done);
  free(x), free(a);
  inst_free(&I);
  return rew[0] + rew[1] + rew[2];
}

static double imit_self_rewards(const char *clip, double w_self, const char *fd_label) {
  return imit_pen_rewards(clip, w_self, 0, 0, fd_label);
}

static void test_imitation_self(void) {
  bcg_model *model = load_model(HUMANOID);
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  char err[1024];
  bcg_motion mo;
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&mo, model, motion_file("stand.csv"), 0, 0, err, sizeof err), 0);
  int n = 31, nq = mo.nq, hips = 0;
  double *Q = malloc(sizeof(double) * n * nq);
  for (int i = 0; i < n; i++) memcpy(Q + (size_t)i * nq, mo.qpos, sizeof(double) * nq);
  for (int j = 0; j < model->m.njnt; j++)
    if (!strcmp(model->jnt_name[j], "right_hip_x") || !strcmp(model->jnt_name[j], "left_hip_x")) {
      for (int i = 0; i < n; i++) Q[(size_t)i * nq + model->m.jnt_qposadr[j]] = 0.3;
      hips++;
    }
  CU_ASSERT_EQUAL(hips, 2);
  const char *clip = bcg_test_tmp_path("crossed.csv");
  write_csv(clip, model, Q, n, 0, 1, 0);
  double off = imit_self_rewards(clip, 0, NULL);
  double on = imit_self_rewards(clip, 1000, "imitation humanoid reward VJP vs FD, self-collision penalty on (rel)");
  if (!(on < off - 1e-3)) fprintf(stderr, "self-collision penalty: reward sum %.6g (on) vs %.6g (off)\n", on, off);
  CU_ASSERT(on < off - 1e-3);
  /* the same clip's hips are 0.21 rad beyond their range: the joint-limit penalty */
  double lon = imit_pen_rewards(clip, 0, 0, 100, "imitation humanoid reward VJP vs FD, joint-limit penalty on (rel)");
  if (!(lon < off - 1e-3)) fprintf(stderr, "joint-limit penalty: reward sum %.6g (on) vs %.6g (off)\n", lon, off);
  CU_ASSERT(lon < off - 1e-3);
  /* the standing clip itself: no overlap, the penalty changes nothing */
  CU_ASSERT_DOUBLE_EQUAL(imit_self_rewards(motion_file("stand.csv"), 0, NULL),
                         imit_self_rewards(motion_file("stand.csv"), 1000, NULL), 0);
  /* a margin never penalises the model's default pose: with 10 cm the
   * standing legs (thighs about 6 cm apart, as in qpos0) are not penalised,
   * and the same legs brought closer (hips 0.04 rad inwards, no overlap) are,
   * with the exact gradient */
  CU_ASSERT_DOUBLE_EQUAL(imit_pen_rewards(motion_file("stand.csv"), 1000, 0.1, 0, NULL),
                         imit_self_rewards(motion_file("stand.csv"), 1000, NULL), 0);
  for (int j = 0; j < model->m.njnt; j++)
    if (!strcmp(model->jnt_name[j], "right_hip_x") || !strcmp(model->jnt_name[j], "left_hip_x"))
      for (int i = 0; i < n; i++) Q[(size_t)i * nq + model->m.jnt_qposadr[j]] = 0.04;
  const char *closer = bcg_test_tmp_path("closer.csv");
  write_csv(closer, model, Q, n, 0, 1, 0);
  double sm = imit_pen_rewards(closer, 1000, 0.1, 0, "imitation humanoid reward VJP vs FD, self-collision margin 0.1 m (rel)");
  double s0 = imit_self_rewards(closer, 1000, NULL), soff = imit_self_rewards(closer, 0, NULL);
  if (!(sm < s0 - 1e-3)) fprintf(stderr, "self-collision margin: reward sum %.6g (margin) vs %.6g (none)\n", sm, s0);
  CU_ASSERT(sm < s0 - 1e-3);
  CU_ASSERT_DOUBLE_EQUAL(s0, soff, 0); /* no overlap: no penalty without the margin */
  unlink(closer);
  unlink(clip);
  free(Q);
  bcg_motion_free(&mo);
  bcg_model_free(model);
}

/* The imitation task memoises the robot's kinematics per state and keeps the
 * last reference poses per environment (a ring keyed by time): both must give
 * exactly what a recomputation gives. Instance A runs a rollout in the
 * learner's order (reward, then the next observation, of each state), where
 * the reward's frame and two future frames come from the ring; instance B
 * runs the same calls with other queries in between (other states, times 7
 * steps apart, evaluation's tracking error) that overwrite every memo, so B
 * always recomputes. Observations, rewards, flags and tracking errors agree
 * bit for bit. The dance clip turns its root (humanoid run.csv keeps the
 * root's orientation for seconds, where a stale root cdof would not show). */
static void test_imitation_memo(void) {
  inst A, B;
  char lines[1024];
  snprintf(lines, sizeof lines,
           "plugin = imitation\nmotion = %s\nloop = true\nw_self = 100\nself_margin = 0.05\nw_limit = 10\n"
           "future = 1,2,3\n", motion_file("dance.csv"));
  int ra = inst_make(&A, HUMANOID, lines, 4), rb = inst_make(&B, HUMANOID, lines, 4);
  if (ra || rb) fprintf(stderr, "%s%s\n", A.err, B.err);
  CU_ASSERT_FATAL(!ra && !rb);
  int n = 4, nx = A.env->nx, nv = A.env->nv, nu = A.env->nu, od = A.ops->obs_dim(A.task), envs[4] = {0, 1, 2, 3};
  bcg_task_clock ca[4], cb[4], co[4];
  bcg_real *x = calloc((size_t)n * nx, sizeof *x), *xo = calloc((size_t)n * nx, sizeof *x);
  bcg_real *a = calloc((size_t)n * nu, sizeof *a), *oa = calloc((size_t)n * od, sizeof *a);
  bcg_real *ob = calloc((size_t)n * od, sizeof *a), *junk = calloc((size_t)n * od, sizeof *a);
  bcg_real rwa[4], rwb[4], ta[4], tb[4], tj[4];
  int da[4], db[4], dj[4], same = 1, steps = 0;
  A.ops->reset(A.task, envs, n, 3, x, ca);
  B.ops->reset(B.task, envs, n, 3, x, cb);
  CU_ASSERT(!memcmp(ca, cb, sizeof ca));
  for (int k = 0; k < 12; k++) {
    /* the next state: the reference's neighbourhood, perturbed */
    for (int e = 0; e < n; e++) {
      bcg_real dq[BCG_MAX_DOF], du[BCG_MAX_DOF], y[BCG_MAX_Q + BCG_MAX_DOF];
      for (int d = 0; d < nv; d++) dq[d] = 0.02 * nrand(), du[d] = 0.2 * nrand();
      bcg_env_perturb(A.env, x + e * nx, dq, du, y);
      memcpy(x + e * nx, y, sizeof(bcg_real) * nx);
      for (int d = 0; d < nv; d++) dq[d] = 0.3 * nrand(), du[d] = nrand();
      bcg_env_perturb(A.env, x + e * nx, dq, du, xo + e * nx);
      for (int i = 0; i < nu; i++) a[e * nu + i] = 0.3 * nrand();
      ca[e].t = cb[e].t = k + 1;
      co[e] = ca[e];
      co[e].t = k + 8;
    }
    A.ops->reward(A.task, x, a, NULL, ca, rwa, da);
    A.ops->observe(A.task, x, a, ca, oa);
    A.ops->tracking_error(A.task, x, ca, ta);
    B.ops->observe(B.task, xo, a, co, junk); /* other state, 4 other times: every memo overwritten */
    B.ops->tracking_error(B.task, xo, co, tj);
    B.ops->reward(B.task, x, a, NULL, cb, rwb, db);
    B.ops->reward(B.task, xo, a, NULL, co, tj, dj);
    B.ops->observe(B.task, xo, a, co, junk);
    B.ops->observe(B.task, x, a, cb, ob);
    B.ops->observe(B.task, xo, a, co, junk);
    B.ops->tracking_error(B.task, x, cb, tb);
    same &= !memcmp(rwa, rwb, sizeof rwa) && !memcmp(da, db, sizeof da) && !memcmp(oa, ob, sizeof(bcg_real) * n * od) &&
            !memcmp(ta, tb, sizeof ta);
    steps++;
  }
  if (!same) fprintf(stderr, "imitation memo: A and B differ\n");
  CU_ASSERT(same);
  CU_ASSERT_EQUAL(steps, 12);
  free(x), free(xo), free(a), free(oa), free(ob), free(junk);
  inst_free(&A);
  inst_free(&B);
}

/* the self-collision penalty skips pairs whose midpoint bound clears the
 * margin: its value and gradient equal, exactly, every pair solved, on poses
 * that bring limbs together and on the default pose (the G1 where present:
 * 50-odd capsules) */
static void test_self_penalty_bound(void) {
  const char *models[2] = {HUMANOID, "../shared/robots/unitree_g1/scene_29dof.xml"};
  int ran = 0;
  for (int mi = 0; mi < 2; mi++) {
    char mp[1024];
    if (mi && access(repo_path(models[mi], mp, sizeof mp), R_OK)) continue;
    bcg_model *model = load_model(models[mi]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(model);
    const bcg_mdata *m = &model->m;
    tu_self *S = malloc(sizeof *S);
    bcg_kin *k = malloc(sizeof *k);
    tu_adj *P = malloc(sizeof *P), *Q = malloc(sizeof *Q);
    tu_self_init(S, model);
    CU_ASSERT_FATAL(tu_self_set_margin(S, m, 0.03) == 0);
    int hits = 0, bad = 0;
    for (int trial = 0; trial < 200; trial++) {
      bcg_real q[BCG_MAX_Q];
      memcpy(q, m->qpos0, sizeof(bcg_real) * m->nq);
      if (trial)
        for (int j = 0; j < m->njnt; j++)
          if (m->jnt_type[j] == BCG_JNT_HINGE) q[m->jnt_qposadr[j]] += (trial < 100 ? 0.3 : 1.2) * nrand();
      bcg_kinematics_pose(m, q, k);
      tu_adj_zero(P);
      tu_adj_zero(Q);
      bcg_real v = tu_self_penalty(S, k, 0.7, P);
      /* every pair solved */
      bcg_real L[TU_MAX_SEG][2][3], E[TU_MAX_SEG][2][3], w = 0;
      tu_self_ends(S, k, L, E);
      for (int i = 0; i < S->npair; i++) {
        int x = S->pair[i][0], y = S->pair[i][1];
        bcg_real s, t, nn[3];
        bcg_real gap = tu_self_pair_gap(S, (const bcg_real(*)[2][3])E, i, &s, &t, nn);
        bcg_real d = gap + S->r[x] + S->r[y], o = S->pm[i] - gap;
        if (o <= 0 || d < (bcg_real)1e-12) continue;
        w += o * o;
        bcg_real cf = -2 * o * (bcg_real)0.7 / d, wt[4] = {(1 - s) * cf, s * cf, -(1 - t) * cf, -t * cf};
        for (int e = 0; e < 4; e++) {
          int b = S->body[e < 2 ? x : y];
          bcg_real ge[3] = {wt[e] * nn[0], wt[e] * nn[1], wt[e] * nn[2]};
          for (int c = 0; c < 3; c++) Q->pb[b][c] += ge[c];
          bcg_v3_cross_add(Q->tb[b], L[e < 2 ? x : y][e & 1], ge);
        }
      }
      hits += v > 0;
      bad += v != w || memcmp(P->pb, Q->pb, sizeof P->pb) || memcmp(P->tb, Q->tb, sizeof P->tb);
    }
    if (bad) fprintf(stderr, "self penalty bound (%s): %d of 200 poses differ\n", models[mi], bad);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(hits > 20); /* the poses do bring capsules within the margin */
    free(S), free(k), free(P), free(Q);
    bcg_model_free(model);
    ran++;
  }
  CU_ASSERT(ran >= 1);
}

/* the action-rate penalty: w |a - prev_a|^2 off the replayed reference's
 * maximal reward 1, zero for a repeated action, |a|^2 with prev_a = NULL */
static void test_action_rate(void) {
  inst I;
  char lines[1024];
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nrsi = false\nw_action_rate = 0.5\n",
           motion_file("run.csv"));
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, lines, 3), 0);
  bcg_env *env = I.env;
  int nx = env->nx, nu = env->nu, envs[3] = {0, 1, 2}, done[3];
  bcg_task_clock clk[3];
  bcg_real x[3 * 64], a[3 * 32], pa[3 * 32], rew[3];
  CU_ASSERT_EQUAL(I.ops->reset(I.task, envs, 3, 0, x, clk), 0); /* rsi off: x is the reference at t = 0 */
  double want[3];
  for (int e = 0; e < 3; e++) {
    double d2 = 0;
    for (int i = 0; i < nu; i++) {
      a[e * nu + i] = 0.3 * nrand();
      pa[e * nu + i] = e == 1 ? a[e * nu + i] : 0.3 * nrand();
      d2 += (a[e * nu + i] - pa[e * nu + i]) * (a[e * nu + i] - pa[e * nu + i]);
    }
    want[e] = 1 - 0.5 * d2;
  }
  I.ops->reward(I.task, x, a, pa, clk, rew, done);
  double worst = 0;
  for (int e = 0; e < 3; e++) worst = fmax(worst, fabs(rew[e] - want[e]));
  bcg_test_report("action-rate penalty: |reward - (1 - w |a - prev_a|^2)|", worst);
  CU_ASSERT(worst < 1e-9);
  CU_ASSERT(fabs(rew[1] - 1) < 1e-9);
  CU_ASSERT(rew[0] < 1 - 1e-3);
  /* prev_a = NULL reads as zeros (the first step of an episode) */
  I.ops->reward(I.task, x, a, NULL, clk, rew, done);
  double a2 = 0;
  for (int i = 0; i < nu; i++) a2 += a[i] * a[i];
  CU_ASSERT(fabs(rew[0] - (1 - 0.5 * a2)) < 1e-9);
  (void)nx;
  inst_free(&I);
}

/* the task keeps no per-episode state: observe, reward and their VJPs under
 * a clock saved before the environment was reset again are bit-identical to
 * their values before that reset (the backward pass of a learner reads the
 * clock its forward saw) */
static void test_clock_across_resets(void) {
  inst I;
  char lines[1024];
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nw_action_rate = 0.2\n", motion_file("jump.csv"));
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, lines, 2), 0);
  bcg_env *env = I.env;
  int nx = env->nx, nu = env->nu, nv = env->nv, od = I.ops->obs_dim(I.task), envs[2] = {0, 1}, d1[2], d2[2];
  bcg_task_clock clk[2], saved[2];
  bcg_real *x = calloc((size_t)2 * nx, sizeof(bcg_real)), *y = calloc((size_t)2 * nx, sizeof(bcg_real));
  bcg_real *o1 = calloc((size_t)2 * od, sizeof(bcg_real)), *o2 = calloc((size_t)2 * od, sizeof(bcg_real));
  bcg_real *ob = calloc((size_t)2 * od, sizeof(bcg_real));
  bcg_real *xb1 = calloc((size_t)4 * nv, sizeof(bcg_real)), *xb2 = calloc((size_t)4 * nv, sizeof(bcg_real));
  bcg_real a[2 * 32], pa[2 * 32], ab1[2 * 32] = {0}, ab2[2 * 32] = {0}, pb1[2 * 32] = {0}, pb2[2 * 32] = {0};
  bcg_real r1[2], r2[2], rb[2] = {1.0, -0.5};
  I.ops->reset(I.task, envs, 2, 7, x, clk);
  for (int e = 0; e < 2; e++) clk[e].t = 12;
  for (int i = 0; i < 2 * nu; i++) a[i] = 0.2 * nrand(), pa[i] = 0.2 * nrand();
  for (int i = 0; i < 2 * od; i++) ob[i] = nrand();
  memcpy(saved, clk, sizeof clk);
  I.ops->observe(I.task, x, pa, saved, o1);
  I.ops->reward(I.task, x, a, pa, saved, r1, d1);
  I.ops->observe_vjp(I.task, x, pa, saved, ob, xb1, pb1);
  I.ops->reward_vjp(I.task, x, a, pa, saved, rb, xb1, ab1, pb1);
  I.ops->reset(I.task, envs, 2, 8, y, clk); /* new episodes, new phases */
  CU_ASSERT(clk[0].phase != saved[0].phase);
  I.ops->observe(I.task, x, pa, saved, o2);
  I.ops->reward(I.task, x, a, pa, saved, r2, d2);
  I.ops->observe_vjp(I.task, x, pa, saved, ob, xb2, pb2);
  I.ops->reward_vjp(I.task, x, a, pa, saved, rb, xb2, ab2, pb2);
  CU_ASSERT_EQUAL(memcmp(o1, o2, sizeof(bcg_real) * 2 * od), 0);
  CU_ASSERT(r1[0] == r2[0] && r1[1] == r2[1] && d1[0] == d2[0] && d1[1] == d2[1]);
  CU_ASSERT_EQUAL(memcmp(xb1, xb2, sizeof(bcg_real) * 4 * nv), 0);
  CU_ASSERT_EQUAL(memcmp(ab1, ab2, sizeof(bcg_real) * 2 * nu), 0);
  CU_ASSERT_EQUAL(memcmp(pb1, pb2, sizeof(bcg_real) * 2 * nu), 0);
  /* and the new clock gives a different reward at the same state */
  I.ops->reward(I.task, x, a, pa, clk, r2, d2);
  CU_ASSERT(r2[0] != r1[0]);
  free(x), free(y), free(o1), free(o2), free(ob), free(xb1), free(xb2);
  inst_free(&I);
}

/* humanoid locomotion with the extra task lines: the sum of the first n of
 * 3 environments' rewards of the zero action at the reset of draw `draw`,
 * done[0] into *done0; with fd_label, first the reward VJP's FD check */
static double loco_rewards(const char *extra, uint64_t draw, int n, const char *fd_label, int *done0) {
  inst I;
  char lines[512];
  snprintf(lines, sizeof lines, "plugin = locomotion\n%s", extra);
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, lines, 3), 0);
  if (fd_label) CU_ASSERT(fd_task(&I, 1, fd_label) < 1e-6);
  int nx = I.env->nx, nu = I.env->nu, envs[3] = {0, 1, 2}, done[3];
  bcg_real *x = calloc(3 * nx, sizeof *x), *a = calloc(3 * nu, sizeof *a), rew[3];
  bcg_task_clock clk[3];
  CU_ASSERT_EQUAL(I.ops->reset(I.task, envs, 3, draw, x, clk), 0);
  I.ops->reward(I.task, x, a, a, clk, rew, done);
  double sum = 0;
  for (int e = 0; e < n; e++) sum += rew[e];
  *done0 = done[0];
  free(x), free(a);
  inst_free(&I);
  return sum;
}

/* the heading and lateral penalties' values: the robot at qpos0 turned by a
 * yaw psi about world z, at rest except a root velocity vy along world y:
 * the reward with w_heading = wh, w_lateral = wl minus the reward with both 0
 * must be -(wh (1 - cos psi) + wl vy^2) */
static void loco_heading_values(void) {
  const double cases[][4] = {{M_PI / 2, 0, 1, 0}, {M_PI, 0, 0.5, 0}, {0.3, 0, 2, 0}, {0, 1.5, 0, 1}, {-0.7, 0.4, 1.5, 2}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    double psi = cases[c][0], vy = cases[c][1], wh = cases[c][2], wl = cases[c][3], r[2];
    for (int on = 0; on < 2; on++) {
      char lines[256];
      snprintf(lines, sizeof lines, "plugin = locomotion\nreset_noise = 0\nw_heading = %.17g\nw_lateral = %.17g\n",
               on ? wh : 0, on ? wl : 0);
      inst I;
      CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, lines, 1), 0);
      int nx = I.env->nx, nq = I.env->nq, nu = I.env->nu, env0 = 0, done;
      bcg_real *x = calloc(nx, sizeof *x), *a = calloc(nu, sizeof *a), rew;
      bcg_task_clock clk;
      CU_ASSERT_EQUAL(I.ops->reset(I.task, &env0, 1, 0, x, &clk), 0);
      x[3] = cos(psi / 2), x[4] = 0, x[5] = 0, x[6] = sin(psi / 2); /* the free root's quaternion (w x y z) */
      for (int d = 0; d < nx - nq; d++) x[nq + d] = 0;
      x[nq + 1] = vy; /* the free joint's linear velocity, world frame */
      I.ops->reward(I.task, x, a, a, &clk, &rew, &done);
      r[on] = rew;
      free(x), free(a);
      inst_free(&I);
    }
    double want = -(wh * (1 - cos(psi)) + wl * vy * vy);
    if (fabs(r[1] - r[0] - want) > 1e-9)
      fprintf(stderr, "heading/lateral: psi %g vy %g: reward difference %.12g, want %.12g\n", psi, vy, r[1] - r[0], want);
    CU_ASSERT(fabs(r[1] - r[0] - want) <= 1e-9);
  }
}

static void test_locomotion_vjp(void) {
  inst I;
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, "plugin = locomotion\nreset_noise = 0.2\n", 3), 0);
  CU_ASSERT_EQUAL(I.ops->obs_dim(I.task), 13 + 42 + 21);
  CU_ASSERT(fd_task(&I, 0, "locomotion humanoid observe VJP vs FD (rel)") < 1e-6);
  CU_ASSERT(fd_task(&I, 1, "locomotion humanoid reward VJP vs FD (rel)") < 1e-6);
  inst_free(&I);
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, "plugin = locomotion\nreset_noise = 0.2\nw_action_rate = 0.3\n", 3), 0);
  CU_ASSERT(fd_task(&I, 1, "locomotion humanoid reward VJP vs FD, action rate (rel)") < 1e-6);
  inst_free(&I);
  /* the low-root penalty active (the standing root, about 1.3 m, inside the
   * last low_margin above fall_height) and not: the rewards must differ */
  int done0;
  double rw[2] = {loco_rewards("reset_noise = 0.2\nfall_height = 1.0\nlow_margin = 0.0\n", 0, 1, NULL, &done0), 0};
  CU_ASSERT_EQUAL(done0, 0);
  rw[1] = loco_rewards("reset_noise = 0.2\nfall_height = 1.0\nlow_margin = 0.5\n", 0, 1,
                       "locomotion humanoid reward VJP vs FD, low-root penalty on (rel)", &done0);
  CU_ASSERT_EQUAL(done0, 0);
  if (!(rw[1] < rw[0] - 1e-3)) fprintf(stderr, "low-root penalty: reward %.6g (on) vs %.6g (off)\n", rw[1], rw[0]);
  CU_ASSERT(rw[1] < rw[0] - 1e-3);
  /* the self-collision penalty: joint noise large enough that some capsules
   * of the robot overlap; FD check with it on, and it must lower the reward */
  double sw[2] = {loco_rewards("reset_noise = 0.8\nfall_height = 0.1\nw_self = 0\n", 11, 3, NULL, &done0), 0};
  sw[1] = loco_rewards("reset_noise = 0.8\nfall_height = 0.1\nw_self = 1000\n", 11, 3,
                       "locomotion humanoid reward VJP vs FD, self-collision penalty on (rel)", &done0);
  if (!(sw[1] < sw[0] - 1e-3)) fprintf(stderr, "self-collision penalty: reward sum %.6g (on) vs %.6g (off)\n", sw[1], sw[0]);
  CU_ASSERT(sw[1] < sw[0] - 1e-3);
  /* the joint-limit penalty: reset noise of 0.3 rad puts joints beyond their
   * ranges (a knee's upper limit is 2 degrees from the default pose) */
  double lw[2] = {loco_rewards("reset_noise = 0.3\nfall_height = 0.1\nw_limit = 0\n", 5, 3, NULL, &done0), 0};
  lw[1] = loco_rewards("reset_noise = 0.3\nfall_height = 0.1\nw_limit = 100\n", 5, 3,
                       "locomotion humanoid reward VJP vs FD, joint-limit penalty on (rel)", &done0);
  if (!(lw[1] < lw[0] - 1e-3)) fprintf(stderr, "joint-limit penalty: reward sum %.6g (on) vs %.6g (off)\n", lw[1], lw[0]);
  CU_ASSERT(lw[1] < lw[0] - 1e-3);
  /* the heading and lateral penalties: FD check with both on (the FD states
   * are yawed and moving sideways by their perturbation) */
  double hw = loco_rewards("reset_noise = 0.2\nw_heading = 2\nw_lateral = 3\n", 3, 3,
                           "locomotion humanoid reward VJP vs FD, heading and lateral penalties on (rel)", &done0);
  CU_ASSERT(isfinite(hw));
  loco_heading_values();
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, "models/biped2d.xml", "plugin = locomotion\nreset_noise = 0.2\n", 3), 0);
  CU_ASSERT_EQUAL(I.ops->obs_dim(I.task), 13 + 12 + 6);
  CU_ASSERT(fd_task(&I, 0, "locomotion biped2d observe VJP vs FD (rel)") < 1e-6);
  CU_ASSERT(fd_task(&I, 1, "locomotion biped2d reward VJP vs FD (rel)") < 1e-6);
  inst_free(&I);
}

/* ---- reset, termination ------------------------------------------------------------------------ */

static void test_reset_reproducible(void) {
  const char *cfgs[2][2] = {{HUMANOID, NULL}, {HUMANOID, "plugin = locomotion\n"}};
  char lines[1024];
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\n", motion_file("jump.csv"));
  cfgs[0][1] = lines;
  for (int c = 0; c < 2; c++) {
    inst I;
    CU_ASSERT_EQUAL_FATAL(inst_make(&I, cfgs[c][0], cfgs[c][1], 4), 0);
    int nx = I.env->nx, envs[4] = {0, 1, 2, 3};
    bcg_task_clock c1[4], c2[4], c3[4];
    for (int e = 0; e < 4; e++) c1[e] = c2[e] = c3[e] = (bcg_task_clock){9, 7, 99.0};
    bcg_real x1[4 * 64], x2[4 * 64], x3[4 * 64];
    I.ops->reset(I.task, envs, 4, 42, x1, c1);
    CU_ASSERT(c1[0].t == 0 && c1[3].t == 0 && c1[0].flags == 0 && c1[3].flags == 0);
    I.ops->reset(I.task, envs, 4, 43, x3, c3);
    I.ops->reset(I.task, envs + 1, 2, 42, x3, c3); /* a subset with the same draw */
    I.ops->reset(I.task, envs, 4, 42, x2, c2);
    CU_ASSERT_EQUAL(memcmp(x1, x2, sizeof(bcg_real) * 4 * nx), 0);
    CU_ASSERT_EQUAL(memcmp(x1 + nx, x3 + nx, sizeof(bcg_real) * 2 * nx), 0);
    for (int e = 0; e < 4; e++) CU_ASSERT(c1[e].phase == c2[e].phase && c1[e].t == c2[e].t);
    CU_ASSERT(c3[1].phase == c1[1].phase && c3[2].phase == c1[2].phase);
    if (c == 0) { /* imitation (rsi): the phase is the reset's reference time, different per env */
      CU_ASSERT(c1[0].phase != c1[1].phase);
      CU_ASSERT(c1[0].phase >= 0 && c1[0].phase < 8);
    } else {
      CU_ASSERT(c1[0].phase == 0 && c1[3].phase == 0);
    }
    CU_ASSERT_NOT_EQUAL(memcmp(x1, x1 + nx, sizeof(bcg_real) * nx), 0); /* environments differ */
    /* the initial state does not penetrate the floor */
    const bcg_mdata *m = &I.env->model->m;
    static bcg_kin k;
    double lo = 1e9;
    for (int e = 0; e < 4; e++) {
      bcg_kinematics(m, x1 + e * nx, &k);
      for (int i = 0; i < m->ncp; i++) {
        bcg_real pc[3];
        bcg_contact_point(m, &k, i, pc);
        lo = fmin(lo, pc[2] + k.o[2]);
      }
    }
    CU_ASSERT(lo > -1e-3);
    inst_free(&I);
  }
}

static void test_termination(void) {
  inst I;
  char lines[1024];
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nrsi = false\nepisode_seconds = 2\n",
           motion_file("run.csv"));
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, lines, 4), 0);
  bcg_model *model = load_model(HUMANOID);
  bcg_motion mo;
  char err[2048];
  CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&mo, model, motion_file("run.csv"), 0, 0, err, sizeof err), 0);
  bcg_env *env = I.env;
  int nx = env->nx, tep[4] = {10, 10, 10, 100}, envs[4] = {0, 1, 2, 3}, done[4];
  bcg_task_clock clk[4];
  bcg_real x[4 * 64], a[4 * 32] = {0}, rew[4];
  I.ops->reset(I.task, envs, 4, 0, x, clk);
  for (int e = 0; e < 4; e++) clk[e].t = tep[e];
  for (int e = 0; e < 4; e++) bcg_motion_state(&mo, &model->m, tep[e] * env->control_dt, 0, x + e * nx, x + e * nx + env->nq);
  x[0 * nx + 2] = 0.5;   /* root below term_height 0.6 */
  x[1 * nx + 0] += 1.0;  /* 1 m off: tracking error above max_error */
  x[2 * nx + 0] += 0.1;  /* 10 cm off: fine */
  I.ops->reward(I.task, x, a, NULL, clk, rew, done);
  CU_ASSERT_EQUAL(done[0], 1);
  CU_ASSERT_EQUAL(done[1], 1);
  CU_ASSERT_EQUAL(done[2], 0);
  CU_ASSERT_EQUAL(done[3], 2); /* 100 steps = 2 s */
  CU_ASSERT(rew[2] < 1 && rew[2] > 0);
  inst_free(&I);
  /* without loop, the clip's end is a time limit */
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nrsi = false\nepisode_seconds = 100\n",
           motion_file("run.csv"));
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, lines, 1), 0);
  int steps = (int)ceil(bcg_motion_duration(&mo) / I.env->control_dt - 1e-9);
  I.ops->reset(I.task, envs, 1, 0, x, clk);
  for (int s = steps - 1; s <= steps; s++) {
    clk[0].t = s;
    bcg_motion_state(&mo, &model->m, s * I.env->control_dt, 0, x, x + I.env->nq);
    I.ops->reward(I.task, x, a, a, clk, rew, done);
    CU_ASSERT_EQUAL(done[0], s == steps ? 2 : 0);
  }
  inst_free(&I);
  /* locomotion */
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, "models/biped2d.xml", "plugin = locomotion\nepisode_seconds = 1\n", 3), 0);
  nx = I.env->nx;
  I.ops->reset(I.task, envs, 3, 0, x, clk);
  clk[0].t = 5; clk[1].t = 5; clk[2].t = 50;
  x[0 * nx + 1] -= 0.6; /* rootz slide: the torso drops to ~0.6 m */
  I.ops->reward(I.task, x, a, a, clk, rew, done);
  CU_ASSERT_EQUAL(done[0], 1);
  CU_ASSERT_EQUAL(done[1], 0);
  CU_ASSERT_EQUAL(done[2], 2);
  inst_free(&I);
  bcg_motion_free(&mo);
  bcg_model_free(model);
}

/* ---- shipped motions ------------------------------------------------------------------------------ */

static void test_shipped_motions(void) {
  bcg_model *model = load_model(HUMANOID);
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  const bcg_mdata *m = &model->m;
  static bcg_kin k;
  const char *names[4] = {"run.csv", "jump.csv", "fight.csv", "dance.csv"};
  double worst_pen = 0, worst_range = 0, worst_ballistic = 0;
  for (int c = 0; c < 4; c++) {
    bcg_motion mo;
    char err[2048];
    CU_ASSERT_EQUAL_FATAL(bcg_motion_load(&mo, model, motion_file(names[c]), 0, 0, err, sizeof err), 0);
    double D = bcg_motion_duration(&mo);
    CU_ASSERT(D >= 5 && D <= 15);
    int flights = 0, air_prev = 0;
    double *lo = calloc(mo.nframes, sizeof(double));
    for (int i = 0; i < mo.nframes; i++) {
      const double *q = mo.qpos + (size_t)i * m->nq;
      bcg_kinematics(m, q, &k);
      lo[i] = 1e9;
      for (int p = 0; p < m->ncp; p++) {
        bcg_real pc[3];
        bcg_contact_point(m, &k, p, pc);
        lo[i] = fmin(lo[i], pc[2] + k.o[2] - m->floor_z);
      }
      worst_pen = fmax(worst_pen, -lo[i]);
      for (int j = 0; j < m->njnt; j++)
        if (m->jnt_limited[j] && m->jnt_type[j] == BCG_JNT_HINGE) {
          double v = q[m->jnt_qposadr[j]];
          worst_range = fmax(worst_range, fmax(m->jnt_range[j][0] - v, v - m->jnt_range[j][1]));
        }
      int air = lo[i] > 0.02;
      if (air && !air_prev) flights++;
      air_prev = air;
    }
    /* in the air (strictly inside a flight phase) the root is ballistic */
    for (int i = 1; i + 1 < mo.nframes; i++)
      if (lo[i - 1] > 1e-4 && lo[i] > 1e-4 && lo[i + 1] > 1e-4) {
        const double *q0 = mo.qpos + (size_t)(i - 1) * m->nq, *q1 = q0 + m->nq, *q2 = q1 + m->nq;
        double acc = (q2[2] - 2 * q1[2] + q0[2]) * mo.fps * mo.fps;
        worst_ballistic = fmax(worst_ballistic, fabs(acc + 9.81));
      }
    if (c == 1) {
      CU_ASSERT(flights >= 4);
      double hmax = 0;
      for (int i = 0; i < mo.nframes; i++) hmax = fmax(hmax, lo[i]);
      CU_ASSERT(hmax > 0.15);
      printf("\n  jump: %d flight phases, highest %.3f m\n", flights, hmax);
    } else {
      CU_ASSERT(flights == 0);
    }
    free(lo);
    bcg_motion_free(&mo);
  }
  bcg_test_report("shipped motions: deepest floor penetration (m)", worst_pen);
  bcg_test_report("shipped motions: worst joint-range violation (rad)", worst_range);
  bcg_test_report("shipped motions: |root z acceleration + g| in flight (m/s^2)", worst_ballistic);
  CU_ASSERT(worst_pen <= 1e-3);
  CU_ASSERT(worst_range <= 1e-6);
  CU_ASSERT(worst_ballistic < 0.05);
  bcg_model_free(model);
}

/* ---- another robot: a retargeted clip for biped2d --------------------------------------------------- */

static void test_biped2d_clip(void) {
  const char *p = bcg_test_tmp_path("biped.csv");
  FILE *f = fopen(p, "w");
  fprintf(f, "# fps=25 quat=wxyz (no quaternion on this model)\n");
  fprintf(f, "rootx,rootz,rooty,right_hip,right_knee,right_ankle,left_hip,left_knee,left_ankle\n");
  for (int i = 0; i < 50; i++) { /* a slow walk-like swing */
    double t = i / 25.0, s = sin(2 * M_PI * t);
    fprintf(f, "%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n", 0.5 * t, -0.05 - 0.02 * s * s, 0.05 * s,
            -0.4 * s - 0.2, -0.3 - 0.3 * (0.5 + 0.5 * s), 0.1 * s, 0.4 * s - 0.2, -0.3 - 0.3 * (0.5 - 0.5 * s),
            -0.1 * s);
  }
  fclose(f);
  inst I;
  char lines[1024];
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nterm_height = 0.3\nloop = true\n", p);
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, "models/biped2d.xml", lines, 3), 0);
  /* 13 + 2*6 + 6 proprio, 2 leaf bodies (feet), 3 future frames of 9 + 6 + 6 */
  CU_ASSERT_EQUAL(I.ops->obs_dim(I.task), 31 + 6 + 3 * 21);
  CU_ASSERT(fd_task(&I, 0, "imitation biped2d observe VJP vs FD (rel)") < 1e-6);
  CU_ASSERT(fd_task(&I, 1, "imitation biped2d reward VJP vs FD (rel)") < 1e-6);
  inst_free(&I);
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nterm_height = 0.3\nloop = true\nw_action_rate = 2\n", p);
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, "models/biped2d.xml", lines, 3), 0);
  CU_ASSERT(fd_task(&I, 1, "imitation biped2d reward VJP vs FD, action rate (rel)") < 1e-6);
  inst_free(&I);
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, "models/biped2d.xml", lines, 3), 0);
  /* replay at the reset phase (t = 0) gives the maximal reward */
  int envs[3] = {0, 1, 2}, done[3];
  bcg_task_clock clk[3];
  bcg_real x[3 * 32], a[3 * 8] = {0}, rew[3];
  I.ops->reset(I.task, envs, 3, 3, x, clk);
  I.ops->reward(I.task, x, a, a, clk, rew, done);
  for (int e = 0; e < 3; e++) {
    CU_ASSERT(fabs(rew[e] - 1) < 1e-9);
    CU_ASSERT_EQUAL(done[e], 0);
  }
  inst_free(&I);
  unlink(p);
}

/* ---- ADD reward ------------------------------------------------------------------------- */

/* perturbed real states of the motion (random phases), n envs, into x; the clocks at t = 1 + 3e */
static void add_states(inst *I, uint64_t draw, double sq, double su, bcg_real *x, bcg_task_clock *clk) {
  bcg_env *env = I->env;
  int n = env->nenv, nx = env->nx, nv = env->nv, envs[16] = {0};
  for (int e = 0; e < n; e++) envs[e] = e;
  I->ops->reset(I->task, envs, n, draw, x, clk);
  for (int e = 0; e < n; e++) {
    bcg_real dq[BCG_MAX_DOF], du[BCG_MAX_DOF], y[BCG_MAX_Q + BCG_MAX_DOF];
    for (int d = 0; d < nv; d++) dq[d] = sq * nrand(), du[d] = su * nrand();
    bcg_env_perturb(env, x + e * nx, dq, du, y);
    memcpy(x + e * nx, y, sizeof(bcg_real) * nx);
    clk[e].t = 1 + 3 * e;
  }
}

/* fill the replay with policy-like samples through reward() and train D a little */
static void add_warm(inst *I, int rounds) {
  int n = I->env->nenv, done[16];
  bcg_real *x = calloc((size_t)n * I->env->nx, sizeof(bcg_real)), a[16 * BCG_MAX_ACT] = {0}, rew[16];
  bcg_task_clock clk[16];
  for (int r = 0; r < rounds; r++) {
    add_states(I, 100 + r, 0.1, 0.5, x, clk);
    I->ops->reward(I->task, x, a, a, clk, rew, done);
    CU_ASSERT_EQUAL(I->ops->update(I->task, r), 0);
  }
  free(x);
}

static void test_add_vjp(void) {
  inst I;
  char lines[1024];
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nadd = true\nadd_lr = 3e-3\nadd_batch = 32\n",
           motion_file("run.csv"));
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, lines, 3), 0);
  add_warm(&I, 10);
  CU_ASSERT(fd_task(&I, 1, "imitation humanoid reward VJP vs FD, tracking + ADD (rel)") < 1e-6);
  inst_free(&I);
  snprintf(lines, sizeof lines,
           "plugin = imitation\nmotion = %s\nadd = true\nadd_only = true\nadd_reward_scale = 0.7\nadd_lr = 3e-3\n"
           "add_batch = 32\nw_action_rate = 0.1\nloop = true\n",
           motion_file("jump.csv"));
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, lines, 3), 0);
  add_warm(&I, 10);
  CU_ASSERT(fd_task(&I, 1, "imitation humanoid reward VJP vs FD, ADD only (rel)") < 1e-6);
  inst_free(&I);
}

/* the discriminator alone: the exact gradient-penalty gradient vs FD, and on a
 * fixed replay D(0) rises and D(negatives) falls */
static void test_add_discriminator(void) {
  add_disc d;
  long hid[2] = {16, 12};
  int dim = 6;
  CU_ASSERT_EQUAL_FATAL(add_init(&d, dim, hid, 2, 5e-3, 5, 0.01, 1e-4, 1000, 64, 4, 8, 7), 0);
  /* gradient penalty: P = |dD/dx|^2 at x, d P / d params vs central FD */
  bcg_real x0[6] = {0.3, -0.2, 0.1, 0.5, -0.7, 0.05};
  bcg_real *g = calloc(d.D.nparams, sizeof(bcg_real));
  add_gp_grad(&d.D, x0, 1.0, g);
  double worst = 0;
  double *ga = malloc(sizeof(double) * d.D.nparams), *gf = malloc(sizeof(double) * d.D.nparams);
  for (size_t i = 0; i < d.D.nparams; i++) {
    bcg_real s = d.D.params[i], tmp[1];
    (void)tmp;
    bcg_real *junk = calloc(d.D.nparams, sizeof(bcg_real));
    d.D.params[i] = s + 1e-6;
    double pp = add_gp_grad(&d.D, x0, 0, junk);
    d.D.params[i] = s - 1e-6;
    double pm = add_gp_grad(&d.D, x0, 0, junk);
    d.D.params[i] = s;
    free(junk);
    ga[i] = g[i];
    gf[i] = (pp - pm) / 2e-6;
  }
  worst = bcg_vec_relerr(ga, gf, (int)d.D.nparams);
  bcg_test_report("ADD gradient penalty: double-backward param gradient vs FD (rel)", worst);
  CU_ASSERT(worst < 1e-6);
  /* the penalty itself against an FD of the input gradient (MLP input VJP) */
  {
    bcg_real z[1], dz[1] = {1}, dx[6];
    bcg_mlp_forward(&d.D, NULL, x0, 1, z);
    bcg_mlp_backward(&d.D, NULL, dz, NULL, dx);
    double P = 0;
    for (int i = 0; i < dim; i++) P += (double)dx[i] * dx[i];
    bcg_real *junk = calloc(d.D.nparams, sizeof(bcg_real));
    double P2 = add_gp_grad(&d.D, x0, 0, junk);
    free(junk);
    CU_ASSERT(fabs(P - P2) <= 1e-12 * (1 + P));
  }
  free(g), free(ga), free(gf);
  /* fixed replay of negatives */
  bcg_real neg[200 * 6];
  for (int i = 0; i < 200 * dim; i++) neg[i] = (bcg_real)(0.5 * nrand() + (i % dim == 0 ? 1.0 : 0.0));
  add_push(&d, neg, 200);
  bcg_real zero[6] = {0}, z0[1], zn[8];
  add_update(&d, 0); /* merges mean |Delta| (no more pushes after this: the replay is fixed) */
  add_logits(&d, zero, 1, z0);
  double p0 = z0[0];
  add_logits(&d, neg, 8, zn);
  double n0 = 0;
  for (int i = 0; i < 8; i++) n0 += zn[i] / 8;
  for (int it = 1; it <= 20; it++) add_update(&d, it);
  add_logits(&d, zero, 1, z0);
  add_logits(&d, neg, 8, zn);
  double n1 = 0;
  for (int i = 0; i < 8; i++) n1 += zn[i] / 8;
  printf("  ADD D(0) %.4f -> %.4f, mean D(negatives) %.4f -> %.4f after 20 updates (loss %.4f)\n", p0, (double)z0[0],
         n0, n1, d.last_loss);
  CU_ASSERT(z0[0] > p0 + 0.05);
  CU_ASSERT(n1 < n0 - 0.05);
  add_free(&d);
}

/* rewards finite and within [0, -log(1e-4) scale], also far from the reference
 * (w_self = 0: the self-collision penalty is not part of that bound) */
static void test_add_bounded(void) {
  inst I;
  char lines[1024];
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nadd = true\nadd_only = true\nadd_reward_scale = 2\nw_self = 0\n"
           "add_lr = 1e-2\nadd_batch = 32\nadd_grad_penalty = 0\n", motion_file("dance.csv"));
  CU_ASSERT_EQUAL_FATAL(inst_make(&I, HUMANOID, lines, 4), 0);
  add_warm(&I, 20);
  int n = 4, done[4];
  bcg_real *x = calloc((size_t)n * I.env->nx, sizeof(bcg_real)), a[4 * BCG_MAX_ACT] = {0}, rew[4];
  bcg_task_clock clk[4];
  double lo = 1e300, hi = -1e300;
  for (int k = 0; k < 6; k++) {
    double sc = k < 3 ? 0.02 * k : 2.0 * k;
    add_states(&I, 300 + k, 0.1 * sc, sc, x, clk);
    if (k == 0)
      for (int e = 0; e < n; e++) clk[e].t = 0; /* the reset states themselves: Delta = 0 */
    I.ops->reward(I.task, x, a, a, clk, rew, done);
    for (int e = 0; e < n; e++) {
      CU_ASSERT(isfinite(rew[e]));
      lo = fmin(lo, rew[e]), hi = fmax(hi, rew[e]);
    }
  }
  printf("  ADD rewards in [%.4g, %.4g], bound [0, %.4g]\n", lo, hi, 2 * ADD_RMAX);
  CU_ASSERT(lo >= 0);
  CU_ASSERT(hi <= 2 * ADD_RMAX + 1e-12);
  free(x);
  inst_free(&I);
}

/* save / load through the ops: the loaded task gives the same rewards and
 * trains on identically afterwards (params, Adam, mean |Delta|, replay) */
static void test_add_save_load(void) {
  inst A, B;
  char lines[1024], path[1024], err[512];
  snprintf(path, sizeof path, "%s", bcg_test_tmp_path("add_XXXXXX.h5"));
  snprintf(lines, sizeof lines, "plugin = imitation\nmotion = %s\nadd = true\nadd_batch = 32\nadd_lr = 3e-3\n",
           motion_file("run.csv"));
  CU_ASSERT_EQUAL_FATAL(inst_make(&A, HUMANOID, lines, 3), 0);
  CU_ASSERT_EQUAL_FATAL(inst_make(&B, HUMANOID, lines, 3), 0);
  CU_ASSERT_FATAL(A.ops->size >= sizeof(bcg_task_ops) && A.ops->save && A.ops->load);
  add_warm(&A, 5);
  /* pending samples that the next update merges must survive too */
  int n = 3, done[3];
  bcg_real *x = calloc((size_t)n * A.env->nx, sizeof(bcg_real)), a[3 * BCG_MAX_ACT] = {0}, ra[3], rb[3];
  bcg_task_clock clk[3];
  add_states(&A, 77, 0.1, 0.5, x, clk);
  A.ops->reward(A.task, x, a, a, clk, ra, done);
  int fd = mkstemps(path, 3);
  close(fd);
  bcg_checkpoint *ck = bcg_checkpoint_begin(path, err, sizeof err);
  CU_ASSERT_FATAL(ck != NULL);
  int64_t g = bcg_h5_group(bcg_checkpoint_root(ck), "task", 1, err, sizeof err);
  CU_ASSERT_EQUAL(A.ops->save(A.task, g), 0);
  bcg_h5_group_close(g);
  CU_ASSERT_EQUAL(bcg_checkpoint_commit(ck, err, sizeof err), 0);
  int64_t f = bcg_checkpoint_open(path, err, sizeof err);
  CU_ASSERT_FATAL(f >= 0);
  g = bcg_h5_group(f, "task", 0, err, sizeof err);
  CU_ASSERT_EQUAL(B.ops->load(B.task, g), 0);
  bcg_h5_group_close(g);
  bcg_checkpoint_close(f);
  unlink(path);
  double worst = 0;
  for (int round = 0; round < 3; round++) {
    add_states(&A, 200 + round, 0.1, 0.5, x, clk);
    A.ops->reward(A.task, x, a, a, clk, ra, done);
    B.ops->reward(B.task, x, a, a, clk, rb, done);
    for (int e = 0; e < n; e++) worst = fmax(worst, fabs(ra[e] - rb[e]));
    CU_ASSERT_EQUAL(A.ops->update(A.task, 10 + round), 0);
    CU_ASSERT_EQUAL(B.ops->update(B.task, 10 + round), 0);
  }
  add_states(&A, 999, 0.1, 0.5, x, clk);
  A.ops->reward(A.task, x, a, a, clk, ra, done);
  B.ops->reward(B.task, x, a, a, clk, rb, done);
  for (int e = 0; e < n; e++) worst = fmax(worst, fabs(ra[e] - rb[e]));
  bcg_test_report("ADD save/load: max |reward difference| over 3 later updates", worst);
  CU_ASSERT(worst == 0);
  /* a task without add refuses a checkpoint with add and vice versa */
  free(x);
  inst_free(&A), inst_free(&B);
}

/* end to end: SHAC on imitation with ADD, 4 iterations straight vs 2 + resume
 * 2: the final checkpoints' discriminator (task group) and actor agree bit for
 * bit (core/train.c writes and reads the task's group "task") */
static int add_train(bcg_registry *reg, const char *ini, int nov, char **ov, char *dir, int resume,
                     bcg_train_result *res) {
  char err[2048];
  bcg_config *cfg = NULL;
  if (bcg_config_load_with(&cfg, reg, ini, nov, ov, err, sizeof err)) return fprintf(stderr, "%s\n", err), -1;
  if (!resume && bcg_rundir_create(bcg_test_tmpdir(), "add_run", dir, 1024, err, sizeof err))
    return bcg_config_free(cfg), fprintf(stderr, "%s\n", err), -1;
  bcg_train_options opt;
  memset(&opt, 0, sizeof opt);
  opt.run_dir = dir;
  opt.resume = resume;
  int rc = bcg_train_run(cfg, &opt, res, err, sizeof err);
  if (rc) fprintf(stderr, "train: %s\n", err);
  bcg_config_free(cfg);
  return rc;
}

static long add_ck_reals(const char *path, const char *group, const char *name, bcg_real *x, size_t cap) {
  char err[256];
  int64_t f = bcg_checkpoint_open(path, err, sizeof err);
  if (f < 0) return -1;
  int64_t g = bcg_h5_group(f, group, 0, err, sizeof err);
  long n = g < 0 ? -1 : bcg_h5_read_reals(g, name, x, cap, err, sizeof err);
  if (g >= 0) bcg_h5_group_close(g);
  bcg_checkpoint_close(f);
  return n;
}

static void test_add_resume(void) {
  bcg_registry *reg = bcg_registry_new();
  char dir[1024], ini[1024], mp[1024], d1[1024], d2[1024];
  snprintf(ini, sizeof ini, "%s", bcg_test_tmp_path("add_XXXXXX.ini"));
  snprintf(dir, sizeof dir, "%s/plugins", bcg_test_build_dir());
  bcg_registry_scan_dir(reg, dir, 1);
  int fd = mkstemps(ini, 4);
  FILE *f = fdopen(fd, "w");
  fprintf(f,
          "[run]\nname = add\nseed = 4\nnum_envs = 2\nthreads = 1\niterations = 4\ncheckpoint_every = 0\n"
          "[model]\npath = %s\n[sim]\nsubsteps = 2\ncontrol_dt = 0.02\nactuation = pd\n"
          "[contact]\nplugin = smoothed_kappa\n[estimator]\nplugin = autodiff\n"
          "[learner]\nplugin = shac\nhorizon = 4\nactor_layers = 16\ncritic_layers = 16\ncritic_iterations = 2\n"
          "[task]\nplugin = imitation\nmotion = %s\nadd = true\nadd_layers = 16\nadd_batch = 8\nadd_steps = 2\n"
          "add_replay = 12\n",
          HUMANOID, motion_file("run.csv"));
  fclose(f);
  (void)mp;
  bcg_train_result r1, r2, r3;
  CU_ASSERT_EQUAL_FATAL(add_train(reg, ini, 0, NULL, d1, 0, &r1), 0);
  char ov[64];
  snprintf(ov, sizeof ov, "run.samples=%llu", (unsigned long long)(r1.samples / 2));
  char *ovp[] = {ov};
  CU_ASSERT_EQUAL_FATAL(add_train(reg, ini, 1, ovp, d2, 0, &r2), 0);
  CU_ASSERT_EQUAL(r2.iterations, 2);
  CU_ASSERT_EQUAL_FATAL(add_train(reg, ini, 0, NULL, d2, 1, &r3), 0);
  CU_ASSERT_EQUAL(r3.iterations, 4);
  static const char *names[][2] = {{"task", "params"}, {"task", "replay"}, {"task", "adam_v"},
                                   {"learner", "actor/params"}};
  int same = 1;
  for (int i = 0; i < 4; i++) {
    static bcg_real a[200000], b[200000];
    long na = add_ck_reals(r1.checkpoint, names[i][0], names[i][1], a, 200000);
    long nb = add_ck_reals(r3.checkpoint, names[i][0], names[i][1], b, 200000);
    int ok = na > 0 && na == nb && memcmp(a, b, sizeof(bcg_real) * (size_t)na) == 0;
    if (!ok) fprintf(stderr, "ADD resume: %s/%s differs (%ld vs %ld)\n", names[i][0], names[i][1], na, nb);
    same &= ok;
  }
  /* the interrupted half differs (the comparison can fail) */
  static bcg_real a[200000], b[200000];
  long na = add_ck_reals(r1.checkpoint, "task", "params", a, 200000);
  long nb = add_ck_reals(r2.checkpoint, "task", "params", b, 200000);
  CU_ASSERT(na == nb && na > 0 && memcmp(a, b, sizeof(bcg_real) * (size_t)na) != 0);
  printf("  ADD resume: task + actor checkpoints bit-identical: %s\n", same ? "yes" : "no");
  CU_ASSERT(same);
  unlink(ini);
  char cmd[3200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", d1, d2);
  if (system(cmd)) {
  }
  bcg_registry_free(reg);
}

BCG_TESTS({"csv_quat_orders", test_csv_quat_orders}, {"csv_mismatch", test_csv_mismatch}, {"hdf5", test_hdf5},
          {"lafan_format", test_lafan_format}, {"motion_segment", test_motion_segment},
          {"motion_checks", test_motion_checks}, {"motion_reach_note", test_motion_reach_note}, {"lafan_real_clip", test_lafan_real_clip},
          {"floor_required", test_floor_required},
          {"hdf5_attributes", test_hdf5_attributes}, {"motion_declared_sizes", test_motion_declared_sizes},
          {"motion_messages_one_line", test_motion_messages_one_line},
          {"interpolation", test_interpolation}, {"replay", test_replay}, {"reference_qpos", test_reference_qpos}, {"observe_envs", test_observe_envs}, {"reward_observe", test_reward_observe}, {"imitation_vjp", test_imitation_vjp}, {"imitation_self", test_imitation_self},
          {"imitation_memo", test_imitation_memo}, {"self_penalty_bound", test_self_penalty_bound},
          {"action_rate", test_action_rate}, {"clock_across_resets", test_clock_across_resets},
          {"locomotion_vjp", test_locomotion_vjp}, {"reset_reproducible", test_reset_reproducible},
          {"termination", test_termination}, {"shipped_motions", test_shipped_motions},
          {"biped2d_clip", test_biped2d_clip}, {"add_vjp", test_add_vjp},
          {"add_discriminator", test_add_discriminator}, {"add_bounded", test_add_bounded},
          {"add_save_load", test_add_save_load}, {"add_resume", test_add_resume});
BCG_RUN("tasks")
