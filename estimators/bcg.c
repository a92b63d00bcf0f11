/* estimators/bcg.c - Bundled Contact Gradients, the whole method
 * (docs/design.md section 6.3: the algorithm, its adjoint and the keys).
 *
 * Forward of control step t: the free environments' nominal step as one
 * compacted batch; a step whose largest normal contact force exceeds
 * force_threshold is discarded and replaced by a bundle of B branches from
 * start states perturbed on the contacting end-effectors, run for H control
 * steps as one batch of the branch env; a bundled environment returns the
 * branches' average. Backward: the exact adjoint of that computation.
 *
 * Guarantees:
 * - reproducible: component c of branch b of env e at a bundle start is
 *   bcg_rng_normal(seed, BCG_RNG_BUNDLE, e, counter, b * 6 * BCG_MAX_BODY + c),
 *   counter = forward() calls since create(); fixed_draws = true rewinds the
 *   counter at begin() and reuses the first horizon's perturbations, so the
 *   forward map is the function backward() differentiates (FD checks);
 * - B = 1 with zero sigmas equals autodiff bit for bit (copies, no averaging),
 *   and a threshold above every force is autodiff for any B;
 * - every physics call goes through the env layer (device = cuda runs it on
 *   the GPU), and each environment's diagnostics are those of the transition
 *   it returned (bundles: the worst over the branches and the discarded step).
 * Samples: a free step 1, a bundle start 1 + B, a continuation B. Memory: a
 * stepper workspace per branch and a tape per branch and step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/env.h"
#include "bcg/plugin.h"
#include "bcg/rng.h"
#include "bcg/runlog.h"
#include "bcg/sim.h"

enum { MODE_FREE = 0, MODE_START = 1, MODE_CONT = 2 };
#define DRAW_STRIDE (6 * BCG_MAX_BODY) /* random numbers reserved per branch */

/* What forward(t) did, for backward(t). */
typedef struct step_rec {
  int recorded;
  int nnom;              /* free envs whose nominal step was kept */
  int nb;                /* bundled envs (start or continuation) */
  int *mode;             /* [nenv] MODE_* */
  int *slot;             /* [nenv] row in the nominal batch, or index in the bundle list */
  int *nom_env;          /* [nnom] env of each nominal row */
  int *bund_env;         /* [nb] env of each bundle */
  bcg_real *act;         /* [nenv][nu] */
  bcg_real *tape_nom;    /* [substeps][nnom][nx] (compacted to the kept rows) */
  bcg_real *tape_br;     /* [substeps][nb*B][nx] */
  size_t cap_br;         /* reals allocated for tape_br */
  bcg_real *xout_br;     /* [nb*B][nx] branch states after the step */
  size_t cap_xout;
  bcg_real *pert;        /* [nenv][B][2nv] start perturbations (dq, du); NULL until needed */
  unsigned char *pert_ok;/* [nenv] pert of this env valid (kept across begin() with fixed_draws) */
} step_rec;

typedef struct bcg_est {
  uint64_t it_starts, it_branch; /* log_values: bundles started and branch samples since begin() */
  uint64_t it_restarts;           /* bundles started by the step right after a bundle ended */
  unsigned char *ended;           /* per env: its bundle ended with the last forward() */
  bcg_env *env;
  const bcg_mdata *m;
  int nenv, nq, nv, nu, nx, ns;
  int horizon, B, H, root, fixed;
  double sigma_p, sigma_v, thr, lambda;
  bcg_env *benv; /* branch batch, capacity nenv * B: an env like env (same device, domain) */
  /* bundles */
  int *remain;       /* [nenv] continuation steps left (0: free at the next step) */
  int *inb;          /* [nenv] in a bundle now (its branches are in cur) */
  bcg_real *cur;     /* [nenv][B][nx] branch states */
  uint32_t counter;  /* global transition counter (draw key) */
  /* backward carry */
  bcg_real *carry;   /* [nenv][B][2nv] adjoint of the branch states entering the carry step */
  int *carry_t;      /* [nenv] step whose backward produced carry, -1 none */
  int last_bwd;
  int nrec;          /* forwards recorded since begin() */
  step_rec *rec;     /* [horizon] */
  /* scratch */
  bcg_real *xf, *af, *xnf;        /* [nenv][nx], [nenv][nu], [nenv][nx] */
  bcg_real *XB, *XBo, *AB;        /* [nenv*B][nx], [nenv*B][nx], [nenv*B][nu] */
  bcg_real *XBb, *XSb, *ABb;      /* [nenv*B][2nv], [nenv*B][2nv], [nenv*B][nu] */
  bcg_real *yb, *xbb, *abb;       /* [nenv][2nv], [nenv][2nv], [nenv][nu] */
  bcg_real *pert_tmp;             /* [nenv][B][2nv] for untaped steps */
  bcg_real *dfn, *dpen;           /* [nenv] diagnostics */
  int *dbad, *trig, *blist, *flist, *nomrow; /* [nenv] */
  int *bmap;                      /* [nenv*B] branch slot -> environment (domain randomisation) */
  bcg_kin kin;
  bcg_real (*J)[BCG_MAX_DOF];     /* [3 * BCG_MAX_BODY] */
  bcg_real *A;                    /* [(3 BCG_MAX_BODY)^2] */
  bcg_estimator_stats st;
} bcg_est;

/* ---- small helpers --------------------------------------------------------- */

static int grow(bcg_real **p, size_t *cap, size_t n) {
  if (n <= *cap) return 0;
  bcg_real *q = realloc(*p, sizeof(bcg_real) * n);
  if (!q) return -1;
  *p = q;
  *cap = n;
  return 0;
}

static int all_zero(const bcg_real *v, int n) {
  for (int i = 0; i < n; i++)
    if (v[i] != 0) return 0;
  return 1;
}

/* ---- branch average and its adjoint ------------------------------------------ */

/* x = average of the B states X (stride nx). B == 1 copies. */
static void branch_average(const bcg_mdata *m, int B, const bcg_real *X, bcg_real *x) {
  int nq = m->nq, nv = m->nv, nx = nq + nv;
  if (B == 1) {
    memcpy(x, X, sizeof(bcg_real) * nx);
    return;
  }
  for (int i = 0; i < nx; i++) {
    bcg_real s = X[i];
    for (int b = 1; b < B; b++) s += X[(size_t)b * nx + i];
    x[i] = s / B;
  }
  /* quaternions: sign-aligned to branch 0, averaged, renormalised */
  for (int j = 0; j < m->njnt; j++) {
    int type = m->jnt_type[j], qa = m->jnt_qposadr[j];
    if (type != BCG_JNT_FREE && type != BCG_JNT_BALL) continue;
    if (type == BCG_JNT_FREE) qa += 3;
    const bcg_real *q0 = X + qa;
    bcg_real mq[4];
    for (int i = 0; i < 4; i++) mq[i] = 0;
    for (int b = 0; b < B; b++) {
      const bcg_real *qb = X + (size_t)b * nx + qa;
      bcg_real d = q0[0] * qb[0] + q0[1] * qb[1] + q0[2] * qb[2] + q0[3] * qb[3];
      bcg_real sg = d < 0 ? -1 : 1;
      for (int i = 0; i < 4; i++) mq[i] += sg * qb[i];
    }
    for (int i = 0; i < 4; i++) mq[i] /= B;
    bcg_real nm = sqrt(mq[0] * mq[0] + mq[1] * mq[1] + mq[2] * mq[2] + mq[3] * mq[3]);
    for (int i = 0; i < 4; i++) x[qa + i] = mq[i] / nm;
  }
}

/* Adjoint of branch_average: xbar [2nv] (tangent at the average) -> Xb, B
 * rows of [2nv] (tangent at each branch state). */
static void branch_average_vjp(const bcg_mdata *m, int B, const bcg_real *X, const bcg_real *xbar, bcg_real *Xb) {
  int nq = m->nq, nv = m->nv, nx = nq + nv, n2 = 2 * nv;
  if (B == 1) {
    memcpy(Xb, xbar, sizeof(bcg_real) * n2);
    return;
  }
  for (int b = 0; b < B; b++)
    for (int i = 0; i < n2; i++) Xb[(size_t)b * n2 + i] = xbar[i] / B;
  for (int j = 0; j < m->njnt; j++) {
    int type = m->jnt_type[j], qa = m->jnt_qposadr[j], da = m->jnt_dofadr[j];
    if (type != BCG_JNT_FREE && type != BCG_JNT_BALL) continue;
    if (type == BCG_JNT_FREE) { qa += 3; da += 3; }
    const bcg_real *q0 = X + qa;
    bcg_real mq[4] = {0, 0, 0, 0}, sg[1024];
    for (int b = 0; b < B; b++) {
      const bcg_real *qb = X + (size_t)b * nx + qa;
      bcg_real d = q0[0] * qb[0] + q0[1] * qb[1] + q0[2] * qb[2] + q0[3] * qb[3];
      sg[b] = d < 0 ? -1 : 1;
      for (int i = 0; i < 4; i++) mq[i] += sg[b] * qb[i];
    }
    for (int i = 0; i < 4; i++) mq[i] /= B;
    bcg_real nm = sqrt(mq[0] * mq[0] + mq[1] * mq[1] + mq[2] * mq[2] + mq[3] * mq[3]);
    bcg_real qa_[4];
    for (int i = 0; i < 4; i++) qa_[i] = mq[i] / nm;
    /* g = 2 qbar (x) (0, delta_bar): the 4-vector gradient at the average */
    bcg_real e[4] = {0, xbar[da], xbar[da + 1], xbar[da + 2]}, g[4];
    bcg_quat_mul(g, qa_, e);
    for (int i = 0; i < 4; i++) g[i] *= 2;
    /* normalisation: m_bar = (I - qbar qbar^T) g / |m| */
    bcg_real dg = qa_[0] * g[0] + qa_[1] * g[1] + qa_[2] * g[2] + qa_[3] * g[3], mb[4];
    for (int i = 0; i < 4; i++) mb[i] = (g[i] - qa_[i] * dg) / nm;
    for (int b = 0; b < B; b++) {
      const bcg_real *qb = X + (size_t)b * nx + qa;
      bcg_real gb[4];
      for (int i = 0; i < 4; i++) gb[i] = sg[b] * mb[i] / B;
      /* tangent at q_b: d q_b = 1/2 q_b (x) (0, delta_b) */
      for (int k = 0; k < 3; k++) {
        bcg_real ek[4] = {0, 0, 0, 0}, r[4];
        ek[1 + k] = 1;
        bcg_quat_mul(r, qb, ek);
        Xb[(size_t)b * n2 + da + k] = (bcg_real)0.5 * (r[0] * gb[0] + r[1] * gb[1] + r[2] * gb[2] + r[3] * gb[3]);
      }
    }
  }
}

/* ---- perturbations ------------------------------------------------------------- */

static bcg_real draw(const bcg_est *s, int e, int b, int c) {
  return bcg_rng_normal(s->env->seed, BCG_RNG_BUNDLE, (uint32_t)e, s->counter,
                        (uint32_t)b * DRAW_STRIDE + (uint32_t)c);
}

/* Joint-space perturbations of the B branches of env e starting at x (the
 * discarded nominal result is xnom): pert [B][2nv] = (dq, du). */
static int make_perturbations(bcg_est *s, int e, const bcg_real *x, const bcg_real *xnom, bcg_real *pert) {
  const bcg_mdata *m = s->m;
  int nv = s->nv, B = s->B;
  memset(pert, 0, sizeof(bcg_real) * (size_t)B * 2 * nv);
  if (s->sigma_p == 0 && s->sigma_v == 0) return 0;
  if (s->root) {
    for (int b = 0; b < B; b++)
      for (int c = 0; c < 3; c++) {
        pert[(size_t)b * 2 * nv + c] = s->sigma_p * draw(s, e, b, c);
        pert[(size_t)b * 2 * nv + nv + c] = s->sigma_v * draw(s, e, b, 3 + c);
      }
    return 0;
  }
  /* contacting bodies: a contact point within the margin at x or at xnom */
  int owns[BCG_MAX_BODY] = {0};
  unsigned char act[BCG_MAX_CP] = {0};
  bcg_real margin = bcg_env_contact_margin(s->env);
  for (int pass = 0; pass < 2; pass++) {
    bcg_kinematics(m, pass ? xnom : x, &s->kin);
    for (int i = 0; i < m->ncp; i++) {
      bcg_real pc[3];
      bcg_contact_point(m, &s->kin, i, pc);
      if (pc[2] + s->kin.o[2] - m->floor_z <= margin) act[i] = 1;
    }
  }
  bcg_kinematics(m, x, &s->kin); /* Jacobians and centroids at x_k */
  bcg_real cen[BCG_MAX_BODY][3];
  for (int i = 0; i < m->ncp; i++) {
    if (!act[i]) continue;
    int bd = m->cp_body[i];
    bcg_real pc[3];
    bcg_contact_point(m, &s->kin, i, pc);
    if (!owns[bd]) cen[bd][0] = cen[bd][1] = cen[bd][2] = 0;
    owns[bd]++;
    for (int c = 0; c < 3; c++) cen[bd][c] += pc[c];
  }
  int k = 0;
  for (int bd = 1; bd < m->nbody; bd++) {
    if (!owns[bd]) continue;
    bcg_real pc[3], Jr[3][BCG_MAX_DOF];
    for (int c = 0; c < 3; c++) pc[c] = cen[bd][c] / owns[bd];
    bcg_point_jacobian(m, &s->kin, bd, pc, Jr);
    /* rows (z, x, y) -> (x, y, z) */
    for (int d = 0; d < nv; d++) {
      s->J[3 * k][d] = Jr[1][d];
      s->J[3 * k + 1][d] = Jr[2][d];
      s->J[3 * k + 2][d] = Jr[0][d];
    }
    k++;
  }
  if (k == 0) return 0; /* no contacting body found: the branches coincide */
  int n3 = 3 * k;
  bcg_real *A = s->A;
  for (int r = 0; r < n3; r++)
    for (int c = 0; c <= r; c++) {
      bcg_real v = 0;
      for (int d = 0; d < nv; d++) v += s->J[r][d] * s->J[c][d];
      A[r * n3 + c] = A[c * n3 + r] = v + (r == c ? s->lambda : 0);
    }
  if (bcg_chol(A, n3)) return -1;
  for (int b = 0; b < B; b++)
    for (int part = 0; part < 2; part++) {
      bcg_real y[3 * BCG_MAX_BODY], sig = part ? s->sigma_v : s->sigma_p;
      for (int j = 0; j < k; j++)
        for (int c = 0; c < 3; c++) y[3 * j + c] = sig * draw(s, e, b, 6 * j + 3 * part + c);
      bcg_chol_solve(A, n3, y);
      bcg_real *out = pert + (size_t)b * 2 * nv + (size_t)part * nv;
      for (int d = 0; d < nv; d++) {
        bcg_real v = 0;
        for (int r = 0; r < n3; r++) v += s->J[r][d] * y[r];
        out[d] = v;
      }
    }
  return 0;
}

/* S = x (+) (dq, du); a zero perturbation copies x exactly */
static void apply_perturbation(const bcg_est *s, const bcg_real *x, const bcg_real *p, bcg_real *S) {
  int nq = s->nq, nv = s->nv;
  if (all_zero(p, nv)) memcpy(S, x, sizeof(bcg_real) * nq);
  else bcg_qadd(s->m, x, p, S);
  if (all_zero(p + nv, nv)) memcpy(S + nq, x + nq, sizeof(bcg_real) * nv);
  else
    for (int d = 0; d < nv; d++) S[nq + d] = x[nq + d] + p[nv + d];
}

/* adjoint of apply_perturbation with p constant: Sb [2nv] -> xb [2nv] */
static void apply_perturbation_vjp(const bcg_est *s, const bcg_real *p, const bcg_real *Sb, bcg_real *xb) {
  int nv = s->nv;
  if (all_zero(p, nv)) memcpy(xb, Sb, sizeof(bcg_real) * nv);
  else {
    bcg_real dummy[BCG_MAX_DOF];
    bcg_integrate_vjp(s->m, p, 1, Sb, xb, dummy);
  }
  memcpy(xb + nv, Sb + nv, sizeof(bcg_real) * nv);
}

/* ---- create / destroy ------------------------------------------------------------ */

static void free_rec(step_rec *r) {
  free(r->mode); free(r->slot); free(r->nom_env); free(r->bund_env); free(r->act);
  free(r->tape_nom); free(r->tape_br); free(r->xout_br); free(r->pert); free(r->pert_ok);
}

static void bcg_destroy(void *p) {
  bcg_est *s = p;
  if (!s) return;
  if (s->rec)
    for (int t = 0; t < s->horizon; t++) free_rec(&s->rec[t]);
  free(s->rec);
  bcg_env_free(s->benv);
  free(s->remain); free(s->inb); free(s->ended); free(s->cur); free(s->carry); free(s->carry_t);
  free(s->xf); free(s->af); free(s->xnf); free(s->XB); free(s->XBo); free(s->AB);
  free(s->XBb); free(s->XSb); free(s->ABb); free(s->yb); free(s->xbb); free(s->abb);
  free(s->pert_tmp); free(s->dfn); free(s->dpen); free(s->dbad); free(s->trig); free(s->blist);
  free(s->flist); free(s->nomrow); free(s->bmap);
  free(s->J); free(s->A);
  free(s);
}

static void *bcg_create(const bcg_services *svc, const bcg_params *params, bcg_env *env, int horizon, char *err,
                        size_t errlen) {
  if (!env || horizon < 0 || !params) {
    if (errlen) snprintf(err, errlen, "bcg: needs an environment, its [estimator] section and a horizon >= 0");
    return NULL;
  }
  bcg_est *s = calloc(1, sizeof *s);
  if (!s) goto oom;
  s->env = env;
  s->m = &env->model->m;
  s->nenv = env->nenv; s->nq = env->nq; s->nv = env->nv; s->nu = env->nu; s->nx = env->nx;
  s->ns = bcg_env_substeps(env);
  s->horizon = horizon;
  s->B = (int)svc->get_int(params, "branches");
  s->H = (int)svc->get_int(params, "duration");
  s->sigma_p = svc->get_real(params, "sigma_p");
  s->sigma_v = svc->get_real(params, "sigma_v");
  s->thr = svc->get_real(params, "force_threshold");
  {
    /* the model's weight: the trigger is meant for impacts, not for the
     * robot's own weight resting on one contact. A debug note only
     * (BCG_LOG_LEVEL=3): on humanoid.xml the paper's 400 N is 1.00 m g and
     * trains well once the actor starts near zero (docs/learning.md
     * section 7), and every process that builds the estimator (train, eval)
     * would repeat it */
    double mass, wgt = bcg_model_weight(s->m, &mass), rel = svc->get_real(params, "force_threshold_weight");
    if (rel > 0) {
      s->thr = rel * wgt;
    } else if (wgt > 0 && s->thr < 1.1 * wgt) {
      static int warned; /* once per process (a run creates its estimator again after validating it) */
      if (!warned)
        svc->log(3,
                 "[estimator] bcg: force_threshold = %g N is %.2f times the model's weight (%.1f kg, %.1f N): "
                 "contacts carrying no more than the robot's own weight start bundles; the BCG paper's 400 N is "
                 "1.16 times its 35.1 kg G1's weight (force_threshold_weight = 1.16 scales it to this model)",
                 (double)s->thr, (double)s->thr / wgt, mass, wgt);
      warned = 1;
    }
  }
  s->lambda = svc->get_real(params, "jacobian_damping");
  s->root = strcmp(svc->get_string(params, "perturb"), "root") == 0;
  s->fixed = svc->get_bool(params, "fixed_draws");
  if (s->B < 1 || s->B > 1024 || s->H < 1) {
    if (errlen) snprintf(err, errlen, "bcg: branches must be in [1, 1024] and duration >= 1");
    bcg_destroy(s);
    return NULL;
  }
  if (s->root && !bcg_has_free_root(s->m)) {
    if (errlen) snprintf(err, errlen, "bcg: perturb = root needs a model whose first body has a free joint");
    bcg_destroy(s);
    return NULL;
  }
  int n = s->nenv, B = s->B, nx = s->nx, nv = s->nv, nu = s->nu;
  size_t nB = (size_t)n * B;
  char serr[256];
  s->benv = bcg_env_create_like(env, (int)nB, serr, sizeof serr);
  if (!s->benv) {
    if (errlen) snprintf(err, errlen, "bcg: branch batch of %zu: %s", nB, serr);
    bcg_destroy(s);
    return NULL;
  }
  s->remain = calloc(n, sizeof(int));
  s->inb = calloc(n, sizeof(int));
  s->ended = calloc(n, 1);
  s->cur = malloc(sizeof(bcg_real) * nB * nx);
  s->carry = malloc(sizeof(bcg_real) * nB * 2 * nv);
  s->carry_t = malloc(sizeof(int) * n);
  s->xf = malloc(sizeof(bcg_real) * n * nx);
  s->af = malloc(sizeof(bcg_real) * n * nu);
  s->xnf = malloc(sizeof(bcg_real) * n * nx);
  s->XB = malloc(sizeof(bcg_real) * nB * nx);
  s->XBo = malloc(sizeof(bcg_real) * nB * nx);
  s->AB = malloc(sizeof(bcg_real) * nB * nu);
  s->XBb = malloc(sizeof(bcg_real) * nB * 2 * nv);
  s->XSb = malloc(sizeof(bcg_real) * nB * 2 * nv);
  s->ABb = malloc(sizeof(bcg_real) * nB * nu);
  s->yb = malloc(sizeof(bcg_real) * n * 2 * nv);
  s->xbb = malloc(sizeof(bcg_real) * n * 2 * nv);
  s->abb = malloc(sizeof(bcg_real) * n * nu);
  s->pert_tmp = malloc(sizeof(bcg_real) * nB * 2 * nv);
  s->dfn = calloc(n, sizeof(bcg_real));
  s->dpen = calloc(n, sizeof(bcg_real));
  s->dbad = calloc(n, sizeof(int));
  s->trig = calloc(n, sizeof(int));
  s->blist = calloc(n, sizeof(int));
  s->flist = calloc(n, sizeof(int));
  s->nomrow = calloc(n, sizeof(int));
  s->bmap = calloc(nB, sizeof(int));
  s->J = malloc(sizeof(bcg_real) * 3 * BCG_MAX_BODY * BCG_MAX_DOF);
  s->A = malloc(sizeof(bcg_real) * 9 * BCG_MAX_BODY * BCG_MAX_BODY);
  if (!s->remain || !s->inb || !s->ended || !s->cur || !s->carry || !s->carry_t || !s->xf || !s->af || !s->xnf || !s->XB ||
      !s->XBo || !s->AB || !s->XBb || !s->XSb || !s->ABb || !s->yb || !s->xbb || !s->abb || !s->pert_tmp ||
      !s->dfn || !s->dpen || !s->dbad || !s->trig || !s->blist || !s->flist || !s->nomrow || !s->bmap || !s->J || !s->A)
    goto oom;
  if (horizon > 0) {
    s->rec = calloc((size_t)horizon, sizeof(step_rec));
    if (!s->rec) goto oom;
    for (int t = 0; t < horizon; t++) {
      step_rec *r = &s->rec[t];
      r->mode = calloc(n, sizeof(int));
      r->slot = calloc(n, sizeof(int));
      r->nom_env = calloc(n, sizeof(int));
      r->bund_env = calloc(n, sizeof(int));
      r->act = malloc(sizeof(bcg_real) * n * nu);
      r->tape_nom = malloc(sizeof(bcg_real) * bcg_env_tape_size(env, n));
      r->pert_ok = calloc(n, 1);
      if (!r->mode || !r->slot || !r->nom_env || !r->bund_env || !r->act || !r->tape_nom || !r->pert_ok) goto oom;
    }
  }
  for (int e = 0; e < n; e++) s->carry_t[e] = -1;
  s->last_bwd = -1;
  return s;
oom:
  if (errlen) snprintf(err, errlen, "bcg: out of memory (%d envs x %d branches, horizon %d)", env->nenv,
                       s ? s->B : 0, horizon);
  bcg_destroy(s);
  return NULL;
}

/* ---- begin / reset ------------------------------------------------------------------ */

static int bcg_begin(void *p) {
  bcg_est *s = p;
  for (int e = 0; e < s->nenv; e++) {
    s->remain[e] = 0;
    s->inb[e] = 0;
    s->carry_t[e] = -1;
    s->ended[e] = 0;
  }
  s->nrec = 0;
  s->last_bwd = -1;
  s->it_starts = s->it_branch = s->it_restarts = 0;
  for (int t = 0; t < s->horizon; t++) {
    s->rec[t].recorded = 0;
    if (!s->fixed) memset(s->rec[t].pert_ok, 0, (size_t)s->nenv);
  }
  if (s->fixed) s->counter = 0;
  return 0;
}

static int bcg_reset_envs(void *p, const int *envs, int n) {
  bcg_est *s = p;
  for (int i = 0; i < n; i++) {
    int e = envs[i];
    if (e < 0 || e >= s->nenv) return -1;
    s->inb[e] = 0;
    s->remain[e] = 0;
    s->ended[e] = 0;
  }
  return 0;
}

/* ---- forward ------------------------------------------------------------------------ */

/* Forward stage 1: the nominal step of every environment not in a bundle,
 * as one (compacted) batch; an environment whose step exceeds the force
 * threshold starts a bundle (trig), the others take the nominal step (only
 * their rows stay on the nominal tape). */
static int forward_nominal(bcg_est *s, step_rec *r, const bcg_real *x, const bcg_real *a, bcg_real *xn, int *nstart_out) {
  bcg_env *env = s->env;
  int n = s->nenv, nx = s->nx, nu = s->nu, ns = s->ns;
  int rc = 0;
  int nF = 0;
  for (int e = 0; e < n; e++) {
    s->trig[e] = 0;
    s->nomrow[e] = -1;
    if (!s->inb[e]) { s->nomrow[e] = nF; s->flist[nF++] = e; }
  }
  const bcg_real *xf = x, *af = a;
  if (nF < n) {
    for (int i = 0; i < nF; i++) {
      int e = s->flist[i];
      memcpy(s->xf + (size_t)i * nx, x + (size_t)e * nx, sizeof(bcg_real) * nx);
      memcpy(s->af + (size_t)i * nu, a + (size_t)e * nu, sizeof(bcg_real) * nu);
    }
    xf = s->xf;
    af = s->af;
  }
  bcg_real *tape_nom = r ? r->tape_nom : NULL;
  /* domain randomisation: slot i of the compacted batch is environment flist[i] */
  bcg_env_set_envmap(env, s->flist);
  if (nF > 0) rc = bcg_env_control_step(env, nF, xf, af, s->xnf, tape_nom);
  bcg_env_set_envmap(env, NULL);
  if (rc) return rc;
  int nstart = 0;
  const bcg_env_diag dg = bcg_env_diagnostics(env);
  for (int i = 0; i < nF; i++) {
    int e = s->flist[i];
    s->dfn[e] = dg.maxfn[i];
    s->dpen[e] = dg.maxpen[i];
    s->dbad[e] = dg.bad[i];
    s->trig[e] = dg.maxfn[i] > s->thr; /* the trigger */
    nstart += s->trig[e];
    s->it_restarts += (uint64_t)(s->trig[e] && s->ended[e]);
    s->ended[e] = 0;
  }
  s->st.samples += (uint64_t)nF; /* discarded nominal steps of bundle starts included */
  s->st.triggered += (uint64_t)nstart;
  s->it_starts += (uint64_t)nstart;
  int nkeep = 0;
  for (int i = 0; i < nF; i++) {
    int e = s->flist[i];
    if (s->trig[e]) continue;
    memcpy(xn + (size_t)e * nx, s->xnf + (size_t)i * nx, sizeof(bcg_real) * nx);
    if (r) { r->mode[e] = MODE_FREE; r->slot[e] = nkeep; r->nom_env[nkeep] = e; }
    nkeep++;
  }
  /* keep only the kept rows on the nominal tape (in place: substep-major
   * order never overwrites a row before it is read) */
  if (r && nkeep < nF)
    for (int k = 0; k < ns; k++)
      for (int i = 0, j = 0; i < nF; i++) {
        if (s->trig[s->flist[i]]) continue;
        memmove(tape_nom + ((size_t)k * nkeep + j) * nx, tape_nom + ((size_t)k * nF + i) * nx,
                sizeof(bcg_real) * nx);
        j++;
      }

  if (r) r->nnom = nkeep;
  *nstart_out = nstart;
  return 0;
}

/* Forward stage 2: the bundles, new ones (perturbed start states) and
 * continuing ones, all branches as one batch; each bundled environment takes
 * the branches' average. */
static int forward_bundles(bcg_est *s, step_rec *r, const bcg_real *x, const bcg_real *a, bcg_real *xn, int nstart) {
  const bcg_mdata *m = s->m;
  int n = s->nenv, nx = s->nx, nu = s->nu, nv = s->nv, B = s->B, ns = s->ns;
  int rc = 0;
  int nb = 0;
  for (int e = 0; e < n; e++)
    if (s->inb[e] || s->trig[e]) s->blist[nb++] = e;
  if (r) r->nb = nb;
  if (nb > 0) {
    size_t nB = (size_t)nb * B;
    bcg_real *tape_br = NULL, *xout = s->XBo, *pbase = s->pert_tmp;
    if (r) {
      if (grow(&r->tape_br, &r->cap_br, (size_t)ns * nB * nx) || grow(&r->xout_br, &r->cap_xout, nB * nx)) return -1;
      tape_br = r->tape_br;
      xout = r->xout_br;
      if (nstart && !r->pert && !(r->pert = malloc(sizeof(bcg_real) * (size_t)n * B * 2 * nv))) return -1;
      if (r->pert) pbase = r->pert;
    }
    for (int j = 0; j < nb; j++) {
      int e = s->blist[j];
      bcg_real *XBe = s->XB + (size_t)j * B * nx;
      if (r) { r->mode[e] = s->inb[e] ? MODE_CONT : MODE_START; r->slot[e] = j; r->bund_env[j] = e; }
      if (s->inb[e]) {
        memcpy(XBe, s->cur + (size_t)e * B * nx, sizeof(bcg_real) * B * nx);
      } else {
        bcg_real *pe = pbase + (size_t)e * B * 2 * nv;
        if (!(r && s->fixed && r->pert_ok[e])) {
          if ((rc = make_perturbations(s, e, x + (size_t)e * nx, s->xnf + (size_t)s->nomrow[e] * nx, pe))) return rc;
          if (r) r->pert_ok[e] = 1;
        }
        for (int b = 0; b < B; b++) apply_perturbation(s, x + (size_t)e * nx, pe + (size_t)b * 2 * nv, XBe + (size_t)b * nx);
      }
      for (int b = 0; b < B; b++)
        memcpy(s->AB + ((size_t)j * B + b) * nu, a + (size_t)e * nu, sizeof(bcg_real) * nu);
    }
    /* branches of environment e step e's randomised model (friction, masses, pushes) */
    for (int j = 0; j < nb; j++)
      for (int b = 0; b < B; b++) s->bmap[(size_t)j * B + b] = s->blist[j];
    bcg_env_set_envmap(s->benv, s->bmap);
    if ((rc = bcg_env_control_step(s->benv, (int)nB, s->XB, s->AB, xout, tape_br))) return rc;
    s->st.samples += (uint64_t)nB;
    s->it_branch += (uint64_t)nB;
    for (int j = 0; j < nb; j++) {
      int e = s->blist[j];
      const bcg_real *Xe = xout + (size_t)j * B * nx;
      branch_average(m, B, Xe, xn + (size_t)e * nx);
      bcg_real fn = s->trig[e] ? s->dfn[e] : 0, pen = s->trig[e] ? s->dpen[e] : 0;
      int bad = s->trig[e] ? s->dbad[e] : 0;
      const bcg_env_diag bs = bcg_env_diagnostics(s->benv); /* the branch step's, from either device */
      for (int b = 0; b < B; b++) {
        size_t i = (size_t)j * B + b;
        if (bs.maxfn[i] > fn) fn = bs.maxfn[i];
        if (bs.maxpen[i] > pen) pen = bs.maxpen[i];
        if (bs.bad[i]) bad = bs.bad[i];
      }
      s->dfn[e] = fn;
      s->dpen[e] = pen;
      s->dbad[e] = bad;
      /* bundle bookkeeping: a start lasts H steps in all, this one included */
      if (s->inb[e]) s->remain[e]--;
      else s->remain[e] = s->H - 1;
      s->inb[e] = s->remain[e] > 0;
      s->ended[e] = !s->inb[e];
      if (s->inb[e]) memcpy(s->cur + (size_t)e * B * nx, Xe, sizeof(bcg_real) * B * nx);
    }
  }
  return 0;
}

static int bcg_forward(void *p, int t, const bcg_real *x, const bcg_real *a, bcg_real *xn) {
  bcg_est *s = p;
  bcg_env *env = s->env;
  int n = s->nenv, nu = s->nu;
  int taped = t >= 0 && t < s->horizon;
  step_rec *r = taped ? &s->rec[t] : NULL;
  int nstart = 0, rc;
  if ((rc = forward_nominal(s, r, x, a, xn, &nstart))) return rc;
  if ((rc = forward_bundles(s, r, x, a, xn, nstart))) return rc;
  const bcg_env_diag dg = bcg_env_diagnostics(env);
  /* per-environment diagnostics of the transition taken (env.h contract):
   * bundled envs report the worst over their branches (and the discarded
   * nominal step that triggered) */
  for (int e = 0; e < n; e++) {
    dg.maxfn[e] = s->dfn[e];
    dg.maxpen[e] = s->dpen[e];
    dg.bad[e] = s->dbad[e];
  }
  if (r) {
    memcpy(r->act, a, sizeof(bcg_real) * (size_t)n * nu);
    r->recorded = 1;
    if (t + 1 > s->nrec) s->nrec = t + 1;
  }
  s->st.transitions += (uint64_t)n;
  s->counter++;
  bcg_env_tick(env, NULL, n); /* push clock: one transition of every environment (branches included) */
  return 0;
}

/* ---- backward ----------------------------------------------------------------------- */

static int bcg_backward(void *p, int t, const bcg_real *xn_bar, bcg_real *x_bar, bcg_real *a_bar) {
  bcg_est *s = p;
  bcg_env *env = s->env;
  const bcg_mdata *m = s->m;
  int n = s->nenv, nx = s->nx, nu = s->nu, nv = s->nv, n2 = 2 * s->nv, B = s->B;
  if (t < 0 || t >= s->horizon || !s->rec[t].recorded) return -1;
  step_rec *r = &s->rec[t];
  int rc = 0;
  /* a new sweep (not strictly descending) forgets the carries of the last */
  if (s->last_bwd >= 0 && t >= s->last_bwd)
    for (int e = 0; e < n; e++) s->carry_t[e] = -1;
  s->last_bwd = t;

  /* 1. the nominal transitions that were kept */
  int nk = r->nnom;
  if (nk == n) {
    /* every env free: the autodiff call itself */
    bcg_env_set_envmap(env, NULL);
    if ((rc = bcg_env_step_vjp(env, n, r->tape_nom, r->act, xn_bar, x_bar, a_bar))) return rc;
  } else if (nk > 0) {
    for (int j = 0; j < nk; j++) {
      int e = r->nom_env[j];
      memcpy(s->yb + (size_t)j * n2, xn_bar + (size_t)e * n2, sizeof(bcg_real) * n2);
      memcpy(s->af + (size_t)j * nu, r->act + (size_t)e * nu, sizeof(bcg_real) * nu);
      memcpy(s->abb + (size_t)j * nu, a_bar + (size_t)e * nu, sizeof(bcg_real) * nu);
    }
    bcg_env_set_envmap(env, r->nom_env); /* the kept rows' environments (domain randomisation) */
    rc = bcg_env_step_vjp(env, nk, r->tape_nom, s->af, s->yb, s->xbb, s->abb);
    bcg_env_set_envmap(env, NULL);
    if (rc) return rc;
    for (int j = 0; j < nk; j++) {
      int e = r->nom_env[j];
      memcpy(x_bar + (size_t)e * n2, s->xbb + (size_t)j * n2, sizeof(bcg_real) * n2);
      memcpy(a_bar + (size_t)e * nu, s->abb + (size_t)j * nu, sizeof(bcg_real) * nu);
    }
  }

  /* 2. the bundles */
  int nb = r->nb;
  if (nb > 0) {
    size_t nB = (size_t)nb * B;
    const step_rec *rn = (t + 1 < s->nrec) ? &s->rec[t + 1] : NULL;
    for (int j = 0; j < nb; j++) {
      int e = r->bund_env[j];
      bcg_real *Xb = s->XBb + (size_t)j * B * n2;
      branch_average_vjp(m, B, r->xout_br + (size_t)j * B * nx, xn_bar + (size_t)e * n2, Xb);
      /* the same branches went on at t+1: add what flowed back from there */
      if (rn && rn->mode[e] == MODE_CONT && s->carry_t[e] == t + 1) {
        const bcg_real *c = s->carry + (size_t)e * B * n2;
        for (size_t i = 0; i < (size_t)B * n2; i++) Xb[i] += c[i];
      }
      for (int b = 0; b < B; b++) {
        memcpy(s->AB + ((size_t)j * B + b) * nu, r->act + (size_t)e * nu, sizeof(bcg_real) * nu);
        bcg_real *ab = s->ABb + ((size_t)j * B + b) * nu;
        if (b == 0) memcpy(ab, a_bar + (size_t)e * nu, sizeof(bcg_real) * nu);
        else memset(ab, 0, sizeof(bcg_real) * nu);
      }
    }
    for (int j = 0; j < nb; j++)
      for (int b = 0; b < B; b++) s->bmap[(size_t)j * B + b] = r->bund_env[j];
    bcg_env_set_envmap(s->benv, s->bmap);
    if ((rc = bcg_env_step_vjp(s->benv, (int)nB, r->tape_br, s->AB, s->XBb, s->XSb, s->ABb))) return rc;
    for (int j = 0; j < nb; j++) {
      int e = r->bund_env[j];
      /* action adjoints of the branches, summed (branch 0 accumulated a_bar) */
      bcg_real *ae = a_bar + (size_t)e * nu;
      for (int i = 0; i < nu; i++) {
        bcg_real v = s->ABb[(size_t)j * B * nu + i];
        for (int b = 1; b < B; b++) v += s->ABb[((size_t)j * B + b) * nu + i];
        ae[i] = v;
      }
      const bcg_real *Sb = s->XSb + (size_t)j * B * n2;
      bcg_real *xe = x_bar + (size_t)e * n2;
      if (r->mode[e] == MODE_CONT) {
        /* x_t as passed was not used: the branch states carry the adjoint */
        memcpy(s->carry + (size_t)e * B * n2, Sb, sizeof(bcg_real) * (size_t)B * n2);
        s->carry_t[e] = t;
        memset(xe, 0, sizeof(bcg_real) * n2);
      } else {
        /* start: back through the constant perturbations, summed over branches */
        const bcg_real *pe = r->pert + (size_t)e * B * n2;
        apply_perturbation_vjp(s, pe, Sb, xe);
        for (int b = 1; b < B; b++) {
          bcg_real tmp[2 * BCG_MAX_DOF];
          apply_perturbation_vjp(s, pe + (size_t)b * n2, Sb + (size_t)b * n2, tmp);
          for (int i = 0; i < n2; i++) xe[i] += tmp[i];
        }
      }
    }
  }
  (void)nv;
  return 0;
}

static void bcg_stats(const void *p, bcg_estimator_stats *out) { *out = ((const bcg_est *)p)->st; }

/* checkpoint: the draw counter (so a resumed run draws what the uninterrupted
 * one would) and the cumulative statistics */
static int bcg_save(void *p, int64_t g) {
  const bcg_est *s = p;
  char e[256];
  int64_t v[4] = {(int64_t)s->counter, (int64_t)s->st.samples, (int64_t)s->st.transitions, (int64_t)s->st.triggered};
  return bcg_h5_write_i64(g, "counter_samples_transitions_triggered", v, 4, e, sizeof e);
}

static int bcg_load(void *p, int64_t g) {
  bcg_est *s = p;
  char e[256];
  int64_t v[4];
  if (bcg_h5_read_i64(g, "counter_samples_transitions_triggered", v, 4, e, sizeof e) != 4) return -1;
  s->counter = (uint32_t)v[0];
  s->st.samples = (uint64_t)v[1];
  s->st.transitions = (uint64_t)v[2];
  s->st.triggered = (uint64_t)v[3];
  return 0;
}

/* ---- descriptor ---------------------------------------------------------------------- */

static const bcg_key_spec keys[] = {
    {"branches", BCG_KEY_INT, "10", 1, 1024, NULL,
     "B, branches per bundle (BCG paper: 10); 1 with zero sigmas reproduces autodiff exactly"},
    {"duration", BCG_KEY_INT, "2", 1, 1000, NULL,
     "H, control steps a bundle lasts before the rollout resumes from the branch average (BCG paper: 2)"},
    {"sigma_p", BCG_KEY_REAL, "0.01", 0, 10, NULL,
     "std of the Cartesian position noise of each contacting end-effector, m (BCG paper: 1 cm)"},
    {"sigma_v", BCG_KEY_REAL, "0.02", 0, 100, NULL,
     "std of the Cartesian velocity noise of each contacting end-effector, m/s (BCG paper: 2 cm/s)"},
    {"force_threshold", BCG_KEY_REAL, "400", 0, 1e300, NULL,
     "tau: bundle a transition whose largest normal contact force over its substeps exceeds this, N "
     "(BCG paper: 400 N); a huge value never bundles (plain autodiff)"},
    {"force_threshold_weight", BCG_KEY_REAL, "0", 0, 1e300, NULL,
     "tau as a multiple of the model's weight (total mass times |gravity|); > 0 replaces force_threshold "
     "(the BCG paper's 400 N on its 35.1 kg G1 is 1.16); 0: force_threshold in N"},
    {"perturb", BCG_KEY_CHOICE, "contacts", 0, 0, "contacts|root",
     "contacts: noise on the contacting end-effectors through the damped pseudo-inverse of their Jacobian "
     "(BCG paper); root: noise on the floating base's position and linear velocity only (ablation)"},
    {"jacobian_damping", BCG_KEY_REAL, "1e-4", 1e-12, 1e6, NULL,
     "lambda_J in dq = J^T (J J^T + lambda_J I)^-1 dp (BCG paper: 1e-4)"},
    {"fixed_draws", BCG_KEY_BOOL, "false", 0, 0, NULL,
     "true: begin() rewinds the draw counter and every horizon reuses the first horizon's joint-space "
     "perturbations (gradient checks); false: fresh draws keyed by the run seed and a global step counter"},
};

/* per iteration: bundles started and branch control steps simulated since
 * the horizon's begin() (log.h5 curves est_bundle_starts, est_branch_samples);
 * counted from begin(), not from the last call, so a resumed run logs what an
 * uninterrupted one does */
static int bcg_log_values(void *p, const char **names, double *values, int cap) {
  bcg_est *s = p;
  if (cap < 3) return 0;
  names[0] = "bundle_starts", values[0] = (double)s->it_starts;
  names[1] = "branch_samples", values[1] = (double)s->it_branch;
  names[2] = "bundle_restarts", values[2] = (double)s->it_restarts;
  return 3;
}

static const bcg_estimator_ops ops = {sizeof(bcg_estimator_ops), bcg_create, bcg_destroy, bcg_begin, bcg_forward,
                                      bcg_backward, bcg_reset_envs, bcg_stats, bcg_save, bcg_load, bcg_log_values,
                                      NULL, NULL /* no device entries (branches are built on the host) */};

static const bcg_plugin_desc desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_ESTIMATOR, "bcg",
                      "Bundled Contact Gradients: stiff transitions recomputed as an averaged bundle of "
                      "perturbed branches"),
    keys, BCG_NKEYS(keys), BCG_CAP_DIFFERENTIABLE, &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }
