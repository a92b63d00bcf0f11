#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* nftw, mkdtemp (bench/emu builds this file without the Makefile's flags) */
#endif
#include "testutil.h"

#include <CUnit/Basic.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_REPORTS 256
static struct {
  char what[96];
  double value;
} reports[MAX_REPORTS];
static int nreports;

void bcg_test_report(const char *what, double value) {
  for (int i = 0; i < nreports; i++)
    if (strcmp(reports[i].what, what) == 0) {
      if (value > reports[i].value) reports[i].value = value;
      return;
    }
  if (nreports < MAX_REPORTS) {
    snprintf(reports[nreports].what, sizeof reports[nreports].what, "%s", what);
    reports[nreports++].value = value;
  }
}

/* ---- the suite's scratch directory ---- */

static const char *suite_name = "suite";
static char scratch[512];
static pid_t scratch_owner; /* the process that made it (a forked child's exit leaves it) */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  if (remove(path) != 0) fprintf(stderr, "testutil: cannot remove %s\n", path);
  return 0;
}

static void remove_scratch(void) {
  if (!scratch[0] || getpid() != scratch_owner) return;
  if (getenv("BCG_KEEP_TMP")) {
    fprintf(stderr, "testutil: kept %s (BCG_KEEP_TMP)\n", scratch);
    return;
  }
  nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  scratch[0] = 0;
}

const char *bcg_test_tmpdir(void) {
  if (scratch[0]) return scratch;
  const char *base = getenv("BCG_TEST_TMP");
  if (!base || !*base) base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  snprintf(scratch, sizeof scratch, "%s/bcg_test_%s_XXXXXX", base, suite_name);
  if (!mkdtemp(scratch)) {
    perror(scratch);
    abort();
  }
  scratch_owner = getpid();
  static int registered;
  if (!registered++) atexit(remove_scratch);
  return scratch;
}

const char *bcg_test_tmp_path(const char *name) {
  static char paths[16][1024];
  static int k;
  char *p = paths[k++ % 16];
  snprintf(p, sizeof paths[0], "%s/%s", bcg_test_tmpdir(), name);
  return p;
}

const char *bcg_test_build_dir(void) {
  const char *b = getenv("BUILD");
  return (b && *b) ? b : "build";
}

double bcg_relerr(double a, double b, double floor) {
  double s = fmax(fmax(fabs(a), fabs(b)), floor);
  return fabs(a - b) / s;
}

double bcg_vec_relerr(const double *a, const double *b, int n) {
  double na = 0, nb = 0, nd = 0;
  for (int i = 0; i < n; i++) {
    na += a[i] * a[i];
    nb += b[i] * b[i];
    nd += (a[i] - b[i]) * (a[i] - b[i]);
  }
  double s = fmax(sqrt(fmax(na, nb)), 1e-300);
  return sqrt(nd) / s;
}

static unsigned nskipped;
static const void *last_skipped;

void bcg_test_skip(const char *why) {
  const void *t = CU_get_current_test();
  if (t && t == last_skipped) return;
  last_skipped = t;
  nskipped++;
  printf("\n  skipped: %s\n", why);
}

int bcg_test_main(const char *suite, const bcg_test *tests, int ntests) {
  suite_name = suite;
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite(suite, NULL, NULL);
  if (!s) return 2;
  for (int i = 0; i < ntests; i++)
    if (!CU_add_test(s, tests[i].name, tests[i].fn)) return 2;
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned fails = CU_get_number_of_failures();
  unsigned tfail = CU_get_number_of_tests_failed();
  unsigned run = CU_get_number_of_tests_run();
  for (int i = 0; i < nreports; i++) printf("  [measured] %s: %.3g\n", reports[i].what, reports[i].value);
  printf("BCGSUITE %s tests=%u failed=%u asserts_failed=%u skipped=%u\n", suite, run, tfail, fails, nskipped);
  CU_cleanup_registry();
  return (fails || tfail) ? 1 : 0;
}

int bcg_test_capture(const char *cmd, char *out, size_t len) {
  if (len) out[0] = 0;
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t n = len ? fread(out, 1, len - 1, p) : 0;
  if (len) out[n] = 0;
  char sink[4096];
  while (fread(sink, 1, sizeof sink, p) > 0) {
  }
  int st = pclose(p);
  if (st == -1) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
