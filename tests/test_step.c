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

#include "bcg/sim.h"
#include "testutil.h"

#define HUMANOID "/usr/share/mujoco/model/humanoid/humanoid.xml"

static unsigned long long rs = 0x9E3779B97F4A7C15ull;
static double urand(void) {
  rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
  return (double)(rs >> 11) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

/* ---- a smooth synthetic contact law exercising every input --------------- */
static int fake_solve(void *self, bcg_contact_batch *b) {
  (void)self;
  int nc = b->ncon, n3 = 3 * nc;
  for (int e = 0; e < b->nenv; e++) {
    int na = b->nactive[e];
    for (int r = 0; r < n3; r++) {
      int i = r / 3;
      double v = 0;
      if (i < na) {
        const double *c = b->c + (size_t)e * n3, *v0 = b->v0 + (size_t)e * n3;
        v = -0.3 * c[r] + 0.1 * v0[r] + (r % 3 == 0 ? -20 * b->gap[(size_t)e * nc + i] : 0);
        if (b->G)
          for (int s = 0; s < 3 * na; s++) v += 0.05 * b->G[(size_t)e * n3 * n3 + (size_t)r * n3 + s];
      }
      b->lam[(size_t)e * n3 + r] = v;
    }
    for (int i = 0; i < nc; i++) b->fn[(size_t)e * nc + i] = b->lam[(size_t)e * n3 + 3 * i] / b->dt;
  }
  return 0;
}
static int fake_vjp(void *self, const bcg_contact_batch *b, bcg_contact_adjoint *a) {
  (void)self;
  int nc = b->ncon, n3 = 3 * nc;
  for (int e = 0; e < b->nenv; e++) {
    int na = b->nactive[e];
    for (int r = 0; r < 3 * na; r++) {
      double lb = a->lam_bar[(size_t)e * n3 + r];
      a->c_bar[(size_t)e * n3 + r] += -0.3 * lb;
      a->v0_bar[(size_t)e * n3 + r] += 0.1 * lb;
      if (r % 3 == 0) a->gap_bar[(size_t)e * nc + r / 3] += -20 * lb;
      if (a->G_bar)
        for (int s = 0; s < 3 * na; s++) a->G_bar[(size_t)e * n3 * n3 + (size_t)r * n3 + s] += 0.05 * lb;
    }
  }
  return 0;
}
static const bcg_contact_ops FAKE = {sizeof(bcg_contact_ops), NULL, NULL, fake_solve, fake_vjp, NULL, NULL};

static bcg_model *model;

static void standing_state(const bcg_mdata *m, double *q, double *u, double height, double vs) {
  for (int i = 0; i < m->nq; i++) q[i] = m->qpos0[i];
  for (int i = 7; i < m->nq; i++) q[i] += 0.1 * nrand();
  double n = 0;
  for (int i = 3; i < 7; i++) { q[i] += 0.05 * nrand(); n += q[i] * q[i]; }
  for (int i = 3; i < 7; i++) q[i] /= sqrt(n);
  q[0] = 0.3 * nrand(); q[1] = 0.3 * nrand();
  /* place the lowest contact point at `height` */
  static bcg_kin k;
  bcg_kinematics(m, q, &k);
  double lo = 1e9;
  for (int i = 0; i < m->ncp; i++) {
    double pc[3];
    bcg_contact_point(m, &k, i, pc);
    if (pc[2] + k.o[2] < lo) lo = pc[2] + k.o[2];
  }
  q[2] += height - lo + m->floor_z;
  for (int i = 0; i < m->nv; i++) u[i] = vs * nrand();
}

/* scalar of the control-step output: w . (raw q_E) + z . u_E */
typedef struct probe {
  bcg_sim *sim;
  const double *wq, *wu;
  int control; /* 1: whole control step, 0: one substep */
} probe;

static double run(const probe *p, const double *q, const double *u, const double *a) {
  const bcg_mdata *m = &model->m;
  double qo[BCG_MAX_Q], uo[BCG_MAX_DOF], s = 0;
  if (p->control) bcg_sim_control_step(p->sim, 1, q, u, a, qo, uo, NULL);
  else bcg_sim_substep(p->sim, 1, q, u, a, qo, uo);
  for (int i = 0; i < m->nq; i++) s += p->wq[i] * qo[i];
  for (int i = 0; i < m->nv; i++) s += p->wu[i] * uo[i];
  return s;
}

static double check(const probe *p, const double *q, const double *u, const double *a, int *nact_out) {
  const bcg_mdata *m = &model->m;
  int nv = m->nv, nq = m->nq, nu = m->nu;
  double qo[BCG_MAX_Q], uo[BCG_MAX_DOF], xob[2 * BCG_MAX_DOF], xb[2 * BCG_MAX_DOF], ab[BCG_MAX_ACT] = {0};
  static double tape[16 * (BCG_MAX_Q + BCG_MAX_DOF)];
  bcg_sim *sim = p->sim;
  if (p->control) bcg_sim_control_step(sim, 1, q, u, a, qo, uo, tape);
  else bcg_sim_substep(sim, 1, q, u, a, qo, uo);
  *nact_out = sim->nact[0];
  bcg_qgrad_to_tangent(m, qo, p->wq, xob);
  for (int i = 0; i < nv; i++) xob[nv + i] = p->wu[i];
  if (p->control) bcg_sim_control_step_vjp(sim, 1, tape, a, xob, xb, ab);
  else bcg_sim_substep_vjp(sim, 1, q, u, a, xob, xob + nv, xb, xb + nv, ab);
  double gq[BCG_MAX_DOF], gu[BCG_MAX_DOF], ga[BCG_MAX_ACT];
  double worst = 0;
  for (int pass = 0; pass < 2; pass++) {
    double eps = pass ? 1e-7 : 1e-6;
    for (int i = 0; i < nv; i++) {
      double d[BCG_MAX_DOF] = {0}, qp[BCG_MAX_Q], qm[BCG_MAX_Q], up[BCG_MAX_DOF];
      d[i] = eps; bcg_qadd(m, q, d, qp);
      d[i] = -eps; bcg_qadd(m, q, d, qm);
      gq[i] = (run(p, qp, u, a) - run(p, qm, u, a)) / (2 * eps);
      memcpy(up, u, sizeof(double) * nv);
      up[i] += eps; double e1 = run(p, q, up, a);
      up[i] -= 2 * eps; double e2 = run(p, q, up, a);
      gu[i] = (e1 - e2) / (2 * eps);
    }
    for (int i = 0; i < nu; i++) {
      double ap[BCG_MAX_ACT];
      memcpy(ap, a, sizeof(double) * nu);
      ap[i] += eps; double e1 = run(p, q, u, ap);
      ap[i] -= 2 * eps; double e2 = run(p, q, u, ap);
      ga[i] = (e1 - e2) / (2 * eps);
    }
    double e = fmax(fmax(bcg_vec_relerr(xb, gq, nv), bcg_vec_relerr(xb + nv, gu, nv)), bcg_vec_relerr(ab, ga, nu));
    if (pass == 0) worst = e;
    else worst = fmin(worst, e); /* FD noise: the better step size is the check */
  }
  (void)nq;
  return worst;
}

static void fd_suite(int actuation, int need_G, int control, double height, const char *label) {
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
static void test_load(void) {
  setup();
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
}

BCG_TESTS({"load", test_load}, {"substep_airborne", test_substep_airborne}, {"substep_pd", test_substep_pd},
          {"substep_contact", test_substep_contact}, {"substep_near_contact", test_substep_near},
          {"control_step_contact", test_control_contact}, {"control_step_airborne", test_control_airborne});
BCG_RUN("step")
