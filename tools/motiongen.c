/* tools/motiongen.c - the reference motions shipped in models/motions/
 * (run, jump, fight, dance for MuJoCo's humanoid.xml), generated from the
 * keyframe tables and gait functions below with libbcg's kinematics.
 *
 *   make motions        (builds this tool and writes the CSV and PNG files of models/motions)
 *   build/motiongen [MODEL] [OUTDIR]
 *
 * What makes a clip physically consistent:
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

typedef struct clip {
  const char *name, *about;
  double seconds;
  void (*pose)(double t, double *v);
  int nflight;
  double flight[16][2];
} clip;

/* run: 8 s, stride period 0.66 s; legs in antiphase, arms counter-swing,
 * torso leaning forward */
static void pose_run(double t, double *v) {
  double T = 0.66, w = 2 * M_PI / T, ramp = t < 1.0 ? 0.5 - 0.5 * cos(M_PI * t) : 1.0;
  for (int side = 0; side < 2; side++) {
    double ph = w * t + side * M_PI, sw = sin(ph), c = cos(ph);
    int hy = side ? LHY : RHY, k = side ? LK : RK, ay = side ? LAY : RAY, hx = side ? LHX : RHX;
    v[hy] = ramp * (-30 * sw) - 25 * ramp;               /* thigh swing about a flexed mean */
    v[k] = -(20 + ramp * 55 * (0.5 + 0.5 * c)) ;         /* knee folds when the leg swings forward */
    v[ay] = ramp * 10 * sw;
    v[hx] = -3;
    int s1 = side ? LS1 : RS1, s2 = side ? LS2 : RS2, e = side ? LE : RE;
    v[s1] = 20 * ramp * sw;                              /* arm swings opposite to its leg */
    v[s2] = -10 - 20 * ramp * sw;
    v[e] = -15 * ramp;                                   /* elbow bent ~90 degrees (0: the model's bent default) */
  }
  v[PITCH] = 12 * ramp;
  v[AZ] = 6 * ramp * sin(w * t);
  v[AY] = -5 * ramp;
}

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

static clip CLIPS[] = {
    {"stand", "the default standing pose held still, 10 s", 10.0, pose_stand, 0, {{0}}},
    {"walk", "gentle walk, about 1 m/s, 10 s, stride 1.0 s, stance foot pinned", 10.0, pose_walk, 0, {{0}}},
    {"run", "running gait, 8 s, stride 0.66 s, stance foot pinned", 8.0, pose_run, 0, {{0}}},
    {"jump", "5 vertical jumps, 8 s, flight 0.42 s each", 8.0, pose_jump, 5,
     {{0.62, 1.04}, {2.22, 2.64}, {3.82, 4.24}, {5.42, 5.84}, {7.02, 7.44}}},
    {"fight", "guard, weight shifts, jab, cross, front kicks, 10 s", 10.0, pose_fight, 0, {{0}}},
    {"dance", "stepping in place with arm waves and two full turns, 10 s", 10.0, pose_dance, 0, {{0}}},
};
#define NCLIPS ((int)(sizeof CLIPS / sizeof CLIPS[0]))

/* ---- generation ------------------------------------------------------------------ */

typedef struct gen {
  const bcg_model *model;
  const bcg_mdata *m;
  int chq[NCH]; /* qpos address of each joint channel */
  int chj[NCH];
  int foot[2];  /* right_foot, left_foot bodies */
  int clamped;
} gen;

static void euler_quat(double yaw, double pitch, double roll, double *q) {
  double a[3] = {0, 0, yaw}, b[3] = {0, pitch, 0}, c[3] = {roll, 0, 0}, qa[4], qb[4], qc[4], t[4];
  quat_exp(qa, a);
  quat_exp(qb, b);
  quat_exp(qc, c);
  quat_mul(t, qa, qb);
  quat_mul(q, t, qc);
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
      m3_mulv(pc, k.R[m->cp_body[i]], m->cp_pos[i]);
      v3_addto(pc, k.p[m->cp_body[i]]);
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
      m3_mulv(p0, k.R[m->cp_body[i]], m->cp_pos[i]);
      v3_addto(p0, k.p[m->cp_body[i]]);
      m3_mulv(p1, k.R[m->cp_body[i2]], m->cp_pos[i2]);
      v3_addto(p1, k.p[m->cp_body[i2]]);
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
  gen g = {model, &model->m, {0}, {0}, {0}, 0};
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
  if (g.foot[0] < 0 || g.foot[1] < 0 || !bcg_has_free_root(m))
    return fprintf(stderr, "motiongen: %s: needs a free root and right_foot/left_foot bodies\n", mpath), 1;
  for (int ci = 0; ci < NCLIPS; ci++) {
    const clip *c = &CLIPS[ci];
    int n;
    g.clamped = 0;
    double *Q = make_clip(&g, c, &n);
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
