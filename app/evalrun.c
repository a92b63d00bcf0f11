/* evalrun.c - what bcg eval and bcg render share (see evalrun.h). */
#include "evalrun.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bcg/loader.h"
#include "cmd.h"

int bcg_cli_resolve_run(const char *target, int no_ckpt, const char *hint, char *run_dir, size_t rdlen, char *ckpt,
                        size_t cklen, char *cfgpath, size_t cflen) {
  if (bcg_cli_is_dir(target)) {
    snprintf(run_dir, rdlen, "%s", target);
    if (!no_ckpt && bcg_train_latest_checkpoint(run_dir, ckpt, cklen) < 0)
      return bcg_cli_error("%s: no checkpoint in %s/checkpoints %s", target, target, hint);
  } else {
    snprintf(ckpt, cklen, "%s", target);
    char tmp[PATH_MAX - 8];
    snprintf(tmp, sizeof tmp, "%s", target);
    char *s = strrchr(tmp, '/');
    if (s) *s = 0; else snprintf(tmp, sizeof tmp, ".");
    snprintf(run_dir, rdlen, "%s/..", tmp); /* RUN/checkpoints/ckpt_*.h5 */
  }
  snprintf(cfgpath, cflen, "%s/config.ini", run_dir);
  if (!bcg_cli_is_dir(target) && access(cfgpath, R_OK) != 0) {
    if (access(target, R_OK) != 0)
      return bcg_cli_error("%s: cannot read: %s", target, strerror(errno));
    const char *base = strrchr(target, '/');
    base = base ? base + 1 : target;
    if (bcg_train_checkpoint_iteration(base) < 0)
      return bcg_cli_error("%s: not a checkpoint (RUN_DIR/checkpoints/ckpt_NNNNNNNNN.h5) nor a run directory", target);
    return bcg_cli_error("%s: a checkpoint outside its run directory: its configuration %s is missing (keep the "
                         "checkpoint in RUN_DIR/checkpoints/, or copy the whole run directory)",
                         target, cfgpath);
  }
  return -1;
}

bcg_config *bcg_cli_eval_config(const char *cfgpath, char **ov, int *nov) {
  /* the episodes step on the CPU (a handful of environments, below any
   * sim_min_batch; MuJoCo's side is the CPU anyway), so a run trained with
   * device = cuda evaluates on a machine without a GPU; put first, a user's
   * run.device=cuda on the command line still wins */
  memmove(ov + 1, ov, sizeof *ov * (size_t)*nov);
  ov[0] = "run.device=cpu";
  (*nov)++;
  static char *nominal[] = {"sim.dr_friction_min=-1", "sim.dr_friction_max=-1", "sim.dr_mass_scale=0",
                            "sim.dr_com_offset=0", "sim.dr_push_interval=0", "sim.dr_push_velocity=0"};
  for (int i = 0; i < 6; i++) ov[(*nov)++] = nominal[i];
  char err[4096];
  bcg_config *cfg = NULL;
  if (bcg_config_load_with(&cfg, bcg_registry_global(), cfgpath, *nov, ov, err, sizeof err)) {
    bcg_cli_error("%s", err);
    return NULL;
  }
  const bcg_params *tp = bcg_config_section(cfg, "task");
  if (tp && bcg_params_value(tp, "rsi") && bcg_params_get_bool(tp, "rsi")) {
    bcg_config_free(cfg);
    cfg = NULL;
    ov[(*nov)++] = "task.rsi=false";
    if (bcg_config_load_with(&cfg, bcg_registry_global(), cfgpath, *nov, ov, err, sizeof err)) {
      bcg_cli_error("%s", err);
      return NULL;
    }
  }
  return cfg;
}

bcg_session *bcg_cli_eval_session(bcg_session *S, const bcg_config *cfg, const char *cfgpath, char **ov, int nov,
                                  int runs, bcg_session *small, bcg_config **cfg_small) {
  memset(small, 0, sizeof *small);
  *cfg_small = NULL;
  if (bcg_config_get_int(cfg, "run", "num_envs") == runs) return S;
  char nenv_ov[64], e2[4096];
  snprintf(nenv_ov, sizeof nenv_ov, "run.num_envs=%d", runs);
  ov[nov] = nenv_ov;
  if (!bcg_config_load_with(cfg_small, bcg_registry_global(), cfgpath, nov + 1, ov, e2, sizeof e2) &&
      !bcg_session_open(small, *cfg_small, e2, sizeof e2))
    return small;
  return S;
}

int bcg_cli_opt_int(const char *s, long lo, long hi, int *v) {
  char *e;
  errno = 0;
  long x = strtol(s, &e, 10);
  if (e == s || *e || errno || x < lo || x > hi) return -1;
  *v = (int)x;
  return 0;
}

int bcg_cli_opt_real(const char *s, double lo, double hi, double *v) {
  char *e;
  double x = strtod(s, &e);
  if (e == s || *e || !(x >= lo && x <= hi)) return -1;
  *v = x;
  return 0;
}
