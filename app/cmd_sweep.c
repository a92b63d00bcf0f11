/* cmd_sweep.c - `bcg sweep CONFIG [--jobs N] [--dir DIR] [--dry-run] [section.key=value ...]`
 *               `bcg sweep --status DIR`
 *
 * Expands the config's [sweep] section into runs ([sweep] mode = grid: every
 * combination of the listed values; zip: the i-th values of every key
 * together, all lists of one length) and trains each as
 * `bcg train CONFIG <overrides> <its values> run.name=NAME run.out_dir=DIR`
 * in a child process, N at a time, NAME being <[run] name>-<key>_<value>-...
 *
 * The sweep directory DIR (default <[run] out_dir>/<[run] name>) holds the
 * runs (DIR/NAME/<stamp>/, each child's output in DIR/NAME/train.out) and
 * DIR/sweep.manifest: the configuration's hash and one line per run with its
 * state, name, run directory and values. Running the same sweep again skips
 * the finished runs, resumes (`bcg train --resume`) the interrupted ones and
 * starts the rest; a run that failed is tried again. The budget ([run]
 * iterations, samples, seconds) is not part of the sweep's identity: a larger
 * one continues the finished runs. What a run's state is
 * comes from the run itself where it can: "running" while a process holds
 * its train.lock, "finished" once its log reached a budget of its
 * config.ini (or its last session said so) and its newest checkpoint is of
 * the last logged iteration; the manifest only adds "failed" (the child's
 * exit status) and the runs not started yet. So a sweep killed with
 * `kill -9`, whose children then checkpoint and stop (they get SIGTERM when
 * the sweep dies), continues where it was.
 *
 * Each child gets run.threads = max(1, cores / N) unless the config sets
 * run.threads (or sweeps it), and under run.device = cuda its own
 * CUDA_VISIBLE_DEVICES, the least busy of the visible GPUs. Ctrl-C, SIGTERM
 * or SIGHUP send SIGTERM to every child (each finishes its iteration, writes
 * a checkpoint and exits) and wait for them; a second one kills them at once.
 * The progress view: one line per run (state, iteration, samples, return,
 * tracking error, ETA), redrawn in place on a terminal; otherwise one line
 * per start and end of a run and the whole table every five minutes. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <iniparser/iniparser.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/dist.h"
#include "bcg/loader.h"
#include "bcg/train.h"
#include "cmd.h"
#include "clock.h"
#include "sweep_slurm.h"
#include "util.h"

#define MAXK 16
#define MANIFEST "sweep.manifest"

/* queued: waiting in the scheduler's queue (--slurm) */
enum { ST_PENDING, ST_RUNNING, ST_FINISHED, ST_FAILED, ST_INTERRUPTED, ST_QUEUED, NST };
static const char *const st_name[NST] = {"pending", "running", "finished", "failed", "interrupted", "queued"};

typedef struct srun {
  char name[256];
  char *ov[MAXK]; /* "section.key=value" of its sweep values */
  int nov;
  char *ident;            /* the values sorted and joined by tabs: the run's identity in the manifest */
  char rundir[PATH_MAX];  /* relative to the sweep directory, "" before it has one */
  int state, listed;      /* listed: part of this expansion of the sweep */
  int cuda, tried, index; /* index: 1-based position in the expansion */
  long other;             /* a process that is not this sweep's child trains it */
  pid_t pid;
  int gpu, rfd;
  double t0;
  char buf[4096];
  size_t nbuf;
  char it[48], samples[32], ret[32], trk[32], eta[32], msg[300];
  char job[48];            /* --slurm: "JOBID_TASK" of its latest submission, "" when never submitted */
  char sched[24], why[64]; /* the scheduler's state of that task and reason, "" when unknown */
} srun;

typedef struct sweep {
  char dir[PATH_MAX];
  char config[PATH_MAX]; /* absolute path of CONFIG */
  char hash[40];
  srun *r;
  int n, nlisted;
  const char *path;
  char **user_ov;
  int nuser;
  char self[PATH_MAX];
  int jobs, threads; /* threads: passed as run.threads when > 0 */
  char gpus[64][32];
  int ngpu, gpu_load[64];
  int tty, drawn;
  char *last; /* the text drawn last on a terminal */
  /* the configuration's budget ([run] iterations, samples, seconds; a run's
   * own [sweep] values of them win); have_budget = 0 (--status): each run's
   * config.ini */
  int have_budget;
  long budget_it;
  double budget_samples, budget_s;
  int task;  /* --task: the index of the one run this process trains (a Slurm array task) */
  int slurm; /* --slurm: submits the runs as a job array instead of running them */
} sweep;

static volatile sig_atomic_t stop_count;
static void on_stop(int sig) {
  (void)sig;
  stop_count++;
}

static double now_s(void) { return 1e-9 * (double)bcg_mono_ns(); }


static int mkdir_p(const char *path) {
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(tmp, 0777) && errno != EEXIST) return -1;
      *p = '/';
    }
  if (mkdir(tmp, 0777) && errno != EEXIST) return -1;
  return bcg_cli_is_dir(tmp) ? 0 : -1;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(p);
}

static void append_name(char *name, size_t len, const char *key, const char *val) {
  size_t l = strlen(name);
  snprintf(name + l, len - l, "-%s_%s", key, val);
  for (char *c = name + l; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_' && *c != '.') *c = '_';
}

static char *make_ident(char *const *ov, int n) {
  char *s[MAXK];
  size_t len = 1;
  for (int i = 0; i < n; i++) s[i] = ov[i], len += strlen(ov[i]) + 1;
  qsort(s, (size_t)n, sizeof(char *), bcg_cmp_str);
  char *id = malloc(len);
  if (!id) return NULL;
  id[0] = 0;
  for (int i = 0; i < n; i++) {
    if (i) strcat(id, "\t");
    strcat(id, s[i]);
  }
  return id;
}

static void free_runs(sweep *S) {
  for (int i = 0; i < S->n; i++) {
    for (int k = 0; k < S->r[i].nov; k++) free(S->r[i].ov[k]);
    free(S->r[i].ident);
    if (S->r[i].rfd >= 0) close(S->r[i].rfd);
  }
  free(S->r);
  S->r = NULL;
  S->n = 0;
}

static srun *add_run(sweep *S, int *cap) {
  if (S->n == *cap) {
    int c = *cap ? 2 * *cap : 16;
    srun *t = realloc(S->r, sizeof(srun) * (size_t)c);
    if (!t) return NULL;
    S->r = t, *cap = c;
  }
  srun *r = &S->r[S->n++];
  memset(r, 0, sizeof *r);
  r->rfd = -1;
  r->gpu = -1;
  return r;
}

/* ---- the configuration's identity ---------------------------------------------------- */

static void fnv(uint64_t *h, const char *a, const char *b, const char *c) {
  const char *parts[3] = {a, b, c};
  for (int i = 0; i < 3; i++) {
    for (const char *s = parts[i]; s && *s; s++) {
      *h ^= (unsigned char)*s;
      *h *= 1099511628211ull;
    }
    *h ^= (unsigned char)(i < 2 ? '\t' : '\n');
    *h *= 1099511628211ull;
  }
}

/* a path key's value made absolute against the working directory (as a
 * run's config.ini stores it) */
static const char *abs_value(const char *v, char *buf, size_t len) {
  char real[PATH_MAX], cwd[PATH_MAX];
  if (!v || !*v || v[0] == '/') return v;
  if (realpath(v, real)) return snprintf(buf, len, "%s", real), buf;
  if (!getcwd(cwd, sizeof cwd)) return v;
  snprintf(buf, len, "%s/%s", cwd, v);
  return buf;
}

/* the [run] budget keys: a sweep may be continued with a larger (or smaller) budget */
static int is_budget_key(const char *sec, const char *key) {
  return !strcmp(sec, "run") && (!strcmp(key, "iterations") || !strcmp(key, "samples") || !strcmp(key, "seconds"));
}

static void hash_section(uint64_t *h, const bcg_config *cfg, const char *sec, const bcg_key_spec *keys, int nk,
                         int with_budget) {
  const bcg_params *p = bcg_config_section(cfg, sec);
  if (!p) return;
  const bcg_plugin *pl = bcg_params_plugin(p);
  if (pl) fnv(h, sec, "plugin", pl->desc->name);
  for (int k = 0; k < nk; k++) {
    if (!with_budget && is_budget_key(sec, keys[k].name)) continue;
    char buf[PATH_MAX + 64];
    const char *v = bcg_params_value(p, keys[k].name);
    if (keys[k].type == BCG_KEY_PATH) v = abs_value(v, buf, sizeof buf);
    fnv(h, sec, keys[k].name, v ? v : "");
  }
}

/* FNV-1a over every resolved value of the configuration except [sweep] and
 * the [run] budget (paths absolute): what every run of the sweep shares, so
 * that a sweep directory is never continued with another configuration,
 * while the [sweep] lists may grow (more seeds) and the budget may change
 * (finished runs continue to a larger one). with_budget: the hash sweep
 * directories made before the budget was left out recorded. */
static void config_hash(const bcg_config *cfg, char *out, size_t len, int with_budget) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < bcg_core_section_count(); i++) {
    const char *sec = bcg_core_section_name(i);
    int nk = 0;
    const bcg_key_spec *keys = bcg_core_keys(sec, &nk);
    if (strcmp(sec, "sweep") && keys) hash_section(&h, cfg, sec, keys, nk, with_budget);
  }
  for (int k = BCG_KIND_CONTACT; k <= BCG_KIND_TASK; k++) {
    const bcg_plugin *pl = bcg_config_plugin(cfg, (bcg_kind)k);
    if (pl) hash_section(&h, cfg, bcg_kind_name((bcg_kind)k), pl->desc->keys, pl->desc->nkeys, with_budget);
  }
  snprintf(out, len, "%016llx", (unsigned long long)h);
}

/* run r's budget: the sweep's, or the run's own [sweep] value of a budget key */
static void run_budget(const sweep *S, const srun *r, long *it, double *samples, double *secs) {
  *it = S->budget_it, *samples = S->budget_samples, *secs = S->budget_s;
  for (int k = 0; k < r->nov; k++) {
    const char *o = r->ov[k];
    if (!o) continue;
    if (!strncmp(o, "run.iterations=", 15)) *it = strtol(o + 15, NULL, 10);
    else if (!strncmp(o, "run.samples=", 12)) *samples = strtod(o + 12, NULL);
    else if (!strncmp(o, "run.seconds=", 12)) *secs = strtod(o + 12, NULL);
  }
}

/* that budget as the three overrides a --resume of run r gets (and --dry-run shows) */
static void budget_overrides(const sweep *S, const srun *r, char ov[3][64]) {
  long it;
  double samples, secs;
  run_budget(S, r, &it, &samples, &secs);
  snprintf(ov[0], 64, "run.iterations=%ld", it);
  snprintf(ov[1], 64, "run.samples=%.17g", samples);
  snprintf(ov[2], 64, "run.seconds=%.17g", secs);
}

/* ---- the manifest --------------------------------------------------------------------- */

static int write_manifest_file(const sweep *S) {
  char p[PATH_MAX + 32], tmp[PATH_MAX + 40];
  snprintf(p, sizeof p, "%s/" MANIFEST, S->dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", p);
  FILE *f = fopen(tmp, "w");
  if (!f) return -1;
  fprintf(f, "# bcg sweep manifest: written by bcg sweep, read by bcg sweep and bcg sweep --status.\n"
             "# run lines (tab-separated): state, name, run directory relative to this one (- before it\n"
             "# has one), the run's [sweep] values. The states of the runs themselves (their train.lock,\n"
             "# log.h5 and checkpoints) take precedence over the one written here. slurm lines (--slurm):\n"
             "# run name, the Slurm array task (JOBID_TASK) of its latest submission.\n"
             "config\t%s\nconfig_hash\t%s\n",
          S->config, S->hash);
  for (int i = 0; i < S->n; i++) {
    const srun *r = &S->r[i];
    fprintf(f, "run\t%s\t%s\t%s", st_name[r->state], r->name, r->rundir[0] ? r->rundir : "-");
    for (int k = 0; k < r->nov; k++) fprintf(f, "\t%s", r->ov[k]);
    fprintf(f, "\n");
  }
  for (int i = 0; i < S->n; i++)
    if (S->r[i].job[0]) fprintf(f, "slurm\t%s\t%s\n", S->r[i].name, S->r[i].job);
  int bad = fflush(f) || fsync(fileno(f));
  if (fclose(f) || bad || rename(tmp, p)) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

/* Reads DIR/sweep.manifest into S (runs not listed yet; config and hash into
 * cfgpath and hash). 0, 1 when there is none, -1 with the message printed. */
static int read_manifest(sweep *S, int *cap, char *cfgpath, size_t cplen, char *hash, size_t hlen) {
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/" MANIFEST, S->dir);
  FILE *f = fopen(p, "r");
  if (!f) {
    if (errno == ENOENT) return 1;
    return bcg_cli_error("%s: cannot read: %s", p, strerror(errno)), -1;
  }
  char *line = NULL;
  size_t ll = 0;
  int lineno = 0, rc = 0;
  cfgpath[0] = hash[0] = 0;
  while (getline(&line, &ll, f) > 0) {
    lineno++;
    line[strcspn(line, "\r\n")] = 0;
    if (!line[0] || line[0] == '#') continue;
    char *field[4 + MAXK];
    int nf = 0;
    for (char *s = line; s && nf < 4 + MAXK;) {
      field[nf++] = s;
      char *t = strchr(s, '\t');
      if (t) *t++ = 0;
      s = t;
    }
    if (!strcmp(field[0], "config") && nf == 2) snprintf(cfgpath, cplen, "%s", field[1]);
    else if (!strcmp(field[0], "config_hash") && nf == 2) snprintf(hash, hlen, "%s", field[1]);
    else if (!strcmp(field[0], "run") && nf >= 4) {
      int st = -1;
      for (int s = 0; s < NST; s++)
        if (!strcmp(field[1], st_name[s])) st = s;
      srun *r = st < 0 ? NULL : add_run(S, cap);
      if (!r) {
        rc = -1;
        bcg_cli_error("%s:%d: not a run line of a sweep manifest", p, lineno);
        break;
      }
      r->state = st;
      snprintf(r->name, sizeof r->name, "%s", field[2]);
      snprintf(r->rundir, sizeof r->rundir, "%s", strcmp(field[3], "-") ? field[3] : "");
      for (int k = 4; k < nf; k++) r->ov[r->nov++] = strdup(field[k]);
      r->ident = make_ident(r->ov, r->nov);
      r->index = S->n;
    } else if (!strcmp(field[0], "slurm") && nf == 3) {
      for (int i = 0; i < S->n; i++)
        if (!strcmp(S->r[i].name, field[1])) snprintf(S->r[i].job, sizeof S->r[i].job, "%s", field[2]);
    } else {
      rc = -1;
      bcg_cli_error("%s:%d: not a line of a sweep manifest", p, lineno);
      break;
    }
  }
  free(line);
  fclose(f);
  return rc;
}

/* Writes the manifest under DIR/sweep.manifest.lock, the lock of every
 * writer: a local sweep, a --slurm submission and the array tasks, which run
 * at the same time. An array task (S->task) rewrites only its own run's
 * line of the manifest as it is now, so that tasks ending together do not
 * undo each other's states. */
static int write_manifest(const sweep *S) {
  char lp[PATH_MAX + 32];
  snprintf(lp, sizeof lp, "%s/" MANIFEST ".lock", S->dir);
  int lk = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lk >= 0)
    while (flock(lk, LOCK_EX) && errno == EINTR) {
    }
  int rc;
  if (!S->task) rc = write_manifest_file(S);
  else {
    sweep M;
    memset(&M, 0, sizeof M);
    snprintf(M.dir, sizeof M.dir, "%s", S->dir);
    int cap = 0;
    rc = read_manifest(&M, &cap, M.config, sizeof M.config, M.hash, sizeof M.hash) ? -1 : 0;
    const srun *own = &S->r[S->task - 1];
    for (int i = 0; !rc && i < M.n; i++)
      if (!strcmp(M.r[i].name, own->name)) {
        M.r[i].state = own->state;
        snprintf(M.r[i].rundir, sizeof M.r[i].rundir, "%s", own->rundir);
      }
    if (!rc) rc = write_manifest_file(&M);
    free_runs(&M);
  }
  if (lk >= 0) close(lk);
  return rc;
}

/* ---- what state a run is in ------------------------------------------------------------- */

/* The process holding FILE's flock, 0 when none. Read from /proc/locks, so
 * that probing never holds the lock itself (a training starting at that
 * moment would be refused); the pid is the one the holder wrote into it. */
static long lock_holder(const char *file) {
  struct stat st;
  if (stat(file, &st)) return 0;
  char buf[32] = "";
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    close(fd);
  }
  long written = atol(buf), held = 0;
  FILE *f = fopen("/proc/locks", "r");
  if (!f) return written > 0 && (kill((pid_t)written, 0) == 0 || errno == EPERM) ? written : 0;
  char line[512];
  while (!held && fgets(line, sizeof line, f)) {
    char *s = strchr(line, ':'), type[16];
    long pid;
    unsigned maj, min;
    unsigned long ino;
    if (!s || strstr(line, "->")) continue; /* "->": waiting for the lock */
    if (sscanf(s + 1, " %15s %*s %*s %ld %x:%x:%lu", type, &pid, &maj, &min, &ino) != 5) continue;
    if (strcmp(type, "FLOCK") || ino != (unsigned long)st.st_ino) continue;
    if ((maj == major(st.st_dev) && min == minor(st.st_dev)) || pid == written) held = pid;
  }
  fclose(f);
  return held ? (written > 0 ? written : held) : 0;
}

static void full_path(const sweep *S, const srun *r, char *out, size_t len) {
  snprintf(out, len, "%s/%s", S->dir, r->rundir);
}

/* the run's directory: the recorded one, else the newest DIR/NAME/<stamp> */
static int find_rundir(const sweep *S, srun *r) {
  char p[2 * PATH_MAX];
  if (r->rundir[0]) {
    full_path(S, r, p, sizeof p);
    if (bcg_cli_is_dir(p)) return 1;
    r->rundir[0] = 0;
  }
  snprintf(p, sizeof p, "%s/%s", S->dir, r->name);
  DIR *d = opendir(p);
  if (!d) return 0;
  char best[256] = "";
  struct dirent *de;
  while ((de = readdir(d))) {
    char sub[2 * PATH_MAX + 300];
    if (de->d_name[0] == '.' || !isdigit((unsigned char)de->d_name[0])) continue;
    snprintf(sub, sizeof sub, "%s/%s", p, de->d_name);
    if (bcg_cli_is_dir(sub) && strcmp(de->d_name, best) > 0) snprintf(best, sizeof best, "%s", de->d_name);
  }
  closedir(d);
  if (!best[0]) return 0;
  snprintf(r->rundir, sizeof r->rundir, "%s/%s", r->name, best);
  return 1;
}

/* the last "bcg: train: <word> after" line of the run's train.out says finished */
static int said_finished(const sweep *S, const srun *r) {
  char p[PATH_MAX + 300];
  snprintf(p, sizeof p, "%s/%s/train.out", S->dir, r->name);
  FILE *f = fopen(p, "r");
  if (!f) return 0;
  char line[1024];
  int fin = 0;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "bcg: train: ", 12) && strstr(line, " after ")) fin = !strncmp(line + 12, "finished", 8);
  fclose(f);
  return fin;
}

/* the run's iterations, samples, return and tracking error from its log */
static void fill_from_log(const sweep *S, srun *r, const bcg_cli_runlog *s, long budget) {
  if (s->iters <= 0) return;
  if (budget > 0) snprintf(r->it, sizeof r->it, "%ld/%ld", s->iters, budget);
  else snprintf(r->it, sizeof r->it, "%ld", s->iters);
  double v = s->samples;
  if (v >= 1e9) snprintf(r->samples, sizeof r->samples, "%.2fG", v / 1e9);
  else if (v >= 1e6) snprintf(r->samples, sizeof r->samples, "%.2fM", v / 1e6);
  else if (v >= 1e4) snprintf(r->samples, sizeof r->samples, "%.1fk", v / 1e3);
  else snprintf(r->samples, sizeof r->samples, "%.0f", v);
  if (isnan(s->ret_last)) snprintf(r->ret, sizeof r->ret, "-");
  else snprintf(r->ret, sizeof r->ret, "%.4g", s->ret_last);
  if (isnan(s->track_last)) r->trk[0] = 0;
  else snprintf(r->trk, sizeof r->trk, "%.1fcm", 100 * s->track_last);
  (void)S;
}

/* The state of a run that is not this sweep's child now. has_ck: it has a
 * checkpoint to resume from. */
static int derive(const sweep *S, srun *r, int *has_ck) {
  *has_ck = 0;
  r->other = 0;
  if (!find_rundir(S, r)) return r->state == ST_FAILED ? ST_FAILED : ST_PENDING;
  char p[2 * PATH_MAX], lk[2 * PATH_MAX + 16];
  full_path(S, r, p, sizeof p);
  snprintf(lk, sizeof lk, "%s/train.lock", p);
  int64_t ck = bcg_train_latest_checkpoint(p, NULL, 0);
  *has_ck = ck >= 0;
  bcg_cli_runlog s;
  char err[512], cp[2 * PATH_MAX + 16];
  long budget = 0;
  double sbudget = 0, tbudget = 0;
  snprintf(cp, sizeof cp, "%s/config.ini", p);
  dictionary *d = access(cp, R_OK) == 0 ? iniparser_load(cp) : NULL;
  if (d) {
    budget = iniparser_getlongint(d, "run:iterations", 0);
    sbudget = iniparser_getdouble(d, "run:samples", 0);
    tbudget = iniparser_getdouble(d, "run:seconds", 0);
    iniparser_freedict(d);
  }
  /* the budget it is held to: this sweep's configuration's, which may differ
   * from the one it was trained with (its config.ini); the run's "finished"
   * line counts only under the same budget */
  int same = 1;
  if (S->have_budget) {
    long bi;
    double bs, bt;
    run_budget(S, r, &bi, &bs, &bt);
    same = bi == budget && bs == sbudget && bt == tbudget;
    budget = bi, sbudget = bs, tbudget = bt;
  }
  int logged = bcg_cli_read_runlog(p, &s, err, sizeof err) == 0;
  if (logged) fill_from_log(S, r, &s, budget);
  if ((r->other = lock_holder(lk))) return ST_RUNNING;
  if (logged && s.iters > 0 && ck == s.iters &&
      ((budget > 0 && s.iters >= budget) || (sbudget > 0 && s.samples >= sbudget) ||
       (tbudget > 0 && s.wall >= tbudget) || (same && said_finished(S, r))))
    return ST_FINISHED;
  return r->state == ST_FAILED ? ST_FAILED : ST_INTERRUPTED;
}

/* --slurm: the scheduler's view of each submitted run merged into the state
 * derived from the run itself. A task waiting in the queue is queued; one
 * the scheduler runs is running (on another node its train.lock cannot be
 * seen from here), whatever its files say (it was submitted because it had
 * more to do: a larger budget); one that ended in a failure there (out of
 * memory, node failure, an error exit) failed unless it finished. A task
 * cancelled or timed out leaves its run interrupted (it checkpointed). */
static void slurm_merge(sweep *S) {
  for (int i = 0; i < S->n; i++) {
    srun *r = &S->r[i];
    r->sched[0] = r->why[0] = 0;
    if (!r->listed || !r->job[0] || !bcg_slurm_task_state(r->job, r->sched, sizeof r->sched, r->why, sizeof r->why))
      continue;
    if (!strcmp(r->sched, "PENDING") || !strncmp(r->sched, "REQUEUE", 7)) r->state = ST_QUEUED;
    else if (bcg_slurm_active(r->sched)) r->state = ST_RUNNING;
    else if (bcg_slurm_failed(r->sched) && r->state != ST_FINISHED) {
      r->state = ST_FAILED;
      if (!r->msg[0]) snprintf(r->msg, sizeof r->msg, "Slurm task %s ended %s", r->job, r->sched);
    }
  }
}

/* runs of the sweep that Slurm may still run */
static int slurm_active_runs(const sweep *S) {
  int n = 0;
  for (int i = 0; i < S->n; i++)
    n += S->r[i].listed && S->r[i].sched[0] && bcg_slurm_active(S->r[i].sched);
  return n;
}

/* ---- the view ----------------------------------------------------------------------------- */

static void term_size(int *rows, int *cols) {
  struct winsize w;
  *rows = 24, *cols = 80;
  if (ioctl(1, TIOCGWINSZ, &w) == 0) {
    if (w.ws_row > 4) *rows = w.ws_row;
    if (w.ws_col > 20) *cols = w.ws_col;
  }
}

static void count_states(const sweep *S, int *c) {
  for (int s = 0; s < NST; s++) c[s] = 0;
  for (int i = 0; i < S->n; i++)
    if (S->r[i].listed) c[S->r[i].state]++;
}

static void summary_line(const sweep *S, char *b, size_t len) {
  int c[NST];
  count_states(S, c);
  size_t at = (size_t)snprintf(b, len, "%d runs:", S->nlisted);
  const int order[NST] = {ST_FINISHED, ST_RUNNING, ST_QUEUED, ST_INTERRUPTED, ST_FAILED, ST_PENDING};
  int first = 1;
  for (int k = 0; k < NST && at < len; k++)
    if (c[order[k]]) {
      at += (size_t)snprintf(b + at, len - at, "%s %d %s", first ? "" : ",", c[order[k]], st_name[order[k]]);
      first = 0;
    }
}

static void row_line(const srun *r, int total, FILE *o) {
  const char *state = st_name[r->state];
  char sched[160] = "";
  int why = r->why[0] && strcmp(r->why, "None") && !strcmp(r->sched, "PENDING");
  if (r->job[0]) /* the scheduler's word on it, and why it waits */
    snprintf(sched, sizeof sched, "  [slurm %s %s%s%s%s]", r->job, r->sched[0] ? r->sched : "unknown",
             why ? " (" : "", why ? r->why : "", why ? ")" : "");
  fprintf(o, "%*d/%d %-12s %-11s %8s %10s %10s %7s  %s%s\n", total >= 100 ? 3 : total >= 10 ? 2 : 1, r->index, total,
          state, r->it[0] ? r->it : "-", r->samples[0] ? r->samples : "-", r->ret[0] ? r->ret : "-",
          r->trk[0] ? r->trk : "-", r->state == ST_RUNNING && r->eta[0] ? r->eta : "-", r->name, sched);
}

/* the table; at most max_rows run lines (running, failed and interrupted runs first), 0: all */
static int print_table(const sweep *S, FILE *o, int max_rows) {
  int lines = 0, total = S->nlisted;
  fprintf(o, "%*s %-12s %-11s %8s %10s %10s %7s  %s\n", total >= 100 ? 7 : total >= 10 ? 5 : 3, "run", "state",
          "iteration", "samples", "return", "track_err", "ETA", "name");
  lines++;
  char *show = calloc((size_t)S->n + 1, 1);
  int nshow = 0;
  const int prio[NST] = {ST_RUNNING, ST_FAILED, ST_INTERRUPTED, ST_QUEUED, ST_PENDING, ST_FINISHED};
  for (int k = 0; k < NST; k++)
    for (int i = 0; i < S->n; i++)
      if (show && S->r[i].listed && S->r[i].state == prio[k] && (!max_rows || nshow < max_rows - 1 || S->nlisted <= max_rows))
        show[i] = 1, nshow++;
  for (int i = 0; i < S->n; i++)
    if (S->r[i].listed && (!show || show[i])) {
      row_line(&S->r[i], total, o);
      lines++;
    }
  if (show && nshow < S->nlisted) {
    fprintf(o, "(%d more runs not shown)\n", S->nlisted - nshow);
    lines++;
  }
  free(show);
  return lines;
}

/* a line that stays: above the table on a terminal */
static void event(sweep *S, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void event(sweep *S, const char *fmt, ...) {
  if (S->tty && S->drawn) {
    printf("\033[%dA\033[J", S->drawn);
    S->drawn = 0;
    free(S->last);
    S->last = NULL;
  }
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  fflush(stdout);
}

/* on a terminal: the summary and the table in place of the last ones, each
 * line cut to the terminal's width (so that the cursor moves back over
 * exactly the lines drawn), when they changed */
static void redraw(sweep *S) {
  int rows, cols;
  term_size(&rows, &cols);
  char *text = NULL, sum[256];
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  if (!m) return;
  summary_line(S, sum, sizeof sum);
  fprintf(m, "%s\n", sum);
  print_table(S, m, rows - 3);
  fclose(m);
  if (S->last && !strcmp(S->last, text)) {
    free(text);
    return;
  }
  if (S->drawn) printf("\033[%dA\033[J", S->drawn);
  S->drawn = 0;
  for (char *l = text; *l;) {
    char *e = strchr(l, '\n');
    int n = (int)(e - l);
    printf("%.*s\n", n < cols - 1 ? n : cols - 1, l);
    S->drawn++;
    l = e + 1;
  }
  fflush(stdout);
  free(S->last);
  S->last = text;
}

/* ---- children ------------------------------------------------------------------------------- */

static void parse_field(const char *line, const char *key, char *out, size_t len) {
  const char *p = strstr(line, key);
  if (!p) return;
  p += strlen(key);
  snprintf(out, len, "%.*s", (int)strcspn(p, " \n"), p);
}

static void child_line(sweep *S, srun *r, char *line) {
  if (!strncmp(line, "it ", 3)) {
    parse_field(line, "it ", r->it, sizeof r->it);
    parse_field(line, "  samples ", r->samples, sizeof r->samples);
    parse_field(line, "  return ", r->ret, sizeof r->ret);
    parse_field(line, "  track_err ", r->trk, sizeof r->trk);
    parse_field(line, "  ETA ", r->eta, sizeof r->eta);
  } else if (!strncmp(line, "bcg: train: run directory ", 26)) {
    const char *d = line + 26, *slash = strrchr(d, '/');
    if (slash) snprintf(r->rundir, sizeof r->rundir, "%s/%s", r->name, slash + 1);
    write_manifest(S);
  } else if (!strncmp(line, "bcg: error: ", 12)) {
    snprintf(r->msg, sizeof r->msg, "%s", line + 12);
  }
}

static void drain(sweep *S, srun *r) {
  if (r->rfd < 0) return;
  for (;;) {
    if (r->nbuf == sizeof r->buf - 1) { /* a line longer than the buffer: cut */
      r->buf[r->nbuf] = 0;
      child_line(S, r, r->buf);
      r->nbuf = 0;
    }
    ssize_t n = read(r->rfd, r->buf + r->nbuf, sizeof r->buf - 1 - r->nbuf);
    if (n <= 0) break;
    r->nbuf += (size_t)n;
    char *s = r->buf, *e;
    while ((e = memchr(s, '\n', r->nbuf - (size_t)(s - r->buf)))) {
      *e = 0;
      child_line(S, r, s);
      s = e + 1;
    }
    r->nbuf -= (size_t)(s - r->buf);
    memmove(r->buf, s, r->nbuf);
  }
}

static void stamp_now(char *b, size_t len) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(b, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int start_run(sweep *S, srun *r, int resume) {
  char base[PATH_MAX + 300], out[PATH_MAX + 320], rd[2 * PATH_MAX];
  snprintf(base, sizeof base, "%s/%s", S->dir, r->name);
  snprintf(out, sizeof out, "%s/train.out", base);
  if (mkdir_p(base)) {
    snprintf(r->msg, sizeof r->msg, "%.200s: cannot create: %.80s", base, strerror(errno));
    return -1;
  }
  int wfd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (wfd < 0) {
    snprintf(r->msg, sizeof r->msg, "%.200s: cannot create: %.80s", out, strerror(errno));
    return -1;
  }
  char when[32], head[128];
  stamp_now(when, sizeof when);
  int hl = snprintf(head, sizeof head, "== bcg sweep: %s %s ==\n", resume ? "resume" : "start", when);
  if (write(wfd, head, (size_t)hl) != hl) { /* the run's output file is only informative */
  }
  off_t at = lseek(wfd, 0, SEEK_END);
  r->rfd = open(out, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (r->rfd >= 0) lseek(r->rfd, at, SEEK_SET);
  r->nbuf = 0;
  r->msg[0] = r->eta[0] = 0;

  static char ovbuf[MAXK + 8][PATH_MAX + 64];
  char *args[MAXK + 220];
  int na = 0;
  args[na++] = S->self;
  args[na++] = "train";
  if (resume) {
    full_path(S, r, rd, sizeof rd);
    args[na++] = "--resume";
    args[na++] = rd;
    if (S->have_budget) { /* the configuration's budget, which may have grown since */
      static char bov[3][64];
      budget_overrides(S, r, bov);
      for (int k = 0; k < 3; k++) args[na++] = bov[k];
    }
  } else {
    args[na++] = (char *)S->path;
    for (int i = 0; i < S->nuser; i++) args[na++] = S->user_ov[i];
    for (int k = 0; k < r->nov; k++) args[na++] = r->ov[k];
    snprintf(ovbuf[0], sizeof ovbuf[0], "run.name=%s", r->name);
    snprintf(ovbuf[1], sizeof ovbuf[1], "run.out_dir=%s", S->dir);
    args[na++] = ovbuf[0];
    args[na++] = ovbuf[1];
  }
  if (S->threads > 0) {
    snprintf(ovbuf[2], sizeof ovbuf[2], "run.threads=%d", S->threads);
    args[na++] = ovbuf[2];
  }
  args[na] = NULL;
  r->gpu = -1;
  if (r->cuda && S->ngpu > 0) {
    int g = 0;
    for (int k = 1; k < S->ngpu; k++)
      if (S->gpu_load[k] < S->gpu_load[g]) g = k;
    r->gpu = g;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t parent = getpid(), pid = fork();
  if (pid < 0) {
    close(wfd);
    snprintf(r->msg, sizeof r->msg, "fork: %s", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    /* a Ctrl-C on the terminal reaches the sweep only, which stops the runs
     * once; an array task (--task) leaves the signals of the scheduler or
     * the terminal to its run */
    if (!S->task) setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* a sweep killed outright: its runs checkpoint and stop */
    if (getppid() != parent) _exit(1);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGINT, &dfl, NULL);
    sigaction(SIGTERM, &dfl, NULL);
    sigaction(SIGHUP, &dfl, NULL);
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0) dup2(nul, 0);
    dup2(wfd, 1);
    dup2(wfd, 2);
    if (r->gpu >= 0) setenv("CUDA_VISIBLE_DEVICES", S->gpus[r->gpu], 1);
    execv(S->self, args);
    _exit(127);
  }
  if (!S->task) setpgid(pid, pid);
  close(wfd);
  r->pid = pid;
  r->state = ST_RUNNING;
  r->tried = 1;
  r->other = 0;
  r->t0 = now_s();
  if (r->gpu >= 0) S->gpu_load[r->gpu]++;
  return 0;
}

/* the visible GPUs (bcg_visible_gpus: CUDA_VISIBLE_DEVICES when set, else /dev/nvidia<N>) */
static void find_gpus(sweep *S) { S->ngpu = bcg_visible_gpus(S->gpus, 64); }

static int usable_cores(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* ---- bcg sweep --status DIR ------------------------------------------------------------ */

static int sweep_status(const char *dir) {
  sweep S;
  memset(&S, 0, sizeof S);
  snprintf(S.dir, sizeof S.dir, "%s", dir);
  int cap = 0;
  char cfgpath[PATH_MAX], hash[64];
  int rc = read_manifest(&S, &cap, cfgpath, sizeof cfgpath, hash, sizeof hash);
  if (rc == 1) return bcg_cli_error("%s: no %s here: not a sweep directory (bcg sweep CONFIG makes one)", dir, MANIFEST);
  if (rc) {
    free_runs(&S);
    return BCG_EXIT_ERROR;
  }
  for (int i = 0; i < S.n; i++) {
    int ck;
    S.r[i].listed = 1;
    S.r[i].state = derive(&S, &S.r[i], &ck);
  }
  S.nlisted = S.n;
  slurm_merge(&S);
  char lk[PATH_MAX + 32], sum[256];
  snprintf(lk, sizeof lk, "%s/sweep.lock", dir);
  long owner = lock_holder(lk);
  printf("sweep %s (%s)\n", dir, cfgpath);
  if (owner) printf("being run by process %ld\n", owner);
  else printf("no bcg sweep process runs it now\n");
  print_table(&S, stdout, 0);
  summary_line(&S, sum, sizeof sum);
  printf("%s\n", sum);
  free_runs(&S);
  return BCG_EXIT_OK;
}

/* ---- bcg sweep CONFIG --------------------------------------------------------------------- */

static int take_lock(const char *dir, int *fd_out) {
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/sweep.lock", dir);
  int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return bcg_cli_error("%s: cannot create: %s", p, strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB)) {
    long pid = lock_holder(p);
    close(fd);
    if (pid > 0) return bcg_cli_error("%s: this sweep is being run by process %ld", dir, pid);
    return bcg_cli_error("%s: this sweep is being run by another process", dir);
  }
  char pid[32];
  int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) { /* only the message loses the pid */
  }
  *fd_out = fd;
  return 0;
}

static srun *by_pid(sweep *S, pid_t pid) {
  for (int i = 0; i < S->n; i++)
    if (S->r[i].pid == pid) return &S->r[i];
  return NULL;
}

static void describe_end(sweep *S, srun *r, double secs) {
  char what[400] = "";
  if (r->state == ST_FINISHED)
    snprintf(what, sizeof what, ": it %s  samples %s  return %s%s%s (%.1f s)", r->it[0] ? r->it : "-",
             r->samples[0] ? r->samples : "-", r->ret[0] ? r->ret : "-", r->trk[0] ? "  track_err " : "", r->trk,
             secs);
  else if (r->state == ST_INTERRUPTED)
    snprintf(what, sizeof what, " at iteration %s", r->it[0] ? r->it : "0");
  else if (r->state == ST_FAILED)
    snprintf(what, sizeof what, ": %.250s (%.120s/train.out)", r->msg[0] ? r->msg : "see its output", r->name);
  event(S, "[%d/%d] %-11s %s%s", r->index, S->nlisted, st_name[r->state], r->name, what);
}

/* the children that ended: their output drained, their state derived
 * (handled: a stop was signalled, so a killed child was interrupted, not
 * failed), the manifest rewritten */
/* The state of run r whose child ended with wait status st (handled: a stop
 * was signalled, so a child killed by a signal was interrupted, not failed),
 * derived from the run itself unless the child failed. */
static void settle(sweep *S, srun *r, int st, int handled) {
  int ck, ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  if (ok || (WIFSIGNALED(st) && handled)) {
    r->state = ST_INTERRUPTED;
    r->state = derive(S, r, &ck);
  } else {
    r->state = ST_FAILED;
    derive(S, r, &ck);
    r->state = ST_FAILED;
    if (!r->msg[0]) {
      if (WIFEXITED(st)) snprintf(r->msg, sizeof r->msg, "exit status %d", WEXITSTATUS(st));
      else snprintf(r->msg, sizeof r->msg, "killed by signal %d", WTERMSIG(st));
    }
  }
}

/* A run directory without a checkpoint (the run died before its first one)
 * removed, so that the run starts again; its path into p */
static void discard_rundir(const sweep *S, srun *r, char *p, size_t len) {
  full_path(S, r, p, len);
  nftw(p, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  r->rundir[0] = 0;
}

static void reap_children(sweep *S, int handled, int *nrun) {
  for (;;) {
    int st;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid <= 0) break;
    srun *r = by_pid(S, pid);
    if (!r) continue;
    drain(S, r);
    close(r->rfd);
    r->rfd = -1;
    r->pid = 0;
    (*nrun)--;
    if (r->gpu >= 0) S->gpu_load[r->gpu]--;
    settle(S, r, st, handled);
    describe_end(S, r, now_s() - r->t0);
    write_manifest(S);
  }
}

/* start what can start (at most S->jobs at a time; none once a stop was
 * signalled); returns the number of runs still waiting (for a slot, or for
 * another process that trains them) */
static int start_ready(sweep *S, int handled, int *nrun) {
  int waiting = 0;
  for (int i = 0; i < S->n && !handled; i++) {
    srun *r = &S->r[i];
    if (!r->listed || r->pid > 0 || r->tried) continue;
    if (r->other) {
      waiting++;
      continue;
    }
    if (r->state == ST_FINISHED) continue;
    if (*nrun >= S->jobs) {
      waiting++;
      continue;
    }
    int ck;
    int was_failed = r->state == ST_FAILED;
    r->state = derive(S, r, &ck);
    if (r->other) {
      event(S, "[%d/%d] %s is being trained by process %ld, not by this sweep: waiting for it", r->index,
            S->nlisted, r->name, r->other);
      waiting++;
      continue;
    }
    if (r->state == ST_FINISHED) continue;
    int resume = ck;
    if (!ck && r->rundir[0]) { /* it never wrote a checkpoint: start it again */
      char p[2 * PATH_MAX];
      discard_rundir(S, r, p, sizeof p);
      event(S, "[%d/%d] %s: %s has no checkpoint to resume from: removed, starting again", r->index, S->nlisted,
            r->name, p);
    }
    char ckit[40] = "";
    if (resume) {
      char p[2 * PATH_MAX];
      full_path(S, r, p, sizeof p);
      snprintf(ckit, sizeof ckit, " from iteration %lld", (long long)bcg_train_latest_checkpoint(p, NULL, 0));
    }
    if (start_run(S, r, resume)) {
      r->state = ST_FAILED;
      r->tried = 1;
      describe_end(S, r, 0);
      write_manifest(S);
      continue;
    }
    (*nrun)++;
    char gpu[64] = "";
    if (r->gpu >= 0) snprintf(gpu, sizeof gpu, " on GPU %s", S->gpus[r->gpu]);
    event(S, "[%d/%d] %-11s %s%s%s%s", r->index, S->nlisted, resume ? "resume" : "start", r->name, ckit,
          was_failed ? " (it failed before)" : "", gpu);
    write_manifest(S);
  }
  return waiting;
}

static int run_sweep(sweep *S) {
  struct sigaction sa, old_int, old_term, old_hup;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  stop_count = 0;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  sigaction(SIGHUP, &sa, &old_hup);
  int handled = 0, nrun = 0;
  double last_draw = 0, last_table = now_s(), last_probe = 0;
  for (;;) {
    /* signals: SIGTERM to every child, once per signal received */
    int sc = stop_count;
    if (sc > handled) {
      handled = sc;
      int k = 0;
      for (int i = 0; i < S->n; i++)
        if (S->r[i].pid > 0) kill(S->r[i].pid, handled >= 3 ? SIGKILL : SIGTERM), k++;
      if (handled == 1)
        event(S, "bcg: sweep: stopping: SIGTERM to %d run%s (each checkpoints and exits; again: at once)", k,
              k == 1 ? "" : "s");
    }
    reap_children(S, handled, &nrun);
    /* runs another process trains: look again now and then */
    double t = now_s();
    if (t - last_probe > 1) {
      last_probe = t;
      for (int i = 0; i < S->n; i++) {
        srun *r = &S->r[i];
        if (r->listed && r->other && r->pid == 0) {
          int ck;
          r->state = derive(S, r, &ck);
          if (!r->other) write_manifest(S);
        }
      }
    }
    int waiting = start_ready(S, handled, &nrun);
    for (int i = 0; i < S->n; i++)
      if (S->r[i].pid > 0) drain(S, &S->r[i]);
    if (nrun == 0 && (handled || waiting == 0)) break;
    t = now_s();
    if (S->tty && t - last_draw >= 0.5) {
      redraw(S);
      last_draw = t;
    } else if (!S->tty && t - last_table >= 300) {
      char sum[256];
      summary_line(S, sum, sizeof sum);
      printf("%s\n", sum);
      print_table(S, stdout, 0);
      fflush(stdout);
      last_table = t;
    }
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  sigaction(SIGHUP, &old_hup, NULL);
  if (S->tty && S->drawn) printf("\033[%dA\033[J", S->drawn);
  S->drawn = 0;
  free(S->last);
  S->last = NULL;
  write_manifest(S);
  char sum[256];
  summary_line(S, sum, sizeof sum);
  print_table(S, stdout, 0);
  printf("sweep %s: %s\n", S->dir, sum);
  int c[NST];
  count_states(S, c);
  if (handled || c[ST_INTERRUPTED] || c[ST_PENDING])
    printf("run the same command again to continue: finished runs are skipped, interrupted ones resumed\n");
  else if (!c[ST_FAILED])
    printf("compare them: bcg report %s\n", S->dir);
  fflush(stdout);
  if (c[ST_FAILED]) return bcg_cli_error("sweep: %d of %d runs failed (their train.out in %s)", c[ST_FAILED], S->nlisted, S->dir);
  return BCG_EXIT_OK;
}

static int parse_jobs(const char *s, int *jobs) {
  char *e;
  long v = strtol(s, &e, 10);
  if (!*s || *e || v < 1 || v > 1024) return -1;
  *jobs = (int)v;
  return 0;
}

/* the runs of the [sweep] expansion into S (names, overrides, identities),
 * each matched to the earlier session's run of the same values in M (its
 * name, run directory and state), then M's runs this expansion no longer has
 * (kept, not run); -1 when done, else the exit status of the error printed */
static int expand_runs(sweep *S, int *cap, sweep *M, const bcg_config *cfg, int nk, int zip, const char *base,
                       int dev_swept, int base_cuda) {
  int nv[MAXK], total = 1;
  for (int k = 0; k < nk; k++) {
    nv[k] = bcg_config_sweep_nvalues(cfg, k);
    total = zip ? nv[0] : total * nv[k];
  }
  for (int i = 0; i < total; i++) {
    int idx[MAXK], rem = i;
    for (int k = nk - 1; k >= 0; k--) {
      idx[k] = zip ? i : rem % nv[k];
      if (!zip) rem /= nv[k];
    }
    srun *r = add_run(S, cap);
    if (!r) return bcg_cli_error("out of memory");
    snprintf(r->name, sizeof r->name, "%s", base);
    for (int k = 0; k < nk; k++) {
      const char *key = bcg_config_sweep_key(cfg, k), *val = bcg_config_sweep_value(cfg, k, idx[k]);
      size_t l = strlen(key) + strlen(val) + 2;
      r->ov[k] = malloc(l);
      if (r->ov[k]) snprintf(r->ov[k], l, "%s=%s", key, val);
      r->nov = k + 1;
      append_name(r->name, sizeof r->name, key, val);
    }
    r->ident = make_ident(r->ov, r->nov);
    r->cuda = dev_swept >= 0 ? !strcmp(bcg_config_sweep_value(cfg, dev_swept, idx[dev_swept]), "cuda") : base_cuda;
    r->listed = 1;
    r->index = i + 1;
    for (int j = 0; j < M->n; j++)
      if (M->r[j].ident && r->ident && !M->r[j].listed && !strcmp(M->r[j].ident, r->ident)) {
        M->r[j].listed = 1; /* taken */
        snprintf(r->name, sizeof r->name, "%s", M->r[j].name);
        snprintf(r->rundir, sizeof r->rundir, "%s", M->r[j].rundir);
        snprintf(r->job, sizeof r->job, "%s", M->r[j].job);
        r->state = M->r[j].state;
      }
  }
  S->nlisted = total;
  for (int i = 0; i < total; i++)
    for (int j = 0; j < i; j++)
      if (!strcmp(S->r[i].name, S->r[j].name)) {
        return bcg_cli_error("%s: [sweep] runs %d and %d would have the same name %s (values that differ only in "
                             "characters a name cannot hold)",
                             S->path, j + 1, i + 1, S->r[i].name);
      }
  for (int j = 0; j < M->n; j++) /* runs of the directory that this expansion no longer has: kept, not run */
    if (!M->r[j].listed) {
      srun *r = add_run(S, cap);
      if (!r) break;
      *r = M->r[j];
      M->r[j].nov = 0, M->r[j].ident = NULL, M->r[j].rfd = -1;
      r->listed = 0;
      r->index = 0;
    }
  return -1;
}

/* --dry-run: each listed run's state or the command that would train it */
static void print_dry_run(const sweep *S, int total, const char *path, char **user_ov, int nuser) {
  for (int i = 0; i < total; i++) {
    srun *r = &S->r[i];
    int ck = 0;
    char p[2 * PATH_MAX] = "";
    if (r->rundir[0]) full_path(S, r, p, sizeof p), ck = bcg_train_latest_checkpoint(p, NULL, 0) >= 0;
    printf("[%d/%d]", i + 1, total);
    if (r->state == ST_FINISHED) {
      printf(" finished: %s (skipped)\n", p);
      continue;
    }
    if (r->state == ST_RUNNING) {
      printf(" running: %s (trained by process %ld)\n", p, r->other);
      continue;
    }
    if (r->cuda && S->ngpu > 0) printf(" CUDA_VISIBLE_DEVICES=%s", S->gpus[i % S->ngpu]);
    if (ck) {
      printf(" train --resume %s", p);
      char bov[3][64];
      budget_overrides(S, r, bov);
      printf(" %s %s %s", bov[0], bov[1], bov[2]);
    } else {
      printf(" train %s", path);
      for (int k = 0; k < nuser; k++) printf(" %s", user_ov[k]);
      for (int k = 0; k < r->nov; k++) printf(" %s", r->ov[k]);
      printf(" run.name=%s run.out_dir=%s", r->name, S->dir);
    }
    if (S->threads > 0) printf(" run.threads=%d", S->threads);
    printf("\n");
  }
}

/* ---- --task N and --slurm ------------------------------------------------------------------ */

/* --task N: trains run N of the sweep in a child process as a local sweep
 * would (its output appended to DIR/NAME/train.out, resumed from its
 * checkpoint when it has one, started afresh when it has none) and records
 * how it ended in the manifest: what each Slurm array task runs. SIGINT,
 * SIGTERM and SIGHUP are left to the run: the scheduler (scancel, the time
 * limit) and a terminal's Ctrl-C signal every process of the job or the
 * process group, and a run checkpoints at its first signal and dies at its
 * second, so this process ignores them and waits. */
static int run_task(sweep *S) {
  srun *r = &S->r[S->task - 1];
  int ck;
  r->state = derive(S, r, &ck);
  if (r->other)
    return bcg_cli_error("%s: run %d (%s) is being trained by process %ld already", S->dir, S->task, r->name, r->other);
  if (r->state == ST_FINISHED) {
    printf("bcg: sweep: run %d/%d %s has finished already: nothing to do\n", r->index, S->nlisted, r->name);
    return BCG_EXIT_OK;
  }
  if (!ck && r->rundir[0]) { /* it never wrote a checkpoint: start it again */
    char p[2 * PATH_MAX];
    discard_rundir(S, r, p, sizeof p);
  }
  struct sigaction ign, old[3];
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
  for (int k = 0; k < 3; k++) sigaction(sigs[k], &ign, &old[k]);
  int rc = start_run(S, r, ck);
  if (rc == 0) {
    printf("bcg: sweep: run %d/%d %s: %s, threads %d; output in %s/%s/train.out\n", r->index, S->nlisted, r->name,
           ck ? "resumed from its checkpoint" : "started", S->threads, S->dir, r->name);
    fflush(stdout);
    int st = 0;
    while (waitpid(r->pid, &st, 0) < 0 && errno == EINTR) {
    }
    drain(S, r);
    r->pid = 0;
    settle(S, r, st, 0); /* this process ignores the signals: a signal that killed the run failed it */
    describe_end(S, r, now_s() - r->t0);
    rc = r->state == ST_FAILED ? BCG_EXIT_ERROR : BCG_EXIT_OK;
  } else {
    r->state = ST_FAILED;
    rc = bcg_cli_error("%s", r->msg);
  }
  for (int k = 0; k < 3; k++) sigaction(sigs[k], &old[k], NULL);
  write_manifest(S);
  return rc;
}

/* the runs --slurm submits: not finished, not trained by a process here,
 * not queued or running in Slurm already (their 1-based indices) */
static int slurm_todo(const sweep *S, int *tasks) {
  int nt = 0;
  for (int i = 0; i < S->nlisted; i++) {
    const srun *r = &S->r[i];
    if (r->state == ST_FINISHED || r->other || (r->sched[0] && bcg_slurm_active(r->sched))) continue;
    tasks[nt++] = r->index;
  }
  return nt;
}

/* --slurm: one job array of the runs that need training, each array task
 * running `bcg sweep CONFIG <overrides> --dir DIR --task N`; the script in
 * DIR/slurm/, each task's scheduler output in DIR/slurm/JOBID_TASK.out, the
 * tasks in the manifest. With --dry-run the script is printed instead. */
static int submit_slurm(sweep *S, bcg_slurm_opts *so, int dry) {
  int *tasks = malloc(sizeof(int) * ((size_t)S->nlisted + 1)), rc = BCG_EXIT_OK, nt;
  if (!tasks) return bcg_cli_error("out of memory");
  if ((nt = slurm_todo(S, tasks)) == 0) {
    printf("nothing to submit: every run has finished or is queued or running (bcg sweep --status %s)\n", S->dir);
    goto out;
  }
  char dir[PATH_MAX], cwd[PATH_MAX], logdir[PATH_MAX + 16], script[PATH_MAX + 64], stamp[32], err[PATH_MAX + 600];
  if (!getcwd(cwd, sizeof cwd)) {
    rc = bcg_cli_error("cannot read the current directory: %s", strerror(errno));
    goto out;
  }
  if (S->dir[0] == '/') snprintf(dir, sizeof dir, "%s", S->dir);
  else snprintf(dir, sizeof dir, "%.2000s/%.2000s", cwd, S->dir);
  snprintf(logdir, sizeof logdir, "%s/slurm", dir);
  if (!dry && mkdir_p(logdir)) {
    rc = bcg_cli_error("%s: cannot create: %s", logdir, strerror(errno));
    goto out;
  }
  stamp_now(stamp, sizeof stamp);
  snprintf(script, sizeof script, "%s/array-%s.sbatch", logdir, stamp);
  char *argv[220], chdir_opt[PATH_MAX + 16];
  int na = 0;
  argv[na++] = S->self;
  argv[na++] = "sweep";
  argv[na++] = S->config;
  for (int i = 0; i < S->nuser; i++) argv[na++] = S->user_ov[i];
  argv[na++] = "--dir";
  argv[na++] = dir;
  argv[na++] = "--task";
  snprintf(chdir_opt, sizeof chdir_opt, "--chdir=%s", cwd); /* relative paths of the overrides */
  if (so->nextra < BCG_SLURM_MAX_EXTRA) so->extra[so->nextra++] = chdir_opt;
  const char *base = strrchr(dir, '/');
  char name[300];
  snprintf(name, sizeof name, "bcg-%.200s", base ? base + 1 : dir);
  if (dry) {
    printf("would submit %d run%s as the job array of %s:\n", nt, nt == 1 ? "" : "s", script);
    if (bcg_slurm_write_script(stdout, so, name, logdir, tasks, nt, argv, na)) rc = bcg_cli_error("stdout: write failed");
    goto out;
  }
  FILE *f = fopen(script, "w");
  int bad = !f || bcg_slurm_write_script(f, so, name, logdir, tasks, nt, argv, na);
  if ((f && fclose(f)) || bad) {
    rc = bcg_cli_error("%s: cannot write: %s", script, strerror(errno));
    goto out;
  }
  char job[40];
  if (bcg_slurm_submit(script, job, sizeof job, err, sizeof err)) {
    rc = bcg_cli_error("%s", err);
    goto out;
  }
  for (int k = 0; k < nt; k++) {
    srun *r = &S->r[tasks[k] - 1];
    snprintf(r->job, sizeof r->job, "%s_%d", job, tasks[k]);
    snprintf(r->sched, sizeof r->sched, "PENDING");
    r->state = ST_QUEUED;
  }
  if (write_manifest(S)) rc = bcg_cli_error("%s/" MANIFEST ": cannot write: %s", S->dir, strerror(errno));
  printf("submitted Slurm job array %s: %d run%s (script %s)\nfollow it: bcg sweep --status %s\n", job, nt,
         nt == 1 ? "" : "s", script, S->dir);
out:
  free(tasks);
  return rc;
}

/* the command line of bcg sweep */
typedef struct sweep_args {
  const char *path, *dir_opt, *status_dir;
  int dry, jobs, jobs_given, slurm, task;
  bcg_slurm_opts so;
  char *user_ov[200];
  int nuser;
} sweep_args;

/* --slurm's options (--partition P, --gpus-per-run=G, ...) into A->so: 1
 * when argv[*i] is one (*i moved past its value), 0 when not, -1 after a
 * usage error printed */
static int slurm_option(int argc, char **argv, int *i, sweep_args *A) {
  static const char *const str[] = {"--partition", "--time", "--mem", "--account", "--qos", "--constraint",
                                    "--sbatch-arg", "--cpus-per-run", "--gpus-per-run"};
  const char *a = argv[*i];
  for (int k = 0; k < 9; k++) {
    size_t l = strlen(str[k]);
    if (strncmp(a, str[k], l) || (a[l] && a[l] != '=')) continue;
    const char *v = a[l] == '=' ? a + l + 1 : (*i + 1 < argc ? argv[++*i] : NULL);
    if (!v || !v[0]) return bcg_cli_usage("sweep", "%s needs a value", str[k]), -1;
    const char **slot[] = {&A->so.partition, &A->so.time, &A->so.mem, &A->so.account, &A->so.qos, &A->so.constraint};
    if (k < 6) *slot[k] = v;
    else if (k == 6) {
      if (A->so.nextra >= BCG_SLURM_MAX_EXTRA) return bcg_cli_usage("sweep", "at most %d --sbatch-arg", BCG_SLURM_MAX_EXTRA), -1;
      if (v[0] != '-') return bcg_cli_usage("sweep", "--sbatch-arg '%s': give an sbatch option such as --exclusive", v), -1;
      A->so.extra[A->so.nextra++] = v;
    } else {
      char *e;
      long n = strtol(v, &e, 10);
      if (*e || n < (k == 7 ? 1 : 0) || n > 4096) return bcg_cli_usage("sweep", "%s '%s': a whole number %d to 4096", str[k], v, k == 7), -1;
      *(k == 7 ? &A->so.cpus_per_run : &A->so.gpus_per_run) = (int)n;
    }
    return 1;
  }
  return 0;
}

/* argv into A; -1 when complete, else the exit status of the usage error printed */
static int sweep_parse(int argc, char **argv, sweep_args *A) {
  memset(A, 0, sizeof *A);
  A->jobs = 1;
  int slurm_only = 0;
  for (int i = 1; i < argc; i++) {
    int so = slurm_option(argc, argv, &i, A);
    if (so < 0) return BCG_EXIT_USAGE;
    if (so) slurm_only = 1;
    else if (!strcmp(argv[i], "--dry-run")) A->dry = 1;
    else if (!strcmp(argv[i], "--slurm")) A->slurm = 1;
    else if (!strcmp(argv[i], "--task") || !strncmp(argv[i], "--task=", 7)) {
      const char *v = argv[i][6] == '=' ? argv[i] + 7 : (i + 1 < argc ? argv[++i] : "");
      char *e;
      long n = strtol(v, &e, 10);
      if (!v[0] || *e || n < 1 || n > 1000000) return bcg_cli_usage("sweep", "--task needs the run's index (1, 2, ...)");
      A->task = (int)n;
    } else if (!strcmp(argv[i], "--jobs") || !strcmp(argv[i], "-j")) {
      if (i + 1 >= argc || parse_jobs(argv[i + 1], &A->jobs))
        return bcg_cli_usage("sweep", "%s needs a number of runs at a time, 1 to 1024", argv[i]);
      i++, A->jobs_given = 1;
    } else if (!strncmp(argv[i], "--jobs=", 7)) {
      if (parse_jobs(argv[i] + 7, &A->jobs)) return bcg_cli_usage("sweep", "--jobs needs a number of runs at a time, 1 to 1024");
      A->jobs_given = 1;
    } else if (!strcmp(argv[i], "--dir") || !strcmp(argv[i], "--status")) {
      if (i + 1 >= argc || !argv[i + 1][0]) return bcg_cli_usage("sweep", "%s needs DIR", argv[i]);
      if (argv[i][2] == 'd') A->dir_opt = argv[++i];
      else A->status_dir = argv[++i];
    } else if (argv[i][0] == '-') return bcg_cli_usage("sweep", "unknown option '%s'", argv[i]);
    else if (strchr(argv[i], '=')) {
      if (A->nuser >= 190) return bcg_cli_usage("sweep", "too many overrides");
      A->user_ov[A->nuser++] = argv[i];
    } else if (!A->path) A->path = argv[i];
    else return bcg_cli_usage("sweep", "unexpected argument '%s'", argv[i]);
  }
  if (slurm_only && !A->slurm) return bcg_cli_usage("sweep", "--partition, --time, --gpus-per-run, ... go with --slurm");
  if (A->slurm && A->task) return bcg_cli_usage("sweep", "--task is what each Slurm array task runs; not with --slurm");
  if (A->task && (A->dry || A->jobs_given)) return bcg_cli_usage("sweep", "--task N trains one run: no --dry-run or --jobs");
  if (A->slurm) A->so.max_running = A->jobs_given ? A->jobs : 0;
  return -1;
}

/* This session's sweep from the config: the executable and config paths,
 * the hashes that identify it (old_hash: the earlier scheme's), the budget,
 * the directory, threads per run and the GPUs. */
static int sweep_init(sweep *S, const bcg_config *cfg, sweep_args *A, int nk, char *old_hash, size_t hlen,
                      int *dev_swept, int *cores) {
  memset(S, 0, sizeof *S);
  S->path = A->path;
  S->user_ov = A->user_ov;
  S->nuser = A->nuser;
  S->jobs = A->jobs;
  S->tty = isatty(1);
  ssize_t sl = readlink("/proc/self/exe", S->self, sizeof S->self - 1);
  if (sl <= 0) return bcg_cli_error("cannot find the bcg executable (/proc/self/exe)");
  S->self[sl] = 0;
  if (!realpath(A->path, S->config)) snprintf(S->config, sizeof S->config, "%s", A->path);
  config_hash(cfg, S->hash, sizeof S->hash, 0);
  config_hash(cfg, old_hash, hlen, 1);
  S->have_budget = 1;
  S->budget_it = bcg_config_get_int(cfg, "run", "iterations");
  S->budget_samples = (double)bcg_config_get_int(cfg, "run", "samples");
  S->budget_s = bcg_config_get_real(cfg, "run", "seconds");
  const char *base = bcg_config_get_string(cfg, "run", "name");
  if (!base[0]) base = "sweep";
  if (A->dir_opt) snprintf(S->dir, sizeof S->dir, "%s", A->dir_opt);
  else {
    const char *od = bcg_config_get_string(cfg, "run", "out_dir");
    snprintf(S->dir, sizeof S->dir, "%s/%s", od[0] ? od : ".", base);
  }
  size_t dl = strlen(S->dir);
  while (dl > 1 && S->dir[dl - 1] == '/') S->dir[--dl] = 0;

  /* threads and devices */
  int fixed_threads = bcg_params_line(bcg_config_section(cfg, "run"), "threads") != 0;
  *dev_swept = -1;
  for (int k = 0; k < nk; k++) {
    if (!strcmp(bcg_config_sweep_key(cfg, k), "run.threads")) fixed_threads = 1;
    if (!strcmp(bcg_config_sweep_key(cfg, k), "run.device")) *dev_swept = k;
  }
  *cores = usable_cores();
  S->threads = fixed_threads ? 0 : (*cores / S->jobs > 1 ? *cores / S->jobs : 1);
  S->task = A->task, S->slurm = A->slurm;
  if (S->task && !fixed_threads) { /* an array task: the cores Slurm gave it */
    const char *c = getenv("SLURM_CPUS_PER_TASK");
    S->threads = c && atoi(c) > 0 ? atoi(c) : *cores;
  }
  if (S->slurm && A->so.cpus_per_run == 0) { /* one core per run unless the config asks for more */
    int t = fixed_threads ? (int)bcg_config_get_int(cfg, "run", "threads") : 1;
    A->so.cpus_per_run = t > 0 ? t : 1;
  }
  find_gpus(S);
  return 0;
}

/* Where each run stands, printed: the totals, what earlier sessions left,
 * and runs another process is training. */
static void sweep_print_states(sweep *S, int have, int zip, int cores, int dry) {
  int total = S->nlisted;
  int c[NST] = {0}, resumable = 0;
  char *ck = calloc((size_t)S->n + 1, 1);
  for (int i = 0; i < S->n; i++) {
    int has;
    S->r[i].state = derive(S, &S->r[i], &has);
    if (ck) ck[i] = (char)has;
  }
  slurm_merge(S); /* runs queued or running in Slurm are not resumed here */
  for (int i = 0; i < S->n; i++) {
    const srun *r = &S->r[i];
    if (!r->listed) continue;
    c[r->state]++;
    resumable += ck && ck[i] && (r->state == ST_INTERRUPTED || r->state == ST_FAILED || r->state == ST_PENDING);
  }
  free(ck);
  char thr[64] = "";
  if (S->threads > 0) snprintf(thr, sizeof thr, ", run.threads = %d each (%d cores)", S->threads, cores);
  if (S->slurm) printf("sweep %s: %d runs (%s) through Slurm; directory %s\n", S->path, total, zip ? "zip" : "grid", S->dir);
  else
    printf("sweep %s: %d runs (%s), %d at a time%s; directory %s\n", S->path, total, zip ? "zip" : "grid", S->jobs, thr,
           S->dir);
  if (have == 0)
    printf("earlier sessions: %d finished (skipped), %d to resume, %d failed (tried again), %d running elsewhere, "
           "%d to start%s\n",
           c[ST_FINISHED], resumable, c[ST_FAILED], c[ST_RUNNING] + c[ST_QUEUED],
           total - c[ST_FINISHED] - resumable - c[ST_FAILED] - c[ST_RUNNING] - c[ST_QUEUED],
           c[ST_QUEUED] ? " (queued in Slurm: counted as running elsewhere)" : "");
  for (int i = 0; i < total; i++)
    if (S->r[i].other)
      printf("[%d/%d] %s is being trained by process %ld, not by this sweep: %s\n", i + 1, total, S->r[i].name,
             S->r[i].other, dry ? "skipped" : "waiting for it");
  fflush(stdout);
}

int bcg_cmd_sweep(int argc, char **argv) {
  sweep_args A;
  int prc = sweep_parse(argc, argv, &A);
  if (prc >= 0) return prc;
  const char *path = A.path, *dir_opt = A.dir_opt, *status_dir = A.status_dir;
  int dry = A.dry, nuser = A.nuser;
  char **user_ov = A.user_ov;
  if (status_dir) {
    if (path || nuser || dry || dir_opt) return bcg_cli_usage("sweep", "--status DIR takes nothing else");
    return sweep_status(status_dir);
  }
  if (!path) return bcg_cli_usage("sweep", "missing CONFIG");
  char err[4096];
  bcg_config *cfg = NULL;
  if (bcg_config_load_with(&cfg, bcg_registry_global(), path, nuser, user_ov, err, sizeof err))
    return bcg_cli_error("%s", err);
  int nk = bcg_config_sweep_count(cfg);
  if (nk == 0) {
    bcg_config_free(cfg);
    return bcg_cli_error("%s: no [sweep] keys to expand (e.g. contact.kappa = 50, 100, 300; run.seed = 0, 1, 2)",
                         path);
  }
  if (nk > MAXK) {
    bcg_config_free(cfg);
    return bcg_cli_error("%s: [sweep] has %d keys, at most %d", path, nk, MAXK);
  }
  int zip = !strcmp(bcg_config_get_string(cfg, "sweep", "mode"), "zip");
  int rc = bcg_cli_check_sweep(cfg); /* the message reads the config: free it after */
  if (rc) {
    bcg_config_free(cfg);
    return rc;
  }
  sweep S;
  int lockfd = -1, cap = 0, dev_swept = -1, cores = 1;
  char old_hash[40];
  if ((rc = sweep_init(&S, cfg, &A, nk, old_hash, sizeof old_hash, &dev_swept, &cores))) goto out;
  const char *base = bcg_config_get_string(cfg, "run", "name");
  if (!base[0]) base = "sweep";
  int base_cuda = !strcmp(bcg_config_get_string(cfg, "run", "device"), "cuda");

  /* the manifest of an earlier session, then this expansion */
  sweep M;
  memset(&M, 0, sizeof M);
  snprintf(M.dir, sizeof M.dir, "%s", S.dir);
  int mcap = 0;
  char mcfg[PATH_MAX] = "", mhash[64] = "";
  int have = bcg_cli_is_dir(S.dir) ? read_manifest(&M, &mcap, mcfg, sizeof mcfg, mhash, sizeof mhash) : 1;
  if (have < 0) {
    free_runs(&M);
    rc = BCG_EXIT_ERROR;
    goto out;
  }
  if (have == 0 && strcmp(mhash, S.hash) && strcmp(mhash, old_hash)) {
    free_runs(&M);
    rc = bcg_cli_error("%s: a sweep of another configuration (%s; the resolved configurations without [sweep] "
                       "differ): give this one another --dir, or remove %s",
                       S.dir, mcfg, S.dir);
    goto out;
  }
  rc = expand_runs(&S, &cap, &M, cfg, nk, zip, base, dev_swept, base_cuda);
  free_runs(&M);
  if (rc >= 0) goto out;
  rc = BCG_EXIT_OK;
  int total = S.nlisted;
  if (S.task) {
    if (have != 0) {
      rc = bcg_cli_error("%s: no %s: --task trains a run of a sweep that bcg sweep --slurm submitted", S.dir, MANIFEST);
      goto out;
    }
    if (S.task > total) {
      rc = bcg_cli_error("--task %d: the sweep has %d runs", S.task, total);
      goto out;
    }
    rc = run_task(&S);
    goto out;
  }
  sweep_print_states(&S, have, zip, cores, dry);
  if (S.slurm && dry) {
    rc = submit_slurm(&S, &A.so, 1);
    goto out;
  }
  if (!S.slurm && slurm_active_runs(&S)) {
    rc = bcg_cli_error("%s: %d runs of this sweep are queued or running in Slurm (bcg sweep --status %s): wait for "
                       "them or scancel them before running it here",
                       S.dir, slurm_active_runs(&S), S.dir);
    goto out;
  }
  if (dry) {
    print_dry_run(&S, total, path, user_ov, nuser);
    goto out;
  }
  if (mkdir_p(S.dir)) {
    rc = bcg_cli_error("%s: cannot create the sweep directory: %s", S.dir, strerror(errno));
    goto out;
  }
  if ((rc = take_lock(S.dir, &lockfd))) goto out;
  if (write_manifest(&S)) {
    rc = bcg_cli_error("%s/" MANIFEST ": cannot write: %s", S.dir, strerror(errno));
    goto out;
  }
  rc = S.slurm ? submit_slurm(&S, &A.so, 0) : run_sweep(&S);
out:
  if (lockfd >= 0) close(lockfd);
  free_runs(&S);
  bcg_config_free(cfg);
  return rc;
}
