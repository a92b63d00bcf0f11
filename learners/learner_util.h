/* learners/learner_util.h - small helpers shared by shac.c and ppo.c:
 * building MLPs from keys, checkpoint I/O of networks, optimisers and
 * normalisers, and finiteness checks. Header-only so that each learner stays
 * one plugin file. */
#ifndef BCG_LEARNER_UTIL_H
#define BCG_LEARNER_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/config.h"
#include "bcg/nn.h"
#include "bcg/plugin.h"
#include "bcg/runlog.h"

static inline void *lu_calloc(size_t n, size_t size) { return calloc(n ? n : 1, size); }

static inline int lu_finite(const bcg_real *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite((double)x[i])) return 0;
  return 1;
}

/* MLP in -> layers -> out with the activation and LayerNorm placement named
 * by keys `activation` and `layernorm` of p (none|pre|post). */
static inline int lu_mlp(bcg_mlp *m, const bcg_services *svc, const bcg_params *p, const char *layers_key,
                         int in, int out, int extra, bcg_real extra_init, int max_batch, char *err, size_t errlen) {
  bcg_mlp_config c;
  memset(&c, 0, sizeof c);
  c.in_dim = in;
  c.out_dim = out;
  long l[BCG_MLP_MAX_HIDDEN + 1];
  int n = svc->get_list(p, layers_key, l, BCG_MLP_MAX_HIDDEN + 1);
  if (n > BCG_MLP_MAX_HIDDEN) {
    snprintf(err, errlen, "%s: at most %d hidden layers", layers_key, BCG_MLP_MAX_HIDDEN);
    return -1;
  }
  c.nhidden = n;
  for (int i = 0; i < n; i++) c.hidden[i] = (int)l[i];
  if (bcg_act_parse(svc->get_string(p, "activation"), &c.hidden_act)) {
    snprintf(err, errlen, "activation: unknown '%s'", svc->get_string(p, "activation"));
    return -1;
  }
  c.out_act = BCG_ACT_IDENTITY;
  const char *ln = svc->get_string(p, "layernorm");
  c.layernorm = !strcmp(ln, "pre") ? BCG_LN_PRE_ACT : !strcmp(ln, "post") ? BCG_LN_POST_ACT : BCG_LN_NONE;
  c.init = !strcmp(svc->get_string(p, "init"), "orthogonal") ? BCG_INIT_ORTHOGONAL : BCG_INIT_UNIFORM;
  c.init_gain = c.init == BCG_INIT_ORTHOGONAL ? (bcg_real)sqrt(2.0) : 1;
  c.init_gain_out = c.init == BCG_INIT_ORTHOGONAL ? (bcg_real)0.01 : 1;
  c.extra = extra;
  c.extra_init = extra_init;
  c.max_batch = max_batch;
  int rc = bcg_mlp_create(m, &c);
  if (rc) snprintf(err, errlen, "%s: cannot build the network: %s", layers_key, bcg_nn_strerror(rc));
  return rc ? -1 : 0;
}

/* ---- checkpoint I/O (group g); readers demand the exact size ---------------- */

static inline int lu_save_reals(int64_t g, const char *name, const bcg_real *x, size_t n) {
  char e[512];
  return bcg_h5_write_reals(g, name, x, n, e, sizeof e);
}

static inline int lu_load_reals(int64_t g, const char *name, bcg_real *x, size_t n) {
  char e[512];
  if (bcg_h5_length(g, name) != (long)n) return -1;
  return bcg_h5_read_reals(g, name, x, n, e, sizeof e) == (long)n ? 0 : -1;
}

static inline int lu_save_i64(int64_t g, const char *name, const int64_t *x, size_t n) {
  char e[512];
  return bcg_h5_write_i64(g, name, x, n, e, sizeof e);
}

static inline int lu_load_i64(int64_t g, const char *name, int64_t *x, size_t n) {
  char e[512];
  if (bcg_h5_length(g, name) != (long)n) return -1;
  return bcg_h5_read_i64(g, name, x, n, e, sizeof e) == (long)n ? 0 : -1;
}

static inline int lu_save_doubles(int64_t g, const char *name, const double *x, size_t n) {
  char e[512];
  return bcg_h5_write_doubles(g, name, x, n, e, sizeof e);
}

static inline int lu_load_doubles(int64_t g, const char *name, double *x, size_t n) {
  char e[512];
  if (bcg_h5_length(g, name) != (long)n) return -1;
  return bcg_h5_read_doubles(g, name, x, n, e, sizeof e) == (long)n ? 0 : -1;
}

static inline int lu_save_ints(int64_t g, const char *name, const int *x, size_t n) {
  int64_t *t = malloc((n ? n : 1) * sizeof *t);
  if (!t) return -1;
  for (size_t i = 0; i < n; i++) t[i] = x[i];
  int rc = lu_save_i64(g, name, t, n);
  free(t);
  return rc;
}

static inline int lu_load_ints(int64_t g, const char *name, int *x, size_t n) {
  int64_t *t = malloc((n ? n : 1) * sizeof *t);
  if (!t) return -1;
  int rc = lu_load_i64(g, name, t, n);
  for (size_t i = 0; !rc && i < n; i++) x[i] = (int)t[i];
  free(t);
  return rc;
}

/* "<prefix>/params" */
/* the task clocks of n environments as prefix/t, prefix/flags (int64) and
 * prefix/phase (double, exact) */
static inline int lu_save_clock(int64_t g, const char *prefix, const bcg_task_clock *c, size_t n) {
  char nm[256];
  int64_t *t = malloc((n ? n : 1) * sizeof *t), *f = malloc((n ? n : 1) * sizeof *f);
  double *ph = malloc((n ? n : 1) * sizeof *ph);
  int rc = !t || !f || !ph;
  for (size_t i = 0; !rc && i < n; i++) t[i] = c[i].t, f[i] = c[i].flags, ph[i] = c[i].phase;
  snprintf(nm, sizeof nm, "%s/t", prefix);
  rc = rc || lu_save_i64(g, nm, t, n);
  snprintf(nm, sizeof nm, "%s/flags", prefix);
  rc = rc || lu_save_i64(g, nm, f, n);
  snprintf(nm, sizeof nm, "%s/phase", prefix);
  rc = rc || lu_save_doubles(g, nm, ph, n);
  free(t), free(f), free(ph);
  return rc ? -1 : 0;
}

static inline int lu_load_clock(int64_t g, const char *prefix, bcg_task_clock *c, size_t n) {
  char nm[256];
  int64_t *t = malloc((n ? n : 1) * sizeof *t), *f = malloc((n ? n : 1) * sizeof *f);
  double *ph = malloc((n ? n : 1) * sizeof *ph);
  int rc = !t || !f || !ph;
  snprintf(nm, sizeof nm, "%s/t", prefix);
  rc = rc || lu_load_i64(g, nm, t, n);
  snprintf(nm, sizeof nm, "%s/flags", prefix);
  rc = rc || lu_load_i64(g, nm, f, n);
  snprintf(nm, sizeof nm, "%s/phase", prefix);
  rc = rc || lu_load_doubles(g, nm, ph, n);
  for (size_t i = 0; !rc && i < n; i++) c[i].t = (int32_t)t[i], c[i].flags = (int32_t)f[i], c[i].phase = ph[i];
  free(t), free(f), free(ph);
  return rc ? -1 : 0;
}

static inline void lu_name(char *buf, size_t len, const char *prefix, const char *what) {
  snprintf(buf, len, "%s/%s", prefix, what);
}

static inline int lu_save_mlp(int64_t g, const char *prefix, const bcg_mlp *m) {
  char n[256];
  lu_name(n, sizeof n, prefix, "params");
  return lu_save_reals(g, n, m->params, m->nparams);
}

static inline int lu_load_mlp(int64_t g, const char *prefix, bcg_mlp *m) {
  char n[256];
  lu_name(n, sizeof n, prefix, "params");
  return lu_load_reals(g, n, m->params, m->nparams);
}

static inline int lu_save_adam(int64_t g, const char *prefix, const bcg_adam *a) {
  char n[256];
  int64_t step = a->step;
  double lr = (double)a->lr;
  lu_name(n, sizeof n, prefix, "m");
  if (lu_save_reals(g, n, a->m, a->n)) return -1;
  lu_name(n, sizeof n, prefix, "v");
  if (lu_save_reals(g, n, a->v, a->n)) return -1;
  lu_name(n, sizeof n, prefix, "step");
  if (lu_save_i64(g, n, &step, 1)) return -1;
  lu_name(n, sizeof n, prefix, "lr");
  return lu_save_doubles(g, n, &lr, 1);
}

static inline int lu_load_adam(int64_t g, const char *prefix, bcg_adam *a) {
  char n[256];
  int64_t step;
  double lr;
  lu_name(n, sizeof n, prefix, "m");
  if (lu_load_reals(g, n, a->m, a->n)) return -1;
  lu_name(n, sizeof n, prefix, "v");
  if (lu_load_reals(g, n, a->v, a->n)) return -1;
  lu_name(n, sizeof n, prefix, "step");
  if (lu_load_i64(g, n, &step, 1)) return -1;
  lu_name(n, sizeof n, prefix, "lr");
  if (lu_load_doubles(g, n, &lr, 1)) return -1;
  a->step = step;
  a->lr = (bcg_real)lr;
  return 0;
}

static inline int lu_save_norm(int64_t g, const char *prefix, const bcg_normalizer *z) {
  char n[256];
  lu_name(n, sizeof n, prefix, "mean");
  if (lu_save_reals(g, n, z->mean, (size_t)z->dim)) return -1;
  lu_name(n, sizeof n, prefix, "var");
  if (lu_save_reals(g, n, z->var, (size_t)z->dim)) return -1;
  lu_name(n, sizeof n, prefix, "count");
  return lu_save_doubles(g, n, &z->count, 1);
}

static inline int lu_load_norm(int64_t g, const char *prefix, bcg_normalizer *z) {
  char n[256];
  lu_name(n, sizeof n, prefix, "mean");
  if (lu_load_reals(g, n, z->mean, (size_t)z->dim)) return -1;
  lu_name(n, sizeof n, prefix, "var");
  if (lu_load_reals(g, n, z->var, (size_t)z->dim)) return -1;
  lu_name(n, sizeof n, prefix, "count");
  return lu_load_doubles(g, n, &z->count, 1);
}

/* A frozen copy of a normaliser's statistics (the iteration's constants). */
static inline int lu_norm_copy(bcg_normalizer *dst, const bcg_normalizer *src) {
  if (!dst->mean && bcg_normalizer_init(dst, src->dim, src->clip, src->count)) return -1;
  memcpy(dst->mean, src->mean, (size_t)src->dim * sizeof(bcg_real));
  memcpy(dst->var, src->var, (size_t)src->dim * sizeof(bcg_real));
  dst->count = src->count;
  dst->clip = src->clip;
  dst->var_eps = src->var_eps;
  return 0;
}

#endif
