/* core/env.c - state-batch helpers shared by the estimators: one control
 * step of a batch of interleaved states x = (q, u), with a tape, and its
 * adjoint. */
#include "bcg/env.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/config.h"
#include "bcg/loader.h"
#include "bcg/sim_cuda.h"
#include "bcg/rng.h"
#include "clock.h"
#include "plugin_err.h"

static void domain_free(bcg_domain *d) {
  if (!d) return;
  free(d->m);
  free(d->mu);
  free(d->clock);
  free(d->draw);
  free(d->ver);
  free(d);
}

static uint64_t domain_ids; /* bcg_domain.id */

int bcg_env_set_domain(bcg_env *env, const bcg_drparams *dr, char *err, size_t errlen) {
  if (env->parent) {
    snprintf(err, errlen, "an env created like another shares its domain: set it on the parent");
    return -1;
  }
  env->dom_gen++; /* device copies refresh at the next step */
  bcg_sim_set_domain(env->sim, NULL);
  domain_free(env->dom);
  env->dom = NULL;
  env->dr = *dr;
  if (!bcg_drparams_active(dr)) return 0;
  const bcg_mdata *m = &env->model->m;
  int n = env->nenv, push = dr->push_interval > 0 && dr->push_velocity > 0;
  bcg_domain *d = calloc(1, sizeof *d);
  if (!d) goto oom;
  d->n = n;
  d->seed = env->seed;
  d->push_dof = -1;
  if (dr->mass_scale > 0 || dr->com_offset > 0) {
    if (!(d->m = malloc(sizeof(bcg_mdata) * (size_t)n))) goto oom;
  }
  if (dr->friction_min >= 0 && !(d->mu = malloc(sizeof(bcg_real) * (size_t)n))) goto oom;
  if (!(d->clock = calloc((size_t)n, sizeof(uint32_t)))) goto oom;
  if (!(d->draw = calloc((size_t)n, sizeof(uint64_t)))) goto oom;
  if (!(d->ver = calloc((size_t)n, sizeof(uint32_t)))) goto oom;
  d->id = __atomic_add_fetch(&domain_ids, 1, __ATOMIC_RELAXED);
  if (push) {
    if (m->nbody < 2 || m->body_jntnum[1] < 1 || m->jnt_type[m->body_jntadr[1]] != BCG_JNT_FREE) {
      snprintf(err, errlen, "dr_push_interval: pushes need a model whose first body has a free joint");
      domain_free(d);
      return -1;
    }
    d->push_dof = m->jnt_dofadr[m->body_jntadr[1]];
    double p = env->control_dt / dr->push_interval;
    d->push_prob = (bcg_real)(p < 1 ? p : 1);
    d->push_vel = dr->push_velocity;
  }
  env->dom = d;
  bcg_env_randomize(env, NULL, n, 0);
  bcg_sim_set_domain(env->sim, d);
  return 0;
oom:
  snprintf(err, errlen, "out of memory allocating the domain randomisation of %d environments", n);
  domain_free(d);
  return -1;
}

/* index layout of the draws of one (env, draw) stream: 0 friction; 4 + 4 b + {0: mass, 1..3: com} */
void bcg_env_randomize(bcg_env *env, const int *envs, int n, uint64_t draw) {
  bcg_domain *d = env->dom;
  if (!d || env->parent) return;
  env->dom_gen++;
  const bcg_drparams *dr = &env->dr;
  const bcg_mdata *m0 = &env->model->m;
  uint32_t k = (uint32_t)draw;
  /* each environment's draw depends only on (seed, e, draw), so the
   * environments (listed once each) go over the threads when there are many:
   * a model is tens of kB, and PPO's 4096 environments reset about a hundred
   * per control step */
#pragma omp parallel for schedule(static) if (n >= 16)
  for (int i = 0; i < n; i++) {
    int e = envs ? envs[i] : i;
    if (e < 0 || e >= d->n) continue;
    d->draw[e] = draw;
    d->ver[e]++;
    if (d->mu) {
      double lo = dr->friction_min, hi = dr->friction_max;
      d->mu[e] = (bcg_real)(lo + (hi - lo) * (double)bcg_rng_uniform(d->seed, BCG_RNG_DOMAIN, (uint32_t)e, k, 0));
    }
    if (d->m) {
      bcg_mdata *me = &d->m[e];
      *me = *m0;
      for (int b = 1; b < m0->nbody; b++) {
        uint32_t base = 4 + 4 * (uint32_t)b;
        if (dr->mass_scale > 0) {
          double u = bcg_rng_uniform(d->seed, BCG_RNG_DOMAIN, (uint32_t)e, k, base);
          bcg_real sc = (bcg_real)(1 + dr->mass_scale * (2 * u - 1));
          me->body_mass[b] *= sc;
          for (int t = 0; t < 3; t++) me->body_inertia[b][t] *= sc;
        }
        if (dr->com_offset > 0)
          for (int t = 0; t < 3; t++) {
            double u = bcg_rng_uniform(d->seed, BCG_RNG_DOMAIN, (uint32_t)e, k, base + 1 + (uint32_t)t);
            me->body_ipos[b][t] += (bcg_real)(dr->com_offset * (2 * u - 1));
          }
      }
    }
  }
}

void bcg_env_tick(bcg_env *env, const int *envs, int n) {
  bcg_domain *d = env->dom;
  if (!d || env->parent) return;
  for (int i = 0; i < n; i++) {
    int e = envs ? envs[i] : i;
    if (e >= 0 && e < d->n) d->clock[e]++;
  }
}

/* ---- device = cuda: the batched stepper on the GPU --------------------------
 * The env keeps its CPU sim for its parameters and the per-environment
 * diagnostics arrays; control steps and their adjoints run on the GPU with
 * states, actions and tapes copied in and out per call (tapes come back to
 * the caller's host buffer, in the CPU layout). */
typedef struct env_cuda {
  bcg_cuda_sim *s;
  bcg_real *q, *u, *qo, *uo, *a, *tape, *xb, *xnb, *ab; /* device */
  const int *envmap;   /* bcg_env_set_envmap: handed to the device at each call */
  int synced;          /* the device holds env->dom as of generation gen */
  uint32_t gen;
  uint64_t dom_id;     /* the domain (bcg_domain.id) the device holds, 0: none */
  uint32_t *seen;      /* [dom->n] its environments' versions (bcg_domain.ver) on the device */
  int *redrawn;        /* [dom->n] scratch: environments re-drawn since */
  int min_batch;       /* batches of fewer environments step on the CPU sim ([run] sim_min_batch) */
} env_cuda;

static void env_cuda_free(env_cuda *c) {
  if (!c) return;
  bcg_real *p[] = {c->q, c->u, c->qo, c->uo, c->a, c->tape, c->xb, c->xnb, c->ab};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) bcg_cuda_free(p[i]);
  bcg_cuda_sim_free(c->s);
  free(c->seen);
  free(c->redrawn);
  free(c);
}

static int env_sync_domain(bcg_env *env);
static void split_free(bcg_env *env);

static int env_cuda_attach(bcg_env *env, const bcg_simparams *sp, char *err, size_t errlen) {
  char cerr[512];
  cerr[0] = 0;
  if (!bcg_cuda_available(cerr, sizeof cerr)) return snprintf(err, errlen, "device = cuda: %.400s", cerr), -1;
  env_cuda *c = calloc(1, sizeof *c);
  if (!c) return snprintf(err, errlen, "out of memory"), -1;
  int n = env->nenv, nq = env->nq, nv = env->nv, nu = env->nu;
  c->s = bcg_cuda_sim_create(env->model, sp, n, env->contact_ops, env->contact, err, errlen);
  if (!c->s) { free(c); return -1; }
  size_t r = sizeof(bcg_real);
  c->q = bcg_cuda_malloc(r * n * nq); c->qo = bcg_cuda_malloc(r * n * nq);
  c->u = bcg_cuda_malloc(r * n * nv); c->uo = bcg_cuda_malloc(r * n * nv);
  c->a = bcg_cuda_malloc(r * n * nu); c->ab = bcg_cuda_malloc(r * n * nu);
  c->xb = bcg_cuda_malloc(r * n * 2 * nv); c->xnb = bcg_cuda_malloc(r * n * 2 * nv);
  c->tape = bcg_cuda_malloc(r * (size_t)sp->substeps * n * env->nx);
  if (!c->q || !c->qo || !c->u || !c->uo || !c->a || !c->ab || !c->xb || !c->xnb || !c->tape) {
    env_cuda_free(c);
    return snprintf(err, errlen, "device = cuda: out of GPU memory for %d environments", n), -1;
  }
  c->min_batch = 1;
  env->cuda_sim = c;
  env->device = 1;
  if (env_sync_domain(env)) /* the domain on the device now (its per-environment models and friction) */
    return snprintf(err, errlen, "device = cuda: copying the domain randomisation to the device failed: %.300s",
                    bcg_cuda_sim_error(c->s)), -1;
  return 0;
}

/* An env created like another follows its parent's domain; the device copy
 * of the domain (per-environment models and friction) follows dom_gen. */
static int env_sync_domain(bcg_env *env) {
  const bcg_env *p = env->parent;
  if (p && (env->dom != p->dom || env->dom_gen != p->dom_gen)) {
    env->dom = p->dom;
    env->dr = p->dr;
    env->dom_gen = p->dom_gen;
    bcg_sim_set_domain(env->sim, env->dom);
  }
  env_cuda *c = env->cuda_sim;
  if (c && (!c->synced || c->gen != env->dom_gen)) {
    const bcg_domain *d = env->dom;
    if (c->synced && d && c->dom_id == d->id) {
      /* the same domain, some environments re-drawn (resets): send those only */
      int k = 0;
      for (int e = 0; e < d->n; e++)
        if (d->ver[e] != c->seen[e]) c->redrawn[k++] = e;
      if (bcg_cuda_sim_update_domain(c->s, c->redrawn, k)) return -1;
    } else {
      free(c->seen);
      free(c->redrawn);
      c->seen = NULL;
      c->redrawn = NULL;
      c->dom_id = 0;
      c->synced = 0;
      if (d && (!(c->seen = malloc(sizeof(uint32_t) * (size_t)d->n)) ||
                !(c->redrawn = malloc(sizeof(int) * (size_t)d->n))))
        return -1;
      if (bcg_cuda_sim_set_domain(c->s, d)) return -1;
      c->dom_id = d ? d->id : 0;
    }
    if (d) memcpy(c->seen, d->ver, sizeof(uint32_t) * (size_t)d->n);
    c->synced = 1;
    c->gen = env->dom_gen;
  }
  return 0;
}

static int env_cuda_step(bcg_env *env, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a, bcg_real *qo,
                         bcg_real *uo, bcg_real *tape) {
  env_cuda *c = env->cuda_sim;
  size_t r = sizeof(bcg_real);
  int nq = env->nq, nv = env->nv;
  if (bcg_cuda_sim_set_envmap(c->s, c->envmap, n) || bcg_cuda_copy(c->q, q, r * n * nq) || bcg_cuda_copy(c->u, u, r * n * nv) ||
      bcg_cuda_copy(c->a, a, r * n * env->nu) ||
      bcg_cuda_sim_control_step(c->s, n, c->q, c->u, c->a, c->qo, c->uo, c->tape) ||
      bcg_cuda_copy(qo, c->qo, r * n * nq) || bcg_cuda_copy(uo, c->uo, r * n * nv) ||
      (tape && bcg_cuda_copy(tape, c->tape, r * bcg_env_tape_size(env, n))) ||
      bcg_cuda_sim_diagnostics(c->s, n, env->sim->maxfn, env->sim->maxpen, env->sim->bad) ||
      bcg_cuda_sim_nactive(c->s, n, env->sim->nact))
    return -1;
  return 0;
}

static int env_cuda_step_vjp(bcg_env *env, int n, const bcg_real *tape, const bcg_real *a, const bcg_real *xnb,
                             bcg_real *xb, bcg_real *ab) {
  env_cuda *c = env->cuda_sim;
  size_t r = sizeof(bcg_real);
  if (bcg_cuda_sim_set_envmap(c->s, c->envmap, n) || bcg_cuda_copy(c->tape, tape, r * bcg_env_tape_size(env, n)) || bcg_cuda_copy(c->a, a, r * n * env->nu) ||
      bcg_cuda_copy(c->xnb, xnb, r * n * 2 * env->nv) || bcg_cuda_copy(c->ab, ab, r * n * env->nu) ||
      bcg_cuda_sim_control_step_vjp(c->s, n, c->tape, c->a, c->xnb, c->xb, c->ab) ||
      bcg_cuda_copy(xb, c->xb, r * n * 2 * env->nv) || bcg_cuda_copy(ab, c->ab, r * n * env->nu))
    return -1;
  return 0;
}

bcg_env *bcg_env_create_from(bcg_model *model, const bcg_simparams *sp, const bcg_contact_ops *contact_ops,
                             void *contact, int nenv, uint64_t seed, int own, char *err, size_t errlen) {
  bcg_env *env = calloc(1, sizeof *env);
  if (!env) return snprintf(err, errlen, "out of memory"), NULL;
  env->model = model;
  env->own = own;
  env->contact_ops = contact_ops;
  env->contact = contact;
  env->nenv = nenv;
  env->nq = model->m.nq;
  env->nv = model->m.nv;
  env->nu = model->m.nu;
  env->nx = env->nq + env->nv;
  env->seed = seed;
  env->control_dt = sp->dt * sp->substeps;
  bcg_drparams_default(&env->dr);
  env->sim = bcg_sim_create(model, sp, nenv, contact_ops, contact, err, errlen);
  if (!env->sim) {
    env->own = 0; /* the caller keeps what it passed */
    free(env);
    return NULL;
  }
  return env;
}

int bcg_env_check_floor(const bcg_config *cfg, const bcg_model *model, char *err, size_t errlen) {
  const bcg_plugin *pt = bcg_config_plugin(cfg, BCG_KIND_TASK);
  const bcg_mdata *m = &model->m;
  if (!pt || !(pt->desc->caps & BCG_CAP_NEEDS_FLOOR) || (m->has_floor && m->ncp > 0) ||
      bcg_config_get_bool(cfg, "model", "allow_no_floor"))
    return 0;
  bcg_config_errorf(cfg, "model", "path", err, errlen,
                    "%s: %s, but task '%s' stands on a floor (it would fall through): %s, or set [model] "
                    "allow_no_floor = true",
                    model->path,
                    m->has_floor ? "the floor has no contact points (no geom can touch it, or contacts are disabled)"
                                 : "no floor (no collidable plane on the world body)",
                    pt->desc->name,
                    m->has_floor ? "give the feet collision geoms (sphere, capsule, box)"
                                 : "load the robot's scene file, which adds the floor (<geom type=\"plane\">)");
  return -1;
}

bcg_model *bcg_model_from_config(const bcg_config *cfg, char *err, size_t errlen) {
  const char *path = bcg_config_get_string(cfg, "model", "path");
  char merr[1400];
  bcg_model_opts o;
  bcg_model_opts_default(&o);
  o.mesh_points = (int)bcg_config_get_int(cfg, "model", "mesh_contact_points");
  o.contact_bodies = bcg_config_get_string(cfg, "model", "contact_bodies");
  bcg_model *model = bcg_model_load_opts(path, &o, merr, sizeof merr);
  if (!model) bcg_config_errorf(cfg, "model", o.failed_key[0] ? o.failed_key : "path", err, errlen, "%s", merr);
  return model;
}

bcg_env *bcg_env_create(const bcg_config *cfg, int nenv, char *err, size_t errlen) {
  bcg_model *model = bcg_model_from_config(cfg, err, errlen);
  if (!model) return NULL;
  if (bcg_env_check_floor(cfg, model, err, errlen)) {
    bcg_model_free(model);
    return NULL;
  }
  bcg_simparams sp;
  bcg_drparams dr;
  const bcg_contact_ops *ops = NULL;
  void *self = NULL;
  if (bcg_simparams_from_config(cfg, model, &sp, err, errlen) || bcg_drparams_from_config(cfg, &dr, err, errlen) ||
      bcg_contact_from_config(cfg, model, &ops, &self, err, errlen)) {
    bcg_model_free(model);
    return NULL;
  }
  bcg_env *env = bcg_env_create_from(model, &sp, ops, self, nenv, (uint64_t)bcg_config_get_int(cfg, "run", "seed"),
                                     1, err, errlen);
  if (!env) {
    if (ops) ops->destroy(self);
    bcg_model_free(model);
    return NULL;
  }
  const bcg_plugin *cpl = bcg_config_plugin(cfg, BCG_KIND_CONTACT);
  if (cpl) snprintf(env->contact_name, sizeof env->contact_name, "%s", cpl->desc->name);
  if (cpl && (cpl->desc->caps & BCG_CAP_SLICES)) bcg_sim_set_slices(env->sim, 1);
  char derr[512];
  if (bcg_env_set_domain(env, &dr, derr, sizeof derr)) {
    bcg_config_errorf(cfg, "sim", "dr_push_interval", err, errlen, "%s", derr);
    bcg_env_free(env);
    return NULL;
  }
  if (strcmp(bcg_config_get_string(cfg, "run", "device"), "cuda") == 0) {
    if (env_cuda_attach(env, &sp, derr, sizeof derr)) {
      bcg_config_errorf(cfg, "run", "device", err, errlen, "%s", derr);
      bcg_env_free(env);
      return NULL;
    }
    bcg_env_set_cuda_min_batch(env, (int)bcg_config_get_int(cfg, "run", "sim_min_batch"));
  }
  return env;
}

bcg_env *bcg_env_create_like(const bcg_env *parent, int nenv, char *err, size_t errlen) {
  bcg_env *env = bcg_env_create_from((bcg_model *)parent->model, &parent->sim->sp, parent->contact_ops,
                                     parent->contact, nenv, parent->seed, 0, err, errlen);
  if (!env) return NULL;
  env->parent = parent;
  env->control_dt = parent->control_dt;
  bcg_sim_set_slices(env->sim, parent->sim->slices);
  memcpy(env->contact_name, parent->contact_name, sizeof env->contact_name);
  if (env_sync_domain(env) || (parent->cuda_sim && env_cuda_attach(env, &parent->sim->sp, err, errlen))) {
    bcg_env_free(env);
    return NULL;
  }
  if (parent->cuda_sim) bcg_env_set_cuda_min_batch(env, ((const env_cuda *)parent->cuda_sim)->min_batch);
  return env;
}

void bcg_env_set_cuda_min_batch(bcg_env *env, int n) {
  if (env->cuda_sim) ((env_cuda *)env->cuda_sim)->min_batch = n > 1 ? n : 1;
}

/* control-step batches (forward and VJP) run by envs with device = cuda, per device (bcg_env_device_batches) */
static uint64_t dev_batches[2]; /* GPU, CPU */

void bcg_env_device_batches(uint64_t *gpu, uint64_t *cpu) {
  if (gpu) *gpu = __atomic_load_n(&dev_batches[0], __ATOMIC_RELAXED);
  if (cpu) *cpu = __atomic_load_n(&dev_batches[1], __ATOMIC_RELAXED);
}

/* device = cuda: this batch on the GPU, or (fewer than [run] sim_min_batch) on the CPU sim */
static int on_gpu(const bcg_env *env, int n) {
  const env_cuda *c = env->cuda_sim;
  if (!c) return 0;
  int g = n >= c->min_batch;
  __atomic_fetch_add(&dev_batches[g ? 0 : 1], 1, __ATOMIC_RELAXED);
  return g;
}

void bcg_env_set_envmap(bcg_env *env, const int *envmap) {
  bcg_sim_set_envmap(env->sim, envmap);
  if (env->cuda_sim) ((env_cuda *)env->cuda_sim)->envmap = envmap;
}

void bcg_env_free(bcg_env *env) {
  if (!env) return;
  split_free(env);
  env_cuda_free(env->cuda_sim);
  bcg_sim_free(env->sim);
  if (!env->parent) domain_free(env->dom);
  if (env->own) {
    if (env->contact_ops && env->contact) env->contact_ops->destroy(env->contact);
    bcg_model_free((bcg_model *)env->model);
  }
  free(env);
}

bcg_env_diag bcg_env_diagnostics(bcg_env *env) {
  bcg_env_diag d = {env->sim->maxfn, env->sim->maxpen, env->sim->bad};
  return d;
}
int bcg_env_substeps(const bcg_env *env) { return env->sim->sp.substeps; }
bcg_real bcg_env_contact_margin(const bcg_env *env) { return env->sim->sp.margin; }

double bcg_steps_for(double seconds, double dt) {
  const double x = seconds / dt, r = nearbyint(x);
  return fabs(x - r) <= 1e-6 * fmax(1.0, fabs(x)) ? r : ceil(x);
}

size_t bcg_env_tape_size(const bcg_env *env, int n) {
  return (size_t)env->sim->sp.substeps * n * env->nx;
}

/* ---- process-wide time in the stepper (bcg_env_time) ---- */
static uint64_t env_ns[2]; /* forward, vjp */

void bcg_env_time(double *fwd_s, double *vjp_s) {
  if (fwd_s) *fwd_s = bcg_clock_s(&env_ns[0]);
  if (vjp_s) *vjp_s = bcg_clock_s(&env_ns[1]);
}

static int env_control_step(bcg_env *env, int n, const bcg_real *x, const bcg_real *a, bcg_real *xn, bcg_real *tape);

/* a failed physics call's context for the error channel (core/plugin_err.h) */
static void env_fail_context(const bcg_env *env, const char *what, int n, int rc) {
  if (env->contact_name[0])
    bcg_plugin_err_context("[contact] %s: %s of %d environments returned %d", env->contact_name, what, n, rc);
  else
    bcg_plugin_err_context("%s of %d environments returned %d", what, n, rc);
}

int bcg_env_control_step(bcg_env *env, int n, const bcg_real *x, const bcg_real *a, bcg_real *xn, bcg_real *tape) {
  uint64_t t0 = bcg_mono_ns();
  int rc = env_control_step(env, n, x, a, xn, tape);
  bcg_clock_add(&env_ns[0], t0);
  if (rc) env_fail_context(env, "control step", n, rc);
  return rc;
}

static void split_free(bcg_env *env) {
  if (env->split_pinned) bcg_cuda_host_free(env->split);
  else free(env->split);
  env->split = NULL;
  env->nsplit = 0;
  env->split_pinned = 0;
}

#define ENV_SPLIT_PAR_MIN 1024 /* environments from which the split and join run over the threads */

/* split / join interleaved states through the sim's ping-pong scratch */
static int env_control_step(bcg_env *env, int n, const bcg_real *x, const bcg_real *a, bcg_real *xn, bcg_real *tape) {
  if (n <= 0) return 0;
  if (env_sync_domain(env)) return -1;
  int nq = env->nq, nv = env->nv, nx = env->nx;
  size_t need = (size_t)n * nx * 2;
  size_t need_all = need + (size_t)n * env->nu; /* and the actions, for the device's copy */
  if (env->nsplit < need_all) { /* kept for the next calls: a control step allocates nothing */
    /* an env on the GPU: page-locked, so its copies to and from the device run at the DMA engine's speed */
    bcg_real *b = env->cuda_sim ? bcg_cuda_host_alloc(sizeof(bcg_real) * need_all) : NULL;
    int pinned = b != NULL;
    if (!b && !(b = malloc(sizeof(bcg_real) * need_all))) return -1;
    split_free(env);
    env->split = b;
    env->nsplit = need_all;
    env->split_pinned = pinned;
  }
  bcg_real *buf = env->split;
  bcg_real *q = buf, *u = q + (size_t)n * nq, *qo = u + (size_t)n * nv, *uo = qo + (size_t)n * nq;
  /* over the threads for large batches (PPO's 4096 environments: about 0.4 ms
   * a control step serially, split and join together) */
#pragma omp parallel for schedule(static) if (n >= ENV_SPLIT_PAR_MIN)
  for (int e = 0; e < n; e++) {
    memcpy(q + (size_t)e * nq, x + (size_t)e * nx, sizeof(bcg_real) * nq);
    memcpy(u + (size_t)e * nv, x + (size_t)e * nx + nq, sizeof(bcg_real) * nv);
  }
  int rc;
  if (on_gpu(env, n)) {
    bcg_real *ab = uo + (size_t)n * nv; /* the actions through the same buffer */
    memcpy(ab, a, sizeof(bcg_real) * (size_t)n * env->nu);
    rc = env_cuda_step(env, n, q, u, ab, qo, uo, tape);
  } else
    rc = bcg_sim_control_step(env->sim, n, q, u, a, qo, uo, tape);
#pragma omp parallel for schedule(static) if (n >= ENV_SPLIT_PAR_MIN)
  for (int e = 0; e < n; e++) {
    memcpy(xn + (size_t)e * nx, qo + (size_t)e * nq, sizeof(bcg_real) * nq);
    memcpy(xn + (size_t)e * nx + nq, uo + (size_t)e * nv, sizeof(bcg_real) * nv);
  }
  return rc;
}

int bcg_env_step(bcg_env *env, int n, const bcg_real *x, const bcg_real *a, bcg_real *xn, bcg_real *tape) {
  int rc = bcg_env_control_step(env, n, x, a, xn, tape);
  if (!rc) bcg_env_tick(env, NULL, n);
  return rc;
}

int bcg_env_step_vjp(bcg_env *env, int n, const bcg_real *tape, const bcg_real *a, const bcg_real *xnb,
                     bcg_real *xb, bcg_real *ab) {
  if (n <= 0) return 0;
  uint64_t t0 = bcg_mono_ns(); /* the domain's upload counted too, as in the forward */
  if (env_sync_domain(env)) return -1;
  int rc = on_gpu(env, n) ? env_cuda_step_vjp(env, n, tape, a, xnb, xb, ab)
                         : bcg_sim_control_step_vjp(env->sim, n, tape, a, xnb, xb, ab);
  bcg_clock_add(&env_ns[1], t0);
  if (rc) env_fail_context(env, "control step VJP", n, rc);
  return rc;
}

void bcg_env_perturb(const bcg_env *env, const bcg_real *x, const bcg_real *dq, const bcg_real *du, bcg_real *xo) {
  const bcg_mdata *m = &env->model->m;
  bcg_qadd(m, x, dq, xo);
  for (int d = 0; d < env->nv; d++) xo[env->nq + d] = x[env->nq + d] + (du ? du[d] : 0);
}

/* ---- device arrays: the control step for GPU estimators --------------------------- */

int bcg_env_on_cuda(const bcg_env *env) { return env && env->cuda_sim != NULL; }

void *bcg_env_cuda_stream(bcg_env *env) {
  env_cuda *c = env ? env->cuda_sim : NULL;
  return c ? bcg_cuda_sim_stream(c->s) : NULL;
}

static int env_cuda_only(bcg_env *env, int n, const char *what) {
  if (!env->cuda_sim) {
    bcg_plugin_err_context("%s: this env steps on the CPU ([run] device = cpu): use the host-array call", what);
    return -1;
  }
  if (n > env->nenv) {
    bcg_plugin_err_context("%s: %d environments, the env holds %d", what, n, env->nenv);
    return -1;
  }
  return 0;
}

int bcg_env_step_cuda(bcg_env *env, int n, const bcg_real *x, const bcg_real *a, bcg_real *xn, bcg_real *tape) {
  if (env_cuda_only(env, n, "bcg_env_step_cuda")) return -1;
  if (n <= 0) return 0;
  uint64_t t0 = bcg_mono_ns();
  env_cuda *c = env->cuda_sim;
  size_t r = sizeof(bcg_real), nx = (size_t)env->nx, nq = (size_t)env->nq, nv = (size_t)env->nv, rows = (size_t)n;
  /* x [n][nq + nv] <-> the stepper's q [n][nq], u [n][nv]: strided device-to-device copies */
  int rc = env_sync_domain(env) || bcg_cuda_sim_set_envmap(c->s, c->envmap, n) ||
                   bcg_cuda_copy2d(c->q, nq * r, x, nx * r, nq * r, rows) ||
                   bcg_cuda_copy2d(c->u, nv * r, x + nq, nx * r, nv * r, rows) ||
                   bcg_cuda_sim_control_step(c->s, n, c->q, c->u, a, c->qo, c->uo, tape) ||
                   bcg_cuda_copy2d(xn, nx * r, c->qo, nq * r, nq * r, rows) ||
                   bcg_cuda_copy2d(xn + nq, nx * r, c->uo, nv * r, nv * r, rows) ||
                   bcg_cuda_sim_diagnostics(c->s, n, env->sim->maxfn, env->sim->maxpen, env->sim->bad) ||
                   bcg_cuda_sim_nactive(c->s, n, env->sim->nact)
               ? -1
               : 0;
  __atomic_fetch_add(&dev_batches[0], 1, __ATOMIC_RELAXED);
  bcg_clock_add(&env_ns[0], t0);
  if (rc) env_fail_context(env, "control step on device arrays", n, rc);
  else bcg_env_tick(env, NULL, n);
  return rc;
}

int bcg_env_step_vjp_cuda(bcg_env *env, int n, const bcg_real *tape, const bcg_real *a, const bcg_real *xnb,
                          bcg_real *xb, bcg_real *ab) {
  if (env_cuda_only(env, n, "bcg_env_step_vjp_cuda")) return -1;
  if (n <= 0) return 0;
  uint64_t t0 = bcg_mono_ns();
  env_cuda *c = env->cuda_sim;
  int rc = env_sync_domain(env) || bcg_cuda_sim_set_envmap(c->s, c->envmap, n) ||
                   bcg_cuda_sim_control_step_vjp(c->s, n, tape, a, xnb, xb, ab)
               ? -1
               : 0;
  __atomic_fetch_add(&dev_batches[0], 1, __ATOMIC_RELAXED);
  bcg_clock_add(&env_ns[1], t0);
  if (rc) env_fail_context(env, "control step VJP on device arrays", n, rc);
  return rc;
}
