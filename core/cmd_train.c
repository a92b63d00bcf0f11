/* cmd_train.c - bcg train CONFIG [section.key=value ...].
 *
 * Validates the config, creates runs/<name>/<stamp>/ with config.ini
 * (resolved), log.h5 (metadata) and checkpoints/. The training loop itself
 * (trainer + learner plugin) comes with the learner issue and starts where
 * the "no learner loop yet" message is. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "bcg/config.h"
#include "bcg/loader.h"
#include "bcg/runlog.h"
#include "cmd.h"

int bcg_cmd_train(int argc, char **argv) {
  bcg_config *cfg;
  int rc = bcg_cli_load_config(argv[0], argc, argv, &cfg);
  if (rc) return rc;
  char err[2048];
  rc = bcg_cli_check_semantics(cfg);
  for (int k = BCG_KIND_CONTACT; k <= BCG_KIND_TASK && rc == 0; k++)
    if (!bcg_config_plugin(cfg, (bcg_kind)k)) {
      char names[1024];
      bcg_registry_names(bcg_registry_global(), (bcg_kind)k, names, sizeof names);
      rc = bcg_cli_error("%s: [%s]: training needs this section with 'plugin = NAME' (available: %s)",
                         bcg_config_path(cfg), bcg_kind_name((bcg_kind)k), names[0] ? names : "none");
    }
  if (rc) goto out;

  char dir[PATH_MAX];
  const char *name = bcg_config_get_string(cfg, "run", "name");
  if (bcg_rundir_create(bcg_config_get_string(cfg, "run", "out_dir"), name, dir, sizeof dir, err, sizeof err)) {
    char e2[2200];
    bcg_config_errorf(cfg, "run", strchr(name, '/') ? "name" : "out_dir", e2, sizeof e2, "%s", err);
    rc = bcg_cli_error("%s", e2);
    goto out;
  }
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/config.ini", dir);
  FILE *f = fopen(path, "w");
  if (!f) {
    rc = bcg_cli_error("%s: cannot create: %s", path, strerror(errno));
    goto out;
  }
  int werr = bcg_config_resolved_write(cfg, f);
  if (fclose(f) != 0 || werr) {
    rc = bcg_cli_error("%s: write failed", path);
    goto out;
  }
  snprintf(path, sizeof path, "%s/log.h5", dir);
  bcg_runlog_meta meta = {name, bcg_config_path(cfg), bcg_config_get_string(cfg, "run", "device"),
                          bcg_config_get_int(cfg, "run", "seed")};
  bcg_runlog *log = bcg_runlog_open(path, &meta, err, sizeof err);
  if (!log) {
    rc = bcg_cli_error("%s", err);
    goto out;
  }
  for (int k = BCG_KIND_CONTACT; k <= BCG_KIND_TASK; k++) {
    char attr[32];
    snprintf(attr, sizeof attr, "%s_plugin", bcg_kind_name((bcg_kind)k));
    bcg_runlog_set_attr(log, attr, bcg_config_plugin(cfg, (bcg_kind)k)->desc->name, err, sizeof err);
  }
  if (bcg_runlog_close(log, err, sizeof err)) {
    rc = bcg_cli_error("%s", err);
    goto out;
  }
  printf("bcg: train: run directory %s\n", dir);
  fflush(stdout);
  rc = bcg_cli_error("train: no learner loop yet (this build stops after creating the run directory)");
out:
  bcg_config_free(cfg);
  return rc;
}
