/* bcg/config.h - INI configuration: parse, override, validate, resolve.
 *
 * A config file has core sections [run] [model] [sim] [eval] [sweep] and
 * plugin sections [contact] [estimator] [learner] [task], each of the latter
 * selecting a plugin with `plugin = NAME`. Every key is validated against a
 * declared bcg_key_spec: the core's own tables (config_keys.c) or the selected
 * plugin's keys. Defaults fill in every key not given.
 *
 * Command-line overrides `section.key=value` are applied before validation;
 * `sweep.section.key=v1,v2` sets a sweep entry.
 *
 * Errors are returned as one line in err, never printed:
 *   "<file>:<line>: [section] key: <what is wrong>"
 * with "command line" instead of "<file>:<line>" for overrides. */
#ifndef BCG_CONFIG_H
#define BCG_CONFIG_H

#include <stddef.h>
#include <stdio.h>
#include "bcg/plugin.h"

BCG_BEGIN_DECLS

typedef struct bcg_config bcg_config;
typedef struct bcg_registry bcg_registry; /* bcg/loader.h */
typedef struct bcg_plugin bcg_plugin;     /* bcg/loader.h */

/* Load, override and validate. Plugins are looked up in the process-wide
 * registry (bcg_registry_global()). Returns 0 and *out, or -1 with a message. */
int bcg_config_load(bcg_config **out, const char *path, int noverride, char **overrides,
                    char *err, size_t errlen);
/* The same against an explicit registry (reg may be NULL: no plugins known). */
int bcg_config_load_with(bcg_config **out, const bcg_registry *reg, const char *path,
                         int noverride, char **overrides, char *err, size_t errlen);
void bcg_config_free(bcg_config *cfg);

const char *bcg_config_path(const bcg_config *cfg);

/* One section as a bcg_params (what plugins receive). Core sections always
 * exist (filled with defaults); a plugin section is NULL when absent. */
const bcg_params *bcg_config_section(const bcg_config *cfg, const char *section);
/* The plugin selected for a kind, or NULL when its section is absent. */
const bcg_plugin *bcg_config_plugin(const bcg_config *cfg, bcg_kind kind);

/* Typed getters by section and key. The key must be declared for the section
 * (a programming error otherwise: message on stderr and abort()). */
long bcg_config_get_int(const bcg_config *cfg, const char *section, const char *key);
double bcg_config_get_real(const bcg_config *cfg, const char *section, const char *key);
int bcg_config_get_bool(const bcg_config *cfg, const char *section, const char *key);
const char *bcg_config_get_string(const bcg_config *cfg, const char *section, const char *key);
int bcg_config_get_list(const bcg_config *cfg, const char *section, const char *key,
                        long *out, int cap);

/* Format a later semantic error about a key the way the loader does:
 * "<file>:<line>: [section] key: <fmt...>" (line omitted for defaults). */
void bcg_config_errorf(const bcg_config *cfg, const char *section, const char *key, char *err,
                       size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* The fully resolved configuration as INI text that loads back to the same
 * values: every core section, every present plugin section with all of its
 * plugin's keys, and [sweep] if present (values quoted only where INI needs
 * it). Returns 0, or -1 on a write error or a value no config line can hold
 * (a path made absolute beyond a line's 1000 characters). */
int bcg_config_resolved_write(const bcg_config *cfg, FILE *f);
/* The same with every path key (BCG_KEY_PATH: [model] path, [task] motion)
 * made absolute against the working directory, as a run's config.ini stores
 * it, so that resume and eval work from any directory. */
int bcg_config_run_write(const bcg_config *cfg, FILE *f);

/* [sweep] entries: "section.key" and its comma-separated values. */
int bcg_config_sweep_count(const bcg_config *cfg);
const char *bcg_config_sweep_key(const bcg_config *cfg, int i);
int bcg_config_sweep_nvalues(const bcg_config *cfg, int i);
const char *bcg_config_sweep_value(const bcg_config *cfg, int i, int j);

/* ---- bcg_params: one resolved section ------------------------------------- */

const char *bcg_params_name(const bcg_params *p); /* section name */
const bcg_plugin *bcg_params_plugin(const bcg_params *p); /* NULL for core sections */
long bcg_params_get_int(const bcg_params *p, const char *key);
double bcg_params_get_real(const bcg_params *p, const char *key);
int bcg_params_get_bool(const bcg_params *p, const char *key);
const char *bcg_params_get_string(const bcg_params *p, const char *key);
int bcg_params_get_list(const bcg_params *p, const char *key, long *out, int cap);
/* Resolved value as text, NULL if the key is not declared for this section. */
const char *bcg_params_value(const bcg_params *p, const char *key);
/* Line of the key in the file; 0 for a default, -1 for a command-line override. */
int bcg_params_line(const bcg_params *p, const char *key);

/* The host's services table (getters over bcg_params, log to stderr). */
const bcg_services *bcg_services_host(void);

/* ---- key tables and helpers (shared with the loader and the CLI) ----------- */

/* Core sections in canonical order, and the declared keys of one of them
 * (NULL for an unknown or plugin section). */
int bcg_core_section_count(void);
const char *bcg_core_section_name(int i);
const bcg_key_spec *bcg_core_keys(const char *section, int *nkeys);
/* The kind whose plugin a section selects (0 if not a plugin section); the
 * section of a kind is named bcg_kind_name(kind) (bcg/loader.h). */
bcg_kind bcg_section_kind(const char *section);

/* Check one value against a spec: 0, or -1 and a reason such as
 * "'abc' is not an integer" or "400 is out of range [1, 300]". */
int bcg_key_check(const bcg_key_spec *k, const char *value, char *why, size_t whylen);
/* "int in [1, 1000]", "real", "one of a|b|c", ... */
void bcg_key_type_desc(const bcg_key_spec *k, char *buf, size_t len);

/* Levenshtein distance, and the closest candidate (NULL if none is close). */
int bcg_levenshtein(const char *a, const char *b);
const char *bcg_closest(const char *word, const char *const *cands, int n);

BCG_END_DECLS

#endif
