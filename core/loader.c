/* loader.c - the plugin registry: find, dlopen and check plugin shared objects.
 *
 * Everything read from a plugin is checked before it is trusted, in the
 * order that makes each read safe: ABI version and descriptor size first
 * (a different ABI may lay the rest out differently), then precision, kind,
 * name, key specs and the function table. Failures are one-line messages
 * "<file>: <cause>"; nothing here prints or aborts. */
#include "bcg/loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bcg/config.h"
#include "util.h"

#ifndef BCG_PREFIX
#define BCG_PREFIX "/usr/local"
#endif

struct bcg_registry {
  bcg_plugin **pl;
  int n, cap;
  char **errs;
  int nerr, caperr;
};

const char *bcg_kind_name(bcg_kind kind) {
  switch (kind) {
    case BCG_KIND_CONTACT: return "contact";
    case BCG_KIND_ESTIMATOR: return "estimator";
    case BCG_KIND_LEARNER: return "learner";
    case BCG_KIND_TASK: return "task";
  }
  return "?";
}

bcg_kind bcg_kind_parse(const char *name) {
  for (int k = BCG_KIND_CONTACT; k <= BCG_KIND_TASK; k++)
    if (name && strcmp(name, bcg_kind_name((bcg_kind)k)) == 0) return (bcg_kind)k;
  return (bcg_kind)0;
}

void bcg_caps_desc(uint64_t caps, char *buf, size_t len) {
  static const struct {
    uint64_t bit;
    const char *name;
  } names[] = {{BCG_CAP_NEEDS_DELASSUS, "needs_delassus"},
               {BCG_CAP_CUDA, "cuda"},
               {BCG_CAP_DIFFERENTIABLE, "differentiable"},
               {BCG_CAP_NEEDS_BACKWARD, "needs_backward"},
               {BCG_CAP_NEEDS_FLOOR, "needs_floor"},
               {BCG_CAP_SLICES, "slices"},
               {BCG_CAP_DATA_PARALLEL, "data_parallel"}};
  size_t used = 0;
  if (len) buf[0] = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (caps & names[i].bit) {
      int w = snprintf(buf + used, len > used ? len - used : 0, "%s%s", used ? " " : "", names[i].name);
      if (w > 0) used += (size_t)w;
      if (used >= len) return;
    }
  if (!used) snprintf(buf, len, "none");
}

/* ---- descriptor checks ------------------------------------------------------------- */

typedef struct slot {
  size_t off;
  const char *name;
  int cuda; /* mandatory only with BCG_CAP_CUDA */
} slot;

#define S(T, f) {offsetof(T, f), #f, 0}
static const slot contact_slots[] = {S(bcg_contact_ops, create),
                                     S(bcg_contact_ops, destroy),
                                     S(bcg_contact_ops, solve),
                                     S(bcg_contact_ops, solve_vjp),
                                     {offsetof(bcg_contact_ops, solve_cuda), "solve_cuda", 1},
                                     {offsetof(bcg_contact_ops, solve_vjp_cuda), "solve_vjp_cuda", 1}};
static const slot estimator_slots[] = {S(bcg_estimator_ops, create),   S(bcg_estimator_ops, destroy),
                                       S(bcg_estimator_ops, begin),    S(bcg_estimator_ops, forward),
                                       S(bcg_estimator_ops, backward), S(bcg_estimator_ops, reset_envs),
                                       S(bcg_estimator_ops, stats),
                                       {offsetof(bcg_estimator_ops, forward_cuda), "forward_cuda", 1},
                                       {offsetof(bcg_estimator_ops, backward_cuda), "backward_cuda", 1}};
static const slot learner_slots[] = {S(bcg_learner_ops, create), S(bcg_learner_ops, destroy),
                                     S(bcg_learner_ops, iterate), S(bcg_learner_ops, save),
                                     S(bcg_learner_ops, load),    S(bcg_learner_ops, act)};
/* task update() is optional */
static const slot task_slots[] = {S(bcg_task_ops, create),      S(bcg_task_ops, destroy),
                                  S(bcg_task_ops, obs_dim),     S(bcg_task_ops, act_dim),
                                  S(bcg_task_ops, reset),       S(bcg_task_ops, observe),
                                  S(bcg_task_ops, observe_vjp), S(bcg_task_ops, reward),
                                  S(bcg_task_ops, reward_vjp)};
#define NSLOTS(a) (sizeof(a) / sizeof((a)[0]))
#undef S

static int valid_name(const char *s, size_t max) {
  if (!s || !*s || strlen(s) > max) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_')) return 0;
  return 1;
}

static int check_keys(const bcg_plugin_desc *d, char *err, size_t errlen) {
  if (d->nkeys < 0 || d->nkeys > 1000) return bcg_setf(err, errlen, "invalid key count %d", d->nkeys), -1;
  if (d->nkeys > 0 && !d->keys) return bcg_setf(err, errlen, "declares %d keys but keys is NULL", d->nkeys), -1;
  for (int i = 0; i < d->nkeys; i++) {
    const bcg_key_spec *k = &d->keys[i];
    if (!valid_name(k->name, 63))
      return bcg_setf(err, errlen, "key %d: invalid name '%.40s' (must match [a-z0-9_]+)", i, k->name ? k->name : "(null)"),
             -1;
    if (strcmp(k->name, "plugin") == 0) return bcg_setf(err, errlen, "key 'plugin' is reserved"), -1;
    for (int j = 0; j < i; j++)
      if (strcmp(d->keys[j].name, k->name) == 0) return bcg_setf(err, errlen, "key '%s' declared twice", k->name), -1;
    if (k->type < BCG_KEY_INT || k->type > BCG_KEY_PATH)
      return bcg_setf(err, errlen, "key '%s': invalid type %d", k->name, (int)k->type), -1;
    if ((k->type == BCG_KEY_INT || k->type == BCG_KEY_REAL || k->type == BCG_KEY_LIST) && !(k->min <= k->max))
      return bcg_setf(err, errlen, "key '%s': invalid range [%g, %g]", k->name, k->min, k->max), -1;
    if (k->type == BCG_KEY_CHOICE) {
      if (!k->choices || !*k->choices || strstr(k->choices, "||") || k->choices[0] == '|' ||
          k->choices[strlen(k->choices) - 1] == '|')
        return bcg_setf(err, errlen, "key '%s': malformed choices '%s'", k->name, k->choices ? k->choices : "(null)"),
               -1;
    }
    if (k->def) {
      char why[512];
      if (bcg_key_check(k, k->def, why, sizeof why))
        return bcg_setf(err, errlen, "key '%s': bad default: %s", k->name, why), -1;
    }
  }
  return 0;
}

/* ABI growth (plugin.h): a function table may be shorter than this core's
 * (a plugin built against an older bcg of the same ABI version) down to
 * min_size, the end of the last entry every ABI-1 plugin of the kind has;
 * the registry pads it with zeros (absent optional entries). */
#define END(T, f) (offsetof(T, f) + sizeof(((T *)0)->f))
static void ops_sizes(bcg_kind kind, const slot **slots, size_t *nslots, size_t *size, size_t *min_size) {
  switch (kind) {
    case BCG_KIND_CONTACT:
      *slots = contact_slots, *nslots = NSLOTS(contact_slots), *size = sizeof(bcg_contact_ops);
      *min_size = END(bcg_contact_ops, solve_vjp);
      break;
    case BCG_KIND_ESTIMATOR:
      *slots = estimator_slots, *nslots = NSLOTS(estimator_slots), *size = sizeof(bcg_estimator_ops);
      *min_size = END(bcg_estimator_ops, stats);
      break;
    case BCG_KIND_LEARNER:
      *slots = learner_slots, *nslots = NSLOTS(learner_slots), *size = sizeof(bcg_learner_ops);
      *min_size = END(bcg_learner_ops, act);
      break;
    default:
      *slots = task_slots, *nslots = NSLOTS(task_slots), *size = sizeof(bcg_task_ops);
      *min_size = END(bcg_task_ops, reward_vjp);
      break;
  }
}

int bcg_plugin_desc_check(const bcg_plugin_desc *d, char *err, size_t errlen) {
  if (!d) return bcg_setf(err, errlen, "bcg_plugin_entry returned NULL"), -1;
  if (d->abi_version != BCG_ABI_VERSION)
    return bcg_setf(err, errlen, "plugin ABI version %u, this bcg expects %u (rebuild the plugin against this bcg)",
                d->abi_version, BCG_ABI_VERSION), -1;
  if (d->desc_size < BCG_DESC_MIN_SIZE)
    return bcg_setf(err, errlen, "descriptor size %u, smaller than any ABI %u descriptor (%zu bytes; built against "
                    "another plugin.h)", d->desc_size, BCG_ABI_VERSION, (size_t)BCG_DESC_MIN_SIZE), -1;
  if (d->desc_size > sizeof(bcg_plugin_desc))
    return bcg_setf(err, errlen, "descriptor size %u: built against a newer bcg (this one knows %zu bytes); update "
                    "bcg or rebuild the plugin against this one", d->desc_size, sizeof(bcg_plugin_desc)), -1;
  const uint32_t rsize = d->real_size & 0xffu, dims = d->real_size & ~0xffu;
  if (rsize != sizeof(bcg_real))
    return bcg_setf(err, errlen, "built for %s precision (sizeof(bcg_real) = %u), this bcg uses %s (%zu); rebuild it with REAL=%s",
                rsize == 4 ? "float" : rsize == 8 ? "double" : "unknown", rsize, BCG_REAL_NAME,
                sizeof(bcg_real), BCG_REAL_NAME), -1;
  if (dims != BCG_DIMS_TAG) { /* bcg/dims.h: 0 stands for the defaults */
    unsigned pd = dims ? (dims >> 8) & 0xffu : BCG_DEFAULT_MAX_DOF,
             pc = dims ? (dims >> 16) & 0xffu : BCG_DEFAULT_MAX_CONTACT;
    return bcg_setf(err, errlen, "built with MAX_DOF=%u MAX_CONTACT=%u, this bcg with MAX_DOF=%d MAX_CONTACT=%d (its "
                    "structs differ); rebuild it with this bcg's headers and flags (pkg-config --cflags bcg)",
                    pd, pc, BCG_MAX_DOF, BCG_MAX_CONTACT), -1;
  }
  if (d->kind < BCG_KIND_CONTACT || d->kind > BCG_KIND_TASK)
    return bcg_setf(err, errlen, "invalid plugin kind %u", d->kind), -1;
  if (!valid_name(d->name, 31))
    return bcg_setf(err, errlen, "invalid plugin name '%.40s' (must match [a-z0-9_]+, at most 31 characters)",
                d->name ? d->name : "(null)"), -1;
  if (!d->description || strchr(d->description, '\n'))
    return bcg_setf(err, errlen, "plugin '%s': description missing or not one line", d->name), -1;
  if (check_keys(d, err, errlen)) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", err);
    bcg_setf(err, errlen, "plugin '%s': %s", d->name, tmp);
    return -1;
  }
  if (!d->ops) return bcg_setf(err, errlen, "plugin '%s': no function table (ops is NULL)", d->name), -1;
  const slot *slots;
  size_t nslots, size, min_size;
  ops_sizes((bcg_kind)d->kind, &slots, &nslots, &size, &min_size);
  uint32_t got;
  memcpy(&got, d->ops, sizeof got); /* every ops struct starts with uint32_t size */
  if (got < min_size)
    return bcg_setf(err, errlen, "plugin '%s': %s ops size %u, smaller than any ABI %u table (%zu bytes)", d->name,
                    bcg_kind_name((bcg_kind)d->kind), got, BCG_ABI_VERSION, min_size), -1;
  if (got > size)
    return bcg_setf(err, errlen, "plugin '%s': %s ops size %u: built against a newer bcg (this one knows %zu bytes); "
                    "update bcg or rebuild the plugin against this one", d->name, bcg_kind_name((bcg_kind)d->kind), got,
                    size), -1;
  for (size_t i = 0; i < nslots; i++) {
    if (slots[i].cuda && !(d->caps & BCG_CAP_CUDA)) continue;
    if (slots[i].off + sizeof(void (*)(void)) > got) /* only CUDA entries lie beyond min_size */
      return bcg_setf(err, errlen, "plugin '%s': declares the cuda capability, but its %s ops table (%u bytes) ends "
                      "before '%s'", d->name, bcg_kind_name((bcg_kind)d->kind), got, slots[i].name), -1;
    void (*fp)(void);
    memcpy(&fp, (const char *)d->ops + slots[i].off, sizeof fp);
    if (!fp)
      return bcg_setf(err, errlen, "plugin '%s': %s ops entry '%s' is NULL%s", d->name, bcg_kind_name((bcg_kind)d->kind),
                  slots[i].name, slots[i].cuda ? " (mandatory with the cuda capability)" : ""), -1;
  }
  return 0;
}

/* ---- the registry ---------------------------------------------------------------------- */

bcg_registry *bcg_registry_new(void) { return calloc(1, sizeof(bcg_registry)); }

void bcg_registry_free(bcg_registry *r) {
  if (!r) return;
  for (int i = 0; i < r->n; i++) {
    if (r->pl[i]->handle) dlclose(r->pl[i]->handle);
    free(r->pl[i]);
  }
  for (int i = 0; i < r->nerr; i++) free(r->errs[i]);
  free(r->pl);
  free(r->errs);
  free(r);
}

static void push_error(bcg_registry *r, const char *msg) {
  if (r->nerr == r->caperr) {
    int c = r->caperr ? 2 * r->caperr : 8;
    char **e = realloc(r->errs, (size_t)c * sizeof *e);
    if (!e) return;
    r->errs = e, r->caperr = c;
  }
  size_t n = strlen(msg) + 1;
  char *m = malloc(n);
  if (!m) return;
  memcpy(m, msg, n);
  r->errs[r->nerr++] = m;
}

static int fail(bcg_registry *r, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(bcg_registry *r, char *err, size_t errlen, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  push_error(r, msg);
  bcg_setf(err, errlen, "%s", msg);
  return -1;
}

static int push_plugin(bcg_registry *r, const bcg_plugin_desc *d, const char *path, void *handle, char *err,
                       size_t errlen) {
  const bcg_plugin *dup = bcg_registry_find(r, (bcg_kind)d->kind, d->name);
  if (dup)
    return fail(r, err, errlen, "%s: duplicate %s plugin '%s' (already loaded from %s)", path,
                bcg_kind_name((bcg_kind)d->kind), d->name, dup->path);
  if (r->n == r->cap) {
    int c = r->cap ? 2 * r->cap : 16;
    bcg_plugin **p = realloc(r->pl, (size_t)c * sizeof *p);
    if (!p) return fail(r, err, errlen, "%s: out of memory", path);
    r->pl = p, r->cap = c;
  }
  bcg_plugin *p = calloc(1, sizeof *p);
  if (!p) return fail(r, err, errlen, "%s: out of memory", path);
  /* the core's view: descriptor and function table at this core's sizes,
   * what an older plugin lacks zero (absent); the table's size field keeps
   * the plugin's own size */
  const slot *slots;
  size_t nslots, size, min_size;
  ops_sizes((bcg_kind)d->kind, &slots, &nslots, &size, &min_size);
  uint32_t got;
  memcpy(&got, d->ops, sizeof got);
  memcpy(&p->desc_copy, d, d->desc_size);
  memcpy(p->ops_copy, d->ops, got);
  p->desc_copy.ops = p->ops_copy;
  p->desc = &p->desc_copy;
  p->handle = handle;
  snprintf(p->path, sizeof p->path, "%s", path);
  r->pl[r->n++] = p;
  return 0;
}

int bcg_registry_add(bcg_registry *r, const bcg_plugin_desc *d, const char *origin, char *err, size_t errlen) {
  char why[1024];
  if (bcg_plugin_desc_check(d, why, sizeof why)) return fail(r, err, errlen, "%s: %s", origin, why);
  return push_plugin(r, d, origin, NULL, err, errlen);
}

/* ---- ELF sanity check before dlopen ------------------------------------------------------
 *
 * dlopen maps a shared object's segments as its headers describe them; a
 * truncated file (a copy cut short, a full disk) has headers pointing past
 * its end, and touching those pages raises SIGBUS inside the dynamic loader.
 * So the headers are checked against the file's size first: the program
 * headers and every loadable segment, the section headers and every section
 * with file contents. A file that does not start with the ELF magic is left
 * to dlopen, whose message ("invalid ELF header") is the right one. Returns 0
 * or -1 with the cause in why. */
static int elf_check(const char *path, off_t fsize, char *why, size_t whylen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return bcg_setf(why, whylen, "cannot load: %s", strerror(errno)), -1;
  int rc = -1;
  unsigned char *buf = NULL;
  Elf64_Ehdr eh;
  ssize_t got = pread(fd, &eh, sizeof eh, 0);
  if (got < (ssize_t)SELFMAG || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    rc = 0; /* not ELF: dlopen says so */
    goto out;
  }
  const char *trunc = "truncated or corrupt ELF file";
  if (got < (ssize_t)sizeof eh) {
    bcg_setf(why, whylen, "%s (%lld bytes, shorter than its ELF header)", trunc, (long long)fsize);
    goto out;
  }
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    rc = 0; /* another class or byte order: dlopen names the mismatch */
    goto out;
  }
  uint64_t size = (uint64_t)fsize;
  uint64_t phend = eh.e_phoff + (uint64_t)eh.e_phnum * eh.e_phentsize;
  uint64_t shend = eh.e_shoff + (uint64_t)eh.e_shnum * eh.e_shentsize;
  if (eh.e_phnum == 0 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff >= size || phend > size) {
    bcg_setf(why, whylen, "%s (%lld bytes; its program headers end at byte %llu)", trunc, (long long)fsize,
         (unsigned long long)phend);
    goto out;
  }
  if (eh.e_shnum && (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff >= size || shend > size)) {
    bcg_setf(why, whylen, "%s (%lld bytes; its section headers end at byte %llu)", trunc, (long long)fsize,
         (unsigned long long)shend);
    goto out;
  }
  size_t nph = (size_t)eh.e_phnum * sizeof(Elf64_Phdr), nsh = (size_t)eh.e_shnum * sizeof(Elf64_Shdr);
  buf = malloc(nph + nsh + 1);
  if (!buf) {
    bcg_setf(why, whylen, "out of memory");
    goto out;
  }
  if (pread(fd, buf, nph, (off_t)eh.e_phoff) != (ssize_t)nph ||
      (nsh && pread(fd, buf + nph, nsh, (off_t)eh.e_shoff) != (ssize_t)nsh)) {
    bcg_setf(why, whylen, "%s (cannot read its headers)", trunc);
    goto out;
  }
  for (int i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    memcpy(&ph, buf + (size_t)i * sizeof ph, sizeof ph);
    if (ph.p_type == PT_LOAD && (ph.p_offset > size || ph.p_filesz > size - ph.p_offset)) {
      bcg_setf(why, whylen, "%s (%lld bytes; its loadable segment %d ends at byte %llu)", trunc, (long long)fsize, i,
           (unsigned long long)(ph.p_offset + ph.p_filesz));
      goto out;
    }
  }
  for (int i = 0; i < eh.e_shnum; i++) {
    Elf64_Shdr sh;
    memcpy(&sh, buf + nph + (size_t)i * sizeof sh, sizeof sh);
    if (sh.sh_type != SHT_NOBITS && sh.sh_type != SHT_NULL && (sh.sh_offset > size || sh.sh_size > size - sh.sh_offset)) {
      bcg_setf(why, whylen, "%s (%lld bytes; its section %d ends at byte %llu)", trunc, (long long)fsize, i,
           (unsigned long long)(sh.sh_offset + sh.sh_size));
      goto out;
    }
  }
  rc = 0;
out:
  free(buf);
  close(fd);
  return rc;
}

int bcg_registry_load_file(bcg_registry *r, const char *path, char *err, size_t errlen) {
  if (err && errlen) err[0] = 0;
  struct stat st;
  if (stat(path, &st) != 0) return fail(r, err, errlen, "%s: cannot load: %s", path, strerror(errno));
  if (!S_ISREG(st.st_mode)) return fail(r, err, errlen, "%s: cannot load: not a regular file", path);
  char real[PATH_MAX];
  if (realpath(path, real)) {
    for (int i = 0; i < r->n; i++) {
      char other[PATH_MAX];
      if (r->pl[i]->handle && realpath(r->pl[i]->path, other) && strcmp(real, other) == 0) return 0;
    }
  }
  char why0[512];
  if (elf_check(path, st.st_size, why0, sizeof why0))
    return fail(r, err, errlen, "%s: not a loadable shared object: %s", path, why0);
  /* dlopen searches the library path for a name without '/' */
  char open_path[PATH_MAX + 3];
  snprintf(open_path, sizeof open_path, "%s%s", strchr(path, '/') ? "" : "./", path);
  dlerror();
  void *h = dlopen(open_path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    if (!e) e = "unknown dlopen error";
    size_t pl = strlen(open_path);
    if (strncmp(e, open_path, pl) == 0 && e[pl] == ':') e += pl + 1;
    while (*e == ' ') e++;
    return fail(r, err, errlen, "%s: not a loadable shared object: %s", path, e);
  }
  dlerror();
  void *sym = dlsym(h, BCG_PLUGIN_ENTRY_SYMBOL);
  if (!sym) {
    dlclose(h);
    return fail(r, err, errlen, "%s: not a bcg plugin: no symbol %s", path, BCG_PLUGIN_ENTRY_SYMBOL);
  }
  bcg_plugin_entry_fn entry;
  memcpy(&entry, &sym, sizeof entry);
  const bcg_plugin_desc *d = entry();
  char why[1024];
  if (bcg_plugin_desc_check(d, why, sizeof why)) {
    dlclose(h);
    return fail(r, err, errlen, "%s: %s", path, why);
  }
  if (push_plugin(r, d, path, h, err, errlen)) {
    dlclose(h);
    return -1;
  }
  return 0;
}

int bcg_registry_scan_dir(bcg_registry *r, const char *dir, int required) {
  DIR *dp = opendir(dir);
  if (!dp) {
    if ((errno == ENOENT || errno == ENOTDIR) && !required) return 0; /* e.g. build/bcg/plugins: bcg is a file */
    fail(r, NULL, 0, "%s: cannot read plugin directory: %s", dir, strerror(errno));
    return 0;
  }
  char **names = NULL;
  int n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(dp))) {
    size_t l = strlen(de->d_name);
    if (l <= 3 || strcmp(de->d_name + l - 3, ".so") != 0) continue;
    if (n == cap) {
      int c = cap ? 2 * cap : 16;
      char **nn = realloc(names, (size_t)c * sizeof *nn);
      if (!nn) break;
      names = nn, cap = c;
    }
    if (!(names[n] = strdup(de->d_name))) break;
    n++;
  }
  closedir(dp);
  if (n) qsort(names, (size_t)n, sizeof *names, bcg_cmp_str);
  int loaded = 0;
  for (int i = 0; i < n; i++) {
    char path[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    int before = r->n;
    if (bcg_registry_load_file(r, path, NULL, 0) == 0 && r->n > before) loaded++;
    free(names[i]);
  }
  free(names);
  return loaded;
}

/* SUB next to the directory holding libbcg.so: "plugins" is the build tree,
 * "bcg/plugins" an installation under any prefix (PREFIX/lib/bcg/plugins) */
static int lib_relative_dir(const char *sub, char *buf, size_t len) {
  Dl_info info;
  if (!dladdr((void *)bcg_registry_new, &info) || !info.dli_fname) return -1;
  const char *slash = strrchr(info.dli_fname, '/');
  if (!slash) return snprintf(buf, len, "%s", sub), 0;
  snprintf(buf, len, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname, sub);
  return 0;
}
static int build_tree_dir(char *buf, size_t len) { return lib_relative_dir("plugins", buf, len); }

int bcg_data_dir(char *buf, size_t len) {
  static const char *subs[] = {"..", "../share/bcg"}; /* the build tree's source root; PREFIX/share/bcg */
  char d[PATH_MAX], probe[PATH_MAX + 32];
  for (int i = 0; i < 2; i++) {
    if (lib_relative_dir(subs[i], d, sizeof d)) continue;
    snprintf(probe, sizeof probe, "%s/configs/defaults.ini", d);
    if (access(probe, R_OK) == 0 && realpath(d, probe)) return snprintf(buf, len, "%s", probe), 0;
  }
  snprintf(probe, sizeof probe, "%s/configs/defaults.ini", BCG_PREFIX "/share/bcg");
  if (access(probe, R_OK) == 0) return snprintf(buf, len, "%s", BCG_PREFIX "/share/bcg"), 0;
  return -1;
}

/* The built-in plugin directories, in search order: the build tree's
 * plugins/ next to libbcg.so, an installation's lib/bcg/plugins next to it
 * (when it is not BCG_PREFIX's), BCG_PREFIX's; returns how many. They come
 * before $BCG_PLUGIN_PATH, so a user's plugin can add names but never shadow
 * a built-in (it is reported as a duplicate of it, naming its file). */
static int builtin_dirs(char dirs[3][PATH_MAX]) {
  int n = 0;
  if (build_tree_dir(dirs[n], PATH_MAX) == 0) n++;
  if (lib_relative_dir("bcg/plugins", dirs[n], PATH_MAX) == 0 && strcmp(dirs[n], BCG_PREFIX "/lib/bcg/plugins")) n++;
  snprintf(dirs[n++], PATH_MAX, "%s", BCG_PREFIX "/lib/bcg/plugins");
  return n;
}

void bcg_plugin_search_path(char *buf, size_t len) {
  const char *env = getenv("BCG_PLUGIN_PATH");
  char dirs[3][PATH_MAX];
  int n = builtin_dirs(dirs);
  size_t used = 0;
  if (len) buf[0] = 0;
  for (int i = 0; i < n && used < len; i++) used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ":" : "", dirs[i]);
  if (env && *env && used < len) snprintf(buf + used, len - used, ":%s", env);
}

int bcg_registry_scan_default(bcg_registry *r) {
  int loaded = 0;
  char dirs[3][PATH_MAX];
  int n = builtin_dirs(dirs);
  for (int i = 0; i < n; i++) loaded += bcg_registry_scan_dir(r, dirs[i], 0);
  const char *env = getenv("BCG_PLUGIN_PATH");
  if (env && *env) {
    char *copy = strdup(env);
    if (copy) {
      char *save = NULL;
      for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save))
        loaded += bcg_registry_scan_dir(r, d, 1);
      free(copy);
    }
  }
  return loaded;
}

int bcg_registry_count(const bcg_registry *r) { return r ? r->n : 0; }

const bcg_plugin *bcg_registry_get(const bcg_registry *r, int i) {
  return (r && i >= 0 && i < r->n) ? r->pl[i] : NULL;
}

const bcg_plugin *bcg_registry_find(const bcg_registry *r, bcg_kind kind, const char *name) {
  if (!r || !name) return NULL;
  for (int i = 0; i < r->n; i++)
    if (r->pl[i]->desc->kind == (uint32_t)kind && strcmp(r->pl[i]->desc->name, name) == 0) return r->pl[i];
  return NULL;
}

void bcg_registry_names(const bcg_registry *r, bcg_kind kind, char *buf, size_t len) {
  size_t used = 0;
  if (len) buf[0] = 0;
  for (int i = 0; r && i < r->n; i++) {
    if (r->pl[i]->desc->kind != (uint32_t)kind) continue;
    int w = snprintf(buf + used, len > used ? len - used : 0, "%s%s", used ? ", " : "", r->pl[i]->desc->name);
    if (w > 0) used += (size_t)w;
    if (used >= len) break;
  }
}

int bcg_registry_error_count(const bcg_registry *r) { return r ? r->nerr : 0; }

const char *bcg_registry_error(const bcg_registry *r, int i) {
  return (r && i >= 0 && i < r->nerr) ? r->errs[i] : NULL;
}

/* ---- the process-wide registry ----------------------------------------------------------- */

static bcg_registry *global_registry;
static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static bcg_registry empty_registry;

static void global_init(void) {
  global_registry = bcg_registry_new();
  if (global_registry) bcg_registry_scan_default(global_registry);
}

const bcg_registry *bcg_registry_global(void) {
  pthread_once(&global_once, global_init);
  return global_registry ? global_registry : &empty_registry;
}
