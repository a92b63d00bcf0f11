/* core/env.c - state-batch helpers shared by the estimators: one control
 * step of a batch of interleaved states x = (q, u), with a tape, and its
 * adjoint. */
#include "bcg/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/config.h"

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
  env->sim = bcg_sim_create(model, sp, nenv, contact_ops, contact, err, errlen);
  if (!env->sim) {
    env->own = 0; /* the caller keeps what it passed */
    free(env);
    return NULL;
  }
  return env;
}

bcg_env *bcg_env_create(const bcg_config *cfg, int nenv, char *err, size_t errlen) {
  const char *path = bcg_config_get_string(cfg, "model", "path");
  char merr[1024];
  bcg_model *model = bcg_model_load(path, merr, sizeof merr);
  if (!model) {
    bcg_config_errorf(cfg, "model", "path", err, errlen, "%s", merr);
    return NULL;
  }
  bcg_simparams sp;
  const bcg_contact_ops *ops = NULL;
  void *self = NULL;
  if (bcg_simparams_from_config(cfg, model, &sp, err, errlen) ||
      bcg_contact_from_config(cfg, model, &ops, &self, err, errlen)) {
    bcg_model_free(model);
    return NULL;
  }
  if (strcmp(bcg_config_get_string(cfg, "run", "device"), "cuda") == 0) {
    bcg_config_errorf(cfg, "run", "device", err, errlen,
                      "the CUDA backend is not wired into training yet (use device = cpu)");
    if (ops) ops->destroy(self);
    bcg_model_free(model);
    return NULL;
  }
  bcg_env *env = bcg_env_create_from(model, &sp, ops, self, nenv, (uint64_t)bcg_config_get_int(cfg, "run", "seed"),
                                     1, err, errlen);
  if (!env) {
    if (ops) ops->destroy(self);
    bcg_model_free(model);
  }
  return env;
}

void bcg_env_free(bcg_env *env) {
  if (!env) return;
  bcg_sim_free(env->sim);
  if (env->own) {
    if (env->contact_ops && env->contact) env->contact_ops->destroy(env->contact);
    bcg_model_free((bcg_model *)env->model);
  }
  free(env);
}

size_t bcg_env_tape_size(const bcg_env *env, int n) {
  return (size_t)env->sim->sp.substeps * n * env->nx;
}

/* split / join interleaved states through the sim's ping-pong scratch */
int bcg_env_step(bcg_env *env, int n, const bcg_real *x, const bcg_real *a, bcg_real *xn, bcg_real *tape) {
  int nq = env->nq, nv = env->nv, nx = env->nx;
  bcg_real *buf = calloc((size_t)n * nx * 2, sizeof(bcg_real));
  if (!buf) return -1;
  bcg_real *q = buf, *u = q + (size_t)n * nq, *qo = u + (size_t)n * nv, *uo = qo + (size_t)n * nq;
  for (int e = 0; e < n; e++) {
    memcpy(q + (size_t)e * nq, x + (size_t)e * nx, sizeof(bcg_real) * nq);
    memcpy(u + (size_t)e * nv, x + (size_t)e * nx + nq, sizeof(bcg_real) * nv);
  }
  int rc = bcg_sim_control_step(env->sim, n, q, u, a, qo, uo, tape);
  for (int e = 0; e < n; e++) {
    memcpy(xn + (size_t)e * nx, qo + (size_t)e * nq, sizeof(bcg_real) * nq);
    memcpy(xn + (size_t)e * nx + nq, uo + (size_t)e * nv, sizeof(bcg_real) * nv);
  }
  free(buf);
  return rc;
}

int bcg_env_step_vjp(bcg_env *env, int n, const bcg_real *tape, const bcg_real *a, const bcg_real *xnb,
                     bcg_real *xb, bcg_real *ab) {
  return bcg_sim_control_step_vjp(env->sim, n, tape, a, xnb, xb, ab);
}

void bcg_env_perturb(const bcg_env *env, const bcg_real *x, const bcg_real *dq, const bcg_real *du, bcg_real *xo) {
  const bcg_mdata *m = &env->model->m;
  bcg_qadd(m, x, dq, xo);
  for (int d = 0; d < env->nv; d++) xo[env->nq + d] = x[env->nq + d] + (du ? du[d] : 0);
}
