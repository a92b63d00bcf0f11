/* config.c - INI configuration: scan, parse (iniparser), override, validate.
 *
 * iniparser gives neither line numbers nor duplicate detection and has sharp
 * edges on malformed input (NUL bytes, over-long lines), so the file text is
 * first scanned here: every line is classified the way iniparser will see it,
 * names are checked, duplicates found and line numbers recorded. Only a file
 * that passes the scan is handed to iniparser, which supplies the values
 * (quotes, inline comments, continuations). */
#include "bcg/config.h"
#include "bcg/dist.h"

#include <ctype.h>
#include <errno.h>
#include <iniparser/iniparser.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcg/loader.h"
#include "plugin_err.h"
#include "util.h"

#define MAX_LINE 1000          /* iniparser's buffer is 1024 */
#define MAX_FILE (16 << 20)    /* a config is small; refuse anything huge */
#define MAX_SECNAME 32
#define MAX_KEYNAME 64
#define MAX_LIST 64

/* Sections in canonical (output) order. */
static const char *const all_sections[] = {"run",     "model",     "sim",  "contact", "estimator",
                                           "learner", "task",      "eval", "sweep"};
#define NSEC ((int)(sizeof all_sections / sizeof all_sections[0]))

typedef struct entry {
  char section[MAX_SECNAME];
  char key[MAX_KEYNAME];
  char *value;
  int line;    /* >0 file line, <0 -(index of override + 1) */
} entry;

typedef struct header {
  char name[MAX_SECNAME];
  int line; /* as entry.line */
} header;

static void host_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct bcg_params {
  const bcg_config *cfg;
  const char *name;
  const bcg_plugin *plugin;
  const bcg_key_spec *keys;
  int nkeys;
  char **values;
  int *lines;
  int line;    /* header line; 0 when the section is absent */
  int present; /* plugin sections: given in the file or the command line */
};

typedef struct sweep_entry {
  char *key; /* "section.key" */
  int line;
  char **vals;
  int nvals;
} sweep_entry;

struct bcg_config {
  char *path;
  bcg_params sec[NSEC];
  sweep_entry *sweep;
  int nsweep;
  char **overrides; /* copies, for messages */
  int noverride;
};

/* ---- small helpers --------------------------------------------------------- */

static int value_text(const char *v, char *out, size_t len); /* a value as INI text (resolved output) */

static char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static char *trim(char *s) {
  while (*s && isspace((unsigned char)*s)) s++;
  size_t n = strlen(s);
  while (n > 0 && isspace((unsigned char)s[n - 1])) s[--n] = 0;
  return s;
}

static void lower(char *s) {
  for (; *s; s++) *s = (char)tolower((unsigned char)*s);
}

static int is_name(const char *s, int allow_dot) {
  if (!*s) return 0;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (!(islower(c) || isdigit(c) || c == '_' || (allow_dot && c == '.'))) return 0;
  }
  return 1;
}

static int section_index(const char *name) {
  for (int i = 0; i < NSEC; i++)
    if (strcmp(all_sections[i], name) == 0) return i;
  return -1;
}

bcg_kind bcg_section_kind(const char *section) {
  if (!section) return (bcg_kind)0;
  for (int k = BCG_KIND_CONTACT; k <= BCG_KIND_TASK; k++)
    if (strcmp(section, bcg_kind_name((bcg_kind)k)) == 0) return (bcg_kind)k;
  return (bcg_kind)0;
}

/* ---- Levenshtein suggestions ------------------------------------------------ */

/* Optimal-string-alignment distance: Levenshtein plus adjacent transpositions
 * ("cdua" is one edit from "cuda"), the typo users make most. */
int bcg_levenshtein(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > 128 || m > 128) return (int)(n > m ? n : m);
  int d[129][129];
  for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
  for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
  for (size_t i = 1; i <= n; i++)
    for (size_t j = 1; j <= m; j++) {
      int cost = a[i - 1] != b[j - 1];
      int v = d[i - 1][j - 1] + cost;
      if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
        v = d[i - 2][j - 2] + 1;
      d[i][j] = v;
    }
  return d[n][m];
}

const char *bcg_closest(const char *word, const char *const *cands, int n) {
  size_t len = strlen(word);
  int thr = len <= 3 ? 1 : len <= 6 ? 2 : 3;
  const char *best = NULL;
  int bd = thr + 1;
  for (int i = 0; i < n; i++) {
    if (!cands[i]) continue;
    int d = bcg_levenshtein(word, cands[i]);
    if (d < bd) bd = d, best = cands[i];
  }
  return best;
}

/* " (did you mean X?)" or "" */
static void suggestion(char *buf, size_t len, const char *word, const char *const *cands, int n) {
  const char *c = bcg_closest(word, cands, n);
  if (c)
    snprintf(buf, len, " (did you mean %s?)", c);
  else if (len)
    buf[0] = 0;
}

/* ---- value checking ----------------------------------------------------------- */

static int parse_long(const char *s, long long *out) {
  while (isspace((unsigned char)*s)) s++;
  if (!*s) return -1;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s) return -1;
  while (isspace((unsigned char)*end)) end++;
  if (*end) return -1;
  if (errno == ERANGE) return -2;
  *out = v;
  return 0;
}

static int parse_double(const char *s, double *out) {
  while (isspace((unsigned char)*s)) s++;
  if (!*s) return -1;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s) return -1;
  while (isspace((unsigned char)*end)) end++;
  if (*end) return -1;
  if (!isfinite(v)) return -2;
  *out = v;
  return 0;
}

static int parse_bool(const char *s, int *out) {
  static const char *const t[] = {"true", "yes", "on", "1"}, *const f[] = {"false", "no", "off", "0"};
  char b[8];
  size_t n = strlen(s);
  if (n >= sizeof b) return -1;
  for (size_t i = 0; i < n; i++) b[i] = (char)tolower((unsigned char)s[i]);
  b[n] = 0;
  for (int i = 0; i < 4; i++) {
    if (strcmp(b, t[i]) == 0) return *out = 1, 0;
    if (strcmp(b, f[i]) == 0) return *out = 0, 0;
  }
  return -1;
}

/* Does "a|b|c" contain exactly s? */
static int choice_has(const char *choices, const char *s) {
  size_t n = strlen(s);
  const char *p = choices;
  while (p && *p) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && n > 0 && strncmp(p, s, n) == 0) return 1;
    p = bar ? bar + 1 : NULL;
  }
  return 0;
}

static void choice_suggest(const char *choices, const char *s, char *buf, size_t len) {
  char tmp[512];
  const char *c[32];
  int n = 0;
  snprintf(tmp, sizeof tmp, "%s", choices);
  for (char *save = NULL, *t = strtok_r(tmp, "|", &save); t && n < 32; t = strtok_r(NULL, "|", &save))
    c[n++] = t;
  suggestion(buf, len, s, c, n);
}

static int range_bounded(double v) { return isfinite(v) && fabs(v) < 1e300; }

static void range_desc(const bcg_key_spec *k, char *buf, size_t len) {
  char lo[32] = "-inf", hi[32] = "inf";
  if (range_bounded(k->min)) snprintf(lo, sizeof lo, "%.10g", k->min);
  if (range_bounded(k->max)) snprintf(hi, sizeof hi, "%.10g", k->max);
  snprintf(buf, len, "[%s, %s]", lo, hi);
}

void bcg_key_type_desc(const bcg_key_spec *k, char *buf, size_t len) {
  char r[80];
  range_desc(k, r, sizeof r);
  switch (k->type) {
    case BCG_KEY_INT: snprintf(buf, len, "int in %s", r); break;
    case BCG_KEY_REAL: snprintf(buf, len, "real in %s", r); break;
    case BCG_KEY_LIST: snprintf(buf, len, "list of ints in %s", r); break;
    case BCG_KEY_CHOICE: snprintf(buf, len, "one of %s", k->choices ? k->choices : "?"); break;
    case BCG_KEY_BOOL: snprintf(buf, len, "bool"); break;
    case BCG_KEY_STRING: snprintf(buf, len, "string"); break;
    case BCG_KEY_PATH: snprintf(buf, len, "file path"); break;
    default: snprintf(buf, len, "invalid type %d", (int)k->type);
  }
}

static int check_number(const bcg_key_spec *k, const char *s, int integer, char *why, size_t wl) {
  char r[80];
  double v;
  if (integer) {
    long long iv;
    int rc = parse_long(s, &iv);
    if (rc == -1) return bcg_setf(why, wl, "'%s' is not an integer", s), -1;
    if (rc == -2) return bcg_setf(why, wl, "'%s' is too large", s), -1;
    v = (double)iv;
  } else {
    int rc = parse_double(s, &v);
    if (rc == -1) return bcg_setf(why, wl, "'%s' is not a number", s), -1;
    if (rc == -2) return bcg_setf(why, wl, "'%s' is not a finite number", s), -1;
  }
  if (v < k->min || v > k->max) {
    range_desc(k, r, sizeof r);
    bcg_setf(why, wl, "%s is out of range %s", s, r);
    return -1;
  }
  return 0;
}

int bcg_key_check(const bcg_key_spec *k, const char *value, char *why, size_t wl) {
  if (!value) return bcg_setf(why, wl, "no value"), -1;
  char buf[1100];
  snprintf(buf, sizeof buf, "%s", value);
  char *s = trim(buf);
  switch (k->type) {
    case BCG_KEY_STRING:
    case BCG_KEY_PATH: return 0;
    case BCG_KEY_INT:
    case BCG_KEY_REAL:
      if (!*s) return bcg_setf(why, wl, "empty value, expected %s", k->type == BCG_KEY_INT ? "an integer" : "a number"), -1;
      return check_number(k, s, k->type == BCG_KEY_INT, why, wl);
    case BCG_KEY_BOOL: {
      int b;
      if (parse_bool(s, &b)) return bcg_setf(why, wl, "'%s' is not a boolean (true/false/yes/no/on/off/1/0)", s), -1;
      return 0;
    }
    case BCG_KEY_CHOICE: {
      if (!k->choices) return bcg_setf(why, wl, "key declares no choices"), -1;
      if (choice_has(k->choices, s)) return 0;
      char sug[96];
      choice_suggest(k->choices, s, sug, sizeof sug);
      bcg_setf(why, wl, "'%s' is not one of %s%s", s, k->choices, sug);
      return -1;
    }
    case BCG_KEY_LIST: {
      if (!*s) return bcg_setf(why, wl, "empty list, expected comma-separated integers"), -1;
      int i = 0;
      char *save = NULL;
      for (char *p = s;; p = NULL) {
        char *t = strtok_r(p, ",", &save);
        if (!t) break;
        t = trim(t);
        i++;
        if (i > MAX_LIST) return bcg_setf(why, wl, "more than %d list elements", MAX_LIST), -1;
        char w[256];
        if (check_number(k, t, 1, w, sizeof w)) return bcg_setf(why, wl, "element %d: %s", i, w), -1;
      }
      /* strtok_r skips empty fields; catch "1,,2", ",1" and "1," explicitly */
      snprintf(buf, sizeof buf, "%s", value);
      s = trim(buf);
      if (s[0] == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
        return bcg_setf(why, wl, "'%s' has an empty list element", s), -1;
      for (char *c = s; *c; c++)
        if (*c == ',') {
          char *n = c + 1;
          while (isspace((unsigned char)*n)) n++;
          if (*n == ',') return bcg_setf(why, wl, "'%s' has an empty list element", s), -1;
        }
      return 0;
    }
  }
  bcg_setf(why, wl, "invalid key type %d", (int)k->type);
  return -1;
}

/* ---- the text scan -------------------------------------------------------------- */

typedef struct scan {
  header *hdr;
  int nhdr, caphdr;
  entry *ent;
  int nent, capent;
} scan;

static void scan_free(scan *s) {
  for (int i = 0; i < s->nent; i++) free(s->ent[i].value);
  free(s->ent);
  free(s->hdr);
  memset(s, 0, sizeof *s);
}

static header *add_header(scan *s) {
  if (s->nhdr == s->caphdr) {
    int c = s->caphdr ? 2 * s->caphdr : 8;
    header *h = realloc(s->hdr, (size_t)c * sizeof *h);
    if (!h) return NULL;
    s->hdr = h, s->caphdr = c;
  }
  header *h = &s->hdr[s->nhdr++];
  memset(h, 0, sizeof *h);
  return h;
}

static entry *add_entry(scan *s) {
  if (s->nent == s->capent) {
    int c = s->capent ? 2 * s->capent : 16;
    entry *e = realloc(s->ent, (size_t)c * sizeof *e);
    if (!e) return NULL;
    s->ent = e, s->capent = c;
  }
  entry *e = &s->ent[s->nent++];
  memset(e, 0, sizeof *e);
  return e;
}

static header *find_header(scan *s, const char *name) {
  for (int i = 0; i < s->nhdr; i++)
    if (strcmp(s->hdr[i].name, name) == 0) return &s->hdr[i];
  return NULL;
}

static entry *find_entry(scan *s, const char *sec, const char *key) {
  for (int i = 0; i < s->nent; i++)
    if (strcmp(s->ent[i].section, sec) == 0 && strcmp(s->ent[i].key, key) == 0) return &s->ent[i];
  return NULL;
}

static int read_file(const char *path, char **out, size_t *outlen, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) return bcg_setf(err, errlen, "%s: cannot open: %s", path, strerror(errno)), -1;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  if (!buf) return fclose(f), bcg_setf(err, errlen, "%s: out of memory", path), -1;
  for (;;) {
    if (n == cap) {
      if (cap >= MAX_FILE) {
        free(buf), fclose(f);
        return bcg_setf(err, errlen, "%s: larger than %d MiB, not a config file", path, MAX_FILE >> 20), -1;
      }
      char *b = realloc(buf, cap * 2);
      if (!b) return free(buf), fclose(f), bcg_setf(err, errlen, "%s: out of memory", path), -1;
      buf = b, cap *= 2;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (r == 0) {
      if (ferror(f)) {
        int e = errno;
        free(buf), fclose(f);
        return bcg_setf(err, errlen, "%s: read error: %s", path, strerror(e)), -1;
      }
      break;
    }
  }
  fclose(f);
  *out = buf, *outlen = n;
  return 0;
}

/* Scan the text; on success s holds the headers and entries (values unset). */
static int scan_text(const char *path, const char *text, size_t n, scan *s, char *err, size_t errlen) {
  char logical[MAX_LINE + 2];
  size_t ll = 0;
  int lineno = 0, start = 0;
  const char *cur = NULL; /* current section name */
  size_t pos = 0;
  while (pos < n) {
    const char *lp = text + pos;
    const char *nl = memchr(lp, '\n', n - pos);
    size_t len = nl ? (size_t)(nl - lp) : n - pos;
    pos += len + (nl ? 1 : 0);
    lineno++;
    if (ll == 0) start = lineno;
    for (size_t i = 0; i < len; i++) {
      unsigned char c = (unsigned char)lp[i];
      if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f)
        return bcg_setf(err, errlen, "%s:%d: control character 0x%02x; not a text config file", path, lineno, c), -1;
    }
    if (ll + len > MAX_LINE)
      return bcg_setf(err, errlen, "%s:%d: line longer than %d characters", path, start, MAX_LINE), -1;
    memcpy(logical + ll, lp, len);
    ll += len;
    logical[ll] = 0;
    /* iniparser strips trailing space, then a trailing '\' continues the line */
    while (ll > 0 && isspace((unsigned char)logical[ll - 1])) logical[--ll] = 0;
    if (ll > 0 && logical[ll - 1] == '\\') {
      logical[--ll] = 0;
      if (pos >= n)
        return bcg_setf(err, errlen, "%s:%d: line continued with '\\' past the end of the file", path, start), -1;
      continue;
    }
    char *l = trim(logical);
    size_t L = strlen(l);
    ll = 0;
    if (L == 0 || l[0] == '#' || l[0] == ';') continue;
    if (l[0] == '[') {
      if (l[L - 1] != ']')
        return bcg_setf(err, errlen, "%s:%d: unbalanced '[': a section header is a whole line '[name]'", path, start), -1;
      l[L - 1] = 0;
      char *name = trim(l + 1);
      lower(name);
      if (!is_name(name, 0) || strlen(name) >= MAX_SECNAME)
        return bcg_setf(err, errlen, "%s:%d: invalid section name '[%.40s]' (lowercase letters, digits, '_')", path, start, name), -1;
      header *prev = find_header(s, name);
      if (prev)
        return bcg_setf(err, errlen, "%s:%d: [%s]: section appears twice (first at line %d)", path, start, name, prev->line), -1;
      header *h = add_header(s);
      if (!h) return bcg_setf(err, errlen, "%s: out of memory", path), -1;
      snprintf(h->name, sizeof h->name, "%s", name);
      h->line = start;
      cur = h->name;
      continue;
    }
    if (l[0] == ']') return bcg_setf(err, errlen, "%s:%d: unbalanced ']'", path, start), -1;
    char *eq = strchr(l, '=');
    if (!eq)
      return bcg_setf(err, errlen, "%s:%d: expected 'key = value', '[section]' or a comment, got '%.40s%s'", path, start, l,
                  strlen(l) > 40 ? "..." : ""), -1;
    *eq = 0;
    char *key = trim(l);
    lower(key);
    if (!*key) return bcg_setf(err, errlen, "%s:%d: missing key name before '='", path, start), -1;
    if (!is_name(key, 1) || strlen(key) >= MAX_KEYNAME)
      return bcg_setf(err, errlen, "%s:%d: invalid key name '%.40s' (lowercase letters, digits, '_', '.')", path, start, key), -1;
    if (!cur) return bcg_setf(err, errlen, "%s:%d: %s: key outside of any [section]", path, start, key), -1;
    entry *prev = find_entry(s, cur, key);
    if (prev)
      return bcg_setf(err, errlen, "%s:%d: [%s] %s: set twice (first at line %d)", path, start, cur, key, prev->line), -1;
    entry *e = add_entry(s);
    if (!e) return bcg_setf(err, errlen, "%s: out of memory", path), -1;
    snprintf(e->section, sizeof e->section, "%s", cur);
    snprintf(e->key, sizeof e->key, "%s", key);
    e->line = start;
  }
  return 0;
}

static int silent_error(const char *fmt, ...) {
  (void)fmt;
  return 0;
}

/* ---- the config object ---------------------------------------------------------- */

static void params_free(bcg_params *p) {
  if (p->values)
    for (int i = 0; i < p->nkeys; i++) free(p->values[i]);
  free(p->values);
  free(p->lines);
  p->values = NULL;
  p->lines = NULL;
}

void bcg_config_free(bcg_config *cfg) {
  if (!cfg) return;
  for (int i = 0; i < NSEC; i++) params_free(&cfg->sec[i]);
  for (int i = 0; i < cfg->nsweep; i++) {
    for (int j = 0; j < cfg->sweep[i].nvals; j++) free(cfg->sweep[i].vals[j]);
    free(cfg->sweep[i].vals);
    free(cfg->sweep[i].key);
  }
  free(cfg->sweep);
  for (int i = 0; i < cfg->noverride; i++) free(cfg->overrides[i]);
  free(cfg->overrides);
  free(cfg->path);
  free(cfg);
}

/* "<file>:<line>" or "command line" for an entry line number */
static void where(const bcg_config *cfg, int line, char *buf, size_t len) {
  if (line > 0)
    snprintf(buf, len, "%s:%d", cfg->path, line);
  else if (line < 0)
    snprintf(buf, len, "command line");
  else
    snprintf(buf, len, "%s", cfg->path);
}

/* " (override 'x')" for an override line, else "" */
static void override_note(const bcg_config *cfg, int line, char *buf, size_t len) {
  if (line < 0 && -line - 1 < cfg->noverride)
    snprintf(buf, len, " (override %s)", cfg->overrides[-line - 1]);
  else if (len)
    buf[0] = 0;
}

static int key_index(const bcg_params *p, const char *key) {
  for (int i = 0; i < p->nkeys; i++)
    if (strcmp(p->keys[i].name, key) == 0) return i;
  return -1;
}

static void key_names(const bcg_key_spec *k, int n, const char **out, int cap, int *nout) {
  int m = 0;
  for (int i = 0; i < n && m < cap; i++) out[m++] = k[i].name;
  *nout = m;
}

/* Error about an unknown key: names the closest declared key. label is what
 * the message names, e.g. "[contact] kapa" or "[sweep] contact.kapa". */
static void unknown_key(const bcg_config *cfg, const bcg_params *p, const char *key, const char *label, int line,
                        char *err, size_t errlen) {
  const char *names[256];
  int n;
  key_names(p->keys, p->nkeys, names, 255, &n);
  if (p->plugin) names[n++] = "plugin";
  char w[1200], sug[96], note[600], whose[160];
  where(cfg, line, w, sizeof w);
  suggestion(sug, sizeof sug, key, names, n);
  override_note(cfg, line, note, sizeof note);
  if (p->plugin)
    snprintf(whose, sizeof whose, "%s plugin '%s'", bcg_kind_name((bcg_kind)p->plugin->desc->kind),
             p->plugin->desc->name);
  else
    snprintf(whose, sizeof whose, "[%s]", p->name);
  bcg_setf(err, errlen, "%s: %s: unknown key for %s%s%s", w, label, whose, sug, note);
}

static int split_values(const char *v, char ***out, int *nout) {
  /* '|' separates values when present (so LIST values can be swept), else ',' */
  char sep = strchr(v, '|') ? '|' : ',';
  char *copy = xstrdup(v);
  if (!copy) return -1;
  int cap = 8, n = 0;
  char **vals = malloc((size_t)cap * sizeof *vals);
  if (!vals) return free(copy), -1;
  char *p = copy;
  for (;;) {
    char *q = strchr(p, sep);
    if (q) *q = 0;
    if (n == cap) {
      char **nv = realloc(vals, (size_t)(cap *= 2) * sizeof *vals);
      if (!nv) goto oom;
      vals = nv;
    }
    if (!(vals[n] = xstrdup(trim(p)))) goto oom;
    n++;
    if (!q) break;
    p = q + 1;
  }
  free(copy);
  *out = vals, *nout = n;
  return 0;
oom:
  for (int i = 0; i < n; i++) free(vals[i]);
  free(vals);
  free(copy);
  return -1;
}

/* Parse "section.key=value" into an entry. */
static int parse_override(const char *ov, int idx, scan *s, char *err, size_t errlen) {
  char buf[1200];
  /* text only, as in a file: the override is also written into a run's
   * config.ini (a comment line), which must load back; tabs are blanks */
  for (const char *c = ov; *c; c++)
    if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f) {
      char shown[64];
      snprintf(shown, sizeof shown, "%.60s", ov);
      for (char *q = shown; *q; q++)
        if ((unsigned char)*q < 0x20 || *q == 0x7f) *q = '?';
      return bcg_setf(err, errlen, "command line: '%s%s': control character 0x%02x; an override is text", shown,
                  strlen(ov) > 60 ? "..." : "", (unsigned char)*c), -1;
    }
  if (strlen(ov) >= sizeof buf) return bcg_setf(err, errlen, "command line: override too long: '%.60s...'", ov), -1;
  snprintf(buf, sizeof buf, "%s", ov);
  char *eq = strchr(buf, '=');
  if (!eq) return bcg_setf(err, errlen, "command line: '%s': expected section.key=value", ov), -1;
  *eq = 0;
  char *lhs = trim(buf), *val = trim(eq + 1);
  lower(lhs);
  char *dot = strchr(lhs, '.');
  if (!dot || dot == lhs || !dot[1])
    return bcg_setf(err, errlen, "command line: '%s': expected section.key=value", ov), -1;
  *dot = 0;
  char *sec = lhs, *key = dot + 1;
  if (!is_name(sec, 0) || strlen(sec) >= MAX_SECNAME)
    return bcg_setf(err, errlen, "command line: '%s': invalid section name '%s'", ov, sec), -1;
  if (!is_name(key, 1) || strlen(key) >= MAX_KEYNAME)
    return bcg_setf(err, errlen, "command line: '%s': invalid key name '%s'", ov, key), -1;
  /* the value must go into a run's config.ini as one line that reads back
   * the same (value_text, write_value) */
  char text[2 * MAX_LINE];
  if (value_text(val, text, sizeof text))
    return bcg_setf(err, errlen, "command line: '%s': a value that needs quotes (it holds ';' or '#', or starts with a "
                "quote or ends with '\\') cannot hold both ' and \"", ov), -1;
  if (strlen(key) + 1 + strlen(text) > MAX_LINE) /* "key=text" */
    return bcg_setf(err, errlen, "command line: '%.60s...': value too long (a config line holds %d characters)", ov,
                MAX_LINE), -1;
  if (!find_header(s, sec)) {
    header *h = add_header(s);
    if (!h) return bcg_setf(err, errlen, "out of memory"), -1;
    snprintf(h->name, sizeof h->name, "%s", sec);
    h->line = -(idx + 1);
  }
  entry *e = find_entry(s, sec, key);
  if (!e) {
    if (!(e = add_entry(s))) return bcg_setf(err, errlen, "out of memory"), -1;
    snprintf(e->section, sizeof e->section, "%s", sec);
    snprintf(e->key, sizeof e->key, "%s", key);
  }
  free(e->value);
  e->value = xstrdup(val);
  e->line = -(idx + 1);
  if (!e->value) return bcg_setf(err, errlen, "out of memory"), -1;
  return 0;
}

/* Validate one [sweep] free key "section.key = v1, v2". */
static int check_sweep(bcg_config *cfg, const bcg_registry *reg, entry *e, char *err, size_t errlen) {
  char w[1200], note[600], sec[MAX_KEYNAME];
  where(cfg, e->line, w, sizeof w);
  override_note(cfg, e->line, note, sizeof note);
  snprintf(sec, sizeof sec, "%s", e->key);
  char *dot = strchr(sec, '.');
  const char *key = NULL;
  if (dot) *dot = 0, key = dot + 1;
  if (!dot || !*key || strchr(key, '.') || !*sec)
    return bcg_setf(err, errlen, "%s: [sweep] %s: expected 'section.key = v1, v2, ...'%s", w, e->key, note), -1;
  int si = section_index(sec);
  if (si < 0 || strcmp(sec, "sweep") == 0) {
    char sug[96];
    suggestion(sug, sizeof sug, sec, all_sections, NSEC - 1);
    return bcg_setf(err, errlen, "%s: [sweep] %s: unknown section [%s]%s%s", w, e->key, sec, sug, note), -1;
  }
  bcg_params *p = &cfg->sec[si];
  bcg_kind kind = bcg_section_kind(sec);
  if (kind && !p->present)
    return bcg_setf(err, errlen, "%s: [sweep] %s: sweeps [%s] but the config has no [%s] section%s", w, e->key, sec, sec,
                note), -1;
  char **vals = NULL;
  int nvals = 0;
  if (split_values(e->value ? e->value : "", &vals, &nvals)) return bcg_setf(err, errlen, "out of memory"), -1;
  sweep_entry *se = &cfg->sweep[cfg->nsweep++];
  se->key = xstrdup(e->key);
  se->line = e->line;
  se->vals = vals;
  se->nvals = nvals;
  if (!se->key) return bcg_setf(err, errlen, "out of memory"), -1;
  const bcg_key_spec *spec = NULL;
  if (kind && strcmp(key, "plugin") == 0) {
    for (int j = 0; j < nvals; j++)
      if (!bcg_registry_find(reg, kind, vals[j])) {
        char names[512];
        bcg_registry_names(reg, kind, names, sizeof names);
        return bcg_setf(err, errlen, "%s: [sweep] %s: no %s plugin named '%s' (available: %s)%s", w, e->key,
                    bcg_kind_name(kind), vals[j], names[0] ? names : "none", note), -1;
      }
    return 0;
  }
  int ki = key_index(p, key);
  if (ki < 0) {
    char label[MAX_KEYNAME + 16];
    snprintf(label, sizeof label, "[sweep] %s", e->key);
    unknown_key(cfg, p, key, label, e->line, err, errlen);
    return -1;
  }
  spec = &p->keys[ki];
  for (int j = 0; j < nvals; j++) {
    char why[600];
    if (!vals[j][0]) return bcg_setf(err, errlen, "%s: [sweep] %s: empty value in the list%s", w, e->key, note), -1;
    if (bcg_key_check(spec, vals[j], why, sizeof why))
      return bcg_setf(err, errlen, "%s: [sweep] %s: %s%s", w, e->key, why, note), -1;
  }
  return 0;
}

static void base_name(const char *path, char *out, size_t len) {
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  snprintf(out, len, "%s", b);
  char *dot = strrchr(out, '.');
  if (dot && dot != out) *dot = 0;
  for (char *c = out; *c; c++)
    if (!(isalnum((unsigned char)*c) || *c == '_' || *c == '-' || *c == '.')) *c = '_';
  if (!out[0]) snprintf(out, len, "run");
}

/* the file's values (as iniparser reads them) into the scanned entries,
 * then the command-line overrides (after every file entry) */
static int read_values(bcg_config *cfg, const char *path, scan *s, int noverride, char **overrides, char *err,
                       size_t errlen) {
  iniparser_set_error_callback(silent_error);
  dictionary *d = iniparser_load(path);
  if (!d) return bcg_setf(err, errlen, "%s: iniparser could not parse the file", path), -1;
  for (int i = 0; i < s->nent; i++) {
    char k[MAX_SECNAME + MAX_KEYNAME + 2];
    snprintf(k, sizeof k, "%s:%s", s->ent[i].section, s->ent[i].key);
    const char *v = iniparser_getstring(d, k, NULL);
    if (!(s->ent[i].value = xstrdup(v ? v : ""))) {
      iniparser_freedict(d);
      return bcg_setf(err, errlen, "out of memory"), -1;
    }
  }
  iniparser_freedict(d);
  /* overrides come after every file entry */
  if (noverride > 0) {
    cfg->overrides = calloc((size_t)noverride, sizeof(char *));
    if (!cfg->overrides) {
      bcg_setf(err, errlen, "out of memory");
      return -1;
    }
    cfg->noverride = noverride;
    for (int i = 0; i < noverride; i++)
      if (!(cfg->overrides[i] = xstrdup(overrides[i] ? overrides[i] : ""))) {
        bcg_setf(err, errlen, "out of memory");
        return -1;
      }
    for (int i = 0; i < noverride; i++)
      if (parse_override(cfg->overrides[i], i, s, err, errlen)) return -1;
  }
  return 0;
}

/* the sections: known, and for a plugin section a plugin selected and
 * found (its key table then replaces the section's) */
static int resolve_sections(bcg_config *cfg, const bcg_registry *reg, scan *s, char *err, size_t errlen) {
  /* sections: known? plugin selected and found? */
  for (int h = 0; h < s->nhdr; h++) {
    header *hd = &s->hdr[h];
    char w[1200], note[600];
    where(cfg, hd->line, w, sizeof w);
    override_note(cfg, hd->line, note, sizeof note);
    int si = section_index(hd->name);
    if (si < 0) {
      char sug[96];
      suggestion(sug, sizeof sug, hd->name, all_sections, NSEC);
      bcg_setf(err, errlen, "%s: [%s]: unknown section%s%s", w, hd->name, sug, note);
      return -1;
    }
    bcg_params *p = &cfg->sec[si];
    p->line = hd->line;
    p->present = 1;
    bcg_kind kind = bcg_section_kind(hd->name);
    if (!kind) continue;
    entry *pe = find_entry(s, hd->name, "plugin");
    char names[512];
    bcg_registry_names(reg, kind, names, sizeof names);
    if (!pe) {
      bcg_setf(err, errlen, "%s: [%s] plugin: missing; say 'plugin = NAME' (available: %s)%s", w, hd->name,
           names[0] ? names : "none", note);
      return -1;
    }
    const bcg_plugin *pl = bcg_registry_find(reg, kind, pe->value);
    if (!pl) {
      const char *c[128];
      int nc = 0;
      for (int j = 0; reg && j < bcg_registry_count(reg) && nc < 128; j++) {
        const bcg_plugin *q = bcg_registry_get(reg, j);
        if (q->desc->kind == (uint32_t)kind) c[nc++] = q->desc->name;
      }
      char sug[96];
      suggestion(sug, sizeof sug, pe->value, c, nc);
      where(cfg, pe->line, w, sizeof w);
      override_note(cfg, pe->line, note, sizeof note);
      bcg_setf(err, errlen, "%s: [%s] plugin: no %s plugin named '%s'%s (available: %s)%s", w, hd->name,
           bcg_kind_name(kind), pe->value, sug, names[0] ? names : "none", note);
      return -1;
    }
    p->plugin = pl;
    p->keys = pl->desc->keys;
    p->nkeys = pl->desc->nkeys;
  }
  return 0;
}

/* the keys: declared by their section (or its plugin), valid values, in
 * file order then overrides; then the [sweep] lists */
static int resolve_keys(bcg_config *cfg, const bcg_registry *reg, scan *s, char *err, size_t errlen) {
  /* allocate resolved values */
  for (int i = 0; i < NSEC; i++) {
    bcg_params *p = &cfg->sec[i];
    if (p->nkeys == 0) continue;
    p->values = calloc((size_t)p->nkeys, sizeof(char *));
    p->lines = calloc((size_t)p->nkeys, sizeof(int));
    if (!p->values || !p->lines) {
      bcg_setf(err, errlen, "out of memory");
      return -1;
    }
  }
  int nsweep_max = 0;
  for (int i = 0; i < s->nent; i++) nsweep_max += strcmp(s->ent[i].section, "sweep") == 0;
  if (nsweep_max && !(cfg->sweep = calloc((size_t)nsweep_max, sizeof *cfg->sweep))) {
    bcg_setf(err, errlen, "out of memory");
    return -1;
  }

  /* keys: declared? valid value? (file order, then overrides) */
  for (int i = 0; i < s->nent; i++) {
    entry *e = &s->ent[i];
    bcg_params *p = &cfg->sec[section_index(e->section)];
    if (p->plugin && strcmp(e->key, "plugin") == 0) continue;
    int ki = key_index(p, e->key);
    if (ki < 0 && strcmp(e->section, "sweep") == 0 && strchr(e->key, '.')) continue; /* below */
    const entry *pe = ki < 0 && p->plugin && e->line > 0 ? find_entry(s, e->section, "plugin") : NULL;
    if (pe && pe->line < 0) {
      /* the file's key of the plugin the command line replaced (estimator.plugin=autodiff
       * over a section of bcg's keys): not this plugin's, so ignored, with a warning */
      char w[1200];
      where(cfg, e->line, w, sizeof w);
      host_log(1, "%s: [%s] %s: not a key of %s plugin '%s', which the command line selected: ignored", w,
               e->section, e->key, bcg_kind_name(bcg_section_kind(e->section)), p->plugin->desc->name);
      continue;
    }
    if (ki < 0) {
      char label[MAX_SECNAME + MAX_KEYNAME + 4];
      snprintf(label, sizeof label, "[%s] %s", e->section, e->key);
      unknown_key(cfg, p, e->key, label, e->line, err, errlen);
      return -1;
    }
    char why[700], w[1200], note[600];
    if (bcg_key_check(&p->keys[ki], e->value, why, sizeof why)) {
      where(cfg, e->line, w, sizeof w);
      override_note(cfg, e->line, note, sizeof note);
      bcg_setf(err, errlen, "%s: [%s] %s: %s%s", w, e->section, e->key, why, note);
      return -1;
    }
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s", e->value);
    if (!(p->values[ki] = xstrdup(trim(tmp)))) {
      bcg_setf(err, errlen, "out of memory");
      return -1;
    }
    p->lines[ki] = e->line;
  }
  for (int i = 0; i < s->nent; i++) {
    entry *e = &s->ent[i];
    if (strcmp(e->section, "sweep") == 0 && strchr(e->key, '.'))
      if (check_sweep(cfg, reg, e, err, errlen)) return -1;
  }
  return 0;
}

/* the defaults of the keys not given, an error for a required one, and
 * [run] name defaulting to the config's base name */
static int fill_defaults(bcg_config *cfg, const char *path, char *err, size_t errlen) {
  /* defaults and required keys */
  for (int i = 0; i < NSEC; i++) {
    bcg_params *p = &cfg->sec[i];
    if (bcg_section_kind(p->name) && !p->present) continue;
    for (int k = 0; k < p->nkeys; k++) {
      if (p->values[k]) continue;
      if (!p->keys[k].def) {
        char w[1200];
        where(cfg, p->line, w, sizeof w);
        bcg_setf(err, errlen, "%s: [%s] %s: required (%s has no default)", w, p->name, p->keys[k].name,
             p->plugin ? p->plugin->desc->name : "the key");
        return -1;
      }
      if (!(p->values[k] = xstrdup(p->keys[k].def))) {
        bcg_setf(err, errlen, "out of memory");
        return -1;
      }
    }
  }
  /* [run] name defaults to the config's base name */
  {
    bcg_params *run = &cfg->sec[section_index("run")];
    int ki = key_index(run, "name");
    if (ki >= 0 && run->values[ki] && !run->values[ki][0]) {
      char b[256];
      base_name(path, b, sizeof b);
      free(run->values[ki]);
      if (!(run->values[ki] = xstrdup(b))) {
        bcg_setf(err, errlen, "out of memory");
        return -1;
      }
    }
  }
  return 0;
}

/* A relative path key that names nothing in the working directory but a file
 * in bcg's data directory (configs/ and models/ of the source tree or of
 * PREFIX/share/bcg) takes that file's absolute path, so the shipped configs
 * work from any directory and from an installation. */
static int resolve_data_paths(bcg_config *cfg, char *err, size_t errlen) {
  char dd[PATH_MAX];
  int have = -1;
  for (int i = 0; i < NSEC; i++) {
    bcg_params *p = &cfg->sec[i];
    for (int k = 0; k < p->nkeys; k++) {
      const char *v = p->values[k];
      if (p->keys[k].type != BCG_KEY_PATH || !v || !v[0] || v[0] == '/' || access(v, F_OK) == 0) continue;
      if (have < 0) have = bcg_data_dir(dd, sizeof dd) == 0;
      if (!have) return 0;
      char cand[2 * PATH_MAX];
      snprintf(cand, sizeof cand, "%s/%s", dd, v);
      if (access(cand, F_OK) != 0) continue;
      char *nv = xstrdup(cand);
      if (!nv) return bcg_setf(err, errlen, "out of memory"), -1;
      free(p->values[k]);
      p->values[k] = nv;
    }
  }
  return 0;
}

int bcg_config_load_with(bcg_config **out, const bcg_registry *reg, const char *path, int noverride,
                         char **overrides, char *err, size_t errlen) {
  *out = NULL;
  if (err && errlen) err[0] = 0;
  if (!path) return bcg_setf(err, errlen, "no config file given"), -1;
  char *text = NULL;
  size_t n = 0;
  if (read_file(path, &text, &n, err, errlen)) return -1;
  scan s = {0};
  bcg_config *cfg = calloc(1, sizeof *cfg);
  int rc = -1;
  if (!cfg || !(cfg->path = xstrdup(path))) {
    bcg_setf(err, errlen, "out of memory");
    goto done;
  }
  if (scan_text(path, text, n, &s, err, errlen)) goto done;
  if (read_values(cfg, path, &s, noverride, overrides, err, errlen)) goto done;
  /* set up every section with its key table */
  for (int i = 0; i < NSEC; i++) {
    bcg_params *p = &cfg->sec[i];
    p->cfg = cfg;
    p->name = all_sections[i];
    p->keys = bcg_core_keys(p->name, &p->nkeys);
  }

  if (resolve_sections(cfg, reg, &s, err, errlen)) goto done;
  if (resolve_keys(cfg, reg, &s, err, errlen)) goto done;
  if (fill_defaults(cfg, path, err, errlen)) goto done;
  if (resolve_data_paths(cfg, err, errlen)) goto done;
  rc = 0;
done:
  scan_free(&s);
  free(text);
  if (rc == 0)
    *out = cfg;
  else
    bcg_config_free(cfg);
  return rc;
}

int bcg_config_load(bcg_config **out, const char *path, int noverride, char **overrides, char *err,
                    size_t errlen) {
  return bcg_config_load_with(out, bcg_registry_global(), path, noverride, overrides, err, errlen);
}

const char *bcg_config_path(const bcg_config *cfg) { return cfg->path; }

const bcg_params *bcg_config_section(const bcg_config *cfg, const char *section) {
  int i = section ? section_index(section) : -1;
  if (i < 0) return NULL;
  const bcg_params *p = &cfg->sec[i];
  if (bcg_section_kind(section) && !p->present) return NULL;
  return p;
}

const bcg_plugin *bcg_config_plugin(const bcg_config *cfg, bcg_kind kind) {
  const bcg_params *p = bcg_config_section(cfg, bcg_kind_name(kind));
  return p ? p->plugin : NULL;
}

/* ---- getters ------------------------------------------------------------------------ */

static const char *must_value(const bcg_params *p, const char *key, const char *what) {
  int i = p ? key_index(p, key) : -1;
  if (i < 0 || !p->values || !p->values[i]) {
    fprintf(stderr, "bcg: internal error: %s of undeclared key [%s] %s\n", what, p ? p->name : "?", key);
    abort();
  }
  return p->values[i];
}

long bcg_params_get_int(const bcg_params *p, const char *key) {
  long long v = 0;
  parse_long(must_value(p, key, "get_int"), &v);
  return (long)v;
}

double bcg_params_get_real(const bcg_params *p, const char *key) {
  double v = 0;
  parse_double(must_value(p, key, "get_real"), &v);
  return v;
}

int bcg_params_get_bool(const bcg_params *p, const char *key) {
  int v = 0;
  parse_bool(must_value(p, key, "get_bool"), &v);
  return v;
}

const char *bcg_params_get_string(const bcg_params *p, const char *key) {
  return must_value(p, key, "get_string");
}

int bcg_params_get_list(const bcg_params *p, const char *key, long *out, int cap) {
  const char *v = must_value(p, key, "get_list");
  int n = 0;
  const char *c = v;
  while (*c) {
    char *end;
    long x = strtol(c, &end, 10);
    if (end == c) break;
    if (n < cap) out[n] = x;
    n++;
    c = end;
    while (*c && (isspace((unsigned char)*c) || *c == ',')) c++;
  }
  return n < cap ? n : cap;
}

const char *bcg_params_value(const bcg_params *p, const char *key) {
  int i = p ? key_index(p, key) : -1;
  return (i < 0 || !p->values) ? NULL : p->values[i];
}

int bcg_params_line(const bcg_params *p, const char *key) {
  int i = p ? key_index(p, key) : -1;
  if (i < 0 || !p->lines) return 0;
  return p->lines[i] < 0 ? -1 : p->lines[i];
}

const char *bcg_params_name(const bcg_params *p) { return p->name; }
const bcg_plugin *bcg_params_plugin(const bcg_params *p) { return p->plugin; }

static const bcg_params *sec_or_die(const bcg_config *cfg, const char *section) {
  const bcg_params *p = bcg_config_section(cfg, section);
  if (!p) {
    fprintf(stderr, "bcg: internal error: no section [%s]\n", section);
    abort();
  }
  return p;
}

long bcg_config_get_int(const bcg_config *cfg, const char *s, const char *k) {
  return bcg_params_get_int(sec_or_die(cfg, s), k);
}
double bcg_config_get_real(const bcg_config *cfg, const char *s, const char *k) {
  return bcg_params_get_real(sec_or_die(cfg, s), k);
}
int bcg_config_get_bool(const bcg_config *cfg, const char *s, const char *k) {
  return bcg_params_get_bool(sec_or_die(cfg, s), k);
}
const char *bcg_config_get_string(const bcg_config *cfg, const char *s, const char *k) {
  return bcg_params_get_string(sec_or_die(cfg, s), k);
}
int bcg_config_get_list(const bcg_config *cfg, const char *s, const char *k, long *out, int cap) {
  return bcg_params_get_list(sec_or_die(cfg, s), k, out, cap);
}

void bcg_config_errorf(const bcg_config *cfg, const char *section, const char *key, char *err, size_t errlen,
                       const char *fmt, ...) {
  char msg[1024], w[1200], note[600] = "";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int si = section_index(section);
  int line = 0;
  if (si >= 0) {
    const bcg_params *p = &cfg->sec[si];
    int ki = key ? key_index(p, key) : -1;
    line = (ki >= 0 && p->lines) ? p->lines[ki] : p->line;
  }
  where(cfg, line, w, sizeof w);
  override_note(cfg, line, note, sizeof note);
  if (key)
    bcg_setf(err, errlen, "%s: [%s] %s: %s%s", w, section, key, msg, note);
  else
    bcg_setf(err, errlen, "%s: [%s]: %s%s", w, section, msg, note);
}

/* ---- sweep ------------------------------------------------------------------------------ */

int bcg_config_sweep_count(const bcg_config *cfg) { return cfg->nsweep; }
const char *bcg_config_sweep_key(const bcg_config *cfg, int i) {
  return (i >= 0 && i < cfg->nsweep) ? cfg->sweep[i].key : NULL;
}
int bcg_config_sweep_nvalues(const bcg_config *cfg, int i) {
  return (i >= 0 && i < cfg->nsweep) ? cfg->sweep[i].nvals : 0;
}
const char *bcg_config_sweep_value(const bcg_config *cfg, int i, int j) {
  if (i < 0 || i >= cfg->nsweep || j < 0 || j >= cfg->sweep[i].nvals) return NULL;
  return cfg->sweep[i].vals[j];
}

/* ---- resolved output ---------------------------------------------------------------------- */

/* A value as INI text that iniparser reads back as the same value: bare
 * unless it is empty, holds ';' or '#' (a comment), has blanks at either end
 * (stripped), starts with a quote (read as quoted) or ends with '\\' (a
 * continuation); then in the quotes it does not hold. -1 when it needs
 * quotes and holds both kinds: no INI text reads back as it (only an
 * override can give such a value, and parse_override refuses it). */
static int value_text(const char *v, char *out, size_t len) {
  size_t n = strlen(v);
  int quote = n == 0 || strpbrk(v, ";#") || isspace((unsigned char)v[0]) || isspace((unsigned char)v[n - 1]) ||
              v[0] == '"' || v[0] == '\'' || v[n - 1] == '\\';
  int w;
  if (!quote) w = snprintf(out, len, "%s", v);
  else if (!strchr(v, '"')) w = snprintf(out, len, "\"%s\"", v);
  else if (!strchr(v, '\'')) w = snprintf(out, len, "'%s'", v);
  else return -1;
  return w < 0 || (size_t)w >= len ? -1 : 0;
}

/* "key = value", or "key=value" when that is what fits a line (a file's
 * value always does: its own line held it); -1 when it cannot be written */
static int write_value(FILE *f, const char *key, const char *v) {
  char t[2 * MAX_LINE];
  if (value_text(v, t, sizeof t)) return -1;
  size_t n = strlen(key) + strlen(t);
  if (n + 3 <= MAX_LINE) return fprintf(f, "%s = %s\n", key, t) < 0 ? -1 : 0;
  if (n + 1 <= MAX_LINE) return fprintf(f, "%s=%s\n", key, t) < 0 ? -1 : 0;
  return -1;
}

/* a comment line of at most MAX_LINE characters, control characters as '?'
 * (the config's path may hold any byte), and not ending in '\\' (which would
 * continue it over the next line, e.g. a section header) */
static void write_comment(FILE *f, const char *prefix, const char *text) {
  char line[MAX_LINE + 1];
  snprintf(line, sizeof line, "%s%s", prefix, text);
  for (char *c = line; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
  size_t n = strlen(line);
  while (n > 0 && (isspace((unsigned char)line[n - 1]) || line[n - 1] == '\\')) line[--n] = 0;
  fprintf(f, "%s\n", line);
}

/* value of a path key made absolute against the working directory (the
 * file's real path when it exists) */
static const char *abs_path(const char *v, char *buf, size_t len) {
  if (!v || !*v || v[0] == '/') return v;
  char real[PATH_MAX], cwd[PATH_MAX];
  if (realpath(v, real)) return snprintf(buf, len, "%s", real), buf;
  if (!getcwd(cwd, sizeof cwd)) return v;
  snprintf(buf, len, "%s/%s", cwd, v[0] == '.' && v[1] == '/' ? v + 2 : v);
  return buf;
}

static int resolved_write(const bcg_config *cfg, FILE *f, int abs) {
  int rc = 0;
  write_comment(f, "# bcg resolved configuration of ", cfg->path);
  for (int i = 0; i < cfg->noverride; i++) write_comment(f, "# override: ", cfg->overrides[i]);
  for (int i = 0; i < NSEC; i++) {
    const bcg_params *p = &cfg->sec[i];
    int is_sweep = strcmp(p->name, "sweep") == 0;
    if (bcg_section_kind(p->name) && !p->present) continue;
    if (is_sweep && !p->present) continue;
    fprintf(f, "\n[%s]\n", p->name);
    if (p->plugin) fprintf(f, "plugin = %s\n", p->plugin->desc->name);
    for (int k = 0; k < p->nkeys; k++) {
      char buf[PATH_MAX + 1100];
      const char *v = p->values[k];
      if (abs && p->keys[k].type == BCG_KEY_PATH) v = abs_path(v, buf, sizeof buf);
      if (write_value(f, p->keys[k].name, v)) rc = -1;
    }
    if (is_sweep)
      for (int j = 0; j < cfg->nsweep; j++) {
        const sweep_entry *se = &cfg->sweep[j];
        int bar = 0;
        for (int v = 0; v < se->nvals; v++) bar |= strchr(se->vals[v], ',') != NULL;
        /* the values joined as "a, b" (or "a,b" when only that fits a line) */
        char joined[2][2 * MAX_LINE];
        for (int compact = 0; compact < 2; compact++) {
          size_t used = 0;
          joined[compact][0] = 0;
          for (int v = 0; v < se->nvals && used < sizeof joined[0]; v++) {
            int w = snprintf(joined[compact] + used, sizeof joined[0] - used, "%s%s",
                             v ? (bar ? (compact ? "|" : " | ") : (compact ? "," : ", ")) : "", se->vals[v]);
            used += w > 0 ? (size_t)w : 0;
          }
        }
        char t[2 * MAX_LINE];
        const int fits = value_text(joined[0], t, sizeof t) == 0 && strlen(se->key) + strlen(t) + 3 <= MAX_LINE;
        if (write_value(f, se->key, joined[fits ? 0 : 1])) rc = -1;
      }
  }
  fflush(f);
  return ferror(f) || rc ? -1 : 0;
}

int bcg_config_resolved_write(const bcg_config *cfg, FILE *f) { return resolved_write(cfg, f, 0); }
int bcg_config_run_write(const bcg_config *cfg, FILE *f) { return resolved_write(cfg, f, 1); }

/* ---- services ------------------------------------------------------------------------------- */

static void host_log(int level, const char *fmt, ...) {
  static const char *const lv[] = {"error", "warning", "info", "debug"};
  const char *env = getenv("BCG_LOG_LEVEL");
  int max = env ? atoi(env) : 2;
  if (level > max) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "bcg: %s: %s\n", (level >= 0 && level <= 3) ? lv[level] : "log", msg);
}

static const bcg_services host_services = {
    BCG_ABI_VERSION,     (uint32_t)sizeof(bcg_services), bcg_params_get_int,  bcg_params_get_real,
    bcg_params_get_bool, bcg_params_get_string,          bcg_params_get_list, host_log,
    bcg_plugin_err_set,  bcg_dist_sum,                   bcg_dist_sum_real,   bcg_dist_bcast,
    bcg_dist_same,
};

const bcg_services *bcg_services_host(void) { return &host_services; }
