/* cmd_describe.c - bcg describe NAME: a plugin's (or core section's) keys
 * with types, defaults, ranges or choices and help, and its capabilities. */
#include <stdio.h>
#include <string.h>

#include "bcg/config.h"
#include "bcg/loader.h"
#include "cmd.h"

static void print_keys(const bcg_key_spec *k, int n) {
  size_t wn = 4, wt = 4, wd = 7;
  char t[128];
  for (int i = 0; i < n; i++) {
    bcg_key_type_desc(&k[i], t, sizeof t);
    if (strlen(k[i].name) > wn) wn = strlen(k[i].name);
    if (strlen(t) > wt) wt = strlen(t);
    size_t dl = k[i].def ? strlen(k[i].def) + 2 : 10;
    if (dl > wd) wd = dl;
  }
  if (n == 0) {
    printf("  (no keys)\n");
    return;
  }
  printf("  %-*s  %-*s  %-*s  %s\n", (int)wn, "KEY", (int)wt, "TYPE", (int)wd, "DEFAULT", "HELP");
  for (int i = 0; i < n; i++) {
    char d[1100];
    bcg_key_type_desc(&k[i], t, sizeof t);
    if (k[i].def)
      snprintf(d, sizeof d, "\"%s\"", k[i].def);
    else
      snprintf(d, sizeof d, "(required)");
    printf("  %-*s  %-*s  %-*s  %s\n", (int)wn, k[i].name, (int)wt, t, (int)wd, d, k[i].help ? k[i].help : "");
  }
}

static void describe_plugin(const bcg_plugin *p) {
  char caps[256];
  bcg_caps_desc(p->desc->caps, caps, sizeof caps);
  const char *kind = bcg_kind_name((bcg_kind)p->desc->kind);
  printf("%s plugin %s: %s\n", kind, p->desc->name, p->desc->description);
  printf("file: %s\n", p->path);
  printf("capabilities: %s\n", caps);
  printf("keys of [%s] (with plugin = %s):\n", kind, p->desc->name);
  print_keys(p->desc->keys, p->desc->nkeys);
}

int bcg_cmd_describe(int argc, char **argv) {
  if (argc != 2) return bcg_cli_usage(argv[0], "expects one NAME (a plugin, KIND/NAME, or a core section)");
  const char *arg = argv[1];
  const bcg_registry *r = bcg_registry_global();
  const char *slash = strchr(arg, '/');
  int found = 0;
  if (slash) {
    char kind[32];
    snprintf(kind, sizeof kind, "%.*s", (int)(slash - arg), arg);
    bcg_kind k = bcg_kind_parse(kind);
    if (!k) return bcg_cli_error("'%s': unknown plugin kind '%s' (contact, estimator, learner, task)", arg, kind);
    const bcg_plugin *p = bcg_registry_find(r, k, slash + 1);
    if (p) describe_plugin(p), found = 1;
  } else {
    for (int i = 0; i < bcg_registry_count(r); i++) {
      const bcg_plugin *p = bcg_registry_get(r, i);
      if (strcmp(p->desc->name, arg) != 0) continue;
      if (found) printf("\n");
      describe_plugin(p);
      found++;
    }
    int n;
    const bcg_key_spec *k = bcg_core_keys(arg, &n);
    if (k) {
      if (found) printf("\n");
      printf("core section [%s]:\n", arg);
      print_keys(k, n);
      found++;
    } else if (bcg_section_kind(arg)) {
      bcg_kind kind = bcg_section_kind(arg);
      char names[1024];
      bcg_registry_names(r, kind, names, sizeof names);
      if (found) printf("\n");
      printf("plugin section [%s]: 'plugin = NAME' selects one of: %s\n", arg, names[0] ? names : "(none found)");
      printf("its other keys are the plugin's; see 'bcg describe NAME'\n");
      found++;
    }
  }
  if (!found) {
    const char *c[256];
    int nc = 0;
    for (int i = 0; i < bcg_registry_count(r) && nc < 240; i++) c[nc++] = bcg_registry_get(r, i)->desc->name;
    for (int i = 0; i < bcg_core_section_count(); i++) c[nc++] = bcg_core_section_name(i);
    const char *best = bcg_closest(slash ? slash + 1 : arg, c, nc);
    char sug[128] = "";
    if (best) snprintf(sug, sizeof sug, " (did you mean %s?)", best);
    /* a plugin file of that name that failed to load: say why */
    const char *name = slash ? slash + 1 : arg;
    char file[300];
    snprintf(file, sizeof file, "/%s.so: ", name);
    for (int i = 0; i < bcg_registry_error_count(r); i++) {
      const char *e = bcg_registry_error(r, i);
      if (strstr(e, file) || !strncmp(e, file + 1, strlen(file) - 1))
        return bcg_cli_error("no plugin named '%s' is loaded: %s", name, e);
    }
    return bcg_cli_error("no plugin or section named '%s'%s; 'bcg plugins' lists them", arg, sug);
  }
  return BCG_EXIT_OK;
}
