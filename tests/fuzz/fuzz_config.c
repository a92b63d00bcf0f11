/* tests/fuzz/fuzz_config.c - libFuzzer harness of the INI config loader
 * (core/config.c: bcg_config_load_with, the overrides, the getters and the
 * resolved output).
 *
 * Input: the config file's text; lines after a line ";;overrides" are
 * command-line overrides (section.key=value), one per line. The plugins are
 * those of the fuzz build (build-fuzz/plugins), so plugin sections are
 * validated against real key tables.
 *
 * Checked: no crash or sanitizer report; a failure carries a one-line
 * message; a loaded config answers every getter of every declared key; and
 * its resolved text (bcg_config_resolved_write) loads back, without
 * overrides, to the same values (what a run's config.ini relies on). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/config.h"
#include "bcg/loader.h"
#include "fuzz_util.h"

#define MAX_OV 64

/* every declared key of every present section through its typed getter */
static void touch_all(const bcg_config *cfg) {
  static const char *const secs[] = {"run", "model", "sim", "contact", "estimator", "learner", "task", "eval", "sweep"};
  for (size_t s = 0; s < sizeof secs / sizeof secs[0]; s++) {
    const bcg_params *p = bcg_config_section(cfg, secs[s]);
    if (!p) continue;
    const bcg_key_spec *keys;
    int nk;
    const bcg_plugin *pl = bcg_params_plugin(p);
    if (pl) keys = pl->desc->keys, nk = (int)pl->desc->nkeys;
    else keys = bcg_core_keys(secs[s], &nk);
    for (int k = 0; k < nk; k++) {
      const char *name = keys[k].name;
      if (!bcg_params_value(p, name)) fz_die("declared key without a value");
      (void)bcg_params_line(p, name);
      long list[64];
      switch (keys[k].type) {
        case BCG_KEY_INT: (void)bcg_params_get_int(p, name); break;
        case BCG_KEY_REAL: (void)bcg_params_get_real(p, name); break;
        case BCG_KEY_BOOL: (void)bcg_params_get_bool(p, name); break;
        case BCG_KEY_LIST: (void)bcg_params_get_list(p, name, list, 64); break;
        default: (void)bcg_params_get_string(p, name); break;
      }
      char e[512];
      bcg_config_errorf(cfg, secs[s], name, e, sizeof e, "fuzz %d", k);
    }
  }
  for (int i = 0; i < bcg_config_sweep_count(cfg); i++)
    for (int j = 0; j < bcg_config_sweep_nvalues(cfg, i); j++)
      if (!bcg_config_sweep_value(cfg, i, j) || !bcg_config_sweep_key(cfg, i)) fz_die("sweep entry missing");
}

/* same value for every declared key of every section */
static void same_values(const bcg_config *a, const bcg_config *b) {
  static const char *const secs[] = {"run", "model", "sim", "contact", "estimator", "learner", "task", "eval", "sweep"};
  for (size_t s = 0; s < sizeof secs / sizeof secs[0]; s++) {
    const bcg_params *p = bcg_config_section(a, secs[s]), *q = bcg_config_section(b, secs[s]);
    if (!p != !q) fz_die("resolved text: a section present in one config only");
    if (!p) continue;
    const bcg_plugin *pl = bcg_params_plugin(p);
    if (pl != bcg_params_plugin(q)) fz_die("resolved text: another plugin");
    const bcg_key_spec *keys;
    int nk;
    if (pl) keys = pl->desc->keys, nk = (int)pl->desc->nkeys;
    else keys = bcg_core_keys(secs[s], &nk);
    for (int k = 0; k < nk; k++) {
      const char *va = bcg_params_value(p, keys[k].name), *vb = bcg_params_value(q, keys[k].name);
      if (!va || !vb || strcmp(va, vb) != 0) {
        char d[2400];
        snprintf(d, sizeof d, "[%s] %s: '%.1100s' became '%.1100s'", secs[s], keys[k].name, va ? va : "(null)",
                 vb ? vb : "(null)");
        fz_die2("resolved text does not load back to the same values", d);
      }
    }
  }
  if (bcg_config_sweep_count(a) != bcg_config_sweep_count(b)) fz_die("resolved text: sweep entries differ");
  for (int i = 0; i < bcg_config_sweep_count(a); i++) {
    if (strcmp(bcg_config_sweep_key(a, i), bcg_config_sweep_key(b, i)) ||
        bcg_config_sweep_nvalues(a, i) != bcg_config_sweep_nvalues(b, i))
      fz_die("resolved text: a sweep entry differs");
    for (int j = 0; j < bcg_config_sweep_nvalues(a, i); j++)
      if (strcmp(bcg_config_sweep_value(a, i, j), bcg_config_sweep_value(b, i, j))) {
        char d[2400];
        snprintf(d, sizeof d, "[sweep] %s: value %d '%.1000s' became '%.1000s'", bcg_config_sweep_key(a, i), j,
                 bcg_config_sweep_value(a, i, j), bcg_config_sweep_value(b, i, j));
        fz_die2("resolved text: a sweep value differs", d);
      }
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fz_init();
  (void)bcg_registry_global(); /* scan the plugins once, outside the measured runs */
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 16)) return 0;
  static const char marker[] = "\n;;overrides\n";
  size_t flen = size;
  const uint8_t *m = memmem(data, size, marker, sizeof marker - 1);
  char *ov[MAX_OV];
  int nov = 0;
  char *ovtext = NULL;
  if (m) {
    flen = (size_t)(m - data) + 1;
    size_t off = flen + sizeof marker - 2, n = size - off;
    ovtext = malloc(n + 1);
    if (!ovtext) return 0;
    memcpy(ovtext, data + off, n);
    ovtext[n] = 0;
    /* argv strings end at a NUL: so do these */
    for (char *s = ovtext, *save = NULL, *t; nov < MAX_OV && (t = strtok_r(s, "\n", &save)); s = NULL) ov[nov++] = t;
  }
  char path[PATH_MAX + 32], err[4096];
  fz_write("fuzz.ini", data, flen, path, sizeof path);
  bcg_config *cfg = NULL;
  const bcg_registry *reg = bcg_registry_global();
  if (bcg_config_load_with(&cfg, reg, path, nov, ov, err, sizeof err)) {
    fz_say("refused", err);
    fz_check_msg(err);
    free(ovtext);
    return 0;
  }
  touch_all(cfg);
  /* the resolved text loads back to the same values */
  char rpath[PATH_MAX + 32];
  snprintf(rpath, sizeof rpath, "%s/resolved.ini", fz_dir);
  FILE *f = fopen(rpath, "w");
  if (!f) fz_die("cannot create resolved.ini");
  if (bcg_config_resolved_write(cfg, f)) fz_die("bcg_config_resolved_write failed");
  fclose(f);
  bcg_config *back = NULL;
  if (bcg_config_load_with(&back, reg, rpath, 0, NULL, err, sizeof err)) fz_die2("the resolved text does not load", err);
  same_values(cfg, back);
  bcg_config_free(back);
  bcg_config_free(cfg);
  free(ovtext);
  return 0;
}
