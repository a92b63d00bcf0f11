/* test_contact - a minimal contact model for the loader and config tests:
 * every impulse is zero, and so is every input adjoint it adds. */
#include <stdlib.h>
#include <string.h>

#include "bcg/plugin.h"

typedef struct self {
  double kappa;
  long iterations;
} self;

static void *create(const bcg_services *svc, const bcg_params *params, const bcg_model *model, char *err,
                    size_t errlen) {
  (void)model;
  self *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->kappa = svc->get_real(params, "kappa");
  s->iterations = svc->get_int(params, "iterations");
  return s;
}

static void destroy(void *p) { free(p); }

static int solve(void *p, bcg_contact_batch *b) {
  size_t n = (size_t)b->nenv * (size_t)b->ncon;
  memset(b->lam, 0, 3 * n * sizeof(bcg_real));
  memset(b->fn, 0, n * sizeof(bcg_real));
  return 0;
}

static int solve_vjp(void *p, const bcg_contact_batch *b, bcg_contact_adjoint *adj) { return 0; }

static const bcg_key_spec keys[] = {
    {"kappa", BCG_KEY_REAL, "300", 1, 1e6, NULL, "stiffness (test)"},
    {"iterations", BCG_KEY_INT, "10", 1, 1000, NULL, "solver iterations (test)"},
    {"mode", BCG_KEY_CHOICE, "soft", 0, 0, "soft|hard", "a choice (test)"},
    {"verbose", BCG_KEY_BOOL, "false", 0, 0, NULL, "a flag (test)"},
};

static const bcg_contact_ops ops = {sizeof(bcg_contact_ops), create, destroy, solve, solve_vjp, NULL, NULL,
                                    NULL, NULL, NULL};

static const bcg_plugin_desc desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_CONTACT, "test_contact", "zero impulses (test plugin)"),
    keys, BCG_NKEYS(keys), BCG_CAP_DIFFERENTIABLE, &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }
