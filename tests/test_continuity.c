/* tests/test_continuity.c - the forward map of a control step is continuous
 * near the floor for the smooth contact models (the scan and its
 * numbers are in docs/contact_continuity.md).
 *
 * humanoid.xml with the settings of configs/demo.ini (pd, control_dt 0.02,
 * 4 substeps, contact_margin 0.01, max_contacts 16), smoothed_kappa (kappa
 * 300, as the demo; and the kappa = 50 ablation, whose sigmoid is far from
 * zero at the margin) and soft (defaults). Twelve near-floor states: the
 * standing pose with small random joint angles (0.02 rad), velocities
 * (0.05) and actions (0.1), the lowest contact point 0, 0.5, .. 2 mm deep
 * (most states stand on 6-8 foot points, some of them inside the margin
 * band). For each state the root height is scanned in 1 um steps over
 * +-0.2 mm (401 control steps) and the velocity part of the output, u_E,
 * is compared between neighbours:
 *
 *   ratio = max_k |u(z_k+1) - u(z_k)| / median_k |u(z_k+1) - u(z_k)|
 *
 * (1 for a map that is linear over the scan). The widest step is then
 * refined three times by 10 (down to 1 nm): a jump keeps its size at every
 * level, a continuous map's change shrinks with the interval. Fails when a
 * step keeps more than 10 % of its size at 1 nm (a discontinuity) or when
 * the ratio exceeds 20 (a jump resolved only at the scale of the scan). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/env.h"
#include "bcg/loader.h"
#include "testutil.h"
#define TEST_RNG_SEED 0ull
#include "testrng.h"

#define HUMANOID "/usr/share/mujoco/model/humanoid/humanoid.xml"
#define NSTATE 12
#define SPAN 2e-4 /* m, each side */
#define STEP 1e-6 /* m */
#define NPT 401


static bcg_env *make_env(const char *contact_lines, bcg_config **cfgout) {
  char path[1024];
  snprintf(path, sizeof path, "%s", bcg_test_tmp_path("cfg_XXXXXX"));
  int fd = mkstemp(path);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "w");
  if (!f) return NULL;
  fprintf(f,
          "[model]\npath = %s\n[sim]\nsubsteps = 4\ncontrol_dt = 0.02\nactuation = pd\n"
          "contact_margin = 0.01\nmax_contacts = 16\n[contact]\n%s",
          HUMANOID, contact_lines);
  fclose(f);
  char err[2048];
  bcg_config *cfg = NULL;
  bcg_env *env = NULL;
  if (bcg_config_load_with(&cfg, bcg_registry_global(), path, 0, NULL, err, sizeof err))
    fprintf(stderr, "config: %s\n", err);
  else if (!(env = bcg_env_create(cfg, 1, err, sizeof err)))
    fprintf(stderr, "env: %s\n", err);
  unlink(path);
  *cfgout = cfg;
  return env;
}

static double lowest_gap(const bcg_mdata *m, const bcg_real *q) {
  static bcg_kin k;
  bcg_kinematics(m, q, &k);
  return bcg_lowest_gap(m, &k);
}

/* u_E of one control step from x0 with the root height moved by dz */
static void step_at(bcg_env *env, const bcg_real *x0, const bcg_real *a, double dz, bcg_real *uo) {
  bcg_real x[BCG_MAX_Q + BCG_MAX_DOF], xn[BCG_MAX_Q + BCG_MAX_DOF];
  memcpy(x, x0, sizeof(bcg_real) * env->nx);
  x[2] += dz;
  bcg_env_control_step(env, 1, x, a, xn, NULL);
  memcpy(uo, xn + env->nq, sizeof(bcg_real) * env->nv);
}

static double dist(const bcg_real *a, const bcg_real *b, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += (a[i] - b[i]) * (a[i] - b[i]);
  return sqrt(s);
}

static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Of the step [z0, z0 + h] (change d0), the share left after refining it
 * three times by 10: the widest of 10 sub-steps, then of its 10, then of its 10. */
static double refine(bcg_env *env, const bcg_real *x0, const bcg_real *a, double z0, double h, double d0) {
  bcg_real u0[BCG_MAX_DOF], u1[BCG_MAX_DOF];
  double worst = d0;
  for (int level = 0; level < 3; level++) {
    h /= 10;
    double best = -1, zb = z0;
    step_at(env, x0, a, z0, u0);
    for (int j = 0; j < 10; j++) {
      step_at(env, x0, a, z0 + (j + 1) * h, u1);
      double d = dist(u0, u1, env->nv);
      if (d > best) { best = d; zb = z0 + j * h; }
      memcpy(u0, u1, sizeof(bcg_real) * env->nv);
    }
    z0 = zb;
    worst = best;
  }
  return worst / d0;
}

/* scans NSTATE states; returns the worst ratio and writes the worst refined share */
static double scan_model(const char *label, const char *contact_lines, double *worst_share, int *states_over) {
  bcg_config *cfg = NULL;
  bcg_env *env = make_env(contact_lines, &cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(env);
  const bcg_mdata *m = &env->model->m;
  const int nq = m->nq, nv = m->nv, nu = m->nu;
  static bcg_real U[NPT][BCG_MAX_DOF];
  double steps[NPT - 1], sorted[NPT - 1];
  double worst = 0, rel10 = 0;
  *worst_share = 0;
  *states_over = 0;
  test_rs = 0x2545F4914F6CDD1Dull;
  for (int s = 0; s < NSTATE; s++) {
    bcg_real x0[BCG_MAX_Q + BCG_MAX_DOF], a[BCG_MAX_ACT];
    for (int i = 0; i < nq; i++) x0[i] = m->qpos0[i];
    for (int i = 7; i < nq; i++) x0[i] += 0.02 * nrand();
    for (int i = 0; i < nv; i++) x0[nq + i] = 0.05 * nrand();
    for (int i = 0; i < nu; i++) a[i] = 0.1 * nrand();
    const double pen = 5e-4 * (s % 5);
    x0[2] += -pen - lowest_gap(m, x0);
    for (int k = 0; k < NPT; k++) step_at(env, x0, a, -SPAN + k * STEP, U[k]);
    const int nact = env->sim->nact[0]; /* last substep of the last scan point */
    CU_ASSERT(nact >= 2);
    int kmax = 0;
    for (int k = 0; k + 1 < NPT; k++) {
      steps[k] = dist(U[k], U[k + 1], nv);
      if (steps[k] > steps[kmax]) kmax = k;
    }
    memcpy(sorted, steps, sizeof steps);
    qsort(sorted, NPT - 1, sizeof(double), cmpd);
    const double med = sorted[(NPT - 1) / 2];
    CU_ASSERT_FATAL(med > 0); /* the output does depend on the height */
    const double ratio = steps[kmax] / med;
    const double share = refine(env, x0, a, -SPAN + kmax * STEP, STEP, steps[kmax]);
    double un = 0;
    for (int i = 0; i < nv; i++) un += U[NPT / 2][i] * U[NPT / 2][i];
    un = sqrt(un);
    for (int k = 0; k + 10 < NPT; k++) rel10 = fmax(rel10, dist(U[k], U[k + 10], nv) / un);
    if (ratio > 20 || share > 0.1) {
      (*states_over)++;
      fprintf(stderr, "%s state %d (%.1f mm deep, %d contacts): widest 1 um step %.3g = %.0f x the median at "
              "dz = %+.1f um, %.2f of it left at 1 nm\n",
              label, s, pen * 1e3, nact, steps[kmax], ratio, (-SPAN + (kmax + 0.5) * STEP) * 1e6, share);
    }
    worst = fmax(worst, ratio);
    *worst_share = fmax(*worst_share, share);
  }
  char what[128];
  snprintf(what, sizeof what, "%s: worst max/median 1 um step over %d states", label, NSTATE);
  bcg_test_report(what, worst);
  snprintf(what, sizeof what, "%s: worst share of a 1 um step left at 1 nm", label);
  bcg_test_report(what, *worst_share);
  snprintf(what, sizeof what, "%s: states with a jump", label);
  bcg_test_report(what, *states_over);
  snprintf(what, sizeof what, "%s: largest |du| / |u| over 10 um", label);
  bcg_test_report(what, rel10);
  bcg_env_free(env);
  bcg_config_free(cfg);
  return worst;
}

static void check(const char *label, const char *contact_lines) {
  double share;
  int over;
  double ratio = scan_model(label, contact_lines, &share, &over);
  CU_ASSERT(share < 0.1);
  CU_ASSERT(ratio < 20);
  CU_ASSERT(over == 0);
}

static void test_smoothed_kappa(void) { check("smoothed_kappa 300", "plugin = smoothed_kappa\nkappa = 300\n"); }
static void test_smoothed_kappa50(void) { check("smoothed_kappa 50", "plugin = smoothed_kappa\nkappa = 50\n"); }
static void test_soft(void) { check("soft", "plugin = soft\n"); }

BCG_TESTS({"smoothed_kappa (kappa 300): root-height scan continuous", test_smoothed_kappa},
          {"smoothed_kappa (kappa 50): root-height scan continuous", test_smoothed_kappa50},
          {"soft: root-height scan continuous", test_soft});
BCG_RUN("continuity")
