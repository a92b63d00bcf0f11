/* tests/plugin_defaults.h - load one contact plugin .so with dlopen and create
 * it with the declared defaults of its keys, without the config system: a
 * minimal services table whose getters parse the `def` text of the
 * descriptor's key specs. Header-only (static functions), shared by
 * tests/test_cuda.c and bench/gpu_bench.c. */
#ifndef BCG_PLUGIN_DEFAULTS_H
#define BCG_PLUGIN_DEFAULTS_H

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/model.h"
#include "bcg/plugin.h"

/* our own params object: the descriptor whose defaults are served */
struct bcg_params {
  const bcg_plugin_desc *desc;
};

static const char *pd_def(const bcg_params *p, const char *key) {
  for (int i = 0; p && p->desc && i < p->desc->nkeys; i++)
    if (strcmp(p->desc->keys[i].name, key) == 0) return p->desc->keys[i].def;
  return NULL;
}
static long pd_get_int(const bcg_params *p, const char *key) {
  const char *d = pd_def(p, key);
  return d ? strtol(d, NULL, 10) : 0;
}
static double pd_get_real(const bcg_params *p, const char *key) {
  const char *d = pd_def(p, key);
  return d ? strtod(d, NULL) : 0;
}
static int pd_get_bool(const bcg_params *p, const char *key) {
  const char *d = pd_def(p, key);
  return d && (!strcmp(d, "1") || !strcmp(d, "true") || !strcmp(d, "yes"));
}
static const char *pd_get_string(const bcg_params *p, const char *key) { return pd_def(p, key); }
static int pd_get_list(const bcg_params *p, const char *key, long *out, int cap) {
  const char *d = pd_def(p, key);
  int n = 0;
  while (d && *d && n < cap) {
    char *end;
    long v = strtol(d, &end, 10);
    if (end == d) break;
    out[n++] = v;
    d = end;
    while (*d == ',' || *d == ' ') d++;
  }
  return n;
}
static void pd_log(int level, const char *fmt, ...) {
  (void)level;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

typedef struct pd_plugin {
  void *handle;
  const bcg_plugin_desc *desc;
  const bcg_contact_ops *ops;
  void *self;
  bcg_params params;
  bcg_services svc;
} pd_plugin;

/* 0 on success; -1 with a message (missing file, wrong kind/precision, create failed) */
static int pd_load_contact(const char *path, const bcg_model *model, pd_plugin *pl, char *err, size_t errlen) {
  memset(pl, 0, sizeof *pl);
  pl->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!pl->handle) {
    snprintf(err, errlen, "%s", dlerror());
    return -1;
  }
  bcg_plugin_entry_fn f = (bcg_plugin_entry_fn)dlsym(pl->handle, BCG_PLUGIN_ENTRY_SYMBOL);
  const bcg_plugin_desc *d = f ? f() : NULL;
  if (!d || d->abi_version != BCG_ABI_VERSION || d->kind != BCG_KIND_CONTACT || d->real_size != ((uint32_t)sizeof(bcg_real) | BCG_DIMS_TAG) ||
      !d->ops) {
    snprintf(err, errlen, "%s: not a contact plugin of this ABI and precision", path);
    dlclose(pl->handle);
    pl->handle = NULL;
    return -1;
  }
  pl->desc = d;
  pl->ops = (const bcg_contact_ops *)d->ops;
  pl->params.desc = d;
  pl->svc.abi_version = BCG_ABI_VERSION;
  pl->svc.size = sizeof(bcg_services);
  pl->svc.get_int = pd_get_int;
  pl->svc.get_real = pd_get_real;
  pl->svc.get_bool = pd_get_bool;
  pl->svc.get_string = pd_get_string;
  pl->svc.get_list = pd_get_list;
  pl->svc.log = pd_log;
  pl->self = pl->ops->create ? pl->ops->create(&pl->svc, &pl->params, model, err, errlen) : NULL;
  if (!pl->self) {
    if (!pl->ops->create) snprintf(err, errlen, "%s: no create()", path);
    dlclose(pl->handle);
    pl->handle = NULL;
    return -1;
  }
  return 0;
}

/* The handle stays open: dlclose of a .so that carries CUDA kernels and is
 * loaded again later crashed the next plugin's first launch on the H200
 * (test_cuda, 2026-12-02), and the registry never unloads plugins either. */
static void pd_unload(pd_plugin *pl) {
  if (pl->self && pl->ops->destroy) pl->ops->destroy(pl->self);
  memset(pl, 0, sizeof *pl);
}

static int pd_has_cuda(const pd_plugin *pl) {
  return (pl->desc->caps & BCG_CAP_CUDA) && pl->ops->solve_cuda && pl->ops->solve_vjp_cuda;
}

#endif
