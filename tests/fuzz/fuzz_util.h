/* tests/fuzz/fuzz_util.h - shared helpers of the libFuzzer harnesses.
 *
 * Every harness runs from the repository root (make fuzz does), finds the
 * repository's models there, and has its own temporary directory under
 * $TMPDIR (removed at a normal exit; tests/fuzz/run.sh points TMPDIR into
 * the build and empties it, since a crash leaves it): the fuzzed bytes are
 * written to a file in it and the reader under test opens that file, as bcg
 * would. */
#ifndef BCG_FUZZ_UTIL_H
#define BCG_FUZZ_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fz_root[PATH_MAX]; /* the repository root (absolute) */
static char fz_dir[PATH_MAX];  /* this process's temporary directory (absolute) */

static int fz_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  remove(p);
  return 0;
}
static inline void fz_cleanup(void) {
  if (fz_dir[0]) nftw(fz_dir, fz_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* A failed check: the message goes where the sanitizers report (stderr may
 * be closed: run.sh passes -close_fd_mask=3), then abort() (a crash). */
void __sanitizer_report_error_summary(const char *error_summary);
static inline void fz_die2(const char *what, const char *detail) {
  char msg[6000];
  snprintf(msg, sizeof msg, "fuzz harness: %.1000s%s%.4500s", what, detail ? ": " : "", detail ? detail : "");
  __sanitizer_report_error_summary(msg);
  abort();
}
static inline void fz_die(const char *what) { fz_die2(what, NULL); }

/* Find the repository root (the working directory: make fuzz runs there)
 * and create the temporary directory. */
static inline void fz_init(void) {
  if (fz_dir[0]) return;
  if (!getcwd(fz_root, sizeof fz_root)) fz_die("getcwd failed");
  char probe[PATH_MAX + 32];
  snprintf(probe, sizeof probe, "%s/models/biped2d.xml", fz_root);
  if (access(probe, R_OK) != 0) fz_die("run from the repository root (models/biped2d.xml not found)");
  const char *t = getenv("TMPDIR");
  /* not bcg*: tests/run.sh counts new bcg* entries of TMPDIR as a suite's leak */
  snprintf(fz_dir, sizeof fz_dir, "%s/fuzz_bcg_XXXXXX", t && *t ? t : "/tmp");
  if (!mkdtemp(fz_dir)) fz_die("mkdtemp failed");
  atexit(fz_cleanup);
}

/* Work inside the temporary directory (relative paths in the input reach
 * only it), and back: libFuzzer reads its own paths relative to where it
 * started. */
static inline void fz_enter(void) {
  if (chdir(fz_dir) != 0) fz_die("chdir to the temporary directory failed");
}
static inline void fz_leave(void) {
  if (chdir(fz_root) != 0) fz_die("chdir back to the repository root failed");
}

/* path of a repository file, e.g. fz_repo("models/biped2d.xml") */
static inline const char *fz_repo(const char *rel, char *buf, size_t len) {
  snprintf(buf, len, "%s/%s", fz_root, rel);
  return buf;
}

/* Write bytes to NAME inside the temporary directory; its path into buf. */
static inline const char *fz_write(const char *name, const uint8_t *data, size_t size, char *buf, size_t len) {
  snprintf(buf, len, "%s/%s", fz_dir, name);
  int fd = open(buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fz_die("cannot create the input file");
  while (size > 0) {
    ssize_t w = write(fd, data, size);
    if (w < 0) {
      if (errno == EINTR) continue;
      fz_die("cannot write the input file");
    }
    data += w, size -= (size_t)w;
  }
  close(fd);
  return buf;
}

/* BCG_FUZZ_VERBOSE=1: the harness prints what bcg answered (to read a seed's
 * or an artifact's outcome: build-fuzz/fuzz/fuzz_X FILE) */
static inline void fz_say(const char *what, const char *msg) {
  static int v = -1;
  if (v < 0) v = getenv("BCG_FUZZ_VERBOSE") && getenv("BCG_FUZZ_VERBOSE")[0] == '1';
  if (v) fprintf(stderr, "fuzz: %s: %s\n", what, msg);
}

/* an error message must be one non-empty line */
static inline void fz_check_msg(const char *err) {
  if (!err[0]) fz_die("failed without a message");
  if (strchr(err, '\n')) fz_die2("message spans lines", err);
}

#endif
