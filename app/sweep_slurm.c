/* sweep_slurm.c - batch script, submission and task states of `bcg sweep
 * --slurm` (sweep_slurm.h). Talks to Slurm only through its commands
 * (sbatch, squeue, sacct), found on PATH, so that it works with any Slurm a
 * cluster runs and with the configuration in SLURM_CONF. */
#include "sweep_slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* a single-quoted for sh into out (cut to len) */
static void sh_quote(const char *a, char *out, size_t len) {
  size_t k = 0;
  if (len < 3) {
    if (len) out[0] = 0;
    return;
  }
  out[k++] = '\'';
  for (; *a && k + 6 < len; a++) {
    if (*a == '\'') {
      memcpy(out + k, "'\\''", 4);
      k += 4;
    } else out[k++] = *a;
  }
  out[k++] = '\'';
  out[k] = 0;
}

/* argv's stdout and stderr into buf (cut to len - 1); its exit status, -1
 * when it could not run (buf says why) */
static int capture(char *const *argv, char *buf, size_t len) {
  int fd[2];
  buf[0] = 0;
  if (pipe(fd)) return snprintf(buf, len, "pipe: %s", strerror(errno)), -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]), close(fd[1]);
    return snprintf(buf, len, "fork: %s", strerror(errno)), -1;
  }
  if (pid == 0) {
    dup2(fd[1], 1);
    dup2(fd[1], 2);
    close(fd[0]), close(fd[1]);
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0) dup2(nul, 0);
    execvp(argv[0], argv);
    dprintf(1, "cannot run %s: %s (Slurm's commands: Debian package slurm-client)", argv[0], strerror(errno));
    _exit(127);
  }
  close(fd[1]);
  size_t at = 0;
  char tmp[4096];
  ssize_t n;
  while ((n = read(fd[0], tmp, sizeof tmp)) > 0 || (n < 0 && errno == EINTR)) {
    if (n < 0) continue;
    size_t c = at + (size_t)n < len ? (size_t)n : len - 1 - at;
    memcpy(buf + at, tmp, c);
    at += c;
  }
  buf[at] = 0;
  close(fd[0]);
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 127 && strstr(buf, "cannot run ")) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void chomp(char *s) {
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) s[--n] = 0;
}

/* "1,3-5,8": the array's task list, consecutive indices as ranges */
static void array_spec(const int *t, int n, char *out, size_t len) {
  size_t at = 0;
  out[0] = 0;
  for (int i = 0; i < n && at < len;) {
    int j = i;
    while (j + 1 < n && t[j + 1] == t[j] + 1) j++;
    if (j > i) at += (size_t)snprintf(out + at, len - at, "%s%d-%d", at ? "," : "", t[i], t[j]);
    else at += (size_t)snprintf(out + at, len - at, "%s%d", at ? "," : "", t[i]);
    i = j + 1;
  }
}

int bcg_slurm_write_script(FILE *f, const bcg_slurm_opts *o, const char *job_name, const char *logdir,
                           const int *tasks, int ntasks, char *const *argv, int nargv) {
  size_t alen = (size_t)ntasks * 12 + 32;
  char *arr = malloc(alen), q[4 * 4096 + 3];
  if (!arr) return -1;
  array_spec(tasks, ntasks, arr, alen);
  time_t now = time(NULL);
  struct tm tm;
  char when[32];
  gmtime_r(&now, &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  fprintf(f, "#!/bin/bash\n# written by bcg sweep --slurm at %s: one array task per run of the sweep;\n"
             "# each task trains its run (or resumes it from its checkpoint) through bcg sweep --task\n",
          when);
  fprintf(f, "#SBATCH --job-name=%s\n#SBATCH --array=%s", job_name, arr);
  if (o->max_running > 0) fprintf(f, "%%%d", o->max_running);
  fprintf(f, "\n#SBATCH --output=%s/%%A_%%a.out\n#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=%d\n", logdir,
          o->cpus_per_run > 0 ? o->cpus_per_run : 1);
  if (o->gpus_per_run > 0) fprintf(f, "#SBATCH --gres=gpu:%d\n", o->gpus_per_run);
  const char *const name[] = {"partition", "time", "mem", "account", "qos", "constraint"};
  const char *const val[] = {o->partition, o->time, o->mem, o->account, o->qos, o->constraint};
  for (int k = 0; k < 6; k++)
    if (val[k] && val[k][0]) fprintf(f, "#SBATCH --%s=%s\n", name[k], val[k]);
  for (int k = 0; k < o->nextra; k++) fprintf(f, "#SBATCH %s\n", o->extra[k]);
  fprintf(f, "exec");
  for (int k = 0; k < nargv; k++) {
    sh_quote(argv[k], q, sizeof q);
    fprintf(f, " %s", q);
  }
  fprintf(f, " \"$SLURM_ARRAY_TASK_ID\"\n");
  free(arr);
  return ferror(f) ? -1 : 0;
}

int bcg_slurm_submit(const char *script, char *jobid, size_t len, char *err, size_t errlen) {
  char out[4096];
  char *argv[] = {"sbatch", "--parsable", (char *)script, NULL};
  int rc = capture(argv, out, sizeof out);
  chomp(out);
  if (rc != 0) return snprintf(err, errlen, "sbatch %s: %s", script, out[0] ? out : "failed"), -1;
  /* "JOBID" or "JOBID;CLUSTER", after any warnings sbatch printed */
  const char *last = strrchr(out, '\n');
  last = last ? last + 1 : out;
  size_t n = strspn(last, "0123456789");
  if (n == 0 || n >= len) return snprintf(err, errlen, "sbatch %s: no job id in its answer '%s'", script, out), -1;
  memcpy(jobid, last, n);
  jobid[n] = 0;
  return 0;
}

/* ---- task states ----------------------------------------------------------------------- */

typedef struct job_cache {
  char job[32];
  char *text; /* "TASK|STATE|REASON" lines */
} job_cache;
static job_cache cache[64];
static int ncache;

static const char *job_lines(const char *job) {
  for (int i = 0; i < ncache; i++)
    if (!strcmp(cache[i].job, job)) return cache[i].text;
  static char out[1 << 16];
  char *sq[] = {"squeue", "-h", "-r", "-t", "all", "-j", (char *)job, "-o", "%i|%T|%r", NULL};
  int rc = capture(sq, out, sizeof out);
  if (rc != 0 || !out[0]) { /* squeue has forgotten it: accounting, where there is some */
    char *sa[] = {"sacct", "-n", "-P", "-X", "-j", (char *)job, "-o", "JobID,State", NULL};
    rc = capture(sa, out, sizeof out);
    if (rc != 0) out[0] = 0;
  }
  if (ncache == 64) free(cache[--ncache].text); /* full: the newest entry makes room */
  job_cache *c = &cache[ncache++];
  snprintf(c->job, sizeof c->job, "%s", job);
  c->text = strdup(out);
  return c->text ? c->text : "";
}

int bcg_slurm_task_state(const char *task, char *state, size_t slen, char *reason, size_t rlen) {
  char job[32];
  snprintf(job, sizeof job, "%.*s", (int)strcspn(task, "_"), task);
  state[0] = reason[0] = 0;
  const char *t = job_lines(job);
  size_t tl = strlen(task);
  for (const char *l = t; l && *l;) {
    const char *e = strchr(l, '\n');
    size_t n = e ? (size_t)(e - l) : strlen(l);
    if (n > tl && !strncmp(l, task, tl) && l[tl] == '|') {
      const char *s = l + tl + 1, *bar = memchr(s, '|', n - tl - 1);
      size_t sn = bar ? (size_t)(bar - s) : n - tl - 1;
      snprintf(state, slen, "%.*s", (int)sn, s);
      state[strcspn(state, " ")] = 0; /* sacct: "CANCELLED by 0" */
      if (bar) snprintf(reason, rlen, "%.*s", (int)(n - tl - 1 - sn - 1), bar + 1);
      return 1;
    }
    l = e ? e + 1 : NULL;
  }
  return 0;
}

static int in_list(const char *s, const char *const *list) {
  for (; *list; list++)
    if (!strcmp(s, *list)) return 1;
  return 0;
}

int bcg_slurm_active(const char *s) {
  static const char *const a[] = {"PENDING",   "RUNNING",  "CONFIGURING", "COMPLETING", "SUSPENDED",
                                  "REQUEUED",  "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING",
                                  "STAGE_OUT", "STOPPED",  "RESV_DEL_HOLD", NULL};
  return in_list(s, a);
}

int bcg_slurm_failed(const char *s) {
  static const char *const f[] = {"FAILED", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", NULL};
  return in_list(s, f);
}
