/* test_learner - a minimal learner: iterate counts iterations. */
#include <stdlib.h>

#include "bcg/plugin.h"

typedef struct self {
  long layers[8];
  int nlayers;
  long iters;
} self;

static void *create(const bcg_services *svc, const bcg_params *params, bcg_trainer *tr, char *err,
                    size_t errlen) {
  self *s = calloc(1, sizeof *s);
  if (s) s->nlayers = svc->get_list(params, "layers", s->layers, 8);
  return s;
}
static void destroy(void *p) { free(p); }
static int iterate(void *p, bcg_learner_stats *st) {
  ((self *)p)->iters++;
  return 0;
}
static int save(void *p, int64_t g) { return 0; }
static int load(void *p, int64_t g) { return 0; }
static int act(void *p, const bcg_real *obs, int n, bcg_real *a) {
  for (int i = 0; i < n; i++) a[i] = 0; /* one action dimension */
  return 0;
}

static const bcg_key_spec keys[] = {
    {"layers", BCG_KEY_LIST, "256,128", 1, 4096, NULL, "hidden layer sizes (test)"},
    {"lr", BCG_KEY_REAL, "0.001", 0, 1, NULL, "learning rate (test)"},
    {"name_tag", BCG_KEY_STRING, "x", 0, 0, NULL, "free text (test)"},
};

static const bcg_learner_ops ops = {sizeof(bcg_learner_ops), create, destroy, iterate, save, load, act};

static const bcg_plugin_desc desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_LEARNER, "test_learner", "counts iterations (test plugin)"),
    keys, BCG_NKEYS(keys), BCG_CAP_NEEDS_BACKWARD, &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }
