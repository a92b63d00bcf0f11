/* test_config.c - INI loading, overrides, validation messages (with line
 * numbers), resolved output, services, and a fuzz test of the loader. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/loader.h"
#include "testutil.h"

static char tmpdir[256];
static bcg_registry *reg;
static char err[4096];

static void setup(void) {
  if (reg) return;
  snprintf(tmpdir, sizeof tmpdir, "%s", bcg_test_tmpdir()); /* removed at exit */
  reg = bcg_registry_new();
  char dir[512];
  snprintf(dir, sizeof dir, "%s/tests/plugins", bcg_test_build_dir());
  bcg_registry_scan_dir(reg, dir, 1);
}

/* Write text to <tmpdir>/<name> and return the path (static buffer). */
static const char *write_ini(const char *name, const char *text) {
  setup();
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "w");
  CU_ASSERT_FATAL(f != NULL);
  fputs(text, f);
  fclose(f);
  return path;
}

/* Load text; return the config (or NULL with err set). */
static bcg_config *load_text(const char *text, int nov, char **ov) {
  const char *p = write_ini("t.ini", text);
  bcg_config *cfg = NULL;
  err[0] = 0;
  bcg_config_load_with(&cfg, reg, p, nov, ov, err, sizeof err);
  return cfg;
}

/* Expect failure with exactly "<path>:<rest>" (rest includes ":line: ..."). */
static void expect_error(const char *text, int nov, char **ov, const char *rest) {
  bcg_config *cfg = load_text(text, nov, ov);
  CU_ASSERT_PTR_NULL(cfg);
  bcg_config_free(cfg);
  char want[2048];
  if (rest[0] == ':')
    snprintf(want, sizeof want, "%s/t.ini%s", tmpdir, rest);
  else
    snprintf(want, sizeof want, "%s", rest);
  if (strcmp(err, want) != 0) printf("\n  got:  %s\n  want: %s\n", err, want);
  CU_ASSERT_STRING_EQUAL(err, want);
}

static void test_defaults(void) {
  bcg_config *cfg = load_text("", 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  CU_ASSERT_EQUAL(bcg_config_get_int(cfg, "run", "seed"), 0);
  CU_ASSERT_EQUAL(bcg_config_get_int(cfg, "run", "num_envs"), 64);
  CU_ASSERT_EQUAL(bcg_config_get_int(cfg, "sim", "substeps"), 4);
  CU_ASSERT_DOUBLE_EQUAL(bcg_config_get_real(cfg, "sim", "control_dt"), 0.02, 1e-15);
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(cfg, "sim", "actuation"), "motor");
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(cfg, "run", "device"), "cpu");
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(cfg, "run", "out_dir"), "runs");
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(cfg, "model", "path"),
                         "/usr/share/mujoco/model/humanoid/humanoid.xml");
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(cfg, "run", "name"), "t"); /* the file's base name */
  CU_ASSERT_PTR_NULL(bcg_config_section(cfg, "contact"));
  CU_ASSERT_PTR_NULL(bcg_config_plugin(cfg, BCG_KIND_CONTACT));
  CU_ASSERT_PTR_NOT_NULL(bcg_config_section(cfg, "eval"));
  CU_ASSERT_EQUAL(bcg_config_sweep_count(cfg), 0);
  CU_ASSERT_EQUAL(bcg_params_line(bcg_config_section(cfg, "run"), "seed"), 0);
  bcg_config_free(cfg);
}

static void test_values_and_lines(void) {
  const char *text =
      "# comment\n"
      "; another\n"
      "[Run]\n"
      "  seed = 42   ; inline comment\n"
      "name = \"my run ; quoted\"\n"
      "\n"
      "[sim]\n"
      "friction = 1.5e-1\n"
      "actuation = pd\n"
      "kp = 1\\\n"
      "23\n"
      "substeps = 8\n"
      "[learner]\n"
      "plugin = test_learner\n"
      "layers = 64, 32,16\n"
      "[contact]\n"
      "plugin = test_contact\n"
      "verbose = Yes\n";
  bcg_config *cfg = load_text(text, 0, NULL);
  if (!cfg) printf("\n  %s\n", err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  CU_ASSERT_EQUAL(bcg_config_get_int(cfg, "run", "seed"), 42);
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(cfg, "run", "name"), "my run ; quoted");
  CU_ASSERT_DOUBLE_EQUAL(bcg_config_get_real(cfg, "sim", "friction"), 0.15, 0);
  CU_ASSERT_DOUBLE_EQUAL(bcg_config_get_real(cfg, "sim", "kp"), 123, 0);
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(cfg, "sim", "actuation"), "pd");
  const bcg_params *run = bcg_config_section(cfg, "run");
  CU_ASSERT_EQUAL(bcg_params_line(run, "seed"), 4);
  CU_ASSERT_EQUAL(bcg_params_line(bcg_config_section(cfg, "sim"), "kp"), 10);
  CU_ASSERT_EQUAL(bcg_params_line(bcg_config_section(cfg, "sim"), "substeps"), 12);
  long l[8];
  CU_ASSERT_EQUAL(bcg_config_get_list(cfg, "learner", "layers", l, 8), 3);
  CU_ASSERT(l[0] == 64 && l[1] == 32 && l[2] == 16);
  CU_ASSERT_EQUAL(bcg_config_get_list(cfg, "learner", "layers", l, 2), 2);
  CU_ASSERT_EQUAL(bcg_config_get_bool(cfg, "contact", "verbose"), 1);
  CU_ASSERT_DOUBLE_EQUAL(bcg_config_get_real(cfg, "contact", "kappa"), 300, 0);
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(cfg, "learner", "name_tag"), "x");
  const bcg_plugin *p = bcg_config_plugin(cfg, BCG_KIND_CONTACT);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  CU_ASSERT_STRING_EQUAL(p->desc->name, "test_contact");
  CU_ASSERT_PTR_EQUAL(bcg_params_plugin(bcg_config_section(cfg, "contact")), p);
  CU_ASSERT_STRING_EQUAL(bcg_params_name(bcg_config_section(cfg, "contact")), "contact");
  CU_ASSERT_PTR_NULL(bcg_params_value(run, "nope"));
  /* a later semantic error in the loader's format */
  bcg_config_errorf(cfg, "sim", "kp", err, sizeof err, "too stiff for %d substeps", 8);
  char want[1024];
  snprintf(want, sizeof want, "%s/t.ini:10: [sim] kp: too stiff for 8 substeps", tmpdir);
  CU_ASSERT_STRING_EQUAL(err, want);
  bcg_config_errorf(cfg, "sim", "kd", err, sizeof err, "x");
  snprintf(want, sizeof want, "%s/t.ini: [sim] kd: x", tmpdir);
  CU_ASSERT_STRING_EQUAL(err, want);
  bcg_config_free(cfg);
}

static void test_errors_keys(void) {
  expect_error("[run]\nseed = 1\n\n[contct]\nplugin = x\n", 0, NULL,
               ":4: [contct]: unknown section (did you mean contact?)");
  expect_error("[zzzzzzzz]\n", 0, NULL, ":1: [zzzzzzzz]: unknown section");
  expect_error("[run]\nsede = 1\n", 0, NULL, ":2: [run] sede: unknown key for [run] (did you mean seed?)");
  expect_error("[contact]\nplugin = test_contact\n\nkapa = 3\n", 0, NULL,
               ":4: [contact] kapa: unknown key for contact plugin 'test_contact' (did you mean kappa?)");
  expect_error("[run]\n\nseed = abc\n", 0, NULL, ":3: [run] seed: 'abc' is not an integer");
  expect_error("[run]\nseed = 1.5\n", 0, NULL, ":2: [run] seed: '1.5' is not an integer");
  expect_error("[run]\nseed = -1\n", 0, NULL, ":2: [run] seed: -1 is out of range [0, 2147483647]");
  expect_error("[run]\nseed = 99999999999999999999999\n", 0, NULL,
               ":2: [run] seed: '99999999999999999999999' is too large");
  expect_error("[sim]\ncontrol_dt = fast\n", 0, NULL, ":2: [sim] control_dt: 'fast' is not a number");
  expect_error("[sim]\ncontrol_dt = nan\n", 0, NULL, ":2: [sim] control_dt: 'nan' is not a finite number");
  expect_error("[sim]\ncontrol_dt = 2\n", 0, NULL, ":2: [sim] control_dt: 2 is out of range [1e-05, 1]");
  expect_error("[sim]\nsubsteps =\n", 0, NULL, ":2: [sim] substeps: empty value, expected an integer");
  expect_error("[run]\ndevice = cdua\n", 0, NULL, ":2: [run] device: 'cdua' is not one of cpu|cuda (did you mean cuda?)");
  expect_error("[contact]\nplugin = test_contact\nverbose = maybe\n", 0, NULL,
               ":3: [contact] verbose: 'maybe' is not a boolean (true/false/yes/no/on/off/1/0)");
  expect_error("[learner]\nplugin = test_learner\nlayers = 64,,32\n", 0, NULL,
               ":3: [learner] layers: '64,,32' has an empty list element");
  expect_error("[learner]\nplugin = test_learner\nlayers = 64,0\n", 0, NULL,
               ":3: [learner] layers: element 2: 0 is out of range [1, 4096]");
}

static void test_errors_syntax(void) {
  expect_error("[run]\nseed = 1\nseed = 2\n", 0, NULL, ":3: [run] seed: set twice (first at line 2)");
  expect_error("[run]\n[sim]\n[run]\n", 0, NULL, ":3: [run]: section appears twice (first at line 1)");
  expect_error("seed = 1\n", 0, NULL, ":1: seed: key outside of any [section]");
  expect_error("[run\n", 0, NULL, ":1: unbalanced '[': a section header is a whole line '[name]'");
  expect_error("[run] ; c\n", 0, NULL, ":1: unbalanced '[': a section header is a whole line '[name]'");
  expect_error("[run]\n]\n", 0, NULL, ":2: unbalanced ']'");
  expect_error("[ru n]\n", 0, NULL, ":1: invalid section name '[ru n]' (lowercase letters, digits, '_')");
  expect_error("[]\n", 0, NULL, ":1: invalid section name '[]' (lowercase letters, digits, '_')");
  expect_error("[run]\njust words\n", 0, NULL,
               ":2: expected 'key = value', '[section]' or a comment, got 'just words'");
  expect_error("[run]\n= 3\n", 0, NULL, ":2: missing key name before '='");
  expect_error("[run]\nse ed = 3\n", 0, NULL, ":2: invalid key name 'se ed' (lowercase letters, digits, '_', '.')");
  expect_error("[run]\nseed = 1\x01\n", 0, NULL, ":2: control character 0x01; not a text config file");
  expect_error("[run]\nseed = 1\\\n", 0, NULL, ":2: line continued with '\\' past the end of the file");
  char *big = malloc(3000);
  memcpy(big, "[run]\nname = ", 13);
  memset(big + 13, 'a', 2000);
  strcpy(big + 2013, "\n");
  expect_error(big, 0, NULL, ":2: line longer than 1000 characters");
  free(big);
  /* missing file */
  bcg_config *cfg = NULL;
  CU_ASSERT_EQUAL(bcg_config_load_with(&cfg, reg, "/nonexistent/x.ini", 0, NULL, err, sizeof err), -1);
  CU_ASSERT_STRING_EQUAL(err, "/nonexistent/x.ini: cannot open: No such file or directory");
  CU_ASSERT_PTR_NULL(cfg);
}

static void test_plugin_sections(void) {
  expect_error("[contact]\nkappa = 3\n", 0, NULL,
               ":1: [contact] plugin: missing; say 'plugin = NAME' (available: test_contact)");
  expect_error("[contact]\nplugin = test_contcat\n", 0, NULL,
               ":2: [contact] plugin: no contact plugin named 'test_contcat' (did you mean test_contact?) "
               "(available: test_contact)");
  expect_error("[task]\nplugin = test_task\n", 0, NULL, ":1: [task] motion: required (test_task has no default)");
  bcg_config *cfg = load_text("[task]\nplugin = test_task\nmotion = run\n[estimator]\nplugin = test_estimator\n", 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(cfg, "task", "motion"), "run");
  CU_ASSERT_EQUAL(bcg_config_get_int(cfg, "task", "nenv"), 2);
  bcg_config_free(cfg);
  /* no registry: plugin sections cannot be resolved */
  const char *p = write_ini("n.ini", "[contact]\nplugin = test_contact\n");
  CU_ASSERT_EQUAL(bcg_config_load_with(&cfg, NULL, p, 0, NULL, err, sizeof err), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "no contact plugin named 'test_contact'"));
}

static void test_overrides(void) {
  char *ov[] = {"run.seed=7", "sim.actuation = pd", "contact.plugin=test_contact", "contact.kappa=12.5"};
  bcg_config *cfg = load_text("[run]\nseed = 1\n", 4, ov);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  CU_ASSERT_EQUAL(bcg_config_get_int(cfg, "run", "seed"), 7);
  CU_ASSERT_EQUAL(bcg_params_line(bcg_config_section(cfg, "run"), "seed"), -1);
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(cfg, "sim", "actuation"), "pd");
  CU_ASSERT_DOUBLE_EQUAL(bcg_config_get_real(cfg, "contact", "kappa"), 12.5, 0);
  bcg_config_free(cfg);
  char *o1[] = {"run.seed=x"};
  expect_error("[run]\nseed = 1\n", 1, o1, "command line: [run] seed: 'x' is not an integer (override run.seed=x)");
  char *o2[] = {"run.sed=1"};
  expect_error("", 1, o2, "command line: [run] sed: unknown key for [run] (did you mean seed?) (override run.sed=1)");
  char *o3[] = {"runseed=1"};
  expect_error("", 1, o3, "command line: 'runseed=1': expected section.key=value");
  char *o4[] = {"run.seed"};
  expect_error("", 1, o4, "command line: 'run.seed': expected section.key=value");
  char *o5[] = {"rnu.seed=1"};
  expect_error("", 1, o5, "command line: [rnu]: unknown section (did you mean run?) (override rnu.seed=1)");
  char *o6[] = {"contact.plugin=nope"};
  expect_error("[contact]\nplugin = test_contact\n", 1, o6,
               "command line: [contact] plugin: no contact plugin named 'nope' (available: test_contact) "
               "(override contact.plugin=nope)");
  /* Control characters anywhere in an override are refused (found by
   * tests/fuzz/fuzz_config): a value's trailing form feed was trimmed, but
   * the override itself went into the resolved text's "# override:" line,
   * so a run's config.ini no longer loaded (--resume, eval); a newline in
   * the value made the message two lines. */
  char *o8[] = {"run.name=x\f"};
  expect_error("", 1, o8, "command line: 'run.name=x?': control character 0x0c; an override is text");
  char *o9[] = {"run.seed=3\n[run]"};
  expect_error("", 1, o9, "command line: 'run.seed=3?[run]': control character 0x0a; an override is text");
  char *o10[] = {"run.name=a\tb"}; /* tabs are blanks */
  cfg = load_text("", 1, o10);
  CU_ASSERT_PTR_NOT_NULL(cfg);
  bcg_config_free(cfg);
  /* an override replaces an invalid file value before validation */
  char *o7[] = {"run.seed=3"};
  cfg = load_text("[run]\nseed = abc\n", 1, o7);
  CU_ASSERT_PTR_NOT_NULL(cfg);
  bcg_config_free(cfg);
}

static void test_sweep(void) {
  char *ov[] = {"sweep.run.seed=1,2,3"};
  bcg_config *cfg = load_text(
      "[contact]\nplugin = test_contact\n[learner]\nplugin = test_learner\n"
      "[sweep]\ncontact.kappa = 50, 100, 300\nlearner.layers = 64,64 | 128,64\nmode = zip\n"
      "contact.plugin = test_contact\n",
      1, ov);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  CU_ASSERT_EQUAL(bcg_config_sweep_count(cfg), 4);
  CU_ASSERT_STRING_EQUAL(bcg_config_sweep_key(cfg, 0), "contact.kappa");
  CU_ASSERT_EQUAL(bcg_config_sweep_nvalues(cfg, 0), 3);
  CU_ASSERT_STRING_EQUAL(bcg_config_sweep_value(cfg, 0, 2), "300");
  CU_ASSERT_EQUAL(bcg_config_sweep_nvalues(cfg, 1), 2);
  CU_ASSERT_STRING_EQUAL(bcg_config_sweep_value(cfg, 1, 1), "128,64");
  CU_ASSERT_STRING_EQUAL(bcg_config_sweep_key(cfg, 3), "run.seed");
  CU_ASSERT_PTR_NULL(bcg_config_sweep_value(cfg, 0, 3));
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(cfg, "sweep", "mode"), "zip");
  bcg_config_free(cfg);
  expect_error("[sweep]\ncontact.kappa = 1\n", 0, NULL,
               ":2: [sweep] contact.kappa: sweeps [contact] but the config has no [contact] section");
  expect_error("[contact]\nplugin = test_contact\n[sweep]\ncontact.kappa = 1, x\n", 0, NULL,
               ":4: [sweep] contact.kappa: 'x' is not a number");
  expect_error("[contact]\nplugin = test_contact\n[sweep]\ncontact.kapa = 1\n", 0, NULL,
               ":4: [sweep] contact.kapa: unknown key for contact plugin 'test_contact' (did you mean kappa?)");
  expect_error("[sweep]\nsmi.substeps = 1\n", 0, NULL, ":2: [sweep] smi.substeps: unknown section [smi] (did you mean sim?)");
  expect_error("[sweep]\nsim.substeps = 1,,2\n", 0, NULL, ":2: [sweep] sim.substeps: empty value in the list");
  expect_error("[sweep]\nmodes = grid\n", 0, NULL, ":2: [sweep] modes: unknown key for [sweep] (did you mean mode?)");
}

/* The resolved output loads back to the same resolved output. */
static void test_resolved_roundtrip(void) {
  char *ov[] = {"run.name=odd ; name", "task.motion=walk # x"};
  bcg_config *cfg = load_text(
      "[run]\nseed = 5\n[contact]\nplugin = test_contact\nmode = hard\n[task]\nplugin = test_task\n"
      "[sweep]\nsim.substeps = 2, 4\nlearner.layers = 1 | 2\n[learner]\nplugin=test_learner\n",
      2, ov);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  char p1[600], p2[600];
  snprintf(p1, sizeof p1, "%s/r1.ini", tmpdir);
  snprintf(p2, sizeof p2, "%s/r2.ini", tmpdir);
  FILE *f = fopen(p1, "w");
  CU_ASSERT_EQUAL(bcg_config_resolved_write(cfg, f), 0);
  fclose(f);
  bcg_config *c2 = NULL;
  CU_ASSERT_EQUAL_FATAL(bcg_config_load_with(&c2, reg, p1, 0, NULL, err, sizeof err), 0);
  f = fopen(p2, "w");
  CU_ASSERT_EQUAL(bcg_config_resolved_write(c2, f), 0);
  fclose(f);
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(c2, "run", "name"), "odd ; name");
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(c2, "task", "motion"), "walk # x");
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(c2, "contact", "mode"), "hard");
  CU_ASSERT_EQUAL(bcg_config_sweep_count(c2), 2);
  CU_ASSERT_STRING_EQUAL(bcg_config_sweep_value(c2, 1, 1), "2");
  /* same text after the header comments */
  char a[8192] = {0}, b[8192] = {0};
  f = fopen(p1, "r");
  size_t na = fread(a, 1, sizeof a - 1, f);
  fclose(f);
  f = fopen(p2, "r");
  size_t nb = fread(b, 1, sizeof b - 1, f);
  fclose(f);
  CU_ASSERT(na > 0 && nb > 0);
  CU_ASSERT_STRING_EQUAL(strstr(a, "\n[run]"), strstr(b, "\n[run]"));
  CU_ASSERT_PTR_NOT_NULL(strstr(a, "[contact]\nplugin = test_contact\nkappa = 300\n"));
  CU_ASSERT_PTR_NULL(strstr(a, "[estimator]"));
  bcg_config_free(cfg);
  bcg_config_free(c2);
}

/* A plugin created through the services table reads its validated section. */
/* text -> config -> resolved text -> config; the value of [run] name and
 * the sweep's first entry after the round trip (NULL: a load failed) */
static bcg_config *roundtrip(const char *text, int nov, char **ov) {
  bcg_config *cfg = load_text(text, nov, ov);
  if (!cfg) return NULL;
  char p[600];
  snprintf(p, sizeof p, "%s/rt.ini", tmpdir);
  FILE *f = fopen(p, "w");
  int wrc = bcg_config_resolved_write(cfg, f);
  fclose(f);
  bcg_config_free(cfg);
  if (wrc) return NULL;
  bcg_config *back = NULL;
  if (bcg_config_load_with(&back, reg, p, 0, NULL, err, sizeof err)) printf("\n  reload: %s\n", err);
  return back;
}

/* The resolved text loads back to the same values whatever a value holds
 * (found by tests/fuzz/fuzz_config: a value with both kinds of quote was
 * written in single quotes, which iniparser ends at the first one inside;
 * also a sweep value with ';' was written bare, i.e. cut at the comment, a
 * value of a full line got " = " around and no longer fit, and the config
 * path's control characters went into the first comment line); an override
 * whose value no config line can hold is refused. */
static void test_resolved_values(void) {
  bcg_config *c = roundtrip("[run]\nname = x'y\"z w\n", 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(c, "run", "name"), "x'y\"z w");
  bcg_config_free(c);
  c = roundtrip("[run]\nname = \"'quoted' ; name\"\n", 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(c, "run", "name"), "'quoted' ; name");
  bcg_config_free(c);
  c = roundtrip("[run]\nname = 'with \\'\n", 0, NULL); /* ends with a backslash */
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(c, "run", "name"), "with \\");
  bcg_config_free(c);
  c = roundtrip("[sweep]\nrun.name = \"a;b\"\n", 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_STRING_EQUAL(bcg_config_sweep_value(c, 0, 0), "a;b");
  bcg_config_free(c);
  /* a line of 1000 characters: the value alone, and a sweep list */
  static char text[4096];
  char v[1000];
  memset(v, 'n', 994), v[994] = 0;
  snprintf(text, sizeof text, "[run]\nname=%s\n", v); /* 999 characters */
  c = roundtrip(text, 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(c, "run", "name"), v);
  bcg_config_free(c);
  size_t n = (size_t)snprintf(text, sizeof text, "[sweep]\nrun.seed=1");
  while (n < 8 + 999 - 2) n += (size_t)snprintf(text + n, sizeof text - n, ",%d", (int)(n % 10));
  snprintf(text + n, sizeof text - n, "\n");
  c = roundtrip(text, 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT(bcg_config_sweep_nvalues(c, 0) > 400);
  bcg_config_free(c);
  /* the config's path in the first comment */
  setup();
  char odd[600];
  snprintf(odd, sizeof odd, "%s/odd\nname.ini", tmpdir);
  FILE *f = fopen(odd, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("[run]\nseed = 2\n", f);
  fclose(f);
  bcg_config *cfg = NULL;
  CU_ASSERT_EQUAL_FATAL(bcg_config_load_with(&cfg, reg, odd, 0, NULL, err, sizeof err), 0);
  char p[600];
  snprintf(p, sizeof p, "%s/rt2.ini", tmpdir);
  f = fopen(p, "w");
  CU_ASSERT_EQUAL(bcg_config_resolved_write(cfg, f), 0);
  fclose(f);
  bcg_config_free(cfg);
  CU_ASSERT_EQUAL(bcg_config_load_with(&cfg, reg, p, 0, NULL, err, sizeof err), 0);
  bcg_config_free(cfg);
  unlink(odd);
  /* an override ending in '\\' (its "# override:" comment continued over the
   * next line, the [run] header) */
  char *o0[] = {"run.name=a\\\\"};
  c = roundtrip("", 1, o0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_STRING_EQUAL(bcg_config_get_string(c, "run", "name"), "a\\\\");
  bcg_config_free(c);
  /* overrides no line can hold */
  char *o1[] = {"run.name=a'b\";c"};
  expect_error("", 1, o1, "command line: 'run.name=a'b\";c': a value that needs quotes (it holds ';' or '#', or starts "
               "with a quote or ends with '\\') cannot hold both ' and \"");
  static char longov[1200];
  memset(longov, 'x', sizeof longov - 1);
  memcpy(longov, "run.name=", 9);
  longov[1100] = 0;
  char *o2[] = {longov};
  expect_error("", 1, o2, "command line: 'run.name=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...': value too "
               "long (a config line holds 1000 characters)");
}

static void test_services(void) {
  bcg_config *cfg = load_text("[contact]\nplugin = test_contact\nkappa = 77\n", 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  const bcg_services *svc = bcg_services_host();
  CU_ASSERT_EQUAL(svc->abi_version, BCG_ABI_VERSION);
  CU_ASSERT_EQUAL(svc->size, sizeof(bcg_services));
  const bcg_params *p = bcg_config_section(cfg, "contact");
  CU_ASSERT_DOUBLE_EQUAL(svc->get_real(p, "kappa"), 77, 0);
  CU_ASSERT_EQUAL(svc->get_int(p, "iterations"), 10);
  CU_ASSERT_EQUAL(svc->get_bool(p, "verbose"), 0);
  CU_ASSERT_STRING_EQUAL(svc->get_string(p, "mode"), "soft");
  const bcg_contact_ops *ops = bcg_config_plugin(cfg, BCG_KIND_CONTACT)->desc->ops;
  void *self = ops->create(svc, p, NULL, err, sizeof err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(self);
  CU_ASSERT_DOUBLE_EQUAL(*(double *)self, 77, 0); /* test_contact keeps kappa first */
  ops->destroy(self);
  bcg_config_free(cfg);
}

static void test_helpers(void) {
  CU_ASSERT_EQUAL(bcg_levenshtein("kappa", "kappa"), 0);
  CU_ASSERT_EQUAL(bcg_levenshtein("kapa", "kappa"), 1);
  CU_ASSERT_EQUAL(bcg_levenshtein("", "abc"), 3);
  CU_ASSERT_EQUAL(bcg_levenshtein("kitten", "sitting"), 3);
  const char *c[] = {"seed", "substeps", "device"};
  CU_ASSERT_STRING_EQUAL(bcg_closest("sede", c, 3), "seed");
  CU_ASSERT_PTR_NULL(bcg_closest("zzzzzzzzzz", c, 3));
  bcg_key_spec k = {"x", BCG_KEY_REAL, "1", -1, 1, NULL, ""};
  char why[256];
  CU_ASSERT_EQUAL(bcg_key_check(&k, " 0.5 ", why, sizeof why), 0);
  CU_ASSERT_EQUAL(bcg_key_check(&k, "inf", why, sizeof why), -1);
  CU_ASSERT_EQUAL(bcg_key_check(&k, "1e400", why, sizeof why), -1);
  k.type = BCG_KEY_BOOL;
  CU_ASSERT_EQUAL(bcg_key_check(&k, "OFF", why, sizeof why), 0);
  k.type = BCG_KEY_LIST;
  CU_ASSERT_EQUAL(bcg_key_check(&k, "1, -1", why, sizeof why), 0);
  CU_ASSERT_EQUAL(bcg_key_check(&k, "1,", why, sizeof why), -1);
  CU_ASSERT_EQUAL(bcg_key_check(&k, ",1", why, sizeof why), -1);
  CU_ASSERT_EQUAL(bcg_key_check(&k, "1, ,1", why, sizeof why), -1);
  k.type = BCG_KEY_CHOICE;
  k.choices = "a|bb";
  CU_ASSERT_EQUAL(bcg_key_check(&k, "bb", why, sizeof why), 0);
  CU_ASSERT_EQUAL(bcg_key_check(&k, "b", why, sizeof why), -1);
  CU_ASSERT_EQUAL(bcg_key_check(&k, "", why, sizeof why), -1);
  char d[128];
  k.type = BCG_KEY_INT;
  k.min = 0, k.max = HUGE_VAL;
  bcg_key_type_desc(&k, d, sizeof d);
  CU_ASSERT_STRING_EQUAL(d, "int in [0, inf]");
  CU_ASSERT_EQUAL(bcg_section_kind("task"), BCG_KIND_TASK);
  CU_ASSERT_EQUAL(bcg_section_kind("run"), 0);
  /* every core default passes its own check */
  for (int i = 0; i < bcg_core_section_count(); i++) {
    int n;
    const bcg_key_spec *ks = bcg_core_keys(bcg_core_section_name(i), &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ks);
    for (int j = 0; j < n; j++) {
      int ok = ks[j].def && bcg_key_check(&ks[j], ks[j].def, why, sizeof why) == 0;
      if (!ok) printf("\n  core key [%s] %s: %s\n", bcg_core_section_name(i), ks[j].name, why);
      CU_ASSERT(ok);
    }
  }
}

/* ---- fuzz ------------------------------------------------------------------ */

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return rs;
}

static const char *const pieces[] = {
    "[run]\n", "[sim]\n", "[contact]\n", "[sweep]\n", "[task]\n", "[learner]\n", "[eval]\n", "[model]\n",
    "[", "]", "[[run]]\n", "[run\n", "run]\n", "seed = 1\n", "seed = x\n", "seed=\n", "=\n", "name = \"a\n",
    "name = 'a'\n", "plugin = test_contact\n", "plugin = test_task\n", "plugin = test_learner\n",
    "plugin = nope\n", "kappa = 1e300\n", "kappa = -0\n", "layers = 1,2,3\n", "layers = ,\n",
    "contact.kappa = 1, 2\n", "a.b.c = 1\n", "sim.substeps = 1|2\n", "; c\n", "# c\n", "\\\n", "\n", "\r\n",
    "\t", " ", "motion = m\n", "substeps = 99999999999999999999\n", "control_dt = 1e-400\n", "mode = zip\n",
    "device = cuda\n", "verbose = on\n", "x = \"unterminated\n", "k = v ; # ;\n", "[ run ]\n", "[RUN]\n",
    "seed = 1\\\n2\n", "\xc3\xa9\n", "name = \xff\xfe\n",
};
#define NPIECES ((int)(sizeof pieces / sizeof pieces[0]))

static void fuzz_one(int kind, char *buf, size_t cap, size_t *len) {
  size_t n = 0;
  if (kind == 0) { /* random bytes */
    size_t m = rnd() % 600;
    for (size_t i = 0; i < m && n < cap; i++) buf[n++] = (char)(rnd() & 0xff);
  } else if (kind == 1) { /* random printable + newlines + brackets */
    size_t m = rnd() % 800;
    static const char al[] = "[]=;#\\\"' \t\nabcdefgrunsim.,01-+e|_";
    for (size_t i = 0; i < m && n < cap; i++) buf[n++] = al[rnd() % (sizeof al - 1)];
  } else if (kind == 2) { /* pieces of plausible INI, possibly truncated */
    int m = (int)(rnd() % 30);
    for (int i = 0; i < m; i++) {
      const char *p = pieces[rnd() % NPIECES];
      size_t l = strlen(p);
      if (rnd() % 8 == 0) l = rnd() % (l + 1);
      if (n + l >= cap) break;
      memcpy(buf + n, p, l);
      n += l;
    }
  } else if (kind == 4) { /* well-formed sections, random values */
    static const char *const lines[] = {
        "[run]\n", "seed = %d\n", "num_envs = %d\n", "[sim]\n", "substeps = %d\n", "kp = %d.5\n",
        "[contact]\nplugin = test_contact\n", "kappa = %d\n", "iterations = %d\n",
        "[learner]\nplugin = test_learner\n", "layers = %d,%d\n", "[sweep]\n", "run.seed = %d, %d\n",
        "[task]\nplugin = test_task\nmotion = m%d\n", "[eval]\n", "episodes = %d\n"};
    int m = (int)(rnd() % 12);
    for (int i = 0; i < m; i++) {
      int a = (int)(rnd() % 2000) - 10, b = (int)(rnd() % 100);
      int w = snprintf(buf + n, cap - n, lines[rnd() % (sizeof lines / sizeof lines[0])], a, b);
      if (w < 0 || (size_t)w >= cap - n) break;
      n += (size_t)w;
    }
  } else { /* huge lines */
    const char *h = "[run]\nname = ";
    memcpy(buf, h, strlen(h));
    n = strlen(h);
    size_t m = 900 + rnd() % 3000;
    for (size_t i = 0; i < m && n < cap; i++) buf[n++] = (rnd() % 50 == 0) ? '\\' : 'a';
    if (rnd() % 2 && n < cap) buf[n++] = '\n';
  }
  *len = n;
}

static void test_fuzz(void) {
  setup();
  char path[512];
  snprintf(path, sizeof path, "%s/fuzz.ini", tmpdir);
  static char buf[8192];
  int ok = 0, bad = 0;
  FILE *devnull = fopen("/dev/null", "w");
  for (int it = 0; it < 3000; it++) {
    size_t n;
    fuzz_one(it % 5, buf, sizeof buf, &n);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    fwrite(buf, 1, n, f);
    fclose(f);
    /* random overrides, some malformed */
    char ovbuf[4][64];
    char *ov[4];
    int nov = (int)(rnd() % 3);
    if (it % 5 == 4) nov = 0;
    for (int i = 0; i < nov; i++) {
      const char *p = pieces[rnd() % NPIECES];
      snprintf(ovbuf[i], sizeof ovbuf[i], "%s%s", rnd() % 2 ? "run." : "contact.", p);
      char *nl = strchr(ovbuf[i], '\n');
      if (nl) *nl = 0;
      ov[i] = ovbuf[i];
    }
    bcg_config *cfg = NULL;
    err[0] = 0;
    int rc = bcg_config_load_with(&cfg, reg, path, nov, ov, err, sizeof err);
    if (rc == 0) {
      CU_ASSERT_PTR_NOT_NULL(cfg);
      bcg_config_resolved_write(cfg, devnull);
      ok++;
    } else {
      CU_ASSERT_PTR_NULL(cfg);
      /* every error is one non-empty line */
      CU_ASSERT(err[0] != 0);
      CU_ASSERT_PTR_NULL(strchr(err, '\n'));
      bad++;
    }
    bcg_config_free(cfg);
  }
  fclose(devnull);
  bcg_test_report("fuzz cases accepted", ok);
  bcg_test_report("fuzz cases rejected", bad);
  CU_ASSERT(ok > 10 && bad > 1000);
}

static void test_cleanup(void) {
  bcg_registry_free(reg);
  reg = NULL;
}

BCG_TESTS({"defaults", test_defaults}, {"values and line numbers", test_values_and_lines},
          {"key and value errors", test_errors_keys}, {"syntax errors", test_errors_syntax},
          {"plugin sections", test_plugin_sections}, {"overrides", test_overrides}, {"sweep", test_sweep},
          {"resolved round trip", test_resolved_roundtrip}, {"services", test_services}, {"helpers", test_helpers},
          {"resolved values", test_resolved_values}, {"fuzz", test_fuzz}, {"cleanup", test_cleanup});
BCG_RUN("config")
