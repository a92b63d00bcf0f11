/* cli.c - helpers shared by the bcg subcommands. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/loader.h"
#include "cmd.h"

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

int bcg_cli_check_semantics(const bcg_config *cfg) {
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
  return BCG_EXIT_OK;
}
