/* tests/fuzz/fuzz_motion.h - the body shared by the two motion harnesses
 * (fuzz_motion_csv.c, fuzz_motion_h5.c): the reference-motion reader of
 * tasks/motion.h as the imitation task uses it.
 *
 * Input: one options byte, then the file: the CSV text, or for HDF5 the
 * file's description (tests/fuzz/fuzz_h5desc.h; the file's bytes instead
 * with BCG_FUZZ_H5_RAW=1).
 *   bits 0-1  motion_format: auto, bcg, lafan, auto
 *   bit  2    model: MuJoCo's humanoid.xml (free root, nq 28) or
 *             models/biped2d.xml (slide root, nq 9)
 *   bits 3-4  quat_order: the file's, wxyz, xyzw, the file's
 *   bit  5    fps: the file's, or the task's fps key = 30
 *   bits 6-7  segment: whole clip, start 0.1 s, end 0.2 s, both
 *
 * Checked: no crash or sanitizer report; a refusal carries a one-line
 * message naming the file; a loaded clip has at least 2 finite frames, unit
 * values and a positive rate; the load-time checks and their warnings, and
 * sampling (bcg_motion_state, looped and clamped, inside and outside the
 * clip) run on it. */
#ifndef BCG_FUZZ_MOTION_H
#define BCG_FUZZ_MOTION_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tasks/motion.h"
#include "fuzz_h5desc.h"
#include "fuzz_util.h"

static bcg_model *fm_models[2];

static void fm_init(void) {
  fz_init();
  char p[PATH_MAX + 32], err[2048];
  const char *paths[2] = {"/usr/share/mujoco/model/humanoid/humanoid.xml", fz_repo("models/biped2d.xml", p, sizeof p)};
  for (int i = 0; i < 2; i++)
    if (!(fm_models[i] = bcg_model_load(paths[i], err, sizeof err))) fz_die(err);
}

static void fm_run(const uint8_t *data, size_t size, const char *name, int h5) {
  if (size < 1 || size > (1u << 17)) return;
  const unsigned o = data[0];
  const bcg_model *model = fm_models[(o >> 2) & 1];
  bcg_motion_opts opt;
  memset(&opt, 0, sizeof opt);
  static const int fmt[4] = {BCG_MOTION_AUTO, BCG_MOTION_BCG, BCG_MOTION_LAFAN, BCG_MOTION_AUTO};
  static const int quat[4] = {BCG_QUAT_FILE, BCG_QUAT_WXYZ, BCG_QUAT_XYZW, BCG_QUAT_FILE};
  opt.format = fmt[o & 3];
  opt.quat = quat[(o >> 3) & 3];
  opt.fps = (o >> 5) & 1 ? 30 : 0;
  opt.start = (o >> 6) & 1 ? 0.1 : 0;
  opt.end = (o >> 7) & 1 ? 0.2 : 0;
  char path[PATH_MAX + 32], err[2048];
  if (!h5 || h5d_is_raw(data + 1, size - 1)) {
    if (h5 && !h5d_raw_enabled()) return;
    fz_write(name, data + 1, size - 1, path, sizeof path);
  } else {
    snprintf(path, sizeof path, "%s/%s", fz_dir, name);
    if (h5d_build(path, data + 1, size - 1)) fz_die("cannot create the HDF5 file");
  }
  bcg_motion mo;
  if (bcg_motion_load_opts(&mo, model, path, &opt, err, sizeof err)) {
    fz_say("refused", err);
    fz_check_msg(err);
    if (strncmp(err, path, strlen(path)) != 0) fz_die2("the message does not name the file", err);
    if (mo.qpos) fz_die("a failed load left frames allocated");
    return;
  }
  const bcg_mdata *m = &model->m;
  snprintf(err, sizeof err, "%d frames at %g fps", mo.nframes, mo.fps);
  fz_say("loaded", err);
  if (mo.nframes < 2 || mo.nq != m->nq || !(mo.fps > 0) || !isfinite(mo.fps)) fz_die("loaded clip is malformed");
  for (long i = 0; i < (long)mo.nframes * mo.nq; i++)
    if (!isfinite(mo.qpos[i])) fz_die("loaded clip holds a non-finite value");
  bcg_motion_checks c;
  bcg_motion_check(&mo, model, &c);
  char lines[3][1600];
  int nw = bcg_motion_warnings(&mo, model, &c, lines, 3);
  for (int i = 0; i < nw; i++) fz_check_msg(lines[i]);
  double q[BCG_MAX_Q], u[BCG_MAX_DOF];
  const double D = bcg_motion_duration(&mo), ts[5] = {-0.37, 0, 0.5 * D, D, 2.6 * D + 0.01};
  for (int loop = 0; loop < 2; loop++)
    for (int i = 0; i < 5; i++) bcg_motion_state(&mo, m, ts[i], loop, q, u);
  bcg_motion_free(&mo);
}

#endif
