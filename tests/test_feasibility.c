/* tests/test_feasibility.c - `bcg feasibility` (bcg/feasibility.h): the
 * inverse dynamics of a clip against the actuator limits and the root's
 * residual wrench, on MuJoCo's humanoid.xml.
 *   - humanoid.xml's standing pose held on the floor: the contacts carry the
 *     weight (root residual ~0), the joint torques are bounded (the ankles
 *     hold the centre of mass 2.6 cm in front of them);
 *   - the same clip 1 m up: the root must carry the whole weight, m g with m
 *     the model's total mass;
 *   - the same pose in free fall (a parabola): no residual (the derivatives
 *     are exact for a quadratic);
 *   - a clip MuJoCo itself simulated with zero control: the analysis finds
 *     forces inside the friction cones that explain it with small torques
 *     and residual;
 *   - MuJoCo's soft contact on the standing clip as given (zero depth)
 *     carries nothing: the documented reason for the contact fit;
 *   - the command: a verdict line per clip, and bad input (missing file,
 *     wrong column count) a one-line error naming the file. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bcg/dyn.h"
#include "bcg/feasibility.h"
#include "bcg/mjref.h"
#include "bcg/model.h"
#include "bcg/step.h"
#include "testutil.h"

#define HUMANOID "/usr/share/mujoco/model/humanoid/humanoid.xml"

static bcg_model *humanoid(void) {
  static bcg_model *M;
  if (!M) {
    char err[1024];
    M = bcg_model_load(HUMANOID, err, sizeof err);
    if (!M) fprintf(stderr, "%s\n", err);
  }
  return M;
}

static double total_mass(const bcg_model *M) {
  double s = 0;
  for (int b = 0; b < M->m.nbody; b++) s += M->m.body_mass[b];
  return s;
}

static double gravity(const bcg_model *M) { return fabs((double)M->m.gravity[2]); }

/* n frames of the default pose, the lowest contact point `lift` m above the floor */
static double *pose_clip(const bcg_model *M, int n, double lift) {
  const bcg_mdata *m = &M->m;
  double *Q = malloc(sizeof(double) * n * m->nq);
  static bcg_kin k;
  bcg_real q[BCG_MAX_Q] = {0};
  for (int i = 0; i < m->nq; i++) q[i] = m->qpos0[i];
  bcg_kinematics(m, q, &k);
  q[2] += (bcg_real)lift - bcg_lowest_gap(m, &k);
  for (int f = 0; f < n; f++)
    for (int i = 0; i < m->nq; i++) Q[(size_t)f * m->nq + i] = q[i];
  return Q;
}

static int joint_index(const bcg_feas_result *r, const char *name) {
  for (int j = 0; j < r->njoint; j++)
    if (!strcmp(r->joint[j].name, name)) return j;
  return -1;
}

static void test_stand_on_floor(void) {
  bcg_model *M = humanoid();
  CU_ASSERT_PTR_NOT_NULL_FATAL(M);
  double *Q = pose_clip(M, 31, 0.0);
  bcg_feas_opts o;
  bcg_feas_opts_default(&o);
  o.keep_frames = 1;
  bcg_feas_result r;
  char err[1024];
  CU_ASSERT_EQUAL_FATAL(bcg_feasibility(M, Q, 31, 30, &o, &r, err, sizeof err), 0);
  const double mg = total_mass(M) * gravity(M);
  CU_ASSERT(fabs(r.weight - mg) < 1e-9 * mg);
  bcg_test_report("standing: root residual force / m g", r.resF_peak / mg);
  bcg_test_report("standing: root residual torque / m g (m)", r.resT_peak / mg);
  CU_ASSERT(r.resF_peak < 1e-4 * mg);
  CU_ASSERT(r.resT_peak < 1e-4 * mg);
  /* the contacts carry the weight, straight up */
  CU_ASSERT(fabs(r.fcontact[2] - mg) < 1e-3 * mg);
  CU_ASSERT(fabs(r.fcontact[0]) < 1e-3 * mg && fabs(r.fcontact[1]) < 1e-3 * mg);
  /* bounded torques: every joint well inside its limit; the ankles hold the
   * centre of mass in front of them (a few N m each, the same on both sides) */
  double worst = 0;
  for (int j = 0; j < r.njoint; j++) {
    CU_ASSERT(r.joint[j].limit > 0);
    worst = fmax(worst, r.joint[j].peak / r.joint[j].limit);
    CU_ASSERT_EQUAL(r.joint[j].over_frac, 0);
  }
  bcg_test_report("standing: largest torque / limit", worst);
  CU_ASSERT(worst < 0.5);
  const int ra = joint_index(&r, "right_ankle_y"), la = joint_index(&r, "left_ankle_y");
  CU_ASSERT_FATAL(ra >= 0 && la >= 0);
  CU_ASSERT(r.joint[ra].peak > 1 && r.joint[ra].peak < 10);
  CU_ASSERT(fabs(r.joint[ra].peak - r.joint[la].peak) < 1e-3 * r.joint[ra].peak);
  CU_ASSERT(fabs(r.min_gap) < 1e-9 && r.flight_frac == 0);
  CU_ASSERT(r.feasible);
  CU_ASSERT_STRING_EQUAL(r.verdict, "feasible");
  bcg_feas_result_free(&r);
  free(Q);
}

static void test_lifted_needs_weight(void) {
  bcg_model *M = humanoid();
  CU_ASSERT_PTR_NOT_NULL_FATAL(M);
  double *Q = pose_clip(M, 31, 1.0);
  bcg_feas_opts o;
  bcg_feas_opts_default(&o);
  o.keep_frames = 1;
  bcg_feas_result r;
  char err[1024];
  CU_ASSERT_EQUAL_FATAL(bcg_feasibility(M, Q, 31, 30, &o, &r, err, sizeof err), 0);
  const double mg = total_mass(M) * gravity(M);
  /* MuJoCo's own total mass agrees with the converted model's */
  bcg_mjref *ref = bcg_mjref_new(M, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  CU_ASSERT(fabs(bcg_mjref_total_mass(ref) - total_mass(M)) < 1e-9 * total_mass(M));
  bcg_mjref_free(ref);
  bcg_test_report("lifted 1 m: |F_z - m g| / m g", fabs(r.res[2] - mg) / mg);
  for (int i = 0; i < r.nframes; i++) {
    CU_ASSERT(fabs(r.res[6 * i + 2] - mg) < 1e-6 * mg);
    CU_ASSERT(fabs(r.res[6 * i]) < 1e-6 * mg && fabs(r.res[6 * i + 1]) < 1e-6 * mg);
    CU_ASSERT(r.fcontact[3 * i + 2] == 0);
  }
  CU_ASSERT(fabs(r.resF_peak - mg) < 1e-6 * mg);
  CU_ASSERT(fabs(r.min_gap - 1.0) < 1e-9 && r.flight_frac == 1);
  CU_ASSERT(!r.feasible);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.verdict, "root residual force 100% of m g"));
  /* hanging from the root, the legs still need bounded torques (their own weight) */
  for (int j = 0; j < r.njoint; j++) CU_ASSERT(r.joint[j].peak < r.joint[j].limit);
  bcg_feas_result_free(&r);
  free(Q);
}

/* the pose thrown up 2 m above the floor: z(t) = z0 + v t - g t^2 / 2, a
 * slow turn about z at a constant rate; the residual is what the motion needs
 * beyond gravity, nearly nothing (the fit is exact for these trajectories) */
static void test_free_fall(void) {
  bcg_model *M = humanoid();
  CU_ASSERT_PTR_NOT_NULL_FATAL(M);
  const int n = 25, nq = M->m.nq;
  const double fps = 30, g = gravity(M);
  double *Q = pose_clip(M, n, 2.0);
  for (int f = 0; f < n; f++) {
    double *q = Q + (size_t)f * nq, t = f / fps, yaw = 0.5 * t;
    q[0] += 0.7 * t;
    q[2] += 2.5 * t - 0.5 * g * t * t;
    q[3] = cos(yaw / 2), q[4] = 0, q[5] = 0, q[6] = sin(yaw / 2);
  }
  bcg_feas_opts o;
  bcg_feas_opts_default(&o);
  bcg_feas_result r;
  char err[1024];
  const double mg = total_mass(M) * g;
  for (int w = 3; w <= 7; w += 4) {
    o.window = w;
    CU_ASSERT_EQUAL_FATAL(bcg_feasibility(M, Q, n, fps, &o, &r, err, sizeof err), 0);
    bcg_test_report("free fall: root residual force / m g", r.resF_peak / mg);
    /* the turn about the root's vertical axis carries the centre of mass
     * (1.6 cm off it) round a circle: m w^2 r = 0.16 N, and a gyroscopic
     * torque as z is not a principal axis; everything else is gravity */
    CU_ASSERT(r.resF_peak < 1e-3 * mg);
    CU_ASSERT(r.resT_peak < 1e-3 * mg);
    bcg_feas_result_free(&r);
  }
  free(Q);
}

/* MuJoCo's own motion: humanoid.xml from its standing pose (1 mm deep) with
 * zero control for 0.35 s (it sags and starts to lean; the floor's force
 * goes from 370 to 410 N), recorded every 5 ms step. The analysis models
 * neither joint-limit forces nor contacts between the robot's own bodies
 * (bcg's simulator has only floor contact), which MuJoCo would add: the
 * limits are off here, and the clip ends before the arms swing into the
 * body (0.41 s; they would need 40 N m at the shoulders there). Every force
 * on it came from gravity, the passive springs and dampers, and MuJoCo's
 * floor contacts (inside its pyramidal friction cone, which lies inside
 * ours), so the fit should find contact forces that leave the actuators and
 * the root almost nothing; standing still needs 4.8 N m at each ankle. */
static void test_mujoco_motion_is_feasible(void) {
  bcg_model *M = humanoid();
  CU_ASSERT_PTR_NOT_NULL_FATAL(M);
  const int nq = M->m.nq, n = 70;
  double *Q = pose_clip(M, n, -0.001), qv[BCG_MAX_DOF] = {0};
  bcg_mjref *ref = bcg_mjref_new(M, BCG_MJREF_NO_LIMIT);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  const double dt = bcg_mjref_timestep(ref);
  bcg_mjref_set_state(ref, Q, qv);
  for (int f = 1; f < n; f++) {
    bcg_mjref_step(ref, NULL, 1);
    bcg_mjref_state(ref, Q + (size_t)f * nq, NULL);
  }
  bcg_mjref_free(ref);
  bcg_feas_opts o;
  bcg_feas_opts_default(&o);
  o.window = 5;
  o.keep_frames = 1;
  bcg_feas_result r;
  char err[1024];
  CU_ASSERT_EQUAL_FATAL(bcg_feasibility(M, Q, n, 1 / dt, &o, &r, err, sizeof err), 0);
  const double mg = total_mass(M) * gravity(M);
  /* the largest torque over the clip, and inside it (the fit of qacc is
   * one-sided over the first and last 2 frames, and the motion speeds up
   * at the end: 1 N m there, 0.2 N m inside) */
  double worst = 0, inner = 0;
  for (int j = 0; j < r.njoint; j++) worst = fmax(worst, r.joint[j].peak);
  for (int i = 3; i < n - 3; i++)
    for (int j = 0; j < r.njoint; j++) inner = fmax(inner, fabs(r.tau[(size_t)i * r.njoint + j]));
  bcg_test_report("MuJoCo's zero-control motion: largest joint torque needed (N m)", worst);
  bcg_test_report("MuJoCo's zero-control motion: the same without 3 frames at each end (N m)", inner);
  bcg_test_report("MuJoCo's zero-control motion: root residual force / m g", r.resF_peak / mg);
  bcg_test_report("MuJoCo's zero-control motion: root residual torque / m g (m)", r.resT_peak / mg);
  CU_ASSERT(worst < 2.0);
  CU_ASSERT(inner < 0.5);
  CU_ASSERT(r.resF_peak < 0.01 * mg);
  CU_ASSERT(r.resT_peak < 0.0025 * mg);
  CU_ASSERT(r.feasible);
  bcg_feas_result_free(&r);
  free(Q);
}

/* MuJoCo's soft contact at zero depth pushes nothing: the weight is residual */
static void test_soft_contact_at_zero_depth(void) {
  bcg_model *M = humanoid();
  CU_ASSERT_PTR_NOT_NULL_FATAL(M);
  double *Q = pose_clip(M, 9, 0.0);
  bcg_feas_opts o;
  bcg_feas_opts_default(&o);
  o.contact = BCG_FEAS_SOFT;
  bcg_feas_result r;
  char err[1024];
  CU_ASSERT_EQUAL_FATAL(bcg_feasibility(M, Q, 9, 30, &o, &r, err, sizeof err), 0);
  const double mg = total_mass(M) * gravity(M);
  bcg_test_report("soft contact at zero depth: root residual force / m g", r.resF_peak / mg);
  CU_ASSERT(fabs(r.resF_peak - mg) < 0.01 * mg);
  CU_ASSERT(!r.feasible);
  CU_ASSERT(isnan(r.max_slip));
  bcg_feas_result_free(&r);
  free(Q);
}

static void test_bad_options(void) {
  bcg_model *M = humanoid();
  CU_ASSERT_PTR_NOT_NULL_FATAL(M);
  double *Q = pose_clip(M, 5, 0.0);
  bcg_feas_opts o;
  bcg_feas_result r;
  char err[1024];
  bcg_feas_opts_default(&o);
  o.window = 4;
  CU_ASSERT_EQUAL(bcg_feasibility(M, Q, 5, 30, &o, &r, err, sizeof err), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "window"));
  bcg_feas_opts_default(&o);
  CU_ASSERT_EQUAL(bcg_feasibility(M, Q, 2, 30, &o, &r, err, sizeof err), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "frames"));
  CU_ASSERT_EQUAL(bcg_feasibility(M, Q, 5, 0, &o, &r, err, sizeof err), -1);
  free(Q);
}

/* ---- the command ------------------------------------------------------------ */

static char out[1 << 16];
static char tmpdir[128];

static const char *tmp_path(const char *name) {
  static char p[4][256];
  static int k;
  if (!tmpdir[0]) snprintf(tmpdir, sizeof tmpdir, "%s", bcg_test_tmpdir()); /* removed at exit */
  char *s = p[k++ % 4];
  snprintf(s, 256, "%s/%s", tmpdir, name);
  return s;
}

/* run bcg; mode 0: stdout + stderr, 1: stderr only; returns the exit status */
static int run_mode(int mode, const char *fmt, ...) {
  char args[2048], cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof cmd, "%s/bcg %s %s", bcg_test_build_dir(), args, mode == 1 ? "2>&1 >/dev/null" : "2>&1");
  return bcg_test_capture(cmd, out, sizeof out);
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

static void write_csv(const char *path, const bcg_model *M, const double *Q, int n, int drop_last_column) {
  FILE *f = fopen(path, "w");
  if (!f) return;
  fprintf(f, "# fps=30 quat=wxyz\n");
  for (int i = 0; i < n; i++) {
    const int nc = M->m.nq - (drop_last_column ? 1 : 0);
    for (int c = 0; c < nc; c++) fprintf(f, c ? ",%.9f" : "%.9f", Q[(size_t)i * M->m.nq + c]);
    fprintf(f, "\n");
  }
  fclose(f);
}

static void test_command(void) {
  bcg_model *M = humanoid();
  CU_ASSERT_PTR_NOT_NULL_FATAL(M);
  double *Q = pose_clip(M, 12, 0.0), *Qup = pose_clip(M, 12, 1.0);
  const char *stand = tmp_path("standing.csv"), *up = tmp_path("lifted.csv");
  write_csv(stand, M, Q, 12, 0);
  write_csv(up, M, Qup, 12, 0);
  CU_ASSERT_EQUAL(run_mode(0, "feasibility %s %s --model %s", stand, up, HUMANOID), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "verdict: standing: feasible\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "verdict: lifted: NOT feasible: root residual force 100% of m g"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "summary"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "right_ankle_y"));
  /* --out: one row per frame and a header */
  const char *frames = tmp_path("frames.csv");
  CU_ASSERT_EQUAL(run_mode(0, "feasibility %s --model %s --out %s", up, HUMANOID, frames), 0);
  FILE *f = fopen(frames, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  int rows = 0;
  char line[8192];
  while (fgets(line, sizeof line, f)) rows++;
  fclose(f);
  CU_ASSERT_EQUAL(rows, 13);
  free(Q);
  free(Qup);
}

static void test_command_bad_input(void) {
  bcg_model *M = humanoid();
  CU_ASSERT_PTR_NOT_NULL_FATAL(M);
  /* a missing file: exit 1, one line naming it */
  const char *missing = tmp_path("no_such_clip.csv");
  CU_ASSERT_EQUAL(run_mode(1, "feasibility %s --model %s", missing, HUMANOID), 1);
  CU_ASSERT_EQUAL(count_lines(out), 1);
  CU_ASSERT_EQUAL(strncmp(out, "bcg: error: ", 12), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, missing));
  /* a wrong column count: exit 1, one line naming the file, its line and the counts */
  double *Q = pose_clip(M, 4, 0.0);
  const char *bad = tmp_path("short_rows.csv");
  write_csv(bad, M, Q, 4, 1);
  CU_ASSERT_EQUAL(run_mode(1, "feasibility %s --model %s", bad, HUMANOID), 1);
  CU_ASSERT_EQUAL(count_lines(out), 1);
  char want[512];
  snprintf(want, sizeof want, "%s:2: %d columns, but model", bad, M->m.nq - 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  /* a missing model file: exit 1, one line naming it */
  CU_ASSERT_EQUAL(run_mode(1, "feasibility %s --model %s", bad, tmp_path("nope.xml")), 1);
  CU_ASSERT_EQUAL(count_lines(out), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "nope.xml"));
  /* usage errors: exit 2 */
  CU_ASSERT_EQUAL(run_mode(1, "feasibility"), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "missing MOTION"));
  CU_ASSERT_EQUAL(run_mode(1, "feasibility %s --window 4", bad), 2);
  CU_ASSERT_EQUAL(run_mode(1, "feasibility %s %s --out x.csv", bad, bad), 2);
  CU_ASSERT_EQUAL(run_mode(1, "feasibility %s --contact rigid", bad), 2);
  free(Q);
}

BCG_TESTS({"stand_on_floor", test_stand_on_floor}, {"lifted_needs_weight", test_lifted_needs_weight},
          {"free_fall", test_free_fall}, {"mujoco_motion_is_feasible", test_mujoco_motion_is_feasible},
          {"soft_contact_at_zero_depth", test_soft_contact_at_zero_depth}, {"bad_options", test_bad_options},
          {"command", test_command}, {"command_bad_input", test_command_bad_input});
BCG_RUN("feasibility")
