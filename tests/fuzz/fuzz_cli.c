/* tests/fuzz/fuzz_cli.c - libFuzzer harness of the bcg command's argument
 * handling: the subcommands train (also --resume), eval, check, gradstats,
 * describe and report called as main.c calls them (bcg_cmd_NAME(argc, argv)).
 *
 * Input: the arguments separated by NUL bytes; the first is the subcommand
 * (others are skipped). At most 64 arguments of at most 4 KiB each.
 *
 * Only parsing and validation may run, never a training or an evaluation:
 * the command runs in the harness's own temporary directory, holding
 *   a.ini                         a config without plugin sections
 *   p.ini                         a config with SHAC, BCG and imitation
 *   r/config.ini, r/checkpoints/ckpt_000000001.h5   a run directory
 * whose models (model.path = missing.xml) do not exist, and an input with an
 * argument that holds '/' or is ".." is skipped, so no argument can name a
 * model that compiles (describe, which reads no file, may have '/'); every
 * command therefore stops at the latest when it needs the model. TMPDIR is that directory too (gradstats writes a
 * temporary config there).
 *
 * Checked: no crash, hang or sanitizer report, and the exit status is 0, 1
 * (a user error) or 2 (a usage error). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcg/loader.h"
#include "cmd.h"
#include "fuzz_util.h"

#define MAX_ARGS 64
#define MAX_ARG (4u << 10)

static const struct {
  const char *name;
  int (*fn)(int, char **);
} cmds[] = {
    {"train", bcg_cmd_train},         {"eval", bcg_cmd_eval},         {"check", bcg_cmd_check},
    {"gradstats", bcg_cmd_gradstats}, {"describe", bcg_cmd_describe}, {"report", bcg_cmd_report},
};

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f || fputs(text, f) < 0 || fclose(f)) fz_die("cannot write the harness's files");
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fz_init();
  setenv("TMPDIR", fz_dir, 1);
  fz_enter();
  static const char plugins[] =
      "[contact]\nplugin = smoothed_kappa\n[estimator]\nplugin = bcg\n[learner]\nplugin = shac\n"
      "[task]\nplugin = imitation\nmotion = missing.csv\n";
  put("a.ini", "[run]\nnum_envs = 2\nthreads = 1\n[model]\npath = missing.xml\n");
  char p[4096];
  snprintf(p, sizeof p, "[run]\nnum_envs = 2\nthreads = 1\n[model]\npath = missing.xml\n%s", plugins);
  put("p.ini", p);
  if (mkdir("r", 0700) || mkdir("r/checkpoints", 0700)) fz_die("cannot create the run directory");
  put("r/config.ini", p);
  put("r/checkpoints/ckpt_000000001.h5", "not an HDF5 file\n");
  fz_leave();
  (void)bcg_registry_global(); /* scan the plugins once, outside the measured runs */
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0 || size > MAX_ARGS * (MAX_ARG + 1)) return 0;
  char *buf = malloc(size + 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  buf[size] = 0;
  char *argv[MAX_ARGS + 1];
  int argc = 0;
  for (char *s = buf; s < buf + size && argc < MAX_ARGS; s += strlen(s) + 1) {
    /* see the header; describe reads no file ("describe KIND/NAME") */
    if (strlen(s) > MAX_ARG || (strcmp(buf, "describe") && (strchr(s, '/') || !strcmp(s, "..")))) goto skip;
    argv[argc++] = s;
  }
  argv[argc] = NULL;
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (!strcmp(argv[0], cmds[i].name)) {
      fz_enter();
      int rc = cmds[i].fn(argc, argv);
      fz_leave();
      if (rc < 0 || rc > 2) {
        char st[32];
        snprintf(st, sizeof st, "%d", rc);
        fz_die2("exit status other than 0, 1, 2", st);
      }
      break;
    }
skip:
  free(buf);
  return 0;
}
