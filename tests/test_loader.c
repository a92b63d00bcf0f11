/* test_loader.c - the plugin registry: good plugins of all four kinds, and one
 * deliberately broken plugin per failure, each with its exact message. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/loader.h"
#include "testutil.h"

static char err[4096];

static const char *plug(const char *name) {
  static char buf[4][512];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/tests/plugins/%s.so", bcg_test_build_dir(), name);
  return buf[k];
}

/* Loading NAME.so alone fails with exactly "<file>: <cause>". */
static void expect_fail(const char *name, const char *cause) {
  bcg_registry *r = bcg_registry_new();
  const char *p = plug(name);
  CU_ASSERT_EQUAL(bcg_registry_load_file(r, p, err, sizeof err), -1);
  char want[2048];
  snprintf(want, sizeof want, "%s: %s", p, cause);
  if (strcmp(err, want)) printf("\n  got:  %s\n  want: %s\n", err, want);
  CU_ASSERT_STRING_EQUAL(err, want);
  CU_ASSERT_EQUAL(bcg_registry_count(r), 0);
  CU_ASSERT_EQUAL(bcg_registry_error_count(r), 1);
  CU_ASSERT_STRING_EQUAL(bcg_registry_error(r, 0), want);
  bcg_registry_free(r);
}

static void test_good(void) {
  bcg_registry *r = bcg_registry_new();
  const char *names[] = {"test_contact", "test_estimator", "test_learner", "test_task"};
  for (int i = 0; i < 4; i++) {
    int rc = bcg_registry_load_file(r, plug(names[i]), err, sizeof err);
    if (rc) printf("\n  %s\n", err);
    CU_ASSERT_EQUAL(rc, 0);
  }
  CU_ASSERT_EQUAL(bcg_registry_count(r), 4);
  CU_ASSERT_EQUAL(bcg_registry_error_count(r), 0);
  for (int k = BCG_KIND_CONTACT; k <= BCG_KIND_TASK; k++) {
    const bcg_plugin *p = bcg_registry_find(r, (bcg_kind)k, names[k - 1]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->desc->kind, (uint32_t)k);
    CU_ASSERT_STRING_EQUAL(p->path, plug(names[k - 1]));
    CU_ASSERT_PTR_NOT_NULL(p->handle);
  }
  CU_ASSERT_PTR_NULL(bcg_registry_find(r, BCG_KIND_TASK, "test_contact"));
  CU_ASSERT_PTR_NULL(bcg_registry_find(r, BCG_KIND_CONTACT, "nope"));
  /* the same file again is not a duplicate */
  CU_ASSERT_EQUAL(bcg_registry_load_file(r, plug("test_contact"), err, sizeof err), 0);
  CU_ASSERT_EQUAL(bcg_registry_count(r), 4);
  char names_buf[256];
  bcg_registry_names(r, BCG_KIND_LEARNER, names_buf, sizeof names_buf);
  CU_ASSERT_STRING_EQUAL(names_buf, "test_learner");
  bcg_registry_free(r);
}

static void test_missing_and_not_elf(void) {
  bcg_registry *r = bcg_registry_new();
  CU_ASSERT_EQUAL(bcg_registry_load_file(r, "/nonexistent/x.so", err, sizeof err), -1);
  CU_ASSERT_STRING_EQUAL(err, "/nonexistent/x.so: cannot load: No such file or directory");
  char dir[256];
  snprintf(dir, sizeof dir, "%s", bcg_test_tmp_path("loader_XXXXXX"));
  CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
  char p[300];
  snprintf(p, sizeof p, "%s/x.so", dir);
  FILE *f = fopen(p, "w");
  fputs("this is not an ELF file, just some text that is long enough to have a header\n", f);
  fclose(f);
  CU_ASSERT_EQUAL(bcg_registry_load_file(r, p, err, sizeof err), -1);
  char want[512];
  snprintf(want, sizeof want, "%s: not a loadable shared object: invalid ELF header", p);
  CU_ASSERT_STRING_EQUAL(err, want);
  /* a directory named like a plugin */
  snprintf(p, sizeof p, "%s/d.so", dir);
  mkdir(p, 0700);
  CU_ASSERT_EQUAL(bcg_registry_load_file(r, p, err, sizeof err), -1);
  snprintf(want, sizeof want, "%s: cannot load: not a regular file", p);
  CU_ASSERT_STRING_EQUAL(err, want);
  CU_ASSERT_EQUAL(bcg_registry_error_count(r), 3);
  CU_ASSERT_EQUAL(bcg_registry_count(r), 0);
  /* scanning the directory collects both failures */
  bcg_registry *r2 = bcg_registry_new();
  CU_ASSERT_EQUAL(bcg_registry_scan_dir(r2, dir, 1), 0);
  CU_ASSERT_EQUAL(bcg_registry_error_count(r2), 2);
  bcg_registry_free(r2);
  rmdir(p);
  snprintf(p, sizeof p, "%s/x.so", dir);
  unlink(p);
  rmdir(dir);
  bcg_registry_free(r);
}

/* Copy the first n bytes of src to dst. */
static void copy_prefix(const char *src, const char *dst, long n) {
  FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
  if (!in || !out) abort();
  static char b[1 << 16];
  for (long left = n; left > 0;) {
    size_t k = fread(b, 1, left < (long)sizeof b ? (size_t)left : sizeof b, in);
    if (!k) break;
    fwrite(b, 1, k, out);
    left -= (long)k;
  }
  fclose(in);
  fclose(out);
}

/* A truncated plugin (a copy cut short) raised SIGBUS inside dlopen. Each
 * load runs in a child so that a crash is a failure, not the end of the
 * suite: it must fail with "<file>: not a loadable shared object: truncated
 * or corrupt ELF file (...)", and scanning its folder must still load the
 * good plugin beside it. */
static void test_truncated(void) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s", bcg_test_tmp_path("trunc_XXXXXX"));
  CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
  const char *src = plug("test_contact");
  struct stat st;
  CU_ASSERT_FATAL(stat(src, &st) == 0);
  const long sizes[] = {10, 64, 30000, st.st_size / 2, st.st_size - 1};
  int ncase = 0;
  for (int i = 0; i < 5; i++) {
    if (sizes[i] >= st.st_size) continue;
    char p[600];
    snprintf(p, sizeof p, "%s/cut.so", dir);
    copy_prefix(src, p, sizes[i]);
    int fd[2];
    CU_ASSERT_FATAL(pipe(fd) == 0);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
      close(fd[0]);
      bcg_registry *r = bcg_registry_new();
      char e[2048] = "";
      int rc = bcg_registry_load_file(r, p, e, sizeof e);
      if (write(fd[1], e, strlen(e) + 1) < 0) _exit(3);
      _exit(rc == -1 ? 0 : 2);
    }
    close(fd[1]);
    char got[2048] = "";
    ssize_t n = read(fd[0], got, sizeof got - 1);
    got[n > 0 ? n : 0] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status)) printf("\n  %ld bytes: killed by signal %d\n", sizes[i], WTERMSIG(status));
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char want[800];
    snprintf(want, sizeof want, "%s: not a loadable shared object: truncated or corrupt ELF file (", p);
    if (strncmp(got, want, strlen(want))) printf("\n  %ld bytes: got '%s'\n", sizes[i], got);
    CU_ASSERT_EQUAL(strncmp(got, want, strlen(want)), 0);
    ncase++;
  }
  CU_ASSERT(ncase >= 4);
  /* a scan of a folder holding a truncated and a good plugin */
  char p[600], good[600];
  snprintf(p, sizeof p, "%s/a_cut.so", dir);
  snprintf(good, sizeof good, "%s/b_good.so", dir);
  copy_prefix(src, p, st.st_size / 2);
  copy_prefix(src, good, st.st_size);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    bcg_registry *r = bcg_registry_new();
    int loaded = bcg_registry_scan_dir(r, dir, 1);
    _exit(loaded == 1 && bcg_registry_error_count(r) == 2 ? 0 : 2); /* a_cut.so and cut.so */
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CU_ASSERT_EQUAL(system(cmd), 0);
}

static int dummy_fn(void) { return 0; }

/* The ABI growth rule (plugin.h): a table or descriptor of any size from the
 * ABI-1 minimum (the last entry every plugin of the kind has) up to this
 * core's is accepted; smaller is refused as another ABI, larger as "built
 * against a newer bcg". */
static void test_old_ops_sizes(void) {
  static bcg_estimator_ops eo;
  void (*f)(void) = (void (*)(void))dummy_fn;
  memcpy(&eo.create, &f, sizeof f);
  memcpy(&eo.destroy, &f, sizeof f);
  memcpy(&eo.begin, &f, sizeof f);
  memcpy(&eo.forward, &f, sizeof f);
  memcpy(&eo.backward, &f, sizeof f);
  memcpy(&eo.reset_envs, &f, sizeof f);
  memcpy(&eo.stats, &f, sizeof f);
  bcg_plugin_desc d = {BCG_PLUGIN_HEADER(BCG_KIND_ESTIMATOR, "old_est", "an estimator of the older table"), NULL, 0,
                       0, &eo};
  size_t min = offsetof(bcg_estimator_ops, stats) + sizeof eo.stats;
  for (size_t sz = min; sz <= sizeof eo; sz += sizeof(void *)) {
    eo.size = (uint32_t)sz;
    CU_ASSERT_EQUAL(bcg_plugin_desc_check(&d, err, sizeof err), 0);
  }
  eo.size = (uint32_t)(min - sizeof(void *));
  CU_ASSERT_EQUAL(bcg_plugin_desc_check(&d, err, sizeof err), -1);
  char want[512];
  snprintf(want, sizeof want, "plugin 'old_est': estimator ops size %zu, smaller than any ABI 1 table (%zu bytes)",
           min - sizeof(void *), min);
  CU_ASSERT_STRING_EQUAL(err, want);
  eo.size = (uint32_t)(sizeof eo + sizeof(void *));
  CU_ASSERT_EQUAL(bcg_plugin_desc_check(&d, err, sizeof err), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "built against a newer bcg"));
  /* a GPU estimator (BCG_CAP_CUDA) needs both device entries inside its table */
  eo.size = sizeof eo;
  d.caps = BCG_CAP_CUDA;
  CU_ASSERT_EQUAL(bcg_plugin_desc_check(&d, err, sizeof err), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "estimator ops entry 'forward_cuda' is NULL (mandatory with the cuda capability)"));
  memcpy(&eo.forward_cuda, &f, sizeof f);
  CU_ASSERT_EQUAL(bcg_plugin_desc_check(&d, err, sizeof err), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "'backward_cuda' is NULL"));
  memcpy(&eo.backward_cuda, &f, sizeof f);
  CU_ASSERT_EQUAL(bcg_plugin_desc_check(&d, err, sizeof err), 0);
  eo.size = (uint32_t)(offsetof(bcg_estimator_ops, log_values) + sizeof eo.log_values); /* the SDK 1.0 table */
  CU_ASSERT_EQUAL(bcg_plugin_desc_check(&d, err, sizeof err), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "declares the cuda capability, but its estimator ops table"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "ends before 'forward_cuda'"));
  d.caps = 0; /* the same table without the capability: a host-only estimator of SDK 1.0 */
  CU_ASSERT_EQUAL(bcg_plugin_desc_check(&d, err, sizeof err), 0);
  memset(&eo.forward_cuda, 0, sizeof eo.forward_cuda);
  memset(&eo.backward_cuda, 0, sizeof eo.backward_cuda);
  eo.size = sizeof eo;
  d.desc_size = (uint32_t)sizeof d + 8;
  CU_ASSERT_EQUAL(bcg_plugin_desc_check(&d, err, sizeof err), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "descriptor size"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "built against a newer bcg"));
  /* a task table of the minimum size, registered: the core's copy has the
   * full size with the entries it lacks NULL, its size field the plugin's */
  static bcg_task_ops to;
  memcpy(&to.create, &f, sizeof f);
  memcpy(&to.destroy, &f, sizeof f);
  memcpy(&to.obs_dim, &f, sizeof f);
  memcpy(&to.act_dim, &f, sizeof f);
  memcpy(&to.reset, &f, sizeof f);
  memcpy(&to.observe, &f, sizeof f);
  memcpy(&to.observe_vjp, &f, sizeof f);
  memcpy(&to.reward, &f, sizeof f);
  memcpy(&to.reward_vjp, &f, sizeof f);
  memcpy(&to.save, &f, sizeof f); /* beyond the size: must not be seen */
  memcpy(&to.reference_qpos, &f, sizeof f);
  bcg_plugin_desc t = {BCG_PLUGIN_HEADER(BCG_KIND_TASK, "old_task", "a task of the older table"), NULL, 0, 0, &to};
  to.size = (uint32_t)(offsetof(bcg_task_ops, reward_vjp) + sizeof to.reward_vjp);
  bcg_registry *r = bcg_registry_new();
  CU_ASSERT_EQUAL(bcg_registry_add(r, &t, "in-process", err, sizeof err), 0);
  const bcg_plugin *pl = bcg_registry_find(r, BCG_KIND_TASK, "old_task");
  CU_ASSERT_PTR_NOT_NULL_FATAL(pl);
  const bcg_task_ops *seen = pl->desc->ops;
  CU_ASSERT_EQUAL(seen->size, to.size);
  CU_ASSERT(seen->reward_vjp == to.reward_vjp);
  CU_ASSERT(seen->update == NULL && seen->tracking_error == NULL && seen->save == NULL && seen->load == NULL);
  CU_ASSERT(seen->reference_qpos == NULL); /* appended after save/load: absent from an older table */
  bcg_registry_free(r);
  /* a plugin file built that way (old_abi_task.so: poison past its table) */
  r = bcg_registry_new();
  CU_ASSERT_EQUAL(bcg_registry_load_file(r, plug("old_abi_task"), err, sizeof err), 0);
  pl = bcg_registry_find(r, BCG_KIND_TASK, "old_abi_task");
  CU_ASSERT_PTR_NOT_NULL_FATAL(pl);
  seen = pl->desc->ops;
  CU_ASSERT_EQUAL(seen->size, offsetof(bcg_task_ops, reward_vjp) + sizeof seen->reward_vjp);
  CU_ASSERT(seen->update == NULL && seen->tracking_error == NULL && seen->save == NULL && seen->load == NULL);
  CU_ASSERT(seen->reference_qpos == NULL); /* appended after save/load: absent from an older table */
  bcg_registry_free(r);
}

static void test_broken(void) {
  char want[512];
  expect_fail("bad_nosym", "not a bcg plugin: no symbol bcg_plugin_entry");
  expect_fail("bad_abi", "plugin ABI version 99, this bcg expects 1 (rebuild the plugin against this bcg)");
  snprintf(want, sizeof want, "descriptor size %zu, smaller than any ABI 1 descriptor (%zu bytes; built against "
           "another plugin.h)", sizeof(bcg_plugin_desc) - 8, sizeof(bcg_plugin_desc));
  expect_fail("bad_desc_size", want);
#ifdef BCG_REAL_FLOAT
  expect_fail("bad_precision",
              "built for double precision (sizeof(bcg_real) = 8), this bcg uses float (4); rebuild it with REAL=float");
#else
  expect_fail("bad_precision",
              "built for float precision (sizeof(bcg_real) = 4), this bcg uses double (8); rebuild it with REAL=double");
#endif
  snprintf(want, sizeof want, "built with MAX_DOF=%d MAX_CONTACT=%d, this bcg with MAX_DOF=%d MAX_CONTACT=%d (its "
           "structs differ); rebuild it with this bcg's headers and flags (pkg-config --cflags bcg)",
           BCG_MAX_DOF - 1, BCG_MAX_CONTACT, BCG_MAX_DOF, BCG_MAX_CONTACT);
  expect_fail("bad_dims", want);
  expect_fail("bad_nullfn", "plugin 'bad_nullfn': contact ops entry 'solve_vjp' is NULL");
  expect_fail("bad_cuda",
              "plugin 'bad_cuda': contact ops entry 'solve_cuda' is NULL (mandatory with the cuda capability)");
  expect_fail("bad_default", "plugin 'bad_default': key 'kappa': bad default: 5000 is out of range [1, 1000]");
  expect_fail("bad_name", "invalid plugin name 'Bad-Name' (must match [a-z0-9_]+, at most 31 characters)");
  snprintf(want, sizeof want, "plugin 'bad_ops_size': contact ops size 8, smaller than any ABI 1 table (%zu bytes)",
           offsetof(bcg_contact_ops, solve_vjp) + sizeof(void *));
  expect_fail("bad_ops_size", want);
  expect_fail("bad_kind", "invalid plugin kind 9");
  expect_fail("bad_null_desc", "bcg_plugin_entry returned NULL");
}

static void test_duplicate(void) {
  bcg_registry *r = bcg_registry_new();
  CU_ASSERT_EQUAL(bcg_registry_load_file(r, plug("test_contact"), err, sizeof err), 0);
  CU_ASSERT_EQUAL(bcg_registry_load_file(r, plug("twin_contact"), err, sizeof err), -1);
  char want[1024];
  snprintf(want, sizeof want, "%s: duplicate contact plugin 'test_contact' (already loaded from %s)",
           plug("twin_contact"), plug("test_contact"));
  CU_ASSERT_STRING_EQUAL(err, want);
  CU_ASSERT_EQUAL(bcg_registry_count(r), 1);
  /* the first one stays */
  CU_ASSERT_STRING_EQUAL(bcg_registry_find(r, BCG_KIND_CONTACT, "test_contact")->path, plug("test_contact"));
  bcg_registry_free(r);
}

static void test_scan(void) {
  bcg_registry *r = bcg_registry_new();
  char dir[512];
  snprintf(dir, sizeof dir, "%s/tests/plugins", bcg_test_build_dir());
  /* other suites may add their own good test plugins to the folder */
  int loaded = bcg_registry_scan_dir(r, dir, 1);
  CU_ASSERT(loaded >= 4);
  CU_ASSERT_EQUAL(bcg_registry_count(r), loaded);
  const char *good[] = {"test_contact", "test_estimator", "test_learner", "test_task"};
  for (int k = BCG_KIND_CONTACT; k <= BCG_KIND_TASK; k++)
    CU_ASSERT_PTR_NOT_NULL(bcg_registry_find(r, (bcg_kind)k, good[k - 1]));
  /* every bad_*.so and twin_contact.so is reported, in name order */
  const char *bad[] = {"bad_abi",      "bad_cuda",      "bad_default", "bad_desc_size", "bad_dims",
                       "bad_kind",     "bad_name",      "bad_nosym",   "bad_null_desc", "bad_nullfn",
                       "bad_ops_size", "bad_precision", "twin_contact"};
  const int nbad = (int)(sizeof bad / sizeof bad[0]);
  int nerr = bcg_registry_error_count(r);
  CU_ASSERT(nerr >= nbad);
  int last = -1, in_order = 1;
  for (int i = 0; i < nbad; i++) {
    char want[600];
    snprintf(want, sizeof want, "%s/%s.so: ", dir, bad[i]);
    int at = -1;
    for (int j = 0; j < nerr; j++)
      if (strncmp(bcg_registry_error(r, j), want, strlen(want)) == 0) at = j;
    CU_ASSERT(at >= 0);
    in_order &= at > last;
    last = at;
  }
  CU_ASSERT(in_order);
  CU_ASSERT_PTR_NULL(bcg_registry_get(r, loaded));
  /* a missing directory: silent unless required */
  CU_ASSERT_EQUAL(bcg_registry_scan_dir(r, "/nonexistent/dir", 0), 0);
  CU_ASSERT_EQUAL(bcg_registry_error_count(r), nerr);
  CU_ASSERT_EQUAL(bcg_registry_scan_dir(r, "/nonexistent/dir", 1), 0);
  CU_ASSERT_EQUAL(bcg_registry_error_count(r), nerr + 1);
  CU_ASSERT_STRING_EQUAL(bcg_registry_error(r, nerr),
                         "/nonexistent/dir: cannot read plugin directory: No such file or directory");
  bcg_registry_free(r);
}

static void test_default_search(void) {
  char dir[512], env[1200];
  snprintf(dir, sizeof dir, "%s/tests/plugins", bcg_test_build_dir());
  snprintf(env, sizeof env, "/nonexistent/a:%s", dir);
  setenv("BCG_PLUGIN_PATH", env, 1);
  char path[4096];
  bcg_plugin_search_path(path, sizeof path);
  /* the built-ins first (the build tree's plugins/, the prefix), then $BCG_PLUGIN_PATH */
  size_t lp = strlen(path), le = strlen(env);
  CU_ASSERT(lp > le && !strcmp(path + lp - le, env) && path[lp - le - 1] == ':');
  CU_ASSERT_PTR_NOT_NULL(strstr(path, "/plugins:"));
  CU_ASSERT(strstr(path, "/lib/bcg/plugins") != NULL && strstr(path, "/lib/bcg/plugins") < path + lp - le);
  bcg_registry *r = bcg_registry_new();
  CU_ASSERT(bcg_registry_scan_default(r) >= 4);
  CU_ASSERT_PTR_NOT_NULL(bcg_registry_find(r, BCG_KIND_TASK, "test_task"));
  CU_ASSERT_STRING_EQUAL(bcg_registry_error(r, 0),
                         "/nonexistent/a: cannot read plugin directory: No such file or directory");
  bcg_registry_free(r);
  unsetenv("BCG_PLUGIN_PATH");
}

/* A plugin on $BCG_PLUGIN_PATH with a built-in's kind and name (here a copy
 * of the built-in autodiff.so) does not shadow it: the built-in stays, and
 * the copy is reported as a duplicate, naming the copy's file. */
static void test_no_shadowing(void) {
  char src[600], dir[700], dst[800], cmd[2400];
  snprintf(src, sizeof src, "%s/plugins/autodiff.so", bcg_test_build_dir());
  snprintf(dir, sizeof dir, "%s", bcg_test_tmp_path("shadow"));
  snprintf(dst, sizeof dst, "%s/autodiff.so", dir);
  snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s' '%s'", dir, src, dst);
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  setenv("BCG_PLUGIN_PATH", dir, 1);
  bcg_registry *r = bcg_registry_new();
  bcg_registry_scan_default(r);
  const bcg_plugin *p = bcg_registry_find(r, BCG_KIND_ESTIMATOR, "autodiff");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  CU_ASSERT_PTR_NULL(strstr(p->path, dir));
  int found = 0;
  for (int i = 0; i < bcg_registry_error_count(r); i++) {
    const char *e = bcg_registry_error(r, i);
    if (!strncmp(e, dst, strlen(dst)) && strstr(e, "duplicate estimator plugin 'autodiff' (already loaded from")) found = 1;
  }
  CU_ASSERT(found);
  bcg_registry_free(r);
  unsetenv("BCG_PLUGIN_PATH");
  unlink(dst);
  rmdir(dir);
}

/* Descriptor checks on in-process descriptors. */
static void test_desc_checks(void) {
  static bcg_contact_ops ops;
  ops.size = sizeof ops;
  void (*f)(void) = (void (*)(void))dummy_fn;
  memcpy(&ops.create, &f, sizeof f);
  memcpy(&ops.destroy, &f, sizeof f);
  memcpy(&ops.solve, &f, sizeof f);
  memcpy(&ops.solve_vjp, &f, sizeof f);
  bcg_key_spec keys[2] = {{"a", BCG_KEY_INT, "1", 0, 10, NULL, "h"}, {"b", BCG_KEY_CHOICE, "x", 0, 0, "x|y", "h"}};
  bcg_plugin_desc d = {BCG_PLUGIN_HEADER(BCG_KIND_CONTACT, "inproc", "in-process"), keys, 2, 0, &ops};
  CU_ASSERT_EQUAL(bcg_plugin_desc_check(&d, err, sizeof err), 0);
  keys[1].name = "a";
  CU_ASSERT_EQUAL(bcg_plugin_desc_check(&d, err, sizeof err), -1);
  CU_ASSERT_STRING_EQUAL(err, "plugin 'inproc': key 'a' declared twice");
  keys[1].name = "plugin";
  bcg_plugin_desc_check(&d, err, sizeof err);
  CU_ASSERT_STRING_EQUAL(err, "plugin 'inproc': key 'plugin' is reserved");
  keys[1].name = "b";
  keys[1].def = "zzz";
  bcg_plugin_desc_check(&d, err, sizeof err);
  CU_ASSERT_STRING_EQUAL(err, "plugin 'inproc': key 'b': bad default: 'zzz' is not one of x|y");
  keys[1].def = "x";
  keys[1].choices = "x||y";
  bcg_plugin_desc_check(&d, err, sizeof err);
  CU_ASSERT_STRING_EQUAL(err, "plugin 'inproc': key 'b': malformed choices 'x||y'");
  keys[1].choices = "x|y";
  keys[0].min = 5, keys[0].max = 1;
  bcg_plugin_desc_check(&d, err, sizeof err);
  CU_ASSERT_STRING_EQUAL(err, "plugin 'inproc': key 'a': invalid range [5, 1]");
  keys[0].min = 0, keys[0].max = 10;
  keys[0].def = NULL; /* required: fine */
  CU_ASSERT_EQUAL(bcg_plugin_desc_check(&d, err, sizeof err), 0);
  keys[0].type = (bcg_key_type)42;
  bcg_plugin_desc_check(&d, err, sizeof err);
  CU_ASSERT_STRING_EQUAL(err, "plugin 'inproc': key 'a': invalid type 42");
  keys[0].type = BCG_KEY_INT;
  d.nkeys = 3;
  d.keys = NULL;
  bcg_plugin_desc_check(&d, err, sizeof err);
  CU_ASSERT_STRING_EQUAL(err, "plugin 'inproc': declares 3 keys but keys is NULL");
  d.keys = keys, d.nkeys = 2;
  d.ops = NULL;
  bcg_plugin_desc_check(&d, err, sizeof err);
  CU_ASSERT_STRING_EQUAL(err, "plugin 'inproc': no function table (ops is NULL)");
  d.ops = &ops;
  d.description = "two\nlines";
  bcg_plugin_desc_check(&d, err, sizeof err);
  CU_ASSERT_STRING_EQUAL(err, "plugin 'inproc': description missing or not one line");
  d.description = "ok";
  bcg_registry *r = bcg_registry_new();
  CU_ASSERT_EQUAL(bcg_registry_add(r, &d, "(builtin)", err, sizeof err), 0);
  CU_ASSERT_PTR_NULL(bcg_registry_find(r, BCG_KIND_CONTACT, "inproc")->handle);
  CU_ASSERT_EQUAL(bcg_registry_add(r, &d, "(builtin2)", err, sizeof err), -1);
  CU_ASSERT_STRING_EQUAL(err, "(builtin2): duplicate contact plugin 'inproc' (already loaded from (builtin))");
  bcg_registry_free(r);
}

/* The good plugins work through their function tables with a real config. */
static void test_use_plugins(void) {
  bcg_registry *r = bcg_registry_new();
  char dir[512];
  snprintf(dir, sizeof dir, "%s/tests/plugins", bcg_test_build_dir());
  bcg_registry_scan_dir(r, dir, 1);
  char path[512];
  snprintf(path, sizeof path, "%s", bcg_test_tmp_path("cfg_XXXXXX"));
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  const char *text =
      "[contact]\nplugin = test_contact\n[estimator]\nplugin = test_estimator\nbranches = 3\n"
      "[learner]\nplugin = test_learner\nlayers = 8,4\n[task]\nplugin = test_task\nmotion = walk\nnenv = 3\n";
  CU_ASSERT(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
  close(fd);
  bcg_config *cfg = NULL;
  CU_ASSERT_EQUAL_FATAL(bcg_config_load_with(&cfg, r, path, 0, NULL, err, sizeof err), 0);
  unlink(path);
  const bcg_services *svc = bcg_services_host();

  const bcg_contact_ops *c = bcg_config_plugin(cfg, BCG_KIND_CONTACT)->desc->ops;
  void *cs = c->create(svc, bcg_config_section(cfg, "contact"), NULL, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cs);
  bcg_real lam[2 * 3 * 3], fn[2 * 3];
  for (int i = 0; i < 18; i++) lam[i] = 1;
  for (int i = 0; i < 6; i++) fn[i] = 1;
  bcg_contact_batch b = {0};
  b.nenv = 2, b.ncon = 3, b.lam = lam, b.fn = fn;
  CU_ASSERT_EQUAL(c->solve(cs, &b), 0);
  int zero = 1;
  for (int i = 0; i < 18; i++) zero &= lam[i] == 0;
  for (int i = 0; i < 6; i++) zero &= fn[i] == 0;
  CU_ASSERT(zero);
  c->destroy(cs);

  const bcg_estimator_ops *e = bcg_config_plugin(cfg, BCG_KIND_ESTIMATOR)->desc->ops;
  void *es = e->create(svc, bcg_config_section(cfg, "estimator"), NULL, 4, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(es);
  bcg_real x[2] = {1, 2}, xn[2] = {0, 0};
  CU_ASSERT_EQUAL(e->begin(es), 0);
  e->forward(es, 0, x, NULL, xn);
  e->forward(es, 1, xn, NULL, xn);
  CU_ASSERT(xn[0] == 1 && xn[1] == 2);
  bcg_estimator_stats st;
  e->stats(es, &st);
  CU_ASSERT_EQUAL(st.samples, 6);
  CU_ASSERT_EQUAL(st.transitions, 2);
  e->destroy(es);

  const bcg_learner_ops *l = bcg_config_plugin(cfg, BCG_KIND_LEARNER)->desc->ops;
  void *ls = l->create(svc, bcg_config_section(cfg, "learner"), NULL, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ls);
  CU_ASSERT_EQUAL(l->iterate(ls, NULL), 0);
  l->destroy(ls);

  const bcg_task_ops *t = bcg_config_plugin(cfg, BCG_KIND_TASK)->desc->ops;
  void *ts = t->create(svc, bcg_config_section(cfg, "task"), NULL, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ts);
  CU_ASSERT_EQUAL(t->obs_dim(ts), 4);
  bcg_real rew[3] = {1, 1, 1};
  int done[3] = {1, 1, 1};
  t->reward(ts, NULL, NULL, NULL, NULL, rew, done);
  CU_ASSERT(rew[0] == 0 && rew[2] == 0 && done[1] == 0);
  /* reset writes the caller's clocks {0, 0, phase} of the listed envs only */
  bcg_task_clock clk[3] = {{5, 1, 2.0}, {5, 1, 2.0}, {5, 1, 2.0}};
  bcg_real xs[9];
  int envs[2] = {0, 2};
  CU_ASSERT_EQUAL(t->reset(ts, envs, 2, 0, xs, clk), 0);
  CU_ASSERT(clk[0].t == 0 && clk[0].flags == 0 && clk[0].phase == 0 && clk[2].t == 0);
  CU_ASSERT(clk[1].t == 5 && clk[1].phase == 2.0);
  t->destroy(ts);

  bcg_config_free(cfg);
  bcg_registry_free(r);
}

static void test_names(void) {
  CU_ASSERT_STRING_EQUAL(bcg_kind_name(BCG_KIND_ESTIMATOR), "estimator");
  CU_ASSERT_STRING_EQUAL(bcg_kind_name((bcg_kind)7), "?");
  CU_ASSERT_EQUAL(bcg_kind_parse("learner"), BCG_KIND_LEARNER);
  CU_ASSERT_EQUAL(bcg_kind_parse("x"), 0);
  char b[128];
  bcg_caps_desc(BCG_CAP_CUDA | BCG_CAP_NEEDS_DELASSUS, b, sizeof b);
  CU_ASSERT_STRING_EQUAL(b, "needs_delassus cuda");
  bcg_caps_desc(0, b, sizeof b);
  CU_ASSERT_STRING_EQUAL(b, "none");
  CU_ASSERT_PTR_NOT_NULL(bcg_registry_global());
}

BCG_TESTS({"good plugins of all kinds", test_good}, {"missing file, not ELF", test_missing_and_not_elf},
          {"truncated plugin", test_truncated}, {"ABI growth: older and newer table sizes", test_old_ops_sizes},
          {"broken plugins", test_broken}, {"duplicate name", test_duplicate}, {"no shadowing of a built-in", test_no_shadowing}, {"scan a directory", test_scan},
          {"default search path", test_default_search}, {"descriptor checks", test_desc_checks},
          {"use the good plugins", test_use_plugins}, {"names", test_names});
BCG_RUN("loader")
