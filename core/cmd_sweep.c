/* cmd_sweep.c - `bcg sweep CONFIG [--dry-run] [section.key=value ...]`:
 * expands the config's [sweep] section into runs and trains them one after
 * the other, each as `bcg train CONFIG <its overrides>` in a child process,
 * named <[run] name>-<key>_<value>-... . [sweep] mode = grid takes every
 * combination of the listed values, zip the i-th values of every key
 * together (all lists must then have the same length). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/loader.h"
#include "cmd.h"

#define MAXK 16

static void append_name(char *name, size_t len, const char *key, const char *val) {
  size_t l = strlen(name);
  snprintf(name + l, len - l, "-%s_%s", key, val);
  for (char *c = name + l; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_' && *c != '.') *c = '_';
}

int bcg_cmd_sweep(int argc, char **argv) {
  const char *path = NULL;
  int dry = 0;
  char *user_ov[200];
  int nuser = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--dry-run")) dry = 1;
    else if (argv[i][0] == '-') return bcg_cli_usage("sweep", "unknown option '%s'", argv[i]);
    else if (strchr(argv[i], '=')) {
      if (nuser >= 190) return bcg_cli_usage("sweep", "too many overrides");
      user_ov[nuser++] = argv[i];
    } else if (!path) path = argv[i];
    else return bcg_cli_usage("sweep", "unexpected argument '%s'", argv[i]);
  }
  if (!path) return bcg_cli_usage("sweep", "missing CONFIG");
  char err[4096];
  bcg_config *cfg = NULL;
  if (bcg_config_load_with(&cfg, bcg_registry_global(), path, nuser, user_ov, err, sizeof err))
    return bcg_cli_error("%s", err);
  int nk = bcg_config_sweep_count(cfg);
  if (nk == 0) {
    bcg_config_free(cfg);
    return bcg_cli_error("%s: no [sweep] keys to expand (e.g. contact.kappa = 50, 100, 300)", path);
  }
  if (nk > MAXK) {
    bcg_config_free(cfg);
    return bcg_cli_error("%s: [sweep] has %d keys, at most %d", path, nk, MAXK);
  }
  int zip = !strcmp(bcg_config_get_string(cfg, "sweep", "mode"), "zip");
  int rc0 = bcg_cli_check_sweep(cfg); /* the message reads the config: free it after */
  if (rc0) {
    bcg_config_free(cfg);
    return rc0;
  }
  int nv[MAXK], total = 1;
  for (int k = 0; k < nk; k++) {
    nv[k] = bcg_config_sweep_nvalues(cfg, k);
    total = zip ? nv[0] : total * nv[k];
  }
  const char *base = bcg_config_get_string(cfg, "run", "name");
  if (!base[0]) base = "sweep";
  char self[4096];
  ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
  if (sl <= 0) {
    bcg_config_free(cfg);
    return bcg_cli_error("cannot find the bcg executable (/proc/self/exe)");
  }
  self[sl] = 0;
  printf("sweep %s: %d runs (%s)\n", path, total, zip ? "zip" : "grid");
  int failed = 0;
  for (int r = 0; r < total; r++) {
    int idx[MAXK], rem = r;
    for (int k = nk - 1; k >= 0; k--) {
      idx[k] = zip ? r : rem % nv[k];
      if (!zip) rem /= nv[k];
    }
    static char ovbuf[MAXK + 2][512];
    char name[1024];
    snprintf(name, sizeof name, "%s", base);
    char *args[MAXK + 200 + 8];
    int na = 0;
    args[na++] = self;
    args[na++] = "train";
    args[na++] = (char *)path;
    for (int i = 0; i < nuser; i++) args[na++] = user_ov[i];
    for (int k = 0; k < nk; k++) {
      const char *key = bcg_config_sweep_key(cfg, k), *val = bcg_config_sweep_value(cfg, k, idx[k]);
      snprintf(ovbuf[k], sizeof ovbuf[k], "%s=%s", key, val);
      args[na++] = ovbuf[k];
      append_name(name, sizeof name, key, val);
    }
    snprintf(ovbuf[MAXK], sizeof ovbuf[MAXK], "run.name=%s", name);
    args[na++] = ovbuf[MAXK];
    args[na] = NULL;
    printf("[%d/%d]", r + 1, total);
    for (int i = 1; i < na; i++) printf(" %s", args[i]);
    printf("\n");
    fflush(stdout);
    if (dry) continue;
    pid_t pid = fork();
    if (pid < 0) {
      failed++;
      continue;
    }
    if (pid == 0) {
      execv(self, args);
      _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "bcg: sweep: run %d (%s) failed (status %d)\n", r + 1, name, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
      failed++;
    }
  }
  bcg_config_free(cfg);
  if (failed) return bcg_cli_error("sweep: %d of %d runs failed", failed, total);
  return BCG_EXIT_OK;
}
