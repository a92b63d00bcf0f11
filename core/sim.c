/* core/sim.c - batched stepping on the CPU: OpenMP loops over environments
 * around the per-environment BCG_HD halves of bcg/step.h and the batched
 * contact plugin. */
#include "bcg/sim.h"
#include "sim_common.h"

#include <math.h>
#include <omp.h>
#include "bcg/rng.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif

static void set_denormal_modes(int flush) {
#if defined(__SSE2__)
  _MM_SET_FLUSH_ZERO_MODE(flush ? _MM_FLUSH_ZERO_ON : _MM_FLUSH_ZERO_OFF);
  _MM_SET_DENORMALS_ZERO_MODE(flush ? _MM_DENORMALS_ZERO_ON : _MM_DENORMALS_ZERO_OFF);
#else
  (void)flush;
#endif
}

int bcg_cpu_flush_denormals(int flush) {
#if defined(__SSE2__)
  set_denormal_modes(flush);
  /* the pool's threads: libgomp keeps the threads of an earlier, larger team,
   * so the team covers at least every core as well as the current default */
  int n = omp_get_max_threads(), np = omp_get_num_procs();
#pragma omp parallel num_threads(n > np ? n : np)
  set_denormal_modes(flush);
  return 0;
#else
  (void)flush;
  return -1;
#endif
}

int bcg_cpu_denormals_setting(const char *value) {
  int is_float = sizeof(bcg_real) == sizeof(float);
  if (!strcmp(value, "auto") && !is_float) return 0; /* the double build: the modes stay as they are */
  int flush = !strcmp(value, "auto") || !strcmp(value, "true");
  return bcg_cpu_flush_denormals(flush) && flush ? -1 : 0;
}

int bcg_cpu_denormals_flushed(void) {
#if defined(__SSE2__)
  return _MM_GET_FLUSH_ZERO_MODE() == _MM_FLUSH_ZERO_ON && _MM_GET_DENORMALS_ZERO_MODE() == _MM_DENORMALS_ZERO_ON;
#else
  return -1;
#endif
}

void bcg_simparams_default(const bcg_model *model, bcg_simparams *sp) {
  const bcg_mdata *m = &model->m;
  memset(sp, 0, sizeof *sp);
  sp->dt = m->timestep > 0 ? m->timestep : (bcg_real)0.005;
  sp->substeps = 4;
  sp->actuation = BCG_ACTUATION_MOTOR;
  sp->action_scale = 0.5;
  for (int i = 0; i < m->nu; i++) {
    /* PD gains scale with the actuator's strength (gear) */
    sp->kp[i] = 5 * m->act_gear[i];
    sp->kd[i] = (bcg_real)0.1 * m->act_gear[i];
    sp->tau_max[i] = bcg_act_torque_limit(m, i);
  }
  for (int i = 0; i < m->nq; i++) sp->qdef[i] = m->qpos0[i];
  sp->lim_k = 1000;
  sp->lim_width = (bcg_real)0.01;
  sp->lim_d = 5;
  sp->margin = (bcg_real)0.01;
  sp->mu = -1;
  sp->floss_v = (bcg_real)0.1;
  sp->ncmax = 16;
  sp->gravity = 1;
}

int bcg_sim_check_args(const bcg_simparams *sp, int cap, char *err, size_t errlen) {
  if (cap <= 0) return snprintf(err, errlen, "batch size must be positive (got %d)", cap), -1;
  if (sp->ncmax < 0 || sp->ncmax > BCG_MAX_CONTACT)
    return snprintf(err, errlen, "max_contacts = %d is outside [0, %d] (BCG_MAX_CONTACT)", sp->ncmax,
                    BCG_MAX_CONTACT), -1;
  if (!(sp->dt > 0) || sp->substeps < 1)
    return snprintf(err, errlen, "substep length must be positive and substeps >= 1"), -1;
  return 0;
}

bcg_sim *bcg_sim_create(const bcg_model *model, const bcg_simparams *sp, int cap, const bcg_contact_ops *cops,
                        void *cself, char *err, size_t errlen) {
  if (bcg_sim_check_args(sp, cap, err, errlen)) return NULL;
  bcg_sim *s = calloc(1, sizeof *s);
  if (!s) goto oom;
  BCG_SIM_SET_COMMON(s, model, sp, cap, cops, cself);
  s->slices = cops == NULL;
  size_t nc = (size_t)cap * s->ncon, n3 = 3 * (size_t)s->ncon;
  s->ws = malloc(sizeof(bcg_stepws) * cap);
  s->adj = malloc(sizeof(bcg_stepadj) * cap);
  s->nact = calloc(cap, sizeof(int));
  s->bad = calloc(cap, sizeof(int));
  s->gap = calloc(nc, sizeof(bcg_real));
  s->mu = calloc(nc, sizeof(bcg_real));
  s->fn = calloc(nc, sizeof(bcg_real));
  s->gapb = calloc(nc, sizeof(bcg_real));
  s->v0 = calloc(3 * nc, sizeof(bcg_real));
  s->c = calloc(3 * nc, sizeof(bcg_real));
  s->lam = calloc(3 * nc, sizeof(bcg_real));
  s->lamb = calloc(3 * nc, sizeof(bcg_real));
  s->v0b = calloc(3 * nc, sizeof(bcg_real));
  s->cb = calloc(3 * nc, sizeof(bcg_real));
  s->maxfn = calloc(cap, sizeof(bcg_real));
  s->maxpen = calloc(cap, sizeof(bcg_real));
  int nv = model->m.nv, nq = model->m.nq;
  s->scratch = calloc((size_t)cap * 3 * ((size_t)nv + (size_t)nq), sizeof(bcg_real));
  if (!s->ws || !s->adj || !s->nact || !s->bad || !s->gap || !s->mu || !s->fn || !s->gapb || !s->v0 || !s->c ||
      !s->lam || !s->lamb || !s->v0b || !s->cb || !s->maxfn || !s->maxpen || !s->scratch)
    goto oom;
  if (s->sp.need_G && cops) {
    s->G = calloc((size_t)cap * n3 * n3, sizeof(bcg_real));
    s->Gb = calloc((size_t)cap * n3 * n3, sizeof(bcg_real));
    s->Gused = malloc(sizeof(int) * cap);
    if (!s->G || !s->Gb || !s->Gused) goto oom;
    for (int e = 0; e < cap; e++) s->Gused[e] = -1; /* calloc: all zero */
    s->sp.G_prezeroed = 1;                          /* pre_env zeroes what the slice's last write left */
  }
  return s;
oom:
  snprintf(err, errlen, "out of memory allocating a batch of %d environments", cap);
  bcg_sim_free(s);
  return NULL;
}

void bcg_sim_free(bcg_sim *s) {
  if (!s) return;
  free(s->ws); free(s->adj); free(s->nact); free(s->bad);
  free(s->gap); free(s->mu); free(s->fn); free(s->gapb);
  free(s->v0); free(s->c); free(s->lam); free(s->lamb); free(s->v0b); free(s->cb);
  free(s->G); free(s->Gb); free(s->Gused); free(s->ckeep); free(s->maxfn); free(s->maxpen); free(s->scratch);
  free(s);
}

void bcg_drparams_default(bcg_drparams *dr) {
  memset(dr, 0, sizeof *dr);
  dr->friction_min = dr->friction_max = -1;
}

int bcg_drparams_active(const bcg_drparams *dr) {
  return dr->friction_min >= 0 || dr->mass_scale > 0 || dr->com_offset > 0 ||
         (dr->push_interval > 0 && dr->push_velocity > 0);
}

void bcg_sim_set_domain(bcg_sim *s, const bcg_domain *dom) { s->dom = dom; }
void bcg_sim_set_envmap(bcg_sim *s, const int *envmap) { s->envmap = envmap; }

static int slot_env(const bcg_sim *s, int i) { return s->envmap ? s->envmap[i] : i; }

const bcg_mdata *bcg_sim_slot_model(const bcg_sim *s, int i) {
  if (s->dom && s->dom->m) return &s->dom->m[slot_env(s, i)];
  return &s->model->m;
}

/* every slot of a batch of n must name an environment of the domain */
static int check_slots(const bcg_sim *s, int n) {
  if (n > s->cap) return -1;
  if (!s->dom) return 0;
  for (int i = 0; i < n; i++) {
    int e = slot_env(s, i);
    if (e < 0 || e >= s->dom->n) return -1;
  }
  return 0;
}

void bcg_contact_batch_fill(bcg_contact_batch *b, int n, int ncon, const bcg_simparams *sp, const int *nact,
                            const bcg_real *gap, const bcg_real *v0, const bcg_real *c, const bcg_real *G,
                            const bcg_real *mu, bcg_real *lam, bcg_real *fn) {
  b->nenv = n;
  b->ncon = ncon;
  b->dt = sp->dt;
  b->margin = sp->margin;
  b->nactive = nact;
  b->gap = gap;
  b->v0 = v0;
  b->c = c;
  b->G = G;
  b->mu = mu;
  b->lam = lam;
  b->fn = fn;
}


/* per-stage timing: STAGE_BEGIN opens a lap on the calling thread,
 * STAGE_END(i) adds it to stage i and opens the next */
#define STAGE_BEGIN(s) double stage_t_ = (s)->timing ? omp_get_wtime() : 0
#define STAGE_END(s, i)                                              \
  do {                                                               \
    if ((s)->timing) {                                               \
      double stage_n_ = omp_get_wtime();                             \
      _Pragma("omp atomic") (s)->stage_s[i] += stage_n_ - stage_t_;  \
      stage_t_ = stage_n_;                                           \
    }                                                                \
  } while (0)

void bcg_sim_set_timing(bcg_sim *s, int on) {
  s->timing = on != 0;
  for (int i = 0; i < BCG_SIM_NSTAGE; i++) s->stage_s[i] = 0;
}

void bcg_sim_stage_seconds(const bcg_sim *s, double sec[BCG_SIM_NSTAGE]) {
  for (int i = 0; i < BCG_SIM_NSTAGE; i++) sec[i] = s->stage_s[i];
}

/* Slot e's Delassus block all zero again before bcg_substep_pre writes it
 * (sp.G_prezeroed): of the 3 ncon x 3 ncon block the last write with na
 * active contacts left nonzeros only in the leading 3 na x 3 na block and on
 * the diagonal after it (the padding's ones), so only those are cleared, not
 * the whole block (48 x 48 with 16 slots where 8 contacts fill 24 x 24). */
static void zero_G_slice(bcg_sim *s, int e) {
  const int n3 = 3 * s->ncon, u = s->Gused[e];
  bcg_real *G = s->G + (size_t)e * n3 * n3;
  if (u < 0) return; /* never written: zero since bcg_sim_create */
  for (int r = 0; r < 3 * u; r++) memset(G + (size_t)r * n3, 0, sizeof(bcg_real) * 3 * (size_t)u);
  for (int r = 3 * u; r < n3; r++) G[(size_t)r * n3 + r] = 0;
}

/* first half of environment e (and its per-environment friction) */
static void pre_env(bcg_sim *s, int e, const bcg_real *q, const bcg_real *u, const bcg_real *a) {
  const bcg_mdata *m = &s->model->m;
  int nq = m->nq, nv = m->nv, nu = m->nu, nc = s->ncon, n3 = 3 * nc;
  const bcg_real *dmu = s->dom ? s->dom->mu : NULL;
  const bcg_mdata *me = bcg_sim_slot_model(s, e);
  if (s->G) zero_G_slice(s, e);
  bcg_substep_pre(me, &s->sp, q + (size_t)e * nq, u + (size_t)e * nv, a + (size_t)e * nu, &s->ws[e], nc,
                  &s->nact[e], s->gap + (size_t)e * nc, s->v0 + (size_t)e * n3, s->c + (size_t)e * n3,
                  s->G ? s->G + (size_t)e * n3 * n3 : NULL, s->mu + (size_t)e * nc);
  if (s->G) s->Gused[e] = s->nact[e];
  if (dmu) { /* per-environment friction; frictionless (condim 1) pairings stay frictionless */
    bcg_real mue = dmu[slot_env(s, e)];
    for (int r = 0; r < s->nact[e]; r++)
      if (me->cp_friction[s->ws[e].cid[r]] > 0) s->mu[(size_t)e * nc + r] = mue;
  }
}

/* the contact batch of environments lo .. hi-1: the arrays offset to lo */
static void range_batch(bcg_sim *s, int lo, int hi, bcg_contact_batch *b) {
  size_t nc = (size_t)s->ncon, n3 = 3 * nc;
  bcg_contact_batch_fill(b, hi - lo, (int)nc, &s->sp, s->nact + lo, s->gap + lo * nc, s->v0 + lo * n3,
                         s->c + lo * n3, s->G ? s->G + lo * n3 * n3 : NULL, s->mu + lo * nc, s->lam + lo * n3,
                         s->fn + lo * nc);
}

/* The adjoint's solve keeps what the plugin's VJP would recompute
 * (bcg_contact_ops.solve_keep and solve_vjp_kept, where the plugin has
 * them): the buffer, [cap][keep_size] reals, made on the first adjoint
 * (before any parallel region); 0, or -1 out of memory. */
static int keep_ready(bcg_sim *s) {
  const bcg_contact_ops *o = s->cops;
  if (s->ckeep || !o || s->sp.ncmax <= 0 || !BCG_OPS_HAS(o, bcg_contact_ops, keep_size) ||
      !BCG_OPS_HAS(o, bcg_contact_ops, solve_keep) || !BCG_OPS_HAS(o, bcg_contact_ops, solve_vjp_kept))
    return 0;
  size_t ks = o->keep_size(s->cself, s->ncon);
  if (!ks) return 0;
  s->ckeep = malloc(sizeof(bcg_real) * ks * (size_t)s->cap);
  if (!s->ckeep) return -1;
  s->ckeep_n = ks;
  return 0;
}

/* the contact plugin's solve on environments lo .. hi-1 (a sub-batch); keep:
 * the adjoint's, for solve_vjp_range's solve_vjp_kept */
static int solve_range(bcg_sim *s, int lo, int hi, int keep) {
  size_t nc = (size_t)s->ncon, n3 = 3 * nc;
  if (hi <= lo) return 0;
  if (!s->cops || s->sp.ncmax <= 0) {
    memset(s->lam + lo * n3, 0, sizeof(bcg_real) * (size_t)(hi - lo) * n3);
    memset(s->fn + lo * nc, 0, sizeof(bcg_real) * (size_t)(hi - lo) * nc);
    return 0;
  }
  bcg_contact_batch b;
  range_batch(s, lo, hi, &b);
  if (keep && s->ckeep) return s->cops->solve_keep(s->cself, &b, s->ckeep + (size_t)lo * s->ckeep_n);
  return s->cops->solve(s->cself, &b);
}

/* second half of environment e, and its contact diagnostics */
static void post_env(bcg_sim *s, int e, bcg_real *qo, bcg_real *uo) {
  const bcg_mdata *m = &s->model->m;
  int nq = m->nq, nv = m->nv, nc = s->ncon;
  bcg_substep_post(bcg_sim_slot_model(s, e), &s->sp, &s->ws[e], s->lam + (size_t)e * 3 * nc, qo + (size_t)e * nq,
                   uo + (size_t)e * nv);
  for (int r = 0; r < s->nact[e]; r++) {
    bcg_real f = s->fn[(size_t)e * nc + r], pen = -s->gap[(size_t)e * nc + r];
    if (f > s->maxfn[e]) s->maxfn[e] = f;
    if (pen > s->maxpen[e]) s->maxpen[e] = pen;
  }
  if (s->ws[e].status) s->bad[e] = s->ws[e].status;
}

/* recompute of environment e's second half (into the scratch: only the
 * workspace matters) and its adjoint: lamb from qob, uob */
static void post_vjp_env(bcg_sim *s, int e, const bcg_real *qob, const bcg_real *uob) {
  const bcg_mdata *m = &s->model->m;
  int nq = m->nq, nv = m->nv, n3 = 3 * s->ncon;
  bcg_real *qe = s->scratch + (size_t)e * (nq + nv); /* part 0: post needs somewhere to write q_E, u_E */
  const bcg_mdata *me = bcg_sim_slot_model(s, e);
  bcg_substep_post(me, &s->sp, &s->ws[e], s->lam + (size_t)e * n3, qe, qe + nq);
  bcg_substep_post_vjp(me, &s->sp, &s->ws[e], s->lam + (size_t)e * n3, qob + (size_t)e * nv, uob + (size_t)e * nv,
                       s->ncon, s->lamb + (size_t)e * n3, &s->adj[e]);
}

/* the contact adjoints of environments lo .. hi-1 zeroed, then the plugin's
 * solve_vjp on that sub-batch */
static int solve_vjp_range(bcg_sim *s, int lo, int hi) {
  size_t nc = (size_t)s->ncon, n3 = 3 * nc, k = (size_t)(hi - lo);
  if (hi <= lo) return 0;
  memset(s->gapb + lo * nc, 0, sizeof(bcg_real) * k * nc);
  memset(s->v0b + lo * n3, 0, sizeof(bcg_real) * k * n3);
  memset(s->cb + lo * n3, 0, sizeof(bcg_real) * k * n3);
  /* of Gb only the active block (3 nact x 3 nact) is accumulated into by the
   * plugin and read by bcg_substep_pre_vjp: zeroed alone */
  if (s->Gb)
    for (int e = lo; e < hi; e++) {
      bcg_real *Gb = s->Gb + (size_t)e * n3 * n3;
      const size_t na3 = 3 * (size_t)s->nact[e];
      for (size_t r = 0; r < na3; r++) memset(Gb + r * n3, 0, sizeof(bcg_real) * na3);
    }
  if (!s->cops || s->sp.ncmax <= 0) return 0;
  bcg_contact_batch b;
  range_batch(s, lo, hi, &b);
  bcg_contact_adjoint adj = {s->lamb + lo * n3, s->gapb + lo * nc, s->v0b + lo * n3, s->cb + lo * n3,
                             s->Gb ? s->Gb + lo * n3 * n3 : NULL};
  if (s->ckeep) return s->cops->solve_vjp_kept(s->cself, &b, &adj, s->ckeep + (size_t)lo * s->ckeep_n);
  return s->cops->solve_vjp(s->cself, &b, &adj);
}

/* adjoint of environment e's first half: qb, ub (overwritten), ab (accumulated) */
static void pre_vjp_env(bcg_sim *s, int e, const bcg_real *q, const bcg_real *u, const bcg_real *a, bcg_real *qb,
                        bcg_real *ub, bcg_real *ab) {
  const bcg_mdata *m = &s->model->m;
  int nq = m->nq, nv = m->nv, nu = m->nu, nc = s->ncon, n3 = 3 * nc;
  bcg_real *ube = ub + (size_t)e * nv;
  for (int d = 0; d < nv; d++) ube[d] = 0;
  bcg_substep_pre_vjp(bcg_sim_slot_model(s, e), &s->sp, q + (size_t)e * nq, u + (size_t)e * nv,
                      a + (size_t)e * nu, &s->ws[e], nc, s->gapb + (size_t)e * nc, s->v0b + (size_t)e * n3,
                      s->cb + (size_t)e * n3, s->Gb ? s->Gb + (size_t)e * n3 * n3 : NULL, &s->adj[e],
                      qb + (size_t)e * nv, ube, ab + (size_t)e * nu);
}

/* first half + contact solve (shared by the forward and the recompute:
 * stages pre, pre + 1) */
static int pre_and_contact(bcg_sim *s, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a, int pre) {
  STAGE_BEGIN(s);
#pragma omp parallel for schedule(static)
  for (int e = 0; e < n; e++) pre_env(s, e, q, u, a);
  STAGE_END(s, pre);
  int rc = solve_range(s, 0, n, pre == BCG_SIM_STAGE_PRE_RC);
  STAGE_END(s, pre + 1);
  return rc;
}

int bcg_sim_substep(bcg_sim *s, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a, bcg_real *qo,
                    bcg_real *uo) {
  if (check_slots(s, n)) return -1;
  int rc = pre_and_contact(s, n, q, u, a, BCG_SIM_STAGE_PRE);
  if (rc) return rc;
  STAGE_BEGIN(s);
#pragma omp parallel for schedule(static)
  for (int e = 0; e < n; e++) post_env(s, e, qo, uo);
  STAGE_END(s, BCG_SIM_STAGE_POST);
  return 0;
}

int bcg_sim_substep_vjp(bcg_sim *s, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a,
                        const bcg_real *qob, const bcg_real *uob, bcg_real *qb, bcg_real *ub, bcg_real *ab) {
  if (check_slots(s, n) || keep_ready(s)) return -1;
  int rc = pre_and_contact(s, n, q, u, a, BCG_SIM_STAGE_PRE_RC);
  if (rc) return rc;
  STAGE_BEGIN(s);
#pragma omp parallel for schedule(static)
  for (int e = 0; e < n; e++) post_vjp_env(s, e, qob, uob);
  STAGE_END(s, BCG_SIM_STAGE_POST_VJP);
  rc = solve_vjp_range(s, 0, n);
  STAGE_END(s, BCG_SIM_STAGE_CONTACT_VJP);
  if (rc) return rc;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < n; e++) pre_vjp_env(s, e, q, u, a, qb, ub, ab);
  STAGE_END(s, BCG_SIM_STAGE_PRE_VJP);
  return 0;
}

void bcg_sim_set_slices(bcg_sim *s, int on) { s->slices = on ? 1 : 0; }

/* The control step in one parallel region (bcg_sim.slices): each thread
 * takes a contiguous block of environments, as schedule(static) would, and
 * runs all substeps of its block, calling the contact plugin on its block
 * alone. One fork per control step instead of three per substep (five per
 * substep in the adjoint): with thousands of short regions per training
 * iteration the fork/join latency, not the arithmetic, was what more threads
 * bought (docs/performance.md). Each environment's arithmetic is the same as
 * in the substep-wise path, so results do not depend on the path or on the
 * thread count. */
static int use_slices(const bcg_sim *s, int n) { return s->slices && n > 1 && omp_get_max_threads() > 1; }

/* The slices: environments in chunks of consecutive ones, about four per
 * thread, handed out as threads finish (an environment in contact costs
 * several times an airborne one, so equal blocks per thread left threads
 * waiting for the slowest). An environment's results do not depend on its
 * chunk (the contact plugins' solves are per environment: BCG_CAP_SLICES). */
static int slice_chunks(int n) {
  int c = 4 * omp_get_max_threads();
  return c < n ? c : n;
}
static void chunk_of(int n, int nch, int c, int *lo, int *hi) {
  *lo = (int)((long)n * c / nch);
  *hi = (int)((long)n * (c + 1) / nch);
}

/* scratch layout: [0] post output of the VJP recompute, [1] and [2] ping-pong
 * buffers of the control step (and the tape reload of its VJP); each holds
 * cap * (nq + nv) reals */
static bcg_real *scratch_part(bcg_sim *s, int i) {
  const bcg_mdata *m = &s->model->m;
  return s->scratch + (size_t)i * s->cap * (m->nq + m->nv);
}

/* substep k's input states of environments lo .. hi-1 into the tape
 * [substeps][n][nq + nv] (store), or back out of it (load) */
static void tape_store(const bcg_sim *s, bcg_real *tape, int k, int n, int lo, int hi, const bcg_real *q,
                       const bcg_real *u) {
  int nq = s->model->m.nq, nv = s->model->m.nv;
  size_t sx = (size_t)nq + nv;
  for (int e = lo; e < hi; e++) {
    memcpy(tape + ((size_t)k * n + e) * sx, q + (size_t)e * nq, sizeof(bcg_real) * nq);
    memcpy(tape + ((size_t)k * n + e) * sx + nq, u + (size_t)e * nv, sizeof(bcg_real) * nv);
  }
}

static void tape_load(const bcg_sim *s, const bcg_real *tape, int k, int n, int lo, int hi, bcg_real *q,
                      bcg_real *u) {
  int nq = s->model->m.nq, nv = s->model->m.nv;
  size_t sx = (size_t)nq + nv;
  for (int e = lo; e < hi; e++) {
    memcpy(q + (size_t)e * nq, tape + ((size_t)k * n + e) * sx, sizeof(bcg_real) * nq);
    memcpy(u + (size_t)e * nv, tape + ((size_t)k * n + e) * sx + nq, sizeof(bcg_real) * nv);
  }
}

/* where substep k of a control step writes: the caller's output after the
 * last, else the ping-pong scratch parts 1 and 2 */
static void substep_out(bcg_sim *s, int k, bcg_real *qo, bcg_real *uo, bcg_real **qn, bcg_real **un) {
  if (k == s->sp.substeps - 1) {
    *qn = qo;
    *un = uo;
  } else {
    *qn = scratch_part(s, 1 + k % 2);
    *un = *qn + (size_t)s->cap * s->model->m.nq;
  }
}

int bcg_sim_control_step(bcg_sim *s, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a, bcg_real *qo,
                         bcg_real *uo, bcg_real *tape) {
  int nv = s->model->m.nv, ns = s->sp.substeps;
  for (int e = 0; e < n; e++) { s->maxfn[e] = 0; s->maxpen[e] = 0; s->bad[e] = 0; }
  if (use_slices(s, n)) {
    if (check_slots(s, n)) return -1;
    int rc = 0;
    int nch = slice_chunks(n);
#pragma omp parallel for schedule(dynamic, 1)
    for (int c = 0; c < nch; c++) {
      int lo, hi;
      chunk_of(n, nch, c, &lo, &hi);
      const bcg_real *qi = q, *ui = u;
      for (int k = 0; k < ns && hi > lo; k++) {
        if (tape) tape_store(s, tape, k, n, lo, hi, qi, ui);
        bcg_real *qn, *un;
        substep_out(s, k, qo, uo, &qn, &un);
        STAGE_BEGIN(s);
        for (int e = lo; e < hi; e++) pre_env(s, e, qi, ui, a);
        STAGE_END(s, BCG_SIM_STAGE_PRE);
        int r = solve_range(s, lo, hi, 0);
        STAGE_END(s, BCG_SIM_STAGE_CONTACT);
        if (r) {
          __atomic_store_n(&rc, r, __ATOMIC_RELAXED);
          break;
        }
        for (int e = lo; e < hi; e++) post_env(s, e, qn, un);
        STAGE_END(s, BCG_SIM_STAGE_POST);
        qi = qn;
        ui = un;
      }
    }
    if (rc) return rc;
  } else {
    const bcg_real *qi = q, *ui = u;
    for (int k = 0; k < ns; k++) {
      if (tape) tape_store(s, tape, k, n, 0, n, qi, ui);
      bcg_real *qn, *un;
      substep_out(s, k, qo, uo, &qn, &un);
      int rc = bcg_sim_substep(s, n, qi, ui, a, qn, un);
      if (rc) return rc;
      qi = qn;
      ui = un;
    }
  }
  const bcg_domain *d = s->dom;
  if (d && d->push_prob > 0 && d->push_dof >= 0 && d->clock) /* pushes: see bcg_domain in sim.h */
    for (int i = 0; i < n; i++) {
      int e = slot_env(s, i);
      uint32_t k = d->clock[e];
      if (bcg_rng_uniform(d->seed, BCG_RNG_PUSH, (uint32_t)e, k, 0) > d->push_prob) continue;
      double t = 6.283185307179586 * (double)bcg_rng_uniform(d->seed, BCG_RNG_PUSH, (uint32_t)e, k, 1);
      uo[(size_t)i * nv + d->push_dof] += d->push_vel * (bcg_real)cos(t);
      uo[(size_t)i * nv + d->push_dof + 1] += d->push_vel * (bcg_real)sin(t);
    }
  return 0;
}

int bcg_sim_control_step_vjp(bcg_sim *s, int n, const bcg_real *tape, const bcg_real *a, const bcg_real *xob,
                             bcg_real *xb, bcg_real *ab) {
  const bcg_mdata *m = &s->model->m;
  int nq = m->nq, nv = m->nv, ns = s->sp.substeps;
  size_t nn = (size_t)n * nv;
  bcg_real *qbuf = scratch_part(s, 1), *ubuf = qbuf + (size_t)s->cap * nq;
  if (keep_ready(s)) return -1;
  bcg_real *block = malloc(sizeof(bcg_real) * nn * 4);
  if (!block) return -1;
  bcg_real *bin[2] = {block, block + nn}, *bout[2] = {block + 2 * nn, block + 3 * nn};
  for (int e = 0; e < n; e++) {
    memcpy(bin[0] + (size_t)e * nv, xob + (size_t)e * 2 * nv, sizeof(bcg_real) * nv);
    memcpy(bin[1] + (size_t)e * nv, xob + (size_t)e * 2 * nv + nv, sizeof(bcg_real) * nv);
  }
  int rc = 0;
  if (use_slices(s, n)) {
    if (check_slots(s, n)) {
      free(block);
      return -1;
    }
    int nch = slice_chunks(n);
#pragma omp parallel for schedule(dynamic, 1)
    for (int c = 0; c < nch; c++) {
      int lo, hi;
      chunk_of(n, nch, c, &lo, &hi);
      bcg_real *in[2] = {bin[0], bin[1]}, *out[2] = {bout[0], bout[1]};
      for (int k = ns - 1; k >= 0 && hi > lo; k--) {
        tape_load(s, tape, k, n, lo, hi, qbuf, ubuf);
        STAGE_BEGIN(s);
        for (int e = lo; e < hi; e++) pre_env(s, e, qbuf, ubuf, a);
        STAGE_END(s, BCG_SIM_STAGE_PRE_RC);
        int r = solve_range(s, lo, hi, 1);
        STAGE_END(s, BCG_SIM_STAGE_CONTACT_RC);
        if (!r) {
          for (int e = lo; e < hi; e++) post_vjp_env(s, e, in[0], in[1]);
          STAGE_END(s, BCG_SIM_STAGE_POST_VJP);
          r = solve_vjp_range(s, lo, hi);
          STAGE_END(s, BCG_SIM_STAGE_CONTACT_VJP);
        }
        if (r) {
          __atomic_store_n(&rc, r, __ATOMIC_RELAXED);
          break;
        }
        for (int e = lo; e < hi; e++) pre_vjp_env(s, e, qbuf, ubuf, a, out[0], out[1], ab);
        STAGE_END(s, BCG_SIM_STAGE_PRE_VJP);
        for (int i = 0; i < 2; i++) { bcg_real *t = in[i]; in[i] = out[i]; out[i] = t; }
      }
      if (hi > lo && ns % 2) /* after an odd number of swaps the result is in bout: back to bin */
        for (int i = 0; i < 2; i++)
          memcpy(bin[i] + (size_t)lo * nv, bout[i] + (size_t)lo * nv, sizeof(bcg_real) * (size_t)(hi - lo) * nv);
    }
  } else {
    for (int k = ns - 1; k >= 0 && !rc; k--) {
      tape_load(s, tape, k, n, 0, n, qbuf, ubuf);
      rc = bcg_sim_substep_vjp(s, n, qbuf, ubuf, a, bin[0], bin[1], bout[0], bout[1], ab);
      for (int i = 0; i < 2; i++) { bcg_real *t = bin[i]; bin[i] = bout[i]; bout[i] = t; }
    }
  }
  for (int e = 0; e < n; e++) {
    memcpy(xb + (size_t)e * 2 * nv, bin[0] + (size_t)e * nv, sizeof(bcg_real) * nv);
    memcpy(xb + (size_t)e * 2 * nv + nv, bin[1] + (size_t)e * nv, sizeof(bcg_real) * nv);
  }
  free(block);
  return rc;
}

void bcg_qgrad_to_tangent(const bcg_mdata *m, const bcg_real *q, const bcg_real *gq, bcg_real *tg) {
  for (int j = 0; j < m->njnt; j++) {
    int qa = m->jnt_qposadr[j], da = m->jnt_dofadr[j], type = m->jnt_type[j];
    if (type == BCG_JNT_FREE || type == BCG_JNT_BALL) {
      if (type == BCG_JNT_FREE) {
        for (int i = 0; i < 3; i++) tg[da + i] = gq[qa + i];
        qa += 3; da += 3;
      }
      /* q (+) delta ~ q + 1/2 q * (0, delta) */
      for (int k = 0; k < 3; k++) {
        bcg_real e[4] = {0, 0, 0, 0}, r[4];
        e[1 + k] = 1;
        bcg_quat_mul(r, q + qa, e);
        tg[da + k] = 0.5 * (r[0] * gq[qa] + r[1] * gq[qa + 1] + r[2] * gq[qa + 2] + r[3] * gq[qa + 3]);
      }
    } else {
      tg[da] = gq[qa];
    }
  }
}
