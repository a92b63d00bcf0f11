/* tests/testest.h - an estimator plugin instance made from a config, for the
 * suites that drive estimators directly (test_estimators, test_sdk). Include
 * it after defining the suite's own
 *     static bcg_config *load_cfg(const char *estimator_section_body);
 * (what else the config holds is the suite's choice). */
#ifndef BCG_TESTEST_H
#define BCG_TESTEST_H

#include <stdio.h>

#include "bcg/config.h"
#include "bcg/env.h"
#include "bcg/loader.h"
#include "testutil.h"

typedef struct est {
  const bcg_estimator_ops *ops;
  void *self;
  bcg_config *cfg;
} est;

static est make_est(bcg_env *env, const char *text, int horizon) {
  est E = {0};
  E.cfg = load_cfg(text);
  CU_ASSERT_PTR_NOT_NULL_FATAL(E.cfg);
  const bcg_plugin *pl = bcg_config_plugin(E.cfg, BCG_KIND_ESTIMATOR);
  CU_ASSERT_PTR_NOT_NULL_FATAL(pl);
  E.ops = pl->desc->ops;
  char err[512];
  E.self = E.ops->create(bcg_services_host(), bcg_config_section(E.cfg, "estimator"), env, horizon, err, sizeof err);
  if (!E.self) fprintf(stderr, "create: %s\n", err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(E.self);
  return E;
}

static void free_est(est *E) {
  if (E->self) E->ops->destroy(E->self);
  bcg_config_free(E->cfg);
}

#endif
