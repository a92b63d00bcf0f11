/* cmd_plugins.c - bcg plugins: every plugin found, and warnings for broken ones. */
#include <stdio.h>
#include <string.h>

#include "bcg/loader.h"
#include "cmd.h"

int bcg_cmd_plugins(int argc, char **argv) {
  if (argc > 1) return bcg_cli_usage(argv[0], "takes no arguments");
  const bcg_registry *r = bcg_registry_global();
  int n = bcg_registry_count(r);
  size_t wname = 4, wfile = 4;
  for (int i = 0; i < n; i++) {
    const bcg_plugin *p = bcg_registry_get(r, i);
    if (strlen(p->desc->name) > wname) wname = strlen(p->desc->name);
    if (strlen(p->path) > wfile) wfile = strlen(p->path);
  }
  if (n) printf("%-9s  %-*s  %-*s  %s\n", "KIND", (int)wname, "NAME", (int)wfile, "FILE", "DESCRIPTION");
  for (int k = BCG_KIND_CONTACT; k <= BCG_KIND_TASK; k++)
    for (int i = 0; i < n; i++) {
      const bcg_plugin *p = bcg_registry_get(r, i);
      if (p->desc->kind != (uint32_t)k) continue;
      printf("%-9s  %-*s  %-*s  %s\n", bcg_kind_name((bcg_kind)k), (int)wname, p->desc->name, (int)wfile, p->path,
             p->desc->description);
    }
  char path[8192];
  bcg_plugin_search_path(path, sizeof path);
  if (!n) printf("no plugins found\n");
  printf("search path: %s\n", path);
  fflush(stdout);
  for (int i = 0; i < bcg_registry_error_count(r); i++) fprintf(stderr, "bcg: warning: %s\n", bcg_registry_error(r, i));
  return BCG_EXIT_OK;
}
