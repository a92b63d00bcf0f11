/* bcg/loader.h - the plugin registry.
 *
 * A registry holds the plugins loaded from shared objects. Search order of
 * bcg_registry_scan_default():
 *   1. each directory of $BCG_PLUGIN_PATH (colon separated),
 *   2. the build tree: plugins/ next to the directory holding libbcg.so,
 *   3. bcg/plugins next to the directory holding libbcg.so (an installation
 *      under any PREFIX: PREFIX/lib/bcg/plugins),
 *   4. the compiled-in install prefix: BCG_PREFIX/lib/bcg/plugins (default /usr/local).
 * Each *.so is checked to be a complete ELF file (headers, segments and
 * sections inside the file: a truncated copy would raise SIGBUS inside
 * dlopen), dlopen'ed (RTLD_NOW | RTLD_LOCAL) in name order and its
 * descriptor checked (ABI version, descriptor size, precision, kind, name,
 * function table, key specs). A plugin whose kind and name are already taken
 * is refused (first found wins). Every failure is kept as a one-line message
 * "<file>: <cause>" and the scan goes on. */
#ifndef BCG_LOADER_H
#define BCG_LOADER_H

#include <stddef.h>
#include "bcg/plugin.h"

BCG_BEGIN_DECLS

typedef struct bcg_registry bcg_registry;

typedef struct bcg_plugin {
  const bcg_plugin_desc *desc; /* desc_copy: the plugin's descriptor and table at this core's sizes */
  char path[4096]; /* the file it came from */
  void *handle;    /* dlopen handle; NULL for a descriptor added in-process */
  bcg_plugin_desc desc_copy;   /* zero beyond the plugin's desc_size; ops points to ops_copy */
  union {                      /* the function table, zero beyond the plugin's size */
    bcg_contact_ops contact;
    bcg_estimator_ops estimator;
    bcg_learner_ops learner;
    bcg_task_ops task;
  } ops_copy[1];
} bcg_plugin;

/* bcg's data directory, which holds configs/ and models/: the source tree
 * of a build-tree bcg (the directory above the libbcg.so in use), else
 * PREFIX/share/bcg of an installed one. 0, or -1 when there is none. A
 * config's relative path that does not exist in the working directory is
 * looked up there (bcg_config_load). */
int bcg_data_dir(char *buf, size_t len);

bcg_registry *bcg_registry_new(void);
void bcg_registry_free(bcg_registry *r); /* dlcloses its plugins */

/* Load one file. Returns 0, or -1 with "<file>: <cause>" in err (the message is
 * also kept in the registry's error list). */
int bcg_registry_load_file(bcg_registry *r, const char *path, char *err, size_t errlen);
/* Load every *.so of a directory; returns the number loaded. A missing
 * directory is an error only when required is non-zero. */
int bcg_registry_scan_dir(bcg_registry *r, const char *dir, int required);
/* The default search (see above); returns the number loaded. */
int bcg_registry_scan_default(bcg_registry *r);
/* Register a descriptor linked into the process (checked the same way). */
int bcg_registry_add(bcg_registry *r, const bcg_plugin_desc *d, const char *origin, char *err,
                     size_t errlen);

int bcg_registry_count(const bcg_registry *r);
const bcg_plugin *bcg_registry_get(const bcg_registry *r, int i);
const bcg_plugin *bcg_registry_find(const bcg_registry *r, bcg_kind kind, const char *name);
/* Names of the plugins of one kind, comma separated (for messages). */
void bcg_registry_names(const bcg_registry *r, bcg_kind kind, char *buf, size_t len);

/* Errors met while loading, oldest first. */
int bcg_registry_error_count(const bcg_registry *r);
const char *bcg_registry_error(const bcg_registry *r, int i);

/* The directories bcg_registry_scan_default() searches, in order, joined by
 * ':' into buf. */
void bcg_plugin_search_path(char *buf, size_t len);

/* The process-wide registry, scanned with the default search on first use.
 * The only global mutable state of libbcg. Never NULL. */
const bcg_registry *bcg_registry_global(void);

/* Check a descriptor without loading anything: 0, or -1 with the cause (no
 * file name) in err. */
int bcg_plugin_desc_check(const bcg_plugin_desc *d, char *err, size_t errlen);

const char *bcg_kind_name(bcg_kind kind); /* "contact", ...; "?" if invalid */
bcg_kind bcg_kind_parse(const char *name); /* 0 if unknown */
/* "needs_delassus cuda ..." */
void bcg_caps_desc(uint64_t caps, char *buf, size_t len);

BCG_END_DECLS

#endif
