/* core/env.c - state-batch helpers shared by the estimators: one control
 * step of a batch of interleaved states x = (q, u), with a tape, and its
 * adjoint. */
#include "bcg/env.h"

#include <stdlib.h>
#include <string.h>

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
