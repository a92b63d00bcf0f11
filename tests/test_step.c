/* tests/test_step.c - the substep and control step (bcg/step.h, core/sim.c):
 * central finite differences of the whole substep / control step adjoint
 * with respect to q (tangent), qvel and action, in double, on humanoid.xml
 * airborne and in contact, motor and PD actuation. Contact plumbing (gap,
 * Jacobian, free velocity, Delassus) is checked with a smooth synthetic
 * contact law defined here, so that the core's adjoint is tested on its own;
 * the real contact plugins are checked in test_contact_plugins and
 * test_physics. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcg/sim.h"
#include "testutil.h"
#include "stepfd.h"

#define HUMANOID "/usr/share/mujoco/model/humanoid/humanoid.xml"


static bcg_model *model;

static void fd_suite_on(const bcg_model *model, int actuation, int need_G, int control, double height,
                        const char *label) {
  const bcg_mdata *m = &model->m;
  bcg_simparams sp;
  bcg_simparams_default(model, &sp);
  sp.actuation = actuation;
  sp.need_G = need_G;
  sp.margin = 0.01;
  char err[256];
  bcg_sim *sim = bcg_sim_create(model, &sp, 1, &FAKE, NULL, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(sim);
  double q[BCG_MAX_Q], u[BCG_MAX_DOF], a[BCG_MAX_ACT], wq[BCG_MAX_Q], wu[BCG_MAX_DOF];
  double worst = 0;
  int contacts = 0;
  for (int trial = 0; trial < 3; trial++) {
    standing_state(m, q, u, height, 0.5);
    for (int i = 0; i < m->nu; i++) a[i] = 0.6 * (2 * urand() - 1);
    for (int i = 0; i < m->nq; i++) wq[i] = nrand();
    for (int i = 0; i < m->nv; i++) wu[i] = nrand();
    probe p = {sim, wq, wu, control};
    int na = 0;
    double e = check(&p, q, u, a, &na);
    contacts += na;
    if (e > 1e-6) fprintf(stderr, "%s trial %d: relerr %.3g (active contacts %d)\n", label, trial, e, na);
    worst = fmax(worst, e);
  }
  if (height < 0.01) CU_ASSERT(contacts > 0); /* the state really is in contact */
  bcg_test_report(label, worst);
  CU_ASSERT(worst < 1e-5);
  bcg_sim_free(sim);
}

static void fd_suite(int actuation, int need_G, int control, double height, const char *label) {
  fd_suite_on(model, actuation, need_G, control, height, label);
}

/* tests/models/general_robot.xml: dry friction (smoothed, with its
 * state-dependent implicit term), armature, actuatorfrcrange, motor /
 * position / velocity / general actuators with ranges, cylinder and mesh
 * contact points */
static bcg_model *load_rel(const char *rel) {
  char p[1024], err[1024];
  if (access(rel, R_OK) == 0) snprintf(p, sizeof p, "%s", rel);
  else snprintf(p, sizeof p, "%s/../%s", bcg_test_build_dir(), rel);
  if (access(p, R_OK) != 0) return NULL;
  bcg_model *mm = bcg_model_load(p, err, sizeof err);
  if (!mm) fprintf(stderr, "%s\n", err);
  return mm;
}
static void test_general_robot(void) {
  bcg_model *g = load_rel("tests/models/general_robot.xml");
  CU_ASSERT_PTR_NOT_NULL_FATAL(g);
  fd_suite_on(g, BCG_ACTUATION_MOTOR, 0, 0, 0.5, "general actuators, frictionloss: substep VJP airborne (rel)");
  fd_suite_on(g, BCG_ACTUATION_MOTOR, 1, 0, -0.002, "general actuators, frictionloss: substep VJP in contact (rel)");
  fd_suite_on(g, BCG_ACTUATION_MOTOR, 0, 1, 0.003, "general actuators: control step VJP near contact (rel)");
  fd_suite_on(g, BCG_ACTUATION_PD, 1, 1, -0.002, "general robot, PD: control step VJP in contact (rel)");
  bcg_model_free(g);
}

/* Unitree's G1 (../shared/robots, where present): a control step in contact
 * and in the air, motor and PD */
static void test_g1(void) {
  bcg_model *g = load_rel("../shared/robots/unitree_g1/scene_29dof.xml");
  if (!g) {
    bcg_test_skip("../shared/robots/unitree_g1 absent");
    return;
  }
  fd_suite_on(g, BCG_ACTUATION_PD, 1, 1, -0.002, "G1: control step VJP in contact, PD (rel)");
  fd_suite_on(g, BCG_ACTUATION_MOTOR, 0, 1, 0.3, "G1: control step VJP airborne, motor (rel)");
  fd_suite_on(g, BCG_ACTUATION_MOTOR, 1, 0, 0.001, "G1: substep VJP 1 mm above the floor, motor (rel)");
  bcg_model_free(g);
}

static void test_substep_airborne(void) { fd_suite(BCG_ACTUATION_MOTOR, 0, 0, 0.5, "substep VJP airborne, motor (rel)"); }
static void test_substep_pd(void) { fd_suite(BCG_ACTUATION_PD, 0, 0, 0.5, "substep VJP airborne, PD (rel)"); }
static void test_substep_contact(void) { fd_suite(BCG_ACTUATION_PD, 1, 0, -0.002, "substep VJP in contact + Delassus (rel)"); }
static void test_substep_near(void) { fd_suite(BCG_ACTUATION_MOTOR, 1, 0, 0.001, "substep VJP 1 mm above floor (rel)"); }
static void test_control_contact(void) { fd_suite(BCG_ACTUATION_PD, 1, 1, -0.002, "control step VJP in contact (rel)"); }
static void test_control_airborne(void) { fd_suite(BCG_ACTUATION_MOTOR, 0, 1, 0.3, "control step VJP airborne (rel)"); }

static void setup(void) {
  if (!model) {
    char err[512];
    model = bcg_model_load(HUMANOID, err, sizeof err);
    if (!model) fprintf(stderr, "%s\n", err);
  }
}
/* bcg_sim_set_timing: the stages fill while it is on (a forward and an
 * adjoint in contact), nothing changes in the results, and switching it off
 * clears and stops the totals */
static void test_stage_timing(void) {
  const bcg_mdata *m = &model->m;
  bcg_simparams sp;
  bcg_simparams_default(model, &sp);
  sp.actuation = BCG_ACTUATION_PD;
  sp.need_G = 1;
  sp.margin = 0.01;
  char err[256];
  bcg_sim *sim = bcg_sim_create(model, &sp, 1, &FAKE, NULL, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(sim);
  double q[BCG_MAX_Q], u[BCG_MAX_DOF], a[BCG_MAX_ACT], out[2][4][BCG_MAX_Q + BCG_MAX_DOF];
  standing_state(m, q, u, -0.002, 0.5);
  for (int i = 0; i < m->nu; i++) a[i] = 0.3;
  double sec[BCG_SIM_NSTAGE];
  for (int on = 0; on < 2; on++) {
    bcg_sim_set_timing(sim, on);
    double qo[BCG_MAX_Q], uo[BCG_MAX_DOF], qob[BCG_MAX_DOF], uob[BCG_MAX_DOF], qb[BCG_MAX_DOF], ub[BCG_MAX_DOF],
        ab[BCG_MAX_ACT] = {0};
    for (int i = 0; i < m->nv; i++) qob[i] = uob[i] = 1;
    CU_ASSERT_EQUAL_FATAL(bcg_sim_substep(sim, 1, q, u, a, qo, uo), 0);
    CU_ASSERT_EQUAL_FATAL(bcg_sim_substep_vjp(sim, 1, q, u, a, qob, uob, qb, ub, ab), 0);
    CU_ASSERT(sim->nact[0] > 0);
    memcpy(out[on][0], qo, sizeof(double) * m->nq);
    memcpy(out[on][1], uo, sizeof(double) * m->nv);
    memcpy(out[on][2], qb, sizeof(double) * m->nv);
    memcpy(out[on][3], ub, sizeof(double) * m->nv);
    bcg_sim_stage_seconds(sim, sec);
    for (int k = 0; k < BCG_SIM_NSTAGE; k++) {
      if (on) CU_ASSERT(sec[k] > 0);
      if (!on) CU_ASSERT(sec[k] == 0);
    }
  }
  CU_ASSERT(memcmp(out[0][0], out[1][0], sizeof(double) * m->nq) == 0);
  for (int k = 1; k < 4; k++) CU_ASSERT(memcmp(out[0][k], out[1][k], sizeof(double) * m->nv) == 0);
  bcg_sim_set_timing(sim, 0);
  double qo[BCG_MAX_Q], uo[BCG_MAX_DOF];
  CU_ASSERT_EQUAL(bcg_sim_substep(sim, 1, q, u, a, qo, uo), 0);
  bcg_sim_stage_seconds(sim, sec);
  for (int k = 0; k < BCG_SIM_NSTAGE; k++) CU_ASSERT(sec[k] == 0);
  bcg_sim_free(sim);
}

static void test_load(void) {
  setup();
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
}

BCG_TESTS({"load", test_load}, {"substep_airborne", test_substep_airborne}, {"substep_pd", test_substep_pd},
          {"substep_contact", test_substep_contact}, {"substep_near_contact", test_substep_near},
          {"control_step_contact", test_control_contact}, {"control_step_airborne", test_control_airborne},
          {"general_robot", test_general_robot}, {"g1", test_g1}, {"stage_timing", test_stage_timing});
BCG_RUN("step")
