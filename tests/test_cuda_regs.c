/* test_cuda_regs.c - a static check of the GPU kernels' resources, with no
 * GPU: every kernel of the CUDA stepper (the .cu files of core/cuda), of the built-in
 * contact models and of the SDK examples with CUDA parts is compiled for
 * sm_90 with `nvcc -Xptxas -v`, in float and in double, and ptxas's report
 * is read: registers per thread at most REGS_FLOAT (float) / REGS_DOUBLE
 * (double), and no spill stores.
 *
 * Why: one thread per environment makes the kernels latency-bound, so the
 * warps an SM can hold (65 536 registers / registers per thread) decide
 * their speed. The continuous step near the floor brought a ten-step Newton
 * solve whose full unrolling took the contact solver's adjoint kernel from
 * 64 to 230 registers (255 with spills in double) and doubled the contact
 * stages' time on the H200 without any test noticing (docs/performance.md
 * section 2.1). The budgets sit above today's largest kernels (105 float,
 * 160 double) and far below that.
 *
 * Skipped where nvcc is not found (NVCC, PATH, /usr/local/cuda/bin/nvcc).
 * Deterministic for an nvcc version; no timing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define REGS_FLOAT 128
#define REGS_DOUBLE 168

static char nvcc[512];

static int find_nvcc(void) {
  const char *e = getenv("NVCC");
  if (e && *e) {
    snprintf(nvcc, sizeof nvcc, "%s", e);
    return 1;
  }
  FILE *p = popen("command -v nvcc 2>/dev/null || (test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc)",
                  "r");
  if (!p) return 0;
  if (!fgets(nvcc, sizeof nvcc, p)) nvcc[0] = 0;
  pclose(p);
  nvcc[strcspn(nvcc, "\n")] = 0;
  return nvcc[0] != 0;
}

typedef struct src {
  const char *file, *flags;
} src;

static const src sources[] = {
    {"core/cuda/sim_cuda.cu", ""},
    {"core/cuda/nn_cuda.cu", ""},
    {"contact_models/smoothed_kappa.c", "-x cu"},
    {"contact_models/hard.c", "-x cu"},
    {"contact_models/soft.c", "-x cu"},
    {"plugins/example/hunt_crossley.c", "-x cu -DHC_CUDA_KERNELS"},
    {"plugins/example/clip_autodiff.c", "-x cu -DCE_CUDA_KERNELS"},
};

/* compile one source in one precision; checks every kernel ptxas reports;
 * returns the number of kernels seen (-1: the compile failed) */
static int check_source(const src *s, int dbl, int *worst_regs) {
  char cmd[2048], obj[512];
  snprintf(obj, sizeof obj, "%s/k.o", bcg_test_tmpdir());
  snprintf(cmd, sizeof cmd,
           "'%s' -O2 -std=c++17 -Xcompiler -fPIC %s -Icore/include -Icore -DBCG_HAVE_CUDA --expt-relaxed-constexpr "
           "-gencode arch=compute_90,code=sm_90 -Xptxas -v %s -c %s -o '%s' 2>&1",
           nvcc, dbl ? "" : "-DBCG_REAL_FLOAT", s->flags, s->file, obj);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  char line[1024], kernel[256] = "";
  int n = 0, spill = 0, limit = dbl ? REGS_DOUBLE : REGS_FLOAT;
  while (fgets(line, sizeof line, p)) {
    const char *k = strstr(line, "Compiling entry function '");
    if (k) {
      k += strlen("Compiling entry function '");
      size_t len = strcspn(k, "'");
      if (len >= sizeof kernel) len = sizeof kernel - 1;
      memcpy(kernel, k, len);
      kernel[len] = 0;
      spill = 0;
      continue;
    }
    const char *sp = strstr(line, "bytes spill stores");
    if (sp && kernel[0]) { /* "N bytes stack frame, S bytes spill stores, ..." of the current entry */
      const char *c = strstr(line, "stack frame, ");
      if (c) spill = atoi(c + strlen("stack frame, "));
      continue;
    }
    const char *u = strstr(line, "Used ");
    if (u && kernel[0]) {
      int regs = atoi(u + 5);
      n++;
      if (regs > *worst_regs) *worst_regs = regs;
      printf("\n  %-7s %-32s %4d registers, %d bytes spilled  %.60s", dbl ? "double" : "float", s->file, regs, spill,
             kernel);
      if (regs > limit || spill > 0) {
        printf("  <- over the budget (%d registers, no spills)", limit);
        CU_FAIL("a kernel over its register budget or spilling");
      }
      kernel[0] = 0;
    }
  }
  int rc = pclose(p);
  return rc == 0 ? n : -1;
}

static void test_budgets(void) {
  if (!find_nvcc()) {
    bcg_test_skip("nvcc not found");
    return;
  }
  int worst[2] = {0, 0}, total = 0;
  for (int dbl = 0; dbl < 2; dbl++)
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
      int n = check_source(&sources[i], dbl, &worst[dbl]);
      if (n < 0) printf("\n  %s (%s): nvcc failed", sources[i].file, dbl ? "double" : "float");
      CU_ASSERT(n > 0); /* it compiled and has kernels */
      total += n > 0 ? n : 0;
    }
  CU_ASSERT(total >= 40);
  bcg_test_report("GPU kernels: most registers per thread, float", worst[0]);
  bcg_test_report("GPU kernels: most registers per thread, double", worst[1]);
}

BCG_TESTS({"GPU kernels within their register budgets, no spills (ptxas, sm_90)", test_budgets});
BCG_RUN("cuda_regs")
