/* tasks/imitation.c - track a reference motion (MuJoCo qpos frames, CSV,
 * HDF5 or the LAFAN1 format; tasks/motion.h) with a differentiable tracking
 * reward; docs/design.md section 8.2 and tasks/README.md give the
 * observation, the reward terms and their keys in full.
 *
 * Reference time of an environment: tau = phase + t * control_dt, with the
 * phase drawn at reset (reference-state initialisation) and kept in the
 * caller-owned clock, so the VJP of an earlier step sees the phase its
 * forward saw. The observation: proprioception, key bodies and, for each
 * future offset, the reference's root, joints and key bodies in the heading
 * frame. The reward: weighted exp(-scale error) terms of body positions and
 * orientations, joint positions and velocities and the root, minus the
 * action, action-rate, self-collision and joint-limit penalties; optionally
 * the ADD discriminator's reward (tasks/add.h), trained between iterations.
 * Done: 1 below term_height or beyond max_error, 2 at the episode's or the
 * clip's end. Observation and reward VJPs are exact (test_tasks: FD). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/env.h"
#include "bcg/plugin.h"
#include "bcg/rng.h"
#include "bcg/step.h"
#include "motion.h"
#include "task_util.h"
#include "add.h"

#define MAX_FUT 16
#define MAX_KEY 16

#define RING 4 /* reference poses remembered per environment (ref_at) */

/* Per-environment scratch. Two memos, both of pure functions, so a hit
 * gives exactly what a recomputation would:
 * - k, the robot's pose kinematics, is that of the state kq (robot_at): the
 *   reward and the next observation of a control step read the same state;
 * - the ring rbuf holds the last RING reference poses: with future = 1,2,3
 *   a control step's reward and two of its three future frames were
 *   computed at the step before. An entry keeps what the task reads of a
 *   reference (ring_len); r views the entry of time rt[rcur] (ref_at), which
 *   is read in place: no copy per lookup. A new entry is computed on ref_at's
 *   stack (hot in the cache) and only its read part stored: with thousands
 *   of environments (PPO's 4096) a per-environment 18 kB scratch was cold
 *   memory written at every control step. */
typedef struct rpose {
  const bcg_real *q, *u, *o; /* qpos, qvel, kinematics origin */
  const bcg_real *R, *p;     /* [nbody][9], [nbody][3]: as bcg_kin's R and p */
  const bcg_real *cdof;      /* [nrdof][6]: bcg_kin's cdof of the root dofs */
} rpose;

typedef struct ws {
  bcg_kin k;
  rpose r;
  tu_adj a;
  bcg_real kq[BCG_MAX_Q]; /* the state of k (valid when kq_ok) */
  int kq_ok;
  double rt[RING];        /* the times of the ring's entries (valid where rok's bit is set) */
  int rok, rnext, rcur;   /* valid entries (bits), the next to overwrite, the one r views (-1: none) */
  bcg_real *rbuf;         /* [RING][ring_len] */
} ws;

typedef struct imit {
  bcg_env *env;
  const bcg_model *model;
  const bcg_mdata *m;
  tu_layout L;
  bcg_motion mo;
  int nenv, nq, nv, nu, nx, odim, pdim;
  int loop, rsi, ep_steps;
  double dt, w[5], sc[5], w_action, w_rate, w_self, w_limit, term_h, max_err;
  tu_self self;
  int nf, fut[MAX_FUT], nk, key[MAX_KEY];
  ws *w_;         /* [nenv] scratch; what it keeps across calls are memos of pure functions (ws) */
  bcg_real *ring; /* [nenv][RING][ring_len] the reference poses of ref_at */
  /* ADD */
  int add, track, adim;
  double add_w, add_scale;
  add_disc disc;
  bcg_real *delta, *dbar, *z, *dz; /* [nenv][adim], [nenv][adim], [nenv], [nenv] */
} imit;

enum { T_POS, T_ROT, T_JPOS, T_JVEL, T_ROOT };

/* the reals of one ring entry: qr, ur, kr's o, R and p of every body, the root dofs' cdof */
static size_t ring_len(const imit *s) {
  return (size_t)s->nq + s->nv + 3 + 12 * (size_t)s->m->nbody + 6 * (size_t)s->L.nrdof;
}

/* store the reference computed in qr, ur, kr (its read part) as w's ring entry i */
static void ring_store(const imit *s, ws *w, int i, const bcg_real *qr, const bcg_real *ur, const bcg_kin *kr) {
  bcg_real *d = w->rbuf + (size_t)i * ring_len(s);
  int nb = s->m->nbody;
#define RC(field, n)                                              \
  do {                                                            \
    memcpy(d, (field), sizeof(bcg_real) * (size_t)(n));           \
    d += (n);                                                     \
  } while (0)
  RC(qr, s->nq);
  RC(ur, s->nv);
  RC(kr->o, 3);
  RC(&kr->R[0][0], 9 * nb);
  RC(&kr->p[0][0], 3 * nb);
  RC(&kr->cdof[s->L.rdof0][0], 6 * s->L.nrdof);
#undef RC
}

/* w->r viewing ring entry i (the layout of ring_store) */
static void ring_view(const imit *s, ws *w, int i) {
  const bcg_real *d = w->rbuf + (size_t)i * ring_len(s);
  int nb = s->m->nbody;
  w->r.q = d, d += s->nq;
  w->r.u = d, d += s->nv;
  w->r.o = d, d += 3;
  w->r.R = d, d += 9 * nb;
  w->r.p = d, d += 3 * nb;
  w->r.cdof = d;
  w->rcur = i;
}

/* the reference at time t in w->r, from the ring when it holds t */
static void ref_at(const imit *s, ws *w, double t) {
  if (w->rcur >= 0 && w->rt[w->rcur] == t) return;
  for (int i = 0; i < RING; i++)
    if ((w->rok >> i & 1) && w->rt[i] == t) {
      ring_view(s, w, i);
      return;
    }
  double q[BCG_MAX_Q], u[BCG_MAX_DOF];
  bcg_real qr[BCG_MAX_Q], ur[BCG_MAX_DOF];
  bcg_kin kr;
  bcg_motion_state(&s->mo, s->m, t, s->loop, q, u);
  for (int i = 0; i < s->nq; i++) qr[i] = (bcg_real)q[i];
  for (int i = 0; i < s->nv; i++) ur[i] = (bcg_real)u[i];
  bcg_kinematics_pose(s->m, qr, &kr);
  int i = w->rnext;
  w->rnext = (i + 1) % RING;
  ring_store(s, w, i, qr, ur, &kr);
  w->rt[i] = t;
  w->rok |= 1 << i;
  ring_view(s, w, i);
}

/* the robot's pose kinematics at q into w->k, unless it holds them already */
static void robot_at(const imit *s, ws *w, const bcg_real *q) {
  if (w->kq_ok && !memcmp(w->kq, q, sizeof(bcg_real) * (size_t)s->nq)) return;
  bcg_kinematics_pose(s->m, q, &w->k);
  memcpy(w->kq, q, sizeof(bcg_real) * (size_t)s->nq);
  w->kq_ok = 1;
}

/* the clip ([task] motion, its format, quaternion order, rate and segment),
 * with the loader's warnings logged */
static int load_motion(imit *s, const bcg_services *svc, const bcg_params *p, char *err, size_t errlen) {
  const char *path = svc->get_string(p, "motion");
  const char *qo = svc->get_string(p, "quat_order"), *fmt = svc->get_string(p, "motion_format");
  bcg_motion_opts mopt = {BCG_MOTION_AUTO, svc->get_real(p, "fps"), BCG_QUAT_FILE, svc->get_real(p, "motion_start"),
                          svc->get_real(p, "motion_end")};
  mopt.quat = strcmp(qo, "wxyz") == 0 ? BCG_QUAT_WXYZ : strcmp(qo, "xyzw") == 0 ? BCG_QUAT_XYZW : BCG_QUAT_FILE;
  mopt.format = strcmp(fmt, "bcg") == 0 ? BCG_MOTION_BCG : strcmp(fmt, "lafan") == 0 ? BCG_MOTION_LAFAN : BCG_MOTION_AUTO;
  if (!path || !*path) return snprintf(err, errlen, "[task] motion: no motion file given"), -1;
  char merr[1400];
  if (bcg_motion_load_opts(&s->mo, s->model, path, &mopt, merr, sizeof merr))
    return snprintf(err, errlen, "[task] motion: %s", merr), -1;
  if (mopt.format == BCG_MOTION_AUTO && s->mo.format == BCG_MOTION_LAFAN)
    svc->log(2, "[task] motion: %s has no header: read as the LAFAN format (%g fps, root quaternion x y z w; "
                "motion_format = bcg reads it as bcg's CSV)", path, s->mo.fps);
  bcg_motion_checks mc;
  char wl[3][1600];
  bcg_motion_check(&s->mo, s->model, &mc);
  int nw = bcg_motion_warnings(&s->mo, s->model, &mc, wl, 3);
  for (int i = 0; i < nw; i++) svc->log(1, "[task] motion: %s", wl[i]);
  return 0;
}

/* [task] key_bodies: auto (the leaves of the tree but the root), none, or names */
static int key_bodies(imit *s, const bcg_services *svc, const bcg_params *p, char *err, size_t errlen) {
  const char *kb = svc->get_string(p, "key_bodies");
  const bcg_mdata *m = s->m;
  if (strcmp(kb, "auto") == 0) {
    for (int b = 1; b < m->nbody && s->nk < MAX_KEY; b++) {
      int leaf = 1;
      for (int c = b + 1; c < m->nbody; c++)
        if (m->body_parent[c] == b) leaf = 0;
      if (leaf && b != s->L.root) s->key[s->nk++] = b;
    }
  } else if (strcmp(kb, "none") != 0) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", kb);
    char *save = NULL;
    for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
      int b = bcg_model_body_id(s->model, t);
      if (b <= 0 || s->nk >= MAX_KEY)
        return snprintf(err, errlen, "[task] key_bodies: %s '%s' (model %s)", b <= 0 ? "no body" : "too many bodies at",
                        t, s->model->path), -1;
      s->key[s->nk++] = b;
    }
  }
  return 0;
}

/* a clip whose own frames come closer than self_margin to overlapping the
 * robot's self-collision capsules: a warning (the self-collision penalty
 * pulls the policy away from the reference there) */
static void check_clip_overlap(imit *s, const bcg_services *svc, const bcg_params *p) {
  if (!(s->w_self > 0 && s->self.npair)) return;
  int nover = 0, worst = 0;
  double pmax = 0;
  for (int f = 0; f < s->mo.nframes; f++) {
    bcg_real qf[BCG_MAX_Q];
    for (int c = 0; c < s->nq; c++) qf[c] = (bcg_real)s->mo.qpos[(size_t)f * s->mo.nq + c];
    robot_at(s, &s->w_[0], qf);
    double pen = tu_self_penalty(&s->self, &s->w_[0].k, 0, NULL);
    if (pen > 0) nover++;
    if (pen > pmax) pmax = pen, worst = f;
  }
  if (nover)
    svc->log(1, "[task] motion: %s: %d of %d frames bring the robot's self-collision capsules closer than "
                "self_margin = %g m (worst: frame %d, sqrt of the summed squared overlaps %.1f mm); the "
                "self-collision penalty (w_self) pulls the policy away from the reference there",
             svc->get_string(p, "motion"), nover, s->mo.nframes, (double)s->self.margin, worst + s->mo.first_frame,
             1e3 * sqrt(pmax));
}

/* PD actuation: a target is qdef + action_scale * action, and SHAC's
 * tanh-squashed actions stay inside (-1, 1), so targets stay within
 * action_scale of the default pose. A clip whose joints go much further may
 * need targets such a policy cannot give (docs/g1.md section 5: the G1's run
 * segment learned only at action_scale 1.0; jump and dance learned at 0.25
 * all the same), so it is a note with the numbers, not a warning (the task
 * does not know whether the learner squashes). Counted: frames where some
 * actuated joint is more than REACH_WARN action_scales from the default
 * pose. */
#define REACH_WARN 4.0
static void check_clip_reach(imit *s, const bcg_services *svc, const bcg_params *p) {
  const bcg_simparams *sp = &s->env->sim->sp;
  if (sp->actuation != BCG_ACTUATION_PD || !(sp->action_scale > 0)) return;
  const bcg_mdata *m = s->m;
  int nover = 0, wj = -1, wf = 0;
  double worst = 0;
  for (int f = 0; f < s->mo.nframes; f++) {
    const double *qf = s->mo.qpos + (size_t)f * s->mo.nq;
    int over = 0;
    for (int i = 0; i < m->nu; i++) {
      int j = m->act_jnt[i], qa = m->jnt_qposadr[j];
      double need = fabs(qf[qa] - (double)sp->qdef[qa]) / (double)sp->action_scale;
      if (need > REACH_WARN) over = 1;
      if (need > worst) worst = need, wj = j, wf = f;
    }
    nover += over;
  }
  if (nover && wj >= 0)
    svc->log(2, "[task] motion: %s: in %d of %d frames an actuated joint is more than %g x action_scale = %g rad "
                "from the default pose; the farthest: joint '%s', %.2f rad at frame %d (%.1f x action_scale). PD "
                "targets are qdef + action_scale * action, and tanh-squashed actions (SHAC's squash = tanh) "
                "stay within +-1: such poses may be out of the policy's reach (a larger [sim] action_scale)",
             svc->get_string(p, "motion"), nover, s->mo.nframes, REACH_WARN, REACH_WARN * (double)sp->action_scale,
             s->model->jnt_name[wj], worst * (double)sp->action_scale, wf + s->mo.first_frame, worst);
}

/* the ADD discriminator and its buffers ([task] add) */
static int init_add(imit *s, const bcg_services *svc, const bcg_params *p, const bcg_env *env, char *err,
                    size_t errlen) {
  s->track = !svc->get_bool(p, "add_only");
  s->add_w = svc->get_real(p, "add_weight");
  s->add_scale = svc->get_real(p, "add_reward_scale");
  s->adim = 15 + 2 * s->L.nj + 3 * (s->m->nbody - 2);
  long hl[BCG_MLP_MAX_HIDDEN];
  int nh = svc->get_list(p, "add_layers", hl, BCG_MLP_MAX_HIDDEN);
  s->delta = malloc(sizeof(bcg_real) * (size_t)s->nenv * s->adim);
  s->dbar = malloc(sizeof(bcg_real) * (size_t)s->nenv * s->adim);
  s->z = malloc(sizeof(bcg_real) * (size_t)s->nenv);
  s->dz = malloc(sizeof(bcg_real) * (size_t)s->nenv);
  if (!s->delta || !s->dbar || !s->z || !s->dz ||
      add_init(&s->disc, s->adim, hl, nh, svc->get_real(p, "add_lr"), svc->get_real(p, "add_grad_penalty"),
               svc->get_real(p, "add_logit_reg"), svc->get_real(p, "add_weight_decay"), svc->get_int(p, "add_replay"),
               (int)svc->get_int(p, "add_batch"), (int)svc->get_int(p, "add_steps"), s->nenv, env->seed))
    return snprintf(err, errlen, "[task] add: cannot build the discriminator (out of memory?)"), -1;
  return 0;
}

static void destroy(void *p);

static void *create(const bcg_services *svc, const bcg_params *p, bcg_env *env, char *err, size_t errlen) {
  imit *s = calloc(1, sizeof *s);
  if (!s) return snprintf(err, errlen, "out of memory"), NULL;
  s->env = env;
  s->model = env->model;
  s->m = &env->model->m;
  if (tu_layout_init(&s->L, env->model, err, errlen)) return free(s), NULL;
  s->nenv = env->nenv;
  s->nq = env->nq;
  s->nv = env->nv;
  s->nu = env->nu;
  s->nx = env->nx;
  s->dt = env->control_dt;
  if (load_motion(s, svc, p, err, errlen)) goto fail;
  s->loop = svc->get_bool(p, "loop");
  s->rsi = svc->get_bool(p, "rsi");
  static const char *wk[5] = {"w_body_pos", "w_body_rot", "w_joint_pos", "w_joint_vel", "w_root"};
  static const char *sk[5] = {"scale_body_pos", "scale_body_rot", "scale_joint_pos", "scale_joint_vel",
                              "scale_root"};
  for (int i = 0; i < 5; i++) {
    s->w[i] = svc->get_real(p, wk[i]);
    s->sc[i] = svc->get_real(p, sk[i]);
  }
  s->w_action = svc->get_real(p, "w_action");
  s->w_rate = svc->get_real(p, "w_action_rate");
  s->w_self = svc->get_real(p, "w_self");
  s->w_limit = svc->get_real(p, "w_limit");
  tu_self_init(&s->self, env->model);
  tu_self_warn(env->model, s->w_self, svc);
  s->term_h = svc->get_real(p, "term_height");
  s->max_err = svc->get_real(p, "max_error");
  s->ep_steps = (int)bcg_steps_for(svc->get_real(p, "episode_seconds"), s->dt);
  if (s->ep_steps < 1) s->ep_steps = 1;
  long fl[MAX_FUT];
  s->nf = svc->get_list(p, "future", fl, MAX_FUT);
  for (int i = 0; i < s->nf; i++) s->fut[i] = (int)fl[i];
  if (key_bodies(s, svc, p, err, errlen)) goto fail;
  s->pdim = tu_proprio_dim(&s->L, s->nu);
  s->odim = s->pdim + 3 * s->nk + s->nf * (9 + s->L.nj + 3 * s->nk);
  s->w_ = malloc(sizeof(ws) * s->nenv);
  s->ring = malloc(sizeof(bcg_real) * RING * ring_len(s) * (size_t)s->nenv);
  if (!s->w_ || !s->ring) {
    snprintf(err, errlen, "out of memory");
    goto fail;
  }
  for (int e = 0; e < s->nenv; e++) {
    s->w_[e].kq_ok = s->w_[e].rok = s->w_[e].rnext = 0;
    s->w_[e].rcur = -1;
    s->w_[e].rbuf = s->ring + (size_t)e * RING * ring_len(s);
  }
  if (tu_self_set_margin(&s->self, s->m, svc->get_real(p, "self_margin"))) {
    snprintf(err, errlen, "out of memory");
    goto fail;
  }
  check_clip_overlap(s, svc, p);
  check_clip_reach(s, svc, p);
  s->track = 1;
  s->add = svc->get_bool(p, "add");
  if (s->add && init_add(s, svc, p, env, err, errlen)) goto fail;
  return s;
fail:
  destroy(s);
  return NULL;
}

static void destroy(void *p) {
  imit *s = p;
  if (!s) return;
  bcg_motion_free(&s->mo);
  free(s->w_);
  free(s->ring);
  if (s->add) add_free(&s->disc);
  free(s->delta), free(s->dbar), free(s->z), free(s->dz);
  free(s);
}
static int obs_dim(const void *p) { return ((const imit *)p)->odim; }
static int act_dim(const void *p) { return ((const imit *)p)->nu; }

static int reset(void *p, const int *envs, int n, uint64_t draw, bcg_real *x, bcg_task_clock *clk) {
  imit *s = p;
  double D = bcg_motion_duration(&s->mo);
  double span = s->loop ? D : fmax(0.0, D - fmin(1.0, 0.5 * D));
  for (int i = 0; i < n; i++) {
    int e = envs[i];
    if (e < 0 || e >= s->nenv) return -1;
    double ph = 0;
    if (s->rsi) ph = span * (1.0 - (double)bcg_rng_uniform(s->env->seed, BCG_RNG_RESET, (uint32_t)e, (uint32_t)draw, 0));
    double q[BCG_MAX_Q], u[BCG_MAX_DOF];
    bcg_motion_state(&s->mo, s->m, ph, s->loop, q, u);
    bcg_real *xe = x + (size_t)e * s->nx;
    for (int c = 0; c < s->nq; c++) xe[c] = (bcg_real)q[c];
    for (int d = 0; d < s->nv; d++) xe[s->nq + d] = (bcg_real)u[d];
    clk[e].t = 0;
    clk[e].flags = 0;
    clk[e].phase = ph;
  }
  return 0;
}

static inline void wpos(const bcg_kin *k, int b, bcg_real *o) { bcg_v3_add(o, k->p[b], k->o); }
/* the same of a reference pose */
static inline void rpos(const rpose *r, int b, bcg_real *o) { bcg_v3_add(o, r->p + 3 * b, r->o); }
static inline const bcg_real *rrot(const rpose *r, int b) { return r->R + 9 * b; }
/* the root velocity of a reference pose at its velocity r->u */
static void rroot_vel(const imit *s, const rpose *r, bcg_real *v, bcg_real *w) {
  tu_root_vel_of(&s->L, (const bcg_real(*)[6])r->cdof, r->p + 3 * s->L.root, r->u, v, w);
}

static void observe_one(imit *s, int e, const bcg_real *q, const bcg_real *pa, bcg_task_clock c, bcg_real *o) {
  ws *w = &s->w_[e];
  const bcg_mdata *m = s->m;
  bcg_kin *k = &w->k;
  int r = s->L.root, nj = s->L.nj;
  robot_at(s, w, q);
  tu_proprio(&s->L, m, k, q, q + s->nq, pa, o);
  o += s->pdim;
  bcg_real Hi[9], d[3], pr[3];
  tu_heading(&s->L, k->R[r], Hi);
  wpos(k, r, pr);
  for (int i = 0; i < s->nk; i++) {
    bcg_v3_sub(d, k->p[s->key[i]], k->p[r]);
    bcg_m3_mulv(o, Hi, d);
    o += 3;
  }
  for (int f = 0; f < s->nf; f++) {
    ref_at(s, w, c.phase + (c.t + s->fut[f]) * s->dt);
    bcg_real ph[3], Rh[9];
    rpos(&w->r, r, ph);
    bcg_v3_sub(d, ph, pr);
    bcg_m3_mulv(o, Hi, d);
    bcg_m3_mul(Rh, Hi, rrot(&w->r, r));
    tu_6d(Rh, o + 3);
    o += 9;
    for (int j = 0; j < nj; j++) o[j] = w->r.q[s->L.jq[j]] - q[s->L.jq[j]];
    o += nj;
    for (int i = 0; i < s->nk; i++) {
      bcg_real a[3], b[3];
      rpos(&w->r, s->key[i], a);
      wpos(k, s->key[i], b);
      bcg_v3_sub(d, a, b);
      bcg_m3_mulv(o, Hi, d);
      o += 3;
    }
  }
}

static int observe(void *p, const bcg_real *x, const bcg_real *prev_a, const bcg_task_clock *clk, bcg_real *obs) {
  imit *s = p;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < s->nenv; e++)
    observe_one(s, e, x + (size_t)e * s->nx, prev_a ? prev_a + (size_t)e * s->nu : NULL, clk[e],
                obs + (size_t)e * s->odim);
  return 0;
}

static int observe_envs(void *p, const int *envs, int n, const bcg_real *x, const bcg_real *prev_a,
                        const bcg_task_clock *clk, bcg_real *obs) {
  imit *s = p;
#pragma omp parallel for schedule(static) if (n >= 64)
  for (int i = 0; i < n; i++) {
    int e = envs[i];
    observe_one(s, e, x + (size_t)e * s->nx, prev_a ? prev_a + (size_t)e * s->nu : NULL, clk[e],
                obs + (size_t)e * s->odim);
  }
  return 0;
}

static void observe_vjp_one(imit *s, int e, const bcg_real *q, bcg_task_clock c, const bcg_real *ob, bcg_real *xb,
                            bcg_real *pab) {
  ws *w = &s->w_[e];
  const bcg_mdata *m = s->m;
  bcg_kin *k = &w->k;
  tu_adj *A = &w->a;
  int r = s->L.root, nj = s->L.nj;
  robot_at(s, w, q);
  tu_adj_zero(A);
  tu_proprio_vjp(&s->L, m, k, q + s->nq, ob, A, pab);
  ob += s->pdim;
  bcg_real Hi[9], d[3], db[3], pr[3];
  tu_heading(&s->L, k->R[r], Hi);
  wpos(k, r, pr);
  for (int i = 0; i < s->nk; i++) {
    int b = s->key[i];
    bcg_v3_sub(d, k->p[b], k->p[r]);
    bcg_v3_zero(db);
    tu_mv_vjp(Hi, d, ob, A->Hib, db);
    bcg_v3_addto(A->pb[b], db);
    bcg_v3_addscl(A->pb[r], db, -1);
    ob += 3;
  }
  for (int f = 0; f < s->nf; f++) {
    ref_at(s, w, c.phase + (c.t + s->fut[f]) * s->dt);
    bcg_real ph[3];
    rpos(&w->r, r, ph);
    bcg_v3_sub(d, ph, pr);
    bcg_v3_zero(db);
    tu_mv_vjp(Hi, d, ob, A->Hib, db);
    bcg_v3_addscl(A->pb[r], db, -1);
    /* 6D(Hi Rr^): Hib += Rhb Rr^T */
    bcg_real Rhb[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0}, T[9];
    tu_6d_vjp(ob + 3, Rhb);
    bcg_m3_mulT(T, Rhb, rrot(&w->r, r));
    for (int i = 0; i < 9; i++) A->Hib[i] += T[i];
    ob += 9;
    for (int j = 0; j < nj; j++) A->qb[s->L.jd[j]] -= ob[j];
    ob += nj;
    for (int i = 0; i < s->nk; i++) {
      bcg_real a[3], b[3];
      rpos(&w->r, s->key[i], a);
      wpos(k, s->key[i], b);
      bcg_v3_sub(d, a, b);
      bcg_v3_zero(db);
      tu_mv_vjp(Hi, d, ob, A->Hib, db);
      bcg_v3_addscl(A->pb[s->key[i]], db, -1);
      ob += 3;
    }
  }
  tu_adj_finish(&s->L, m, k, A, xb);
}

static int observe_vjp(void *p, const bcg_real *x, const bcg_real *prev_a, const bcg_task_clock *clk,
                       const bcg_real *ob, bcg_real *xb, bcg_real *pab) {
  imit *s = p;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < s->nenv; e++)
    observe_vjp_one(s, e, x + (size_t)e * s->nx, clk[e], ob + (size_t)e * s->odim, xb + (size_t)e * 2 * s->nv,
                    pab ? pab + (size_t)e * s->nu : NULL);
  return 0;
}

/* the tracking error alone: the mean body-position distance of errors() below, the same operations */
static double track_error(const imit *s, const ws *w) {
  const bcg_mdata *m = s->m;
  double et = 0;
  for (int b = 1; b < m->nbody; b++) {
    bcg_real a[3], c[3], d[3];
    wpos(&w->k, b, a);
    rpos(&w->r, b, c);
    bcg_v3_sub(d, a, c);
    double d2 = bcg_v3_dot(d, d);
    et += sqrt(d2);
  }
  return et / (m->nbody - 1);
}

/* tracking errors (e[5]) and E_track of state q,u against w's reference */
static void errors(const imit *s, ws *w, const bcg_real *q, const bcg_real *u, double *e, double *etrack) {
  const bcg_mdata *m = s->m;
  const bcg_kin *k = &w->k;
  const rpose *kr = &w->r;
  int nb = m->nbody - 1, nj = s->L.nj, r = s->L.root;
  double ep = 0, er = 0, et = 0;
  for (int b = 1; b < m->nbody; b++) {
    bcg_real a[3], c[3], d[3];
    wpos(k, b, a);
    rpos(kr, b, c);
    bcg_v3_sub(d, a, c);
    double d2 = bcg_v3_dot(d, d);
    ep += d2;
    et += sqrt(d2);
    double tr = 0;
    for (int i = 0; i < 9; i++) tr += rrot(kr, b)[i] * k->R[b][i];
    er += 3 - tr;
  }
  e[T_POS] = ep / nb;
  e[T_ROT] = er / nb;
  *etrack = et / nb;
  double jp = 0, jv = 0;
  for (int j = 0; j < nj; j++) {
    double dq = q[s->L.jq[j]] - kr->q[s->L.jq[j]], du = u[s->L.jd[j]] - kr->u[s->L.jd[j]];
    jp += dq * dq;
    jv += du * du;
  }
  e[T_JPOS] = nj ? jp / nj : 0;
  e[T_JVEL] = nj ? jv / nj : 0;
  bcg_real a[3], c[3], d[3], v[3], wv[3], vr[3], wr[3];
  wpos(k, r, a);
  rpos(kr, r, c);
  bcg_v3_sub(d, a, c);
  double tr = 0;
  for (int i = 0; i < 9; i++) tr += rrot(kr, r)[i] * k->R[r][i];
  tu_root_vel(&s->L, k, u, v, wv);
  rroot_vel(s, kr, vr, wr);
  double dv2 = 0, dw2 = 0;
  for (int i = 0; i < 3; i++) dv2 += (v[i] - vr[i]) * (v[i] - vr[i]), dw2 += (wv[i] - wr[i]) * (wv[i] - wr[i]);
  e[T_ROOT] = bcg_v3_dot(d, d) + (3 - tr) + 0.1 * dv2 + 0.1 * dw2;
}

/* ---- ADD: the feature difference and its VJP --------------------------------------- */

/* Delta [adim] of the state (w->k, q, u) against the reference in w (r) */
static void add_delta(const imit *s, const ws *w, const bcg_real *q, const bcg_real *u, bcg_real *o) {
  const bcg_kin *k = &w->k;
  const rpose *kr = &w->r;
  int r = s->L.root, nj = s->L.nj;
  bcg_real a[3], b[3], s6[6], r6[6], H[9], Hr[9], d[3], dr[3], x1[3], x2[3];
  rpos(kr, r, a);
  wpos(k, r, b);
  bcg_v3_sub(o, a, b);
  tu_6d(rrot(kr, r), r6);
  tu_6d(k->R[r], s6);
  for (int i = 0; i < 6; i++) o[3 + i] = r6[i] - s6[i];
  o += 9;
  for (int j = 0; j < nj; j++) o[j] = kr->q[s->L.jq[j]] - q[s->L.jq[j]];
  o += nj;
  tu_heading(&s->L, k->R[r], H);
  tu_heading(&s->L, rrot(kr, r), Hr);
  for (int bb = 1; bb < s->m->nbody; bb++) {
    if (bb == r) continue;
    bcg_v3_sub(dr, kr->p + 3 * bb, kr->p + 3 * r);
    bcg_v3_sub(d, k->p[bb], k->p[r]);
    bcg_m3_mulv(x1, Hr, dr);
    bcg_m3_mulv(x2, H, d);
    bcg_v3_sub(o, x1, x2);
    o += 3;
  }
  bcg_real v[3], wv[3], vr[3], wr[3];
  tu_root_vel(&s->L, k, u, v, wv);
  rroot_vel(s, kr, vr, wr);
  bcg_v3_sub(o, vr, v);
  bcg_v3_sub(o + 3, wr, wv);
  o += 6;
  for (int j = 0; j < nj; j++) o[j] = kr->u[s->L.jd[j]] - u[s->L.jd[j]];
}

/* accumulate into A the adjoint of the simulated state given ob = dL/dDelta */
static void add_delta_vjp(const imit *s, ws *w, const bcg_real *u, const bcg_real *ob, tu_adj *A) {
  const bcg_kin *k = &w->k;
  int r = s->L.root, nj = s->L.nj;
  bcg_v3_addscl(A->pb[r], ob, -1);
  bcg_real n6[6], R6[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 6; i++) n6[i] = -ob[3 + i];
  tu_6d_vjp(n6, R6);
  for (int i = 0; i < 9; i++) A->Rb[i] += R6[i];
  ob += 9;
  for (int j = 0; j < nj; j++) A->qb[s->L.jd[j]] -= ob[j];
  ob += nj;
  bcg_real H[9], d[3], db[3], nb[3];
  tu_heading(&s->L, k->R[r], H);
  for (int bb = 1; bb < s->m->nbody; bb++) {
    if (bb == r) continue;
    bcg_v3_sub(d, k->p[bb], k->p[r]);
    for (int i = 0; i < 3; i++) nb[i] = -ob[i];
    bcg_v3_zero(db);
    tu_mv_vjp(H, d, nb, A->Hib, db);
    bcg_v3_addto(A->pb[bb], db);
    bcg_v3_addscl(A->pb[r], db, -1);
    ob += 3;
  }
  bcg_real vb[3], wb[3];
  for (int i = 0; i < 3; i++) vb[i] = -ob[i], wb[i] = -ob[3 + i];
  tu_root_vel_vjp(&s->L, k, u, vb, wb, A);
  ob += 6;
  for (int j = 0; j < nj; j++) A->ub[s->L.jd[j]] -= ob[j];
}

/* the reward and done flag of environment e (reward's loop body; ADD's
 * share is added over all environments afterwards: reward_add) */
static void reward_one(imit *s, int e, double D, const bcg_real *x, const bcg_real *a, const bcg_real *prev_a,
                       const bcg_task_clock *clk, bcg_real *rew, int *done) {
  ws *w = &s->w_[e];
  const bcg_real *q = x + (size_t)e * s->nx, *ae = a + (size_t)e * s->nu;
  const bcg_real *pe = prev_a ? prev_a + (size_t)e * s->nu : NULL;
  double tau = clk[e].phase + clk[e].t * s->dt, err[5], et;
  robot_at(s, w, q);
  ref_at(s, w, tau);
  errors(s, w, q, q + s->nq, err, &et);
  double r = 0, aa = 0, da = 0;
  if (s->track)
    for (int i = 0; i < 5; i++) r += s->w[i] * exp(-s->sc[i] * err[i]);
  if (s->add) add_delta(s, w, q, q + s->nq, s->delta + (size_t)e * s->adim);
  for (int i = 0; i < s->nu; i++) {
    double d = ae[i] - (pe ? pe[i] : 0);
    aa += ae[i] * ae[i];
    da += d * d;
  }
  if (s->w_self > 0) r -= s->w_self * tu_self_penalty(&s->self, &w->k, 0, NULL);
  if (s->w_limit > 0) r -= s->w_limit * tu_limit_penalty(s->m, q, 0, NULL);
  rew[e] = (bcg_real)(r - s->w_action * aa - s->w_rate * da);
  double h = w->k.p[s->L.root][2] + w->k.o[2];
  if (!(h >= s->term_h) || !(et <= s->max_err)) done[e] = 1;
  else if (clk[e].t >= s->ep_steps || (!s->loop && tau >= D - 1e-9)) done[e] = 2;
  else done[e] = 0;
}

static int reward_add(imit *s, bcg_real *rew) {
  if (s->add) {
    if (add_logits(&s->disc, s->delta, s->nenv, s->z)) return -1;
    for (int e = 0; e < s->nenv; e++) rew[e] += (bcg_real)(s->add_w * s->add_scale * add_reward(s->z[e]));
    add_push(&s->disc, s->delta, s->nenv);
  }
  return 0;
}

static int reward(void *p, const bcg_real *x, const bcg_real *a, const bcg_real *prev_a, const bcg_task_clock *clk,
                  bcg_real *rew, int *done) {
  imit *s = p;
  double D = bcg_motion_duration(&s->mo);
#pragma omp parallel for schedule(static)
  for (int e = 0; e < s->nenv; e++) reward_one(s, e, D, x, a, prev_a, clk, rew, done);
  return reward_add(s, rew);
}

static void reward_vjp_one(imit *s, int e, const bcg_real *q, const bcg_real *ae, const bcg_real *pe,
                           bcg_task_clock ck, bcg_real g, const bcg_real *dbar, bcg_real *xb, bcg_real *ab,
                           bcg_real *pab) {
  ws *w = &s->w_[e];
  const bcg_mdata *m = s->m;
  bcg_kin *k = &w->k;
  const rpose *kr = &w->r;
  tu_adj *A = &w->a;
  const bcg_real *u = q + s->nq;
  int nb = m->nbody - 1, nj = s->L.nj, r = s->L.root;
  double err[5], et, c[5];
  robot_at(s, w, q);
  ref_at(s, w, ck.phase + ck.t * s->dt);
  errors(s, w, q, u, err, &et);
  for (int i = 0; i < 5; i++) c[i] = s->track ? -g * s->w[i] * s->sc[i] * exp(-s->sc[i] * err[i]) : 0; /* dr/de_i */
  tu_adj_zero(A);
  if (dbar) add_delta_vjp(s, w, u, dbar, A);
  if (s->w_self > 0) tu_self_penalty(&s->self, k, -g * s->w_self, A);
  if (s->w_limit > 0) tu_limit_penalty(m, q, -g * s->w_limit, A->qb);
  for (int b = 1; b < m->nbody; b++) {
    bcg_real pa[3], pc[3], d[3], Rb[9];
    wpos(k, b, pa);
    rpos(kr, b, pc);
    bcg_v3_sub(d, pa, pc);
    bcg_v3_addscl(A->pb[b], d, c[T_POS] * 2.0 / nb);
    for (int i = 0; i < 9; i++) Rb[i] = -c[T_ROT] / nb * rrot(kr, b)[i];
    tu_rot_adj(k->R[b], Rb, A->tb[b]);
  }
  for (int j = 0; j < nj; j++) {
    int qa = s->L.jq[j], da = s->L.jd[j];
    A->qb[da] += c[T_JPOS] * 2.0 / nj * (q[qa] - kr->q[qa]);
    A->ub[da] += c[T_JVEL] * 2.0 / nj * (u[da] - kr->u[da]);
  }
  bcg_real pa[3], pc[3], d[3], v[3], wv[3], vr[3], wr[3], vb[3], wb[3];
  wpos(k, r, pa);
  rpos(kr, r, pc);
  bcg_v3_sub(d, pa, pc);
  bcg_v3_addscl(A->pb[r], d, 2 * c[T_ROOT]);
  for (int i = 0; i < 9; i++) A->Rb[i] -= c[T_ROOT] * rrot(kr, r)[i];
  tu_root_vel(&s->L, k, u, v, wv);
  rroot_vel(s, kr, vr, wr);
  for (int i = 0; i < 3; i++) {
    vb[i] = c[T_ROOT] * 0.2 * (v[i] - vr[i]);
    wb[i] = c[T_ROOT] * 0.2 * (wv[i] - wr[i]);
  }
  tu_root_vel_vjp(&s->L, k, u, vb, wb, A);
  for (int i = 0; i < s->nu; i++) {
    /* d/da of -w_action |a|^2 - w_rate |a - prev_a|^2, and d/dprev_a */
    double d = ae[i] - (pe ? pe[i] : 0);
    if (ab) ab[i] += -2 * g * (s->w_action * ae[i] + s->w_rate * d);
    if (pab) pab[i] += 2 * g * s->w_rate * d;
  }
  tu_adj_finish(&s->L, m, k, A, xb);
}

static int reward_vjp(void *p, const bcg_real *x, const bcg_real *a, const bcg_real *prev_a,
                      const bcg_task_clock *clk, const bcg_real *rb, bcg_real *xb, bcg_real *ab, bcg_real *pab) {
  imit *s = p;
  if (s->add) {
#pragma omp parallel for schedule(static)
    for (int e = 0; e < s->nenv; e++) {
      ws *w = &s->w_[e];
      const bcg_real *q = x + (size_t)e * s->nx;
      robot_at(s, w, q);
      ref_at(s, w, clk[e].phase + clk[e].t * s->dt);
      add_delta(s, w, q, q + s->nq, s->delta + (size_t)e * s->adim);
    }
    if (add_logits(&s->disc, s->delta, s->nenv, s->z)) return -1;
    for (int e = 0; e < s->nenv; e++) s->dz[e] = (bcg_real)(rb[e] * s->add_w * s->add_scale * add_reward_dz(s->z[e]));
    if (add_input_vjp(&s->disc, s->nenv, s->dz, s->dbar)) return -1;
  }
#pragma omp parallel for schedule(static)
  for (int e = 0; e < s->nenv; e++)
    reward_vjp_one(s, e, x + (size_t)e * s->nx, a + (size_t)e * s->nu, prev_a ? prev_a + (size_t)e * s->nu : NULL,
                   clk[e], rb[e], s->add ? s->dbar + (size_t)e * s->adim : NULL, xb + (size_t)e * 2 * s->nv, ab ? ab + (size_t)e * s->nu : NULL,
                   pab ? pab + (size_t)e * s->nu : NULL);
  return 0;
}

static const bcg_key_spec keys[] = {
    {"motion", BCG_KEY_PATH, NULL, 0, 0, NULL,
     "reference motion: CSV (one qpos frame per line, header '# fps=30 quat=wxyz') or HDF5 (.h5: dataset qpos "
     "[T][nq], attribute fps), relative to the working directory; see tasks/README.md"},
    {"fps", BCG_KEY_REAL, "0", 0, 10000, NULL, "frame rate of the motion (0: from the file; lafan: 30)"},
    {"quat_order", BCG_KEY_CHOICE, "file", 0, 0, "file|wxyz|xyzw",
     "order of quaternions in the file (file: its header's quat key, else wxyz; lafan: xyzw)"},
    {"motion_format", BCG_KEY_CHOICE, "auto", 0, 0, "auto|bcg|lafan",
     "bcg: CSV with '# fps=..' header or HDF5; lafan: the LAFAN1 retargeting CSV (no header, 30 fps, root xyz, "
     "quaternion x y z w, joints); auto: .h5 is HDF5, a CSV starting with numbers is lafan, else bcg"},
    {"motion_start", BCG_KEY_REAL, "0", 0, 1e6, NULL,
     "start of the segment of the clip to use, in seconds of the file (snapped to the nearest frame)"},
    {"motion_end", BCG_KEY_REAL, "0", 0, 1e6, NULL,
     "end of the segment, in seconds of the file (nearest frame, included); 0: the clip's end"},
    {"loop", BCG_KEY_BOOL, "false", 0, 0, NULL,
     "repeat the clip (the root's horizontal pose continues from the last frame); false: done at its end"},
    {"rsi", BCG_KEY_BOOL, "true", 0, 0, NULL,
     "reference-state initialisation: reset at a uniformly random phase of the clip (else at its start)"},
    {"episode_seconds", BCG_KEY_REAL, "10", 0.01, 1e6, NULL, "time limit of an episode (s)"},
    {"future", BCG_KEY_LIST, "1,2,3", 1, 100, NULL,
     "reference frames in the observation, in control steps ahead (paper: t+1..t+3)"},
    {"key_bodies", BCG_KEY_STRING, "auto", 0, 0, NULL,
     "bodies whose positions enter the observation: comma-separated names, auto (leaf bodies) or none"},
    {"w_body_pos", BCG_KEY_REAL, "0.3", 0, 1e6, NULL, "weight of exp(-scale mean_b |p_b - p^_b|^2)"},
    {"scale_body_pos", BCG_KEY_REAL, "40", 0, 1e6, NULL, "scale of the body-position error (1/m^2)"},
    {"w_body_rot", BCG_KEY_REAL, "0.2", 0, 1e6, NULL, "weight of exp(-scale mean_b (3 - tr(R^_b^T R_b)))"},
    {"scale_body_rot", BCG_KEY_REAL, "5", 0, 1e6, NULL, "scale of the body-orientation error (~1/rad^2)"},
    {"w_joint_pos", BCG_KEY_REAL, "0.2", 0, 1e6, NULL, "weight of exp(-scale mean_j (q_j - q^_j)^2)"},
    {"scale_joint_pos", BCG_KEY_REAL, "5", 0, 1e6, NULL, "scale of the joint-position error (1/rad^2)"},
    {"w_joint_vel", BCG_KEY_REAL, "0.1", 0, 1e6, NULL, "weight of exp(-scale mean_j (u_j - u^_j)^2)"},
    {"scale_joint_vel", BCG_KEY_REAL, "0.1", 0, 1e6, NULL, "scale of the joint-velocity error (s^2/rad^2)"},
    {"w_root", BCG_KEY_REAL, "0.2", 0, 1e6, NULL,
     "weight of exp(-scale (|dp|^2 + (3 - tr) + 0.1 |dv|^2 + 0.1 |dw|^2)) of the root"},
    {"scale_root", BCG_KEY_REAL, "5", 0, 1e6, NULL, "scale of the root error"},
    {"w_action", BCG_KEY_REAL, "0", 0, 1e6, NULL, "weight of the action cost |a|^2"},
    {"w_action_rate", BCG_KEY_REAL, "0", 0, 1e6, NULL,
     "weight of the action-rate penalty |a - prev_a|^2 (prev_a: the previous action, 0 after a reset; docs/design.md "
     "section 8.2; no published weight fits every action scale: off by default)"},
    TU_PENALTY_KEYS,
    {"term_height", BCG_KEY_REAL, "0.6", -1e6, 1e6, NULL,
     "terminate when the root origin is below this height (m)"},
    {"max_error", BCG_KEY_REAL, "0.5", 0, 1e6, NULL,
     "terminate when the mean body-position error exceeds this (m)"},
    {"add", BCG_KEY_BOOL, "false", 0, 0, NULL,
     "add the Adversarial Differential Discriminator reward (docs/design.md section 8.3; tasks/README.md)"},
    {"add_only", BCG_KEY_BOOL, "false", 0, 0, NULL,
     "with add: drop the five tracking terms (the ADD reward replaces them; action terms stay)"},
    {"add_weight", BCG_KEY_REAL, "1", 0, 1e6, NULL, "weight of the ADD reward added to the tracking reward"},
    {"add_reward_scale", BCG_KEY_REAL, "1", 0, 1e6, NULL,
     "scale of r = -log(max(1 - sigmoid(D), 1e-4)) (bounded by 9.21 scale)"},
    {"add_layers", BCG_KEY_LIST, "64,64", 1, 4096, NULL,
     "hidden widths of the discriminator (ELU); small for CPU (AMP/ADD use 1024,512)"},
    {"add_lr", BCG_KEY_REAL, "2.5e-4", 0, 1, NULL, "discriminator Adam learning rate (BCG paper: 2.5e-4)"},
    {"add_grad_penalty", BCG_KEY_REAL, "5", 0, 1e6, NULL,
     "weight of |dD/dx|^2 at the positive x = 0 (exact double backward; AMP's humanoid value 5)"},
    {"add_logit_reg", BCG_KEY_REAL, "0.01", 0, 1e6, NULL,
     "weight of |W_out|^2 of the discriminator's output layer (AMP's disc_logit_reg 0.01)"},
    {"add_weight_decay", BCG_KEY_REAL, "1e-4", 0, 1e6, NULL,
     "L2 weight decay of every discriminator parameter, in Adam (AMP's disc_weight_decay 1e-4)"},
    {"add_replay", BCG_KEY_INT, "100000", 1, 1e8, NULL, "replay buffer of policy Delta samples (ring)"},
    {"add_batch", BCG_KEY_INT, "256", 1, 1e6, NULL, "negatives per discriminator step (plus the one positive)"},
    {"add_steps", BCG_KEY_INT, "4", 0, 1e4, NULL, "discriminator steps per update() (once per learner iteration)"},
};

/* E_track of the evaluation: mean over bodies of |p_b - p^_b| */
static bcg_real tracking_error_one(imit *s, int e, const bcg_real *x, const bcg_task_clock *clk) {
  ws *w = &s->w_[e];
  const bcg_real *q = x + (size_t)e * s->nx;
  robot_at(s, w, q);
  ref_at(s, w, clk[e].phase + clk[e].t * s->dt);
  return (bcg_real)track_error(s, w);
}

static int tracking_error(void *p, const bcg_real *x, const bcg_task_clock *clk, bcg_real *out) {
  imit *s = p;
#pragma omp parallel for schedule(static)
  for (int e = 0; e < s->nenv; e++) out[e] = tracking_error_one(s, e, x, clk);
  return 0;
}

/* reward, tracking_error and observe of one control step, each environment's
 * three together (bcg_task_ops.reward_observe): its scratch (kinematics, the
 * reference ring) is read once instead of three times; the calls and their
 * order per environment are those of the three entries, ADD's share of the
 * reward is added over all environments afterwards as reward does */
static int reward_observe(void *p, const bcg_real *x, const bcg_real *a, const bcg_real *prev_a,
                          const bcg_task_clock *clk, bcg_real *rew, int *done, bcg_real *err, bcg_real *obs) {
  imit *s = p;
  double D = bcg_motion_duration(&s->mo);
#pragma omp parallel for schedule(static)
  for (int e = 0; e < s->nenv; e++) {
    reward_one(s, e, D, x, a, prev_a, clk, rew, done);
    if (err) err[e] = tracking_error_one(s, e, x, clk);
    observe_one(s, e, x + (size_t)e * s->nx, a ? a + (size_t)e * s->nu : NULL, clk[e], obs + (size_t)e * s->odim);
  }
  return reward_add(s, rew);
}

static int update(void *p, int64_t it) {
  imit *s = p;
  return s->add ? add_update(&s->disc, it) : 0;
}

/* checkpoint: the discriminator (nothing without add) */
static int save(void *p, int64_t g) {
  imit *s = p;
  int64_t f[1] = {s->add};
  char e[256];
  if (bcg_h5_write_i64(g, "add", f, 1, e, sizeof e)) return -1;
  return s->add ? add_save(&s->disc, g) : 0;
}

static int load(void *p, int64_t g) {
  imit *s = p;
  int64_t f[1];
  char e[256];
  if (bcg_h5_read_i64(g, "add", f, 1, e, sizeof e) != 1 || f[0] != s->add) return -1;
  return s->add ? add_load(&s->disc, g) : 0;
}

/* the clip's pose at each clock: the one the reward compares with (ref_at's
 * interpolation at tau = phase + t * control_dt), for bcg render's ghost */
static int reference_qpos(void *p, const bcg_task_clock *clk, int n, bcg_real *qpos) {
  const imit *s = p;
  for (int i = 0; i < n; i++) {
    double q[BCG_MAX_Q];
    bcg_motion_qpos(&s->mo, s->m, clk[i].phase + clk[i].t * s->dt, s->loop, q);
    for (int c = 0; c < s->nq; c++) qpos[(size_t)i * s->nq + c] = (bcg_real)q[c];
  }
  return 0;
}

static const bcg_task_ops ops = {sizeof(bcg_task_ops), create, destroy, obs_dim, act_dim, reset, observe,
                                 observe_vjp, reward, reward_vjp, update, tracking_error, save, load,
                                 reference_qpos, observe_envs, reward_observe};

static const bcg_plugin_desc desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_TASK, "imitation", "track a reference motion (CSV/HDF5 qpos frames)"),
    keys, BCG_NKEYS(keys), BCG_CAP_DIFFERENTIABLE | BCG_CAP_NEEDS_FLOOR, &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }
