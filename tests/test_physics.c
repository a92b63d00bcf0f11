/* tests/test_physics.c - physical behaviour of the contact models inside the
 * full stepper: a dropped sphere comes to rest without bouncing; a
 * box on a slope sticks below the friction angle and slides with
 * a = g (sin - mu cos) above it; soft contact rests at m g / k_e; humanoid.xml
 * held in its default pose by PD carries its weight on the floor without
 * drifting or sinking, and its resting penetration under smoothed_kappa
 * falls as kappa rises (the table printed here is the one in
 * docs/physics-notes.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/env.h"
#include "bcg/loader.h"
#include "testutil.h"

#define HUMANOID "/usr/share/mujoco/model/humanoid/humanoid.xml"

static char tmpdir[128];

/* returns a path that stays valid until the next call with the same slot */
static const char *tmpfile_with(const char *name, const char *text) {
  static char paths[4][256];
  static int next;
  char *path = paths[next++ % 4];
  if (!tmpdir[0]) snprintf(tmpdir, sizeof tmpdir, "%s", bcg_test_tmpdir()); /* removed at exit */
  snprintf(path, 256, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "w");
  if (!f) return NULL;
  fputs(text, f);
  fclose(f);
  return path;
}

/* env from an INI text; NULL (with the message printed) on failure */
static bcg_env *make_env(const char *ini, bcg_config **cfgout) {
  const char *p = tmpfile_with("run.ini", ini);
  char err[2048];
  bcg_config *cfg = NULL;
  if (bcg_config_load_with(&cfg, bcg_registry_global(), p, 0, NULL, err, sizeof err)) {
    fprintf(stderr, "config: %s\n", err);
    return NULL;
  }
  bcg_env *env = bcg_env_create(cfg, 1, err, sizeof err);
  if (!env) fprintf(stderr, "env: %s\n", err);
  *cfgout = cfg;
  return env;
}

static int have_plugin(const char *name) {
  return bcg_registry_find(bcg_registry_global(), BCG_KIND_CONTACT, name) != NULL;
}

static const char *SPHERE =
    "<mujoco><option timestep='0.005'/><worldbody><geom type='plane' size='0 0 1'/>"
    "<body pos='0 0 0.6'><freejoint/><geom type='sphere' size='0.1' mass='1'/></body></worldbody></mujoco>";
static const char *BOX =
    "<mujoco><option timestep='0.005'/><worldbody><geom type='plane' size='0 0 1'/>"
    "<body pos='0 0 0.1'><freejoint/><geom type='box' size='0.1 0.1 0.1' mass='1'/></body></worldbody></mujoco>";

/* lowest contact point height above the floor */
static double lowest_gap(const bcg_env *env, const bcg_real *x) {
  static bcg_kin k;
  const bcg_mdata *m = &env->model->m;
  bcg_kinematics(m, x, &k);
  return bcg_lowest_gap(m, &k);
}

static void test_sphere_drop(void) {
  const char *plugins[] = {"hard", "smoothed_kappa", "soft"};
  const char *xml = tmpfile_with("sphere.xml", SPHERE);
  for (int pi = 0; pi < 3; pi++) {
    if (!have_plugin(plugins[pi])) {
      CU_FAIL("contact plugin missing");
      continue;
    }
    char ini[1024];
    snprintf(ini, sizeof ini, "[model]\npath = %s\n[contact]\nplugin = %s\n%s", xml, plugins[pi],
             strcmp(plugins[pi], "smoothed_kappa") == 0 ? "kappa = 3000\n" : "");
    bcg_config *cfg;
    bcg_env *env = make_env(ini, &cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(env);
    bcg_real x[BCG_MAX_Q + BCG_MAX_DOF], xn[BCG_MAX_Q + BCG_MAX_DOF], a[1] = {0};
    const bcg_mdata *m = &env->model->m;
    for (int i = 0; i < m->nq; i++) x[i] = m->qpos0[i];
    for (int i = 0; i < m->nv; i++) x[m->nq + i] = 0;
    x[2] = 0.6; /* bottom 0.5 m above the floor */
    int touched = 0;
    double after_touch_max = -1, zrest = 0;
    for (int k = 0; k < 150; k++) { /* 3 s of 0.02 s control steps */
      bcg_env_step(env, 1, x, a, xn, NULL);
      memcpy(x, xn, sizeof(bcg_real) * env->nx);
      double g = lowest_gap(env, x);
      if (g <= 0) touched = 1;
      if (touched && k > 0) after_touch_max = fmax(after_touch_max, g);
    }
    zrest = lowest_gap(env, x);
    double speed = 0;
    for (int i = 0; i < 6; i++) speed += x[m->nq + i] * x[m->nq + i];
    speed = sqrt(speed);
    char what[96];
    snprintf(what, sizeof what, "sphere drop %s: highest rebound above floor after first touch (m)", plugins[pi]);
    bcg_test_report(what, after_touch_max);
    CU_ASSERT(touched);
    CU_ASSERT(after_touch_max < 1e-3); /* no bounce: never leaves the floor by more than 1 mm */
    CU_ASSERT(speed < 1e-2);
    CU_ASSERT(zrest > -0.05);
    bcg_env_free(env);
    bcg_config_free(cfg);
  }
}

static void test_soft_rest_penetration(void) {
  if (!have_plugin("soft")) { CU_FAIL("soft missing"); return; }
  const char *xml = tmpfile_with("sphere.xml", SPHERE);
  char ini[1024];
  snprintf(ini, sizeof ini, "[model]\npath = %s\n[contact]\nplugin = soft\nstiffness = 20000\n", xml);
  bcg_config *cfg;
  bcg_env *env = make_env(ini, &cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(env);
  const bcg_mdata *m = &env->model->m;
  bcg_real x[64], xn[64], a[1] = {0};
  for (int i = 0; i < m->nq; i++) x[i] = m->qpos0[i];
  for (int i = 0; i < m->nv; i++) x[m->nq + i] = 0;
  x[2] = 0.1;
  for (int k = 0; k < 150; k++) {
    bcg_env_step(env, 1, x, a, xn, NULL);
    memcpy(x, xn, sizeof(bcg_real) * env->nx);
  }
  double pen = -lowest_gap(env, x), expect = 1.0 * 9.81 / 20000;
  bcg_test_report("soft rest penetration / (m g / k_e)", pen / expect);
  CU_ASSERT(fabs(pen / expect - 1) < 0.05);
  bcg_env_free(env);
  bcg_config_free(cfg);
}

/* box on a slope: the slope is emulated by tilting gravity (the floor is
 * horizontal by construction) */
static double box_accel(const char *plugin, double tan_angle, double mu, double *stuck_speed) {
  const char *xml = tmpfile_with("box.xml", BOX);
  CU_ASSERT_PTR_NOT_NULL_FATAL(xml);
  char ini[1024];
  const char *keys = strcmp(plugin, "soft") == 0 ? ""
                     : strcmp(plugin, "smoothed_kappa") == 0 ? "kappa = 3000\niterations = 30\n"
                                                              : "iterations = 30\n";
  snprintf(ini, sizeof ini, "[model]\npath = %s\n[sim]\nfriction = %g\nmax_contacts = 8\n[contact]\nplugin = %s\n%s",
           xml, mu, plugin, keys);
  bcg_config *cfg;
  bcg_env *env = make_env(ini, &cfg);
  if (!env) return NAN;
  bcg_model *mm = (bcg_model *)env->model;
  double th = atan(tan_angle);
  mm->m.gravity[0] = 9.81 * sin(th);
  mm->m.gravity[1] = 0;
  mm->m.gravity[2] = -9.81 * cos(th);
  const bcg_mdata *m = &env->model->m;
  bcg_real x[64], xn[64], a[1] = {0};
  for (int i = 0; i < m->nq; i++) x[i] = m->qpos0[i];
  for (int i = 0; i < m->nv; i++) x[m->nq + i] = 0;
  x[2] = 0.1 - 0.0005;
  double v1 = 0, v2 = 0;
  for (int k = 0; k < 60; k++) { /* 1.2 s */
    bcg_env_step(env, 1, x, a, xn, NULL);
    memcpy(x, xn, sizeof(bcg_real) * env->nx);
    if (k == 24) v1 = x[m->nq]; /* t = 0.5 s */
    if (k == 59) v2 = x[m->nq]; /* t = 1.2 s */
  }
  *stuck_speed = fabs(v2);
  bcg_env_free(env);
  bcg_config_free(cfg);
  return (v2 - v1) / 0.7;
}

static void test_box_slope(void) {
  const char *plugins[] = {"hard", "smoothed_kappa", "soft"};
  double mu = 0.5;
  for (int pi = 0; pi < 3; pi++) {
    if (!have_plugin(plugins[pi])) { CU_FAIL("plugin missing"); continue; }
    double speed;
    /* sliding: tan = 0.8 > mu */
    double th = atan(0.8), expect = 9.81 * (sin(th) - mu * cos(th));
    double acc = box_accel(plugins[pi], 0.8, mu, &speed);
    char what[96];
    snprintf(what, sizeof what, "box slide %s: |a / (g (sin - mu cos)) - 1|", plugins[pi]);
    bcg_test_report(what, fabs(acc / expect - 1));
    CU_ASSERT(fabs(acc / expect - 1) < 0.02);
    /* sticking: tan = 0.3 < mu (soft friction is regularised: it creeps at
     * m g sin / k_f, so only the complementarity models must stick) */
    acc = box_accel(plugins[pi], 0.3, mu, &speed);
    snprintf(what, sizeof what, "box stick %s: speed after 1.2 s (m/s)", plugins[pi]);
    bcg_test_report(what, speed);
    if (strcmp(plugins[pi], "soft") != 0) CU_ASSERT(speed < 1e-3);
  }
}

/* humanoid held in its default pose by stiff, well-damped PD (the ankles must
 * beat m g h of the whole body: 3000 per gear 100 gives 600 N m/rad per ankle;
 * less lets the statue topple), feet on the floor; 4 s, measured over the
 * last second (the pitch sway of a less damped PD needs longer to die out) */
static const char *humanoid_ini(const char *contact_lines) {
  static char ini[2048];
  snprintf(ini, sizeof ini,
           "[model]\npath = %s\n[sim]\nactuation = pd\nkp = 3000\nkd = 200\npd_torque_limit = false\n[contact]\n%s",
           HUMANOID, contact_lines);
  return ini;
}

typedef struct stand_result {
  double force_ratio; /* mean total normal force over the last 0.5 s / weight */
  double sink;        /* root z change over the last second (m) */
  double drift;       /* root xy change over the last second (m) */
  double pen;         /* deepest penetration at the end (m) */
} stand_result;

static int stand(const char *contact_lines, double seconds, stand_result *r) {
  bcg_config *cfg;
  bcg_env *env = make_env(humanoid_ini(contact_lines), &cfg);
  if (!env) return -1;
  const bcg_mdata *m = &env->model->m;
  bcg_real x[BCG_MAX_Q + BCG_MAX_DOF], xn[BCG_MAX_Q + BCG_MAX_DOF], a[BCG_MAX_ACT] = {0};
  for (int i = 0; i < m->nq; i++) x[i] = m->qpos0[i];
  for (int i = 0; i < m->nv; i++) x[m->nq + i] = 0;
  x[2] += -lowest_gap(env, x) - 0.0005;
  double mass = 0;
  for (int b = 1; b < m->nbody; b++) mass += m->body_mass[b];
  double weight = mass * 9.81;
  int steps = (int)(seconds / env->control_dt + 0.5), last = (int)(0.5 / env->control_dt);
  int sec = (int)(1.0 / env->control_dt);
  double fsum = 0, z0 = 0, xy0[2] = {0, 0};
  int nf = 0;
  bcg_sim *sim = env->sim;
  for (int k = 0; k < steps; k++) {
    if (k == steps - sec) { z0 = x[2]; xy0[0] = x[0]; xy0[1] = x[1]; }
    bcg_env_step(env, 1, x, a, xn, NULL);
    memcpy(x, xn, sizeof(bcg_real) * env->nx);
    if (k >= steps - last) {
      double f = 0;
      for (int i = 0; i < sim->nact[0]; i++) f += sim->fn[i];
      fsum += f;
      nf++;
    }
  }
  r->force_ratio = fsum / nf / weight;
  r->sink = x[2] - z0;
  r->drift = hypot(x[0] - xy0[0], x[1] - xy0[1]);
  r->pen = -lowest_gap(env, x);
  bcg_env_free(env);
  bcg_config_free(cfg);
  return 0;
}

static void test_humanoid_standing(void) {
  const char *cases[][2] = {{"soft", "plugin = soft\n"},
                            {"smoothed_kappa", "plugin = smoothed_kappa\n"},
                            {"hard", "plugin = hard\n"}};
  for (int i = 0; i < 3; i++) {
    if (!have_plugin(cases[i][0])) { CU_FAIL("plugin missing"); continue; }
    stand_result r;
    CU_ASSERT_EQUAL_FATAL(stand(cases[i][1], 4.0, &r), 0);
    char what[128];
    snprintf(what, sizeof what, "standing %s: |normal force / weight - 1|", cases[i][0]);
    bcg_test_report(what, fabs(r.force_ratio - 1));
    snprintf(what, sizeof what, "standing %s: |sink| over the last second (m)", cases[i][0]);
    bcg_test_report(what, fabs(r.sink));
    snprintf(what, sizeof what, "standing %s: drift over the last second (m)", cases[i][0]);
    bcg_test_report(what, r.drift);
    CU_ASSERT(fabs(r.force_ratio - 1) < 0.02);
    CU_ASSERT(fabs(r.sink) < 2e-3);
    CU_ASSERT(r.drift < 5e-3);
  }
}

static void test_kappa_penetration(void) {
  if (!have_plugin("smoothed_kappa")) { CU_FAIL("plugin missing"); return; }
  const double kappas[] = {30, 50, 100, 300, 1000, 3000};
  double prev = 1e9;
  printf("\n  kappa -> resting penetration of humanoid.xml (PD default pose, 3 s, dt 5 ms, 10 PGS iterations)\n");
  printf("  %8s %14s %16s\n", "kappa", "penetration mm", "force / weight");
  for (int i = 0; i < 6; i++) {
    char lines[128];
    snprintf(lines, sizeof lines, "plugin = smoothed_kappa\nkappa = %g\n", kappas[i]);
    stand_result r;
    CU_ASSERT_EQUAL_FATAL(stand(lines, 3.0, &r), 0);
    printf("  %8g %14.2f %16.3f\n", kappas[i], 1000 * r.pen, r.force_ratio);
    CU_ASSERT(r.pen < prev);
    prev = r.pen;
  }
}

BCG_TESTS({"sphere_drop", test_sphere_drop}, {"soft_rest_penetration", test_soft_rest_penetration},
          {"box_slope", test_box_slope}, {"humanoid_standing", test_humanoid_standing},
          {"kappa_penetration", test_kappa_penetration});
BCG_RUN("physics")
