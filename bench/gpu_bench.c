/* bench/gpu_bench.c - physics substeps per second of the CUDA batched
 * stepper (bcg/sim_cuda.h) on humanoid.xml, against the CPU one (bcg/sim.h,
 * all OpenMP threads) of the same build.
 *
 *   gpu_bench [--plugin PATH|none] [--sizes 256,1024,...] [--cpu-sizes 1024,4096]
 *             [--seconds S] [--substeps K]
 *
 * For each batch size n: forward = one control step with its tape
 * (K substeps, motor actuation, random actions), forward+backward = that plus
 * the control-step VJP. Rates are environment-substeps per second,
 * n * K / time. GPU times are CUDA events around back-to-back asynchronous
 * control steps after warm-up, the median of 5 rounds; each round is sized to
 * about S/5 seconds. Then a pass with per-stage events (each stage waits for
 * the previous: slightly slower in total) splits one substep into the pre,
 * contact and post kernels (backward: the recompute's pre, contact, post +
 * post_vjp, the contact VJP and pre_vjp). CPU rates are wall-clock over the
 * same work, median of 3 rounds.
 *
 * States: half the environments airborne, half standing with the feet in the
 * floor (same recipe as tests/test_cuda.c); the batch is re-drawn from these
 * fixed states for every round, so contact counts stay comparable.
 *
 * Reference, measured in the same run: MuJoCo's own mj_step on the same
 * model, one thread, from the same states (the median over the first 64 of
 * them, each stepped for 200 steps), and that rate times the CPU's OpenMP
 * threads (ideal scaling: what MuJoCo on every core would reach at best).
 * Each GPU and CPU row prints its forward rate as a multiple of both. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bcg/mjref.h"
#include "bcg/sim.h"
#include "bcg/sim_cuda.h"
#include "plugin_defaults.h"


#define TEST_RNG_SEED 0x2545F4914F6CDD1Dull
#include "teststate.h"

static void random_state(const bcg_mdata *m, int airborne, bcg_real *q, bcg_real *u) {
  test_state_pose(m, q, 0.15);
  test_state_place(m, q, airborne ? 0.05 + 0.45 * urand() : -0.01 + 0.012 * urand());
  test_state_vel(m, u, airborne ? 1.0 : 0.3);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, n, sizeof *v, cmpd);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
static int parse_list(const char *s, int *out, int cap) {
  int n = 0;
  while (s && *s && n < cap) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s) break;
    out[n++] = (int)v;
    s = end;
    while (*s == ',') s++;
  }
  return n;
}

#define DIE(...) do { fprintf(stderr, "gpu_bench: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define PROGRESS(...) do { fprintf(stderr, __VA_ARGS__); fflush(stderr); } while (0)

typedef struct bufs {
  bcg_real *q, *u, *a, *qo, *uo, *tape, *xob, *xb, *ab;
} bufs;

/* one timed unit: forward (control step with tape) or forward + backward */
static int gpu_unit(bcg_cuda_sim *s, const bufs *d, int n, int bwd) {
  int rc = bcg_cuda_sim_control_step(s, n, d->q, d->u, d->a, d->qo, d->uo, d->tape);
  if (!rc && bwd) rc = bcg_cuda_sim_control_step_vjp(s, n, d->tape, d->a, d->xob, d->xb, d->ab);
  return rc;
}
static int cpu_unit(bcg_sim *s, const bufs *h, int n, int bwd) {
  int rc = bcg_sim_control_step(s, n, h->q, h->u, h->a, h->qo, h->uo, h->tape);
  if (!rc && bwd) rc = bcg_sim_control_step_vjp(s, n, h->tape, h->a, h->xob, h->xb, h->ab);
  return rc;
}

/* What every section of the benchmark shares. */
typedef struct bench {
  const bcg_model *model;
  const bcg_mdata *m;
  bcg_simparams sp;
  const bcg_contact_ops *cops;
  void *cself;
  const char *pname;
  int nq, nv, nu, nthr;
  size_t sx;
  double seconds, mj; /* seconds per measurement; MuJoCo's steps/s on one thread */
  bufs h;             /* host states, actions and adjoint seeds */
  int slices;         /* the CPU control step in one parallel region (BCG_CAP_SLICES, or no plugin) */
} bench;

/* MuJoCo's mj_step on one thread, same model and states: the median over up
 * to 64 states of steps per second. */
static double mujoco_reference(const bench *B, int nmax) {
  const bcg_model *model = B->model;
  int nq = B->nq, nv = B->nv;
  const bufs h = B->h;
  double mj = 0;
  bcg_mjref *r = bcg_mjref_new(model, 0);
  if (!r) DIE("cannot create the MuJoCo reference");
  int ns = nmax < 64 ? nmax : 64;
  double rates[64], qd[BCG_MAX_Q], ud[BCG_MAX_DOF];
  for (int e = 0; e < ns; e++) {
    for (int i = 0; i < nq; i++) qd[i] = h.q[(size_t)e * nq + i];
    for (int i = 0; i < nv; i++) ud[i] = h.u[(size_t)e * nv + i];
    if (e == 0) bcg_mjref_steps_per_sec(r, qd, ud, NULL, 200); /* warm-up */
    rates[e] = bcg_mjref_steps_per_sec(r, qd, ud, NULL, 200);
  }
  mj = median(rates, ns);
  bcg_mjref_free(r);
  return mj;
}

/* The CUDA stepper at each size: forward and forward+backward rates, then
 * the per-stage times. */
static void gpu_section(bench *B, const int *sizes, int nsizes) {
  const bcg_model *model = B->model;
  const bcg_simparams sp = B->sp;
  const bcg_contact_ops *cops = B->cops;
  void *cself = B->cself;
  const char *pname = B->pname;
  int nq = B->nq, nv = B->nv, nu = B->nu, nthr = B->nthr;
  size_t sx = B->sx;
  double seconds = B->seconds, mj = B->mj;
  const bufs h = B->h;
  char err[1024];
  int gmax = 1;
  for (int i = 0; i < nsizes; i++) if (sizes[i] > gmax) gmax = sizes[i];
  PROGRESS("[gpu_bench %s %s] creating a CUDA sim for %d envs...\n", BCG_REAL_NAME, pname, gmax);
  bcg_cuda_sim *gs = bcg_cuda_sim_create(model, &sp, gmax, cops, cself, err, sizeof err);
  if (!gs) DIE("%s", err);
  bcg_cuda_sim_set_async(gs, 1);
  bufs d;
  d.q = bcg_cuda_malloc(sizeof(bcg_real) * gmax * nq); d.u = bcg_cuda_malloc(sizeof(bcg_real) * gmax * nv);
  d.a = bcg_cuda_malloc(sizeof(bcg_real) * gmax * nu); d.qo = bcg_cuda_malloc(sizeof(bcg_real) * gmax * nq);
  d.uo = bcg_cuda_malloc(sizeof(bcg_real) * gmax * nv);
  d.tape = bcg_cuda_malloc(sizeof(bcg_real) * sp.substeps * gmax * sx);
  d.xob = bcg_cuda_malloc(sizeof(bcg_real) * gmax * 2 * nv); d.xb = bcg_cuda_malloc(sizeof(bcg_real) * gmax * 2 * nv);
  d.ab = bcg_cuda_malloc(sizeof(bcg_real) * gmax * nu);
  if (!d.q || !d.u || !d.a || !d.qo || !d.uo || !d.tape || !d.xob || !d.xb || !d.ab) DIE("out of device memory");
  if (bcg_cuda_copy(d.q, h.q, sizeof(bcg_real) * gmax * nq) || bcg_cuda_copy(d.u, h.u, sizeof(bcg_real) * gmax * nv) ||
      bcg_cuda_copy(d.a, h.a, sizeof(bcg_real) * gmax * nu) ||
      bcg_cuda_copy(d.xob, h.xob, sizeof(bcg_real) * gmax * 2 * nv) ||
      bcg_cuda_memset(d.ab, 0, sizeof(bcg_real) * gmax * nu))
    DIE("copy to the device failed");
  bcg_cuda_event *e0 = bcg_cuda_event_new(), *e1 = bcg_cuda_event_new();
  if (!e0 || !e1) DIE("cudaEventCreate failed");

  printf("\n## GPU (%s, block %d): env-substeps per second; time per control step (%d substeps)\n", BCG_REAL_NAME,
         bcg_cuda_sim_block(gs), sp.substeps);
  printf("%-8s %14s %12s %14s %12s %8s %10s %10s %10s\n", "n", "fwd/s", "fwd ms", "fwd+bwd/s", "f+b ms", "bwd/fwd",
         "contacts", "fwd/mj1", "fwd/mjall");
  double stage_f[16][BCG_CUDA_NSTAGE], stage_b[16][BCG_CUDA_NSTAGE];
  for (int si = 0; si < nsizes; si++) {
    int n = sizes[si];
    double res[2];
    for (int bwd = 0; bwd < 2; bwd++) {
      PROGRESS("[gpu_bench %s %s] n=%d %s...\n", BCG_REAL_NAME, pname, n, bwd ? "fwd+bwd" : "fwd");
      /* warm-up (module load, plugin's memory pool), then size the rounds */
      for (int w = 0; w < 2; w++)
        if (gpu_unit(gs, &d, n, bwd)) DIE("control step failed: %s", bcg_cuda_sim_error(gs));
      if (bcg_cuda_sim_sync(gs)) DIE("%s", bcg_cuda_sim_error(gs));
      bcg_cuda_event_record(e0, gs);
      gpu_unit(gs, &d, n, bwd);
      bcg_cuda_event_record(e1, gs);
      double t1 = bcg_cuda_event_ms(e0, e1) * 1e-3;
      int reps = (int)(seconds / 5 / fmax(t1, 1e-6));
      if (reps < 2) reps = 2;
      if (reps > 200) reps = 200;
      double rounds[5];
      for (int r = 0; r < 5; r++) {
        bcg_cuda_event_record(e0, gs);
        for (int k = 0; k < reps; k++)
          if (gpu_unit(gs, &d, n, bwd)) DIE("control step failed: %s", bcg_cuda_sim_error(gs));
        bcg_cuda_event_record(e1, gs);
        rounds[r] = bcg_cuda_event_ms(e0, e1) * 1e-3 / reps;
      }
      if (bcg_cuda_sim_sync(gs)) DIE("%s", bcg_cuda_sim_error(gs));
      res[bwd] = median(rounds, 5);
      /* per-stage pass */
      bcg_cuda_sim_set_timing(gs, 1);
      int sreps = reps < 5 ? reps : 5;
      for (int k = 0; k < sreps; k++) gpu_unit(gs, &d, n, bwd);
      double ms[BCG_CUDA_NSTAGE];
      bcg_cuda_sim_stage_ms(gs, ms);
      bcg_cuda_sim_set_timing(gs, 0);
      for (int st = 0; st < BCG_CUDA_NSTAGE; st++)
        (bwd ? stage_b : stage_f)[si][st] = ms[st] / (sreps * sp.substeps);
    }
    int nact_sum = 0;
    int *na = malloc(sizeof(int) * n);
    if (na && bcg_cuda_sim_nactive(gs, n, na) == 0)
      for (int e = 0; e < n; e++) nact_sum += na[e];
    free(na);
    double fr = n * sp.substeps / res[0];
    printf("%-8d %14.4g %12.4f %14.4g %12.4f %8.2f %10.2f %10.1f %10.2f\n", n, fr, res[0] * 1e3,
           n * sp.substeps / res[1], res[1] * 1e3, res[1] / res[0] - 1, (double)nact_sum / n, fr / mj,
           fr / (mj * nthr));
    fflush(stdout);
  }
  printf("\n## GPU per-stage time per substep (ms; events around each stage, the stream drained in between)\n");
  printf("%-8s %9s %9s %9s | %9s %9s %9s %9s %9s\n", "n", "pre", "contact", "post", "pre(rc)", "contact",
         "post+vjp", "c.vjp", "pre_vjp");
  for (int si = 0; si < nsizes; si++) {
    /* the forward+backward pass also ran one forward control step: subtract it */
    double *f = stage_f[si], *b = stage_b[si];
    printf("%-8d %9.4f %9.4f %9.4f | %9.4f %9.4f %9.4f %9.4f %9.4f\n", sizes[si], f[0], f[1], f[2],
           b[0] - f[0], b[1] - f[1], b[2] - f[2], b[3], b[4]);
  }
  bcg_cuda_event_free(e0);
  bcg_cuda_event_free(e1);
  bcg_cuda_free(d.q); bcg_cuda_free(d.u); bcg_cuda_free(d.a); bcg_cuda_free(d.qo); bcg_cuda_free(d.uo);
  bcg_cuda_free(d.tape); bcg_cuda_free(d.xob); bcg_cuda_free(d.xb); bcg_cuda_free(d.ab);
  bcg_cuda_sim_free(gs);
}

/* The CPU stepper (bcg_sim, OpenMP) at each size. */
static void cpu_section(bench *B, const int *cpus, int ncpus) {
  const bcg_model *model = B->model;
  const bcg_simparams sp = B->sp;
  bufs h = B->h;
  double seconds = B->seconds, mj = B->mj;
  int nthr = B->nthr;
  const bcg_contact_ops *cops = B->cops;
  void *cself = B->cself;
  const char *pname = B->pname;
  char err[1024];
  int cmax = 1;
  for (int i = 0; i < ncpus; i++) if (cpus[i] > cmax) cmax = cpus[i];
  bcg_sim *cs = bcg_sim_create(model, &sp, cmax, cops, cself, err, sizeof err);
  if (!cs) DIE("%s", err);
  bcg_sim_set_slices(cs, B->slices); /* as the env sets it */
  printf("\n## CPU (bcg_sim, %d threads, %s, %s): env-substeps per second\n", omp_get_max_threads(), BCG_REAL_NAME,
         B->slices ? "one parallel region per control step" : "regions per substep");
  printf("%-8s %14s %12s %14s %12s %10s %10s\n", "n", "fwd/s", "fwd ms", "fwd+bwd/s", "f+b ms", "fwd/mj1",
         "fwd/mjall");
  for (int ci = 0; ci < ncpus; ci++) {
    int n = cpus[ci];
    double res[2];
    for (int bwd = 0; bwd < 2; bwd++) {
      PROGRESS("[gpu_bench %s %s] CPU n=%d %s...\n", BCG_REAL_NAME, pname, n, bwd ? "fwd+bwd" : "fwd");
      if (cpu_unit(cs, &h, n, bwd)) DIE("CPU control step failed");
      double t0 = now();
      cpu_unit(cs, &h, n, bwd);
      double t1 = now() - t0;
      int reps = (int)(seconds / 3 / fmax(t1, 1e-6));
      if (reps < 1) reps = 1;
      if (reps > 100) reps = 100;
      double rounds[3];
      for (int r = 0; r < 3; r++) {
        t0 = now();
        for (int k = 0; k < reps; k++) cpu_unit(cs, &h, n, bwd);
        rounds[r] = (now() - t0) / reps;
      }
      res[bwd] = median(rounds, 3);
    }
    double fr = n * sp.substeps / res[0];
    printf("%-8d %14.4g %12.4f %14.4g %12.4f %10.1f %10.2f\n", n, fr, res[0] * 1e3, n * sp.substeps / res[1],
           res[1] * 1e3, fr / mj, fr / (mj * nthr));
    fflush(stdout);
  }
  bcg_sim_free(cs);
}

int main(int argc, char **argv) {
  const char *plugin = "none";
  int sizes[16] = {256, 1024, 4096, 16384, 65536}, nsizes = 5;
  int cpus[16] = {1024, 4096}, ncpus = 2;
  double seconds = 0.5;
  int substeps = 4;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--plugin") && i + 1 < argc) plugin = argv[++i];
    else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) nsizes = parse_list(argv[++i], sizes, 16);
    else if (!strcmp(argv[i], "--cpu-sizes") && i + 1 < argc) ncpus = parse_list(argv[++i], cpus, 16);
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--substeps") && i + 1 < argc) substeps = atoi(argv[++i]);
    else DIE("unknown argument '%s'", argv[i]);
  }
  char err[1024];
  const char *mpath = bcg_model_default_path();
  bcg_model *model = bcg_model_load(mpath, err, sizeof err);
  if (!model) DIE("%s", err);
  const bcg_mdata *m = &model->m;
  int nq = m->nq, nv = m->nv, nu = m->nu;
  size_t sx = (size_t)nq + nv;

  pd_plugin pl;
  memset(&pl, 0, sizeof pl);
  const bcg_contact_ops *cops = NULL;
  void *cself = NULL;
  const char *pname = "none";
  if (strcmp(plugin, "none") != 0) {
    if (pd_load_contact(plugin, model, &pl, err, sizeof err)) DIE("%s", err);
    cops = pl.ops;
    cself = pl.self;
    pname = pl.desc->name;
  }
  bcg_simparams sp;
  bcg_simparams_default(model, &sp);
  sp.substeps = substeps;
  if (cops) sp.need_G = (pl.desc->caps & BCG_CAP_NEEDS_DELASSUS) != 0;

  char info[512];
  bcg_cuda_device_info(info, sizeof info);
  int have_gpu = bcg_cuda_available(err, sizeof err);
  if (have_gpu && cops && !pd_has_cuda(&pl)) {
    have_gpu = 0;
    snprintf(err, sizeof err, "contact plugin '%s' has no CUDA entry points", pname);
  }
  printf("## humanoid.xml (nq %d, nv %d, nu %d, %d contact slots), %s, contact plugin: %s, %d substeps of %g s, "
         "ncmax %d\n",
         nq, nv, nu, m->ncp, BCG_REAL_NAME, pname, sp.substeps, (double)sp.dt, cops ? sp.ncmax : 0);
  printf("## device: %s\n", info);
  printf("## CPU: %d OpenMP threads; workspace per env: %zu + %zu bytes (bcg_stepws + bcg_stepadj)\n",
         omp_get_max_threads(), sizeof(bcg_stepws), sizeof(bcg_stepadj));

  int nmax = 1;
  for (int i = 0; i < nsizes; i++) if (sizes[i] > nmax) nmax = sizes[i];
  for (int i = 0; i < ncpus; i++) if (cpus[i] > nmax) nmax = cpus[i];
  /* host data: fixed states/actions/adjoint seeds for nmax environments */
  bufs h;
  h.q = malloc(sizeof(bcg_real) * nmax * nq); h.u = malloc(sizeof(bcg_real) * nmax * nv);
  h.a = malloc(sizeof(bcg_real) * nmax * nu); h.qo = malloc(sizeof(bcg_real) * nmax * nq);
  h.uo = malloc(sizeof(bcg_real) * nmax * nv); h.tape = malloc(sizeof(bcg_real) * sp.substeps * nmax * sx);
  h.xob = malloc(sizeof(bcg_real) * nmax * 2 * nv); h.xb = malloc(sizeof(bcg_real) * nmax * 2 * nv);
  h.ab = calloc((size_t)nmax * nu, sizeof(bcg_real));
  if (!h.q || !h.u || !h.a || !h.qo || !h.uo || !h.tape || !h.xob || !h.xb || !h.ab) DIE("out of host memory");
  for (int e = 0; e < nmax; e++) {
    random_state(m, e % 2, h.q + (size_t)e * nq, h.u + (size_t)e * nv);
    for (int i = 0; i < nu; i++) h.a[(size_t)e * nu + i] = (bcg_real)(0.8 * (2 * urand() - 1));
    for (int i = 0; i < 2 * nv; i++) h.xob[(size_t)e * 2 * nv + i] = (bcg_real)nrand();
  }

  bench B = {model, m, sp, cops, cself, pname, nq, nv, nu, omp_get_max_threads(), sx, seconds, 0, h,
             !cops || (pl.desc->caps & BCG_CAP_SLICES) != 0};
  double mj = B.mj = mujoco_reference(&B, nmax);
  int nthr = omp_get_max_threads();
  printf("## reference: MuJoCo mj_step, 1 thread, same model and states: %.4g steps/s; x %d threads (ideal "
         "scaling): %.4g steps/s\n",
         mj, nthr, mj * nthr);

  if (have_gpu) gpu_section(&B, sizes, nsizes);
  else printf("\n## GPU: not run (%s)\n", err);

  if (ncpus > 0) cpu_section(&B, cpus, ncpus);
  if (cops) pd_unload(&pl);
  bcg_model_free(model);
  return 0;
}
