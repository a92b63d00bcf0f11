/* my_estimator.c - template of a bcg gradient-estimator plugin.
 *
 * Copy this folder, rename the file, the plugin name ("my_estimator") and the
 * NAME in the Makefile, then change forward/backward. As it stands it is plain
 * autodiff (the exact VJP of every control step) with the state adjoint of
 * each step multiplied by the key adjoint_scale (default 1: exact).
 *
 * Build against an installed bcg:   make      (pkg-config bcg; see Makefile)
 * Use it:   BCG_PLUGIN_PATH=$PWD/build bcg describe my_estimator
 *           [estimator]
 *           plugin = my_estimator
 *           adjoint_scale = 0.9
 *
 * The contract (bcg/plugin.h, bcg_estimator_ops; the SDK's README.md):
 *   - an estimator owns one control step: forward(t) advances every
 *     environment from x_t to x_{t+1} under a_t; backward(t) takes the
 *     adjoint of x_{t+1} and returns the adjoints of x_t and a_t;
 *   - states are passed explicitly: x [nenv][nx] with nx = nq + nv (qpos then
 *     qvel); state adjoints [nenv][2 nv] (tangent q_bar, then u_bar);
 *   - backward reads only what its forward saved (here: the tape and the
 *     actions of step t), never the env's "current" state;
 *   - no global mutable state: everything lives in the instance create()
 *     returns; no constructors/destructors; one exported symbol. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bcg/env.h>    /* bcg_env, bcg_env_step, bcg_env_step_vjp, bcg_env_tape_size */
#include <bcg/plugin.h> /* the ABI: descriptor, key specs, services, ops tables */
/* #include <bcg/rng.h>    counter-based Philox RNG, if the estimator draws
 *                         noise: bcg_rng_normal(env->seed, BCG_RNG_PURPOSE_USER + k,
 *                         env_index, step, i) -- a pure function, so runs are
 *                         reproducible and the backward can redraw what the
 *                         forward drew */

/* ---- per-environment code ----------------------------------------------------
 * Written once as BCG_HD (static inline; __host__ __device__ under nvcc), so
 * the same function can serve a CUDA entry point compiled from this file with
 * nvcc -x cu. No atomics, no globals: one environment's data in, out. */
BCG_HD void scale_adjoint(bcg_real *xb, int n, bcg_real s) {
  for (int i = 0; i < n; i++) xb[i] *= s;
}

/* ---- the instance -------------------------------------------------------------- */

typedef struct my_est {
  bcg_env *env;
  int horizon;             /* most forward steps between two begin() calls */
  bcg_real adjoint_scale;  /* the key */
  size_t tape_n;           /* reals of one step's tape */
  bcg_real *tape;          /* [horizon][tape_n]: one state per substep */
  bcg_real *act;           /* [horizon][nenv][nu]: the actions of each taped step */
  unsigned char *recorded; /* [horizon]: step t was taped since begin() */
  bcg_estimator_stats st;
} my_est;

static void my_destroy(void *p) {
  my_est *s = p;
  if (!s) return; /* destroy must accept what a failed create left */
  free(s->tape);
  free(s->act);
  free(s->recorded);
  free(s);
}

/* create: return NULL and write ONE line into err on failure (the host adds
 * the context). Keys are read through the services table; they are already
 * validated against the declared specs below (type, range, choices), and
 * defaults are filled in. params is NULL when a host creates the plugin
 * without an [estimator] section (tools, tests): use the declared defaults. */
static void *my_create(const bcg_services *svc, const bcg_params *params, bcg_env *env, int horizon, char *err,
                       size_t errlen) {
  if (!env || horizon < 0) {
    if (errlen) snprintf(err, errlen, "my_estimator: needs an environment and a horizon >= 0");
    return NULL;
  }
  my_est *s = calloc(1, sizeof *s);
  if (!s) goto oom;
  s->env = env;
  s->horizon = horizon;
  s->adjoint_scale = params ? (bcg_real)svc->get_real(params, "adjoint_scale") : (bcg_real)1;
  s->tape_n = bcg_env_tape_size(env, env->nenv);
  if (horizon > 0) { /* horizon 0: forward only, no tape */
    size_t na = (size_t)env->nenv * (size_t)env->nu;
    s->tape = malloc(sizeof(bcg_real) * s->tape_n * (size_t)horizon);
    s->act = malloc(sizeof(bcg_real) * (na ? na : 1) * (size_t)horizon);
    s->recorded = calloc((size_t)horizon, 1);
    if (!s->tape || !s->act || !s->recorded) goto oom;
  }
  return s;
oom:
  if (errlen) snprintf(err, errlen, "my_estimator: out of memory for a horizon of %d steps", horizon);
  my_destroy(s);
  return NULL;
}

/* begin: start a new horizon: forget the tape and end every bundle */
static int my_begin(void *p) {
  my_est *s = p;
  if (s->horizon > 0) memset(s->recorded, 0, (size_t)s->horizon);
  return 0;
}

/* forward: advance every environment from x_t to x_{t+1} under a_t (t counts
 * from begin). Save here everything backward(t) will need. */
static int my_forward(void *p, int t, const bcg_real *x, const bcg_real *a, bcg_real *xn) {
  my_est *s = p;
  bcg_env *env = s->env;
  int n = env->nenv;
  int taped = t >= 0 && t < s->horizon;
  bcg_real *tape = taped ? s->tape + s->tape_n * (size_t)t : NULL;
  int rc = bcg_env_step(env, n, x, a, xn, tape); /* all environments, one batch */
  if (taped) {
    memcpy(s->act + (size_t)t * n * env->nu, a, sizeof(bcg_real) * (size_t)n * env->nu);
    s->recorded[t] = rc == 0;
  }
  /* honest sample counting: every simulated (branch) control step is one sample */
  s->st.samples += (uint64_t)n;
  s->st.transitions += (uint64_t)n;
  return rc;
}

/* backward: given the adjoint of x_{t+1}, WRITE the adjoint of x_t and
 * ACCUMULATE (+=) the adjoint of a_t; called for t = T-1 down to 0. */
static int my_backward(void *p, int t, const bcg_real *xn_bar, bcg_real *x_bar, bcg_real *a_bar) {
  my_est *s = p;
  bcg_env *env = s->env;
  if (t < 0 || t >= s->horizon || !s->recorded[t]) return -1;
  int n = env->nenv, nv = env->nv;
  int rc = bcg_env_step_vjp(env, n, s->tape + s->tape_n * (size_t)t, s->act + (size_t)t * n * env->nu, xn_bar,
                            x_bar, a_bar);
  if (rc) return rc;
  /* ---- your change to the gradient goes here ---- */
  if (s->adjoint_scale != (bcg_real)1)
    for (int e = 0; e < n; e++) scale_adjoint(x_bar + (size_t)e * 2 * nv, 2 * nv, s->adjoint_scale);
  return 0;
}

/* reset_envs: these environments were reset after step t: end their bundles
 * (the learner cuts their adjoints itself). Nothing to do without state
 * carried across steps. */
static int my_reset_envs(void *p, const int *envs, int n) {
  (void)p;
  (void)envs;
  (void)n;
  return 0;
}

static void my_stats(const void *p, bcg_estimator_stats *out) { *out = ((const my_est *)p)->st; }

/* ---- the descriptor: what `bcg describe my_estimator` prints -------------------- */

/* name, type, default (INI text; NULL = required), min, max, choices ("a|b"
 * for BCG_KEY_CHOICE), one-line help saying where the default comes from */
static const bcg_key_spec keys[] = {
    {"adjoint_scale", BCG_KEY_REAL, "1", 0, 1, NULL,
     "factor on the state adjoint each step passes back (1: exact autodiff; < 1 discounts long-range gradients)"},
};

/* The function table: size first, then the entries in bcg_estimator_ops order. */
static const bcg_estimator_ops ops = {sizeof(bcg_estimator_ops), my_create, my_destroy, my_begin, my_forward,
                                      my_backward, my_reset_envs, my_stats,
                                      NULL, NULL /* save, load: no state to checkpoint */, NULL /* log_values */,
                                      NULL, NULL /* forward_cuda, backward_cuda: host only (see example/clip_autodiff.c) */};

static const bcg_plugin_desc desc = {
    /* ABI version, descriptor size, kind, name ([a-z0-9_]+, <= 31 chars),
     * one-line description, sizeof(bcg_real) */
    BCG_PLUGIN_HEADER(BCG_KIND_ESTIMATOR, "my_estimator", "template: autodiff with a scaled state adjoint"),
    keys, BCG_NKEYS(keys),  /* declared INI keys of [estimator] */
    BCG_CAP_DIFFERENTIABLE, /* capability flags */
    &ops};

/* The one exported symbol. */
BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }
