/* test_task - a minimal task: zero observations and rewards, never done. */
#include <stdlib.h>
#include <string.h>

#include "bcg/plugin.h"

typedef struct self {
  int nenv;
} self;

enum { OBS = 4, ACT = 2, NX = 3 };

static void *create(const bcg_services *svc, const bcg_params *params, bcg_env *env, char *err, size_t errlen) {
  self *s = calloc(1, sizeof *s);
  if (s) s->nenv = (int)svc->get_int(params, "nenv");
  return s;
}
static void destroy(void *p) { free(p); }
static int obs_dim(const void *p) { return OBS; }
static int act_dim(const void *p) { return ACT; }
static int reset(void *p, const int *envs, int n, uint64_t draw, bcg_real *x, bcg_task_clock *clk) {
  for (int i = 0; i < n; i++) {
    memset(x + (size_t)envs[i] * NX, 0, NX * sizeof(bcg_real));
    clk[envs[i]] = (bcg_task_clock){0, 0, 0.0};
  }
  return 0;
}
static int observe(void *p, const bcg_real *x, const bcg_real *prev_a, const bcg_task_clock *clk, bcg_real *obs) {
  memset(obs, 0, (size_t)((self *)p)->nenv * OBS * sizeof(bcg_real));
  return 0;
}
static int observe_vjp(void *p, const bcg_real *x, const bcg_real *prev_a, const bcg_task_clock *clk,
                       const bcg_real *ob, bcg_real *xb, bcg_real *ab) {
  return 0;
}
static int reward(void *p, const bcg_real *x, const bcg_real *a, const bcg_real *prev_a, const bcg_task_clock *clk,
                  bcg_real *rew, int *done) {
  for (int i = 0; i < ((self *)p)->nenv; i++) rew[i] = 0, done[i] = 0;
  return 0;
}
static int reward_vjp(void *p, const bcg_real *x, const bcg_real *a, const bcg_real *prev_a,
                      const bcg_task_clock *clk, const bcg_real *rb, bcg_real *xb, bcg_real *ab, bcg_real *pab) {
  return 0;
}

static const bcg_key_spec keys[] = {
    {"nenv", BCG_KEY_INT, "2", 1, 1024, NULL, "environments (test)"},
    {"motion", BCG_KEY_STRING, NULL, 0, 0, NULL, "required key (test)"},
};

static const bcg_task_ops ops = {sizeof(bcg_task_ops), create, destroy, obs_dim, act_dim, reset, observe,
                                 observe_vjp, reward, reward_vjp, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

static const bcg_plugin_desc desc = {
    BCG_PLUGIN_HEADER(BCG_KIND_TASK, "test_task", "zero reward (test plugin)"),
    keys, BCG_NKEYS(keys), BCG_CAP_DIFFERENTIABLE, &ops};

BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void) { return &desc; }
