/* tests/test_estimators.c - the gradient estimators (estimators/autodiff.c,
 * bcg.c, truncate.c), loaded as plugins from <build>/plugins through the
 * registry and configured through real INI files, on humanoid.xml with the
 * smoothed_kappa contact model and PD actuation:
 *
 *   - bcg with B = 1 and zero noise is autodiff, bit for bit, over a horizon
 *     with stiff (bundling) transitions;
 *   - bcg's backward equals central finite differences of its bundled forward
 *     (fixed draws) w.r.t. x_0 (tangent) and every action, over a horizon
 *     spanning a bundle of H = 2, for perturb = contacts and root;
 *   - truncate cuts the state adjoint of a stiff step exactly and keeps (or
 *     drops) its action adjoint;
 *   - the trigger: an environment below the threshold never bundles, and a
 *     threshold above every force makes bcg autodiff for any B and sigma;
 *   - sample accounting, resets, and reproducible / fresh draws.
 *
 * A loss L = sum_{t=1..T} w_t . x_t (raw qpos and qvel) plays the learner: it
 * passes xbar_{t+1} = tangent(w_{t+1}) + (the estimator's xbar_{t+1}). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/env.h"
#include "bcg/loader.h"
#include "bcg/sim.h"
#include "testutil.h"
#define TEST_RNG_SEED 0x2545F4914F6CDD1Dull
#include "testrng.h"

#define HUMANOID "/usr/share/mujoco/model/humanoid/humanoid.xml"
#define MAXT 8

static bcg_registry *reg;
static int have_contact;


/* ---- plugins and configs ---------------------------------------------------- */

static void setup(void) {
  if (reg) return;
  reg = bcg_registry_new();
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/plugins", bcg_test_build_dir());
  bcg_registry_scan_dir(reg, dir, 1);
  have_contact = bcg_registry_find(reg, BCG_KIND_CONTACT, "smoothed_kappa") != NULL;
  if (!have_contact) fprintf(stderr, "smoothed_kappa.so not built: contact tests are skipped\n");
}

/* extra [contact] lines of the configs load_cfg writes (a test sets and resets it) */
static const char *contact_extra = "";

/* A config with the common sections and the given [estimator] body. */
static bcg_config *load_cfg(const char *estimator) {
  char path[1024];
  snprintf(path, sizeof path, "%s", bcg_test_tmp_path("cfg_XXXXXX"));
  int fd = mkstemp(path);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "w");
  fprintf(f, "[run]\nseed = 7\n[model]\npath = %s\n[sim]\nactuation = pd\n", HUMANOID);
  if (have_contact) fprintf(f, "[contact]\nplugin = smoothed_kappa\n%s", contact_extra);
  fprintf(f, "[estimator]\n%s\n", estimator);
  fclose(f);
  bcg_config *cfg = NULL;
  char err[1024];
  if (bcg_config_load_with(&cfg, reg, path, 0, NULL, err, sizeof err)) fprintf(stderr, "config: %s\n", err);
  unlink(path);
  return cfg;
}

#include "testest.h"
#include "teststate.h"

static bcg_env *make_env(int nenv) {
  bcg_config *cfg = load_cfg("plugin = autodiff");
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  char err[1024];
  bcg_env *env = bcg_env_create(cfg, nenv, err, sizeof err);
  if (!env) fprintf(stderr, "env: %s\n", err);
  bcg_config_free(cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(env);
  return env;
}

/* ---- states ------------------------------------------------------------------- */

/* A humanoid pose whose lowest contact point is at `height` (negative: into
 * the floor) with vertical velocity vz and small random velocities. */
static void make_state(const bcg_env *env, double *x, double height, double vz) {
  const bcg_mdata *m = &env->model->m;
  test_state_pose_with(m, x, 0.05, 0.03, 0.2);
  test_state_place(m, x, height);
  test_state_vel(m, x + m->nq, 0.1);
  x[m->nq + 2] = vz;
}

static void random_actions(const bcg_env *env, int T, double *acts) {
  for (int i = 0; i < T * env->nenv * env->nu; i++) acts[i] = 0.3 * (2 * urand() - 1);
}

/* ---- rollouts and the learner's sweep ------------------------------------------ */

typedef struct problem {
  bcg_env *env;
  int T;
  double *x0;   /* [nenv][nx] */
  double *acts; /* [T][nenv][nu] */
  double *w;    /* [T+1][nenv][nx] loss weights (raw coordinates) */
} problem;

static void problem_init(problem *P, bcg_env *env, int T, const double *heights, const double *vz) {
  int n = env->nenv, nx = env->nx, nu = env->nu;
  P->env = env;
  P->T = T;
  P->x0 = malloc(sizeof(double) * n * nx);
  P->acts = malloc(sizeof(double) * T * n * nu);
  P->w = malloc(sizeof(double) * (T + 1) * n * nx);
  for (int e = 0; e < n; e++) make_state(env, P->x0 + (size_t)e * nx, heights[e], vz[e]);
  random_actions(env, T, P->acts);
  for (int i = 0; i < (T + 1) * n * nx; i++) P->w[i] = nrand();
}
static void problem_free(problem *P) { free(P->x0); free(P->acts); free(P->w); }

/* forward rollout from x0; xs [T+1][nenv][nx]; stiff[t][e] from the
 * env's per-transition diagnostics (maxfn > thr) if stiff != NULL */
static int rollout(est *E, const problem *P, const double *x0, const double *acts, double *xs, double thr, int *stiff) {
  bcg_env *env = P->env;
  int n = env->nenv, nx = env->nx, nu = env->nu;
  if (E->ops->begin(E->self)) return -1;
  memcpy(xs, x0, sizeof(double) * n * nx);
  for (int t = 0; t < P->T; t++) {
    if (E->ops->forward(E->self, t, xs + (size_t)t * n * nx, acts + (size_t)t * n * nu, xs + (size_t)(t + 1) * n * nx))
      return -1;
    if (stiff)
      for (int e = 0; e < n; e++) stiff[t * n + e] = env->sim->maxfn[e] > thr;
  }
  return 0;
}

static double loss(const problem *P, const double *xs) {
  int n = P->env->nenv, nx = P->env->nx;
  double L = 0;
  for (int t = 1; t <= P->T; t++)
    for (int i = 0; i < n * nx; i++) L += P->w[(size_t)t * n * nx + i] * xs[(size_t)t * n * nx + i];
  return L;
}

/* tangent adjoint of w . x at x, for every env */
static void tangent_w(const bcg_env *env, const double *x, const double *w, double *xb) {
  const bcg_mdata *m = &env->model->m;
  int n = env->nenv, nx = env->nx, nq = env->nq, nv = env->nv;
  for (int e = 0; e < n; e++) {
    bcg_qgrad_to_tangent(m, x + (size_t)e * nx, w + (size_t)e * nx, xb + (size_t)e * 2 * nv);
    memcpy(xb + (size_t)e * 2 * nv + nv, w + (size_t)e * nx + nq, sizeof(double) * nv);
  }
}

/* the backward sweep of L after a rollout: x0bar [nenv][2nv], abar [T][nenv][nu];
 * xbars [T][nenv][2nv] (optional) receives each backward's x_bar output */
static int sweep(est *E, const problem *P, const double *xs, double *x0bar, double *abar, double *xbars) {
  bcg_env *env = P->env;
  int n = env->nenv, nx = env->nx, nu = env->nu, n2 = 2 * env->nv, T = P->T;
  double *xnb = malloc(sizeof(double) * n * n2), *xb = malloc(sizeof(double) * n * n2);
  tangent_w(env, xs + (size_t)T * n * nx, P->w + (size_t)T * n * nx, xnb);
  int rc = 0;
  for (int t = T - 1; t >= 0 && !rc; t--) {
    double *ab = abar + (size_t)t * n * nu;
    memset(ab, 0, sizeof(double) * n * nu);
    rc = E->ops->backward(E->self, t, xnb, xb, ab);
    if (xbars) memcpy(xbars + (size_t)t * n * n2, xb, sizeof(double) * n * n2);
    if (t > 0) {
      tangent_w(env, xs + (size_t)t * n * nx, P->w + (size_t)t * n * nx, xnb);
      for (int i = 0; i < n * n2; i++) xnb[i] += xb[i];
    }
  }
  memcpy(x0bar, xb, sizeof(double) * n * n2);
  free(xnb);
  free(xb);
  return rc;
}

typedef struct result {
  double *xs, *x0bar, *abar, *xbars;
  int *stiff;
  bcg_estimator_stats st;
} result;

static void run_full(est *E, const problem *P, double thr, result *R) {
  bcg_env *env = P->env;
  int n = env->nenv, T = P->T;
  R->xs = malloc(sizeof(double) * (T + 1) * n * env->nx);
  R->x0bar = malloc(sizeof(double) * n * 2 * env->nv);
  R->abar = malloc(sizeof(double) * T * n * env->nu);
  R->xbars = malloc(sizeof(double) * T * n * 2 * env->nv);
  R->stiff = malloc(sizeof(int) * T * n);
  CU_ASSERT_FATAL(rollout(E, P, P->x0, P->acts, R->xs, thr, R->stiff) == 0);
  CU_ASSERT_FATAL(sweep(E, P, R->xs, R->x0bar, R->abar, R->xbars) == 0);
  E->ops->stats(E->self, &R->st);
}
static void free_result(result *R) { free(R->xs); free(R->x0bar); free(R->abar); free(R->xbars); free(R->stiff); }

static int rows_equal(const double *a, const double *b, int stride, int row, int len) {
  return memcmp(a + (size_t)row * stride, b + (size_t)row * stride, sizeof(double) * len) == 0;
}

/* everything of env e bitwise equal between two results */
static int env_equal(const problem *P, const result *A, const result *B, int e) {
  bcg_env *env = P->env;
  int n = env->nenv, nx = env->nx, nu = env->nu, n2 = 2 * env->nv, ok = 1;
  for (int t = 0; t <= P->T; t++) ok &= rows_equal(A->xs + (size_t)t * n * nx, B->xs + (size_t)t * n * nx, nx, e, nx);
  for (int t = 0; t < P->T; t++) ok &= rows_equal(A->abar + (size_t)t * n * nu, B->abar + (size_t)t * n * nu, nu, e, nu);
  ok &= rows_equal(A->x0bar, B->x0bar, n2, e, n2);
  return ok;
}

/* ---- tests ----------------------------------------------------------------------- */

static void test_load(void) {
  setup();
  CU_ASSERT_PTR_NOT_NULL_FATAL(bcg_registry_find(reg, BCG_KIND_ESTIMATOR, "autodiff"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(bcg_registry_find(reg, BCG_KIND_ESTIMATOR, "bcg"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(bcg_registry_find(reg, BCG_KIND_ESTIMATOR, "truncate"));
  /* every key documented, with its default valid */
  const bcg_plugin *pl = bcg_registry_find(reg, BCG_KIND_ESTIMATOR, "bcg");
  for (int i = 0; i < pl->desc->nkeys; i++) CU_ASSERT(pl->desc->keys[i].help && strlen(pl->desc->keys[i].help) > 20);
}

/* (1) B = 1, sigma = 0: autodiff bit for bit through bundles */
static void test_bcg_b1_is_autodiff(void) {
  setup();
  if (!have_contact) return;
  bcg_env *env = make_env(3);
  double h[3] = {-0.003, 0.3, -0.004}, vz[3] = {-0.4, 0, -0.3};
  problem P;
  int T = 6;
  problem_init(&P, env, T, h, vz);
  for (int H = 2; H <= 3; H++) {
    char text[256];
    snprintf(text, sizeof text,
             "plugin = bcg\nbranches = 1\nsigma_p = 0\nsigma_v = 0\nduration = %d\nforce_threshold = 100", H);
    est A = make_est(env, "plugin = autodiff", T), Bc = make_est(env, text, T);
    result RA, RB;
    run_full(&A, &P, 100, &RA);
    run_full(&Bc, &P, 100, &RB);
    CU_ASSERT(RB.st.triggered > 0); /* bundles really happened */
    if (H == 2) bcg_test_report("bcg B=1 sigma=0: bundles started (count)", (double)RB.st.triggered);
    int n = env->nenv;
    CU_ASSERT(memcmp(RA.xs, RB.xs, sizeof(double) * (T + 1) * n * env->nx) == 0);
    CU_ASSERT(memcmp(RA.x0bar, RB.x0bar, sizeof(double) * n * 2 * env->nv) == 0);
    CU_ASSERT(memcmp(RA.abar, RB.abar, sizeof(double) * T * n * env->nu) == 0);
    /* samples: every bundled transition counts B + (start) 1 */
    CU_ASSERT(RB.st.samples > RA.st.samples);
    free_result(&RA);
    free_result(&RB);
    free_est(&A);
    free_est(&Bc);
  }
  problem_free(&P);
  bcg_env_free(env);
}

/* (1b) B > 1, sigma = 0: every branch is the nominal transition, so the
 * rollout and the gradients equal autodiff's up to rounding (the 1/B shares
 * of the average's adjoint summed back over B identical branches; the
 * quaternion average's adjoint projected and re-expanded). */
static void test_bcg_bn_sigma0_is_autodiff(void) {
  setup();
  if (!have_contact) return;
  bcg_env *env = make_env(3);
  double h[3] = {-0.003, 0.3, -0.004}, vz[3] = {-0.4, 0, -0.3};
  problem P;
  int T = 6;
  problem_init(&P, env, T, h, vz);
  int n = env->nenv, nx = env->nx, n2 = 2 * env->nv, nu = env->nu;
  est A = make_est(env, "plugin = autodiff", T);
  result RA;
  run_full(&A, &P, 100, &RA);
  for (int B = 2; B <= 10; B += 8) {
    char text[256];
    snprintf(text, sizeof text,
             "plugin = bcg\nbranches = %d\nsigma_p = 0\nsigma_v = 0\nduration = 2\nforce_threshold = 100", B);
    est Bc = make_est(env, text, T);
    result RB;
    run_full(&Bc, &P, 100, &RB);
    CU_ASSERT(RB.st.triggered > 0);
    double ex = bcg_vec_relerr(RA.xs, RB.xs, (T + 1) * n * nx);
    double eg = bcg_vec_relerr(RA.x0bar, RB.x0bar, n * n2);
    double ea = bcg_vec_relerr(RA.abar, RB.abar, T * n * nu);
    if (B == 10) {
      bcg_test_report("bcg B=10 sigma=0 vs autodiff: states rel. err", ex);
      bcg_test_report("bcg B=10 sigma=0 vs autodiff: x0 adjoint rel. err", eg);
      bcg_test_report("bcg B=10 sigma=0 vs autodiff: action adjoints rel. err", ea);
    }
    CU_ASSERT(ex < 1e-12);
    CU_ASSERT(eg < 1e-9);
    CU_ASSERT(ea < 1e-9);
    free_result(&RB);
    free_est(&Bc);
  }
  free_result(&RA);
  free_est(&A);
  problem_free(&P);
  bcg_env_free(env);
}

/* (2) bcg backward = central FD of the bundled forward (fixed draws). All of
 * x_0 of the bundled env (tangent q and u) is checked; of the actions and of
 * the free env's x_0 a strided subset (the suite must stay fast). */
static double fd_check(bcg_env *env, const char *text, const char *label) {
  int T = 3, n = env->nenv, nx = env->nx, nq = env->nq, nv = env->nv, nu = env->nu, n2 = 2 * nv;
  double h[2] = {-0.003, 0.3}, vz[2] = {-0.4, 0.05};
  problem P;
  problem_init(&P, env, T, h, vz);
  est E = make_est(env, text, T);
  result R;
  run_full(&E, &P, 100, &R);
  CU_ASSERT(R.stiff[0] == 1); /* env 0 bundles at t = 0 */
  CU_ASSERT(R.st.triggered >= 1);
  /* the bundle changes the gradient: the check is not autodiff's in disguise */
  {
    est A = make_est(env, "plugin = autodiff", T);
    result RA;
    run_full(&A, &P, 100, &RA);
    double d = bcg_vec_relerr(RA.x0bar, R.x0bar, n2);
    bcg_test_report("bcg vs autodiff x0 gradient of the bundled env, B=3/4 (rel difference)", d);
    CU_ASSERT(d > 1e-4);
    free_result(&RA);
    free_est(&A);
  }
  const bcg_mdata *m = &env->model->m;
  double *xs = malloc(sizeof(double) * (T + 1) * n * nx), *xp = malloc(sizeof(double) * n * nx);
  double *ap = malloc(sizeof(double) * T * n * nu);
  /* coordinates: index into x_0 (e * n2 + i) or, from n * n2 on, the actions */
  int ncmax = n * n2 + T * n * nu, nc = 0;
  int *coord = malloc(sizeof(int) * ncmax);
  for (int i = 0; i < n2; i++) coord[nc++] = i;               /* every x_0 coordinate of env 0 */
  for (int e = 1; e < n; e++)
    for (int i = e; i < n2; i += 13) coord[nc++] = e * n2 + i; /* a few of the free env */
  for (int t = 0; t < T; t++)
    for (int e = 0; e < n; e++)
      for (int i = (t + e) % 3; i < nu; i += (e == 0 ? 3 : 10)) coord[nc++] = n * n2 + (t * n + e) * nu + i;
  double *an = malloc(sizeof(double) * nc), *fd = malloc(sizeof(double) * nc);
  for (int k = 0; k < nc; k++) {
    int c = coord[k];
    an[k] = c < n * n2 ? R.x0bar[c] : R.abar[c - n * n2];
  }
  double worst = 1e300;
  for (int pass = 0; pass < 2 && worst > 1e-6; pass++) {
    double eps = pass ? 1e-7 : 1e-6;
    for (int k = 0; k < nc; k++) {
      int c = coord[k];
      double Lpm[2];
      for (int sgn = 0; sgn < 2; sgn++) {
        double d = sgn ? -eps : eps;
        memcpy(xp, P.x0, sizeof(double) * n * nx);
        memcpy(ap, P.acts, sizeof(double) * T * n * nu);
        if (c < n * n2) {
          int e = c / n2, i = c % n2;
          if (i < nv) {
            double dq[BCG_MAX_DOF] = {0};
            dq[i] = d;
            bcg_qadd(m, P.x0 + (size_t)e * nx, dq, xp + (size_t)e * nx);
          } else {
            xp[(size_t)e * nx + nq + (i - nv)] += d;
          }
        } else {
          ap[c - n * n2] += d;
        }
        CU_ASSERT_FATAL(rollout(&E, &P, xp, ap, xs, 0, NULL) == 0);
        Lpm[sgn] = loss(&P, xs);
      }
      fd[k] = (Lpm[0] - Lpm[1]) / (2 * eps);
    }
    /* blocks: x_0 q and u of env 0, the free env's sample, the actions */
    int nb0 = n2, nb1 = 0;
    while (nb0 + nb1 < nc && coord[nb0 + nb1] < n * n2) nb1++;
    double e_all = fmax(bcg_vec_relerr(an, fd, nv), bcg_vec_relerr(an + nv, fd + nv, nv));
    if (nb1) e_all = fmax(e_all, bcg_vec_relerr(an + nb0, fd + nb0, nb1));
    e_all = fmax(e_all, bcg_vec_relerr(an + nb0 + nb1, fd + nb0 + nb1, nc - nb0 - nb1));
    if (e_all > 1e-5) {
      fprintf(stderr, "%s (eps %g): relerr %.3g\n", label, eps, e_all);
      for (int k = 0; k < nc; k++)
        if (fabs(an[k] - fd[k]) > 1e-5 * fmax(1, fabs(fd[k])))
          fprintf(stderr, "  coord %d: adjoint %.10g fd %.10g\n", coord[k], an[k], fd[k]);
    }
    worst = fmin(worst, e_all); /* FD noise: the better step size is the check */
  }
  bcg_test_report(label, worst);
  CU_ASSERT(worst < 1e-5);
  free(xs); free(xp); free(ap); free(an); free(fd); free(coord);
  free_result(&R);
  free_est(&E);
  problem_free(&P);
  return worst;
}

static void test_bcg_fd_contacts(void) {
  setup();
  if (!have_contact) return;
  bcg_env *env = make_env(2);
  fd_check(env, "plugin = bcg\nbranches = 3\nduration = 2\nforce_threshold = 100\nfixed_draws = true",
           "bcg backward vs FD, perturb=contacts, B=3 H=2 (rel)");
  bcg_env_free(env);
}

static void test_bcg_fd_root(void) {
  setup();
  if (!have_contact) return;
  bcg_env *env = make_env(2);
  fd_check(env,
           "plugin = bcg\nbranches = 4\nduration = 2\nforce_threshold = 100\nfixed_draws = true\nperturb = root",
           "bcg backward vs FD, perturb=root, B=4 H=2 (rel)");
  bcg_env_free(env);
}

/* the contact's position correction (erp) through whole control steps of
 * humanoid.xml in contact: the bcg backward (bundles of steps whose contacts
 * carry erp) against FD, as test_bcg_fd_contacts without erp */
static void test_fd_erp(void) {
  setup();
  if (!have_contact) return;
  contact_extra = "erp = 0.2\n";
  bcg_env *env = make_env(2);
  contact_extra = "";
  fd_check(env, "plugin = bcg\nbranches = 3\nduration = 2\nforce_threshold = 100\nfixed_draws = true",
           "bcg backward vs FD, smoothed_kappa erp = 0.2, B=3 H=2 (rel)");
  bcg_env_free(env);
}

/* (3) truncate: exact cut of the state path at stiff steps */
static void test_truncate(void) {
  setup();
  if (!have_contact) return;
  bcg_env *env = make_env(2);
  int n = 2, n2 = 2 * env->nv, nu = env->nu;
  double h[2] = {-0.003, 0.3}, vz[2] = {-0.4, 0};
  /* one step: the whole adjoint of the step is visible */
  problem P1;
  problem_init(&P1, env, 1, h, vz);
  est A = make_est(env, "plugin = autodiff", 1);
  est K = make_est(env, "plugin = truncate\nforce_threshold = 100", 1);
  est D = make_est(env, "plugin = truncate\nforce_threshold = 100\nkeep_action_grad = false", 1);
  result RA, RK, RD;
  run_full(&A, &P1, 100, &RA);
  run_full(&K, &P1, 100, &RK);
  run_full(&D, &P1, 100, &RD);
  CU_ASSERT_FATAL(RK.stiff[0] == 1 && RK.stiff[1] == 0);
  CU_ASSERT(RK.st.triggered == 1);
  int zero = 1, nonzero = 0;
  for (int i = 0; i < n2; i++) {
    zero &= RK.x0bar[i] == 0 && RD.x0bar[i] == 0 && !signbit(RK.x0bar[i]);
    nonzero |= RA.x0bar[i] != 0;
  }
  CU_ASSERT(zero);    /* the cut is exact */
  CU_ASSERT(nonzero); /* and there was something to cut */
  CU_ASSERT(rows_equal(RA.x0bar, RK.x0bar, n2, 1, n2)); /* the free env is untouched */
  CU_ASSERT(memcmp(RA.abar, RK.abar, sizeof(double) * n * nu) == 0); /* action path kept, bitwise */
  int anz = 0, dz = 1;
  for (int i = 0; i < nu; i++) { anz |= RK.abar[i] != 0; dz &= RD.abar[i] == 0; }
  CU_ASSERT(anz);
  CU_ASSERT(dz);      /* keep_action_grad = false drops it */
  CU_ASSERT(rows_equal(RA.abar, RD.abar, nu, 1, nu));
  free_result(&RA); free_result(&RK); free_result(&RD);
  free_est(&A); free_est(&K); free_est(&D);
  problem_free(&P1);

  /* several steps: every stiff step's x_bar output is exactly zero, every other is autodiff's */
  int T = 4;
  problem P;
  problem_init(&P, env, T, h, vz);
  est K2 = make_est(env, "plugin = truncate\nforce_threshold = 100", T);
  result R;
  run_full(&K2, &P, 100, &R);
  int nstiff = 0, ok = 1;
  for (int t = 0; t < T; t++)
    for (int e = 0; e < n; e++) {
      const double *xb = R.xbars + ((size_t)t * n + e) * n2;
      int allz = 1;
      for (int i = 0; i < n2; i++) allz &= xb[i] == 0;
      if (R.stiff[t * n + e]) { nstiff++; ok &= allz; }
      else ok &= !allz;
    }
  CU_ASSERT(nstiff >= 1);
  CU_ASSERT(ok);
  CU_ASSERT(R.st.triggered == (uint64_t)nstiff);
  CU_ASSERT(R.st.samples == (uint64_t)(T * n));
  free_result(&R);
  free_est(&K2);
  problem_free(&P);
  bcg_env_free(env);
}

/* (4) trigger: below the threshold nothing bundles */
static void test_trigger(void) {
  setup();
  if (!have_contact) return;
  bcg_env *env = make_env(3);
  int T = 5, n = 3;
  /* env 0 stiff, env 1 airborne, env 2 resting lightly on the floor. Env 2's
   * largest contact force over the 5 steps (it settles onto a few points) was
   * 346 N against env 0's 386 N at t = 0 with env 0 arriving at 0.5 m/s; with
   * the continuous contact step (docs/contact_continuity.md: the sweep order
   * and the sliding step changed) env 2's peak is 397 N, so env 0 arrives at
   * 1 m/s (746 N). */
  double h[3] = {-0.004, 0.3, 0.0005}, vz[3] = {-1.0, 0, 0};
  problem P;
  problem_init(&P, env, T, h, vz);
  est A = make_est(env, "plugin = autodiff", T);
  result RA;
  run_full(&A, &P, 0, &RA);
  /* the largest force env 2 ever sees under autodiff; the threshold just above it */
  double fmax2 = 0, fmax0 = 0;
  {
    double *xs = malloc(sizeof(double) * (T + 1) * n * env->nx);
    A.ops->begin(A.self);
    memcpy(xs, P.x0, sizeof(double) * n * env->nx);
    for (int t = 0; t < T; t++) {
      A.ops->forward(A.self, t, xs + (size_t)t * n * env->nx, P.acts + (size_t)t * n * env->nu,
                     xs + (size_t)(t + 1) * n * env->nx);
      fmax2 = fmax(fmax2, env->sim->maxfn[2]);
      if (t == 0) fmax0 = env->sim->maxfn[0];
    }
    free(xs);
  }
  double thr = fmax(fmax2 * 1.01, 1.0);
  bcg_test_report("trigger test: force of the resting env (N)", fmax2);
  bcg_test_report("trigger test: force of the stiff env at t=0 (N)", fmax0);
  CU_ASSERT_FATAL(fmax0 > thr); /* env 0 does bundle */
  char text[256];
  snprintf(text, sizeof text, "plugin = bcg\nbranches = 4\nforce_threshold = %.17g", thr);
  est Bc = make_est(env, text, T);
  result RB;
  run_full(&Bc, &P, thr, &RB);
  CU_ASSERT(RB.st.triggered >= 1);
  CU_ASSERT(env_equal(&P, &RA, &RB, 1)); /* airborne: autodiff bit for bit */
  CU_ASSERT(env_equal(&P, &RA, &RB, 2)); /* below the threshold: autodiff bit for bit */
  CU_ASSERT(!env_equal(&P, &RA, &RB, 0)); /* the bundled env differs */
  {
    /* the same threshold as a multiple of the model's weight: the same run
     * bit for bit (force_threshold, here far above every force, is replaced) */
    double wgt = bcg_model_weight(&env->model->m, NULL);
    CU_ASSERT_FATAL(wgt > 0);
    snprintf(text, sizeof text, "plugin = bcg\nbranches = 4\nforce_threshold = 1e300\nforce_threshold_weight = %.17g",
             thr / wgt);
    est W = make_est(env, text, T);
    result RW;
    run_full(&W, &P, thr, &RW);
    CU_ASSERT_EQUAL(RW.st.triggered, RB.st.triggered);
    for (int e = 0; e < n; e++) CU_ASSERT(env_equal(&P, &RB, &RW, e));
    free_result(&RW);
    free_est(&W);
  }
  free_result(&RB);
  free_est(&Bc);

  /* the per-iteration counts (log_values): with H = 1 and a threshold below
   * every contact force, a step starts a bundle exactly when its env is in
   * contact, and a start right after its env's previous bundle (the step
   * before) is a restart */
  {
    est R1 = make_est(env, "plugin = bcg\nbranches = 2\nduration = 1\nforce_threshold = 1e-9", T);
    result RR;
    run_full(&R1, &P, 1e-9, &RR);
    int starts = 0, restarts = 0;
    for (int t = 0; t < T; t++)
      for (int e = 0; e < n; e++) {
        starts += RR.stiff[t * n + e];
        restarts += t > 0 && RR.stiff[t * n + e] && RR.stiff[(t - 1) * n + e];
      }
    const char *names[8] = {0};
    double v[8] = {0};
    int nv = R1.ops->log_values(R1.self, names, v, 8);
    CU_ASSERT_EQUAL_FATAL(nv, 3);
    CU_ASSERT_STRING_EQUAL(names[0], "bundle_starts");
    CU_ASSERT_STRING_EQUAL(names[2], "bundle_restarts");
    CU_ASSERT(restarts >= T - 1); /* the resting env bundles at every step */
    CU_ASSERT_EQUAL((int)v[0], starts);
    CU_ASSERT_EQUAL((int)v[2], restarts);
    bcg_test_report("restart test: bundle starts, restarts", (double)restarts);
    free_result(&RR);
    free_est(&R1);
  }

  /* a threshold above every force: autodiff for any B and sigma */
  est N = make_est(env, "plugin = bcg\nbranches = 5\nsigma_p = 0.05\nsigma_v = 0.1\nforce_threshold = 1e300", T);
  result RN;
  run_full(&N, &P, 1e300, &RN);
  CU_ASSERT(RN.st.triggered == 0);
  CU_ASSERT(RN.st.samples == (uint64_t)(T * n));
  for (int e = 0; e < n; e++) CU_ASSERT(env_equal(&P, &RA, &RN, e));
  free_result(&RN);
  free_est(&N);
  free_result(&RA);
  free_est(&A);
  problem_free(&P);
  bcg_env_free(env);
}

/* (5) samples, transitions, resets */
static void test_samples(void) {
  setup();
  if (!have_contact) return;
  bcg_env *env = make_env(2);
  int n = 2, nx = env->nx, nu = env->nu, Bn = 4;
  double h[2] = {-0.004, 0.3}, vz[2] = {-0.5, 0};
  problem P;
  problem_init(&P, env, 4, h, vz);
  est E = make_est(env, "plugin = bcg\nbranches = 4\nduration = 2\nforce_threshold = 100", 4);
  double *xs = malloc(sizeof(double) * 5 * n * nx);
  bcg_estimator_stats st;
  memcpy(xs, P.x0, sizeof(double) * n * nx);
  E.ops->begin(E.self);
  CU_ASSERT_FATAL(E.ops->forward(E.self, 0, xs, P.acts, xs + n * nx) == 0);
  E.ops->stats(E.self, &st);
  CU_ASSERT(st.triggered == 1);
  CU_ASSERT(st.samples == (uint64_t)(1 + 1 + Bn)); /* free env + discarded nominal + B branches */
  CU_ASSERT(st.transitions == 2);
  CU_ASSERT(env->sim->maxfn[0] > 100); /* per-env diagnostics of the transition */
  CU_ASSERT_FATAL(E.ops->forward(E.self, 1, xs + n * nx, P.acts + n * nu, xs + 2 * n * nx) == 0);
  E.ops->stats(E.self, &st);
  CU_ASSERT(st.triggered == 1);                        /* a continuation is not a new bundle */
  CU_ASSERT(st.samples == (uint64_t)(6 + 1 + Bn));     /* free env + B branches */
  CU_ASSERT(st.transitions == 4);
  bcg_estimator_stats before = st;
  CU_ASSERT_FATAL(E.ops->forward(E.self, 2, xs + 2 * n * nx, P.acts + 2 * n * nu, xs + 3 * n * nx) == 0);
  E.ops->stats(E.self, &st);
  uint64_t newb = st.triggered - before.triggered;
  CU_ASSERT(st.samples - before.samples == 2 + newb * Bn); /* the bundle ended: nominal steps again */

  /* a reset ends a bundle: the next step of that env is a plain nominal one */
  E.ops->begin(E.self);
  memcpy(xs, P.x0, sizeof(double) * n * nx);
  CU_ASSERT_FATAL(E.ops->forward(E.self, 0, xs, P.acts, xs + n * nx) == 0);
  E.ops->stats(E.self, &before);
  int r0 = 0;
  CU_ASSERT(E.ops->reset_envs(E.self, &r0, 1) == 0);
  memcpy(xs + n * nx, P.x0 + nx, sizeof(double) * nx); /* env 0 restarts airborne */
  CU_ASSERT_FATAL(E.ops->forward(E.self, 1, xs + n * nx, P.acts + n * nu, xs + 2 * n * nx) == 0);
  E.ops->stats(E.self, &st);
  CU_ASSERT(st.samples - before.samples == 2);
  CU_ASSERT(st.triggered == before.triggered);
  free(xs);
  free_est(&E);

  /* autodiff and truncate: one sample per transition */
  est A = make_est(env, "plugin = autodiff", 4), Tr = make_est(env, "plugin = truncate\nforce_threshold = 100", 4);
  result RA, RT;
  run_full(&A, &P, 100, &RA);
  run_full(&Tr, &P, 100, &RT);
  CU_ASSERT(RA.st.samples == 8 && RA.st.transitions == 8 && RA.st.triggered == 0);
  CU_ASSERT(RT.st.samples == 8 && RT.st.transitions == 8 && RT.st.triggered >= 1);
  free_result(&RA); free_result(&RT);
  free_est(&A); free_est(&Tr);
  problem_free(&P);
  bcg_env_free(env);
}

/* draws: reproducible from the seed, fresh every horizon, rewound with fixed_draws */
static void test_draws(void) {
  setup();
  if (!have_contact) return;
  bcg_env *env = make_env(1);
  int n = 1, nx = env->nx, T = 2;
  double h[1] = {-0.004}, vz[1] = {-0.5};
  problem P;
  problem_init(&P, env, T, h, vz);
  const char *text = "plugin = bcg\nbranches = 3\nforce_threshold = 100";
  est E1 = make_est(env, text, T), E2 = make_est(env, text, T);
  size_t sz = sizeof(double) * (T + 1) * n * nx;
  double *a = malloc(sz), *b = malloc(sz), *c = malloc(sz);
  CU_ASSERT_FATAL(rollout(&E1, &P, P.x0, P.acts, a, 0, NULL) == 0);
  CU_ASSERT_FATAL(rollout(&E2, &P, P.x0, P.acts, b, 0, NULL) == 0);
  CU_ASSERT(memcmp(a, b, sz) == 0); /* same seed, same counter: same run */
  CU_ASSERT_FATAL(rollout(&E1, &P, P.x0, P.acts, c, 0, NULL) == 0);
  CU_ASSERT(memcmp(a, c, sz) != 0); /* the next horizon draws fresh noise */
  free_est(&E1);
  free_est(&E2);
  est F = make_est(env, "plugin = bcg\nbranches = 3\nforce_threshold = 100\nfixed_draws = true", T);
  CU_ASSERT_FATAL(rollout(&F, &P, P.x0, P.acts, a, 0, NULL) == 0);
  CU_ASSERT_FATAL(rollout(&F, &P, P.x0, P.acts, b, 0, NULL) == 0);
  CU_ASSERT(memcmp(a, b, sz) == 0);
  free_est(&F);
  free(a); free(b); free(c);
  problem_free(&P);
  bcg_env_free(env);
}

BCG_TESTS({"load", test_load}, {"bcg_b1_sigma0_is_autodiff", test_bcg_b1_is_autodiff},
          {"bcg_bn_sigma0_is_autodiff", test_bcg_bn_sigma0_is_autodiff},
          {"bcg_fd_contacts", test_bcg_fd_contacts}, {"bcg_fd_root", test_bcg_fd_root},
          {"fd_erp", test_fd_erp},
          {"truncate_cut", test_truncate}, {"trigger", test_trigger}, {"samples", test_samples},
          {"draws", test_draws});
BCG_RUN("estimators")
