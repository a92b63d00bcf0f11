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
int main(void) {
  static bcg_test all[16];
  int n = (int)(sizeof bcg_tests_ / sizeof bcg_tests_[0]);
  memcpy(all, bcg_tests_, sizeof bcg_tests_);
  all[n].name = "emu: contact plugins as CUDA entry points"; all[n].fn = test_emu_plugins;
  return bcg_test_main("cuda-emu", all, n + 1);
}
