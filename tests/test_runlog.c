/* test_runlog.c - run directories, the HDF5 log (including a writer killed
 * mid-run), atomic checkpoints and their failure on a full disk. */
#include <hdf5.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bcg/runlog.h"
#include "bcg/version.h"
#include "testutil.h"

static char tmpdir[256];
static char err[4096];

static void setup(void) {
  if (!tmpdir[0]) snprintf(tmpdir, sizeof tmpdir, "%s", bcg_test_tmpdir()); /* removed at exit */
}

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void test_rundir(void) {
  setup();
  char out[512], d1[PATH_MAX], d2[PATH_MAX], p[PATH_MAX + 32];
  snprintf(out, sizeof out, "%s/runs/deep", tmpdir);
  CU_ASSERT_EQUAL_FATAL(bcg_rundir_create(out, "kappa300", d1, sizeof d1, err, sizeof err), 0);
  CU_ASSERT_EQUAL_FATAL(bcg_rundir_create(out, "kappa300", d2, sizeof d2, err, sizeof err), 0);
  CU_ASSERT(is_dir(d1) && is_dir(d2));
  CU_ASSERT_STRING_NOT_EQUAL(d1, d2);
  snprintf(p, sizeof p, "%s/checkpoints", d1);
  CU_ASSERT(is_dir(p));
  /* <out>/<name>/<YYYYmmddTHHMMSSZ> */
  size_t n = strlen(out) + strlen("/kappa300/");
  CU_ASSERT_EQUAL(strncmp(d1, out, strlen(out)), 0);
  CU_ASSERT_EQUAL(strlen(d1), n + 16);
  CU_ASSERT_EQUAL(d1[n + 8], 'T');
  CU_ASSERT_EQUAL(d1[n + 15], 'Z');
  CU_ASSERT_EQUAL(bcg_rundir_create(out, "a/b", d1, sizeof d1, err, sizeof err), -1);
  CU_ASSERT_STRING_EQUAL(err, "run name 'a/b' must be one path component (no '/')");
  CU_ASSERT_EQUAL(bcg_rundir_create("/proc/nope", "x", d1, sizeof d1, err, sizeof err), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "/proc/nope: cannot create directory: "));
}

static int read_str_attr(hid_t loc, const char *name, char *buf, size_t len) {
  return bcg_h5_read_str(loc, name, buf, len, err, sizeof err);
}

static long read_curve(hid_t f, const char *name, double *x, size_t cap) {
  return bcg_h5_read_doubles(f, name, x, cap, err, sizeof err);
}

static int64_t read_i64_attr(hid_t loc, const char *name) {
  int64_t v = -1;
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  if (a < 0) return -1;
  H5Aread(a, H5T_NATIVE_INT64, &v);
  H5Aclose(a);
  return v;
}

static long h5_length_file(const char *path, const char *name) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return -2;
  long n = bcg_h5_length(f, name);
  H5Fclose(f);
  return n;
}

static void test_log(void) {
  setup();
  char path[512];
  snprintf(path, sizeof path, "%s/log.h5", tmpdir);
  bcg_runlog_meta meta = {"myrun", "configs/x.ini", "cpu", 1234};
  bcg_runlog *log = bcg_runlog_open(path, &meta, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(log);
  CU_ASSERT_EQUAL(bcg_runlog_set_attr(log, "note", "hello", err, sizeof err), 0);
  for (int i = 0; i < 2500; i++) {
    CU_ASSERT_EQUAL(bcg_runlog_append(log, "return", i * 0.5), 0);
    CU_ASSERT_EQUAL(bcg_runlog_append(log, "loss/actor", -i), 0);
    if (i >= 10) CU_ASSERT_EQUAL(bcg_runlog_append(log, "late", i), 0);
    CU_ASSERT_EQUAL(bcg_runlog_flush_iteration(log, err, sizeof err), 0);
  }
  CU_ASSERT_EQUAL(bcg_runlog_append(log, "", 1), -1);
  CU_ASSERT_EQUAL(bcg_runlog_append(log, "/abs", 1), -1);
  CU_ASSERT_EQUAL(bcg_runlog_append(log, "a//b", 1), -1);
  CU_ASSERT_EQUAL(bcg_runlog_append(log, "sp ace", 1), -1);
  CU_ASSERT_EQUAL(bcg_runlog_iterations(log), 2500);
  CU_ASSERT_EQUAL(bcg_runlog_append(log, "return", 99), 0); /* flushed by close */
  CU_ASSERT_EQUAL(bcg_runlog_close(log, err, sizeof err), 0);

  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  CU_ASSERT_FATAL(f >= 0);
  char s[256];
  CU_ASSERT_EQUAL(read_str_attr(f, "version", s, sizeof s), 0);
  CU_ASSERT_STRING_EQUAL(s, BCG_VERSION);
  read_str_attr(f, "precision", s, sizeof s);
  CU_ASSERT_STRING_EQUAL(s, BCG_REAL_NAME);
  read_str_attr(f, "backend", s, sizeof s);
  CU_ASSERT_STRING_EQUAL(s, "cpu");
  read_str_attr(f, "name", s, sizeof s);
  CU_ASSERT_STRING_EQUAL(s, "myrun");
  read_str_attr(f, "note", s, sizeof s);
  CU_ASSERT_STRING_EQUAL(s, "hello");
  read_str_attr(f, "host", s, sizeof s);
  CU_ASSERT(strlen(s) > 0);
  read_str_attr(f, "start_time", s, sizeof s);
  CU_ASSERT_EQUAL(strlen(s), 20); /* 2024-01-01T00:00:00Z */
  CU_ASSERT_EQUAL(s[10], 'T');
  CU_ASSERT_EQUAL(read_i64_attr(f, "seed"), 1234);
  CU_ASSERT_EQUAL(read_i64_attr(f, "iterations"), 2501);
  static double x[4000];
  CU_ASSERT_EQUAL(read_curve(f, "return", x, 4000), 2501);
  CU_ASSERT_DOUBLE_EQUAL(x[2499], 2499 * 0.5, 0);
  CU_ASSERT_DOUBLE_EQUAL(x[2500], 99, 0);
  CU_ASSERT_EQUAL(read_curve(f, "loss/actor", x, 4000), 2500);
  CU_ASSERT_DOUBLE_EQUAL(x[7], -7, 0);
  CU_ASSERT_EQUAL(read_curve(f, "late", x, 4000), 2490);
  CU_ASSERT_DOUBLE_EQUAL(x[0], 10, 0);
  hid_t d = H5Dopen2(f, "late", H5P_DEFAULT);
  CU_ASSERT_EQUAL(read_i64_attr(d, "first_iteration"), 10);
  H5Dclose(d);
  CU_ASSERT_EQUAL(bcg_h5_length(f, "return"), 2501);
  CU_ASSERT_EQUAL(bcg_h5_length(f, "nope"), -1);
  H5Fclose(f);

  CU_ASSERT_PTR_NULL(bcg_runlog_open("/nonexistent/dir/log.h5", &meta, err, sizeof err));
  CU_ASSERT_EQUAL(strncmp(err, "/nonexistent/dir/log.h5: cannot create log: ", 44), 0);
}

/* Kill the writer after K complete iterations: all K must be readable. */
static void killed_writer(int K, int seq) {
  char path[512];
  snprintf(path, sizeof path, "%s/killed%d.h5", tmpdir, seq);
  int fd[2];
  CU_ASSERT_FATAL(pipe(fd) == 0);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    close(fd[0]);
    bcg_runlog_meta meta = {"killed", "", "cpu", 1};
    bcg_runlog *log = bcg_runlog_open(path, &meta, err, sizeof err);
    if (!log) _exit(3);
    for (int i = 0;; i++) {
      bcg_runlog_append(log, "a", i);
      bcg_runlog_append(log, "b", 2.0 * i);
      if (i >= 3) bcg_runlog_append(log, "grp/c", -i);
      if (bcg_runlog_flush_iteration(log, err, sizeof err)) _exit(4);
      char c = 1;
      if (write(fd[1], &c, 1) != 1) _exit(5);
    }
  }
  close(fd[1]);
  int got = 0;
  char c;
  while (got < K && read(fd[0], &c, 1) == 1) got++;
  kill(pid, SIGKILL);
  int status;
  waitpid(pid, &status, 0);
  close(fd[0]);
  CU_ASSERT_EQUAL(got, K);
  CU_ASSERT(WIFSIGNALED(status));
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  CU_ASSERT_FATAL(f >= 0);
  int64_t it = read_i64_attr(f, "iterations");
  CU_ASSERT(it >= K);
  static double x[200000];
  long na = read_curve(f, "a", x, 200000);
  CU_ASSERT(na >= K);
  int ok = 1;
  for (long i = 0; i < K && i < na; i++) ok &= x[i] == (double)i;
  long nb = read_curve(f, "b", x, 200000);
  CU_ASSERT(nb >= K);
  for (long i = 0; i < K && i < nb; i++) ok &= x[i] == 2.0 * i;
  if (K > 3) {
    long nc = read_curve(f, "grp/c", x, 200000);
    CU_ASSERT(nc >= K - 3);
    for (long i = 0; i < K - 3 && i < nc; i++) ok &= x[i] == -(double)(i + 3);
  }
  CU_ASSERT(ok);
  bcg_test_report("iterations beyond K found after the kill (max)", (double)(it - K));
  H5Fclose(f);
  unlink(path);
}

static void test_killed_writer(void) {
  setup();
  int ks[] = {1, 2, 7, 50, 333, 1023, 1024, 1025, 2100};
  for (int i = 0; i < (int)(sizeof ks / sizeof ks[0]); i++) killed_writer(ks[i], i);
}

static void test_checkpoint(void) {
  setup();
  char path[512], tmp[600];
  snprintf(path, sizeof path, "%s/ck.h5", tmpdir);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  bcg_checkpoint *ck = bcg_checkpoint_begin(path, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ck);
  CU_ASSERT_EQUAL(access(tmp, F_OK), 0);
  int64_t g = bcg_h5_group(bcg_checkpoint_root(ck), "learner/actor", 1, err, sizeof err);
  CU_ASSERT_FATAL(g >= 0);
  bcg_real w[5] = {1, 2, 3, 4.5, -1e-3};
  int64_t it[2] = {42, -7};
  CU_ASSERT_EQUAL(bcg_h5_write_reals(g, "theta", w, 5, err, sizeof err), 0);
  CU_ASSERT_EQUAL(bcg_h5_write_reals(g, "empty", w, 0, err, sizeof err), 0);
  CU_ASSERT_EQUAL(bcg_h5_write_i64(g, "steps", it, 2, err, sizeof err), 0);
  CU_ASSERT_EQUAL(bcg_h5_write_str(g, "kind", "shac", err, sizeof err), 0);
  CU_ASSERT_EQUAL(bcg_h5_write_str(g, "kind", "shac2", err, sizeof err), 0); /* replace */
  w[0] = 10;
  CU_ASSERT_EQUAL(bcg_h5_write_reals(g, "theta", w, 5, err, sizeof err), 0); /* replace */
  bcg_h5_group_close(g);
  CU_ASSERT_EQUAL(bcg_checkpoint_commit(ck, err, sizeof err), 0);
  CU_ASSERT_EQUAL(access(tmp, F_OK), -1);

  int64_t f = bcg_checkpoint_open(path, err, sizeof err);
  CU_ASSERT_FATAL(f >= 0);
  g = bcg_h5_group(f, "learner/actor", 0, err, sizeof err);
  CU_ASSERT_FATAL(g >= 0);
  bcg_real r[8];
  CU_ASSERT_EQUAL(bcg_h5_read_reals(g, "theta", r, 8, err, sizeof err), 5);
  CU_ASSERT(r[0] == 10 && r[3] == (bcg_real)4.5 && r[4] == (bcg_real)-1e-3);
  double rd[8];
  CU_ASSERT_EQUAL(bcg_h5_read_doubles(g, "theta", rd, 8, err, sizeof err), 5); /* converted */
  CU_ASSERT_DOUBLE_EQUAL(rd[3], 4.5, 0);
  CU_ASSERT_EQUAL(bcg_h5_read_reals(g, "empty", r, 8, err, sizeof err), 0);
  int64_t ri[2];
  CU_ASSERT_EQUAL(bcg_h5_read_i64(g, "steps", ri, 2, err, sizeof err), 2);
  CU_ASSERT(ri[0] == 42 && ri[1] == -7);
  char s[64];
  CU_ASSERT_EQUAL(bcg_h5_read_str(g, "kind", s, sizeof s, err, sizeof err), 0);
  CU_ASSERT_STRING_EQUAL(s, "shac2");
  CU_ASSERT_EQUAL(bcg_h5_read_str(g, "kind", s, 3, err, sizeof err), -1);
  CU_ASSERT_EQUAL(bcg_h5_read_reals(g, "theta", r, 4, err, sizeof err), -1);
  char want[700];
  snprintf(want, sizeof want, "%s: theta: has 5 elements, room for 4", path);
  CU_ASSERT_STRING_EQUAL(err, want);
  CU_ASSERT_EQUAL(bcg_h5_read_reals(g, "missing", r, 4, err, sizeof err), -1);
  snprintf(want, sizeof want, "%s: missing: opening dataset failed: ", path);
  CU_ASSERT_EQUAL(strncmp(err, want, strlen(want)), 0);
  CU_ASSERT_EQUAL(bcg_h5_group(f, "nope", 0, err, sizeof err), -1);
  snprintf(want, sizeof want, "%s: nope: opening group failed: ", path);
  CU_ASSERT_EQUAL(strncmp(err, want, strlen(want)), 0);
  CU_ASSERT_EQUAL(bcg_h5_read_str(f, "precision", s, sizeof s, err, sizeof err), 0);
  CU_ASSERT_STRING_EQUAL(s, BCG_REAL_NAME);
  bcg_h5_group_close(g);
  bcg_checkpoint_close(f);

  /* abort leaves nothing behind and the committed file intact */
  ck = bcg_checkpoint_begin(path, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ck);
  bcg_checkpoint_abort(ck);
  CU_ASSERT_EQUAL(access(tmp, F_OK), -1);
  CU_ASSERT_EQUAL(access(path, F_OK), 0);

  CU_ASSERT_EQUAL(bcg_checkpoint_open("/nonexistent/ck.h5", err, sizeof err), -1);
  CU_ASSERT_EQUAL(strncmp(err, "checkpoint /nonexistent/ck.h5: cannot open: ", 44), 0);
  CU_ASSERT_PTR_NULL(bcg_checkpoint_begin("/nonexistent/ck.h5", err, sizeof err));
  CU_ASSERT_STRING_EQUAL(err, "checkpoint /nonexistent/ck.h5: cannot create /nonexistent/ck.h5.tmp: No such file or directory");
}

/* A full disk (simulated by RLIMIT_FSIZE): commit fails with a message naming
 * the file, the tmp file is gone and the previous checkpoint is intact. */
static void test_checkpoint_full_disk(void) {
  setup();
  char path[512], tmp[600];
  snprintf(path, sizeof path, "%s/full.h5", tmpdir);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  bcg_checkpoint *ck = bcg_checkpoint_begin(path, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ck);
  bcg_real v[3] = {1, 2, 3};
  bcg_h5_write_reals(bcg_checkpoint_root(ck), "v", v, 3, err, sizeof err);
  CU_ASSERT_EQUAL_FATAL(bcg_checkpoint_commit(ck, err, sizeof err), 0);

  static bcg_real big[200000];
  for (int i = 0; i < 200000; i++) big[i] = i;
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  void (*oldsig)(int) = signal(SIGXFSZ, SIG_IGN);
  lim = old;
  lim.rlim_cur = 64 * 1024;
  CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_FSIZE, &lim), 0);
  ck = bcg_checkpoint_begin(path, err, sizeof err);
  int rc = -1;
  if (ck) {
    bcg_h5_write_reals(bcg_checkpoint_root(ck), "v", big, 200000, err, sizeof err);
    rc = bcg_checkpoint_commit(ck, err, sizeof err);
  }
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, oldsig);
  CU_ASSERT_EQUAL(rc, -1);
  char want[1400];
  snprintf(want, sizeof want, "checkpoint %s: writing %s failed: File too large; the previous checkpoint is unchanged", path, tmp);
  if (strcmp(err, want)) printf("\n  got:  %s\n  want: %s\n", err, want);
  CU_ASSERT_STRING_EQUAL(err, want);
  CU_ASSERT_EQUAL(access(tmp, F_OK), -1);
  int64_t f = bcg_checkpoint_open(path, err, sizeof err);
  CU_ASSERT_FATAL(f >= 0);
  bcg_real r[4];
  CU_ASSERT_EQUAL(bcg_h5_read_reals(f, "v", r, 4, err, sizeof err), 3);
  CU_ASSERT(r[0] == 1 && r[2] == 3);
  bcg_checkpoint_close(f);
}

/* A full disk (RLIMIT_FSIZE) while log.h5 is written: the error names the
 * file and what it keeps, the process exits normally (HDF5's exit handler
 * used to crash on the file it could not flush), and log.h5 still holds
 * every iteration written before. Run in a child: the limit and the exit
 * handler are the child's. */
static void test_log_full_disk(void) {
  setup();
  char path[512];
  snprintf(path, sizeof path, "%s/fulllog.h5", tmpdir);
  int fd[2];
  CU_ASSERT_FATAL(pipe(fd) == 0);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    close(fd[0]);
    bcg_runlog_meta meta = {"full", "", "cpu", 1};
    char e[2048] = "";
    bcg_runlog *log = bcg_runlog_open(path, &meta, e, sizeof e);
    if (!log) _exit(3);
    for (int i = 0; i < 5; i++) {
      bcg_runlog_append(log, "a", i);
      bcg_runlog_append(log, "b", -i);
      if (bcg_runlog_flush_iteration(log, e, sizeof e)) _exit(4);
    }
    struct stat st;
    stat(path, &st);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim;
    getrlimit(RLIMIT_FSIZE, &lim);
    lim.rlim_cur = (rlim_t)st.st_size / 2;
    if (setrlimit(RLIMIT_FSIZE, &lim)) _exit(5);
    int rc = 0;
    for (int i = 5; i < 2000 && rc == 0; i++) { /* a new curve makes the file grow */
      bcg_runlog_append(log, "a", i);
      bcg_runlog_append(log, "b", -i);
      bcg_runlog_append(log, "c", i);
      rc = bcg_runlog_flush_iteration(log, e, sizeof e);
    }
    if (write(fd[1], e, strlen(e) + 1) < 0) _exit(6);
    char e2[2048];
    bcg_runlog_close(log, e2, sizeof e2);
    exit(rc ? 0 : 7); /* through the atexit handlers, HDF5's among them */
  }
  close(fd[1]);
  char got[2048] = "";
  ssize_t n = read(fd[0], got, sizeof got - 1);
  got[n > 0 ? n : 0] = 0;
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status)) printf("\n  the writer was killed by signal %d\n", WTERMSIG(status));
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char want[1400];
  snprintf(want, sizeof want, "%s: writing %s.tmp failed: File too large; it keeps its first 5 iterations", path, path);
  if (strcmp(got, want)) printf("\n  got:  %s\n  want: %s\n", got, want);
  CU_ASSERT_STRING_EQUAL(got, want);
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  CU_ASSERT_EQUAL(access(tmp, F_OK), -1);
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  CU_ASSERT_FATAL(f >= 0);
  CU_ASSERT_EQUAL(read_i64_attr(f, "iterations"), 5);
  double x[16];
  CU_ASSERT_EQUAL(read_curve(f, "a", x, 16), 5);
  CU_ASSERT(x[4] == 4);
  H5Fclose(f);
}

/* The file on disk is complete after every flush and not locked: a reader
 * opens it while the writer holds the log open. */
static void test_log_live_reader(void) {
  setup();
  char path[512];
  snprintf(path, sizeof path, "%s/livelog.h5", tmpdir);
  bcg_runlog_meta meta = {"live", "", "cpu", 1};
  bcg_runlog *log = bcg_runlog_open(path, &meta, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(log);
  for (int i = 0; i < 3; i++) {
    bcg_runlog_append(log, "a", i);
    CU_ASSERT_EQUAL(bcg_runlog_flush_iteration(log, err, sizeof err), 0);
    pid_t pid = fork(); /* another process, as h5py would be */
    if (pid == 0) {
      hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
      if (f < 0) _exit(2);
      double x[8];
      long n = bcg_h5_read_doubles(f, "a", x, 8, err, sizeof err);
      H5Fclose(f);
      _exit(n == i + 1 && x[i] == i ? 0 : 3);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  CU_ASSERT_EQUAL(bcg_runlog_close(log, err, sizeof err), 0);
  /* a held log leaves the file alone until synced */
  log = bcg_runlog_open_held(path, &meta, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(log);
  bcg_runlog_append(log, "z", 1);
  CU_ASSERT_EQUAL(bcg_runlog_flush_iteration(log, err, sizeof err), 0);
  CU_ASSERT_EQUAL(h5_length_file(path, "z"), -1);
  CU_ASSERT_EQUAL(bcg_runlog_sync(log, err, sizeof err), 0);
  CU_ASSERT_EQUAL(h5_length_file(path, "z"), 1);
  CU_ASSERT_EQUAL(h5_length_file(path, "a"), -1);
  CU_ASSERT_EQUAL(bcg_runlog_close(log, err, sizeof err), 0);
}

/* flip one bit of the stored data of dataset name (contiguous: its file offset) */
static int flip_data_bit(const char *path, const char *name, long byte) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return -1;
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  haddr_t off = d >= 0 ? H5Dget_offset(d) : HADDR_UNDEF;
  if (d >= 0) H5Dclose(d);
  H5Fclose(f);
  if (off == HADDR_UNDEF) return -1;
  FILE *fp = fopen(path, "r+b");
  if (!fp) return -1;
  fseek(fp, (long)off + byte, SEEK_SET);
  int c = fgetc(fp);
  fseek(fp, (long)off + byte, SEEK_SET);
  fputc(c ^ 0x10, fp);
  fclose(fp);
  return 0;
}

/* Checkpoints carry format_version and a CRC-32 of their datasets: a flipped
 * bit, a newer format are refused with the reason; a format-1 file (no
 * format_version) still opens. */
static void test_checkpoint_integrity(void) {
  setup();
  char path[512], want[1400];
  snprintf(path, sizeof path, "%s/crc.h5", tmpdir);
  bcg_checkpoint *ck = bcg_checkpoint_begin(path, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ck);
  static bcg_real w[1000];
  for (int i = 0; i < 1000; i++) w[i] = (bcg_real)(0.001 * i);
  int64_t g = bcg_h5_group(bcg_checkpoint_root(ck), "learner/actor", 1, err, sizeof err);
  CU_ASSERT_EQUAL(bcg_h5_write_reals(g, "params", w, 1000, err, sizeof err), 0);
  int64_t st[2] = {7, 8};
  CU_ASSERT_EQUAL(bcg_h5_write_i64(g, "step", st, 2, err, sizeof err), 0);
  bcg_h5_group_close(g);
  CU_ASSERT_EQUAL_FATAL(bcg_checkpoint_commit(ck, err, sizeof err), 0);
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  CU_ASSERT_EQUAL(read_i64_attr(f, "format_version"), BCG_CHECKPOINT_FORMAT);
  CU_ASSERT(H5Aexists(f, "checksum_crc32") > 0);
  H5Fclose(f);
  CU_ASSERT_EQUAL(bcg_checkpoint_verify(path, err, sizeof err), 0);
  /* one bit of one weight */
  CU_ASSERT_EQUAL_FATAL(flip_data_bit(path, "learner/actor/params", 8 * 500 + 3), 0);
  CU_ASSERT_EQUAL(bcg_checkpoint_open(path, err, sizeof err), -1);
  snprintf(want, sizeof want, "checkpoint %s: damaged: the CRC-32 of its 2 datasets is ", path);
  if (strncmp(err, want, strlen(want))) printf("\n  got:  %s\n  want: %s\n", err, want);
  CU_ASSERT_EQUAL(strncmp(err, want, strlen(want)), 0);
  CU_ASSERT_EQUAL(bcg_checkpoint_verify(path, err, sizeof err), -1);
  /* a newer format */
  hsize_t one = 1;
  (void)one;
  f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, "format_version", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
  int64_t v = 99;
  H5Awrite(a, H5T_NATIVE_INT64, &v);
  H5Aclose(a), H5Sclose(sp), H5Fclose(f);
  CU_ASSERT_EQUAL(bcg_checkpoint_open(path, err, sizeof err), -1);
  snprintf(want, sizeof want, "checkpoint %s: format 99, this bcg reads formats 1 to %d", path, BCG_CHECKPOINT_FORMAT);
  CU_ASSERT_EQUAL(strncmp(err, want, strlen(want)), 0);
  /* format 1: no attributes, opens unchecked */
  f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  H5Fclose(f);
  int64_t h = bcg_checkpoint_open(path, err, sizeof err);
  CU_ASSERT(h >= 0);
  bcg_checkpoint_close(h);
}

/* A checkpoint file with root attributes format_version 2 (the checksum's
 * value does not matter here) and one dataset "x" of n values of type t,
 * declared only (no data: HDF5 stores nothing for it); or named name. */
static void write_declared_named(const char *path, const char *name, hid_t t, hsize_t n) {
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t sp = H5Screate(H5S_SCALAR);
  const char *names[2] = {"format_version", "checksum_crc32"};
  int64_t v[2] = {2, 0};
  for (int i = 0; i < 2; i++) {
    hid_t a = H5Acreate2(f, names[i], H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &v[i]);
    H5Aclose(a);
  }
  H5Sclose(sp);
  sp = H5Screate_simple(1, &n, NULL);
  hid_t d = H5Dcreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dclose(d), H5Sclose(sp), H5Fclose(f);
}
static void write_declared(const char *path, hid_t t, hsize_t n) { write_declared_named(path, "x", t, n); }

/* Sizes a damaged (or forged) checkpoint declares are checked before they
 * are allocated (found by tests/fuzz/fuzz_checkpoint): the checksum read a
 * dataset of 2^34 doubles declared without data into one malloc (128 GiB;
 * under ASan an abort), and the array readers converted values of any
 * size (a 1 GiB float read back as 0). */
static void test_checkpoint_declared_sizes(void) {
  setup();
  char path[512], want[1400];
  snprintf(path, sizeof path, "%s/declared.h5", tmpdir);
  write_declared(path, H5T_IEEE_F64LE, (hsize_t)1 << 34);
  CU_ASSERT_EQUAL(bcg_checkpoint_open(path, err, sizeof err), -1);
  snprintf(want, sizeof want, "checkpoint %s: damaged: dataset 'x' declares 17179869184 values of 8 bytes (more than "
           "1024 MiB)", path);
  CU_ASSERT_STRING_EQUAL(err, want);
  CU_ASSERT_EQUAL(bcg_checkpoint_seal(path, err, sizeof err), -1);
  CU_ASSERT_STRING_EQUAL(err, want);
  /* within the limit, but not stored */
  write_declared(path, H5T_IEEE_F64LE, 1000);
  CU_ASSERT_EQUAL(bcg_checkpoint_open(path, err, sizeof err), -1);
  snprintf(want, sizeof want, "checkpoint %s: damaged: dataset 'x' declares 8000 bytes but the file stores 0", path);
  CU_ASSERT_STRING_EQUAL(err, want);
  /* a format-1 file (no checksum) with one float of 1 GiB */
  hid_t big = H5Tcopy(H5T_IEEE_F64LE);
  CU_ASSERT_FATAL(H5Tset_size(big, (size_t)1 << 30) >= 0);
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t one = 1;
  hid_t sp = H5Screate_simple(1, &one, NULL);
  hid_t d = H5Dcreate2(f, "x", big, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dclose(d), H5Sclose(sp), H5Tclose(big), H5Fclose(f);
  int64_t h = bcg_checkpoint_open(path, err, sizeof err);
  CU_ASSERT_FATAL(h >= 0);
  double x[4];
  CU_ASSERT_EQUAL(bcg_h5_read_doubles(h, "x", x, 4, err, sizeof err), -1);
  snprintf(want, sizeof want, "%s: x: not an array of numbers (its values have 1073741824 bytes)", path);
  CU_ASSERT_STRING_EQUAL(err, want);
  bcg_checkpoint_close(h);
  unlink(path);
}

/* A name from the file quoted in a message keeps it one line (found by
 * tests/fuzz/fuzz_checkpoint: a dataset name with a newline split it). */
static void test_checkpoint_message_one_line(void) {
  setup();
  char path[512], want[1400];
  snprintf(path, sizeof path, "%s/names.h5", tmpdir);
  write_declared_named(path, "bad\nname\x1b", H5T_IEEE_F64LE, 1000);
  CU_ASSERT_EQUAL(bcg_checkpoint_open(path, err, sizeof err), -1);
  snprintf(want, sizeof want, "checkpoint %s: damaged: dataset 'bad?name?' declares 8000 bytes but the file stores 0",
           path);
  CU_ASSERT_STRING_EQUAL(err, want);
  unlink(path);
}

/* Attributes read as one value must hold one (found by
 * tests/fuzz/fuzz_checkpoint: a format_version of 2 values was read into one
 * int64 on the stack, 16 bytes written over 8; a string attribute of 2
 * values likewise overran its buffer). */
static void test_checkpoint_attributes_one_value(void) {
  setup();
  char path[512], want[1400];
  snprintf(path, sizeof path, "%s/attrs.h5", tmpdir);
  const char *names[2] = {"format_version", "checksum_crc32"};
  for (int bad = 0; bad < 2; bad++) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t two = 2;
    int64_t v[2] = {2, 2};
    for (int i = 0; i < 2; i++) {
      hid_t sp = i == bad ? H5Screate_simple(1, &two, NULL) : H5Screate(H5S_SCALAR);
      hid_t a = H5Acreate2(f, names[i], H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
      H5Awrite(a, H5T_NATIVE_INT64, v);
      H5Aclose(a), H5Sclose(sp);
    }
    H5Fclose(f);
    CU_ASSERT_EQUAL(bcg_checkpoint_open(path, err, sizeof err), -1);
    if (bad == 0)
      snprintf(want, sizeof want, "checkpoint %s: damaged: its format_version cannot be read", path);
    else
      snprintf(want, sizeof want, "checkpoint %s: damaged: no readable checksum_crc32", path);
    CU_ASSERT_STRING_EQUAL(err, want);
  }
  /* a string attribute of two values */
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, 4);
  hsize_t two = 2;
  hid_t sp = H5Screate_simple(1, &two, NULL);
  hid_t a = H5Acreate2(f, "learner_plugin", t, sp, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, t, "shacppo!");
  H5Aclose(a), H5Sclose(sp), H5Tclose(t);
  char s[8];
  CU_ASSERT_EQUAL(bcg_h5_read_str(f, "learner_plugin", s, sizeof s, err, sizeof err), -1);
  snprintf(want, sizeof want, "%s: learner_plugin: not one string (of at most 1 MiB)", path);
  CU_ASSERT_STRING_EQUAL(err, want);
  H5Fclose(f);
  unlink(path);
}

BCG_TESTS({"run directory", test_rundir}, {"log", test_log}, {"writer killed midway", test_killed_writer},
          {"checkpoint", test_checkpoint}, {"checkpoint on a full disk", test_checkpoint_full_disk},
          {"log on a full disk", test_log_full_disk}, {"checkpoint format and checksum", test_checkpoint_integrity}, {"log read while written", test_log_live_reader},
          {"checkpoint declared sizes", test_checkpoint_declared_sizes},
          {"checkpoint message one line", test_checkpoint_message_one_line},
          {"checkpoint attributes of one value", test_checkpoint_attributes_one_value});
BCG_RUN("runlog")
