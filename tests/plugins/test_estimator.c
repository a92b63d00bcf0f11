/* test_estimator - a minimal estimator: forward copies the state and counts
 * steps, backward passes the adjoint through unchanged. */
#include <stdlib.h>
#include <string.h>

#include "bcg/plugin.h"

typedef struct self {
  long branches;
  int nenv, nx, nxbar;
  bcg_estimator_stats st;
} self;

static void *create(const bcg_services *svc, const bcg_params *params, bcg_env *env, int horizon, char *err,
                    size_t errlen) {
  self *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->branches = svc->get_int(params, "branches");
  s->nenv = 1, s->nx = 2, s->nxbar = 2; /* no env in the tests: one env, two numbers */
  return s;
}
static void destroy(void *p) { free(p); }
static int begin(void *p) { return 0; }
static int forward(void *p, int t, const bcg_real *x, const bcg_real *a, bcg_real *xn) {
  self *s = p;
  if (x && xn) memcpy(xn, x, (size_t)(s->nenv * s->nx) * sizeof(bcg_real));
  s->st.samples += (uint64_t)(s->branches * s->nenv);
  s->st.transitions += (uint64_t)s->nenv;
  return 0;
}
static int backward(void *p, int t, const bcg_real *xn_bar, bcg_real *x_bar, bcg_real *a_bar) {
  self *s = p;
  if (xn_bar && x_bar) memcpy(x_bar, xn_bar, (size_t)(s->nenv * s->nxbar) * sizeof(bcg_real));
  return 0;
}
static int reset_envs(void *p, const int *envs, int n) { return 0; }
static void stats(const void *p, bcg_estimator_stats *out) { *out = ((const self *)p)->st; }

static const bcg_key_spec keys[] = {
    {"branches", BCG_KEY_INT, "1", 1, 64, NULL, "branches per step (test)"},
    {"sigma", BCG_KEY_REAL, "0.01", 0, 1, NULL, "perturbation (test)"},
};

static const bcg_estimator_ops ops = {sizeof(bcg_estimator_ops), create, destroy, begin, forward, backward,
                                      reset_envs, stats,
                                      NULL, NULL /* save, load: no state to checkpoint */, NULL /* log_values */,
                                      NULL, NULL /* forward_cuda, backward_cuda */};

static const bcg_plugin_desc desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_ESTIMATOR, "test_estimator", "copies states, counts steps (test plugin)"),
    keys, BCG_NKEYS(keys), 0, &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }
