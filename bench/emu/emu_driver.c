/* bench/emu/emu_driver.c - tests/test_cuda.c on the emulated device (bench/emu/run.sh),
 * plus the contact plugins' CPU solves dressed up as CUDA entry points */
#include "testutil.h"
#undef BCG_RUN
#define BCG_RUN(suite)
#include "test_cuda.c"

static const bcg_contact_ops *inner;
static int w_solve(void *self, bcg_contact_batch *b, void *st) { (void)st; return inner->solve(self, b); }
static int w_vjp(void *self, const bcg_contact_batch *b, bcg_contact_adjoint *a, void *st) {
  (void)st; return inner->solve_vjp(self, b, a);
}
static void test_emu_plugins(void) {
  if (!humanoid()) { CU_FAIL("model"); return; }
  const char *names[] = {"smoothed_kappa", "soft", "hard"};
  for (int i = 0; i < 3; i++) {
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/plugins/%s.so", bcg_test_build_dir(), names[i]);
    pd_plugin pl;
    if (pd_load_contact(path, model, &pl, err, sizeof err)) { printf("\n  %s: %s", names[i], err); continue; }
    inner = pl.ops;
    bcg_contact_ops w = *pl.ops;
    w.solve_cuda = w_solve; w.solve_vjp_cuda = w_vjp;
    bcg_simparams sp; bcg_simparams_default(model, &sp);
    sp.need_G = (pl.desc->caps & BCG_CAP_NEEDS_DELASSUS) != 0;
    cmp_result r; char label[96];
    snprintf(label, sizeof label, "emu %s, motor, floor", pl.desc->name);
    compare(label, &sp, &w, pl.self, NENV, 0, &r);
    CU_ASSERT(r.nact_cpu > 0);
    sp.actuation = BCG_ACTUATION_PD;
    snprintf(label, sizeof label, "emu %s, PD, mixed", pl.desc->name);
    compare(label, &sp, &w, pl.self, 77, 2, &r);
    pd_unload(&pl);
  }
}
/* Training with device = cuda (test_train_gradient*): the config system
 * creates the contact plugins, so the emulation registers copies of their
 * descriptors whose ops carry the CPU solves as CUDA entry points, before
 * the build's .so files are scanned (the first of a name wins). */
#define EMU_WRAP(i)                                                                                    \
  static const bcg_contact_ops *inner##i;                                                              \
  static int w_solve##i(void *self, bcg_contact_batch *b, void *st) { (void)st; return inner##i->solve(self, b); } \
  static int w_vjp##i(void *self, const bcg_contact_batch *b, bcg_contact_adjoint *a, void *st) {      \
    (void)st; return inner##i->solve_vjp(self, b, a);                                                  \
  }
EMU_WRAP(0)
EMU_WRAP(1)
EMU_WRAP(2)
static void emu_registry(bcg_registry *reg) {
  static const char *names[] = {"smoothed_kappa", "soft", "hard"};
  static bcg_plugin_desc desc[3];
  static bcg_contact_ops ops[3];
  const bcg_contact_ops **inner[3] = {&inner0, &inner1, &inner2};
  int (*ws[3])(void *, bcg_contact_batch *, void *) = {w_solve0, w_solve1, w_solve2};
  int (*wv[3])(void *, const bcg_contact_batch *, bcg_contact_adjoint *, void *) = {w_vjp0, w_vjp1, w_vjp2};
  for (int i = 0; i < 3; i++) {
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/plugins/%s.so", bcg_test_build_dir(), names[i]);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    bcg_plugin_entry_fn f = h ? (bcg_plugin_entry_fn)dlsym(h, BCG_PLUGIN_ENTRY_SYMBOL) : NULL;
    if (!f) { printf("\n  emu: %s: %s", names[i], h ? "no entry" : dlerror()); continue; }
    desc[i] = *f();
    *inner[i] = desc[i].ops;
    ops[i] = *(*inner[i]);
    ops[i].solve_cuda = ws[i];
    ops[i].solve_vjp_cuda = wv[i];
    desc[i].ops = &ops[i];
    desc[i].caps |= BCG_CAP_CUDA;
    if (bcg_registry_add(reg, &desc[i], path, err, sizeof err)) printf("\n  emu: %s", err);
  }
}

int main(void) {
  train_registry_hook = emu_registry;
  static bcg_test all[16];
  int n = (int)(sizeof bcg_tests_ / sizeof bcg_tests_[0]);
  memcpy(all, bcg_tests_, sizeof bcg_tests_);
  all[n].name = "emu: contact plugins as CUDA entry points"; all[n].fn = test_emu_plugins;
  return bcg_test_main("cuda-emu", all, n + 1);
}
