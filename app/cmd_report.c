/* cmd_report.c - `bcg report RUN_DIR|DIR ... [--csv] [--runs] [--plots OUTDIR]`:
 * the runs of an ablation (a sweep, SHAC+BCG against PPO) compared.
 *
 * A RUN_DIR is a directory with log.h5 (and config.ini, eval.h5 when present);
 * any other directory is searched (three levels deep) for run directories, so
 * `bcg report runs/` covers every run under runs/.
 *
 * By default the runs are grouped by configuration: runs whose config.ini
 * agree on every key except the bookkeeping ones (run.seed, run.name,
 * run.out_dir, run.threads, the checkpoint keys, the device batch sizes and
 * [sweep]) are repetitions of one experiment, and each group is one row of
 * mean +- std over its runs (a Markdown table; --csv for spreadsheets): the
 * iterations, samples and wall time logged, the final mean return, the last
 * tracking error (track_err, when the task tracks a reference), and E_fixed
 * and the falls per simulator from eval.h5 (written by `bcg eval`). A group
 * is labelled by the keys whose values differ between the groups.
 *
 * --runs: one row per run instead (its plugins, first -> last and best
 * return, ...). --plots OUTDIR: learning curves of the groups as PNG files,
 * drawn by bcg_plots.py (python3 with matplotlib and h5py) found next to
 * the bcg executable or in ../share/bcg; the interpreter is $BCG_PYTHON, else
 * the first of python3 on PATH and /usr/bin/python3 that has those modules.
 *
 * A run whose log cannot be read is listed with the reason, and the exit
 * status is then 1. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <iniparser/iniparser.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bcg/runlog.h"
#include "cmd.h"
#include "report.h"
#include "util.h"

static int is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* a whole curve of log.h5 (malloc'd; *n its length), or NULL */
static double *curve(hid_t f, const char *name, long *n) {
  *n = 0;
  if (H5Lexists(f, name, H5P_DEFAULT) <= 0) return NULL;
  long len = bcg_h5_length((int64_t)f, name);
  if (len <= 0) return NULL;
  double *v = malloc(sizeof(double) * (size_t)len);
  char err[256];
  if (!v || bcg_h5_read_doubles((int64_t)f, name, v, (size_t)len, err, sizeof err) != len) {
    free(v);
    return NULL;
  }
  *n = len;
  return v;
}

static void describe_setup(const char *dir, char *out, size_t len) {
  char p[PATH_MAX + 16];
  snprintf(p, sizeof p, "%s/config.ini", dir);
  snprintf(out, len, "?");
  if (!is_file(p)) return;
  dictionary *d = iniparser_load(p);
  if (!d) return;
  const char *le = iniparser_getstring(d, "learner:plugin", "?");
  const char *es = iniparser_getstring(d, "estimator:plugin", "?");
  const char *co = iniparser_getstring(d, "contact:plugin", "none");
  const char *ka = iniparser_getstring(d, "contact:kappa", NULL);
  const char *dev = iniparser_getstring(d, "run:device", "cpu");
  char kap[48] = "";
  if (ka && !strcmp(co, "smoothed_kappa")) snprintf(kap, sizeof kap, " k=%s", ka);
  snprintf(out, len, "%s+%s %s%s%s%s", le, es, co, kap, strcmp(dev, "cpu") ? " " : "", strcmp(dev, "cpu") ? dev : "");
  iniparser_freedict(d);
}

/* eval.h5: group per simulator with the summary vector
 * (falls, length mean/std, pen mean/std, E_track mean/std, ...) and the
 * per-run E_fixed values when the evaluation wrote them */
static void read_eval(const char *dir, row *r) {
  char p[PATH_MAX + 16];
  snprintf(p, sizeof p, "%s/eval.h5", dir);
  if (!is_file(p)) return;
  char err[256];
  int64_t f = bcg_h5_open(p, err, sizeof err);
  if (f < 0) return;
  static const char *sims[2] = {"bcg", "mujoco"};
  for (int s = 0; s < 2; s++) {
    if (H5Lexists((hid_t)f, sims[s], H5P_DEFAULT) <= 0) continue;
    hid_t g = H5Gopen2((hid_t)f, sims[s], H5P_DEFAULT);
    if (g < 0) continue;
    long n = 0;
    double *ef = curve(g, "efixed_cm", &n);
    if (ef && n > 0) {
      double sum = 0;
      for (long i = 0; i < n; i++) sum += ef[i];
      r->efixed[s] = sum / n;
      r->nruns[s] = (double)n;
    }
    free(ef);
    double *fell = curve(g, "fell", &n);
    if (fell && n > 0) {
      double k = 0;
      for (long i = 0; i < n; i++) k += fell[i] != 0;
      r->falls[s] = k;
      r->nruns[s] = (double)n;
    }
    free(fell);
    double *et = curve(g, "etrack_cm", &n);
    if (et && n > 0) {
      double sum = 0;
      long k = 0;
      for (long i = 0; i < n; i++)
        if (!isnan(et[i])) sum += et[i], k++;
      if (k) r->etrack[s] = sum / k;
    }
    free(et);
    H5Gclose(g);
  }
  long n = 0;
  double *dd = curve((hid_t)f, "delta_d_mm", &n);
  if (dd && n > 0) r->delta_d = dd[0];
  free(dd);
  bcg_checkpoint_close(f);
}

int bcg_cli_read_runlog(const char *dir, bcg_cli_runlog *s, char *err, size_t errlen) {
  memset(s, 0, sizeof *s);
  s->samples = s->wall = s->ret_first = s->ret_last = s->ret_best = s->track_last = NAN;
  char p[PATH_MAX + 16];
  snprintf(p, sizeof p, "%s/log.h5", dir);
  int64_t f = bcg_h5_open(p, err, errlen); /* a log, not a checkpoint, in messages */
  if (f < 0) return -1;
  long n;
  double *v;
  if ((v = curve((hid_t)f, "samples", &n))) s->samples = v[n - 1], s->iters = n;
  free(v);
  if ((v = curve((hid_t)f, "wall_time", &n))) s->wall = v[n - 1];
  free(v);
  if ((v = curve((hid_t)f, "mean_return", &n))) {
    s->ret_best = -INFINITY;
    for (long i = 0; i < n; i++) {
      if (isnan(v[i])) continue;
      if (isnan(s->ret_first)) s->ret_first = v[i];
      s->ret_last = v[i];
      if (v[i] > s->ret_best) s->ret_best = v[i];
    }
    if (isinf(s->ret_best)) s->ret_best = NAN;
  }
  free(v);
  if ((v = curve((hid_t)f, "track_err", &n)))
    for (long i = n - 1; i >= 0; i--)
      if (!isnan(v[i])) {
        s->track_last = v[i];
        break;
      }
  free(v);
  bcg_checkpoint_close(f);
  return 0;
}

/* keys that say how a run was kept, not what was trained: left out when
 * runs are grouped by configuration */
static int bookkeeping(const char *key) {
  static const char *const k[] = {"run.seed",      "run.name",      "run.out_dir",       "run.threads",
                                  "run.checkpoint_every", "run.keep_last", "run.keep_every", "run.nn_min_batch",
                                  "run.sim_min_batch"};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
    if (!strcmp(key, k[i])) return 1;
  return !strncmp(key, "sweep.", 6);
}

/* a core key at its default value: left out, so that a run whose config.ini
 * lists it (made by a bcg that has the key) and one that does not (made
 * before the key existed, so trained as its default says) group together */
static const bcg_key_spec *core_spec(const char *name) {
  const char *dot = strchr(name, '.');
  if (!dot || dot - name >= 64) return NULL;
  char sec[64];
  snprintf(sec, sizeof sec, "%.*s", (int)(dot - name), name);
  int nk = 0;
  const bcg_key_spec *ks = bcg_core_keys(sec, &nk);
  for (int k = 0; ks && k < nk; k++)
    if (!strcmp(ks[k].name, dot + 1) && ks[k].def) return &ks[k];
  return NULL;
}
static int at_core_default(const char *name, const char *v) {
  const bcg_key_spec *ks = core_spec(name);
  if (!ks) return 0;
  if (!strcmp(ks->def, v)) return 1;
  char *e1, *e2;
  double a = strtod(ks->def, &e1), b = strtod(v, &e2);
  return (ks->type == BCG_KEY_INT || ks->type == BCG_KEY_REAL) && e1 != ks->def && !*e1 && e2 != v && !*e2 && a == b;
}

/* config.ini as sorted "section.key=value" lines without the bookkeeping
 * keys and the core keys at their defaults (malloc'd; NULL without a readable config.ini); its run.seed into seed */
static char *config_key(const char *dir, char *seed, size_t seedlen) {
  char p[PATH_MAX + 16];
  snprintf(p, sizeof p, "%s/config.ini", dir);
  snprintf(seed, seedlen, "?");
  if (!is_file(p)) return NULL;
  dictionary *d = iniparser_load(p);
  if (!d) return NULL;
  char **lines = NULL;
  size_t n = 0, cap = 0, total = 1;
  int ns = iniparser_getnsec(d);
  for (int s = 0; s < ns; s++) {
    const char *sec = iniparser_getsecname(d, s);
    int nk = sec ? iniparser_getsecnkeys(d, sec) : 0;
    if (nk <= 0) continue;
    const char **keys = malloc(sizeof(char *) * (size_t)nk);
    if (!keys || !iniparser_getseckeys(d, sec, keys)) {
      free(keys);
      continue;
    }
    for (int k = 0; k < nk; k++) {
      const char *v = iniparser_getstring(d, keys[k], "");
      char name[512];
      snprintf(name, sizeof name, "%s", keys[k]);
      char *c = strchr(name, ':');
      if (c) *c = '.';
      if (!strcmp(name, "run.seed")) snprintf(seed, seedlen, "%s", v);
      if (bookkeeping(name) || at_core_default(name, v)) continue;
      if (n == cap) {
        cap = cap ? 2 * cap : 64;
        char **nl = realloc(lines, sizeof(char *) * cap);
        if (!nl) break;
        lines = nl;
      }
      size_t len = strlen(name) + strlen(v) + 2;
      if (!(lines[n] = malloc(len))) break;
      snprintf(lines[n], len, "%s=%s", name, v);
      total += len;
      n++;
    }
    free(keys);
  }
  iniparser_freedict(d);
  if (n > 1) qsort(lines, n, sizeof(char *), bcg_cmp_str);
  char *out = malloc(total);
  if (out) {
    out[0] = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) at += (size_t)sprintf(out + at, "%s\n", lines[i]);
  }
  for (size_t i = 0; i < n; i++) free(lines[i]);
  free(lines);
  return out;
}

static void read_run(const char *dir, row *r) {
  memset(r, 0, sizeof *r);
  snprintf(r->dir, sizeof r->dir, "%s", dir);
  for (int s = 0; s < 2; s++) r->efixed[s] = r->falls[s] = r->nruns[s] = r->etrack[s] = NAN;
  r->delta_d = NAN;
  describe_setup(dir, r->setup, sizeof r->setup);
  r->cfgkey = config_key(dir, r->seed, sizeof r->seed);
  bcg_cli_runlog s;
  char err[256];
  int rc = bcg_cli_read_runlog(dir, &s, err, sizeof err);
  r->iters = s.iters;
  r->samples = s.samples, r->wall = s.wall, r->track_last = s.track_last;
  r->ret_first = s.ret_first, r->ret_last = s.ret_last, r->ret_best = s.ret_best;
  if (rc) {
    snprintf(r->err, sizeof r->err, "%.250s", err);
    return;
  }
  if (!r->iters) snprintf(r->setup + strlen(r->setup), sizeof r->setup - strlen(r->setup), " (no iterations)");
  read_eval(dir, r);
}

static int add_run(rows *R, const char *dir) {
  if (R->n == R->cap) {
    int cap = R->cap ? 2 * R->cap : 16;
    row *v = realloc(R->v, sizeof(row) * (size_t)cap);
    if (!v) return -1;
    R->v = v, R->cap = cap;
  }
  read_run(dir, &R->v[R->n++]);
  return 0;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* dir itself if it is a run, else the runs below it (sorted, depth <= 3) */
static int collect(rows *R, const char *dir, int depth) {
  char p[PATH_MAX + 16];
  snprintf(p, sizeof p, "%s/log.h5", dir);
  if (is_file(p)) return add_run(R, dir);
  if (depth >= 3) return 0;
  DIR *d = opendir(dir);
  if (!d) return 0;
  char **names = NULL;
  int n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.' || !strcmp(de->d_name, "checkpoints")) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 32;
      char **nn = realloc(names, sizeof(char *) * (size_t)cap);
      if (!nn) break;
      names = nn;
    }
    names[n++] = strdup(de->d_name);
  }
  closedir(d);
  if (n > 1) qsort(names, (size_t)n, sizeof(char *), cmp_name);
  int rc = 0;
  for (int i = 0; i < n; i++) {
    char sub[PATH_MAX];
    if ((size_t)snprintf(sub, sizeof sub, "%s/%s", dir, names[i]) < sizeof sub && bcg_cli_is_dir(sub))
      rc |= collect(R, sub, depth + 1);
    free(names[i]);
  }
  free(names);
  return rc;
}

static void num(FILE *f, const char *fmt, double v, int w) {
  if (isnan(v)) fprintf(f, "%*s", w, "-");
  else fprintf(f, fmt, w, v);
}

/* ---- one row per run (--runs) ----------------------------------------------------- */

static void print_runs(const rows *R, int csv) {
  FILE *o = stdout;
  if (csv)
    fprintf(o, "run,setup,iterations,samples,wall_s,return_first,return_last,return_best,track_err_m,"
               "efixed_bcg_cm,falls_bcg,efixed_mujoco_cm,falls_mujoco,runs_eval,error\n");
  else
    fprintf(o, "%-44s %-34s %6s %10s %8s %17s %8s %8s %13s %13s\n", "run", "setup", "iters", "samples", "wall s",
            "return first->last", "best", "track m", "E_fixed bcg", "E_fixed mj");
  for (int i = 0; i < R->n; i++) {
    const row *r = &R->v[i];
    if (csv) {
      fprintf(o, "%s,%s,%ld,%.0f,%.1f,%.6g,%.6g,%.6g,%.6g,%.6g,%.0f,%.6g,%.0f,%.0f,%s\n", r->dir, r->setup, r->iters,
              r->samples, r->wall, r->ret_first, r->ret_last, r->ret_best, r->track_last, r->efixed[0], r->falls[0],
              r->efixed[1], r->falls[1], isnan(r->nruns[0]) ? r->nruns[1] : r->nruns[0], r->err);
      continue;
    }
    const char *name = r->dir;
    size_t L = strlen(name);
    if (L > 44) name += L - 44;
    fprintf(o, "%-44s %-34.34s %6ld", name, r->setup, r->iters);
    num(o, "%*.0f", r->samples, 11);
    num(o, "%*.1f", r->wall, 9);
    num(o, "%*.2f", r->ret_first, 9);
    fprintf(o, " ->");
    num(o, "%*.2f", r->ret_last, 6);
    num(o, "%*.2f", r->ret_best, 9);
    num(o, "%*.3f", r->track_last, 9);
    for (int s = 0; s < 2; s++) {
      if (isnan(r->efixed[s])) fprintf(o, "%14s", "-");
      else if (!isnan(r->falls[s])) fprintf(o, "%7.1f %2.0f/%-2.0f", r->efixed[s], r->falls[s], r->nruns[s]);
      else fprintf(o, "%14.1f", r->efixed[s]);
    }
    fprintf(o, "\n");
    if (r->err[0]) fprintf(o, "    error: %s\n", r->err);
  }
  if (!csv)
    fprintf(o, "return: mean episode return per iteration; track: the last iteration's mean tracking error (m);\n"
               "E_fixed: cm over the evaluation's fixed window with falls counted (bcg eval), falls/runs after it.\n");
}

/* ---- groups of runs by configuration ------------------------------------------------ */

typedef struct group {
  const char *key; /* the runs' config_key, NULL: a run without config.ini on its own */
  int *runs, n;
  char *label;
} group;

typedef struct groups {
  group *v;
  int n;
} groups;

/* the value of "name=" among key's lines (a pointer into key, its length in *len), or NULL */
static const char *key_value(const char *key, const char *name, size_t *len) {
  size_t nl = strlen(name);
  for (const char *l = key; l && *l;) {
    const char *e = strchr(l, '\n');
    if (!e) e = l + strlen(l);
    if ((size_t)(e - l) > nl && !strncmp(l, name, nl) && l[nl] == '=') {
      *len = (size_t)(e - l) - nl - 1;
      return l + nl + 1;
    }
    l = *e ? e + 1 : e;
  }
  return NULL;
}

static int same_value(const char *a, size_t la, const char *b, size_t lb) {
  if (!a || !b) return a == b;
  return la == lb && !memcmp(a, b, la);
}

/* order labels as a person would: "kappa=50" before "kappa=100" */
static int natcmp(const char *a, const char *b) {
  while (*a && *b) {
    if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
      char *ea, *eb;
      double x = strtod(a, &ea), y = strtod(b, &eb);
      if (x != y) return x < y ? -1 : 1;
      a = ea, b = eb;
      continue;
    }
    if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
    a++, b++;
  }
  return *a ? 1 : *b ? -1 : 0;
}

static int cmp_group(const void *x, const void *y) {
  const group *a = x, *b = y;
  return natcmp(a->label, b->label);
}

/* Each group's label: its values of the keys that differ between the groups
 * (a plugin section whose plugin differs shows only its plugin and the keys
 * every group has); the setup of its first run when nothing differs. */
static void label_groups(groups *G, const rows *R) {
  /* every key name that occurs */
  char **names = NULL;
  int nn = 0, cap = 0;
  for (int g = 0; g < G->n; g++)
    for (const char *l = G->v[g].key; l && *l;) {
      const char *e = strchr(l, '\n'), *eq = memchr(l, '=', (size_t)(e - l));
      if (eq) {
        int seen = 0;
        for (int i = 0; i < nn && !seen; i++) seen = strlen(names[i]) == (size_t)(eq - l) && !strncmp(names[i], l, (size_t)(eq - l));
        if (!seen) {
          if (nn == cap) {
            cap = cap ? 2 * cap : 64;
            char **t = realloc(names, sizeof(char *) * (size_t)cap);
            if (!t) break;
            names = t;
          }
          names[nn++] = strndup(l, (size_t)(eq - l));
        }
      }
      l = e + 1;
    }
  if (nn > 1) qsort(names, (size_t)nn, sizeof(char *), bcg_cmp_str);
  /* which differ, and which are everywhere */
  char *differs = calloc((size_t)nn + 1, 1), *everywhere = calloc((size_t)nn + 1, 1);
  int keyed = 0;
  for (int g = 0; g < G->n; g++) keyed += G->v[g].key != NULL;
  for (int i = 0; i < nn && differs && everywhere; i++) {
    const char *v0 = NULL;
    size_t l0 = 0;
    int first = 1, present = 0;
    for (int g = 0; g < G->n; g++) {
      if (!G->v[g].key) continue;
      size_t l;
      const char *v = key_value(G->v[g].key, names[i], &l);
      present += v != NULL;
      if (first) v0 = v, l0 = l, first = 0;
      else if (!same_value(v0, l0, v, l)) differs[i] = 1;
    }
    everywhere[i] = present == keyed;
  }
  for (int i = 0; i < nn && differs && everywhere; i++) {
    if (!differs[i] || everywhere[i]) continue;
    const char *dot = strchr(names[i], '.');
    if (!dot || !strcmp(dot + 1, "plugin")) continue;
    char pl[256];
    snprintf(pl, sizeof pl, "%.*s.plugin", (int)(dot - names[i]), names[i]);
    for (int j = 0; j < nn; j++)
      if (!strcmp(names[j], pl) && differs[j]) differs[i] = 0; /* comes with the other plugin */
  }
  for (int g = 0; g < G->n; g++) {
    group *gr = &G->v[g];
    size_t cap2 = 64, at = 0;
    char *lab = malloc(cap2);
    if (!lab) continue;
    lab[0] = 0;
    if (!gr->key) {
      free(lab);
      gr->label = strdup(R->v[gr->runs[0]].dir);
      continue;
    }
    for (int i = 0; i < nn && differs; i++) {
      size_t l;
      const char *v;
      if (!differs[i]) continue;
      if (!(v = key_value(gr->key, names[i], &l))) { /* a core key at its default (left out of the key) */
        const bcg_key_spec *ks = core_spec(names[i]);
        if (!ks) continue;
        v = ks->def, l = strlen(v);
      }
      size_t need = at + strlen(names[i]) + l + 3;
      if (need > cap2) {
        while (cap2 < need) cap2 *= 2;
        char *t = realloc(lab, cap2);
        if (!t) break;
        lab = t;
      }
      at += (size_t)sprintf(lab + at, "%s%s=%.*s", at ? " " : "", names[i], (int)l, v);
    }
    if (!at) {
      free(lab);
      lab = strdup(R->v[gr->runs[0]].setup);
    }
    gr->label = lab;
  }
  for (int i = 0; i < nn; i++) free(names[i]);
  free(names);
  free(differs);
  free(everywhere);
}

static int make_groups(groups *G, const rows *R) {
  G->v = calloc((size_t)R->n + 1, sizeof(group));
  G->n = 0;
  if (!G->v) return -1;
  for (int i = 0; i < R->n; i++) {
    const row *r = &R->v[i];
    if (r->err[0]) continue;
    int g = 0;
    if (r->cfgkey)
      for (; g < G->n; g++)
        if (G->v[g].key && !strcmp(G->v[g].key, r->cfgkey)) break;
    if (!r->cfgkey || g == G->n) {
      g = G->n++;
      G->v[g].key = r->cfgkey;
      if (!(G->v[g].runs = malloc(sizeof(int) * (size_t)R->n))) return -1;
    }
    G->v[g].runs[G->v[g].n++] = i;
  }
  label_groups(G, R);
  for (int g = 0; g < G->n; g++)
    if (!G->v[g].label) return -1;
  if (G->n > 1) qsort(G->v, (size_t)G->n, sizeof(group), cmp_group);
  return 0;
}

static void free_groups(groups *G) {
  for (int g = 0; g < G->n; g++) {
    free(G->v[g].runs);
    free(G->v[g].label);
  }
  free(G->v);
}

enum { M_ITERS, M_SAMPLES, M_WALL, M_RET, M_TRACK, M_EF_BCG, M_FALLS_BCG, M_EF_MJ, M_FALLS_MJ, NMETRIC };

static double metric(const row *r, int m) {
  switch (m) {
  case M_ITERS: return r->iters > 0 ? (double)r->iters : NAN;
  case M_SAMPLES: return r->samples;
  case M_WALL: return r->wall;
  case M_RET: return r->ret_last;
  case M_TRACK: return 100 * r->track_last;
  case M_EF_BCG: return r->efixed[0];
  case M_FALLS_BCG: return r->falls[0];
  case M_EF_MJ: return r->efixed[1];
  case M_FALLS_MJ: return r->falls[1];
  }
  return NAN;
}

typedef struct mstat {
  double mean, std; /* std with n - 1; NAN for n < 2 */
  int n;            /* runs with a finite value */
} mstat;

static mstat group_stat(const rows *R, const group *g, int m) {
  mstat s = {NAN, NAN, 0};
  double sum = 0, sq = 0;
  for (int i = 0; i < g->n; i++) {
    double v = metric(&R->v[g->runs[i]], m);
    if (!isfinite(v)) continue;
    sum += v;
    s.n++;
  }
  if (!s.n) return s;
  s.mean = sum / s.n;
  for (int i = 0; i < g->n; i++) {
    double v = metric(&R->v[g->runs[i]], m);
    if (isfinite(v)) sq += (v - s.mean) * (v - s.mean);
  }
  if (s.n > 1) s.std = sqrt(sq / (s.n - 1));
  return s;
}

static void fmt_num(char *b, size_t len, double v, int m) {
  double a = fabs(v);
  if (m == M_SAMPLES && a >= 1e9) snprintf(b, len, "%.3gG", v / 1e9);
  else if (m == M_SAMPLES && a >= 1e6) snprintf(b, len, "%.3gM", v / 1e6);
  else if (m == M_SAMPLES && a >= 1e4) snprintf(b, len, "%.3gk", v / 1e3);
  else if (m == M_ITERS || m == M_SAMPLES || (m == M_WALL && a >= 100)) snprintf(b, len, "%.0f", v);
  else if ((m == M_WALL && a >= 10) || m == M_FALLS_BCG || m == M_FALLS_MJ) snprintf(b, len, "%.1f", v);
  else snprintf(b, len, "%.2f", v);
}

/* "mean ± std" ("mean" alone for one run, "-" for none), then what (" of 5"
 * episodes), then "(k)" when only k of the group's nrun runs have a value */
static void fmt_cell(char *b, size_t len, mstat s, int m, int nrun, const char *what) {
  if (!s.n) {
    snprintf(b, len, "-");
    return;
  }
  char x[48], y[48] = "", k[24] = "";
  fmt_num(x, sizeof x, s.mean, m);
  if (s.n > 1) {
    char sd[40];
    fmt_num(sd, sizeof sd, s.std, m);
    snprintf(y, sizeof y, " ± %s", sd);
  }
  if (s.n < nrun) snprintf(k, sizeof k, " (%d)", s.n);
  snprintf(b, len, "%s%s%s%s", x, y, what, k);
}

/* the group's seeds, space separated (sorted as numbers) */
static void group_seeds(const rows *R, const group *g, char *b, size_t len) {
  const char **s = malloc(sizeof(char *) * (size_t)g->n);
  b[0] = 0;
  if (!s) return;
  for (int i = 0; i < g->n; i++) s[i] = R->v[g->runs[i]].seed;
  for (int i = 1; i < g->n; i++)
    for (int j = i; j > 0 && natcmp(s[j - 1], s[j]) > 0; j--) {
      const char *t = s[j];
      s[j] = s[j - 1], s[j - 1] = t;
    }
  size_t at = 0;
  for (int i = 0; i < g->n && at + 2 < len; i++) at += (size_t)snprintf(b + at, len - at, "%s%s", i ? " " : "", s[i]);
  free(s);
}

/* evaluation episodes per run, when all evaluated runs of the group agree (else 0) */
static int group_episodes(const rows *R, const group *g, int sim) {
  int e = 0;
  for (int i = 0; i < g->n; i++) {
    double n = R->v[g->runs[i]].nruns[sim];
    if (isnan(n)) continue;
    if (e && e != (int)n) return 0;
    e = (int)n;
  }
  return e;
}

static void csv_field(FILE *o, const char *s) {
  if (!strpbrk(s, ",\"\n")) {
    fputs(s, o);
    return;
  }
  fputc('"', o);
  for (; *s; s++) {
    if (*s == '"') fputc('"', o);
    fputc(*s, o);
  }
  fputc('"', o);
}

static void md_field(FILE *o, const char *s) {
  for (; *s; s++) {
    if (*s == '|') fputc('\\', o);
    fputc(*s, o);
  }
}

static void print_groups(const rows *R, const groups *G, int csv) {
  FILE *o = stdout;
  static const char *const csvname[NMETRIC] = {"iterations", "samples", "wall_s", "return_final", "track_err_cm",
                                               "efixed_bcg_cm", "falls_bcg", "efixed_mujoco_cm", "falls_mujoco"};
  static const char *const mdname[NMETRIC] = {"iterations", "samples", "wall s", "final return", "track_err cm",
                                              "E_fixed bcg cm", "falls bcg", "E_fixed MuJoCo cm", "falls MuJoCo"};
  if (csv) {
    fprintf(o, "configuration,runs,seeds");
    for (int m = 0; m < NMETRIC; m++) fprintf(o, ",%s_mean,%s_std", csvname[m], csvname[m]);
    fprintf(o, ",evaluated,eval_episodes\n");
    for (int g = 0; g < G->n; g++) {
      const group *gr = &G->v[g];
      char seeds[1024];
      group_seeds(R, gr, seeds, sizeof seeds);
      csv_field(o, gr->label);
      fprintf(o, ",%d,", gr->n);
      csv_field(o, seeds);
      for (int m = 0; m < NMETRIC; m++) {
        mstat s = group_stat(R, gr, m);
        fprintf(o, ",%.10g,%.10g", s.mean, s.std);
      }
      mstat e0 = group_stat(R, gr, M_EF_BCG), e1 = group_stat(R, gr, M_EF_MJ);
      int ep = group_episodes(R, gr, e0.n ? 0 : 1);
      fprintf(o, ",%d,%d\n", e0.n > e1.n ? e0.n : e1.n, ep);
    }
    return;
  }
  /* Markdown: columns that no run has are left out */
  int show[NMETRIC];
  for (int m = 0; m < NMETRIC; m++) {
    show[m] = m < M_TRACK;
    for (int g = 0; g < G->n && !show[m]; g++) show[m] = group_stat(R, &G->v[g], m).n > 0;
  }
  int nrun = 0;
  for (int g = 0; g < G->n; g++) nrun += G->v[g].n;
  fprintf(o, "%d run%s in %d configuration%s\n\n| configuration | runs | seeds |", nrun, nrun == 1 ? "" : "s", G->n,
          G->n == 1 ? "" : "s");
  for (int m = 0; m < NMETRIC; m++)
    if (show[m]) fprintf(o, " %s |", mdname[m]);
  fprintf(o, "\n|:--|--:|:--|");
  for (int m = 0; m < NMETRIC; m++)
    if (show[m]) fprintf(o, "--:|");
  fprintf(o, "\n");
  for (int g = 0; g < G->n; g++) {
    const group *gr = &G->v[g];
    char seeds[1024];
    group_seeds(R, gr, seeds, sizeof seeds);
    fprintf(o, "| ");
    md_field(o, gr->label);
    fprintf(o, " | %d | ", gr->n);
    md_field(o, seeds);
    fprintf(o, " |");
    for (int m = 0; m < NMETRIC; m++) {
      if (!show[m]) continue;
      char c[160], what[32] = "";
      mstat s = group_stat(R, gr, m);
      if (m == M_FALLS_BCG || m == M_FALLS_MJ) {
        int ep = group_episodes(R, gr, m == M_FALLS_BCG ? 0 : 1);
        if (ep) snprintf(what, sizeof what, " of %d", ep);
      }
      fmt_cell(c, sizeof c, s, m, gr->n, what);
      fprintf(o, " %s |", c);
    }
    fprintf(o, "\n");
  }
  fprintf(o, "\nmean ± std over the runs of a configuration (std with n - 1; one run: its value; (k): only k runs have it).\n"
             "A configuration is every key of the runs' config.ini except run.seed, run.name, run.out_dir, run.threads,\n"
             "the checkpoint keys, run.nn_min_batch, run.sim_min_batch and [sweep]; labelled by the keys that differ.\n"
             "final return: the last logged mean episode return; track_err: the last logged tracking error;\n"
             "E_fixed and falls: from eval.h5 (bcg eval), E_fixed averaged over a run's episodes.\n");
}

/* ---- --plots ---------------------------------------------------------------------- */

/* bcg_plots.py next to the executable (the build tree) or in ../share/bcg (an install) */
static int find_plots_script(char *out, size_t len) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return -1;
  self[n] = 0;
  char *slash = strrchr(self, '/');
  if (!slash) return -1;
  *slash = 0;
  snprintf(out, len, "%s/bcg_plots.py", self);
  if (is_file(out)) return 0;
  snprintf(out, len, "%s/../share/bcg/bcg_plots.py", self);
  if (is_file(out)) return 0;
  snprintf(out, len, "%s", self);
  return -1;
}

/* 1 when interpreter py runs and imports the script's modules (its output discarded) */
static int python_has_modules(const char *py) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return 0;
  if (pid == 0) {
    int dn = open("/dev/null", O_RDWR);
    if (dn >= 0) {
      dup2(dn, 0);
      dup2(dn, 1);
      dup2(dn, 2);
    }
    execlp(py, py, "-c", "import matplotlib, numpy, h5py", (char *)NULL);
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* The interpreter for bcg_plots.py: $BCG_PYTHON when set; else the first of
 * python3 on PATH and the system's /usr/bin/python3 (where `make deps`
 * installs Debian's python3-matplotlib and python3-h5py) that imports
 * matplotlib, numpy and h5py, so a python3 earlier on PATH without them (a
 * pyenv or virtualenv one) does not hide the packaged modules. When neither
 * has them, python3: the script then names what is missing. */
static const char *plots_python(void) {
  const char *py = getenv("BCG_PYTHON");
  if (py && *py) return py;
  static const char *const cand[] = {"python3", "/usr/bin/python3"};
  for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
    if (python_has_modules(cand[i])) return cand[i];
  return cand[0];
}

/* the groups go to the script's stdin: "group<TAB>label" then "run<TAB>dir" lines */
static int plots(const rows *R, const groups *G, const char *outdir) {
  char script[PATH_MAX + 64];
  if (find_plots_script(script, sizeof script))
    return bcg_cli_error("report --plots: bcg_plots.py is neither next to the bcg executable (%s) nor in its "
                         "../share/bcg (make builds it into the build folder, make install into PREFIX/share/bcg)",
                         script);
  const char *py = plots_python();
  int fd[2];
  if (pipe(fd)) return bcg_cli_error("report --plots: pipe: %s", strerror(errno));
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]);
    close(fd[1]);
    return bcg_cli_error("report --plots: fork: %s", strerror(errno));
  }
  if (pid == 0) {
    dup2(fd[0], 0);
    close(fd[0]);
    close(fd[1]);
    execlp(py, py, script, outdir, (char *)NULL);
    _exit(127);
  }
  close(fd[0]);
  void (*old)(int) = signal(SIGPIPE, SIG_IGN); /* a script that dies early is reported below */
  FILE *w = fdopen(fd[1], "w");
  if (w) {
    for (int g = 0; g < G->n; g++) {
      fprintf(w, "group\t%s\n", G->v[g].label);
      for (int i = 0; i < G->v[g].n; i++) fprintf(w, "run\t%s\n", R->v[G->v[g].runs[i]].dir);
    }
    fclose(w);
  } else {
    close(fd[1]);
  }
  signal(SIGPIPE, old);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return BCG_EXIT_OK;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
    return bcg_cli_error("report --plots: cannot run %s: --plots needs python3 with matplotlib and h5py (Debian: "
                         "apt install python3-matplotlib python3-h5py; BCG_PYTHON names another interpreter)",
                         py);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 3) return BCG_EXIT_ERROR; /* the script said why */
  return bcg_cli_error("report --plots: %s %s failed (%s %d)", py, script,
                       WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

int bcg_cmd_report(int argc, char **argv) {
  int csv = 0, per_run = 0, paper = 0, ntarget = 0;
  const char *plotdir = NULL;
  rows R = {0};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--csv")) csv = 1;
    else if (!strcmp(argv[i], "--runs")) per_run = 1;
    else if (!strcmp(argv[i], "--paper")) paper = 1;
    else if (!strcmp(argv[i], "--plots")) {
      if (i + 1 >= argc || !argv[i + 1][0]) return bcg_cli_usage("report", "--plots needs OUTDIR");
      plotdir = argv[++i];
    } else if (argv[i][0] == '-') return bcg_cli_usage("report", "unknown option '%s'", argv[i]);
  }
  int rc = BCG_EXIT_OK;
  for (int i = 1; i < argc && !rc; i++) {
    if (!strcmp(argv[i], "--plots")) {
      i++;
      continue;
    }
    if (argv[i][0] == '-') continue;
    ntarget++;
    if (!bcg_cli_is_dir(argv[i])) {
      rc = bcg_cli_error("report: %s: not a directory", argv[i]);
      break;
    }
    int before = R.n;
    collect(&R, argv[i], 0);
    if (R.n == before) rc = bcg_cli_error("report: %s: no run directory (a directory with log.h5) found", argv[i]);
  }
  if (!rc && !ntarget) rc = bcg_cli_usage("report", "missing RUN_DIR");
  int bad = 0;
  for (int i = 0; i < R.n; i++) bad |= R.v[i].err[0] != 0;
  if (!rc && paper && (per_run || plotdir)) rc = bcg_cli_usage("report", "--paper goes without --runs and --plots");
  if (!rc && paper) rc = bcg_report_paper(&R, csv);
  else if (!rc && per_run) print_runs(&R, csv);
  if (!rc && !paper && (!per_run || plotdir)) {
    groups G = {0};
    if (make_groups(&G, &R)) rc = bcg_cli_error("report: out of memory");
    if (!rc && !per_run) {
      print_groups(&R, &G, csv);
      for (int i = 0; i < R.n; i++)
        if (R.v[i].err[0]) {
          if (csv) fprintf(stderr, "bcg: warning: %s (the run is left out)\n", R.v[i].err);
          else printf("error: %s (the run is left out)\n", R.v[i].err);
        }
    }
    if (!rc && plotdir) {
      fflush(stdout);
      if (G.n == 0) rc = bcg_cli_error("report --plots: no readable run");
      else rc = plots(&R, &G, plotdir);
    }
    free_groups(&G);
  }
  for (int i = 0; i < R.n; i++) free(R.v[i].cfgkey);
  free(R.v);
  if (rc) return rc;
  return bad ? BCG_EXIT_ERROR : BCG_EXIT_OK;
}
