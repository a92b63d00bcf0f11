/* test_estimator - a minimal estimator: forward counts steps, backward
 * passes the adjoint through unchanged. */
#include <stdlib.h>

#include "bcg/plugin.h"

typedef struct self {
  uint64_t steps;
  long branches;
} self;

static void *create(const bcg_services *svc, const bcg_params *params, bcg_env *env, char *err, size_t errlen) {
  self *s = calloc(1, sizeof *s);
  if (s) s->branches = svc->get_int(params, "branches");
  return s;
}
static void destroy(void *p) { free(p); }
static int forward(void *p, int t, const bcg_real *a) {
  ((self *)p)->steps += (uint64_t)((self *)p)->branches;
  return 0;
}
static int backward(void *p, int t, bcg_real *x_bar, bcg_real *act_bar) { return 0; }
static void reset_tape(void *p) {}
static uint64_t samples(const void *p) { return ((const self *)p)->steps; }

static const bcg_key_spec keys[] = {
    {"branches", BCG_KEY_INT, "1", 1, 64, NULL, "branches per step (test)"},
    {"sigma", BCG_KEY_REAL, "0.01", 0, 1, NULL, "perturbation (test)"},
};

static const bcg_estimator_ops ops = {sizeof(bcg_estimator_ops), create, destroy, forward, backward,
                                      reset_tape, samples};

static const bcg_plugin_desc desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_ESTIMATOR, "test_estimator", "counts steps (test plugin)"),
    keys, BCG_NKEYS(keys), 0, &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }
