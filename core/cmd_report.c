/* cmd_report.c - `bcg report RUN_DIR|DIR ... [--csv]`: one row per training
 * run, for comparing the runs of an ablation (a sweep, SHAC+BCG against PPO).
 *
 * A RUN_DIR is a directory with log.h5 (and config.ini, eval.h5 when present);
 * any other directory is searched (three levels deep) for run directories, so
 * `bcg report runs/` covers every run under runs/. Columns: the run's
 * directory, its plugins (learner, estimator, contact model with kappa), the
 * iterations, samples and wall time logged, the mean return of the first and
 * last iterations and its best, the last logged tracking error (track_err,
 * when the task tracks a reference), and the evaluation's E_fixed and falls
 * per simulator from eval.h5 (written by `bcg eval`). A run whose log cannot
 * be read is listed with the reason, and the exit status is then 1. */
#include <dirent.h>
#include <hdf5.h>
#include <iniparser/iniparser.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcg/runlog.h"
#include "cmd.h"

typedef struct row {
  char dir[PATH_MAX];
  char setup[160];
  long iters;
  double samples, wall, ret_first, ret_last, ret_best, track_last;
  double efixed[2], falls[2], nruns[2]; /* bcg, mujoco; NAN when not evaluated */
  char err[256];
} row;

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}
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
    H5Gclose(g);
  }
  bcg_checkpoint_close(f);
}

static void read_run(const char *dir, row *r) {
  memset(r, 0, sizeof *r);
  snprintf(r->dir, sizeof r->dir, "%s", dir);
  r->samples = r->wall = r->ret_first = r->ret_last = r->ret_best = r->track_last = NAN;
  for (int s = 0; s < 2; s++) r->efixed[s] = r->falls[s] = r->nruns[s] = NAN;
  describe_setup(dir, r->setup, sizeof r->setup);
  char p[PATH_MAX + 16], err[256];
  snprintf(p, sizeof p, "%s/log.h5", dir);
  int64_t f = bcg_h5_open(p, err, sizeof err); /* a log, not a checkpoint, in messages */
  if (f < 0) {
    snprintf(r->err, sizeof r->err, "%.250s", err);
    return;
  }
  long n;
  double *v;
  if ((v = curve((hid_t)f, "samples", &n))) r->samples = v[n - 1], r->iters = n;
  free(v);
  if ((v = curve((hid_t)f, "wall_time", &n))) r->wall = v[n - 1];
  free(v);
  if ((v = curve((hid_t)f, "mean_return", &n))) {
    r->ret_best = -INFINITY;
    for (long i = 0; i < n; i++) {
      if (isnan(v[i])) continue;
      if (isnan(r->ret_first)) r->ret_first = v[i];
      r->ret_last = v[i];
      if (v[i] > r->ret_best) r->ret_best = v[i];
    }
    if (isinf(r->ret_best)) r->ret_best = NAN;
  }
  free(v);
  if ((v = curve((hid_t)f, "track_err", &n)))
    for (long i = n - 1; i >= 0; i--)
      if (!isnan(v[i])) {
        r->track_last = v[i];
        break;
      }
  free(v);
  bcg_checkpoint_close(f);
  if (!r->iters) snprintf(r->setup + strlen(r->setup), sizeof r->setup - strlen(r->setup), " (no iterations)");
  read_eval(dir, r);
}

typedef struct rows {
  row *v;
  int n, cap;
} rows;

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
    if ((size_t)snprintf(sub, sizeof sub, "%s/%s", dir, names[i]) < sizeof sub && is_dir(sub))
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

int bcg_cmd_report(int argc, char **argv) {
  int csv = 0, ntarget = 0;
  rows R = {0};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--csv")) csv = 1;
    else if (argv[i][0] == '-') return bcg_cli_usage("report", "unknown option '%s'", argv[i]);
  }
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-') continue;
    ntarget++;
    if (!is_dir(argv[i])) {
      free(R.v);
      return bcg_cli_error("report: %s: not a directory", argv[i]);
    }
    int before = R.n;
    collect(&R, argv[i], 0);
    if (R.n == before) {
      free(R.v);
      return bcg_cli_error("report: %s: no run directory (a directory with log.h5) found", argv[i]);
    }
  }
  if (!ntarget) return bcg_cli_usage("report", "missing RUN_DIR");
  int bad = 0;
  FILE *o = stdout;
  if (csv)
    fprintf(o, "run,setup,iterations,samples,wall_s,return_first,return_last,return_best,track_err_m,"
               "efixed_bcg_cm,falls_bcg,efixed_mujoco_cm,falls_mujoco,runs_eval,error\n");
  else
    fprintf(o, "%-44s %-34s %6s %10s %8s %17s %8s %8s %13s %13s\n", "run", "setup", "iters", "samples", "wall s",
            "return first->last", "best", "track m", "E_fixed bcg", "E_fixed mj");
  for (int i = 0; i < R.n; i++) {
    row *r = &R.v[i];
    bad |= r->err[0] != 0;
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
  free(R.v);
  return bad ? BCG_EXIT_ERROR : BCG_EXIT_OK;
}
