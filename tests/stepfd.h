/* tests/stepfd.h - shared by the stepper suites (test_step.c,
 * test_domain_rand.c): a deterministic RNG, a humanoid state with its lowest
 * contact point at a given height, and the central finite-difference check
 * of a substep or control step adjoint w.r.t. q (tangent), qvel and action,
 * for a scalar w . raw q_E + z . u_E of the output (two step sizes; the
 * better one is the check). */
#ifndef BCG_TESTS_STEPFD_H
#define BCG_TESTS_STEPFD_H

#include <math.h>
#include <string.h>

#include "bcg/sim.h"
#include "testutil.h"
#include "testrng.h"
#include "teststate.h"


static void standing_state(const bcg_mdata *m, double *q, double *u, double height, double vs) {
  test_state_pose(m, q, 0.1);
  test_state_place(m, q, height);
  test_state_vel(m, u, vs);
}

/* ---- a smooth synthetic contact law exercising every input --------------- */
/* lam = coef c + 0.1 v0 - 20 gap (normal rows) + 0.05 sum G: the core's
 * contact plumbing (gap, Jacobian, free velocity, Delassus) checked on its
 * own. fake_coef: the coefficient of c per row (NULL: -0.3 everywhere;
 * test_domain_rand makes it depend on the per-environment friction). */
static double (*fake_coef)(const bcg_contact_batch *b, int e, int r);
static double fake_c(const bcg_contact_batch *b, int e, int r) { return fake_coef ? fake_coef(b, e, r) : -0.3; }
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
        v = fake_c(b, e, r) * c[r] + 0.1 * v0[r] + (r % 3 == 0 ? -20 * b->gap[(size_t)e * nc + i] : 0);
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
      a->c_bar[(size_t)e * n3 + r] += fake_c(b, e, r) * lb;
      a->v0_bar[(size_t)e * n3 + r] += 0.1 * lb;
      if (r % 3 == 0) a->gap_bar[(size_t)e * nc + r / 3] += -20 * lb;
      if (a->G_bar)
        for (int s = 0; s < 3 * na; s++) a->G_bar[(size_t)e * n3 * n3 + (size_t)r * n3 + s] += 0.05 * lb;
    }
  }
  return 0;
}
static const bcg_contact_ops FAKE = {.size = sizeof(bcg_contact_ops), .solve = fake_solve, .solve_vjp = fake_vjp};

/* scalar of the control-step output: w . (raw q_E) + z . u_E */
typedef struct probe {
  bcg_sim *sim;
  const double *wq, *wu;
  int control; /* 1: whole control step, 0: one substep */
} probe;

static double run(const probe *p, const double *q, const double *u, const double *a) {
  const bcg_mdata *m = &p->sim->model->m;
  double qo[BCG_MAX_Q], uo[BCG_MAX_DOF], s = 0;
  if (p->control) bcg_sim_control_step(p->sim, 1, q, u, a, qo, uo, NULL);
  else bcg_sim_substep(p->sim, 1, q, u, a, qo, uo);
  for (int i = 0; i < m->nq; i++) s += p->wq[i] * qo[i];
  for (int i = 0; i < m->nv; i++) s += p->wu[i] * uo[i];
  return s;
}

static double check(const probe *p, const double *q, const double *u, const double *a, int *nact_out) {
  const bcg_mdata *m = &p->sim->model->m;
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

#endif
