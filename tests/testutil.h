/* tests/testutil.h - shared helpers of the CUnit suites. */
#ifndef BCG_TESTUTIL_H
#define BCG_TESTUTIL_H

#include <CUnit/CUnit.h>
#include <stddef.h>

typedef struct bcg_test {
  const char *name;
  void (*fn)(void);
} bcg_test;

/* Register one suite with the given tests, run it in CUnit's basic mode and
 * return the process exit status (0 when every assertion passed). */
int bcg_test_main(const char *suite, const bcg_test *tests, int ntests);

/* Path of the build tree (the BUILD env var the runner sets, else "build"). */
const char *bcg_test_build_dir(void);

/* This suite's scratch directory, made on first use as
 * <base>/bcg_test_<suite>_XXXXXX, where base is $BCG_TEST_TMP (tests/run.sh
 * points it at a directory of its own for the run), else $TMPDIR, else /tmp.
 * It is removed with everything in it when the suite's process exits
 * (atexit, so also after failed assertions; not by forked children), unless
 * BCG_KEEP_TMP is set. Aborts when it cannot be made. */
const char *bcg_test_tmpdir(void);

/* <bcg_test_tmpdir()>/<name>, in one of 16 rotating static buffers. */
const char *bcg_test_tmp_path(const char *name);

/* Relative error |a-b| / max(|a|,|b|,floor). */
double bcg_relerr(double a, double b, double floor);

/* Worst relative error of two vectors, with floor relative to the larger norm. */
double bcg_vec_relerr(const double *a, const double *b, int n);

/* Record a measured worst error so the suite prints it at the end. */
void bcg_test_report(const char *what, double value);

/* Mark the running test as skipped (what it needs is missing here, e.g. a
 * GPU): prints "skipped: WHY" once per test, and the suite counts it as
 * skipped, not passed (BCGSUITE ... skipped=N; tests/run.sh's last line). The
 * test should return without asserting anything. */
void bcg_test_skip(const char *why);

/* Run the shell command CMD and put the first LEN - 1 bytes of its output
 * into OUT (NUL-terminated; the rest is read and dropped, so that a command
 * that writes more than OUT holds does not block on a full pipe). Returns the
 * exit status, 128 + the signal when a signal ended it, -1 when it could not
 * be started. Redirections (2>&1) are CMD's. */
int bcg_test_capture(const char *cmd, char *out, size_t len);

#define BCG_TESTS(...) static const bcg_test bcg_tests_[] = {__VA_ARGS__}
#define BCG_RUN(suite) \
  int main(void) { return bcg_test_main(suite, bcg_tests_, (int)(sizeof bcg_tests_ / sizeof bcg_tests_[0])); }

#endif
