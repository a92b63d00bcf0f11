/* tests/test_sdk.c - the plugin SDK (plugins/): an out-of-tree plugin built
 * from an installed bcg only.
 *
 *   - `make install-built PREFIX=$tmp BUILD=<the build under test>` installs
 *     that build (nothing is rebuilt, whatever flags it was made with) with
 *     the headers, bcg.pc and the SDK (README, template, example);
 *   - plugins/example (clip_autodiff) is built with its own Makefile through
 *     pkg-config against that prefix alone (PKG_CONFIG_LIBDIR/PATH =
 *     $tmp/lib/pkgconfig), and the installed template is built as is;
 *   - the installed bcg, with BCG_PLUGIN_PATH at the example's output, lists
 *     it (`bcg plugins`) and shows its keys (`bcg describe`);
 *   - loaded through the registry API and configured from an INI file on
 *     humanoid.xml (no contact), clip_autodiff with max_norm = 0 and the
 *     template with adjoint_scale = 1 equal autodiff bit for bit over a
 *     horizon; with max_norm > 0 every environment's state adjoint is
 *     autodiff's scaled to the bound (l2) or clamped (value), the action
 *     adjoint exact unless clip_action_grad; its backward matches central
 *     finite differences of its forward in the actions and the tangent state.
 * The install and the two compiles are most of the run time. */
#include <math.h>
#include <stdarg.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/env.h"
#include "bcg/loader.h"
#include "bcg/runlog.h"
#include "h5same.h"
#include "testutil.h"
#include "testrng.h"

#define HUMANOID "/usr/share/mujoco/model/humanoid/humanoid.xml"
/* a child make must not inherit the jobserver or the variables of a make
 * that runs this suite */
#define CLEAN_ENV "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES"

static char tmp[256];       /* the install prefix and scratch space (removed at exit) */
static int installed, built; /* steps done so far */
static char out[65536];

static int exists(const char *rel) {
  char p[1024];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s", tmp, rel);
  return stat(p, &st) == 0;
}

/* Run a shell command; its stdout+stderr into out. Returns the exit status. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
  int rc = bcg_test_capture(cmd, out, sizeof out);
  if (rc) fprintf(stderr, "\n$ %s\n%s\n(exit %d)\n", cmd, out, rc);
  return rc;
}

/* ---- install and out-of-tree builds ------------------------------------------- */

/* whether BUILD b holds a flags stamp of setting `set` ("double-cuda0"; the
 * stamp's name ends in a checksum of the compiler flags) */
static int stamp_exists(const char *b, const char *set) {
  char pat[400];
  snprintf(pat, sizeof pat, "%s/.flags-%s-*", b, set);
  glob_t g;
  int n = glob(pat, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
  if (n) globfree(&g);
  return n > 0;
}

/* A build folder whose precision, CUDA setting or compiler flags change is
 * rebuilt from scratch: a folder stamped REAL=float, holding an object file,
 * asked for double (make -n: nothing is compiled) loses its objects and is
 * restamped while the Makefile is read, and the object is then to be
 * compiled; the same with other flags (OPT). (The stamp used to be a rule
 * that a missing stamp never triggered.) */
static void test_flags_rebuild(void) {
  char b[300], p[400];
  snprintf(b, sizeof b, "%s/flagsbuild", tmp);
  CU_ASSERT_EQUAL_FATAL(sh("mkdir -p '%s/obj/core' && touch '%s/.flags-float-cuda0-1' && sleep 1 && "
                           "touch '%s/obj/core/nn.o'", b, b, b), 0);
  CU_ASSERT_EQUAL(sh(CLEAN_ENV " make -n --no-print-directory BUILD='%s' CUDA=0 REAL=double '%s/obj/core/nn.o'", b, b), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "-c core/nn.c"));
  snprintf(p, sizeof p, "%s/obj/core/nn.o", b);
  CU_ASSERT_NOT_EQUAL(access(p, F_OK), 0);
  CU_ASSERT(stamp_exists(b, "double-cuda0"));
  CU_ASSERT(!stamp_exists(b, "float-cuda0"));
  /* the same setting again: the object stays */
  CU_ASSERT_EQUAL_FATAL(sh("mkdir -p '%s/obj/core' && touch '%s/obj/core/nn.o'", b, b), 0);
  CU_ASSERT_EQUAL(sh(CLEAN_ENV " make -n --no-print-directory BUILD='%s' CUDA=0 REAL=double '%s/obj/core/nn.o'", b, b), 0);
  snprintf(p, sizeof p, "%s/obj/core/nn.o", b);
  CU_ASSERT_EQUAL(access(p, F_OK), 0);
  CU_ASSERT_PTR_NULL(strstr(out, "-c core/nn.c"));
  /* other compiler flags: rebuilt */
  CU_ASSERT_EQUAL(sh(CLEAN_ENV " make -n --no-print-directory BUILD='%s' CUDA=0 REAL=double OPT=-O1 '%s/obj/core/nn.o'", b, b), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "-c core/nn.c"));
  CU_ASSERT_NOT_EQUAL(access(p, F_OK), 0);
  CU_ASSERT_EQUAL_FATAL(sh("mkdir -p '%s/obj/core' && touch '%s/obj/core/nn.o'", b, b), 0);
  CU_ASSERT_EQUAL(sh(CLEAN_ENV " make -n --no-print-directory BUILD='%s' CUDA=0 REAL=double OPT=-O1 '%s/obj/core/nn.o'", b, b), 0);
  CU_ASSERT_EQUAL(access(p, F_OK), 0);
  /* install-built builds nothing: a folder of another setting is left alone */
  CU_ASSERT_EQUAL_FATAL(sh("mkdir -p '%s/plugins' && touch '%s/plugins/x.so'", b, b), 0);
  sh(CLEAN_ENV " make -n --no-print-directory BUILD='%s' CUDA=0 REAL=float install-built PREFIX='%s/none'", b, tmp);
  snprintf(p, sizeof p, "%s/plugins/x.so", b);
  CU_ASSERT_EQUAL(access(p, F_OK), 0);
  CU_ASSERT(stamp_exists(b, "double-cuda0"));
}

static void test_install(void) {
  CU_ASSERT_FATAL(access("Makefile", R_OK) == 0 && access("plugins/example/Makefile", R_OK) == 0);
  snprintf(tmp, sizeof tmp, "%s", bcg_test_tmpdir());
  int rc = sh(CLEAN_ENV " make -s --no-print-directory install-built PREFIX='%s' BUILD='%s'", tmp,
              bcg_test_build_dir());
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  static const char *files[] = {"lib/libbcg.so",
                                "bin/bcg",
                                "lib/bcg/plugins/autodiff.so",
                                "include/bcg/plugin.h",
                                "include/bcg/env.h",
                                "include/bcg/rng.h",
                                "lib/pkgconfig/bcg.pc",
                                "share/bcg/sdk/README.md",
                                "share/bcg/sdk/template/my_estimator.c",
                                "share/bcg/sdk/template/Makefile",
                                "share/bcg/sdk/example/clip_autodiff.c",
                                "share/bcg/sdk/example/Makefile",
                                "share/bcg/configs/demo.ini",
                                "share/bcg/models/motions/stand.csv"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    if (!exists(files[i])) fprintf(stderr, "not installed: %s\n", files[i]);
    CU_ASSERT(exists(files[i]));
  }
  /* the installed configs from any directory: their relative paths find the
   * installed models (bcg's data directory, PREFIX/share/bcg) */
  rc = sh("cd / && " CLEAN_ENV " '%s/bin/bcg' check '%s/share/bcg/configs/demo.ini' 2>&1", tmp, tmp);
  CU_ASSERT_EQUAL(rc, 0);
  char wantm[700];
  snprintf(wantm, sizeof wantm, "motion = %s/share/bcg/models/motions/stand.csv\n", tmp);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, wantm));
  /* pkg-config of this prefix alone; precision as the build under test */
  rc = sh("PKG_CONFIG_LIBDIR='%s/lib/pkgconfig' PKG_CONFIG_PATH='%s/lib/pkgconfig' pkg-config --cflags --libs bcg",
          tmp, tmp);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  char want[600];
  snprintf(want, sizeof want, "-I%s/include", tmp);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  snprintf(want, sizeof want, "-L%s/lib -lbcg", tmp);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  CU_ASSERT_EQUAL(strstr(out, "-DBCG_REAL_FLOAT") != NULL, sizeof(bcg_real) == sizeof(float));
  installed = 1;
}

static void test_build_example(void) {
  CU_ASSERT_FATAL(installed);
  const char *pc = "PKG_CONFIG_LIBDIR='%s/lib/pkgconfig' PKG_CONFIG_PATH='%s/lib/pkgconfig'";
  char env[1024];
  snprintf(env, sizeof env, pc, tmp, tmp);
  /* nothing in the example's build points into the source tree */
  CU_ASSERT_EQUAL_FATAL(sh(CLEAN_ENV " %s make -n -C plugins/example OUT='%s/example'", env, tmp), 0);
  CU_ASSERT_PTR_NULL(strstr(out, "core/include"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, tmp));
  CU_ASSERT_EQUAL_FATAL(sh(CLEAN_ENV " %s make -s -C plugins/example OUT='%s/example'", env, tmp), 0);
  CU_ASSERT_FATAL(exists("example/clip_autodiff.so"));
  CU_ASSERT_FATAL(exists("example/hold_height.so"));
  CU_ASSERT_FATAL(exists("example/ars.so"));
  CU_ASSERT_FATAL(exists("example/hunt_crossley.so"));
  /* the installed template compiles as is (its build output goes elsewhere) */
  CU_ASSERT_EQUAL_FATAL(sh(CLEAN_ENV " %s make -s -C '%s/share/bcg/sdk/template' OUT='%s/template'", env, tmp, tmp),
                        0);
  CU_ASSERT_FATAL(exists("template/my_estimator.so"));
  /* without pkg-config (PREFIX=...) the example takes the installed bcg.pc's
   * defines too (precision, capacities): every -D of its Cflags is on the
   * compile line, and the plugin it builds loads */
  CU_ASSERT_EQUAL_FATAL(sh("%s pkg-config --cflags bcg", env), 0);
  char defs[1024];
  snprintf(defs, sizeof defs, "%.1000s", out);
  CU_ASSERT_EQUAL_FATAL(sh(CLEAN_ENV " make -n -C plugins/example PREFIX='%s' OUT='%s/example_prefix' CUDA=0 "
                           "'%s/example_prefix/hold_height.so'", tmp, tmp, tmp), 0);
  for (char *t = strtok(defs, " \n"); t; t = strtok(NULL, " \n"))
    if (!strncmp(t, "-D", 2)) {
      if (!strstr(out, t)) printf("\n  PREFIX build lacks %s\n", t);
      CU_ASSERT_PTR_NOT_NULL(strstr(out, t));
    }
  CU_ASSERT_EQUAL_FATAL(sh(CLEAN_ENV " make -s -C plugins/example PREFIX='%s' OUT='%s/example_prefix' CUDA=0 "
                           "'%s/example_prefix/hold_height.so'", tmp, tmp, tmp), 0);
  CU_ASSERT_EQUAL(sh("BCG_PLUGIN_PATH='%s/example_prefix' LD_LIBRARY_PATH='%s/lib' '%s/bin/bcg' describe hold_height",
                     tmp, tmp, tmp), 0);
  /* one exported symbol */
  CU_ASSERT_EQUAL(sh("nm -D --defined-only '%s/example/clip_autodiff.so' | grep -c ' T '", tmp), 0);
  CU_ASSERT_EQUAL(atoi(out), 1);
  built = 1;
}

static void test_cli(void) {
  CU_ASSERT_FATAL(built);
  /* LD_LIBRARY_PATH only in case the build under test predates the bcg
   * binary's $ORIGIN/../lib run path */
  CU_ASSERT_EQUAL(
      sh("BCG_PLUGIN_PATH='%s/example' LD_LIBRARY_PATH='%s/lib' '%s/bin/bcg' plugins", tmp, tmp, tmp), 0);
  char want[600];
  snprintf(want, sizeof want, "%s/example/clip_autodiff.so", tmp);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "clip_autodiff"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  CU_ASSERT_PTR_NULL(strstr(out, "clip_autodiff.so: ")); /* no load warning */
  CU_ASSERT_EQUAL(sh("BCG_PLUGIN_PATH='%s/example' LD_LIBRARY_PATH='%s/lib' '%s/bin/bcg' describe clip_autodiff",
                     tmp, tmp, tmp),
                  0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "estimator plugin clip_autodiff"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "max_norm"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "l2|value"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "clip_action_grad"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "differentiable"));
}

/* ---- the plugins through the registry, on a real env ----------------------------- */

static bcg_registry *reg;

static bcg_config *load_cfg(const char *estimator) {
  char path[512];
  snprintf(path, sizeof path, "%s/cfg_XXXXXX", tmp);
  int fd = mkstemp(path);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "w");
  fprintf(f, "[run]\nseed = 3\n[model]\npath = %s\n[estimator]\n%s\n", HUMANOID, estimator);
  fclose(f);
  bcg_config *cfg = NULL;
  char err[1024];
  if (bcg_config_load_with(&cfg, reg, path, 0, NULL, err, sizeof err)) fprintf(stderr, "config: %s\n", err);
  unlink(path);
  return cfg;
}

#include "testest.h"


#define NENV 2
#define T 3

static bcg_env *env;
static int nq, nv, nu, nx;
static bcg_real *x0, *acts; /* [NENV][nx], [T][NENV][nu] */

static void setup_env(void) {
  CU_ASSERT_FATAL(built);
  if (env) return;
  reg = bcg_registry_new();
  char dir[1024], err[1024];
  snprintf(dir, sizeof dir, "%s/plugins", bcg_test_build_dir());
  bcg_registry_scan_dir(reg, dir, 1);
  snprintf(dir, sizeof dir, "%s/example/clip_autodiff.so", tmp);
  if (bcg_registry_load_file(reg, dir, err, sizeof err)) fprintf(stderr, "%s\n", err);
  snprintf(dir, sizeof dir, "%s/template/my_estimator.so", tmp);
  if (bcg_registry_load_file(reg, dir, err, sizeof err)) fprintf(stderr, "%s\n", err);
  snprintf(dir, sizeof dir, "%s/example/hold_height.so", tmp);
  if (bcg_registry_load_file(reg, dir, err, sizeof err)) fprintf(stderr, "%s\n", err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(bcg_registry_find(reg, BCG_KIND_ESTIMATOR, "autodiff"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(bcg_registry_find(reg, BCG_KIND_ESTIMATOR, "clip_autodiff"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(bcg_registry_find(reg, BCG_KIND_ESTIMATOR, "my_estimator"));
  bcg_config *cfg = load_cfg("plugin = autodiff");
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  env = bcg_env_create(cfg, NENV, err, sizeof err);
  if (!env) fprintf(stderr, "env: %s\n", err);
  bcg_config_free(cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(env);
  nq = env->nq, nv = env->nv, nu = env->nu, nx = env->nx;
  /* airborne poses near qpos0 (hinges in [-1.7, 0] degrees, inside every
   * joint range of humanoid.xml) with small random velocities: no contact,
   * no joint limit reached within T steps */
  const bcg_mdata *m = &env->model->m;
  x0 = malloc(sizeof(bcg_real) * NENV * nx);
  acts = malloc(sizeof(bcg_real) * T * NENV * nu);
  for (int e = 0; e < NENV; e++) {
    bcg_real *q = x0 + (size_t)e * nx, *u = q + nq;
    for (int i = 0; i < nq; i++) q[i] = m->qpos0[i];
    for (int i = 7; i < nq; i++) q[i] -= (bcg_real)(0.03 * urand());
    q[2] += 1.0;
    for (int i = 0; i < nv; i++) u[i] = (bcg_real)(0.2 * (2 * urand() - 1));
  }
  for (int i = 0; i < T * NENV * nu; i++) acts[i] = (bcg_real)(0.4 * (2 * urand() - 1));
}

/* Roll T steps forward, then sweep back with xbar_T = seed weights and
 * nothing added on the way: the states, the state adjoint of x_0 and the
 * accumulated action adjoints. */
typedef struct sweep {
  bcg_real xs[(T + 1) * NENV * 2 * (BCG_MAX_Q + BCG_MAX_DOF)];
  bcg_real x0b[NENV * 2 * BCG_MAX_DOF];
  bcg_real ab[T * NENV * BCG_MAX_ACT];
  bcg_estimator_stats st;
} sweep;

static void run_sweep(est *E, int steps, sweep *S) {
  memset(S, 0, sizeof *S);
  size_t sx = (size_t)NENV * nx, sb = (size_t)NENV * 2 * nv, sa = (size_t)NENV * nu;
  CU_ASSERT_EQUAL(E->ops->begin(E->self), 0);
  memcpy(S->xs, x0, sizeof(bcg_real) * sx);
  for (int t = 0; t < steps; t++)
    CU_ASSERT_EQUAL(E->ops->forward(E->self, t, S->xs + t * sx, acts + t * sa, S->xs + (t + 1) * sx), 0);
  bcg_real xb[NENV * 2 * BCG_MAX_DOF], xbn[NENV * 2 * BCG_MAX_DOF];
  unsigned long long save = test_rs;
  test_rs = 0x1234567ull;
  for (size_t i = 0; i < sb; i++) xbn[i] = (bcg_real)(2 * urand() - 1);
  test_rs = save;
  for (int t = steps - 1; t >= 0; t--) {
    CU_ASSERT_EQUAL(E->ops->backward(E->self, t, xbn, xb, S->ab + t * sa), 0);
    memcpy(xbn, xb, sizeof(bcg_real) * sb);
  }
  memcpy(S->x0b, xbn, sizeof(bcg_real) * sb);
  E->ops->stats(E->self, &S->st);
}

static sweep A, B; /* autodiff's, the plugin's */

static void test_exact_when_off(void) {
  setup_env();
  est ad = make_est(env, "plugin = autodiff", T);
  run_sweep(&ad, T, &A);
  free_est(&ad);
  const char *off[] = {"plugin = clip_autodiff", "plugin = clip_autodiff\nmax_norm = 0\nclip_action_grad = true",
                       "plugin = clip_autodiff\nmax_norm = 0\nnorm = value", "plugin = my_estimator"};
  for (int k = 0; k < 4; k++) {
    est E = make_est(env, off[k], T);
    run_sweep(&E, T, &B);
    free_est(&E);
    size_t nxs = (size_t)(T + 1) * NENV * nx, nb = (size_t)NENV * 2 * nv, na = (size_t)T * NENV * nu;
    CU_ASSERT(memcmp(A.xs, B.xs, sizeof(bcg_real) * nxs) == 0);
    CU_ASSERT(memcmp(A.x0b, B.x0b, sizeof(bcg_real) * nb) == 0);
    CU_ASSERT(memcmp(A.ab, B.ab, sizeof(bcg_real) * na) == 0);
    CU_ASSERT_EQUAL(B.st.samples, (uint64_t)T * NENV);
    CU_ASSERT_EQUAL(B.st.transitions, (uint64_t)T * NENV);
    CU_ASSERT_EQUAL(B.st.triggered, 0);
    double sum = 0;
    for (size_t i = 0; i < nb; i++) sum += fabs((double)B.x0b[i]);
    CU_ASSERT(sum > 0 && isfinite(sum));
  }
}

static double norm2(const bcg_real *v, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += (double)v[i] * v[i];
  return sqrt(s);
}

static void test_clip_semantics(void) {
  setup_env();
  const double tol = sizeof(bcg_real) == 8 ? 1e-12 : 1e-5;
  /* one step: the plugin's x_bar_0 against autodiff's */
  est ad = make_est(env, "plugin = autodiff", 1);
  run_sweep(&ad, 1, &A);
  free_est(&ad);
  double lo = 1e300, amax = 0;
  for (int e = 0; e < NENV; e++) {
    lo = fmin(lo, norm2(A.x0b + (size_t)e * 2 * nv, 2 * nv));
    for (int i = 0; i < 2 * nv; i++) amax = fmax(amax, fabs((double)A.x0b[(size_t)e * 2 * nv + i]));
  }
  CU_ASSERT_FATAL(lo > 0);
  double bound = 0.5 * lo;
  char text[256];

  snprintf(text, sizeof text, "plugin = clip_autodiff\nmax_norm = %.17g", bound);
  est E = make_est(env, text, 1);
  run_sweep(&E, 1, &B);
  free_est(&E);
  double worst = 0;
  for (int e = 0; e < NENV; e++) {
    const bcg_real *a = A.x0b + (size_t)e * 2 * nv, *b = B.x0b + (size_t)e * 2 * nv;
    double na = norm2(a, 2 * nv);
    CU_ASSERT(fabs(norm2(b, 2 * nv) - bound) <= tol * bound);
    for (int i = 0; i < 2 * nv; i++) worst = fmax(worst, fabs(b[i] - a[i] * bound / na) / (bound / na * amax));
  }
  CU_ASSERT(worst <= tol);
  bcg_test_report("clip l2: x_bar vs scaled autodiff (rel)", worst);
  CU_ASSERT(memcmp(A.ab, B.ab, sizeof(bcg_real) * NENV * nu) == 0); /* action adjoint exact */
  CU_ASSERT_EQUAL(B.st.triggered, NENV);

  /* value: entries clamped */
  double cv = 0.25 * amax;
  snprintf(text, sizeof text, "plugin = clip_autodiff\nnorm = value\nmax_norm = %.17g", cv);
  E = make_est(env, text, 1);
  run_sweep(&E, 1, &B);
  free_est(&E);
  int bad = 0;
  for (int i = 0; i < NENV * 2 * nv; i++) {
    double want = fmin(fmax((double)A.x0b[i], -cv), cv);
    bad += fabs((double)B.x0b[i] - want) > tol * cv;
  }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT(memcmp(A.ab, B.ab, sizeof(bcg_real) * NENV * nu) == 0);

  /* clip_action_grad: each environment's action adjoint bounded too */
  double alo = 1e300;
  for (int e = 0; e < NENV; e++) alo = fmin(alo, norm2(A.ab + (size_t)e * nu, nu));
  CU_ASSERT_FATAL(alo > 0);
  snprintf(text, sizeof text, "plugin = clip_autodiff\nmax_norm = %.17g\nclip_action_grad = true", 0.5 * alo);
  E = make_est(env, text, 1);
  run_sweep(&E, 1, &B);
  free_est(&E);
  for (int e = 0; e < NENV; e++) {
    const bcg_real *a = A.ab + (size_t)e * nu, *b = B.ab + (size_t)e * nu;
    double na = norm2(a, nu);
    CU_ASSERT(fabs(norm2(b, nu) - 0.5 * alo) <= tol * alo);
    double w = 0;
    for (int i = 0; i < nu; i++) w = fmax(w, fabs(b[i] - a[i] * 0.5 * alo / na));
    CU_ASSERT(w <= tol * alo);
  }
}

/* L = w . u_1 (velocities only: no quaternion conversion on the output) */
static double loss(est *E, const bcg_real *x, const bcg_real *a, const bcg_real *w) {
  bcg_real xn[NENV * (BCG_MAX_Q + BCG_MAX_DOF)];
  E->ops->begin(E->self);
  CU_ASSERT(E->ops->forward(E->self, 0, x, a, xn) == 0);
  double L = 0;
  for (int e = 0; e < NENV; e++)
    for (int i = 0; i < nv; i++) L += (double)w[e * nv + i] * xn[(size_t)e * nx + nq + i];
  return L;
}

/* E's backward at (x, acts) against central finite differences of its
 * forward, along a random direction of the actions (*ea) and of the tangent
 * state (*ex), relative errors */
static void fd_check(est *E, const bcg_real *x, double *ea, double *ex) {
  int dbl = sizeof(bcg_real) == 8;
  const double h = dbl ? 1e-6 : 1e-2;
  bcg_real w[NENV * BCG_MAX_DOF], xnb[NENV * 2 * BCG_MAX_DOF] = {0}, xb[NENV * 2 * BCG_MAX_DOF];
  bcg_real ab[NENV * BCG_MAX_ACT] = {0}, xn[NENV * (BCG_MAX_Q + BCG_MAX_DOF)];
  for (int i = 0; i < NENV * nv; i++) w[i] = (bcg_real)(2 * urand() - 1);
  for (int e = 0; e < NENV; e++)
    for (int i = 0; i < nv; i++) xnb[(size_t)e * 2 * nv + nv + i] = w[e * nv + i];
  E->ops->begin(E->self);
  CU_ASSERT_EQUAL(E->ops->forward(E->self, 0, x, acts, xn), 0);
  CU_ASSERT_EQUAL(E->ops->backward(E->self, 0, xnb, xb, ab), 0);

  /* actions */
  bcg_real d[NENV * BCG_MAX_ACT], ap[NENV * BCG_MAX_ACT], am[NENV * BCG_MAX_ACT];
  double an = 0;
  for (int i = 0; i < NENV * nu; i++) {
    d[i] = (bcg_real)(2 * urand() - 1);
    ap[i] = acts[i] + (bcg_real)h * d[i];
    am[i] = acts[i] - (bcg_real)h * d[i];
    an += (double)ab[i] * d[i];
  }
  double fd = (loss(E, x, ap, w) - loss(E, x, am, w)) / (2 * h);
  *ea = bcg_relerr(an, fd, 1e-8);
  /* tangent state */
  bcg_real dq[NENV * BCG_MAX_DOF], du[NENV * BCG_MAX_DOF], dqh[NENV * BCG_MAX_DOF], duh[NENV * BCG_MAX_DOF];
  bcg_real xp[NENV * (BCG_MAX_Q + BCG_MAX_DOF)], xm[NENV * (BCG_MAX_Q + BCG_MAX_DOF)];
  double xnum = 0;
  for (int e = 0; e < NENV; e++)
    for (int i = 0; i < nv; i++) {
      dq[e * nv + i] = (bcg_real)(2 * urand() - 1);
      du[e * nv + i] = (bcg_real)(2 * urand() - 1);
      xnum += (double)xb[(size_t)e * 2 * nv + i] * dq[e * nv + i] + (double)xb[(size_t)e * 2 * nv + nv + i] * du[e * nv + i];
    }
  for (int s = 0; s < 2; s++) {
    double sg = s ? -h : h;
    for (int i = 0; i < NENV * nv; i++) dqh[i] = (bcg_real)(sg * dq[i]), duh[i] = (bcg_real)(sg * du[i]);
    for (int e = 0; e < NENV; e++) /* one environment per call */
      bcg_env_perturb(env, x + (size_t)e * nx, dqh + e * nv, duh + e * nv, (s ? xm : xp) + (size_t)e * nx);
  }
  double fdx = (loss(E, xp, acts, w) - loss(E, xm, acts, w)) / (2 * h);
  *ex = bcg_relerr(xnum, fdx, 1e-8);
  if (*ea > 1e-5 || *ex > 1e-5) fprintf(stderr, "FD: actions %g vs %g, state %g vs %g\n", an, fd, xnum, fdx);
}

static void test_fd(void) {
  setup_env();
  const double tol = sizeof(bcg_real) == 8 ? 1e-5 : 5e-2;
  est E = make_est(env, "plugin = clip_autodiff", 1);
  double ea, ex;
  fd_check(&E, x0, &ea, &ex);
  free_est(&E);
  bcg_test_report("clip_autodiff backward vs FD, actions (rel)", ea);
  bcg_test_report("clip_autodiff backward vs FD, tangent state (rel)", ex);
  CU_ASSERT(ea <= tol);
  CU_ASSERT(ex <= tol);
}

/* The example contact model (plugins/example/hunt_crossley.c), built from
 * the installed SDK: its CUDA entries and capability exactly where nvcc was
 * found (the entries themselves run on the device machine); the control step
 * of humanoid.xml with it (autodiff; 1 ms substeps, as an explicit law
 * needs: at 5 ms the light feet blow up on impact) against central finite differences on
 * real states: in contact (dropped onto the floor, a few steps after the
 * first contact force), near contact (the same lifted just clear of the
 * floor: listed contacts, no force) and airborne; the dropped humanoid comes
 * to rest on the floor instead of falling through it. */
static void test_example_contact(void) {
  setup_env();
  char path[700], err[1024];
  snprintf(path, sizeof path, "%s/example/hunt_crossley.so", tmp);
  if (!bcg_registry_find(reg, BCG_KIND_CONTACT, "hunt_crossley") && bcg_registry_load_file(reg, path, err, sizeof err))
    fprintf(stderr, "%s\n", err);
  const bcg_plugin *pl = bcg_registry_find(reg, BCG_KIND_CONTACT, "hunt_crossley");
  CU_ASSERT_PTR_NOT_NULL_FATAL(pl);
  const bcg_contact_ops *co = pl->desc->ops;
  const int nvcc = system("command -v nvcc >/dev/null 2>&1 || test -x /usr/local/cuda/bin/nvcc") == 0;
  CU_ASSERT_EQUAL(!!(pl->desc->caps & BCG_CAP_CUDA), nvcc);
  CU_ASSERT_EQUAL(co->solve_cuda != NULL && co->solve_vjp_cuda != NULL, nvcc);
  bcg_config *cfg = load_cfg("plugin = autodiff\n[contact]\nplugin = hunt_crossley\n[sim]\nsubsteps = 20");
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  bcg_env *ce = bcg_env_create(cfg, NENV, err, sizeof err);
  if (!ce) fprintf(stderr, "env: %s\n", err);
  bcg_config_free(cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ce);
  est E = make_est(ce, "plugin = autodiff\n[contact]\nplugin = hunt_crossley\n[sim]\nsubsteps = 20", 1);
  /* drop from qpos0, zero actions, until both environments feel the floor, then 3 steps more */
  const bcg_mdata *m = &ce->model->m;
  bcg_real xc[NENV * (BCG_MAX_Q + BCG_MAX_DOF)], xn[NENV * (BCG_MAX_Q + BCG_MAX_DOF)] = {0};
  bcg_real zero[NENV * BCG_MAX_ACT] = {0};
  for (int e = 0; e < NENV; e++) {
    for (int i = 0; i < nq; i++) xc[(size_t)e * nx + i] = m->qpos0[i] - (i >= 7 ? (bcg_real)(0.02 * e) : 0);
    for (int i = 0; i < nv; i++) xc[(size_t)e * nx + nq + i] = 0;
  }
  int steps = 0, touched = -1;
  double zmin = 1e9;
  for (; steps < 300 && (touched < 0 || steps < touched + 3); steps++) {
    E.ops->begin(E.self);
    CU_ASSERT_EQUAL_FATAL(E.ops->forward(E.self, 0, xc, zero, xn), 0);
    memcpy(xc, xn, sizeof(bcg_real) * NENV * nx);
    bcg_env_diag dg = bcg_env_diagnostics(ce);
    if (touched < 0 && dg.maxfn[0] > 0 && dg.maxfn[1] > 0) touched = steps;
  }
  CU_ASSERT_FATAL(touched >= 0);
  bcg_env_diag dg = bcg_env_diagnostics(ce);
  const double pen = fmax(dg.maxpen[0], dg.maxpen[1]);
  CU_ASSERT(pen > 0 && pen < 0.05);
  /* near contact: lifted 0.2 mm clear of its deepest point */
  bcg_real xnear[NENV * (BCG_MAX_Q + BCG_MAX_DOF)];
  memcpy(xnear, xc, sizeof xnear);
  for (int e = 0; e < NENV; e++) xnear[(size_t)e * nx + 2] += (bcg_real)(pen + 2e-4);
  const double tol = sizeof(bcg_real) == 8 ? 1e-5 : 5e-2;
  const bcg_real *states[3] = {xc, xnear, x0};
  const char *what[3] = {"in contact", "near contact", "airborne"};
  /* in contact, central differences need double precision (REAL=float: the
   * airborne check only, at its loose tolerance) */
  for (int k = sizeof(bcg_real) == 8 ? 0 : 2; k < 3; k++) {
    double ea, ex;
    fd_check(&E, states[k], &ea, &ex);
    char label[160];
    snprintf(label, sizeof label, "hunt_crossley step vs FD, %s: actions / tangent state (rel, worse)", what[k]);
    bcg_test_report(label, fmax(ea, ex));
    CU_ASSERT(ea <= tol);
    CU_ASSERT(ex <= tol);
  }
  /* it holds the body up: 2 s more, the root stays above the floor */
  for (int s = 0; s < 100; s++) {
    E.ops->begin(E.self);
    CU_ASSERT_EQUAL_FATAL(E.ops->forward(E.self, 0, xc, zero, xn), 0);
    memcpy(xc, xn, sizeof(bcg_real) * NENV * nx);
    for (int e = 0; e < NENV; e++) zmin = fmin(zmin, xc[(size_t)e * nx + 2]);
  }
  bcg_test_report("hunt_crossley: lowest root height over 2 s after the drop (m)", zmin);
  CU_ASSERT(zmin > 0.05);
  free_est(&E);
  bcg_env_free(ce);
}

/* The example task (plugins/example/hold_height.c, built from the installed
 * SDK): its observation and reward VJPs against central finite differences
 * on real states, then a few training iterations with it through the
 * installed bcg. */
static void test_example_task(void) {
  setup_env();
  const bcg_plugin *pl = bcg_registry_find(reg, BCG_KIND_TASK, "hold_height");
  CU_ASSERT_PTR_NOT_NULL_FATAL(pl);
  const bcg_task_ops *to = pl->desc->ops;
  char path[1200], err[1024];
  snprintf(path, sizeof path, "%s/task_XXXXXX", tmp);
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fprintf(f, "[model]\npath = %s\n[task]\nplugin = hold_height\nvel_cost = 0.01\nact_cost = 0.02\n", HUMANOID);
  fclose(f);
  bcg_config *cfg = NULL;
  CU_ASSERT_EQUAL_FATAL(bcg_config_load_with(&cfg, reg, path, 0, NULL, err, sizeof err), 0);
  unlink(path);
  void *task = to->create(bcg_services_host(), bcg_config_section(cfg, "task"), env, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(task);
  int od = to->obs_dim(task);
  CU_ASSERT_EQUAL(od, 1 + (nq - 7) + nv);
  bcg_real x[NENV * (BCG_MAX_Q + BCG_MAX_DOF)], a[NENV * BCG_MAX_ACT], pa[NENV * BCG_MAX_ACT] = {0};
  bcg_real ob[NENV * 128], obar[NENV * 128], rew[NENV], rb[NENV], xb[NENV * 2 * BCG_MAX_DOF] = {0};
  bcg_real ab[NENV * BCG_MAX_ACT] = {0}, xp[NENV * (BCG_MAX_Q + BCG_MAX_DOF)];
  int done[NENV];
  bcg_task_clock clk[NENV] = {{5, 0, 0}, {9, 0, 0}};
  memcpy(x, x0, sizeof(bcg_real) * NENV * nx);
  for (int e = 0; e < NENV; e++) x[(size_t)e * nx + 2] -= (bcg_real)(1.0 - 0.03 * (e + 1)); /* near z0 */
  for (int i = 0; i < NENV * nu; i++) a[i] = (bcg_real)(0.5 * (2 * urand() - 1));
  for (int i = 0; i < NENV * od; i++) obar[i] = (bcg_real)(2 * urand() - 1);
  for (int e = 0; e < NENV; e++) rb[e] = (bcg_real)(1 + e);
  CU_ASSERT_EQUAL(to->observe_vjp(task, x, pa, clk, obar, xb, NULL), 0);
  CU_ASSERT_EQUAL(to->reward_vjp(task, x, a, pa, clk, rb, xb, ab, NULL), 0);
#define LOSS(xx, aa)                                                                      \
  ({                                                                                      \
    double s_ = 0;                                                                        \
    to->observe(task, xx, pa, clk, ob);                                                   \
    to->reward(task, xx, aa, pa, clk, rew, done);                                         \
    for (int i_ = 0; i_ < NENV * od; i_++) s_ += (double)obar[i_] * ob[i_];                \
    for (int e_ = 0; e_ < NENV; e_++) s_ += (double)rb[e_] * rew[e_];                     \
    s_;                                                                                   \
  })
  int dbl = sizeof(bcg_real) == 8;
  const double h = dbl ? 1e-6 : 1e-2;
  double worst = 0;
  for (int e = 0; e < NENV; e++) {
    for (int d = 0; d < 2 * nv; d++) {
      bcg_real dq[BCG_MAX_DOF] = {0}, du[BCG_MAX_DOF] = {0};
      memcpy(xp, x, sizeof(bcg_real) * NENV * nx);
      if (d < nv) dq[d] = (bcg_real)h; else du[d - nv] = (bcg_real)h;
      bcg_env_perturb(env, x + (size_t)e * nx, dq, du, xp + (size_t)e * nx);
      double lp = LOSS(xp, a);
      if (d < nv) dq[d] = (bcg_real)-h; else du[d - nv] = (bcg_real)-h;
      bcg_env_perturb(env, x + (size_t)e * nx, dq, du, xp + (size_t)e * nx);
      double lm = LOSS(xp, a);
      double g = (lp - lm) / (2 * h), v = xb[(size_t)e * 2 * nv + d];
      worst = fmax(worst, fabs(g - v) / (1 + fabs(g)));
    }
    for (int i = 0; i < nu; i++) {
      bcg_real s0 = a[(size_t)e * nu + i];
      a[(size_t)e * nu + i] = (bcg_real)(s0 + h);
      double lp = LOSS(x, a);
      a[(size_t)e * nu + i] = (bcg_real)(s0 - h);
      double lm = LOSS(x, a);
      a[(size_t)e * nu + i] = s0;
      worst = fmax(worst, fabs((lp - lm) / (2 * h) - ab[(size_t)e * nu + i]) / (1 + fabs((lp - lm) / (2 * h))));
    }
  }
#undef LOSS
  bcg_test_report("hold_height example: observe + reward VJP vs FD (rel)", worst);
  CU_ASSERT(worst < (dbl ? 1e-7 : 5e-2));
  to->destroy(task);
  bcg_config_free(cfg);
  /* training with it, through the installed bcg */
  snprintf(path, sizeof path, "%s/hold.ini", tmp);
  f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f, "[run]\nnum_envs = 4\niterations = 2\nthreads = 1\nout_dir = %s/holdruns\n[model]\npath = %s\n"
             "[estimator]\nplugin = autodiff\n[learner]\nplugin = shac\nhorizon = 8\nactor_layers = 16\n"
             "critic_layers = 16\n[task]\nplugin = hold_height\n", tmp, HUMANOID);
  fclose(f);
  CU_ASSERT_EQUAL(sh("BCG_PLUGIN_PATH='%s/example' '%s/bin/bcg' train '%s'", tmp, tmp, path), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "bcg: train: finished after 2 iterations"));
}

/* The example GPU estimator (plugins/example/clip_autodiff.c): its device
 * entries (forward_cuda, backward_cuda) and the cuda capability exactly where
 * nvcc was found; with device = cpu the core runs its host entries, which
 * train through the installed bcg (clipping on, the hold_height example task)
 * and log device_steps = 0 every iteration. The device entries themselves
 * run in test_cuda on the GPU machine (bench/device_run.sh). */
static void test_example_gpu_estimator(void) {
  setup_env();
  const bcg_plugin *pl = bcg_registry_find(reg, BCG_KIND_ESTIMATOR, "clip_autodiff");
  CU_ASSERT_PTR_NOT_NULL_FATAL(pl);
  const bcg_estimator_ops *eo = pl->desc->ops;
  const int nvcc = system("command -v nvcc >/dev/null 2>&1 || test -x /usr/local/cuda/bin/nvcc") == 0;
  CU_ASSERT_EQUAL(!!(pl->desc->caps & BCG_CAP_CUDA), nvcc);
  CU_ASSERT(eo->size >= offsetof(bcg_estimator_ops, backward_cuda) + sizeof eo->backward_cuda);
  CU_ASSERT_EQUAL(eo->forward_cuda != NULL && eo->backward_cuda != NULL, nvcc);
  char path[700], runs[700];
  snprintf(path, sizeof path, "%s/clipgpu.ini", tmp);
  snprintf(runs, sizeof runs, "%s/clipgpu_runs", tmp);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f, "[run]\nname = clipgpu\ndevice = cpu\nnum_envs = 4\niterations = 2\nthreads = 1\nout_dir = %s\n"
             "[model]\npath = %s\n[estimator]\nplugin = clip_autodiff\nmax_norm = 1\n[learner]\nplugin = shac\n"
             "horizon = 8\nactor_layers = 16\ncritic_layers = 16\n[task]\nplugin = hold_height\n", runs, HUMANOID);
  fclose(f);
  CU_ASSERT_EQUAL_FATAL(sh("BCG_PLUGIN_PATH='%s/example' '%s/bin/bcg' train '%s'", tmp, tmp, path), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "bcg: train: finished after 2 iterations"));
  /* the run's log: est_device_steps is 0 in both iterations */
  CU_ASSERT_EQUAL_FATAL(sh("ls -d '%s'/clipgpu/*/log.h5 | head -n 1 | tr -d '\\n'", runs), 0);
  char err[256];
  int64_t fh = bcg_checkpoint_open(out, err, sizeof err);
  if (fh < 0) fprintf(stderr, "%s: %s\n", out, err);
  CU_ASSERT_FATAL(fh >= 0);
  double d[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  CU_ASSERT_EQUAL(bcg_h5_read_doubles(fh, "est_device_steps", d, 8, err, sizeof err), 2);
  bcg_checkpoint_close(fh);
  CU_ASSERT(d[0] == 0 && d[1] == 0);
}

/* The example learner (plugins/example/ars.c, Augmented Random Search with a
 * linear policy), built from the installed SDK, through the installed bcg on
 * the learners' pendulum task started near upright (balancing, which a
 * linear policy can do): it learns (mean episode return from below 0 to
 * above 90 of at most 100 within 40 iterations), a run stopped at 20 and
 * resumed equals the uninterrupted one bit for bit (log and checkpoint),
 * bcg eval runs its act(), and an odd num_envs is refused with a message. */
static void test_example_learner(void) {
  CU_ASSERT_FATAL(built);
  char ini[700], b[512], pp[1400];
  CU_ASSERT_FATAL(realpath(bcg_test_build_dir(), b) != NULL);
  snprintf(pp, sizeof pp, "BCG_PLUGIN_PATH='%s/example:%s/tests/plugins' '%s/bin/bcg'", tmp, b, tmp);
  snprintf(ini, sizeof ini, "%s/ars.ini", tmp);
  FILE *f = fopen(ini, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f, "[run]\nname = ars\nnum_envs = 16\niterations = 40\nthreads = 1\ncheckpoint_every = 10\nout_dir = %s/arsruns\n"
             "[model]\npath = tests/models/pendulum.xml\n[estimator]\nplugin = autodiff\n[learner]\nplugin = ars\n"
             "[task]\nplugin = learn_task\ninit_angle = 0.3\ninit_speed = 0.3\n", tmp);
  fclose(f);
  CU_ASSERT_EQUAL_FATAL(sh("%s train '%s' run.name=full", pp, ini), 0);
  double r1 = NAN, r40 = NAN;
  const char *l1 = strstr(out, "\nit 1/40 "), *l40 = strstr(out, "\nit 40/40 ");
  if (!l1) l1 = strncmp(out, "it 1/40 ", 8) ? NULL : out - 1;
  if (l1 && strstr(l1, "return ")) r1 = atof(strstr(l1, "return ") + 7);
  if (l40 && strstr(l40, "return ")) r40 = atof(strstr(l40, "return ") + 7);
  CU_ASSERT(r1 < 0);
  CU_ASSERT(r40 > 90);
  if (!(r1 < 0 && r40 > 90)) fprintf(stderr, "ars: return %g -> %g\n%s\n", r1, r40, out);
  /* stopped at 20, resumed to 40: the same run */
  CU_ASSERT_EQUAL_FATAL(sh("%s train '%s' run.name=half run.iterations=20 && %s train --resume %s/arsruns/half/* "
                           "run.iterations=40",
                           pp, ini, pp, tmp),
                        0);
  char la[1200], lb[1200], ca[1200], cb[1200], name[64];
  CU_ASSERT_EQUAL_FATAL(sh("ls -d %s/arsruns/full/* | head -n 1", tmp), 0);
  out[strcspn(out, "\n")] = 0;
  snprintf(la, sizeof la, "%.1000s/log.h5", out);
  snprintf(ca, sizeof ca, "%.1000s/checkpoints/ckpt_000000040.h5", out);
  CU_ASSERT_EQUAL_FATAL(sh("ls -d %s/arsruns/half/* | head -n 1", tmp), 0);
  out[strcspn(out, "\n")] = 0;
  snprintf(lb, sizeof lb, "%.1000s/log.h5", out);
  snprintf(cb, sizeof cb, "%.1000s/checkpoints/ckpt_000000040.h5", out);
  int nc = 0;
  CU_ASSERT_EQUAL(h5same(la, lb, h5same_skip_log, name, &nc), 0);
  CU_ASSERT(nc > 5);
  CU_ASSERT_EQUAL(h5same(ca, cb, h5same_skip_ckpt, name, &nc), 0);
  /* its act() in bcg eval */
  CU_ASSERT_EQUAL(sh("%s eval %s/arsruns/full/* --sim bcg --runs 2 --seconds 1 --out - eval.fall_height=0", pp, tmp), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "bcg  "));
  /* an odd number of environments has no antithetic pairs */
  CU_ASSERT_EQUAL(sh("%s train '%s' run.num_envs=5", pp, ini), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[run] num_envs must be even (a + and a - episode per direction), not 5"));
}

static void test_teardown(void) {
  if (env) bcg_env_free(env);
  env = NULL;
  free(x0);
  free(acts);
  x0 = acts = NULL;
  /* dlclose the plugins before the prefix they came from is removed */
  bcg_registry_free(reg);
  reg = NULL;
}

BCG_TESTS({"install into a temporary prefix: lib, bin, headers, bcg.pc, SDK", test_install},
          {"a build folder is rebuilt when REAL, CUDA or the flags change", test_flags_rebuild},
          {"example and template build from the installed SDK only", test_build_example},
          {"installed bcg: plugins lists the example, describe shows its keys", test_cli},
          {"clip_autodiff off / template at 1 equal autodiff bit for bit", test_exact_when_off},
          {"clip_autodiff: l2 and value clipping of the state adjoint, action clip", test_clip_semantics},
          {"clip_autodiff backward matches central finite differences", test_fd},
          {"hold_height example task: VJPs vs FD, training", test_example_task},
          {"ars example learner: learns, resumes bit for bit, evaluates", test_example_learner},
          {"clip_autodiff example GPU estimator: device entries, host entries train with device = cpu",
           test_example_gpu_estimator},
          {"hunt_crossley example contact model: CUDA entries, step vs FD in contact, near it, airborne",
           test_example_contact},
          {"teardown", test_teardown});
BCG_RUN("sdk")
