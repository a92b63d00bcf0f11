/* tests/fuzz/fuzz_model.c - libFuzzer harness of the MJCF-to-model path
 * (core/model.c: bcg_model_load, the model compiled by libmujoco and then
 * converted into bcg_mdata).
 *
 * Input: the MJCF text (at most 32 KiB), written to model.xml in the
 * harness's temporary directory (an <include> or mesh file names a file
 * there, relative to the model, or an absolute path). libmujoco
 * itself is not instrumented: coverage guides the search through bcg's
 * conversion, and ASan still sees libmujoco's heap through its interceptors.
 *
 * Checked: no crash or sanitizer report; a refusal carries a one-line
 * message naming the file; a converted model is consistent enough for bcg's
 * dynamics: forward kinematics, the mass matrix and inverse dynamics at
 * qpos0 run (under ASan: every index stays inside its array). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/dyn.h"
#include "bcg/model.h"
#include "bcg/step.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fz_init();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (32u << 10)) return 0;
  char path[PATH_MAX + 32], err[2048];
  fz_write("model.xml", data, size, path, sizeof path);
  bcg_model *model = bcg_model_load(path, err, sizeof err);
  if (!model) {
    fz_say("refused", err);
    fz_check_msg(err);
    if (strncmp(err, path, strlen(path)) != 0) fz_die2("the message does not name the file", err);
    return 0;
  }
  const bcg_mdata *m = &model->m;
  static bcg_kin k;
  static bcg_crba_ws cw;
  static bcg_rnea_ws rw;
  static bcg_real H[BCG_MAX_DOF * BCG_MAX_DOF];
  bcg_real q[BCG_MAX_Q], qd[BCG_MAX_DOF], qdd[BCG_MAX_DOF], tau[BCG_MAX_DOF], pc[3];
  for (int i = 0; i < m->nq; i++) q[i] = m->qpos0[i];
  for (int i = 0; i < m->nv; i++) qd[i] = (bcg_real)0.1 * (i % 3), qdd[i] = 0;
  bcg_kinematics(m, q, &k);
  bcg_crba(m, &k, H, &cw);
  bcg_rnea(m, &k, qd, qdd, 1, tau, &rw);
  for (int p = 0; p < m->ncp; p++) bcg_contact_point(m, &k, p, pc);
  for (int b = 0; b < m->nbody; b++)
    if (bcg_model_body_id(model, model->body_name[b]) < 0 && model->body_name[b][0]) fz_die("body name not found");
  bcg_model_free(model);
  return 0;
}
