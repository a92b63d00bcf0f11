/* tests/test_cuda.c - the CUDA batched stepper (bcg/sim_cuda.h) against the
 * CPU one (bcg/sim.h) on humanoid.xml: the same control steps (states, tape,
 * diagnostics) and the same control-step / substep VJPs, at random states
 * airborne and with feet in the floor, motor and PD actuation, without a
 * contact plugin and with each built contact plugin that has CUDA entry
 * points (build/plugins/{smoothed_kappa,soft,hard}.so, loaded with dlopen and
 * created with their declared defaults).
 *
 * Tolerances (relative to each environment's vector norm):
 *   double: states 1e-10, VJPs 1e-9;  float: states 5e-4, VJPs 2e-3
 * (the two backends run the same code; they differ by FMA contraction and
 * the math library's last bits: in float the CPU's C code calls the double
 * libm, the device the float one). Every control step starts both backends
 * from the same state, and the VJP runs both from the same tape, so one
 * control step's rounding is compared, not a diverging trajectory.
 *
 * Training on the device (`[run] device = cuda`, core/env.c): one SHAC
 * iteration on humanoid.xml tracking models/motions/jump.csv (8 envs,
 * horizon 8, small networks, 1 thread, PD actuation) run twice, with
 * device = cpu and device = cuda, for each estimator (autodiff; truncate and
 * bcg with force_threshold = 50 N so that their triggers fire: bcg with 4
 * branches, bundles of 2 steps) and each contact plugin (soft,
 * smoothed_kappa, hard), without and with domain randomisation (friction,
 * mass scale, com offset, pushes every 0.1 s on average). The actor gradient
 * is the checkpoint's Adam first moment after one step divided by 1 - beta1
 * (clip off); the two runs must agree to TOL_GRAD relative (norm-wise), and
 * take the same number of samples (bcg: branches included) and the same
 * fraction of triggered transitions (the device's contact diagnostics drive
 * the triggers).
 *
 * Without a CUDA device (CI) every test prints "skipped: no CUDA device" and
 * counts as skipped (bcg_test_skip); the refusal of a plugin without CUDA entry points is still checked
 * in CUDA builds (it needs no device). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <limits.h>
#include <stdlib.h>

#include "bcg/config.h"
#include "bcg/env.h"
#include "bcg/loader.h"
#include "bcg/runlog.h"
#include "bcg/sim.h"
#include "bcg/sim_cuda.h"
#include "bcg/train.h"
#include "plugin_defaults.h"
#include "testutil.h"
#define TEST_RNG_SEED 0x2545F4914F6CDD1Dull
#include "testrng.h"
#include "teststate.h"


#ifdef BCG_REAL_FLOAT
#define TOL_STATE 5e-4 /* a host emulation of the device arithmetic (FMA, float libm) gave 7e-5 */
#define TOL_VJP 2e-3   /* ... and 1.2e-4 */
/* One SHAC iteration's actor gradient, device = cuda vs cpu: 8 chained
 * control steps forward and 8 VJPs back through contact, each adding
 * rounding of the order TOL_VJP was set from (1e-4), which stiff contact
 * amplifies: the host emulation with float libm and FMA (bench/emu) gave
 * 1e-5..1.6e-4 for most cases and 3.5e-3 for bcg + hard (|g| 245). 5e-2
 * keeps a 15x margin for the device's own float libm and still tells rounding
 * from a wrong gradient: a wrong push map gave 0.4..0.9 in the emulation.
 * The hard model is the exception: its activation is a step, so a float
 * rounding difference of 1e-5 in a gap can switch a contact on in one run and
 * off in the other, and the gradients then differ by O(1) (on the H200,
 * 2026-12-02: bcg + hard 1.66, every other case <= 1.4e-4). In float, hard is
 * compared on samples and triggers only; its gradient difference is printed
 * (HARD_FLOAT_GRAD_EXEMPT). In double the same case agrees to 3e-13. */
#define TOL_GRAD 5e-2
#define HARD_FLOAT_GRAD_EXEMPT 1
#else
#define TOL_STATE 1e-10 /* the emulation gave 3e-13 */
#define TOL_VJP 1e-9    /* ... and 4e-13 */
#define TOL_GRAD 1e-10  /* one SHAC iteration's actor gradient, cuda vs cpu (norm-wise); emulation: 2e-12 */
#define HARD_FLOAT_GRAD_EXEMPT 0
#endif

#define NENV 96 /* batch capacity; calls use n = NENV and n = 77 (a partial block) */

static int have_gpu = -1;
static char gpu_why[256];
static bcg_model *model;

static int gpu(void) {
  if (have_gpu < 0) {
    have_gpu = bcg_cuda_available(gpu_why, sizeof gpu_why);
    if (have_gpu) {
      char info[256];
      bcg_cuda_device_info(info, sizeof info);
      printf("\n  device: %s\n", info);
    }
  }
  if (!have_gpu) bcg_test_skip(gpu_why);
  return have_gpu;
}

static const bcg_model *humanoid(void) {
  if (!model) {
    char err[512];
    const char *p = bcg_model_default_path();
    model = bcg_model_load(p, err, sizeof err);
    if (!model) printf("\n  cannot load %s: %s\n", p, err);
  }
  return model;
}

/* ---- random states ---------------------------------------------------------- */


/* env e: a perturbed reference pose with its lowest contact point at height
 * h (airborne: 0.05..0.5 m; in contact: -0.02..0.005 m, feet in the floor) */
static void random_state(const bcg_mdata *m, int airborne, bcg_real *q, bcg_real *u) {
  test_state_pose(m, q, 0.15);
  test_state_place(m, q, airborne ? 0.05 + 0.45 * urand() : -0.02 + 0.025 * urand());
  test_state_vel(m, u, airborne ? 1.0 : 0.3);
}

/* ---- comparison --------------------------------------------------------------------- */

/* worst over environments of |a - b| / max(|a|, |b|) in the 2-norm of each
 * environment's row of len values (stride ld); INFINITY if anything is not
 * finite (catches unwritten, NaN-poisoned outputs) */
static double rows_relerr(const bcg_real *a, const bcg_real *b, int n, int len, int ld) {
  double worst = 0;
  for (int e = 0; e < n; e++) {
    double na = 0, nb = 0, nd = 0;
    for (int i = 0; i < len; i++) {
      double x = a[(size_t)e * ld + i], y = b[(size_t)e * ld + i];
      if (!isfinite(x) || !isfinite(y)) return INFINITY;
      na += x * x; nb += y * y; nd += (x - y) * (x - y);
    }
    double s = sqrt(fmax(na, nb));
    double r = s > 0 ? sqrt(nd) / s : sqrt(nd);
    if (r > worst) worst = r;
  }
  return worst;
}

/* device buffer holding a copy of host data (or NaN-poisoned when h == NULL) */
static bcg_real *dev(const bcg_real *h, size_t count) {
  bcg_real *d = (bcg_real *)bcg_cuda_malloc(sizeof(bcg_real) * (count ? count : 1));
  CU_ASSERT_FATAL(d != NULL);
  if (h) {
    CU_ASSERT_FATAL(bcg_cuda_copy(d, h, sizeof(bcg_real) * count) == 0);
  } else {
    CU_ASSERT_FATAL(bcg_cuda_memset(d, 0xff, sizeof(bcg_real) * count) == 0);
  }
  return d;
}
static void host(bcg_real *h, const bcg_real *d, size_t count) { CU_ASSERT_FATAL(bcg_cuda_copy(h, d, sizeof(bcg_real) * count) == 0); }

/* ---- one CPU-vs-GPU comparison: chained control steps, then the VJP of the last --- */

typedef struct cmp_result {
  double state, tape, vjp_x, vjp_a, sub_state, sub_vjp, diag;
  int nact_cpu, nact_gpu, bad;
} cmp_result;

static void compare(const char *label, const bcg_simparams *sp, const bcg_contact_ops *cops, void *cself, int n,
                    int airborne_mix, cmp_result *res) {
  const bcg_mdata *m = &model->m;
  int nq = m->nq, nv = m->nv, nu = m->nu, ns = sp->substeps;
  size_t sx = (size_t)nq + nv;
  char err[512];
  memset(res, 0, sizeof *res);
  bcg_sim *cs = bcg_sim_create(model, sp, NENV, cops, cself, err, sizeof err);
  if (!cs) printf("\n  %s: bcg_sim_create: %s\n", label, err);
  CU_ASSERT_FATAL(cs != NULL);
  bcg_cuda_sim *gs = bcg_cuda_sim_create(model, sp, NENV, cops, cself, err, sizeof err);
  if (!gs) printf("\n  %s: bcg_cuda_sim_create: %s\n", label, err);
  CU_ASSERT_FATAL(gs != NULL);

  bcg_real *q = malloc(sizeof(bcg_real) * n * nq), *u = malloc(sizeof(bcg_real) * n * nv), *a = malloc(sizeof(bcg_real) * n * nu);
  bcg_real *qc = malloc(sizeof(bcg_real) * n * nq), *uc = malloc(sizeof(bcg_real) * n * nv);
  bcg_real *qg = malloc(sizeof(bcg_real) * n * nq), *ug = malloc(sizeof(bcg_real) * n * nv);
  bcg_real *tc = malloc(sizeof(bcg_real) * ns * n * sx), *tg = malloc(sizeof(bcg_real) * ns * n * sx);
  bcg_real *xob = malloc(sizeof(bcg_real) * n * 2 * nv), *xbc = malloc(sizeof(bcg_real) * n * 2 * nv),
       *xbg = malloc(sizeof(bcg_real) * n * 2 * nv);
  bcg_real *abc = malloc(sizeof(bcg_real) * n * nu), *abg = malloc(sizeof(bcg_real) * n * nu);
  for (int e = 0; e < n; e++) {
    int air = airborne_mix == 2 ? (e % 2) : airborne_mix;
    random_state(m, air, q + (size_t)e * nq, u + (size_t)e * nv);
    for (int i = 0; i < nu; i++) a[(size_t)e * nu + i] = (bcg_real)(0.8 * (2 * urand() - 1));
  }
  bcg_real *dq = dev(q, (size_t)n * nq), *du = dev(u, (size_t)n * nv), *da = dev(a, (size_t)n * nu);
  bcg_real *dqo = dev(NULL, (size_t)n * nq), *duo = dev(NULL, (size_t)n * nv), *dt = dev(NULL, (size_t)ns * n * sx);

  /* three chained control steps (the CPU trajectory); both backends step from
   * the same input each time and are compared after each */
  memcpy(qc, q, sizeof(bcg_real) * n * nq);
  memcpy(uc, u, sizeof(bcg_real) * n * nv);
  for (int step = 0; step < 3; step++) {
    bcg_real *qi = malloc(sizeof(bcg_real) * n * nq), *ui = malloc(sizeof(bcg_real) * n * nv);
    memcpy(qi, qc, sizeof(bcg_real) * n * nq);
    memcpy(ui, uc, sizeof(bcg_real) * n * nv);
    CU_ASSERT_FATAL(bcg_sim_control_step(cs, n, qi, ui, a, qc, uc, tc) == 0);
    /* the GPU steps from the same input (the CPU's), so that only one control
     * step's rounding differences are compared, not a diverging trajectory */
    CU_ASSERT_FATAL(bcg_cuda_copy(dq, qi, sizeof(bcg_real) * n * nq) == 0);
    CU_ASSERT_FATAL(bcg_cuda_copy(du, ui, sizeof(bcg_real) * n * nv) == 0);
    int rc = bcg_cuda_sim_control_step(gs, n, dq, du, da, dqo, duo, dt);
    if (rc) printf("\n  %s: GPU control step: %d %s\n", label, rc, bcg_cuda_sim_error(gs));
    CU_ASSERT_FATAL(rc == 0);
    host(qg, dqo, (size_t)n * nq);
    host(ug, duo, (size_t)n * nv);
    host(tg, dt, (size_t)ns * n * sx);
    double es = fmax(rows_relerr(qc, qg, n, nq, nq), rows_relerr(uc, ug, n, nv, nv));
    double et = rows_relerr(tc, tg, ns * n, (int)sx, (int)sx);
    if (es > res->state) res->state = es;
    if (et > res->tape) res->tape = et;
    /* diagnostics of this control step */
    bcg_real *mfg = malloc(sizeof(bcg_real) * n), *mpg = malloc(sizeof(bcg_real) * n);
    int *bg = malloc(sizeof(int) * n), *nag = malloc(sizeof(int) * n);
    CU_ASSERT_FATAL(bcg_cuda_sim_diagnostics(gs, n, mfg, mpg, bg) == 0);
    CU_ASSERT_FATAL(bcg_cuda_sim_nactive(gs, n, nag) == 0);
    for (int e = 0; e < n; e++) {
      double d = fmax(bcg_relerr(mfg[e], cs->maxfn[e], 1), bcg_relerr(mpg[e], cs->maxpen[e], 1e-3));
      if (d > res->diag) res->diag = d;
      if (bg[e] != cs->bad[e]) res->bad++;
      if (bg[e] || cs->bad[e]) res->bad += 1000;
      res->nact_cpu += cs->nact[e];
      res->nact_gpu += nag[e];
    }
    free(mfg); free(mpg); free(bg); free(nag);
    if (step < 2) { free(qi); free(ui); continue; }

    /* VJP of this (last) control step from the same tape (the CPU's) */
    CU_ASSERT_FATAL(bcg_cuda_copy(dt, tc, sizeof(bcg_real) * ns * n * sx) == 0);
    for (size_t i = 0; i < (size_t)n * 2 * nv; i++) xob[i] = (bcg_real)nrand();
    for (size_t i = 0; i < (size_t)n * nu; i++) abc[i] = abg[i] = (bcg_real)nrand(); /* accumulation */
    CU_ASSERT_FATAL(bcg_sim_control_step_vjp(cs, n, tc, a, xob, xbc, abc) == 0);
    bcg_real *dxob = dev(xob, (size_t)n * 2 * nv), *dxb = dev(NULL, (size_t)n * 2 * nv), *dab = dev(abg, (size_t)n * nu);
    rc = bcg_cuda_sim_control_step_vjp(gs, n, dt, da, dxob, dxb, dab);
    if (rc) printf("\n  %s: GPU control step VJP: %d %s\n", label, rc, bcg_cuda_sim_error(gs));
    CU_ASSERT_FATAL(rc == 0);
    host(xbg, dxb, (size_t)n * 2 * nv);
    host(abg, dab, (size_t)n * nu);
    res->vjp_x = fmax(rows_relerr(xbc, xbg, n, nv, 2 * nv), rows_relerr(xbc + nv, xbg + nv, n, nv, 2 * nv));
    res->vjp_a = rows_relerr(abc, abg, n, nu, nu);

    /* a single substep and its VJP from the same inputs (plain batches) */
    CU_ASSERT_FATAL(bcg_sim_substep(cs, n, qi, ui, a, qc, uc) == 0);
    bcg_real *dqi = dev(qi, (size_t)n * nq), *dui = dev(ui, (size_t)n * nv);
    CU_ASSERT_FATAL(bcg_cuda_sim_substep(gs, n, dqi, dui, da, dqo, duo) == 0);
    host(qg, dqo, (size_t)n * nq);
    host(ug, duo, (size_t)n * nv);
    res->sub_state = fmax(rows_relerr(qc, qg, n, nq, nq), rows_relerr(uc, ug, n, nv, nv));
    bcg_real *qb = malloc(sizeof(bcg_real) * n * nv), *ub = malloc(sizeof(bcg_real) * n * nv);
    for (size_t i = 0; i < (size_t)n * nu; i++) abc[i] = abg[i] = 0;
    CU_ASSERT_FATAL(bcg_sim_substep_vjp(cs, n, qi, ui, a, xob, xob + (size_t)n * nv, qb, ub, abc) == 0);
    bcg_real *dqob = dev(xob, (size_t)n * nv), *duob = dev(xob + (size_t)n * nv, (size_t)n * nv);
    bcg_real *dqb = dev(NULL, (size_t)n * nv), *dub = dev(NULL, (size_t)n * nv);
    CU_ASSERT_FATAL(bcg_cuda_copy(dab, abg, sizeof(bcg_real) * n * nu) == 0);
    CU_ASSERT_FATAL(bcg_cuda_sim_substep_vjp(gs, n, dqi, dui, da, dqob, duob, dqb, dub, dab) == 0);
    bcg_real *qbg = malloc(sizeof(bcg_real) * n * nv), *ubg = malloc(sizeof(bcg_real) * n * nv);
    host(qbg, dqb, (size_t)n * nv);
    host(ubg, dub, (size_t)n * nv);
    host(abg, dab, (size_t)n * nu);
    res->sub_vjp = fmax(fmax(rows_relerr(qb, qbg, n, nv, nv), rows_relerr(ub, ubg, n, nv, nv)),
                        rows_relerr(abc, abg, n, nu, nu));
    free(qb); free(ub); free(qbg); free(ubg);
    bcg_cuda_free(dqob); bcg_cuda_free(duob); bcg_cuda_free(dqb); bcg_cuda_free(dub);
    bcg_cuda_free(dqi); bcg_cuda_free(dui);
    bcg_cuda_free(dxob); bcg_cuda_free(dxb); bcg_cuda_free(dab);
    free(qi); free(ui);
  }
  printf("\n  %-34s n=%3d contacts cpu %5d gpu %5d | state %.2e tape %.2e diag %.2e | vjp x %.2e a %.2e | "
         "substep %.2e vjp %.2e%s",
         label, n, res->nact_cpu, res->nact_gpu, res->state, res->tape, res->diag, res->vjp_x, res->vjp_a,
         res->sub_state, res->sub_vjp, res->bad ? " | status differs or non-zero" : "");
  char what[128];
  snprintf(what, sizeof what, "GPU vs CPU state (%s)", label);
  bcg_test_report(what, fmax(fmax(res->state, res->tape), res->sub_state));
  snprintf(what, sizeof what, "GPU vs CPU VJP (%s)", label);
  bcg_test_report(what, fmax(fmax(res->vjp_x, res->vjp_a), res->sub_vjp));
  CU_ASSERT(res->state <= TOL_STATE);
  CU_ASSERT(res->tape <= TOL_STATE);
  CU_ASSERT(res->sub_state <= TOL_STATE);
  CU_ASSERT(res->vjp_x <= TOL_VJP);
  CU_ASSERT(res->vjp_a <= TOL_VJP);
  CU_ASSERT(res->sub_vjp <= TOL_VJP);
  CU_ASSERT(res->diag <= 100 * TOL_STATE);
  CU_ASSERT(res->nact_cpu == res->nact_gpu);
  CU_ASSERT(res->bad == 0);

  bcg_cuda_free(dq); bcg_cuda_free(du); bcg_cuda_free(da); bcg_cuda_free(dqo); bcg_cuda_free(duo);
  bcg_cuda_free(dt);
  free(q); free(u); free(a); free(qc); free(uc); free(qg); free(ug); free(tc); free(tg);
  free(xob); free(xbc); free(xbg); free(abc); free(abg);
  bcg_cuda_sim_free(gs);
  bcg_sim_free(cs);
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_device_info(void) {
  char buf[256];
  bcg_cuda_device_info(buf, sizeof buf);
  CU_ASSERT(strlen(buf) > 0);
  if (!gpu()) return;
  printf("  %s\n", buf);
}

/* A plugin without CUDA entry points is refused by name, before any device
 * is touched (so this runs on CI too, in CUDA builds). */
static int nocuda_solve(void *self, bcg_contact_batch *b) { (void)self; (void)b; return 0; }
static int nocuda_vjp(void *self, const bcg_contact_batch *b, bcg_contact_adjoint *a) {
  (void)self; (void)b; (void)a;
  return 0;
}
static const bcg_contact_ops NOCUDA = {.size = sizeof(bcg_contact_ops), .solve = nocuda_solve, .solve_vjp = nocuda_vjp};

static void test_refuses_cpu_only_plugin(void) {
  if (!humanoid()) { CU_FAIL("humanoid.xml"); return; }
  bcg_simparams sp;
  bcg_simparams_default(model, &sp);
  char err[512] = "";
  bcg_cuda_sim *s = bcg_cuda_sim_create(model, &sp, 8, &NOCUDA, NULL, err, sizeof err);
  CU_ASSERT(s == NULL);
  bcg_cuda_sim_free(s);
#ifdef BCG_HAVE_CUDA
  CU_ASSERT(strstr(err, "has no CUDA entry points; use device = cpu") != NULL);
#else
  CU_ASSERT(strstr(err, "use device = cpu") != NULL);
#endif
  printf("\n  refused: %s", err);
  /* a real plugin without CUDA (if one is built): refused by its name */
  const char *names[] = {"smoothed_kappa", "soft", "hard"};
  for (int i = 0; i < 3; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/plugins/%s.so", bcg_test_build_dir(), names[i]);
    pd_plugin pl;
    if (pd_load_contact(path, model, &pl, err, sizeof err)) continue;
    if (!pd_has_cuda(&pl)) {
      s = bcg_cuda_sim_create(model, &sp, 8, pl.ops, pl.self, err, sizeof err);
      CU_ASSERT(s == NULL);
      bcg_cuda_sim_free(s);
#ifdef BCG_HAVE_CUDA
      char want[256];
      snprintf(want, sizeof want, "contact plugin '%s' has no CUDA entry points", pl.desc->name);
      CU_ASSERT(strstr(err, want) != NULL);
#endif
      printf("\n  refused: %s", err);
    }
    pd_unload(&pl);
  }
}

static void test_no_contact_motor(void) {
  if (!gpu()) return;
  if (!humanoid()) { CU_FAIL("humanoid.xml"); return; }
  bcg_simparams sp;
  bcg_simparams_default(model, &sp);
  cmp_result r;
  compare("no plugin, motor, airborne", &sp, NULL, NULL, NENV, 1, &r);
  compare("no plugin, motor, feet in floor", &sp, NULL, NULL, 77, 0, &r);
}

static void test_no_contact_pd(void) {
  if (!gpu()) return;
  if (!humanoid()) { CU_FAIL("humanoid.xml"); return; }
  bcg_simparams sp;
  bcg_simparams_default(model, &sp);
  sp.actuation = BCG_ACTUATION_PD;
  sp.substeps = 6;
  cmp_result r;
  compare("no plugin, PD, mixed", &sp, NULL, NULL, NENV, 2, &r);
}

static void test_block_sizes(void) {
  if (!gpu()) return;
  if (!humanoid()) { CU_FAIL("humanoid.xml"); return; }
  bcg_simparams sp;
  bcg_simparams_default(model, &sp);
  cmp_result r;
  setenv("BCG_CUDA_BLOCK", "64", 1); /* the default is 32 */
  compare("no plugin, block 64", &sp, NULL, NULL, 77, 2, &r);
  setenv("BCG_CUDA_BLOCK", "256", 1);
  compare("no plugin, block 256", &sp, NULL, NULL, 77, 2, &r);
  unsetenv("BCG_CUDA_BLOCK");
}

/* The built-in contact models, and any out-of-tree ones listed in
 * BCG_TEST_CUDA_PLUGINS (paths of .so files, ':'-separated; the device
 * scripts pass the SDK example hunt_crossley built from an installed
 * prefix). An out-of-tree model is stepped with 1 ms substeps: an explicit
 * law such as Hunt-Crossley's needs them (its test in test_sdk does the same). */
static void test_plugins(void) {
  if (!gpu()) return;
  if (!humanoid()) { CU_FAIL("humanoid.xml"); return; }
  const char *names[] = {"smoothed_kappa", "soft", "hard"};
  char extra[4096] = "";
  const char *ev = getenv("BCG_TEST_CUDA_PLUGINS");
  if (ev) snprintf(extra, sizeof extra, "%s", ev);
  char *paths[16];
  int np = 0;
  for (char *tok = strtok(extra, ":"); tok && np < 16; tok = strtok(NULL, ":")) paths[np++] = tok;
  int tested = 0;
  for (int i = 0; i < 3 + np; i++) {
    char path[1024], err[512];
    if (i < 3)
      snprintf(path, sizeof path, "%s/plugins/%s.so", bcg_test_build_dir(), names[i]);
    else
      snprintf(path, sizeof path, "%s", paths[i - 3]);
    const char *what = i < 3 ? names[i] : path;
    pd_plugin pl;
    if (pd_load_contact(path, model, &pl, err, sizeof err)) {
      printf("\n  %s: not tested (%s)", what, err);
      if (i >= 3) CU_FAIL("a plugin named in BCG_TEST_CUDA_PLUGINS did not load");
      continue;
    }
    if (!pd_has_cuda(&pl)) {
      printf("\n  %s: not tested (no CUDA entry points)", what);
      if (i >= 3) CU_FAIL("a plugin named in BCG_TEST_CUDA_PLUGINS has no CUDA entry points");
      pd_unload(&pl);
      continue;
    }
    bcg_simparams sp;
    bcg_simparams_default(model, &sp);
    if (i >= 3 && sp.dt > (bcg_real)0.001) sp.dt = (bcg_real)0.001;
    sp.need_G = (pl.desc->caps & BCG_CAP_NEEDS_DELASSUS) != 0;
    cmp_result r;
    char label[96];
    snprintf(label, sizeof label, "%s, motor, feet in floor", pl.desc->name);
    compare(label, &sp, pl.ops, pl.self, NENV, 0, &r);
    snprintf(label, sizeof label, "%s, PD, mixed", pl.desc->name);
    sp.actuation = BCG_ACTUATION_PD;
    compare(label, &sp, pl.ops, pl.self, 77, 2, &r);
    CU_ASSERT(r.nact_cpu > 0); /* contacts were exercised */
    tested++;
    pd_unload(&pl);
  }
  printf("\n  %d contact plugin(s) compared", tested);
}

/* ---- training with device = cuda: one SHAC iteration, CPU vs GPU gradient ------------------ */

/* bench/emu/emu_driver.c sets this: it registers contact plugins whose CPU
 * solves stand in for the CUDA entry points before the build's are loaded */
static void (*train_registry_hook)(bcg_registry *reg);
static bcg_registry *treg;
static char ttmp[256];

static int train_setup(void) {
  if (treg) return 0;
  snprintf(ttmp, sizeof ttmp, "%s", bcg_test_tmpdir()); /* removed at exit */
  treg = bcg_registry_new();
  if (train_registry_hook) train_registry_hook(treg);
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/plugins", bcg_test_build_dir());
  bcg_registry_scan_dir(treg, dir, 1);
  return 0;
}

typedef struct train_out {
  double *g;    /* actor gradient (Adam m / (1 - beta1)) */
  long np;
  double bundle_frac, grad_norm;
  uint64_t samples;
  double device_steps; /* the log's est_device_steps of the iteration (-1: the estimator logs none) */
} train_out;

#define BETA1 0.7

/* one SHAC iteration of humanoid.xml on the jump clip; 0 or -1 (message printed) */
/* a config file loaded through the test registry (NULL: the message printed) */
static bcg_config *load_ini(const char *ini) {
  char err[2048];
  bcg_config *cfg = NULL;
  if (bcg_config_load_with(&cfg, treg, ini, 0, NULL, err, sizeof err)) {
    printf("\n  config: %s\n", err);
    return NULL;
  }
  return cfg;
}

static int train_smb = 1; /* [run] sim_min_batch of the cuda runs (1: every batch on the GPU) */

static int train_once(const char *estimator, const char *contact, int dr, const char *device, train_out *o) {
  memset(o, 0, sizeof *o);
  char ini[PATH_MAX + 64], err[2048], rdir[PATH_MAX];
  snprintf(ini, sizeof ini, "%s/%s_%s_%d_%s.ini", ttmp, estimator, contact, dr, device);
  FILE *f = fopen(ini, "w");
  if (!f) return -1;
  fprintf(f,
          "[run]\nname = cuda_grad\nseed = 5\ndevice = %s\nsim_min_batch = %d\nnum_envs = 8\nthreads = 1\niterations = 1\n"
          "checkpoint_every = 1\nout_dir = %s/runs\n"
          "[model]\npath = /usr/share/mujoco/model/humanoid/humanoid.xml\n"
          "[sim]\nsubsteps = 4\ncontrol_dt = 0.02\nactuation = pd\n",
          device, train_smb, ttmp);
  if (dr)
    fprintf(f, "dr_friction_min = 0.5\ndr_friction_max = 1.2\ndr_mass_scale = 0.2\ndr_com_offset = 0.02\n"
               "dr_push_interval = 0.1\ndr_push_velocity = 0.5\n");
  fprintf(f, "[contact]\nplugin = %s\n[estimator]\nplugin = %s\n", contact, estimator);
  if (!strcmp(estimator, "bcg"))
    fprintf(f, "branches = 4\nduration = 2\nforce_threshold = 50\n");
  else if (!strcmp(estimator, "clip_autodiff")) /* clipping that bites: some adjoints are cut */
    fprintf(f, "max_norm = 0.01\nclip_action_grad = true\n");
  else if (!strcmp(estimator, "truncate"))
    fprintf(f, "force_threshold = 50\n");
  fprintf(f,
          "[learner]\nplugin = shac\nhorizon = 8\nactor_layers = 32,16\ncritic_layers = 16,16\n"
          "critic_iterations = 1\nminibatches = 1\nbeta1 = %g\nactor_grad_clip = 1e30\n"
          "[task]\nplugin = imitation\nmotion = models/motions/jump.csv\nrsi = true\n",
          BETA1);
  fclose(f);
  bcg_config *cfg = load_ini(ini);
  if (!cfg) return -1;
  if (bcg_rundir_create(ttmp, "runs", rdir, sizeof rdir, err, sizeof err)) {
    printf("\n  run dir: %s\n", err);
    bcg_config_free(cfg);
    return -1;
  }
  bcg_train_options opt;
  memset(&opt, 0, sizeof opt);
  opt.run_dir = rdir;
  bcg_train_result res;
  int rc = bcg_train_run(cfg, &opt, &res, err, sizeof err);
  bcg_config_free(cfg);
  if (rc) {
    printf("\n  train (%s, %s, %s, dr %d): %s\n", estimator, contact, device, dr, err);
    return -1;
  }
  o->bundle_frac = res.last.bundle_frac;
  o->grad_norm = res.last.grad_norm;
  o->samples = res.samples;
  o->device_steps = -1;
  {
    char lp[PATH_MAX + 16];
    snprintf(lp, sizeof lp, "%s/log.h5", rdir);
    int64_t lh = bcg_checkpoint_open(lp, err, sizeof err);
    double ds[4];
    if (lh >= 0) {
      if (bcg_h5_read_doubles(lh, "est_device_steps", ds, 4, err, sizeof err) == 1) o->device_steps = ds[0];
      bcg_checkpoint_close(lh);
    }
  }
  int64_t fh = bcg_checkpoint_open(res.checkpoint, err, sizeof err);
  if (fh < 0) {
    printf("\n  checkpoint %s: %s\n", res.checkpoint, err);
    return -1;
  }
  o->np = bcg_h5_length(fh, "learner/actor/adam/m");
  if (o->np > 0) o->g = malloc(sizeof(double) * (size_t)o->np);
  long got = o->g ? bcg_h5_read_doubles(fh, "learner/actor/adam/m", o->g, (size_t)o->np, err, sizeof err) : -1;
  bcg_checkpoint_close(fh);
  if (got != o->np || o->np <= 0) {
    printf("\n  checkpoint %s: no actor Adam moment (%s)\n", res.checkpoint, err);
    return -1;
  }
  for (long i = 0; i < o->np; i++) o->g[i] /= 1 - BETA1; /* m = (1 - beta1) g after one step from 0 */
  return 0;
}

/* |g_cuda - g_cpu| / |g_cpu| (INFINITY if any entry is not finite or g_cpu
 * is zero); *norm = |g_cpu| */
static double grad_rel(const train_out *c, const train_out *g, double *norm) {
  double nd = 0, nc = 0;
  int finite = 1;
  for (long k = 0; k < c->np; k++) {
    if (!isfinite(c->g[k]) || !isfinite(g->g[k])) finite = 0;
    nd += (c->g[k] - g->g[k]) * (c->g[k] - g->g[k]);
    nc += c->g[k] * c->g[k];
  }
  if (norm) *norm = sqrt(nc);
  return finite && nc > 0 ? sqrt(nd / nc) : INFINITY;
}

static void train_compare(int dr) {
  if (!gpu()) return;
  if (train_setup()) { CU_FAIL("temporary directory"); return; }
  const char *ests[] = {"autodiff", "truncate", "bcg"}, *cons[] = {"soft", "smoothed_kappa", "hard"};
  double worst = 0;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      train_out c, g;
      int rc = train_once(ests[i], cons[j], dr, "cpu", &c);
      rc = rc || train_once(ests[i], cons[j], dr, "cuda", &g);
      CU_ASSERT(rc == 0);
      if (rc) { free(c.g); free(g.g); continue; }
      CU_ASSERT_FATAL(c.np == g.np);
      double gn;
      double rel = grad_rel(&c, &g, &gn);
      printf("\n  %-8s %-14s dr %d: |g| %.6e  cuda vs cpu %.2e  triggered %.3f / %.3f  samples %llu / %llu", ests[i],
             cons[j], dr, gn, rel, c.bundle_frac, g.bundle_frac, (unsigned long long)c.samples,
             (unsigned long long)g.samples);
      int exempt = HARD_FLOAT_GRAD_EXEMPT && !strcmp(cons[j], "hard");
      if (exempt) printf(" (hard in float: gradient not compared)");
      else CU_ASSERT(rel <= TOL_GRAD);
      CU_ASSERT(gn > 0);
      CU_ASSERT(c.samples == g.samples);
      if (!(isnan(c.bundle_frac) && isnan(g.bundle_frac))) CU_ASSERT(c.bundle_frac == g.bundle_frac);
      if (i > 0) CU_ASSERT(c.bundle_frac > 0); /* the trigger fired: bundles / cuts were exercised */
      if (i == 2) CU_ASSERT(c.samples > (uint64_t)8 * 8); /* branches were stepped */
      if (!exempt && rel > worst) worst = rel;
      free(c.g);
      free(g.g);
    }
  bcg_test_report(dr ? "SHAC actor gradient, device = cuda vs cpu, domain randomisation (rel)"
                     : "SHAC actor gradient, device = cuda vs cpu (rel)",
                  worst);
}

/* ---- a GPU estimator: the SDK example clip_autodiff's device entries ---------------
 * BCG_TEST_CUDA_ESTIMATORS names the example's .so, built from an installed
 * prefix with its CUDA part (bench/device_run.sh). One SHAC iteration with
 * device = cuda, where the core calls its forward_cuda / backward_cuda on
 * device arrays (clipping on, so its kernel changes adjoints), against
 * device = cpu, where its host entries run: the same actor gradient within
 * the stepper's CPU-vs-GPU tolerance, the same samples, and the log shows
 * which entries ran (device_steps = the horizon on cuda, 0 on cpu). Without
 * the variable the test says so and passes (the CI machine has no GPU and
 * test_sdk checks the entries' presence there). */
static void test_gpu_estimator(void) {
  if (!gpu()) return;
  const char *path = getenv("BCG_TEST_CUDA_ESTIMATORS");
  if (!path || !*path) {
    printf("\n  not tested: BCG_TEST_CUDA_ESTIMATORS names no GPU estimator (bench/device_run.sh sets it)");
    return;
  }
  if (train_setup()) { CU_FAIL("temporary directory"); return; }
  char err[1024];
  if (!bcg_registry_find(treg, BCG_KIND_ESTIMATOR, "clip_autodiff") &&
      bcg_registry_load_file(treg, path, err, sizeof err)) {
    printf("\n  %s: %s", path, err);
    CU_FAIL("the GPU estimator did not load");
    return;
  }
  const bcg_plugin *pl = bcg_registry_find(treg, BCG_KIND_ESTIMATOR, "clip_autodiff");
  CU_ASSERT_FATAL(pl != NULL);
  CU_ASSERT(pl->desc->caps & BCG_CAP_CUDA);
  train_out c, g;
  int rc = train_once("clip_autodiff", "smoothed_kappa", 0, "cpu", &c);
  rc = rc || train_once("clip_autodiff", "smoothed_kappa", 0, "cuda", &g);
  CU_ASSERT_FATAL(rc == 0);
  CU_ASSERT_FATAL(c.np == g.np);
  double gn, rel = grad_rel(&c, &g, &gn);
  printf("\n  clip_autodiff smoothed_kappa: |g| %.6e  cuda vs cpu %.2e  device steps %g (cuda) / %g (cpu)", gn, rel,
         g.device_steps, c.device_steps);
  CU_ASSERT(rel <= TOL_GRAD);
  CU_ASSERT(gn > 0);
  CU_ASSERT(c.samples == g.samples);
  CU_ASSERT(fabs(c.bundle_frac - g.bundle_frac) <= 1.0 / 64 + 1e-12); /* the same clipped pairs, one at most apart */
  CU_ASSERT(c.bundle_frac > 0);
  CU_ASSERT(g.device_steps >= 8); /* horizon 8: every forward on device arrays */
  CU_ASSERT(c.device_steps == 0);
  bcg_test_report("GPU estimator clip_autodiff: SHAC actor gradient, device entries vs host entries (rel)", rel);
  free(c.g);
  free(g.g);
}

/* ---- domain randomisation re-drawn at resets, device = cuda vs cpu ----------------
 * bcg_env_randomize of a subset of environments (what the learners do at
 * episode resets) makes the device re-send those environments' models and
 * friction only (bcg_cuda_sim_update_domain). The control steps and VJPs
 * after each re-draw must match the CPU env, which reads the host domain:
 * directly, and through a child env (bcg_env_create_like) whose slots map to
 * environments of the parent (BCG's branches), where the per-slot copies
 * gathered for a map must be refreshed too. A device copy left stale would
 * differ by the re-draw (friction 0.5..1.25, masses +-20%), far above
 * TOL_STATE. */
static bcg_env *dr_env(const char *device, int n) {
  char ini[PATH_MAX + 64], err[2048];
  snprintf(ini, sizeof ini, "%s/redraw_%s.ini", ttmp, device);
  FILE *f = fopen(ini, "w");
  if (!f) return NULL;
  fprintf(f,
          "[run]\nseed = 11\ndevice = %s\nsim_min_batch = 1\nthreads = 1\n[model]\npath = /usr/share/mujoco/model/humanoid/humanoid.xml\n"
          "[sim]\nsubsteps = 4\ncontrol_dt = 0.02\nactuation = pd\ndr_friction_min = 0.5\ndr_friction_max = 1.25\n"
          "dr_mass_scale = 0.2\ndr_com_offset = 0.02\n[contact]\nplugin = smoothed_kappa\n",
          device);
  fclose(f);
  bcg_config *cfg = load_ini(ini);
  if (!cfg) return NULL;
  bcg_env *env = bcg_env_create(cfg, n, err, sizeof err);
  if (!env) printf("\n  env (%s): %s\n", device, err);
  bcg_config_free(cfg);
  return env;
}

/* one control step (and its VJP) of n slots on both envs from the same inputs; worst relative difference */
static double dr_step_both(bcg_env *c, bcg_env *g, int n, const bcg_real *x, const bcg_real *a, bcg_real *xc_out) {
  int nx = c->nx, nu = c->nu, nv = c->nv;
  size_t ts = bcg_env_tape_size(c, n);
  bcg_real *xc = malloc(sizeof(bcg_real) * n * nx), *xg = malloc(sizeof(bcg_real) * n * nx);
  bcg_real *tc = malloc(sizeof(bcg_real) * ts), *tg = malloc(sizeof(bcg_real) * ts);
  bcg_real *xnb = malloc(sizeof(bcg_real) * n * 2 * nv), *xbc = malloc(sizeof(bcg_real) * n * 2 * nv),
       *xbg = malloc(sizeof(bcg_real) * n * 2 * nv), *abc = calloc((size_t)n * nu, sizeof(bcg_real)),
       *abg = calloc((size_t)n * nu, sizeof(bcg_real));
  double worst = INFINITY;
  if (bcg_env_control_step(c, n, x, a, xc, tc) == 0 && bcg_env_control_step(g, n, x, a, xg, tg) == 0) {
    worst = rows_relerr(xc, xg, n, nx, nx);
    for (size_t i = 0; i < (size_t)n * 2 * nv; i++) xnb[i] = (bcg_real)nrand();
    if (bcg_env_step_vjp(c, n, tc, a, xnb, xbc, abc) == 0 && bcg_env_step_vjp(g, n, tc, a, xnb, xbg, abg) == 0)
      worst = fmax(worst, fmax(rows_relerr(xbc, xbg, n, 2 * nv, 2 * nv), rows_relerr(abc, abg, n, nu, nu)));
    else
      worst = INFINITY;
    if (xc_out) memcpy(xc_out, xc, sizeof(bcg_real) * n * nx);
  }
  free(xc); free(xg); free(tc); free(tg); free(xnb); free(xbc); free(xbg); free(abc); free(abg);
  return worst;
}

static void test_env_redraw(void) {
  if (!gpu() || !humanoid()) return;
  if (train_setup()) { CU_FAIL("temporary directory"); return; }
  const int n = 24, nb = 16;
  bcg_env *c = dr_env("cpu", n), *g = dr_env("cuda", n);
  CU_ASSERT_FATAL(c && g);
  const bcg_mdata *m = &c->model->m;
  int nx = c->nx, nq = c->nq, nu = c->nu;
  bcg_real *x = malloc(sizeof(bcg_real) * n * nx), *a = malloc(sizeof(bcg_real) * n * nu);
  bcg_real *x0 = malloc(sizeof(bcg_real) * n * nx), *x1 = malloc(sizeof(bcg_real) * n * nx);
  for (int e = 0; e < n; e++) {
    random_state(m, e % 3 == 0, x + (size_t)e * nx, x + (size_t)e * nx + nq);
    for (int i = 0; i < nu; i++) a[(size_t)e * nu + i] = (bcg_real)(0.8 * (2 * urand() - 1));
  }
  double worst = dr_step_both(c, g, n, x, a, x0);
  /* a reset re-draws some environments (two runs of consecutive ones and singles) */
  int redraw1[] = {1, 2, 3, 7, 12, 20, 21};
  bcg_env_randomize(c, redraw1, 7, 4);
  bcg_env_randomize(g, redraw1, 7, 4);
  worst = fmax(worst, dr_step_both(c, g, n, x, a, x1));
  double moved = 0; /* the re-draw changed those environments' steps (in contact) */
  for (int i = 0; i < 7; i++) {
    int e = redraw1[i];
    moved = fmax(moved, rows_relerr(x0 + (size_t)e * nx, x1 + (size_t)e * nx, 1, nx, nx));
  }
  /* a child env mapping its slots onto the parent's environments (branches) */
  bcg_env *cc = bcg_env_create_like(c, nb, NULL, 0), *gc = bcg_env_create_like(g, nb, NULL, 0);
  CU_ASSERT_FATAL(cc && gc);
  int map[16];
  for (int i = 0; i < nb; i++) map[i] = (5 * i + 3) % n;
  bcg_env_set_envmap(cc, map);
  bcg_env_set_envmap(gc, map);
  bcg_real *xb = malloc(sizeof(bcg_real) * nb * nx), *ab = malloc(sizeof(bcg_real) * nb * nu);
  for (int i = 0; i < nb; i++) {
    memcpy(xb + (size_t)i * nx, x + (size_t)map[i] * nx, sizeof(bcg_real) * nx);
    memcpy(ab + (size_t)i * nu, a + (size_t)map[i] * nu, sizeof(bcg_real) * nu);
  }
  worst = fmax(worst, dr_step_both(cc, gc, nb, xb, ab, NULL));
  /* re-draw environments the map names, step the child again with the same map */
  int redraw2[] = {3, 8, 13, 18, 23, 0};
  bcg_env_randomize(c, redraw2, 6, 9);
  bcg_env_randomize(g, redraw2, 6, 9);
  worst = fmax(worst, dr_step_both(cc, gc, nb, xb, ab, NULL));
  worst = fmax(worst, dr_step_both(c, g, n, x, a, NULL));
  /* [run] sim_min_batch: batches under it step on the CPU sim, bit for bit device = cpu */
  bcg_env_set_cuda_min_batch(g, n + 1);
  double small = dr_step_both(c, g, n, x, a, NULL);
  CU_ASSERT(small == 0);
  bcg_env_set_cuda_min_batch(g, 1);
  printf("\n  re-drawn subsets: cuda vs cpu %.2e (the re-draw moved a step by %.2e); under sim_min_batch %.1e",
         worst, moved, small);
  bcg_test_report("GPU vs CPU after partial domain re-draws (rel)", worst);
  CU_ASSERT(worst <= TOL_VJP);
  CU_ASSERT(moved > 1e-2 && moved > 100 * worst); /* the comparison can fail: a re-draw moves a step by far more */
  free(x); free(a); free(x0); free(x1); free(xb); free(ab);
  bcg_env_free(cc); bcg_env_free(gc);
  bcg_env_free(c); bcg_env_free(g);
}

/* [run] sim_min_batch = 16 with 8 environments: BCG's nominal batches (at
 * most 8) step on the CPU sim and its larger branch batches (4 branches of
 * each triggered environment) on the GPU, within one iteration (counted);
 * the gradient must still be device = cpu's */
static void test_train_gradient_mixed(void) {
  if (!gpu()) return;
  if (train_setup()) { CU_FAIL("temporary directory"); return; }
  train_smb = 16;
  const char *cons[] = {"soft", "smoothed_kappa"};
  double worst = 0;
  for (int j = 0; j < 2; j++)
    for (int dr = 0; dr < 2; dr++) {
      train_out c, g;
      uint64_t g0, c0, g1, c1;
      int rc = train_once("bcg", cons[j], dr, "cpu", &c);
      bcg_env_device_batches(&g0, &c0);
      rc = rc || train_once("bcg", cons[j], dr, "cuda", &g);
      bcg_env_device_batches(&g1, &c1);
      CU_ASSERT(rc == 0);
      CU_ASSERT(g1 > g0 && c1 > c0); /* both devices ran batches of this iteration */
      if (rc || c.np != g.np) { free(c.g); free(g.g); CU_ASSERT(rc == 0 && c.np == g.np); continue; }
      double rel = grad_rel(&c, &g, NULL);
      printf("\n  bcg %-14s dr %d, batches on the GPU %llu, on the CPU %llu: cuda vs cpu %.2e  samples %llu / %llu",
             cons[j], dr, (unsigned long long)(g1 - g0), (unsigned long long)(c1 - c0), rel,
             (unsigned long long)c.samples, (unsigned long long)g.samples);
      CU_ASSERT(rel <= TOL_GRAD);
      CU_ASSERT(c.samples == g.samples && c.samples > (uint64_t)8 * 8);
      if (rel > worst) worst = rel;
      free(c.g);
      free(g.g);
    }
  train_smb = 1;
  bcg_test_report("SHAC+BCG actor gradient, mixed CPU / GPU batches vs cpu (rel)", worst);
}

static void test_train_gradient(void) { train_compare(0); }
static void test_train_gradient_dr(void) { train_compare(1); }

BCG_TESTS({"device info", test_device_info},
          {"plugin without CUDA entry points is refused", test_refuses_cpu_only_plugin},
          {"CPU vs GPU: no plugin, motor", test_no_contact_motor},
          {"CPU vs GPU: no plugin, PD", test_no_contact_pd},
          {"CPU vs GPU: block sizes", test_block_sizes},
          {"CPU vs GPU: contact plugins", test_plugins},
          {"env: partial domain re-draws, device = cuda vs cpu", test_env_redraw},
          {"training: SHAC gradient, device = cuda vs cpu", test_train_gradient},
          {"training: SHAC gradient with domain randomisation, cuda vs cpu", test_train_gradient_dr},
          {"training: SHAC+BCG gradient, nominal batches on the CPU and branches on the GPU", test_train_gradient_mixed},
          {"GPU estimator (SDK example clip_autodiff): device entries vs host entries", test_gpu_estimator});
BCG_RUN("cuda")
