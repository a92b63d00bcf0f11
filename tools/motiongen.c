/* tools/motiongen.c - the reference motions shipped in models/motions/
 * (run, jump, fight, dance for MuJoCo's humanoid.xml), generated from the
 * keyframe tables and gait functions below with libbcg's kinematics.
 *
 *   make motions        (builds this tool and writes the CSV and PNG files of models/motions)
 *   build/motiongen [MODEL] [OUTDIR] [CLIP ...]   (only the named clips, e.g. run)
 *
 * What makes a clip physically consistent (all but run, which is planned
 * from its centre of mass: see make_run below):
 *   - joint angles come from the tables, clamped into the model's ranges;
 *   - in stance, the root height is chosen so that the lowest contact point
 *     of the whole body lies exactly on the floor (no penetration, and
 *     something always touches);
 *   - the horizontal root motion keeps the supporting foot (the lower one)
 *     fixed on the ground while it supports: the root moves by minus the
 *     foot's motion relative to it, so stance feet do not slide;
 *   - during the flight intervals of a clip the root height follows the
 *     parabola z(t) = z0 + (z1 - z0) s / T + g/2 s (T - s) (s = t - t0,
 *     T = t1 - t0) between the stance heights at take-off and landing, and
 *     the horizontal velocity stays the take-off velocity (ballistic).
 * Output: CSV with a header '# fps=30 quat=wxyz ...', a row of column names,
 * one qpos row per frame; and a PNG strip of frames (orthographic side view
 * of the collision capsules), written with zlib. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "bcg/dyn.h"
#include "bcg/model.h"
#include "bcg/step.h"

#define FPS 30.0
#define G 9.81
#define DEG (M_PI / 180)

/* pose channels: root yaw/pitch/roll then the humanoid's 21 hinges (degrees) */
enum {
  YAW, PITCH, ROLL,
  AZ, AY, AX,
  RHX, RHZ, RHY, RK, RAY, RAX,
  LHX, LHZ, LHY, LK, LAY, LAX,
  RS1, RS2, RE, LS1, LS2, LE,
  NCH
};
static const char *CH_JOINT[NCH] = {
    NULL, NULL, NULL,
    "abdomen_z", "abdomen_y", "abdomen_x",
    "right_hip_x", "right_hip_z", "right_hip_y", "right_knee", "right_ankle_y", "right_ankle_x",
    "left_hip_x", "left_hip_z", "left_hip_y", "left_knee", "left_ankle_y", "left_ankle_x",
    "right_shoulder1", "right_shoulder2", "right_elbow", "left_shoulder1", "left_shoulder2", "left_elbow"};

typedef struct key {
  double t;
  double v[NCH];
} key;

/* piecewise smoothstep through keys (C1, zero velocity at keys) */
static void keys_eval(const key *k, int n, double t, double *out) {
  if (t <= k[0].t) { memcpy(out, k[0].v, sizeof k[0].v); return; }
  if (t >= k[n - 1].t) { memcpy(out, k[n - 1].v, sizeof k[0].v); return; }
  int i = 0;
  while (i < n - 2 && t > k[i + 1].t) i++;
  double s = (t - k[i].t) / (k[i + 1].t - k[i].t);
  s = s * s * (3 - 2 * s);
  for (int c = 0; c < NCH; c++) out[c] = (1 - s) * k[i].v[c] + s * k[i + 1].v[c];
}

/* ---- the clips ----------------------------------------------------------------- */

struct gen;
typedef struct clip {
  const char *name, *about;
  double seconds;
  void (*pose)(double t, double *v);
  int nflight;
  double flight[16][2];
  /* clips planned in task space (run): frames [n][nq] made by this instead of
   * pose + make_clip */
  double *(*make)(struct gen *g, const struct clip *c, int *nframes);
} clip;

static double *make_run(struct gen *g, const clip *c, int *nframes);

/* jump: 5 vertical jumps of 1.6 s: stand, crouch with arms back, extend,
 * flight of 0.42 s with legs slightly tucked, land and absorb */
static const key JUMP_CYCLE[] = {
    {0.00, {0}},
    {0.45, {[PITCH] = 25, [RHY] = -70, [LHY] = -70, [RK] = -100, [LK] = -100, [RAY] = -25, [LAY] = -25,
            [RS1] = -50, [LS1] = -50, [RS2] = 20, [LS2] = 20, [AY] = -10}},
    {0.62, {[PITCH] = 5, [RHY] = -5, [LHY] = -5, [RK] = -5, [LK] = -5, [RAY] = 35, [LAY] = 35, [RS1] = 55,
            [LS1] = 55, [RS2] = 40, [LS2] = 40}},
    {0.83, {[PITCH] = 3, [RHY] = -35, [LHY] = -35, [RK] = -55, [LK] = -55, [RAY] = 10, [LAY] = 10, [RS1] = 40,
            [LS1] = 40, [RS2] = 30, [LS2] = 30}},
    {1.04, {[PITCH] = 5, [RHY] = -20, [LHY] = -20, [RK] = -25, [LK] = -25, [RAY] = 20, [LAY] = 20, [RS1] = 10,
            [LS1] = 10}},
    {1.30, {[PITCH] = 20, [RHY] = -60, [LHY] = -60, [RK] = -85, [LK] = -85, [RAY] = -20, [LAY] = -20,
            [RS1] = -10, [LS1] = -10, [AY] = -8}},
    {1.60, {0}},
};
static void pose_jump(double t, double *v) {
  double T = 1.6;
  double tc = fmod(t, T);
  keys_eval(JUMP_CYCLE, (int)(sizeof JUMP_CYCLE / sizeof JUMP_CYCLE[0]), tc, v);
}

/* fight: guard stance, weight shifts, punches (jab, cross), a front kick with
 * each leg, a side step. */
#define GUARD [RS1] = 40, [RS2] = 50, [RE] = 15, [LS1] = 40, [LS2] = 50, [LE] = 15, [RK] = -25, [LK] = -25, \
              [RHY] = -15, [LHY] = -15, [RHX] = -8, [LHX] = -8, [PITCH] = 8
static const key FIGHT[] = {
    {0.0, {0}},
    {0.8, {GUARD}},
    {1.4, {GUARD, [ROLL] = -5, [RHX] = -14, [LHX] = -2}},                  /* weight to the right */
    {2.0, {GUARD, [ROLL] = 5, [RHX] = -2, [LHX] = -14}},                    /* weight to the left */
    {2.5, {GUARD, [LS1] = 60, [LS2] = -20, [LE] = -85, [YAW] = -10}},       /* left jab */
    {2.9, {GUARD}},
    {3.4, {GUARD, [RS1] = 60, [RS2] = -20, [RE] = -85, [YAW] = 15, [AZ] = -10}}, /* right cross */
    {3.9, {GUARD}},
    {4.6, {GUARD, [RHY] = -95, [RK] = -100, [LK] = -15, [PITCH] = -5}},   /* chamber right knee */
    {5.0, {GUARD, [RHY] = -95, [RK] = -10, [LK] = -15, [RAY] = 30, [PITCH] = -12}}, /* front kick */
    {5.4, {GUARD, [RHY] = -60, [RK] = -90, [LK] = -20}},
    {6.0, {GUARD}},
    {6.7, {GUARD, [LHY] = -95, [LK] = -100, [RK] = -15, [PITCH] = -5}},
    {7.1, {GUARD, [LHY] = -95, [LK] = -10, [RK] = -15, [LAY] = 30, [PITCH] = -12}},
    {7.5, {GUARD, [LHY] = -60, [LK] = -90, [RK] = -20}},
    {8.1, {GUARD}},
    {8.6, {GUARD, [RS1] = 60, [RS2] = -20, [RE] = -85, [YAW] = 15, [AZ] = -10, [ROLL] = -4}},
    {8.9, {GUARD, [LS1] = 60, [LS2] = -20, [LE] = -85, [YAW] = -12, [ROLL] = 4}},
    {9.3, {GUARD}},
    {10.0, {0}},
};
static void pose_fight(double t, double *v) { keys_eval(FIGHT, (int)(sizeof FIGHT / sizeof FIGHT[0]), t, v); }

/* dance: side steps with arm waves, two full turns on the spot (stepping),
 * hip sways. Yaw accumulates over the turns. */
static void pose_dance(double t, double *v) {
  memset(v, 0, sizeof(double) * NCH);
  double beat = 0.5, w = M_PI / beat; /* one step per beat */
  double s = sin(w * t), c = cos(w * t);
  /* alternating steps: lift one foot per beat */
  double lr = 0.5 + 0.5 * s, ll = 0.5 - 0.5 * s;
  v[RHY] = -10 - 35 * lr * lr;
  v[RK] = -15 - 60 * lr * lr;
  v[LHY] = -10 - 35 * ll * ll;
  v[LK] = -15 - 60 * ll * ll;
  v[RHX] = -6 - 8 * ll;
  v[LHX] = -6 - 8 * lr;
  v[ROLL] = 6 * s;
  v[AX] = -8 * s;
  /* arms wave */
  v[RS1] = 30 + 25 * s;
  v[RS2] = 45 + 10 * c;
  v[RE] = -40 - 40 * (0.5 + 0.5 * c);
  v[LS1] = 30 - 25 * s;
  v[LS2] = 45 - 10 * c;
  v[LE] = -40 - 40 * (0.5 - 0.5 * c);
  v[AZ] = 15 * sin(0.5 * w * t);
  /* turns: 360 degrees during [2, 4] s and -360 during [6, 8] s, smooth */
  double yaw = 0;
  for (int i = 0; i < 2; i++) {
    double t0 = i ? 6.0 : 2.0, sgn = i ? -1 : 1, x = (t - t0) / 2.0;
    x = x < 0 ? 0 : (x > 1 ? 1 : x);
    yaw += sgn * 360 * x * x * (3 - 2 * x);
  }
  v[YAW] = yaw;
  v[PITCH] = 4;
}

/* stand: the model's default pose (all hinges 0), still, for 10 s: the first
 * rung of the learning ladder (docs/learning.md) */
static void pose_stand(double t, double *v) {
  (void)t;
  memset(v, 0, sizeof(double) * NCH);
}

/* walk: a gentle walk at about 1 m/s: stride period 1.0 s (a step every
 * 0.5 s), thighs swinging +-18 degrees about a slightly flexed mean, the
 * knee folding while its leg swings forward (foot clearance), a small
 * ankle motion, arms counter-swinging; starts from the standing pose and
 * ramps up over the first second. No flight phase: one foot always
 * supports (the lower one is pinned). */
static void pose_walk(double t, double *v) {
  double T = 1.0, w = 2 * M_PI / T, ramp = t < 1.0 ? 0.5 - 0.5 * cos(M_PI * t) : 1.0;
  for (int side = 0; side < 2; side++) {
    double ph = w * t + side * M_PI, sw = sin(ph), c = cos(ph), fold = 0.5 + 0.5 * c;
    int hy = side ? LHY : RHY, k = side ? LK : RK, ay = side ? LAY : RAY;
    v[hy] = ramp * (-18 * sw - 6);
    v[k] = -ramp * (6 + 50 * fold * fold * fold);
    v[ay] = ramp * (5 * sw - 4 * fold * fold * fold);
    int s1 = side ? LS1 : RS1, s2 = side ? LS2 : RS2, e = side ? LE : RE;
    v[s1] = 12 * ramp * sw;
    v[s2] = -6 * ramp * sw;
    v[e] = -10 * ramp;
  }
  v[PITCH] = 3 * ramp;
  v[AZ] = 3 * ramp * sin(w * t);
}

#define RUN_ABOUT "jog at 1.5 m/s, 8 s, stride 0.667 s (12 strides), stance 0.267 s, flight 0.067 s per step, " \
                  "centre of mass ballistic in flight, stance foot pinned by gait phase"
static clip CLIPS[] = {
    {"stand", "the default standing pose held still, 10 s", 10.0, pose_stand, 0, {{0}}, NULL},
    {"walk", "gentle walk, about 1 m/s, 10 s, stride 1.0 s, stance foot pinned", 10.0, pose_walk, 0, {{0}}, NULL},
    {"run", RUN_ABOUT, 8.0, NULL, 0, {{0}}, make_run},
    {"jump", "5 vertical jumps, 8 s, flight 0.42 s each", 8.0, pose_jump, 5,
     {{0.62, 1.04}, {2.22, 2.64}, {3.82, 4.24}, {5.42, 5.84}, {7.02, 7.44}}, NULL},
    {"fight", "guard, weight shifts, jab, cross, front kicks, 10 s", 10.0, pose_fight, 0, {{0}}, NULL},
    {"dance", "stepping in place with arm waves and two full turns, 10 s", 10.0, pose_dance, 0, {{0}}, NULL},
};
#define NCLIPS ((int)(sizeof CLIPS / sizeof CLIPS[0]))

/* ---- generation ------------------------------------------------------------------ */

typedef struct gen {
  const bcg_model *model;
  const bcg_mdata *m;
  int chq[NCH]; /* qpos address of each joint channel */
  int chj[NCH];
  int foot[2];  /* right_foot, left_foot bodies */
  int shin[2];  /* right_shin, left_shin */
  int clamped;
} gen;

static void euler_quat(double yaw, double pitch, double roll, double *q) {
  double a[3] = {0, 0, yaw}, b[3] = {0, pitch, 0}, c[3] = {roll, 0, 0}, qa[4], qb[4], qc[4], t[4];
  bcg_quat_exp(qa, a);
  bcg_quat_exp(qb, b);
  bcg_quat_exp(qc, c);
  bcg_quat_mul(t, qa, qb);
  bcg_quat_mul(q, t, qc);
}

/* qpos with the root at the origin */
static void pose_q(gen *g, const double *v, double *q) {
  const bcg_mdata *m = g->m;
  for (int i = 0; i < m->nq; i++) q[i] = m->qpos0[i];
  q[0] = q[1] = q[2] = 0;
  euler_quat(v[YAW] * DEG, v[PITCH] * DEG, v[ROLL] * DEG, q + 3);
  for (int c = AZ; c < NCH; c++) {
    int j = g->chj[c];
    double x = v[c] * DEG, lo = m->jnt_range[j][0] + 0.5 * DEG, hi = m->jnt_range[j][1] - 0.5 * DEG;
    if (m->jnt_limited[j] && (x < lo || x > hi)) {
      g->clamped++;
      x = x < lo ? lo : hi;
    }
    q[g->chq[c]] = x;
  }
}

/* lowest contact point height (root at the origin), and per foot */
static double lowest(gen *g, const double *q, double *footz, double (*footxy)[2]) {
  static bcg_kin k;
  const bcg_mdata *m = g->m;
  bcg_kinematics(m, q, &k);
  double lo = 1e30;
  footz[0] = footz[1] = 1e30;
  for (int i = 0; i < m->ncp; i++) {
    double pc[3];
    bcg_contact_point(m, &k, i, pc);
    double z = pc[2] + k.o[2];
    if (z < lo) lo = z;
    for (int f = 0; f < 2; f++)
      if (m->cp_body[i] == g->foot[f] && z < footz[f]) footz[f] = z;
  }
  for (int f = 0; f < 2; f++) {
    footxy[f][0] = k.p[g->foot[f]][0] + k.o[0];
    footxy[f][1] = k.p[g->foot[f]][1] + k.o[1];
  }
  return lo;
}

static int in_flight(const clip *c, double t, int *which) {
  for (int i = 0; i < c->nflight; i++)
    if (t > c->flight[i][0] && t < c->flight[i][1]) return *which = i, 1;
  return 0;
}

/* one clip: frames [n][nq] */
static double *make_clip(gen *g, const clip *c, int *nframes) {
  const bcg_mdata *m = g->m;
  int n = (int)lround(c->seconds * FPS) + 1, nq = m->nq;
  double *Q = calloc((size_t)n * nq, sizeof(double));
  double *zst = calloc(n, sizeof(double));
  double v[NCH];
  /* pass 1: poses and stance heights */
  for (int i = 0; i < n; i++) {
    memset(v, 0, sizeof v);
    c->pose(i / FPS, v);
    pose_q(g, v, Q + (size_t)i * nq);
    double fz[2], fxy[2][2];
    zst[i] = -lowest(g, Q + (size_t)i * nq, fz, fxy);
  }
  /* pass 2: root height and horizontal motion */
  double xy[2] = {0, 0}, vel[2] = {0, 0}, pin[2] = {0, 0};
  int support = -1;
  for (int i = 0; i < n; i++) {
    double t = i / FPS, *q = Q + (size_t)i * nq, fz[2], fxy[2][2];
    lowest(g, q, fz, fxy);
    int fl;
    double prev[2] = {xy[0], xy[1]};
    if (in_flight(c, t, &fl)) {
      double t0 = c->flight[fl][0], t1 = c->flight[fl][1], T = t1 - t0, s = t - t0;
      int i0 = (int)floor(t0 * FPS), i1 = (int)ceil(t1 * FPS);
      if (i1 >= n) i1 = n - 1;
      double z0 = zst[i0], z1 = zst[i1];
      /* stance heights are evaluated at the frames bracketing the flight */
      double T2 = (i1 - i0) / FPS, s2 = t - i0 / FPS;
      (void)T; (void)s;
      q[2] = z0 + (z1 - z0) * s2 / T2 + 0.5 * G * s2 * (T2 - s2);
      xy[0] += vel[0] / FPS;
      xy[1] += vel[1] / FPS;
      support = -1;
    } else {
      q[2] = zst[i];
      int sup = fz[0] <= fz[1] ? 0 : 1;
      if (sup != support) {
        support = sup;
        pin[0] = xy[0] + fxy[sup][0];
        pin[1] = xy[1] + fxy[sup][1];
      }
      xy[0] = pin[0] - fxy[sup][0];
      xy[1] = pin[1] - fxy[sup][1];
      if (i > 0) {
        vel[0] = (xy[0] - prev[0]) * FPS;
        vel[1] = (xy[1] - prev[1]) * FPS;
      }
    }
    q[0] = xy[0];
    q[1] = xy[1];
  }
  free(zst);
  *nframes = n;
  return Q;
}

/* ---- run: a jog planned from its centre of mass ---------------------------------------- */
/* The run clip is not a table of joint angles (tools/motiongen.c before this
 * was: its lower foot was pinned, the root carried, no flight; docs/feasibility.md).
 * It is planned in task space so that humanoid.xml could perform it:
 *   - gait by phase: a stride of 2 RUN_STEP frames (0.667 s), two steps; in
 *     each step one foot (right, then left) is in stance for RUN_STANCE frames,
 *     then both are in the air (duty factor 0.4). The stance foot is level and
 *     pinned at its footprint (foot origin fixed, 6-hinge leg IK) for the whole
 *     stance, so its contact points do not move.
 *   - the centre of mass of all bodies (libbcg's kinematics and masses), not
 *     the root, follows the plan: ballistic in flight (z'' = -g, constant
 *     horizontal velocity); in stance a vertical force m A (1 - u^4)
 *     (u = -1 at touchdown, 1 at take-off: zero at both, so z is C2 with the
 *     flight) whose impulse returns the weight's over the step; a horizontal
 *     force along the line from the stance ankle's axis to the centre of mass
 *     (a force through the ankle axis needs no ankle torque: humanoid.xml's
 *     ankles have 20 N m), plus the part that supplies the rate of the body's
 *     angular momentum about its centre of mass (computed from the poses, the
 *     plan repeated until they agree). The horizontal motion is the periodic
 *     solution of x'' = (z'' + g)(x - x_ankle)/(z - z_ankle) + u (shooting over
 *     one step): the gait is steady and the clip 12 strides exactly.
 *   - the height: as high as the legs reach with the stance knee bent at
 *     least RUN_KNEE_TD degrees at touchdown and take-off (bisection, on the
 *     plan without the angular momentum's push; with it the knees end up at
 *     about 35-45 degrees at touchdown and take-off, 65-75 at mid-stance).
 *   - swing: the ankle axis goes from footprint to footprint, speeding up to
 *     twice the running speed during the first flight, holding it while the
 *     other foot is in stance and slowing to rest during the second flight (the
 *     legs scissor, so their angular momenta roughly cancel), raised by up to
 *     RUN_LIFT; hip_x, hip_y, knee by IK for that point, hip_z a Hermite curve
 *     between its take-off and touchdown values and rates, the ankles keep
 *     the foot level where their range allows.
 *   - the root is wherever the centre of mass lands on the plan: for each
 *     frame the root is moved until the centre of mass is on the plan, the legs
 *     re-solved each time (the root's offset from the centre of mass changes
 *     as the legs and arms move).
 *   - trunk leaning forward by a constant RUN_PITCH, arms counter-swinging
 *     (sinusoids), abdomen straight. */
#define RUN_STEP 10   /* frames per step (a stride is 2 steps: 0.667 s at 30 fps) */
#define RUN_STANCE 8  /* frames of stance per step (touchdown to take-off): duty factor 0.4 */
#define RUN_SUB 100   /* integration substeps per frame */
#define RUN_LSUB 4    /* angular momentum samples per frame */
#define RUN_STRIDE_SAMPLES (2 * RUN_STEP * RUN_LSUB)
#define RUN_OFF 3     /* the clip starts this many frames after a right-foot touchdown */
#define RUN_ITER 4    /* passes of the angular momentum's push (converged after 4) */
#define RUN_SPEED 1.5   /* m/s */
#define RUN_KNEE_TD 8   /* stance knee bent at least this much at touchdown and take-off, degrees */
#define RUN_PITCH 14    /* trunk lean, degrees */
#define RUN_WIDTH 0.10  /* footprints at y = -+ this (m), under the hips */
#define RUN_LIFT 0.07   /* swing ankle raised by up to this (m) */
#define RUN_ARM 25      /* shoulder swing, degrees */

/* rotation vector of R (log map) */
static void mat_log(const double *R, double *w) {
  double c = 0.5 * (R[0] + R[4] + R[8] - 1), th;
  c = c > 1 ? 1 : (c < -1 ? -1 : c);
  th = acos(c);
  double v[3] = {R[7] - R[5], R[2] - R[6], R[3] - R[1]}, f = th < 1e-8 ? 0.5 : th / (2 * sin(th));
  for (int i = 0; i < 3; i++) w[i] = f * v[i];
}

/* solve A x = b (n <= 8), Gaussian elimination with partial pivoting */
static void solve_n(int n, double A[][8], double *b) {
  for (int c = 0; c < n; c++) {
    int p = c;
    for (int r = c + 1; r < n; r++)
      if (fabs(A[r][c]) > fabs(A[p][c])) p = r;
    for (int j = 0; j < n; j++) { double t = A[c][j]; A[c][j] = A[p][j]; A[p][j] = t; }
    double t = b[c]; b[c] = b[p]; b[p] = t;
    for (int r = c + 1; r < n; r++) {
      double f = A[r][c] / A[c][c];
      for (int j = c; j < n; j++) A[r][j] -= f * A[c][j];
      b[r] -= f * b[c];
    }
  }
  for (int c = n - 1; c >= 0; c--) {
    for (int j = c + 1; j < n; j++) b[c] -= A[c][j] * b[j];
    b[c] /= A[c][c];
  }
}

static void com_of(gen *g, const double *q, double *c) {
  static bcg_kin k;
  const bcg_mdata *m = g->m;
  bcg_kinematics(m, q, &k);
  double M = 0, h[3] = {0, 0, 0};
  for (int b = 1; b < m->nbody; b++) {
    M += m->body_mass[b];
    for (int d = 0; d < 3; d++) h[d] += k.h[b][d];
  }
  for (int d = 0; d < 3; d++) c[d] = k.o[d] + h[d] / M;
}

static void foot_pose(gen *g, const double *q, int f, double *p, double *R) {
  static bcg_kin k;
  bcg_kinematics(g->m, q, &k);
  for (int d = 0; d < 3; d++) p[d] = k.p[g->foot[f]][d] + k.o[d];
  memcpy(R, k.R[g->foot[f]], 9 * sizeof(double));
}

/* the six leg hinges of foot f so that the foot's origin is at pt and the foot
 * is level (its frame the world's): damped least squares on a finite-difference
 * Jacobian, a hinge at its range's end (0.5 degrees inside) and pushed further
 * held there. wrot weighs the orientation against the position: 1 in stance
 * (both exact), small in swing, where a folded knee can need more than the
 * ankle's 50 degrees to keep the foot level (the position wins, the foot
 * tilts). Returns the remaining position error (m). */
static double leg_ik(gen *g, double *q, int f, const double *pt, double pitch) {
  const double wrot = 1;
  double Rtg[9], ax[3] = {0, pitch, 0};
  bcg_rotvec2mat(Rtg, ax);
  static const int RCH[6] = {RHX, RHZ, RHY, RK, RAY, RAX}, LCH[6] = {LHX, LHZ, LHY, LK, LAY, LAX};
  const int *ch = f ? LCH : RCH;
  const bcg_mdata *m = g->m;
  double perr = 1e30, prev = 1e30;
  for (int it = 0; it < 100; it++) {
    double p[3], R[9], e[6], w[3];
    foot_pose(g, q, f, p, R);
    /* orientation error: rotation from R to the target, world frame: log(Rtg R^T) */
    double Rt[9];
    bcg_m3_mulT(Rt, Rtg, R);
    mat_log(Rt, w);
    for (int d = 0; d < 3; d++) e[d] = pt[d] - p[d], e[3 + d] = wrot * w[d];
    double err = 0;
    for (int d = 0; d < 6; d++) err += e[d] * e[d];
    err = sqrt(err);
    perr = sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2]);
    if (err < 1e-12) break;
    (void)prev;
    double J[6][6];
    for (int j = 0; j < 6; j++) {
      double *x = q + g->chq[ch[j]], x0 = *x, h = 1e-7, p2[3], R2[9], D[9], dw[3];
      *x = x0 + h;
      foot_pose(g, q, f, p2, R2);
      *x = x0;
      bcg_m3_mulT(D, R2, R); /* R2 R^T */
      mat_log(D, dw);
      for (int d = 0; d < 3; d++) J[d][j] = (p2[d] - p[d]) / h, J[3 + d][j] = wrot * dw[d] / h;
    }
    int fixed[6] = {0};
    double dq[6];
    for (int pass = 0; pass < 6; pass++) {
      double A[6][8], b[6];
      for (int r = 0; r < 6; r++) {
        b[r] = 0;
        for (int c2 = 0; c2 < 6; c2++) A[r][c2] = r == c2 ? 1e-9 : 0;
        if (fixed[r]) { A[r][r] = 1; continue; }
        for (int d = 0; d < 6; d++) b[r] += J[d][r] * e[d];
        for (int c2 = 0; c2 < 6; c2++)
          if (!fixed[c2])
            for (int d = 0; d < 6; d++) A[r][c2] += J[d][r] * J[d][c2];
      }
      solve_n(6, A, b);
      int more = 0;
      for (int j = 0; j < 6; j++) {
        int jj = g->chj[ch[j]];
        double x = q[g->chq[ch[j]]], lo = m->jnt_range[jj][0] + 0.5 * DEG, hi = m->jnt_range[jj][1] - 0.5 * DEG;
        dq[j] = b[j];
        if (!fixed[j] && m->jnt_limited[jj] && ((x >= hi - 1e-9 && b[j] > 0) || (x <= lo + 1e-9 && b[j] < 0)))
          fixed[j] = 1, more = 1;
      }
      if (!more) break;
    }
    double mx = 0;
    for (int j = 0; j < 6; j++) mx = fmax(mx, fabs(dq[j]));
    if (mx < 1e-12) break;
    double sc = mx > 0.2 ? 0.2 / mx : 1;
    for (int j = 0; j < 6; j++) {
      int jj = g->chj[ch[j]];
      double *x = q + g->chq[ch[j]], lo = m->jnt_range[jj][0] + 0.5 * DEG, hi = m->jnt_range[jj][1] - 0.5 * DEG;
      *x += sc * dq[j];
      if (m->jnt_limited[jj]) *x = *x < lo ? lo : (*x > hi ? hi : *x);
    }
  }
  return perr;
}

/* centre-of-mass height over one step, s in [0, step] from touchdown: vertical
 * force m A (1 - u^4), u = 2 s / ts - 1, in stance; ballistic in flight */
typedef struct runplan {
  double ts, tf, hs, A, v0, zmid, za, L, w;
  double xi0[2], eta0[2]; /* periodic initial states (x - x_foot, vx), (y - y_foot, vy) at touchdown */
  /* the centroidal angular momentum's rate (from the poses) as horizontal
   * accelerations of a force through the ankle axis, over a right-foot step */
  double ux[RUN_STEP * RUN_LSUB + 1], uy[RUN_STEP * RUN_LSUB + 1];
} runplan;

static void run_z(const runplan *P, double s, double *z, double *vz, double *az) {
  double ts = P->ts, g = G, A = P->A, v0 = P->v0;
  /* height relative to touchdown */
  double zt, vt, at;
  if (s <= ts) {
    double u = 2 * s / ts - 1, h = ts / 2;
    at = -g + A * (1 - pow(u, 4));
    vt = -v0 + h * ((A - g) * (u + 1) - A * (pow(u, 5) + 1) / 5);
    zt = -v0 * s + h * h * ((A - g) * (u + 1) * (u + 1) / 2 - A * ((pow(u, 6) - 1) / 6 + (u + 1)) / 5);
  } else {
    double sf = s - ts, zto = -v0 * ts + (ts / 2) * (ts / 2) * (2 * (A - g) - A * 2.0 / 5);
    at = -g;
    vt = v0 - g * sf;
    zt = zto + v0 * sf - 0.5 * g * sf * sf;
  }
  /* shift so that mid-stance is at zmid */
  double h = ts / 2, um = 0;
  double zm = -v0 * h + h * h * ((A - g) * (um + 1) * (um + 1) / 2 - A * ((pow(um, 6) - 1) / 6 + (um + 1)) / 5);
  *z = P->zmid + zt - zm;
  *vz = vt;
  *az = at;
}

/* x'' = k(s) (x - x_foot) over one step from state st (RK4); in flight k = 0 */
static double run_k(const runplan *P, double s) {
  if (s > P->ts) return 0;
  double z, vz, az;
  run_z(P, s, &z, &vz, &az);
  return (az + G) / (z - P->za);
}
static double run_u(const double *u, double s) {
  if (!u) return 0;
  double x = s * FPS * RUN_LSUB;
  int i = (int)floor(x);
  if (i < 0) return u[0];
  if (i >= RUN_STEP * RUN_LSUB) return u[RUN_STEP * RUN_LSUB];
  return u[i] + (x - i) * (u[i + 1] - u[i]);
}
static void run_integrate_u(const runplan *P, const double *u, double *st, double s0, double s1, int n) {
  double h = (s1 - s0) / n;
  for (int i = 0; i < n; i++) {
    double s = s0 + i * h, x = st[0], v = st[1];
    double k1 = run_k(P, s), k2 = run_k(P, s + h / 2), k4 = run_k(P, s + h);
    double u1 = run_u(u, s), u2 = run_u(u, s + h / 2), u4 = run_u(u, s + h);
    double x1 = v, v1 = k1 * x + u1;
    double x2 = v + h / 2 * v1, v2 = k2 * (x + h / 2 * x1) + u2;
    double x3 = v + h / 2 * v2, v3 = k2 * (x + h / 2 * x2) + u2;
    double x4 = v + h * v3, v4 = k4 * (x + h * x3) + u4;
    st[0] = x + h / 6 * (x1 + 2 * x2 + 2 * x3 + x4);
    st[1] = v + h / 6 * (v1 + 2 * v2 + 2 * v3 + v4);
  }
}
static void run_integrate(const runplan *P, double *st, double s0, double s1, int n) {
  run_integrate_u(P, NULL, st, s0, s1, n);
}



/* the plan at frame fr (any real number; fr = 0 is a right-foot touchdown) */
typedef struct runstate {
  runplan P;
  double xs[RUN_STEP * RUN_SUB + 1][2], ys[RUN_STEP * RUN_SUB + 1][2]; /* horizontal plan over a step */
  double foot_h, cst[3];
  /* swing of each leg (its 6 hinges): angles and rates at take-off and touchdown */
  double a0[2][6], v0[2][6], a1[2][6], v1[2][6];
} runstate;

static const int LEGCH[2][6] = {{RHX, RHZ, RHY, RK, RAY, RAX}, {LHX, LHZ, LHY, LK, LAY, LAX}};

/* swing foot's distance from its footprint, tau after take-off: it speeds up
 * from rest to twice the running speed during the first flight, holds that
 * speed while the other foot is in stance and slows to rest during the second
 * flight. So the swing leg moves forward (relative to the body) as fast as the
 * stance leg moves back, and in flight the legs trade their momentum: the
 * rear one speeds up as the front one slows down, mirror images in time
 * (the body's angular momentum stays nearly constant). */
static double run_swing_x(const runplan *P, double tau) {
  double v = P->L / P->hs, tf = P->tf, ts = P->ts, u;
  if (tau <= tf) return u = tau / tf, 2 * v * tf * (u * u * u - u * u * u * u / 2);
  if (tau <= tf + ts) return v * tf + 2 * v * (tau - tf);
  u = (2 * tf + ts - tau) / tf;
  u = u < 0 ? 0 : u;
  return 2 * P->L - 2 * v * tf * (u * u * u - u * u * u * u / 2);
}

/* plan at frame fr (a real number; fr = 0 is a right-foot touchdown): centre
 * of mass ct; per foot: stance (footprint ft) or swing phase sw in (0, 1) */
static void run_targets(const runstate *S, double fr, double *ct, double ft[2][3], double *sw) {
  const runplan *P = &S->P;
  int step = (int)floor(fr / RUN_STEP + 1e-9), sup = ((step % 2) + 2) % 2;
  double sf = fr - step * RUN_STEP, s = sf / FPS, z, vz, az;
  int si = (int)lround(sf * RUN_SUB);
  si = si < 0 ? 0 : (si > RUN_STEP * RUN_SUB ? RUN_STEP * RUN_SUB : si);
  run_z(P, s, &z, &vz, &az);
  double ysgn = sup ? 1 : -1; /* the right foot at -w */
  ct[0] = step * P->L + S->xs[si][0];
  ct[1] = ysgn * P->w - ysgn * S->ys[si][0];
  ct[2] = z;
  for (int f = 0; f < 2; f++) {
    int j = (sup == f) ? step : step - 1; /* the latest touchdown of this foot */
    double tj = (fr - j * RUN_STEP) / FPS;
    ft[f][0] = j * P->L;
    ft[f][1] = f ? P->w : -P->w;
    ft[f][2] = S->foot_h;
    sw[f] = tj <= P->ts + 1e-9 ? 0 : (tj - P->ts) / (2 * P->hs - P->ts);
    if (sw[f] > 0) { /* swing: the ankle point's path (footprint + ankle height) */
      double s2 = sw[f];
      ft[f][0] += run_swing_x(P, tj - P->ts);
      ft[f][2] = P->za + RUN_LIFT * 16 * s2 * s2 * (1 - s2) * (1 - s2);
    }
  }
}

/* the ankle_y axis point of leg f (world): fixed in the shin, 0.31 m below its origin */
static void ankle_point(gen *g, const double *q, int f, double *p) {
  static bcg_kin k;
  static const double loc[3] = {0, 0, -0.31};
  bcg_kinematics(g->m, q, &k);
  int b = g->shin[f];
  bcg_m3_mulv(p, k.R[b], loc);
  for (int d = 0; d < 3; d++) p[d] += k.p[b][d] + k.o[d];
}

/* swing leg: hip_x, hip_y, knee so that the ankle point is at pt (Newton) */
static double swing_ik(gen *g, double *q, int f, const double *pt) {
  const int ch[3] = {LEGCH[f][0], LEGCH[f][2], LEGCH[f][3]};
  const bcg_mdata *m = g->m;
  double err = 1e30;
  if (q[g->chq[ch[2]]] > -10 * DEG) q[g->chq[ch[2]]] = -10 * DEG; /* start on the knee-forward branch */
  for (int it = 0; it < 50; it++) {
    double p[3], e[3], J[3][8];
    ankle_point(g, q, f, p);
    for (int d = 0; d < 3; d++) e[d] = pt[d] - p[d];
    err = sqrt(bcg_v3_dot(e, e));
    if (err < 1e-12) break;
    for (int j = 0; j < 3; j++) {
      double *x = q + g->chq[ch[j]], x0 = *x, h = 1e-7, p2[3];
      *x = x0 + h;
      ankle_point(g, q, f, p2);
      *x = x0;
      for (int d = 0; d < 3; d++) J[d][j] = (p2[d] - p[d]) / h;
    }
    solve_n(3, J, e);
    double mx = fmax(fabs(e[0]), fmax(fabs(e[1]), fabs(e[2]))), sc = mx > 0.2 ? 0.2 / mx : 1;
    for (int j = 0; j < 3; j++) {
      int jj = g->chj[ch[j]];
      double *x = q + g->chq[ch[j]], lo = m->jnt_range[jj][0] + 0.5 * DEG, hi = m->jnt_range[jj][1] - 0.5 * DEG;
      *x += sc * e[j];
      if (m->jnt_limited[jj]) *x = *x < lo ? lo : (*x > hi ? hi : *x);
    }
  }
  return err;
}

/* swing foot: ankle_y, ankle_x so that the foot is level (pitch and roll;
 * yaw follows), each held inside its range */
static void swing_level(gen *g, double *q, int f) {
  const int ch[2] = {LEGCH[f][4], LEGCH[f][5]};
  const bcg_mdata *m = g->m;
  for (int it = 0; it < 30; it++) {
    double p[3], R[9], Rt[9], w[3], J[2][8], e[2];
    foot_pose(g, q, f, p, R);
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) Rt[3 * i + j] = R[3 * j + i];
    mat_log(Rt, w);
    e[0] = w[0], e[1] = w[1];
    if (fabs(e[0]) + fabs(e[1]) < 1e-12) break;
    for (int j = 0; j < 2; j++) {
      double *x = q + g->chq[ch[j]], x0 = *x, h = 1e-7, p2[3], R2[9], D[9], dw[3];
      *x = x0 + h;
      foot_pose(g, q, f, p2, R2);
      *x = x0;
      bcg_m3_mulT(D, R2, R);
      mat_log(D, dw);
      J[0][j] = dw[0] / h, J[1][j] = dw[1] / h;
    }
    solve_n(2, J, e);
    int stuck = 1;
    for (int j = 0; j < 2; j++) {
      int jj = g->chj[ch[j]];
      double *x = q + g->chq[ch[j]], lo = m->jnt_range[jj][0] + 0.5 * DEG, hi = m->jnt_range[jj][1] - 0.5 * DEG, x0 = *x;
      *x += e[j];
      if (m->jnt_limited[jj]) *x = *x < lo ? lo : (*x > hi ? hi : *x);
      if (fabs(*x - x0) > 1e-13) stuck = 0;
    }
    if (stuck) break;
  }
}

/* qpos at frame fr; q holds a nearby solution (the stance IK's start).
 * Returns the stance feet's distance from their footprints. */
static double run_pose(gen *g, const runstate *S, double fr, double *q) {
  const bcg_mdata *m = g->m;
  double ct[3], ft[2][3], sw[2], v[NCH] = {0};
  run_targets(S, fr, ct, ft, sw);
  double ph = 2 * M_PI * fr / (2 * RUN_STEP);
  v[PITCH] = RUN_PITCH;
  double a = RUN_ARM * sin(ph);
  v[RS1] = a, v[RS2] = -10 - a, v[RE] = -20;
  v[LS1] = -a, v[LS2] = -10 + a, v[LE] = -20;
  double keep[BCG_MAX_DOF + 8];
  memcpy(keep, q, sizeof(double) * m->nq);
  pose_q(g, v, q);
  for (int f = 0; f < 2; f++) {
    const double Tsw = 2 * S->P.hs - S->P.ts;
    double s = sw[f];
    double h00 = 2 * s * s * s - 3 * s * s + 1, h10 = s * s * s - 2 * s * s + s, h01 = -2 * s * s * s + 3 * s * s,
           h11 = s * s * s - s * s;
    for (int l = 0; l < 6; l++) {
      double *x = q + g->chq[LEGCH[f][l]];
      if (s == 0 || l != 1) { *x = keep[g->chq[LEGCH[f][l]]]; continue; }
      *x = h00 * S->a0[f][l] + h10 * Tsw * S->v0[f][l] + h01 * S->a1[f][l] + h11 * Tsw * S->v1[f][l];
    }
  }
  for (int d = 0; d < 3; d++) q[d] = keep[d];
  double ierr = 0;
  for (int it = 0; it < 100; it++) {
    double cm[3], dd = 0;
    com_of(g, q, cm);
    for (int d = 0; d < 3; d++) q[d] += ct[d] - cm[d], dd += fabs(ct[d] - cm[d]);
    if (it > 0 && dd < 1e-12) break;
    for (int f = 0; f < 2; f++)
      if (sw[f] == 0) leg_ik(g, q, f, ft[f], 0);
      else swing_ik(g, q, f, ft[f]), swing_level(g, q, f);
  }
  ierr = 0;
  for (int f = 0; f < 2; f++)
    if (sw[f] == 0) ierr = fmax(ierr, leg_ik(g, q, f, ft[f], 0));
  return ierr;
}

/* swing boundaries from the stance solutions: foot f's take-off at frame
 * 7 (+10 for the left) and its next touchdown 2 steps later */
static void run_swing_ends(gen *g, runstate *S, double *qstart) {
  const int nq = g->m->nq;
  const double eps = 1e-3;
  double q[BCG_MAX_DOF + 8], qa[BCG_MAX_DOF + 8];
  runstate *T = S;
  double a0[2][6], v0[2][6], a1[2][6], v1[2][6];
  for (int f = 0; f < 2; f++) {
    double td = f * RUN_STEP, to = td + RUN_STANCE;
    memcpy(q, qstart, sizeof(double) * nq);
    for (int l = 0; l < 6; l++) q[g->chq[LEGCH[f][l]]] = S->a1[f][l];
    /* stance from touchdown to take-off, tracking the IK solution */
    for (double fr = td; fr <= to - 1 + 1e-9; fr += 1) run_pose(g, T, fr, q);
    run_pose(g, T, to - eps, q);
    memcpy(qa, q, sizeof(double) * nq);
    run_pose(g, T, to, q);
    for (int l = 0; l < 6; l++) {
      int a = g->chq[LEGCH[f][l]];
      a0[f][l] = q[a], v0[f][l] = (q[a] - qa[a]) / (eps / FPS);
    }
    memcpy(q, qstart, sizeof(double) * nq);
    for (int l = 0; l < 6; l++) q[g->chq[LEGCH[f][l]]] = S->a1[f][l];
    run_pose(g, T, td, q);
    memcpy(qa, q, sizeof(double) * nq);
    run_pose(g, T, td + eps, q);
    for (int l = 0; l < 6; l++) {
      int a = g->chq[LEGCH[f][l]];
      a1[f][l] = qa[a], v1[f][l] = (q[a] - qa[a]) / (eps / FPS);
    }
  }
  memcpy(S->a0, a0, sizeof a0);
  memcpy(S->v0, v0, sizeof v0);
  memcpy(S->a1, a1, sizeof a1);
  memcpy(S->v1, v1, sizeof v1);
}

/* centroidal angular momentum (world axes, about the centre of mass) at qb
 * from the poses qa, qc a time h before and after */
static void run_momentum(gen *g, const double *qa, const double *qb, const double *qc, double h, double *L) {
  const bcg_mdata *m = g->m;
  static bcg_kin ka, kb, kc;
  bcg_kinematics(m, qa, &ka);
  bcg_kinematics(m, qb, &kb);
  bcg_kinematics(m, qc, &kc);
  double M = 0, c[3] = {0, 0, 0}, vc[3] = {0, 0, 0};
  for (int b = 1; b < m->nbody; b++) {
    M += m->body_mass[b];
    for (int d = 0; d < 3; d++)
      c[d] += m->body_mass[b] * (kb.com[b][d] + kb.o[d]),
          vc[d] += m->body_mass[b] * ((kc.com[b][d] + kc.o[d]) - (ka.com[b][d] + ka.o[d])) / (2 * h);
  }
  for (int d = 0; d < 3; d++) c[d] /= M, vc[d] /= M, L[d] = 0;
  for (int b = 1; b < m->nbody; b++) {
    double r[3], vb[3], D[9], w[3], Iw[3];
    for (int d = 0; d < 3; d++)
      r[d] = kb.com[b][d] + kb.o[d] - c[d],
      vb[d] = ((kc.com[b][d] + kc.o[d]) - (ka.com[b][d] + ka.o[d])) / (2 * h) - vc[d];
    bcg_m3_mulT(D, kc.R[b], ka.R[b]);
    mat_log(D, w);
    for (int d = 0; d < 3; d++) w[d] /= 2 * h;
    bcg_m3_mulv(Iw, kb.Ic[b], w);
    double x[3];
    bcg_v3_cross(x, r, vb);
    for (int d = 0; d < 3; d++) L[d] += m->body_mass[b] * x[d] + Iw[d];
  }
}

/* the horizontal plan for the height P->zmid: periodic solutions of
 * x'' = k (x - x_ankle) (k = (z'' + g) / (z - z_ankle) in stance, 0 in flight) */
static void run_plan(runstate *SS) {
  runstate *S2 = SS;
  runplan *P = &S2->P;
  /* periodic states: x: Phi s0 + p = s0 + (L, 0); y: Phi s0 + p = -s0 + (2w, 0) */
  double Phi[2][2], px[2] = {0, 0}, py[2] = {0, 0};
  for (int j = 0; j < 2; j++) {
    double st[2] = {j == 0, j == 1};
    run_integrate(P, st, 0, P->hs, RUN_STEP * RUN_SUB);
    Phi[0][j] = st[0];
    Phi[1][j] = st[1];
  }
  run_integrate_u(P, P->ux, px, 0, P->hs, RUN_STEP * RUN_SUB);
  run_integrate_u(P, P->uy, py, 0, P->hs, RUN_STEP * RUN_SUB);
  {
    double A[2][8] = {{Phi[0][0] - 1, Phi[0][1]}, {Phi[1][0], Phi[1][1] - 1}}, b[2] = {P->L - px[0], -px[1]};
    solve_n(2, A, b);
    P->xi0[0] = b[0], P->xi0[1] = b[1];
    double B[2][8] = {{Phi[0][0] + 1, Phi[0][1]}, {Phi[1][0], Phi[1][1] + 1}}, b2[2] = {2 * P->w - py[0], -py[1]};
    solve_n(2, B, b2);
    P->eta0[0] = b2[0], P->eta0[1] = b2[1];
  }
  {
    double sx[2] = {P->xi0[0], P->xi0[1]}, sy[2] = {P->eta0[0], P->eta0[1]};
    for (int i = 0; i <= RUN_STEP * RUN_SUB; i++) {
      S2->xs[i][0] = sx[0], S2->xs[i][1] = sx[1], S2->ys[i][0] = sy[0], S2->ys[i][1] = sy[1];
      run_integrate_u(P, P->ux, sx, i / (FPS * RUN_SUB), (i + 1) / (FPS * RUN_SUB), 1);
      run_integrate_u(P, P->uy, sy, i / (FPS * RUN_SUB), (i + 1) / (FPS * RUN_SUB), 1);
    }
  }
}

static double *make_run(gen *g, const clip *c, int *nframes) {
  const bcg_mdata *m = g->m;
  int n = (int)lround(c->seconds * FPS) + 1, nq = m->nq;
  double *Q = calloc((size_t)n * nq, sizeof(double));
  static runstate S;
  runplan *P = &S.P;
  P->hs = RUN_STEP / FPS;
  P->ts = RUN_STANCE / FPS;
  P->tf = P->hs - P->ts;
  P->v0 = G * P->tf / 2;
  P->A = G * P->hs / (0.8 * P->ts);
  P->L = RUN_SPEED * P->hs;
  P->w = RUN_WIDTH;
  /* standing pose: centre-of-mass height, the foot origin's height */
  double q0[BCG_MAX_DOF + 8], fz[2], fxy[2][2], v[NCH] = {0};
  pose_q(g, v, q0);
  q0[2] = -lowest(g, q0, fz, fxy);
  com_of(g, q0, S.cst);
  double pf[3], Rf[9];
  foot_pose(g, q0, 0, pf, Rf);
  S.foot_h = pf[2];          /* foot origin above the floor when level */
  P->za = S.foot_h + 0.08;   /* ankle_y axis (humanoid.xml: pos 0 0 .08 in the foot) */
  /* the height: as high as the legs reach with the stance knee bent at least
   * RUN_KNEE_TD degrees at touchdown and take-off (bisection) */
  double qg[BCG_MAX_DOF + 8];
  v[PITCH] = RUN_PITCH;
  v[RHY] = v[LHY] = -20;
  v[RK] = v[LK] = -40;
  pose_q(g, v, qg);
  qg[2] = q0[2] - 0.1;
  double zlo = S.cst[2] - 0.25, zhi = S.cst[2];
  for (int bis = 0; bis < 14; bis++) {
    P->zmid = bis == 13 ? zlo : 0.5 * (zlo + zhi);
    run_plan(&S);
    for (int f = 0; f < 2; f++)
      for (int l = 0; l < 6; l++) S.a0[f][l] = S.a1[f][l] = qg[g->chq[LEGCH[f][l]]], S.v0[f][l] = S.v1[f][l] = 0;
    for (int it = 0; it < 4; it++) run_swing_ends(g, &S, qg);
    double kmax = -1e9;
    for (int f = 0; f < 2; f++) kmax = fmax(kmax, fmax(S.a0[f][3], S.a1[f][3]));
    if (bis < 13) {
      if (kmax > -RUN_KNEE_TD * DEG) zhi = P->zmid;
      else zlo = P->zmid;
    }
  }
  for (int it = 0; it < 2; it++) run_swing_ends(g, &S, qg);
  /* angular momentum: the centroidal angular momentum of the poses changes;
   * in stance the floor supplies its rate through the horizontal force (the
   * force through the ankle axis, tilted): repeat plan -> poses -> rate */
  {
    const int NS = RUN_STRIDE_SAMPLES;
    const double h = 1.0 / (FPS * RUN_LSUB);
    double (*qs)[BCG_MAX_DOF + 8] = calloc(NS + 2, sizeof *qs), L[RUN_STRIDE_SAMPLES][3];
    for (int it = 0; it <= RUN_ITER; it++) {
      memcpy(qs[0], qg, sizeof(double) * nq);
      for (int wu = 0; wu < 2; wu++) /* warm up the IK start */
        for (int j = -1; j <= NS; j++) {
          double *qq = qs[j + 1];
          if (j >= 0) memcpy(qq, qs[j], sizeof(double) * nq);
          run_pose(g, &S, (double)j / RUN_LSUB, qq);
        }
      double Lm[3] = {0, 0, 0}, mx[3] = {0, 0, 0};
      for (int j = 0; j < NS; j++) {
        run_momentum(g, qs[j], qs[j + 1], qs[j + 2], h, L[j]);
        for (int d = 0; d < 3; d++) Lm[d] += L[j][d] / NS;
      }
      for (int j = 0; j < NS; j++)
        for (int d = 0; d < 3; d++) {
          mx[d] = fmax(mx[d], fabs(L[j][d] - Lm[d]));
        }
      if (it == RUN_ITER) {
        printf("run    plan: %.2f m/s, stride %.3f s, stance %.3f s, flight %.3f s, peak vertical force %.2f m g, "
               "centre of mass %.3f m at mid-stance (%.3f standing); angular momentum: |L - mean| <= %.2f %.2f %.2f kg m^2/s\n",
               RUN_SPEED, 2 * P->hs, P->ts, P->tf, P->A / G, P->zmid, S.cst[2], mx[0], mx[1], mx[2]);
        break;
      }
      /* the angular momentum's rate as a horizontal push through the ankle
       * in stance (step-periodic: the two steps averaged, mirrored in y) */
      double M = 0;
      for (int b = 1; b < m->nbody; b++) M += m->body_mass[b];
      const int HS = RUN_STEP * RUN_LSUB;
      for (int j = 0; j <= HS; j++) {
        double s = (double)j / (FPS * RUN_LSUB), z, vz, az, Ld[2][3];
        run_z(P, s, &z, &vz, &az);
        for (int st = 0; st < 2; st++) {
          int a = (j + st * HS) % NS;
          for (int d = 0; d < 3; d++) Ld[st][d] = (L[(a + 1) % NS][d] - L[(a + NS - 1) % NS][d]) / (2 * h);
        }
        double hh = z - P->za, on = s <= P->ts + 1e-9 ? 1 : 0;
        double nux = -0.5 * (Ld[0][1] + Ld[1][1]) / (M * hh) * on, nuy = 0.5 * (Ld[0][0] - Ld[1][0]) / (M * hh) * on;
        P->ux[j] = 0.3 * P->ux[j] + 0.7 * nux;
        P->uy[j] = 0.3 * P->uy[j] + 0.7 * nuy;
      }
      run_plan(&S);
      for (int k2 = 0; k2 < 2; k2++) run_swing_ends(g, &S, qg);
    }
    free(qs);
  }
  /* the frames: the clip starts RUN_OFF frames into a right-foot step */
  double x00 = 0, worst = 0;
  for (int i = 0; i < n; i++) {
    double *q = Q + (size_t)i * nq;
    int fr = i + RUN_OFF;
    memcpy(q, qg, sizeof(double) * nq);
    double ierr = run_pose(g, &S, fr, q);
    worst = fmax(worst, ierr);
    memcpy(qg, q, sizeof(double) * nq);
    if (i == 0) {
      double ct[3], ft[2][3], sw[2];
      run_targets(&S, fr, ct, ft, sw);
      x00 = ct[0];
    }
  }
  if (worst > 1e-6) fprintf(stderr, "run: a stance foot is %.2e m off its footprint (out of reach)\n", worst);
  for (int i = 0; i < n; i++) Q[(size_t)i * nq] -= x00;
  *nframes = n;
  return Q;
}

/* ---- PNG strip --------------------------------------------------------------------- */

static void put_u32(unsigned char *p, uint32_t v) {
  p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}
static void png_chunk(FILE *f, const char *type, const unsigned char *data, uint32_t len) {
  unsigned char h[8];
  put_u32(h, len);
  memcpy(h + 4, type, 4);
  fwrite(h, 1, 8, f);
  if (len) fwrite(data, 1, len, f);
  uLong crc = crc32(0, (const Bytef *)type, 4);
  if (len) crc = crc32(crc, data, len);
  unsigned char cb[4];
  put_u32(cb, (uint32_t)crc);
  fwrite(cb, 1, 4, f);
}
static int png_write(const char *path, const unsigned char *rgb, int w, int h) {
  size_t raw_len = (size_t)h * (3 * w + 1);
  unsigned char *raw = malloc(raw_len);
  for (int y = 0; y < h; y++) {
    raw[(size_t)y * (3 * w + 1)] = 0;
    memcpy(raw + (size_t)y * (3 * w + 1) + 1, rgb + (size_t)y * 3 * w, 3 * w);
  }
  uLongf zl = compressBound(raw_len);
  unsigned char *z = malloc(zl);
  compress2(z, &zl, raw, raw_len, 9);
  FILE *f = fopen(path, "wb");
  if (!f) return free(raw), free(z), -1;
  static const unsigned char sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
  fwrite(sig, 1, 8, f);
  unsigned char ih[13];
  put_u32(ih, w);
  put_u32(ih + 4, h);
  ih[8] = 8; ih[9] = 2; ih[10] = 0; ih[11] = 0; ih[12] = 0;
  png_chunk(f, "IHDR", ih, 13);
  png_chunk(f, "IDAT", z, (uint32_t)zl);
  png_chunk(f, "IEND", NULL, 0);
  fclose(f);
  free(raw);
  free(z);
  return 0;
}

/* filled capsule from (x0,y0) to (x1,y1), radius r, in pixels */
static void draw_capsule(unsigned char *img, int W, int H, double x0, double y0, double x1, double y1, double r,
                         const unsigned char *col) {
  int xa = (int)floor(fmin(x0, x1) - r - 1), xb = (int)ceil(fmax(x0, x1) + r + 1);
  int ya = (int)floor(fmin(y0, y1) - r - 1), yb = (int)ceil(fmax(y0, y1) + r + 1);
  double dx = x1 - x0, dy = y1 - y0, L2 = dx * dx + dy * dy;
  for (int y = ya < 0 ? 0 : ya; y <= yb && y < H; y++)
    for (int x = xa < 0 ? 0 : xa; x <= xb && x < W; x++) {
      double s = L2 > 0 ? ((x - x0) * dx + (y - y0) * dy) / L2 : 0;
      s = s < 0 ? 0 : (s > 1 ? 1 : s);
      double ex = x - (x0 + s * dx), ey = y - (y0 + s * dy), d = sqrt(ex * ex + ey * ey);
      if (d <= r) {
        double shade = d > r - 1.2 ? 0.55 : 1.0; /* dark outline */
        for (int c = 0; c < 3; c++) img[3 * ((size_t)y * W + x) + c] = (unsigned char)(col[c] * shade);
      }
    }
}

static int render_strip(gen *g, const double *Q, int n, const char *path) {
  const bcg_mdata *m = g->m;
  int panels = 10, PW = 180, PH = 240, W = panels * PW, H = PH;
  double scale = 100, floor_px = PH - 20;
  unsigned char *img = malloc((size_t)W * H * 3);
  for (size_t i = 0; i < (size_t)W * H; i++) img[3 * i] = 245, img[3 * i + 1] = 245, img[3 * i + 2] = 240;
  static bcg_kin k;
  for (int pnl = 0; pnl < panels; pnl++) {
    int fi = (int)lround((double)pnl * (n - 1) / (panels - 1));
    const double *q = Q + (size_t)fi * m->nq;
    bcg_kinematics(m, q, &k);
    double cx = pnl * PW + PW / 2.0, rootx = q[0];
    /* floor and panel separator */
    for (int x = pnl * PW; x < (pnl + 1) * PW; x++)
      for (int y = (int)floor_px; y < H; y++) {
        unsigned char *p = img + 3 * ((size_t)y * W + x);
        p[0] = 200; p[1] = 205; p[2] = 215;
      }
    for (int y = 0; y < H; y++) {
      unsigned char *p = img + 3 * ((size_t)y * W + pnl * PW);
      p[0] = p[1] = p[2] = 160;
    }
    /* geoms far side (larger y) first */
    int order[BCG_MAX_CP], ng = 0;
    double depth[BCG_MAX_CP];
    for (int i = 0; i < m->ncp; i++) {
      if (i > 0 && m->cp_geom[i] == m->cp_geom[i - 1]) continue;
      double pc[3];
      bcg_m3_mulv(pc, k.R[m->cp_body[i]], m->cp_pos[i]);
      bcg_v3_addto(pc, k.p[m->cp_body[i]]);
      order[ng] = i;
      depth[ng++] = pc[1] + k.o[1];
    }
    for (int a = 0; a < ng; a++)
      for (int b = a + 1; b < ng; b++)
        if (depth[b] > depth[a]) {
          double t = depth[a]; depth[a] = depth[b]; depth[b] = t;
          int u = order[a]; order[a] = order[b]; order[b] = u;
        }
    for (int a = 0; a < ng; a++) {
      int i = order[a], i2 = (i + 1 < m->ncp && m->cp_geom[i + 1] == m->cp_geom[i]) ? i + 1 : i;
      double p0[3], p1[3];
      bcg_m3_mulv(p0, k.R[m->cp_body[i]], m->cp_pos[i]);
      bcg_v3_addto(p0, k.p[m->cp_body[i]]);
      bcg_m3_mulv(p1, k.R[m->cp_body[i2]], m->cp_pos[i2]);
      bcg_v3_addto(p1, k.p[m->cp_body[i2]]);
      double far = depth[a] - q[1];
      double sh = far > 0.02 ? 0.75 : 1.0;
      const char *bn = g->model->body_name[m->cp_body[i]];
      unsigned char col[3] = {(unsigned char)(215 * sh), (unsigned char)(150 * sh), (unsigned char)(95 * sh)};
      if (strncmp(bn, "left", 4) == 0) col[0] = (unsigned char)(110 * sh), col[1] = (unsigned char)(150 * sh),
                                       col[2] = (unsigned char)(210 * sh);
      draw_capsule(img, W, H, cx + (p0[0] + k.o[0] - rootx) * scale, floor_px - (p0[2] + k.o[2]) * scale,
                   cx + (p1[0] + k.o[0] - rootx) * scale, floor_px - (p1[2] + k.o[2]) * scale,
                   m->cp_radius[i] * scale, col);
    }
  }
  int rc = png_write(path, img, W, H);
  free(img);
  return rc;
}

/* ---- main ------------------------------------------------------------------------------ */

int main(int argc, char **argv) {
  const char *mpath = argc > 1 ? argv[1] : "/usr/share/mujoco/model/humanoid/humanoid.xml";
  const char *out = argc > 2 ? argv[2] : "models/motions";
  char err[1024];
  bcg_model *model = bcg_model_load(mpath, err, sizeof err);
  if (!model) return fprintf(stderr, "motiongen: %s\n", err), 1;
  gen g = {model, &model->m, {0}, {0}, {0}, {0}, 0};
  const bcg_mdata *m = g.m;
  for (int c = AZ; c < NCH; c++) {
    int j = -1;
    for (int i = 0; i < m->njnt; i++)
      if (strcmp(model->jnt_name[i], CH_JOINT[c]) == 0) j = i;
    if (j < 0) return fprintf(stderr, "motiongen: %s has no joint '%s' (humanoid.xml expected)\n", mpath, CH_JOINT[c]), 1;
    g.chj[c] = j;
    g.chq[c] = m->jnt_qposadr[j];
  }
  g.foot[0] = bcg_model_body_id(model, "right_foot");
  g.foot[1] = bcg_model_body_id(model, "left_foot");
  g.shin[0] = bcg_model_body_id(model, "right_shin");
  g.shin[1] = bcg_model_body_id(model, "left_shin");
  if (g.foot[0] < 0 || g.foot[1] < 0 || !bcg_has_free_root(m))
    return fprintf(stderr, "motiongen: %s: needs a free root and right_foot/left_foot bodies\n", mpath), 1;
  for (int ci = 0; ci < NCLIPS; ci++) {
    const clip *c = &CLIPS[ci];
    int n, want = argc <= 3;
    for (int a = 3; a < argc; a++) want |= strcmp(argv[a], c->name) == 0;
    if (!want) continue;
    g.clamped = 0;
    double *Q = c->make ? c->make(&g, c, &n) : make_clip(&g, c, &n);
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.csv", out, c->name);
    FILE *f = fopen(path, "w");
    if (!f) return fprintf(stderr, "motiongen: cannot write %s\n", path), 1;
    fprintf(f, "# fps=%g quat=wxyz model=humanoid.xml clip=%s frames=%d\n", FPS, c->name, n);
    fprintf(f, "# %s. Generated by tools/motiongen.c (make motions); do not edit by hand.\n", c->about);
    fprintf(f, "# columns: qpos in MuJoCo's order (root x y z, root quaternion w x y z, 21 hinges, rad)\n");
    fprintf(f, "root_x,root_y,root_z,root_qw,root_qx,root_qy,root_qz");
    for (int j = 1; j < m->njnt; j++) fprintf(f, ",%s", model->jnt_name[j]);
    fprintf(f, "\n");
    double minclear = 1e30, maxflight = 0;
    for (int i = 0; i < n; i++) {
      const double *q = Q + (size_t)i * m->nq;
      for (int d = 0; d < m->nq; d++) fprintf(f, d ? ",%.6f" : "%.6f", q[d]);
      fprintf(f, "\n");
      double fz[2], fxy[2][2], lo = lowest(&g, q, fz, fxy);
      if (lo < minclear) minclear = lo;
      if (lo > maxflight) maxflight = lo;
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/%s.png", out, c->name);
    render_strip(&g, Q, n, path);
    const double *qe = Q + (size_t)(n - 1) * m->nq;
    printf("%-6s %4d frames  lowest point %+.4f m  highest flight %.3f m  clamped %d  travel (%.2f, %.2f) m\n",
           c->name, n, minclear, maxflight, g.clamped, qe[0], qe[1]);
    free(Q);
  }
  bcg_model_free(model);
  return 0;
}
