/* cli.c - helpers shared by the bcg subcommands. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/env.h"
#include "bcg/loader.h"
#include "bcg/model.h"
#include "bcg/sim.h"
#include "bcg/train.h"
#include "cmd.h"

int bcg_cli_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* 1 when "section.key=value" names one of the n keys */
static int names_key(const char *kv, const char *const *keys, size_t n) {
  const char *eq = strchr(kv, '=');
  if (!eq) return 0;
  for (size_t k = 0; k < n; k++)
    if ((size_t)(eq - kv) == strlen(keys[k]) && !strncmp(kv, keys[k], strlen(keys[k]))) return 1;
  return 0;
}

int bcg_cli_resume_override(const char *kv) {
  static const char *allowed[] = {"run.iterations",      "run.samples",   "run.seconds", "run.checkpoint_every",
                                  "run.keep_last",       "run.keep_every", "run.threads", "run.check_replicas",
                                  "learner.critic_overlap"};
  return names_key(kv, allowed, sizeof allowed / sizeof allowed[0]);
}

int bcg_cli_bench_override(const char *kv) {
  static const char *placement[] = {"run.sim_min_batch", "run.nn_min_batch", "run.flush_denormals"};
  return bcg_cli_resume_override(kv) || names_key(kv, placement, sizeof placement / sizeof placement[0]);
}

int bcg_cli_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "bcg: error: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return BCG_EXIT_ERROR;
}

int bcg_cli_usage(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "bcg: %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(see 'bcg help %s')\n", cmd);
  va_end(ap);
  return BCG_EXIT_USAGE;
}

int bcg_cli_load_config(const char *cmd, int argc, char **argv, bcg_config **cfg) {
  *cfg = NULL;
  const char *path = NULL;
  char *ov[256];
  int nov = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] == '-' && a[1]) return bcg_cli_usage(cmd, "unknown option '%s'", a);
    if (!path && !strchr(a, '=')) {
      path = a;
      continue;
    }
    if (!strchr(a, '=')) return bcg_cli_usage(cmd, "'%s' is not an override section.key=value", a);
    if (nov == 256) return bcg_cli_usage(cmd, "more than 256 overrides");
    ov[nov++] = argv[i];
  }
  if (!path) return bcg_cli_usage(cmd, "missing CONFIG");
  char err[2048];
  const bcg_registry *reg = bcg_registry_global();
  if (bcg_config_load_with(cfg, reg, path, nov, ov, err, sizeof err)) {
    bcg_cli_error("%s", err);
    if (strstr(err, "plugin named") && bcg_registry_error_count(reg) > 0)
      fprintf(stderr, "bcg: note: %d plugin file(s) failed to load; 'bcg plugins' says why\n",
              bcg_registry_error_count(reg));
    return BCG_EXIT_ERROR;
  }
  return BCG_EXIT_OK;
}

int bcg_cli_check_sweep(const bcg_config *cfg) {
  int nk = bcg_config_sweep_count(cfg);
  if (nk < 2 || strcmp(bcg_config_get_string(cfg, "sweep", "mode"), "zip") != 0) return BCG_EXIT_OK;
  for (int k = 1; k < nk; k++)
    if (bcg_config_sweep_nvalues(cfg, k) != bcg_config_sweep_nvalues(cfg, 0))
      return bcg_cli_error("%s: [sweep] mode = zip needs lists of one length (%s has %d values, %s has %d)",
                           bcg_config_path(cfg), bcg_config_sweep_key(cfg, 0), bcg_config_sweep_nvalues(cfg, 0),
                           bcg_config_sweep_key(cfg, k), bcg_config_sweep_nvalues(cfg, k));
  return BCG_EXIT_OK;
}

/* The model compiled as the env will compile it: conversion errors, the
 * floor a task needs (bcg_env_check_floor), the [sim] keys against it, and
 * under actuation = pd the effective gains kp * gear / 100 (every joint when
 * verbose, else one summary line) with a warning when they cannot hold the
 * robot up (bcg_pd_check_gains). Messages on stderr. */
static int check_model(const bcg_config *cfg, int verbose) {
  char err[2048];
  bcg_model *model = bcg_model_from_config(cfg, err, sizeof err);
  if (!model) return bcg_cli_error("%s", err);
  int rc = BCG_EXIT_OK;
  bcg_simparams sp;
  if (bcg_env_check_floor(cfg, model, err, sizeof err) || bcg_simparams_from_config(cfg, model, &sp, err, sizeof err)) {
    rc = bcg_cli_error("%s", err);
  } else if (sp.actuation == BCG_ACTUATION_PD && model->m.nu > 0) {
    const bcg_mdata *m = &model->m;
    double kp = bcg_config_get_real(cfg, "sim", "kp"), kd = bcg_config_get_real(cfg, "sim", "kd");
    if (verbose) {
      fprintf(stderr, "bcg: pd gains of %s (each joint: [sim] kp_joints / kd_joints where a pattern matches, else "
              "kp = %g, kd = %g times gear / 100):\n", model->path, kp, kd);
      for (int i = 0; i < m->nu; i++) {
        char lim[64] = "none";
        if (sp.tau_max[i] > 0) snprintf(lim, sizeof lim, "%g N m", (double)sp.tau_max[i]);
        fprintf(stderr, "bcg:   joint '%s' (actuator '%s', gear %g): kp %g N m/rad, kd %g N m s/rad, torque limit %s\n",
                model->jnt_name[m->act_jnt[i]], model->act_name[i], (double)m->act_gear[i], (double)sp.kp[i],
                (double)sp.kd[i], lim);
      }
    } else {
      double a = INFINITY, b = -INFINITY, c = INFINITY, d = -INFINITY;
      for (int i = 0; i < m->nu; i++) {
        a = fmin(a, sp.kp[i]), b = fmax(b, sp.kp[i]);
        c = fmin(c, sp.kd[i]), d = fmax(d, sp.kd[i]);
      }
      fprintf(stderr, "bcg: pd gains (kp, kd times gear / 100): kp %g..%g N m/rad, kd %g..%g N m s/rad over %d joints "
              "('bcg check' lists each)\n", a, b, c, d, m->nu);
    }
    bcg_pd_check pc;
    if (bcg_pd_check_gains(model, &sp, &pc)) {
      int i = pc.act_max;
      const char *kj = bcg_config_get_string(cfg, "sim", "kp_joints");
      char advice[96];
      if (kj && kj[0]) snprintf(advice, sizeof advice, "the policy has to keep the balance (gains of kp_joints)");
      else snprintf(advice, sizeof advice, "raise [sim] kp above %.4g", kp * pc.need / pc.kp_max);
      bcg_config_errorf(cfg, "sim", kj && kj[0] ? "kp_joints" : "kp", err, sizeof err,
                        "the stiffest PD joint gets kp = %g N m/rad (joint '%s', gear %g), below M g h = %.0f N m/rad "
                        "(mass %.1f kg, centre of mass %.2f m above the lowest contact point): no joint can hold the "
                        "robot up (an inverted pendulum needs kp > M g h); %s",
                        pc.kp_max, model->jnt_name[m->act_jnt[i]], (double)m->act_gear[i], pc.need, pc.mass, pc.h,
                        advice);
      fprintf(stderr, "bcg: warning: %s\n", err);
    }
  }
  bcg_model_free(model);
  return rc;
}

int bcg_cli_check_session(const bcg_config *cfg) {
  if (!bcg_config_plugin(cfg, BCG_KIND_TASK) || !bcg_config_plugin(cfg, BCG_KIND_ESTIMATOR) ||
      !bcg_config_plugin(cfg, BCG_KIND_LEARNER))
    return BCG_EXIT_OK;
  bcg_session S;
  char err[4096];
  if (bcg_session_open(&S, cfg, err, sizeof err)) return bcg_cli_error("%s", err);
  bcg_session_close(&S);
  return BCG_EXIT_OK;
}

int bcg_cli_check_semantics(const bcg_config *cfg) { return bcg_cli_check_semantics_ex(cfg, 0); }

int bcg_cli_check_semantics_ex(const bcg_config *cfg, int verbose) {
  char err[2048];
  const char *model = bcg_config_get_string(cfg, "model", "path");
  if (access(model, R_OK) != 0) {
    bcg_config_errorf(cfg, "model", "path", err, sizeof err, "cannot read '%s': %s", model, strerror(errno));
    return bcg_cli_error("%s", err);
  }
#ifndef BCG_HAVE_CUDA
  if (strcmp(bcg_config_get_string(cfg, "run", "device"), "cuda") == 0) {
    bcg_config_errorf(cfg, "run", "device", err, sizeof err,
                      "this bcg was built without CUDA (nvcc not found or CUDA=0)");
    return bcg_cli_error("%s", err);
  }
#endif
  return check_model(cfg, verbose);
}
