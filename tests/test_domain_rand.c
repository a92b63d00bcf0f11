/* tests/test_domain_rand.c - domain randomisation ([sim] dr_* keys,
 * bcg_domain in bcg/sim.h, bcg_env_randomize in bcg/env.h):
 *   1. the substep and control-step VJPs against central finite differences
 *      on humanoid.xml in contact with randomised masses, centre-of-mass
 *      offsets and friction (and pushes, which are additive constants),
 *      through the slot -> environment map; the machinery is copied from
 *      tests/test_step.c, with its synthetic contact law made to read mu;
 *   2. reproducibility: the same (seed, env, draw) gives the same model bit
 *      for bit, different environments / draws / seeds differ, dom->draw
 *      records each environment's draw index (the learners' re-draws at
 *      resets, their checkpoints and resume: tests/test_learners.c);
 *   3. a standing humanoid with randomised masses carries its randomised
 *      weight (sum of scaled masses * g) on the floor, within 2 %;
 *   4. with every dr key at its default the env has no domain and steps bit
 *      for bit like a plain sim; per-environment models equal to the model
 *      also step bit for bit like it. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/env.h"
#include "bcg/loader.h"
#include "testutil.h"
#include "stepfd.h"

#define HUMANOID "/usr/share/mujoco/model/humanoid/humanoid.xml"

/* ---- stepfd.h's synthetic contact law, with friction in it --------------- */
static double coef(const bcg_contact_batch *b, int e, int r) {
  return r % 3 == 0 ? -0.3 : -0.3 * (1 + b->mu[(size_t)e * b->ncon + r / 3]);
}

static bcg_model *model;

static void setup(void) {
  fake_coef = coef;
  if (!model) {
    char err[512];
    model = bcg_model_load(HUMANOID, err, sizeof err);
    if (!model) fprintf(stderr, "%s\n", err);
  }
}


static bcg_drparams dr_on(void) {
  bcg_drparams dr;
  bcg_drparams_default(&dr);
  dr.friction_min = 0.5;
  dr.friction_max = 1.25;
  dr.mass_scale = 0.1;
  dr.com_offset = 0.02;
  return dr;
}

/* an env of nenv environments on the shared model, not owning it */
static bcg_env *fake_env(int nenv, uint64_t seed, int actuation, int need_G, const bcg_drparams *dr) {
  bcg_simparams sp;
  bcg_simparams_default(model, &sp);
  sp.actuation = actuation;
  sp.need_G = need_G;
  sp.margin = 0.01;
  char err[256];
  bcg_env *env = bcg_env_create_from(model, &sp, &FAKE, NULL, nenv, seed, 0, err, sizeof err);
  if (!env) { fprintf(stderr, "%s\n", err); return NULL; }
  if (dr && bcg_env_set_domain(env, dr, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    bcg_env_free(env);
    return NULL;
  }
  return env;
}

static void fd_suite(int actuation, int need_G, int control, double height, int push, const char *label) {
  setup();
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  const bcg_mdata *m = &model->m;
  bcg_drparams dr = dr_on();
  if (push) { dr.push_interval = 0.01; dr.push_velocity = 0.5; } /* a push at every control step */
  bcg_env *env = fake_env(3, 7, actuation, need_G, &dr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(env);
  bcg_sim *sim = env->sim;
  double q[BCG_MAX_Q], u[BCG_MAX_DOF], a[BCG_MAX_ACT], wq[BCG_MAX_Q], wu[BCG_MAX_DOF];
  double worst = 0;
  int contacts = 0;
  for (int trial = 0; trial < 3; trial++) {
    int map[1] = {2 - trial}; /* slot 0 is environment 2, 1, 0 */
    bcg_sim_set_envmap(sim, map);
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
    bcg_sim_set_envmap(sim, NULL);
  }
  CU_ASSERT(contacts > 0);
  bcg_test_report(label, worst);
  CU_ASSERT(worst < 1e-5);
  bcg_env_free(env);
}

static void test_substep_contact(void) {
  fd_suite(BCG_ACTUATION_PD, 1, 0, -0.002, 0, "DR substep VJP in contact + Delassus (rel)");
}
static void test_substep_motor(void) {
  fd_suite(BCG_ACTUATION_MOTOR, 0, 0, -0.002, 0, "DR substep VJP in contact, motor (rel)");
}
static void test_control_contact(void) {
  fd_suite(BCG_ACTUATION_PD, 1, 1, -0.002, 0, "DR control step VJP in contact (rel)");
}
static void test_control_push(void) {
  fd_suite(BCG_ACTUATION_PD, 1, 1, -0.002, 1, "DR control step VJP in contact, pushes (rel)");
}

/* the randomised models really differ from the model and the friction is in the batch */
static void test_models_used(void) {
  setup();
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  bcg_drparams dr = dr_on();
  bcg_env *env = fake_env(2, 7, BCG_ACTUATION_PD, 0, &dr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(env);
  const bcg_mdata *m = &model->m;
  double q[2 * BCG_MAX_Q], u[2 * BCG_MAX_DOF], a[2 * BCG_MAX_ACT] = {0}, qo[2 * BCG_MAX_Q], uo[2 * BCG_MAX_DOF];
  standing_state(m, q, u, -0.002, 0);
  memcpy(q + m->nq, q, sizeof(double) * m->nq);
  memcpy(u + m->nv, u, sizeof(double) * m->nv);
  CU_ASSERT_EQUAL(bcg_sim_substep(env->sim, 2, q, u, a, qo, uo), 0);
  int nc = env->sim->ncon, diff = 0;
  CU_ASSERT(env->sim->nact[0] > 0);
  for (int e = 0; e < 2; e++)
    for (int r = 0; r < env->sim->nact[e]; r++) CU_ASSERT_EQUAL(env->sim->mu[e * nc + r], env->dom->mu[e]);
  for (int i = 0; i < m->nv; i++) diff |= uo[i] != uo[m->nv + i];
  CU_ASSERT(diff); /* same state, different models */
  CU_ASSERT(bcg_sim_substep(env->sim, 3, q, u, a, qo, uo) != 0); /* slot 2 has no environment */
  double mass = 0, mass0 = 0;
  for (int b = 1; b < m->nbody; b++) { mass += env->dom->m[0].body_mass[b]; mass0 += m->body_mass[b]; }
  CU_ASSERT(fabs(mass / mass0 - 1) > 1e-4);
  bcg_env_free(env);
}

/* ---- 2. reproducibility -------------------------------------------------------------- */
static void test_reproducible(void) {
  setup();
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  bcg_drparams dr = dr_on();
  bcg_env *e1 = fake_env(4, 11, BCG_ACTUATION_PD, 0, &dr), *e2 = fake_env(4, 11, BCG_ACTUATION_PD, 0, &dr);
  bcg_env *e3 = fake_env(4, 12, BCG_ACTUATION_PD, 0, &dr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(e1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(e2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(e3);
  size_t ms = sizeof(bcg_mdata);
  /* same seed, same draw: identical, bit for bit */
  CU_ASSERT_EQUAL(memcmp(e1->dom->m, e2->dom->m, 4 * ms), 0);
  CU_ASSERT_EQUAL(memcmp(e1->dom->mu, e2->dom->mu, 4 * sizeof(bcg_real)), 0);
  /* different environments differ, and each draw lies in its range */
  int same = 0;
  for (int i = 0; i < 4; i++)
    for (int j = i + 1; j < 4; j++) {
      same += memcmp(&e1->dom->m[i], &e1->dom->m[j], ms) == 0;
      same += e1->dom->mu[i] == e1->dom->mu[j];
    }
  CU_ASSERT_EQUAL(same, 0);
  const bcg_mdata *m = &model->m;
  int inrange = 1;
  for (int e = 0; e < 4; e++) {
    inrange &= e1->dom->mu[e] >= 0.5 && e1->dom->mu[e] <= 1.25;
    for (int b = 1; b < m->nbody; b++) {
      double s = e1->dom->m[e].body_mass[b] / m->body_mass[b];
      inrange &= s >= 0.9 - 1e-12 && s <= 1.1 + 1e-12;
      inrange &= fabs(e1->dom->m[e].body_inertia[b][0] / m->body_inertia[b][0] - s) < 1e-12;
      for (int t = 0; t < 3; t++) inrange &= fabs(e1->dom->m[e].body_ipos[b][t] - m->body_ipos[b][t]) <= 0.02 + 1e-12;
    }
  }
  CU_ASSERT(inrange);
  /* another seed differs */
  CU_ASSERT(memcmp(e1->dom->m, e3->dom->m, ms) != 0);
  /* a new draw of env 1 changes only env 1; drawing 0 again restores it */
  bcg_mdata keep0 = e1->dom->m[0], keep1 = e1->dom->m[1];
  int one = 1;
  CU_ASSERT_EQUAL(e1->dom->draw[1], 0); /* the creation draw */
  bcg_env_randomize(e1, &one, 1, 5);
  CU_ASSERT_EQUAL(e1->dom->draw[1], 5); /* recorded for the learners' checkpoints */
  CU_ASSERT_EQUAL(e1->dom->draw[0], 0);
  CU_ASSERT_EQUAL(memcmp(&keep0, &e1->dom->m[0], ms), 0);
  CU_ASSERT(memcmp(&keep1, &e1->dom->m[1], ms) != 0);
  CU_ASSERT(e1->dom->mu[1] != e2->dom->mu[1]);
  bcg_env_randomize(e1, &one, 1, 0);
  CU_ASSERT_EQUAL(memcmp(&keep1, &e1->dom->m[1], ms), 0);
  CU_ASSERT_EQUAL(e1->dom->mu[1], e2->dom->mu[1]);
  /* pushes: the same clock gives the same kick; they happen at about the set rate */
  bcg_drparams dp;
  bcg_drparams_default(&dp);
  dp.push_interval = 0.2; /* control_dt 0.02: p = 0.1 */
  dp.push_velocity = 0.5;
  bcg_env *ep = fake_env(1, 3, BCG_ACTUATION_PD, 0, &dp);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ep);
  CU_ASSERT_PTR_NULL(ep->dom->m);
  CU_ASSERT_PTR_NULL(ep->dom->mu);
  double x[BCG_MAX_Q + BCG_MAX_DOF] = {0}, xn[BCG_MAX_Q + BCG_MAX_DOF], xn2[BCG_MAX_Q + BCG_MAX_DOF],
         a[BCG_MAX_ACT] = {0};
  double u0[BCG_MAX_DOF];
  standing_state(m, x, x + m->nq, 0.5, 0); /* airborne: only gravity and the push */
  int pushes = 0, steps = 500, ok = 1;
  bcg_env *eq = fake_env(1, 3, BCG_ACTUATION_PD, 0, NULL); /* the same without pushes */
  CU_ASSERT_PTR_NOT_NULL_FATAL(eq);
  for (int k = 0; k < steps; k++) {
    bcg_env_step(ep, 1, x, a, xn, NULL);
    bcg_env_step(eq, 1, x, a, xn2, NULL);
    for (int i = 0; i < m->nv; i++) u0[i] = xn[m->nq + i] - xn2[m->nq + i];
    double kick = hypot(u0[0], u0[1]);
    if (kick > 0) {
      pushes++;
      ok &= fabs(kick - 0.5) < 1e-12 && u0[2] == 0;
      for (int i = 3; i < m->nv; i++) ok &= u0[i] == 0;
    }
  }
  CU_ASSERT(ok);
  CU_ASSERT_EQUAL(ep->dom->clock[0], (uint32_t)steps);
  printf("\n  pushes in %d control steps at p = 0.1: %d\n", steps, pushes);
  CU_ASSERT(pushes > 25 && pushes < 75); /* Binomial(500, 0.1): 50 +- 6.7 */
  bcg_env_free(ep);
  bcg_env_free(eq);
  bcg_env_free(e1);
  bcg_env_free(e2);
  bcg_env_free(e3);
}

/* ---- configs -------------------------------------------------------------------------- */
static char tmpdir[128];
static bcg_env *env_from_ini(const char *ini, int nenv, bcg_config **cfgout) {
  if (!tmpdir[0]) snprintf(tmpdir, sizeof tmpdir, "%s", bcg_test_tmpdir()); /* removed at exit */
  char path[256];
  snprintf(path, sizeof path, "%s/run.ini", tmpdir);
  FILE *f = fopen(path, "w");
  if (!f) return NULL;
  fputs(ini, f);
  fclose(f);
  char err[2048];
  bcg_config *cfg = NULL;
  if (bcg_config_load_with(&cfg, bcg_registry_global(), path, 0, NULL, err, sizeof err)) {
    fprintf(stderr, "config: %s\n", err);
    return NULL;
  }
  bcg_env *env = bcg_env_create(cfg, nenv, err, sizeof err);
  if (!env) fprintf(stderr, "env: %s\n", err);
  *cfgout = cfg;
  return env;
}

static double lowest_gap(const bcg_mdata *m, const bcg_real *x) {
  static bcg_kin k;
  bcg_kinematics(m, x, &k);
  return bcg_lowest_gap(m, &k);
}


/* ---- 1b. the bcg estimator with DR: backward vs FD of its bundled forward ---------------- */
/* env 0 bundles at t = 0 (the nominal batch is then compacted to env 1 and the
 * branch batch replicates env 0): a wrong slot -> environment map in the
 * forward or the backward would show. Pushes are on; the push clock is reset
 * before every rollout so that every FD rollout gets the same kicks. */
typedef struct est {
  const bcg_estimator_ops *ops;
  void *self;
  bcg_config *cfg;
} est;

static int est_rollout(est *E, bcg_env *env, int T, const double *x0, const double *acts, double *xs) {
  int n = env->nenv, nx = env->nx, nu = env->nu;
  for (int e = 0; e < n; e++) env->dom->clock[e] = 0;
  if (E->ops->begin(E->self)) return -1;
  memcpy(xs, x0, sizeof(double) * n * nx);
  for (int t = 0; t < T; t++)
    if (E->ops->forward(E->self, t, xs + (size_t)t * n * nx, acts + (size_t)t * n * nu, xs + (size_t)(t + 1) * n * nx))
      return -1;
  return 0;
}

static void test_bcg_estimator_fd(void) {
  if (!bcg_registry_find(bcg_registry_global(), BCG_KIND_CONTACT, "smoothed_kappa") ||
      !bcg_registry_find(bcg_registry_global(), BCG_KIND_ESTIMATOR, "bcg")) {
    CU_FAIL("plugin missing");
    return;
  }
  char ini[1024];
  snprintf(ini, sizeof ini,
           "[run]\nseed = 7\n[model]\npath = %s\n[sim]\nactuation = pd\n"
           "dr_friction_min = 0.5\ndr_friction_max = 1.25\ndr_mass_scale = 0.1\ndr_com_offset = 0.02\n"
           "dr_push_interval = 0.04\ndr_push_velocity = 0.5\n[contact]\nplugin = smoothed_kappa\n"
           "[estimator]\nplugin = bcg\nbranches = 3\nduration = 2\nforce_threshold = 100\nfixed_draws = true\n",
           HUMANOID);
  bcg_config *cfg = NULL;
  int n = 2, T = 3;
  bcg_env *env = env_from_ini(ini, n, &cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(env);
  CU_ASSERT_PTR_NOT_NULL_FATAL(env->dom);
  est E = {0};
  E.cfg = cfg;
  const bcg_plugin *pl = bcg_config_plugin(cfg, BCG_KIND_ESTIMATOR);
  CU_ASSERT_PTR_NOT_NULL_FATAL(pl);
  E.ops = pl->desc->ops;
  char err[512];
  E.self = E.ops->create(bcg_services_host(), bcg_config_section(cfg, "estimator"), env, T, err, sizeof err);
  if (!E.self) fprintf(stderr, "create: %s\n", err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(E.self);
  const bcg_mdata *m = &env->model->m;
  int nx = env->nx, nq = env->nq, nv = env->nv, nu = env->nu, n2 = 2 * nv;
  double *x0 = malloc(sizeof(double) * n * nx), *acts = malloc(sizeof(double) * T * n * nu);
  double *w = malloc(sizeof(double) * (T + 1) * n * nx), *xs = malloc(sizeof(double) * (T + 1) * n * nx);
  double h[2] = {-0.003, 0.3};
  for (int e = 0; e < n; e++) {
    double *xe = x0 + (size_t)e * nx;
    standing_state(m, xe, xe + nq, h[e], 0.1);
    xe[nq + 2] = e == 0 ? -0.4 : 0.05;
  }
  for (int i = 0; i < T * n * nu; i++) acts[i] = 0.3 * (2 * urand() - 1);
  for (int i = 0; i < (T + 1) * n * nx; i++) w[i] = nrand();
  /* the learner's sweep of L = sum_t w_t . x_t */
  CU_ASSERT_FATAL(est_rollout(&E, env, T, x0, acts, xs) == 0);
  bcg_estimator_stats st;
  memset(&st, 0, sizeof st);
  double *xnb = malloc(sizeof(double) * n * n2), *xb = malloc(sizeof(double) * n * n2);
  double *abar = calloc((size_t)T * n * nu, sizeof(double));
  for (int t = T; t >= 1; t--) {
    double tb[2 * BCG_MAX_DOF];
    for (int e = 0; e < n; e++) {
      bcg_qgrad_to_tangent(m, xs + ((size_t)t * n + e) * nx, w + ((size_t)t * n + e) * nx, tb);
      for (int i = 0; i < nv; i++) tb[nv + i] = w[((size_t)t * n + e) * nx + nq + i];
      for (int i = 0; i < n2; i++) xnb[e * n2 + i] = (t == T ? 0 : xb[e * n2 + i]) + tb[i];
    }
    CU_ASSERT_FATAL(E.ops->backward(E.self, t - 1, xnb, xb, abar + (size_t)(t - 1) * n * nu) == 0);
  }
  /* FD over every x_0 coordinate of both envs and a strided subset of the actions */
  int nc = 0, *coord = malloc(sizeof(int) * (n * n2 + T * n * nu));
  for (int i = 0; i < n * n2; i++) coord[nc++] = i;
  for (int i = 0; i < T * n * nu; i += 4) coord[nc++] = n * n2 + i;
  double *an = malloc(sizeof(double) * nc), *fd = malloc(sizeof(double) * nc);
  double *xp = malloc(sizeof(double) * n * nx), *ap = malloc(sizeof(double) * T * n * nu);
  for (int k = 0; k < nc; k++) an[k] = coord[k] < n * n2 ? xb[coord[k]] : abar[coord[k] - n * n2];
  double worst = 1e300;
  for (int pass = 0; pass < 2 && worst > 1e-6; pass++) {
    double eps = pass ? 1e-7 : 1e-6;
    for (int k = 0; k < nc; k++) {
      int c = coord[k];
      double L[2];
      for (int sg = 0; sg < 2; sg++) {
        double d = sg ? -eps : eps;
        memcpy(xp, x0, sizeof(double) * n * nx);
        memcpy(ap, acts, sizeof(double) * T * n * nu);
        if (c < n * n2) {
          int e = c / n2, i = c % n2;
          if (i < nv) {
            double dq[BCG_MAX_DOF] = {0};
            dq[i] = d;
            bcg_qadd(m, x0 + (size_t)e * nx, dq, xp + (size_t)e * nx);
          } else {
            xp[(size_t)e * nx + nq + i - nv] += d;
          }
        } else {
          ap[c - n * n2] += d;
        }
        CU_ASSERT_FATAL(est_rollout(&E, env, T, xp, ap, xs) == 0);
        L[sg] = 0;
        for (int i = nx * n; i < (T + 1) * n * nx; i++) L[sg] += w[i] * xs[i];
      }
      fd[k] = (L[0] - L[1]) / (2 * eps);
    }
    double e = fmax(fmax(bcg_vec_relerr(an, fd, n2), bcg_vec_relerr(an + n2, fd + n2, n2)),
                    bcg_vec_relerr(an + n * n2, fd + n * n2, nc - n * n2));
    if (e > 1e-5) fprintf(stderr, "DR bcg estimator FD (eps %g): relerr %.3g\n", eps, e);
    worst = fmin(worst, e);
  }
  E.ops->stats(E.self, &st);
  CU_ASSERT(st.triggered >= 1); /* env 0 bundled */
  bcg_test_report("DR bcg estimator backward vs FD, B=3 H=2, pushes (rel)", worst);
  CU_ASSERT(worst < 1e-5);
  free(x0); free(acts); free(w); free(xs); free(xnb); free(xb); free(abar); free(coord); free(an); free(fd);
  free(xp); free(ap);
  E.ops->destroy(E.self);
  bcg_env_free(env);
  bcg_config_free(cfg);
}

/* ---- 3. a heavier body presses harder ------------------------------------------------- */
static void test_standing_weight(void) {
  const char *plugins[] = {"smoothed_kappa", "soft"};
  for (int pi = 0; pi < 2; pi++) {
    if (!bcg_registry_find(bcg_registry_global(), BCG_KIND_CONTACT, plugins[pi])) { CU_FAIL("plugin missing"); continue; }
    char ini[1024];
    snprintf(ini, sizeof ini,
             "[run]\nseed = 5\n[model]\npath = %s\n[sim]\nactuation = pd\nkp = 3000\nkd = 200\npd_torque_limit = false\n"
             "dr_friction_min = 0.5\ndr_friction_max = 1.25\ndr_mass_scale = 0.1\ndr_com_offset = 0.02\n"
             "[contact]\nplugin = %s\n", HUMANOID, plugins[pi]);
    bcg_config *cfg = NULL;
    const int N = 3;
    bcg_env *env = env_from_ini(ini, N, &cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(env);
    CU_ASSERT_PTR_NOT_NULL_FATAL(env->dom);
    const bcg_mdata *m = &env->model->m;
    int nx = env->nx, nq = env->nq;
    bcg_real *x = calloc((size_t)N * nx, sizeof(bcg_real)), *xn = calloc((size_t)N * nx, sizeof(bcg_real));
    bcg_real a[3 * BCG_MAX_ACT] = {0};
    for (int e = 0; e < N; e++) {
      bcg_real *xe = x + (size_t)e * nx;
      for (int i = 0; i < nq; i++) xe[i] = m->qpos0[i];
      xe[2] += -lowest_gap(m, xe) - 0.0005;
    }
    double fsum[3] = {0, 0, 0};
    int steps = (int)(4.0 / env->control_dt + 0.5), last = (int)(0.5 / env->control_dt), nf = 0;
    for (int k = 0; k < steps; k++) {
      bcg_env_step(env, N, x, a, xn, NULL);
      memcpy(x, xn, sizeof(bcg_real) * (size_t)N * nx);
      if (k >= steps - last) {
        for (int e = 0; e < N; e++)
          for (int i = 0; i < env->sim->nact[e]; i++) fsum[e] += env->sim->fn[(size_t)e * env->sim->ncon + i];
        nf++;
      }
    }
    double mass0 = 0;
    for (int b = 1; b < m->nbody; b++) mass0 += m->body_mass[b];
    double g = fabs(m->gravity[2]), worst = 0;
    for (int e = 0; e < N; e++) {
      double mass = 0;
      for (int b = 1; b < m->nbody; b++) mass += env->dom->m[e].body_mass[b];
      double f = fsum[e] / nf, r = f / (mass * g);
      printf("\n  %s env %d: mass %.3f kg (model %.3f), friction %.3f, normal force / randomised weight %.4f,"
             " / model weight %.4f", plugins[pi], e, mass, mass0, env->dom->mu[e], r, f / (mass0 * g));
      worst = fmax(worst, fabs(r - 1));
    }
    printf("\n");
    char what[128];
    snprintf(what, sizeof what, "DR standing %s: max |normal force / randomised weight - 1|", plugins[pi]);
    bcg_test_report(what, worst);
    CU_ASSERT(worst < 0.02);
    free(x);
    free(xn);
    bcg_env_free(env);
    bcg_config_free(cfg);
  }
}

/* ---- the control step in thread slices (bcg_sim.slices) --------------------------------- */
/* With a contact plugin that declares BCG_CAP_SLICES the env's control step
 * and its adjoint run in one parallel region, the plugin called on each
 * thread's block of environments. Against the substep-wise path (slices
 * off) on the same sim: states, tapes, diagnostics, state and action
 * adjoints bit for bit, over 12 control steps of 7 environments (in contact,
 * near it, airborne) with 2, 3 and 8 threads (blocks of unequal size, and
 * empty blocks). */
static void test_slices_bitwise(void) {
  const char *plugins[] = {"smoothed_kappa", "soft"};
  int worst = 0, tested = 0;
  for (int pi = 0; pi < 2; pi++) {
    if (!bcg_registry_find(bcg_registry_global(), BCG_KIND_CONTACT, plugins[pi])) { CU_FAIL("plugin missing"); continue; }
    char ini[512];
    snprintf(ini, sizeof ini, "[model]\npath = %s\n[sim]\nactuation = pd\n[contact]\nplugin = %s\n", HUMANOID,
             plugins[pi]);
    bcg_config *cfg = NULL;
    enum { N = 7 };
    bcg_env *env = env_from_ini(ini, N, &cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(env);
    CU_ASSERT_EQUAL(env->sim->slices, 1);
    const bcg_mdata *m = &env->model->m;
    int nq = env->nq, nv = env->nv, nu = env->nu, ns = env->sim->sp.substeps;
    size_t tsz = (size_t)ns * N * (nq + nv);
    bcg_real *q = malloc(sizeof(bcg_real) * N * nq), *u = malloc(sizeof(bcg_real) * N * nv);
    bcg_real *qo[2], *uo[2], *tp[2], *xb[2], *ab[2], *xob = malloc(sizeof(bcg_real) * 2 * N * nv), a[N * BCG_MAX_ACT];
    for (int i = 0; i < 2; i++) {
      qo[i] = malloc(sizeof(bcg_real) * N * nq), uo[i] = malloc(sizeof(bcg_real) * N * nv);
      tp[i] = malloc(sizeof(bcg_real) * tsz), xb[i] = malloc(sizeof(bcg_real) * 2 * N * nv);
      ab[i] = malloc(sizeof(bcg_real) * N * nu);
    }
    setup();
    const double heights[3] = {-0.002, 0.003, 0.08}; /* in contact, near it, airborne */
    for (int e = 0; e < N; e++) {
      double qd[BCG_MAX_Q], ud[BCG_MAX_DOF];
      standing_state(m, qd, ud, heights[e % 3], 0.3);
      for (int i = 0; i < nq; i++) q[e * nq + i] = (bcg_real)qd[i];
      for (int i = 0; i < nv; i++) u[e * nv + i] = (bcg_real)ud[i];
    }
    int saved = omp_get_max_threads(), contact_seen = 0;
    const int thr[3] = {2, 3, 8};
    for (int k = 0; k < 12; k++) {
      omp_set_num_threads(thr[k % 3]);
      for (int i = 0; i < N * nu; i++) a[i] = (bcg_real)(0.5 * (2 * urand() - 1));
      for (int i = 0; i < 2 * N * nv; i++) xob[i] = (bcg_real)nrand();
      int diff = 0;
      bcg_real fn[2][N], pen[2][N];
      int bad[2][N];
      for (int v = 0; v < 2; v++) {
        bcg_sim_set_slices(env->sim, v == 0);
        CU_ASSERT_EQUAL(bcg_sim_control_step(env->sim, N, q, u, a, qo[v], uo[v], tp[v]), 0);
        memcpy(fn[v], env->sim->maxfn, sizeof(bcg_real) * N);
        memcpy(pen[v], env->sim->maxpen, sizeof(bcg_real) * N);
        memcpy(bad[v], env->sim->bad, sizeof(int) * N);
        memset(ab[v], 0, sizeof(bcg_real) * N * nu);
        CU_ASSERT_EQUAL(bcg_sim_control_step_vjp(env->sim, N, tp[v], a, xob, xb[v], ab[v]), 0);
      }
      diff += memcmp(qo[0], qo[1], sizeof(bcg_real) * N * nq) != 0;
      diff += memcmp(uo[0], uo[1], sizeof(bcg_real) * N * nv) != 0;
      diff += memcmp(tp[0], tp[1], sizeof(bcg_real) * tsz) != 0;
      diff += memcmp(fn[0], fn[1], sizeof fn[0]) != 0 || memcmp(pen[0], pen[1], sizeof pen[0]) != 0 ||
              memcmp(bad[0], bad[1], sizeof bad[0]) != 0;
      diff += memcmp(xb[0], xb[1], sizeof(bcg_real) * 2 * N * nv) != 0;
      diff += memcmp(ab[0], ab[1], sizeof(bcg_real) * N * nu) != 0;
      for (int e = 0; e < N; e++) contact_seen += fn[0][e] > 0;
      if (diff > worst) worst = diff;
      memcpy(q, qo[0], sizeof(bcg_real) * N * nq);
      memcpy(u, uo[0], sizeof(bcg_real) * N * nv);
      tested++;
    }
    omp_set_num_threads(saved);
    CU_ASSERT(contact_seen > 0);
    for (int i = 0; i < 2; i++) free(qo[i]), free(uo[i]), free(tp[i]), free(xb[i]), free(ab[i]);
    free(q), free(u), free(xob);
    bcg_env_free(env);
    bcg_config_free(cfg);
  }
  CU_ASSERT_EQUAL(worst, 0);
  CU_ASSERT_EQUAL(tested, 24);
  bcg_test_report("control steps + VJPs in thread slices vs substep-wise: differing arrays (0 = identical)", worst);
}

/* ---- 4. off by default: bit for bit ----------------------------------------------------- */
static void test_defaults_bitwise(void) {
  if (!bcg_registry_find(bcg_registry_global(), BCG_KIND_CONTACT, "smoothed_kappa")) { CU_FAIL("plugin missing"); return; }
  char ini[512];
  snprintf(ini, sizeof ini, "[model]\npath = %s\n[sim]\nactuation = pd\n[contact]\nplugin = smoothed_kappa\n", HUMANOID);
  bcg_config *cfg = NULL;
  const int N = 2;
  bcg_env *env = env_from_ini(ini, N, &cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(env);
  CU_ASSERT_PTR_NULL(env->dom);
  CU_ASSERT_PTR_NULL(env->sim->dom);
  CU_ASSERT(!bcg_drparams_active(&env->dr));
  const bcg_mdata *m = &env->model->m;
  int nq = env->nq, nv = env->nv, nu = env->nu;
  char err[256];
  /* a plain sim on the same parts */
  bcg_sim *plain = bcg_sim_create(env->model, &env->sim->sp, N, env->contact_ops, env->contact, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(plain);
  /* and a domain whose per-environment models equal the model */
  bcg_domain dom = {0};
  bcg_mdata *copies = malloc(sizeof(bcg_mdata) * N);
  uint32_t clock[2] = {0, 0};
  for (int e = 0; e < N; e++) memcpy(&copies[e], m, sizeof(bcg_mdata));
  dom.n = N; dom.m = copies; dom.clock = clock; dom.push_dof = -1;
  bcg_sim *same = bcg_sim_create(env->model, &env->sim->sp, N, env->contact_ops, env->contact, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(same);
  bcg_sim_set_domain(same, &dom);
  double q[2][2 * BCG_MAX_Q], u[2][2 * BCG_MAX_DOF], a[2 * BCG_MAX_ACT], qo[3][2 * BCG_MAX_Q],
      uo[3][2 * BCG_MAX_DOF];
  static double tape[3][16 * 2 * (BCG_MAX_Q + BCG_MAX_DOF)];
  for (int e = 0; e < N; e++) {
    setup();
    standing_state(m, q[0] + e * nq, u[0] + e * nv, -0.002, 0.3);
  }
  for (int i = 0; i < N * nu; i++) a[i] = 0.5 * (2 * urand() - 1);
  int ok = 1;
  for (int k = 0; k < 25; k++) {
    bcg_real *x = malloc(sizeof(bcg_real) * N * env->nx), *xn = malloc(sizeof(bcg_real) * N * env->nx);
    for (int e = 0; e < N; e++) {
      memcpy(x + e * env->nx, q[k % 2] + e * nq, sizeof(double) * nq);
      memcpy(x + e * env->nx + nq, u[k % 2] + e * nv, sizeof(double) * nv);
    }
    bcg_env_step(env, N, x, a, xn, tape[0]);
    bcg_sim_control_step(plain, N, q[k % 2], u[k % 2], a, qo[1], uo[1], tape[1]);
    bcg_sim_control_step(same, N, q[k % 2], u[k % 2], a, qo[2], uo[2], tape[2]);
    for (int e = 0; e < N; e++) {
      ok &= memcmp(xn + e * env->nx, qo[1] + e * nq, sizeof(double) * nq) == 0;
      ok &= memcmp(xn + e * env->nx + nq, uo[1] + e * nv, sizeof(double) * nv) == 0;
    }
    ok &= memcmp(qo[1], qo[2], sizeof(double) * N * nq) == 0 && memcmp(uo[1], uo[2], sizeof(double) * N * nv) == 0;
    /* and the adjoints */
    double xob[2 * 2 * BCG_MAX_DOF], xb[3][2 * 2 * BCG_MAX_DOF], ab[3][2 * BCG_MAX_ACT];
    for (int i = 0; i < 2 * N * nv; i++) xob[i] = nrand();
    memset(ab, 0, sizeof ab);
    bcg_env_step_vjp(env, N, tape[0], a, xob, xb[0], ab[0]);
    bcg_sim_control_step_vjp(plain, N, tape[1], a, xob, xb[1], ab[1]);
    bcg_sim_control_step_vjp(same, N, tape[2], a, xob, xb[2], ab[2]);
    ok &= memcmp(xb[0], xb[1], sizeof(double) * 2 * N * nv) == 0 && memcmp(xb[1], xb[2], sizeof(double) * 2 * N * nv) == 0;
    ok &= memcmp(ab[0], ab[1], sizeof(double) * N * nu) == 0 && memcmp(ab[1], ab[2], sizeof(double) * N * nu) == 0;
    memcpy(q[(k + 1) % 2], qo[1], sizeof(double) * N * nq);
    memcpy(u[(k + 1) % 2], uo[1], sizeof(double) * N * nv);
    free(x);
    free(xn);
  }
  CU_ASSERT(ok);
  bcg_test_report("DR off / identity models: control steps + VJPs differing bits (0 = identical)", ok ? 0 : 1);
  bcg_sim_free(plain);
  bcg_sim_free(same);
  free(copies);
  bcg_env_free(env);
  bcg_config_free(cfg);
}

static void test_config_keys(void) {
  char ini[512];
  bcg_config *cfg = NULL;
  snprintf(ini, sizeof ini, "[model]\npath = %s\n[sim]\ndr_friction_min = 0.8\ndr_friction_max = 0.5\n", HUMANOID);
  bcg_env *env = env_from_ini(ini, 1, &cfg); /* max < min: refused */
  CU_ASSERT_PTR_NULL(env);
  bcg_env_free(env);
  bcg_config_free(cfg);
  cfg = NULL;
  snprintf(ini, sizeof ini,
           "[model]\npath = %s\n[sim]\ndr_friction_min = 0.5\ndr_friction_max = 1.25\ndr_mass_scale = 0.1\n"
           "dr_com_offset = 0.02\ndr_push_interval = 5\ndr_push_velocity = 0.5\n", HUMANOID);
  env = env_from_ini(ini, 2, &cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(env);
  CU_ASSERT_PTR_NOT_NULL_FATAL(env->dom);
  CU_ASSERT_PTR_NOT_NULL(env->dom->m);
  CU_ASSERT_PTR_NOT_NULL(env->dom->mu);
  CU_ASSERT_EQUAL(env->dom->push_dof, 0);
  CU_ASSERT(fabs(env->dom->push_prob - 0.02 / 5) < 1e-15);
  CU_ASSERT(env->sim->dom == env->dom);
  bcg_env_free(env);
  bcg_config_free(cfg);
}

static void test_load(void) {
  setup();
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
}

BCG_TESTS({"load", test_load}, {"substep_contact", test_substep_contact}, {"substep_motor", test_substep_motor},
          {"control_step_contact", test_control_contact}, {"control_step_pushes", test_control_push},
          {"models_used", test_models_used}, {"bcg_estimator_fd", test_bcg_estimator_fd}, {"reproducible", test_reproducible},
          {"standing_weight", test_standing_weight}, {"defaults_bitwise", test_defaults_bitwise},
          {"slices_bitwise", test_slices_bitwise},
          {"config_keys", test_config_keys});
BCG_RUN("domain_rand")
