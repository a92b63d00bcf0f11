/* core/est_device.c - GPU estimators. Learners call an estimator with host
 * arrays (bcg_estimator_ops.forward / backward); an estimator with device
 * entries (forward_cuda / backward_cuda, BCG_CAP_CUDA) gets, with [run]
 * device = cuda, this adapter in between: the states, actions and adjoints
 * of one call go to device buffers, the estimator runs on them (its tapes and
 * its per-environment work stay on the GPU), and what the learner reads
 * comes back. With device = cpu the adapter is not installed and the
 * estimator's host entries run. */
#include "est_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/env.h"
#include "bcg/sim_cuda.h"
#include "plugin_err.h"

#define HAS(o, f) BCG_OPS_HAS(o, bcg_estimator_ops, f)

int bcg_est_has_cuda(const bcg_estimator_ops *o) { return o && HAS(o, forward_cuda) && HAS(o, backward_cuda); }

typedef struct est_dev {
  bcg_estimator_ops ops; /* first: the adapter's table */
  const bcg_estimator_ops *in;
  void *self;
  bcg_env *env;
  const char *name;
  bcg_real *x, *a, *xn, *xnb, *xb, *ab; /* device, [nenv] rows each */
} est_dev;

#define ED(p) ((est_dev *)(p))

static void ed_free_bufs(est_dev *d) {
  bcg_real *p[] = {d->x, d->a, d->xn, d->xnb, d->xb, d->ab};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) bcg_cuda_free(p[i]);
}

static void ed_destroy(void *p) {
  est_dev *d = p;
  if (!d) return;
  d->in->destroy(d->self);
  ed_free_bufs(d);
  free(d);
}

static int ed_copy(est_dev *d, void *dst, const void *src, size_t bytes, const char *what, int t) {
  if (!bytes || !bcg_cuda_copy(dst, src, bytes)) return 0;
  bcg_plugin_err_context("[estimator] %s: copying %s at step %d between host and device failed", d->name, what, t);
  return -1;
}

static int ed_forward(void *p, int t, const bcg_real *x, const bcg_real *a, bcg_real *xn) {
  est_dev *d = p;
  size_t r = sizeof(bcg_real), n = (size_t)d->env->nenv, nx = (size_t)d->env->nx, nu = (size_t)d->env->nu;
  if (ed_copy(d, d->x, x, r * n * nx, "the states", t) || ed_copy(d, d->a, a, r * n * nu, "the actions", t)) return -1;
  int rc = d->in->forward_cuda(d->self, t, d->x, d->a, d->xn, bcg_env_cuda_stream(d->env));
  if (rc) return rc;
  return ed_copy(d, xn, d->xn, r * n * nx, "the next states", t);
}

static int ed_backward(void *p, int t, const bcg_real *xnb, bcg_real *xb, bcg_real *ab) {
  est_dev *d = p;
  size_t r = sizeof(bcg_real), n = (size_t)d->env->nenv, n2 = 2 * (size_t)d->env->nv, nu = (size_t)d->env->nu;
  /* ab is accumulated (+=): it goes down and comes back */
  if (ed_copy(d, d->xnb, xnb, r * n * n2, "the state adjoints", t) ||
      ed_copy(d, d->ab, ab, r * n * nu, "the action adjoints", t))
    return -1;
  int rc = d->in->backward_cuda(d->self, t, d->xnb, d->xb, d->ab, bcg_env_cuda_stream(d->env));
  if (rc) return rc;
  return ed_copy(d, xb, d->xb, r * n * n2, "the state adjoints", t) ||
                 ed_copy(d, ab, d->ab, r * n * nu, "the action adjoints", t)
             ? -1
             : 0;
}

static int ed_begin(void *p) { return ED(p)->in->begin(ED(p)->self); }
static int ed_reset_envs(void *p, const int *envs, int n) { return ED(p)->in->reset_envs(ED(p)->self, envs, n); }
static void ed_stats(const void *p, bcg_estimator_stats *out) { ED(p)->in->stats(ED(p)->self, out); }
static int ed_save(void *p, int64_t g) { return ED(p)->in->save(ED(p)->self, g); }
static int ed_load(void *p, int64_t g) { return ED(p)->in->load(ED(p)->self, g); }
static int ed_log_values(void *p, const char **names, double *values, int cap) {
  return ED(p)->in->log_values(ED(p)->self, names, values, cap);
}

int bcg_est_device_wrap(const bcg_estimator_ops **ops, void **self, bcg_env *env, const char *name, char *err,
                        size_t errlen) {
  const bcg_estimator_ops *in = *ops;
  est_dev *d = calloc(1, sizeof *d);
  if (!d) return snprintf(err, errlen, "[estimator] %s: out of memory", name), -1;
  size_t r = sizeof(bcg_real), n = (size_t)env->nenv;
  d->x = bcg_cuda_malloc(r * n * env->nx);
  d->xn = bcg_cuda_malloc(r * n * env->nx);
  d->a = bcg_cuda_malloc(r * n * (env->nu ? env->nu : 1));
  d->ab = bcg_cuda_malloc(r * n * (env->nu ? env->nu : 1));
  d->xnb = bcg_cuda_malloc(r * n * 2 * env->nv);
  d->xb = bcg_cuda_malloc(r * n * 2 * env->nv);
  if (!d->x || !d->xn || !d->a || !d->ab || !d->xnb || !d->xb) {
    ed_free_bufs(d);
    free(d);
    return snprintf(err, errlen, "[estimator] %s: out of GPU memory for the device copies of %zu environments", name,
                    n),
           -1;
  }
  d->in = in;
  d->self = *self;
  d->env = env;
  d->name = name;
  bcg_estimator_ops *o = &d->ops;
  o->size = (uint32_t)sizeof *o;
  o->create = in->create; /* never called through the adapter */
  o->destroy = ed_destroy;
  o->begin = ed_begin;
  o->forward = ed_forward;
  o->backward = ed_backward;
  o->reset_envs = ed_reset_envs;
  o->stats = ed_stats;
  o->save = HAS(in, save) ? ed_save : NULL;
  o->load = HAS(in, load) ? ed_load : NULL;
  o->log_values = HAS(in, log_values) ? ed_log_values : NULL;
  *ops = o;
  *self = d;
  return 0;
}
