/* core/feasibility.c - dynamic feasibility of a reference motion: MuJoCo's
 * inverse dynamics of the clip, a friction-cone fit of the contact forces,
 * the actuator torques and the root's residual wrench (see
 * bcg/feasibility.h; docs/feasibility.md for how to read the results). */
#include "bcg/feasibility.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/dyn.h"
#include "bcg/mjref.h"
#include "bcg/sim.h"
#include "bcg/step.h"

#define NEDGE 8            /* edges of the friction pyramid (inscribed in the cone) */
#define LOADED_FRAC 0.02   /* a contact point carrying more than this * m g counts as loaded (slip) */
#define SLIP_TOL 0.1       /* m/s: a loaded contact point moving faster along the floor skates */

void bcg_feas_opts_default(bcg_feas_opts *o) {
  memset(o, 0, sizeof *o);
  o->window = 7;
  o->contact = BCG_FEAS_FIT;
  o->contact_tol = 0.005;
  o->residual_tol = 0.05;
  o->arm_tol = 0.02;
}

void bcg_feas_result_free(bcg_feas_result *res) {
  if (!res) return;
  free(res->tau);
  free(res->res);
  free(res->fcontact);
  free(res->gap);
  res->tau = res->res = res->fcontact = res->gap = NULL;
}

/* ---- least squares ---------------------------------------------------------- */

/* min ||A z - b|| by Householder QR; A is m x k column-major and b has m rows,
 * both overwritten. Returns -1 when A is (numerically) rank deficient. */
static int lsq(double *A, int m, int k, double *b, double *z, double *diag) {
  double dmax = 0;
  for (int j = 0; j < k; j++) {
    double *a = A + (size_t)j * m, nrm = 0;
    for (int i = j; i < m; i++) nrm += a[i] * a[i];
    nrm = sqrt(nrm);
    if (!(nrm > 0)) return -1;
    const double alpha = a[j] > 0 ? -nrm : nrm;
    a[j] -= alpha;
    double vv = 0;
    for (int i = j; i < m; i++) vv += a[i] * a[i];
    if (vv > 0) {
      for (int c = j + 1; c < k; c++) {
        double *ac = A + (size_t)c * m, s = 0;
        for (int i = j; i < m; i++) s += a[i] * ac[i];
        s *= 2 / vv;
        for (int i = j; i < m; i++) ac[i] -= s * a[i];
      }
      double s = 0;
      for (int i = j; i < m; i++) s += a[i] * b[i];
      s *= 2 / vv;
      for (int i = j; i < m; i++) b[i] -= s * a[i];
    }
    diag[j] = alpha;
    if (fabs(alpha) > dmax) dmax = fabs(alpha);
  }
  for (int j = 0; j < k; j++)
    if (fabs(diag[j]) < 1e-13 * dmax) return -1;
  for (int j = k - 1; j >= 0; j--) {
    double s = b[j];
    for (int c = j + 1; c < k; c++) s -= A[(size_t)c * m + j] * z[c];
    z[j] = s / diag[j];
  }
  return 0;
}

/* min ||A x - b||, x >= 0 (Lawson and Hanson's active-set NNLS). A is m x n
 * column-major. Returns 0, or -1 when out of memory or not converged. */
static int nnls(const double *A, int m, int n, const double *b, double *x) {
  double *Ap = malloc(sizeof(double) * ((size_t)m * n + 2 * (size_t)m + 4 * (size_t)n));
  int *inP = calloc((size_t)n, sizeof(int)), *skip = calloc((size_t)n, sizeof(int)), *idx = malloc(sizeof(int) * n);
  if (!Ap || !inP || !skip || !idx) {
    free(Ap), free(inP), free(skip), free(idx);
    return -1;
  }
  double *r = Ap + (size_t)m * n, *bp = r + m, *w = bp + m, *z = w + n, *zz = z + n, *diag = zz + n;
  double anorm = 0, bnorm = 0;
  for (size_t i = 0; i < (size_t)m * n; i++) anorm = fmax(anorm, fabs(A[i]));
  for (int i = 0; i < m; i++) bnorm += b[i] * b[i];
  const double tol = 1e-12 * anorm * sqrt(bnorm) * m;
  for (int j = 0; j < n; j++) x[j] = 0;
  int rc = -1;
  for (int outer = 0; outer < 3 * n + 10; outer++) {
    for (int i = 0; i < m; i++) r[i] = b[i];
    for (int j = 0; j < n; j++)
      if (x[j] != 0)
        for (int i = 0; i < m; i++) r[i] -= A[(size_t)j * m + i] * x[j];
    int best = -1;
    for (int j = 0; j < n; j++) {
      if (inP[j] || skip[j]) continue;
      double s = 0;
      for (int i = 0; i < m; i++) s += A[(size_t)j * m + i] * r[i];
      w[j] = s;
      if (s > tol && (best < 0 || s > w[best])) best = j;
    }
    if (best < 0) {
      rc = 0;
      break;
    }
    inP[best] = 1;
    for (int inner = 0; inner < 3 * n + 10; inner++) {
      int k = 0;
      for (int j = 0; j < n; j++)
        if (inP[j]) idx[k++] = j;
      for (int c = 0; c < k; c++) memcpy(Ap + (size_t)c * m, A + (size_t)idx[c] * m, sizeof(double) * m);
      memcpy(bp, b, sizeof(double) * m);
      if (lsq(Ap, m, k, bp, zz, diag)) {
        /* the new column is dependent on the passive ones: leave it out */
        inP[best] = 0;
        skip[best] = 1;
        break;
      }
      for (int j = 0; j < n; j++) z[j] = 0;
      for (int c = 0; c < k; c++) z[idx[c]] = zz[c];
      if (inner == 0 && z[best] <= 0) { /* no progress along it (rounding): leave it out */
        inP[best] = 0;
        skip[best] = 1;
        break;
      }
      int allpos = 1;
      for (int c = 0; c < k; c++)
        if (z[idx[c]] <= 0) allpos = 0;
      if (allpos) {
        for (int j = 0; j < n; j++) x[j] = z[j];
        memset(skip, 0, sizeof(int) * n);
        break;
      }
      double alpha = 1;
      for (int c = 0; c < k; c++) {
        const int j = idx[c];
        if (z[j] <= 0) {
          const double t = x[j] / (x[j] - z[j]);
          if (t < alpha) alpha = t;
        }
      }
      for (int c = 0; c < k; c++) {
        const int j = idx[c];
        x[j] += alpha * (z[j] - x[j]);
        if (x[j] <= 1e-15 * fabs(z[j]) || x[j] <= 0) x[j] = 0, inP[j] = 0;
      }
    }
  }
  free(Ap), free(inP), free(skip), free(idx);
  return rc;
}

/* ---- helpers -------------------------------------------------------------- */

static int is_foot_body(const bcg_model *M, int b) {
  char name[BCG_NAME_LEN];
  const char *s = M->body_name[b];
  int k = 0;
  for (; s[k] && k < BCG_NAME_LEN - 1; k++) name[k] = (char)tolower((unsigned char)s[k]);
  name[k] = 0;
  return strstr(name, "foot") != NULL;
}

static void quat_to_mat(const double *q, double *R) {
  double w = q[0], x = q[1], y = q[2], z = q[3], n = sqrt(w * w + x * x + y * y + z * z);
  if (n > 0) w /= n, x /= n, y /= n, z /= n;
  R[0] = 1 - 2 * (y * y + z * z), R[1] = 2 * (x * y - w * z), R[2] = 2 * (x * z + w * y);
  R[3] = 2 * (x * y + w * z), R[4] = 1 - 2 * (x * x + z * z), R[5] = 2 * (y * z - w * x);
  R[6] = 2 * (x * z - w * y), R[7] = 2 * (y * z + w * x), R[8] = 1 - 2 * (x * x + y * y);
}

/* weights of the local quadratic fit y(s) = c0 + c1 s + c2 s^2 (s in frames)
 * over frames lo..hi around frame i: c1 = sum wv[j] y[j], 2 c2 = sum wa[j] y[j] */
static int fit_weights(int i, int lo, int hi, double *wv, double *wa) {
  double N[3][3] = {{0}};
  for (int j = lo; j <= hi; j++) {
    const double s = j - i, x[3] = {1, s, s * s};
    for (int a = 0; a < 3; a++)
      for (int b = 0; b < 3; b++) N[a][b] += x[a] * x[b];
  }
  double inv[3][3];
  const double det = N[0][0] * (N[1][1] * N[2][2] - N[1][2] * N[2][1]) -
                     N[0][1] * (N[1][0] * N[2][2] - N[1][2] * N[2][0]) +
                     N[0][2] * (N[1][0] * N[2][1] - N[1][1] * N[2][0]);
  if (!(fabs(det) > 1e-12)) return -1;
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++) {
      const int a1 = (b + 1) % 3, a2 = (b + 2) % 3, b1 = (a + 1) % 3, b2 = (a + 2) % 3;
      inv[a][b] = (N[a1][b1] * N[a2][b2] - N[a1][b2] * N[a2][b1]) / det;
    }
  for (int j = lo; j <= hi; j++) {
    const double s = j - i, x[3] = {1, s, s * s};
    double c1 = 0, c2 = 0;
    for (int b = 0; b < 3; b++) c1 += inv[1][b] * x[b], c2 += inv[2][b] * x[b];
    wv[j - lo] = c1;
    wa[j - lo] = 2 * c2;
  }
  return 0;
}

typedef struct joint_acc {
  double sum2;
  int over;
} joint_acc;

/* ---- the analysis ----------------------------------------------------------- */

/* what the stages of the analysis share: inputs, limits, work arrays and the
 * sums over the frames */
typedef struct feas_ctx {
  const bcg_model *model;
  const bcg_mdata *m;
  const double *qpos;
  int nframes, nv, nq, W;
  int ra, rq; /* the root's first dof and first qpos */
  double fps;
  const bcg_feas_opts *o;
  bcg_feas_result *res;
  char *err;
  size_t errlen;
  /* torque limits per dof, the actuated joints */
  double lim[BCG_MAX_DOF];
  int unlimited[BCG_MAX_DOF];
  int nj, jdof[BCG_MAX_DOF];
  double weight, wscale;
  /* row weights and Tikhonov term of the contact-force fit */
  double rw[BCG_MAX_DOF], lam;
  /* work */
  bcg_mjref *inv;
  bcg_kin *k;
  double *A, *bvec, *x, *gcol, *jac, *dq, *wv, *wa;
  joint_acc *ja;
  int *touch;
  /* sums over the frames */
  double vprev[3], sF2, sT2;
  int overF, overT, nflight, nskate;
} feas_ctx;

/* one frame's state as it passes through the per-frame stages */
typedef struct feas_frame {
  int i;
  double t;
  const double *qi;
  double qvel[BCG_MAX_DOF], qacc[BCG_MAX_DOF], tau[BCG_MAX_DOF], need[BCG_MAX_DOF], fc[3];
  int cand[BCG_MAX_CP], nc;
  double cpw[BCG_MAX_CP][3], lowest, lowest_foot;
} feas_frame;

/* the model and the options: 0, or -1 with a message */
static int feas_check_input(const bcg_model *model, int nframes, double fps, const bcg_feas_opts *o, char *err,
                            size_t errlen) {
  const int W = o->window;
  if (!bcg_has_free_root(&model->m)) {
    snprintf(err, errlen, "model %s: the feasibility analysis needs a free root joint (its residual wrench)",
             model->path);
    return -1;
  }
  if (W < 3 || W % 2 == 0) return snprintf(err, errlen, "window = %d must be odd and at least 3", W), -1;
  if (nframes < 3) return snprintf(err, errlen, "%d frames: need at least 3", nframes), -1;
  if (!(fps > 0) || !isfinite(fps)) return snprintf(err, errlen, "fps = %g must be positive", fps), -1;
  if (!(o->contact_tol >= 0) || !(o->residual_tol > 0) || !(o->arm_tol > 0))
    return snprintf(err, errlen, "contact_tol must be >= 0, residual_tol and arm_tol > 0"), -1;
  return 0;
}

/* torque limits per dof (bcg's PD clip and the motor range, gear *
 * max|ctrlrange|) and the result's joints; -1 when a joint has no actuator */
static int feas_torque_limits(feas_ctx *c) {
  const bcg_model *model = c->model;
  const bcg_mdata *m = c->m;
  bcg_simparams sp;
  bcg_simparams_default(model, &sp);
  int act[BCG_MAX_DOF] = {0};
  for (int i = 0; i < m->nu; i++) {
    const int d = m->act_dof[i];
    act[d] = 1;
    if (sp.tau_max[i] > 0) c->lim[d] += sp.tau_max[i];
    else c->unlimited[d] = 1;
  }
  c->nj = 0;
  for (int d = 0; d < c->nv; d++) {
    if (d >= c->ra && d < c->ra + 6) continue;
    if (!act[d]) {
      snprintf(c->err, c->errlen, "model %s: dof %d (joint '%s') has no actuator (the analysis assumes every joint "
               "below the root is actuated)", model->path, d, model->jnt_name[m->dof_jnt[d]]);
      return -1;
    }
    bcg_feas_joint *J = &c->res->joint[c->nj];
    J->dof = d;
    snprintf(J->name, sizeof J->name, "%s", model->jnt_name[m->dof_jnt[d]]);
    J->limit = c->unlimited[d] ? 0 : c->lim[d];
    J->over_t0 = J->over_t1 = -1;
    c->jdof[c->nj++] = d;
  }
  return 0;
}

/* the model's mass and weight into the result's header */
static void feas_mass(feas_ctx *c) {
  const bcg_mdata *m = c->m;
  double mass;
  c->weight = bcg_model_weight(m, &mass);
  c->wscale = c->weight > 0 ? c->weight : 1; /* a force scale even without gravity */
  c->res->nframes = c->nframes;
  c->res->njoint = c->nj;
  c->res->fps = c->fps;
  c->res->mass = mass;
  c->res->weight = c->weight;
}

/* the work arrays and, with keep_frames, the result's per-frame arrays: 0, or
 * -1 with a message */
static int feas_alloc(feas_ctx *c) {
  const int nv = c->nv, W = c->W, nframes = c->nframes, nj = c->nj;
  bcg_feas_result *res = c->res;
  c->inv = bcg_mjref_new(c->model, c->o->contact == BCG_FEAS_SOFT ? 0 : BCG_MJREF_NO_CONSTRAINT);
  c->k = malloc(sizeof *c->k);
  const int maxcol = BCG_MAX_CP * NEDGE, maxrow = nv + maxcol;
  c->A = malloc(sizeof(double) * (size_t)maxrow * maxcol), c->bvec = malloc(sizeof(double) * maxrow);
  c->x = malloc(sizeof(double) * maxcol), c->gcol = malloc(sizeof(double) * (size_t)maxcol * nv);
  c->jac = malloc(sizeof(double) * (size_t)BCG_MAX_CP * 3 * nv);
  c->dq = malloc(sizeof(double) * (size_t)W * nv), c->wv = malloc(sizeof(double) * W);
  c->wa = malloc(sizeof(double) * W);
  c->ja = calloc(BCG_MAX_DOF, sizeof *c->ja);
  c->touch = calloc((size_t)nframes, sizeof(int));
  if (!c->inv || !c->k || !c->A || !c->bvec || !c->x || !c->gcol || !c->jac || !c->dq || !c->wv || !c->wa ||
      !c->ja || !c->touch) {
    snprintf(c->err, c->errlen, "out of memory (or no MuJoCo model)");
    return -1;
  }
  if (c->o->keep_frames) {
    res->tau = calloc((size_t)nframes * (nj ? nj : 1), sizeof(double));
    res->res = calloc((size_t)nframes * 6, sizeof(double));
    res->fcontact = calloc((size_t)nframes * 3, sizeof(double));
    res->gap = calloc((size_t)nframes * 2, sizeof(double));
    if (!res->tau || !res->res || !res->fcontact || !res->gap) {
      snprintf(c->err, c->errlen, "out of memory");
      return -1;
    }
  }
  return 0;
}

static void feas_free_work(feas_ctx *c) {
  bcg_mjref_free(c->inv);
  free(c->k), free(c->A), free(c->bvec), free(c->x), free(c->gcol), free(c->jac), free(c->dq), free(c->wv);
  free(c->wa), free(c->ja), free(c->touch);
}

/* row weights of the fit: the root (and nothing else, every other dof is
 * actuated) at 1 per 0.1 % of m g (N, or N m with a 1 m arm), each joint at 1
 * per its torque limit: residual first, then the torques */
static void feas_fit_weights(feas_ctx *c) {
  const int ra = c->ra;
  for (int d = 0; d < c->nv; d++)
    c->rw[d] = (d >= ra && d < ra + 6) ? 1 / (1e-3 * c->wscale)
                                       : (c->lim[d] > 0 && !c->unlimited[d] ? 1 / c->lim[d] : 1 / c->wscale);
  c->lam = sqrt(1e-3) / c->wscale; /* Tikhonov: a unique, smallest set of contact forces */
}

/* which frames touch the floor (a contact point within contact_tol) */
static void feas_contact_phases(feas_ctx *c) {
  const bcg_mdata *m = c->m;
  const int nq = c->nq;
  for (int i = 0; i < c->nframes; i++) {
    bcg_real qr[BCG_MAX_Q];
    for (int a = 0; a < nq; a++) qr[a] = (bcg_real)c->qpos[(size_t)i * nq + a];
    bcg_kinematics(m, qr, c->k);
    c->touch[i] = m->has_floor && m->ncp > 0 && (double)bcg_lowest_gap(m, c->k) <= c->o->contact_tol;
  }
}

/* qvel, qacc: the local quadratic fit in the tangent space at frame i, over
 * the frames of its contact phase (touching the floor or in flight) when that
 * phase has at least 3 frames: a touchdown or a take-off is an impulse contact
 * can deliver, not an acceleration to smear over the neighbouring frames.
 * Then tau by inverse dynamics, and the root's velocity jump at a switch. */
static int feas_frame_dynamics(feas_ctx *c, feas_frame *f) {
  const int i = f->i, nframes = c->nframes, nv = c->nv, nq = c->nq, W = c->W, ra = c->ra;
  const int *touch = c->touch;
  const double fps = c->fps;
  int s0 = i, s1 = i;
  while (s0 > 0 && touch[s0 - 1] == touch[i]) s0--;
  while (s1 < nframes - 1 && touch[s1 + 1] == touch[i]) s1++;
  if (s1 - s0 + 1 < 3) s0 = 0, s1 = nframes - 1;
  const int len = s1 - s0 + 1 < W ? s1 - s0 + 1 : W;
  int lo = i - (len - 1) / 2;
  if (lo < s0) lo = s0;
  if (lo > s1 - len + 1) lo = s1 - len + 1;
  const int hi = lo + len - 1;
  if (fit_weights(i, lo, hi, c->wv, c->wa)) {
    snprintf(c->err, c->errlen, "frame %d: the local fit is singular", i);
    return -1;
  }
  for (int j = lo; j <= hi; j++) {
    double *d = c->dq + (size_t)(j - lo) * nv;
    bcg_mjref_diff_pos(c->inv, f->qi, c->qpos + (size_t)j * nq, 1.0, d);
    for (int v = 0; v < nv; v++) {
      f->qvel[v] += c->wv[j - lo] * d[v] * fps;
      f->qacc[v] += c->wa[j - lo] * d[v] * fps * fps;
    }
  }
  bcg_mjref_inverse(c->inv, f->qi, f->qvel, f->qacc, f->tau);
  const double *qvel = f->qvel, *vprev = c->vprev;
  if (i > 0 && touch[i] != touch[i - 1]) { /* the root's velocity jump at the switch */
    const double dv = sqrt((qvel[ra] - vprev[0]) * (qvel[ra] - vprev[0]) +
                           (qvel[ra + 1] - vprev[1]) * (qvel[ra + 1] - vprev[1]) +
                           (qvel[ra + 2] - vprev[2]) * (qvel[ra + 2] - vprev[2]));
    if (dv > c->res->max_dv) c->res->max_dv = dv, c->res->max_dv_t = f->t;
  }
  for (int a = 0; a < 3; a++) c->vprev[a] = qvel[ra + a];
  return 0;
}

/* bcg's contact points: clearance and the candidates that may push */
static void feas_frame_geometry(feas_ctx *c, feas_frame *f) {
  const bcg_mdata *m = c->m;
  bcg_feas_result *res = c->res;
  bcg_real qr[BCG_MAX_Q];
  for (int a = 0; a < c->nq; a++) qr[a] = (bcg_real)f->qi[a];
  bcg_kinematics(m, qr, c->k);
  f->nc = 0;
  f->lowest = f->lowest_foot = INFINITY;
  for (int cp = 0; cp < m->ncp; cp++) {
    bcg_real pc[3];
    bcg_contact_point(m, c->k, cp, pc);
    double p[3];
    for (int a = 0; a < 3; a++) p[a] = (double)pc[a] + (double)c->k->o[a];
    const double gap = p[2] - (double)m->floor_z;
    if (!m->has_floor) continue;
    if (gap < f->lowest) f->lowest = gap;
    if (is_foot_body(c->model, m->cp_body[cp]) && gap < f->lowest_foot) f->lowest_foot = gap;
    if (gap <= c->o->contact_tol) {
      memcpy(f->cpw[f->nc], p, sizeof p);
      f->cand[f->nc++] = cp;
    }
  }
  if (f->nc == 0) c->nflight++;
  if (f->lowest < res->min_gap) res->min_gap = f->lowest, res->min_gap_t = f->t;
  if (f->lowest_foot < res->min_foot_gap) res->min_foot_gap = f->lowest_foot, res->min_foot_gap_t = f->t;
}

/* the fit's columns: the generalised force of a unit force along each pyramid
 * edge of each candidate point (into c->gcol), the edges' directions, the
 * point of each column and each point's speed along the floor; returns the
 * number of columns */
static int feas_fit_columns(feas_ctx *c, const feas_frame *f, double (*edge)[3], int *col_c, double *slip) {
  const bcg_mdata *m = c->m;
  const int nv = c->nv;
  int ncol = 0;
  for (int p = 0; p < f->nc; p++) {
    double *Jc = c->jac + (size_t)p * 3 * nv;
    bcg_mjref_jac(c->inv, m->cp_body[f->cand[p]], f->cpw[p], Jc, NULL);
    const double mu = (double)m->cp_friction[f->cand[p]];
    /* the point's speed along the floor: the fit treats every point as
     * sticking (the whole cone); sliding is reported as foot skate */
    double vt[2] = {0, 0};
    for (int a = 0; a < 2; a++)
      for (int v = 0; v < nv; v++) vt[a] += Jc[a * nv + v] * f->qvel[v];
    slip[p] = hypot(vt[0], vt[1]);
    const int ne = mu > 0 ? NEDGE : 1;
    for (int e = 0; e < ne; e++) {
      const double th = 2 * M_PI * e / NEDGE;
      double *dvec = edge[ncol];
      dvec[0] = mu > 0 ? mu * cos(th) : 0;
      dvec[1] = mu > 0 ? mu * sin(th) : 0;
      dvec[2] = 1;
      double *gc = c->gcol + (size_t)ncol * nv;
      for (int v = 0; v < nv; v++) gc[v] = Jc[v] * dvec[0] + Jc[nv + v] * dvec[1] + Jc[2 * nv + v] * dvec[2];
      col_c[ncol++] = p;
    }
  }
  return ncol;
}

/* FIT: the contact forces by the weighted non-negative least-squares fit;
 * takes them off f->need, sums them into f->fc and records foot skate */
static int feas_frame_contact_fit(feas_ctx *c, feas_frame *f) {
  const int nv = c->nv;
  int col_c[BCG_MAX_CP * NEDGE];
  double slip[BCG_MAX_CP];
  double edge[BCG_MAX_CP * NEDGE][3];
  const int ncol = feas_fit_columns(c, f, edge, col_c, slip);
  const int nrow = nv + ncol;
  double *A = c->A, *bvec = c->bvec, *x = c->x, *gcol = c->gcol;
  memset(A, 0, sizeof(double) * (size_t)nrow * ncol);
  for (int col = 0; col < ncol; col++) {
    for (int v = 0; v < nv; v++) A[(size_t)col * nrow + v] = c->rw[v] * gcol[(size_t)col * nv + v];
    A[(size_t)col * nrow + nv + col] = c->lam;
  }
  for (int v = 0; v < nv; v++) bvec[v] = c->rw[v] * f->tau[v];
  for (int r = nv; r < nrow; r++) bvec[r] = 0;
  if (nnls(A, nrow, ncol, bvec, x)) {
    snprintf(c->err, c->errlen, "frame %d (t = %.3f s): the contact-force fit did not converge", f->i, f->t);
    return -1;
  }
  double fn[BCG_MAX_CP] = {0};
  for (int col = 0; col < ncol; col++) {
    if (x[col] == 0) continue;
    for (int v = 0; v < nv; v++) f->need[v] -= x[col] * gcol[(size_t)col * nv + v];
    for (int a = 0; a < 3; a++) f->fc[a] += x[col] * edge[col][a];
    fn[col_c[col]] += x[col];
  }
  int skating = 0;
  for (int p = 0; p < f->nc; p++) {
    if (fn[p] <= LOADED_FRAC * c->wscale) continue;
    if (slip[p] > c->res->max_slip) c->res->max_slip = slip[p], c->res->max_slip_t = f->t;
    skating |= slip[p] > SLIP_TOL;
  }
  c->nskate += skating;
  return 0;
}

/* the root's residual (force in world axes, torque from body to world axes)
 * and the joints' torques into the result's peaks, sums and frame arrays */
static int feas_frame_record(feas_ctx *c, const feas_frame *f) {
  bcg_feas_result *res = c->res;
  const bcg_feas_opts *o = c->o;
  const int ra = c->ra, i = f->i, nj = c->nj;
  const double t = f->t, *need = f->need;
  double R[9], F[3], T[3];
  quat_to_mat(f->qi + c->rq + 3, R);
  for (int a = 0; a < 3; a++) {
    F[a] = need[ra + a];
    T[a] = R[3 * a] * need[ra + 3] + R[3 * a + 1] * need[ra + 4] + R[3 * a + 2] * need[ra + 5];
  }
  const double Fn = sqrt(F[0] * F[0] + F[1] * F[1] + F[2] * F[2]), Tn = sqrt(T[0] * T[0] + T[1] * T[1] + T[2] * T[2]);
  if (!isfinite(Fn) || !isfinite(Tn)) {
    snprintf(c->err, c->errlen, "frame %d (t = %.3f s): the inverse dynamics is not finite", i, t);
    return -1;
  }
  if (Fn > res->resF_peak) res->resF_peak = Fn, res->resF_peak_t = t;
  if (Tn > res->resT_peak) res->resT_peak = Tn, res->resT_peak_t = t;
  for (int a = 0; a < 3; a++) res->resF_axis_peak[a] = fmax(res->resF_axis_peak[a], fabs(F[a]));
  c->sF2 += Fn * Fn;
  c->sT2 += Tn * Tn;
  c->overF += Fn > o->residual_tol * c->weight;
  c->overT += Tn > o->arm_tol * c->weight;
  for (int j = 0; j < nj; j++) {
    bcg_feas_joint *J = &res->joint[j];
    const double tj = need[c->jdof[j]], a = fabs(tj);
    if (a > J->peak) J->peak = a, J->peak_t = t;
    c->ja[j].sum2 += tj * tj;
    if (J->limit > 0 && a > J->limit) {
      c->ja[j].over++;
      if (J->over_t0 < 0) J->over_t0 = t;
      J->over_t1 = t;
    }
    if (res->tau) res->tau[(size_t)i * nj + j] = tj;
  }
  if (res->res) {
    for (int a = 0; a < 3; a++) {
      res->res[(size_t)i * 6 + a] = F[a];
      res->res[(size_t)i * 6 + 3 + a] = T[a];
      res->fcontact[(size_t)i * 3 + a] = f->fc[a];
    }
    res->gap[(size_t)i * 2] = f->lowest;
    res->gap[(size_t)i * 2 + 1] = f->lowest_foot;
  }
  return 0;
}

/* one frame through every stage: 0, or -1 with a message */
static int feas_frame_analyse(feas_ctx *c, int i) {
  feas_frame f;
  f.i = i;
  f.t = i / c->fps;
  f.qi = c->qpos + (size_t)i * c->nq;
  memset(f.qvel, 0, sizeof f.qvel);
  memset(f.qacc, 0, sizeof f.qacc);
  for (int a = 0; a < 3; a++) f.fc[a] = 0;
  if (feas_frame_dynamics(c, &f)) return -1;
  feas_frame_geometry(c, &f);
  memcpy(f.need, f.tau, sizeof(double) * c->nv);
  if (c->o->contact == BCG_FEAS_FIT && f.nc > 0 && feas_frame_contact_fit(c, &f)) return -1;
  return feas_frame_record(c, &f);
}

/* RMS values and fractions of the frames from the sums */
static void feas_summarize(feas_ctx *c) {
  bcg_feas_result *res = c->res;
  const int nframes = c->nframes;
  res->resF_rms = sqrt(c->sF2 / nframes);
  res->resT_rms = sqrt(c->sT2 / nframes);
  res->resF_over_frac = (double)c->overF / nframes;
  res->resT_over_frac = (double)c->overT / nframes;
  res->flight_frac = (double)c->nflight / nframes;
  res->skate_frac = c->o->contact == BCG_FEAS_SOFT ? NAN : (double)c->nskate / nframes;
  for (int j = 0; j < c->nj; j++) {
    res->joint[j].rms = sqrt(c->ja[j].sum2 / nframes);
    res->joint[j].over_frac = (double)c->ja[j].over / nframes;
  }
}

/* the joints over their limits into order, by peak / limit descending;
 * returns their number */
static int feas_joints_over(const bcg_feas_result *res, int *order) {
  int nover = 0;
  for (int j = 0; j < res->njoint; j++)
    if (res->joint[j].limit > 0 && res->joint[j].peak > res->joint[j].limit) order[nover++] = j;
  for (int a = 1; a < nover; a++) /* insertion sort */
    for (int b = a; b > 0; b--) {
      const bcg_feas_joint *p = &res->joint[order[b - 1]], *q = &res->joint[order[b]];
      if (q->peak / q->limit <= p->peak / p->limit) break;
      int s = order[b];
      order[b] = order[b - 1];
      order[b - 1] = s;
    }
  return nover;
}

/* the verdict: every joint within its limit in every frame, and the root's
 * residual within the tolerances; reasons worst first */
static void feas_verdict(bcg_feas_result *res, const bcg_feas_opts *o, double weight) {
  int order[BCG_MAX_DOF];
  const int nover = feas_joints_over(res, order);
  const int resF_bad = res->resF_peak > o->residual_tol * weight, resT_bad = res->resT_peak > o->arm_tol * weight;
  res->feasible = !nover && !resF_bad && !resT_bad;
  char *vp = res->verdict;
  size_t vl = sizeof res->verdict;
#define VPUT(...)                                   \
  do {                                              \
    int n_ = snprintf(vp, vl, __VA_ARGS__);         \
    if (n_ < 0 || (size_t)n_ >= vl) n_ = (int)vl - 1; \
    vp += n_, vl -= (size_t)n_;                     \
  } while (0)
  if (res->feasible) {
    VPUT("feasible");
  } else {
    VPUT("NOT feasible:");
    const char *sep = " ";
    if (resF_bad) {
      VPUT("%sroot residual force %.0f%% of m g (%.0f N at %.2f s; above %.0f%% in %.0f%% of the frames)", sep,
           100 * res->resF_peak / weight, res->resF_peak, res->resF_peak_t, 100 * o->residual_tol,
           100 * res->resF_over_frac);
      sep = "; ";
    }
    if (resT_bad) {
      VPUT("%sroot residual torque %.0f N m = m g x %.1f cm (at %.2f s; above %.0f cm in %.0f%% of the frames)", sep,
           res->resT_peak, 100 * res->resT_peak / weight, res->resT_peak_t, 100 * o->arm_tol,
           100 * res->resT_over_frac);
      sep = "; ";
    }
    for (int a = 0; a < nover && a < 4; a++) {
      const bcg_feas_joint *J = &res->joint[order[a]];
      VPUT("%s%s %.1fx its %.0f N m limit (%.0f N m at %.2f s; over in %.0f%% of the frames)", sep, J->name,
           J->peak / J->limit, J->limit, J->peak, J->peak_t, 100 * J->over_frac);
      sep = "; ";
    }
    if (nover > 4) VPUT("; %d more joints over their limits", nover - 4);
  }
#undef VPUT
}

int bcg_feasibility(const bcg_model *model, const double *qpos, int nframes, double fps, const bcg_feas_opts *o,
                    bcg_feas_result *res, char *err, size_t errlen) {
  memset(res, 0, sizeof *res);
  if (feas_check_input(model, nframes, fps, o, err, errlen)) return -1;
  feas_ctx c;
  memset(&c, 0, sizeof c);
  c.model = model;
  c.m = &model->m;
  c.qpos = qpos;
  c.nframes = nframes;
  c.nv = c.m->nv;
  c.nq = c.m->nq;
  c.W = o->window;
  const int rj = c.m->body_jntadr[1];
  c.ra = c.m->jnt_dofadr[rj];
  c.rq = c.m->jnt_qposadr[rj];
  c.fps = fps;
  c.o = o;
  c.res = res;
  c.err = err;
  c.errlen = errlen;
  if (feas_torque_limits(&c)) return -1;
  feas_mass(&c);
  int rc = -1;
  if (feas_alloc(&c)) goto out;
  feas_fit_weights(&c);
  feas_contact_phases(&c);
  res->min_gap = res->min_foot_gap = INFINITY;
  res->max_slip = o->contact == BCG_FEAS_SOFT ? NAN : 0;
  for (int i = 0; i < nframes; i++)
    if (feas_frame_analyse(&c, i)) goto out;
  feas_summarize(&c);
  feas_verdict(res, o, c.weight);
  rc = 0;
out:
  if (rc) bcg_feas_result_free(res);
  feas_free_work(&c);
  return rc;
}
