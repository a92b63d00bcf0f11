/* tests/teststate.h - states for the suites and benchmarks: the model's
 * reference pose with seeded noise, placed at a chosen height above the
 * floor, with random velocities (random numbers from testrng.h, drawn in
 * this order: pose, then whatever the caller draws for the height, then
 * velocities). */
#ifndef BCG_TESTSTATE_H
#define BCG_TESTSTATE_H

#include <math.h>

#include "bcg/step.h"
#include "testrng.h"

/* qpos0 with normal noise of joint_sigma on every coordinate after a free
 * root's 7, the root quaternion perturbed by quat_sigma and renormalised, and
 * the root moved by xy_sigma (normal) in x and y */
static inline void test_state_pose_with(const bcg_mdata *m, bcg_real *q, double joint_sigma, double quat_sigma,
                                        double xy_sigma) {
  for (int i = 0; i < m->nq; i++) q[i] = m->qpos0[i];
  for (int i = 7; i < m->nq; i++) q[i] += (bcg_real)(joint_sigma * nrand());
  double n = 0;
  for (int i = 3; i < 7; i++) { q[i] += (bcg_real)(quat_sigma * nrand()); n += (double)q[i] * q[i]; }
  for (int i = 3; i < 7; i++) q[i] = (bcg_real)(q[i] / sqrt(n));
  q[0] = (bcg_real)(xy_sigma * nrand()); q[1] = (bcg_real)(xy_sigma * nrand());
}
/* the same with quaternion noise 0.05 and 0.3 m sideways */
static inline void test_state_pose(const bcg_mdata *m, bcg_real *q, double joint_sigma) {
  test_state_pose_with(m, q, joint_sigma, 0.05, 0.3);
}

/* the root moved vertically so that the lowest contact point is `height`
 * above the floor (negative: in it) */
static inline void test_state_place(const bcg_mdata *m, bcg_real *q, double height) {
  static bcg_kin k;
  bcg_kinematics(m, q, &k);
  double lo = 1e9;
  for (int i = 0; i < m->ncp; i++) {
    bcg_real pc[3];
    bcg_contact_point(m, &k, i, pc);
    if (pc[2] + k.o[2] < lo) lo = pc[2] + k.o[2];
  }
  q[2] += (bcg_real)(height - lo + m->floor_z);
}

/* velocities: normal noise of scale vs */
static inline void test_state_vel(const bcg_mdata *m, bcg_real *u, double vs) {
  for (int i = 0; i < m->nv; i++) u[i] = (bcg_real)(vs * nrand());
}

#endif
