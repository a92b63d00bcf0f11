/* cmd_bench.c - `bcg bench`: physics steps per second on the CPU beside
 * MuJoCo's own mj_step on the same model and state, measured in the same run.
 *
 * Unit: one substep at the model's timestep (the same unit as one mj_step).
 * Forward = bcg_sim_substep; forward+backward = a substep plus its adjoint
 * (which recomputes the substep from its saved input, as training does).
 * The state is the model's default pose standing on the floor (lowest
 * contact point 1 mm deep), zero action, PD actuation holding the pose. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <mujoco/mujoco.h>

#include "bcg/config.h"
#include "bcg/loader.h"
#include "bcg/mjref.h"
#include "bcg/sim.h"
#include "bcg/version.h"
#include "cmd.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void cpu_name(char *buf, size_t len) {
  snprintf(buf, len, "unknown CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "model name", 10) == 0) {
      char *c = strchr(line, ':');
      if (c) {
        c += 2;
        c[strcspn(c, "\n")] = 0;
        snprintf(buf, len, "%s", c);
      }
      break;
    }
  fclose(f);
}

/* the benchmark state: default pose, lowest contact point at -1 mm */
static void bench_state(const bcg_model *model, bcg_real *q, bcg_real *u) {
  const bcg_mdata *m = &model->m;
  for (int i = 0; i < m->nq; i++) q[i] = m->qpos0[i];
  for (int i = 0; i < m->nv; i++) u[i] = 0;
  if (!m->has_floor || m->ncp == 0) return;
  static bcg_kin k;
  bcg_kinematics(m, q, &k);
  if (bcg_has_free_root(m)) q[m->jnt_qposadr[m->body_jntadr[1]] + 2] -= (bcg_real)0.001 + bcg_lowest_gap(m, &k);
}

typedef struct result {
  double fwd, fwdbwd;
  int nact;
} result;

/* time one batch of n environments on the current OpenMP thread count */
static int time_sim(bcg_sim *sim, const bcg_model *model, int n, double seconds, result *r) {
  const bcg_mdata *m = &model->m;
  int nq = m->nq, nv = m->nv, nu = m->nu;
  bcg_real *q = malloc(sizeof(bcg_real) * n * nq), *u = malloc(sizeof(bcg_real) * n * nv);
  bcg_real *qo = malloc(sizeof(bcg_real) * n * nq), *uo = malloc(sizeof(bcg_real) * n * nv);
  bcg_real *a = calloc((size_t)n * nu, sizeof(bcg_real)), *ab = calloc((size_t)n * nu, sizeof(bcg_real));
  bcg_real *qb = malloc(sizeof(bcg_real) * n * nv), *ub = malloc(sizeof(bcg_real) * n * nv);
  bcg_real *qob = calloc((size_t)n * nv, sizeof(bcg_real)), *uob = calloc((size_t)n * nv, sizeof(bcg_real));
  if (!q || !u || !qo || !uo || !a || !ab || !qb || !ub || !qob || !uob) return -1;
  bcg_real q0[BCG_MAX_Q], u0[BCG_MAX_DOF];
  bench_state(model, q0, u0);
  for (int e = 0; e < n; e++) {
    memcpy(q + (size_t)e * nq, q0, sizeof(bcg_real) * nq);
    memcpy(u + (size_t)e * nv, u0, sizeof(bcg_real) * nv);
  }
  for (int i = 0; i < n * nv; i++) uob[i] = 1;
  /* forward: step the same input repeatedly (the state stays in contact) */
  int it = 0;
  bcg_sim_substep(sim, n, q, u, a, qo, uo); /* warm-up */
  r->nact = sim->nact[0];
  double t0 = now(), t = t0;
  while (t - t0 < seconds) {
    for (int k = 0; k < 10; k++) bcg_sim_substep(sim, n, q, u, a, qo, uo);
    it += 10;
    t = now();
  }
  r->fwd = (double)it * n / (t - t0);
  it = 0;
  t0 = now();
  t = t0;
  while (t - t0 < seconds) {
    for (int k = 0; k < 5; k++) {
      bcg_sim_substep(sim, n, q, u, a, qo, uo);
      bcg_sim_substep_vjp(sim, n, q, u, a, qob, uob, qb, ub, ab);
    }
    it += 5;
    t = now();
  }
  r->fwdbwd = (double)it * n / (t - t0);
  free(q); free(u); free(qo); free(uo); free(a); free(ab); free(qb); free(ub); free(qob); free(uob);
  return 0;
}

static int make_config(const char *contact, const char *model_path, bcg_config **cfg, char *err, size_t errlen) {
  char path[] = "/tmp/bcg_bench_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return snprintf(err, errlen, "cannot create a temporary config"), -1;
  FILE *f = fdopen(fd, "w");
  fprintf(f, "[model]\npath = %s\n[sim]\nactuation = pd\n", model_path);
  if (contact) fprintf(f, "[contact]\nplugin = %s\n", contact);
  fclose(f);
  int rc = bcg_config_load_with(cfg, bcg_registry_global(), path, 0, NULL, err, errlen);
  unlink(path);
  return rc;
}

int bcg_cmd_bench(int argc, char **argv) {
  const char *model_path = NULL;
  double seconds = 1.0;
  int envs = 64;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--model") && i + 1 < argc) model_path = argv[++i];
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--envs") && i + 1 < argc) envs = atoi(argv[++i]);
    else return bcg_cli_usage("bench", "unknown argument '%s'", argv[i]);
  }
  if (!(seconds > 0) || envs < 1) return bcg_cli_usage("bench", "--seconds and --envs must be positive");
  if (!model_path) model_path = bcg_model_default_path();
  char err[2048];
  bcg_model *model = bcg_model_load(model_path, err, sizeof err);
  if (!model) return bcg_cli_error("%s", err);
  const bcg_mdata *m = &model->m;

  char cpu[256], host[256] = "?";
  cpu_name(cpu, sizeof cpu);
  gethostname(host, sizeof host);
  time_t tt = time(NULL);
  char stamp[64];
  strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC", gmtime(&tt));
  int maxthr = omp_get_max_threads();
  printf("bcg %s bench  %s\nmachine: %s, %d hardware threads (%s)\nprecision: %s\nmodel: %s (nq %d, nv %d, nu %d, "
         "%d contact slots)\nunit: physics steps (one substep of %g s, the unit of one mj_step) per second\n"
         "state: default pose %s, PD holding it, %d environments per batch\n\n",
         BCG_VERSION, stamp, cpu, maxthr, host, BCG_REAL_NAME, model_path, m->nq, m->nv, m->nu, m->ncp,
         (double)m->timestep,
         !m->has_floor ? "in the air: the model has no floor, so no contact is simulated"
         : m->ncp == 0 ? "in the air: no geom can touch the floor, so no contact is simulated"
         : bcg_has_free_root(m) ? "standing on the floor (lowest contact point 1 mm deep)"
                                : "(fixed or planar root, not moved onto the floor)",
         envs);

  /* MuJoCo reference: mj_step on the same model and state, one thread */
  double mj = 0;
  {
    bcg_mjref *r = bcg_mjref_new(model, 0);
    if (!r) return bcg_cli_error("cannot create the MuJoCo reference for %s", model_path);
    bcg_real q0[BCG_MAX_Q], u0[BCG_MAX_DOF];
    bench_state(model, q0, u0);
    double qd[BCG_MAX_Q], ud[BCG_MAX_DOF];
    for (int i = 0; i < m->nq; i++) qd[i] = q0[i];
    for (int i = 0; i < m->nv; i++) ud[i] = u0[i];
    bcg_mjref_steps_per_sec(r, qd, ud, NULL, 200); /* warm-up */
    int n = 2000;
    double t0 = now();
    while (now() - t0 < seconds) {
      double s = bcg_mjref_steps_per_sec(r, qd, ud, NULL, n);
      mj = mj > s ? mj : s;
    }
    printf("MuJoCo %s mj_step, 1 thread, same model and state: %.0f steps/s (%d contacts)\n\n", mj_versionString(),
           mj, bcg_mjref_ncon(r));
    bcg_mjref_free(r);
  }

  const char *contacts[] = {NULL, "soft", "smoothed_kappa", "hard"};
  printf("%-16s %8s %14s %10s %14s %10s %12s %8s\n", "contact", "threads", "forward/s", "vs mj_step",
         "fwd+bwd/s", "vs mj_step", "bwd/fwd cost", "active");
  for (int ci = 0; ci < 4; ci++) {
    const char *cname = contacts[ci];
    if (cname && !bcg_registry_find(bcg_registry_global(), BCG_KIND_CONTACT, cname)) {
      printf("%-16s (plugin not found)\n", cname);
      continue;
    }
    bcg_config *cfg = NULL;
    if (make_config(cname, model_path, &cfg, err, sizeof err)) return bcg_cli_error("%s", err);
    bcg_simparams sp;
    const bcg_contact_ops *ops;
    void *self;
    if (bcg_simparams_from_config(cfg, model, &sp, err, sizeof err) ||
        bcg_contact_from_config(cfg, model, &ops, &self, err, sizeof err))
      return bcg_cli_error("%s", err);
    int thr[2] = {1, maxthr};
    for (int ti = 0; ti < (maxthr > 1 ? 2 : 1); ti++) {
      omp_set_num_threads(thr[ti]);
      int n = ti == 0 ? (envs < 16 ? envs : 16) : envs;
      bcg_sim *sim = bcg_sim_create(model, &sp, n, ops, self, err, sizeof err);
      if (!sim) return bcg_cli_error("%s", err);
      result r;
      if (time_sim(sim, model, n, seconds, &r)) return bcg_cli_error("out of memory");
      /* fwd+bwd costs one forward + one (recompute + adjoint) */
      printf("%-16s %8d %14.0f %9.2fx %14.0f %9.2fx %11.2fx %8d\n", cname ? cname : "none", thr[ti], r.fwd,
             r.fwd / mj, r.fwdbwd, r.fwdbwd / mj, r.fwd / r.fwdbwd, r.nact);
      bcg_sim_free(sim);
    }
    omp_set_num_threads(maxthr);
    if (ops) ops->destroy(self);
    bcg_config_free(cfg);
  }
  printf("\nvs mj_step: bcg steps/s divided by MuJoCo's; bwd/fwd cost: forward rate / forward+backward rate.\n"
         "MuJoCo's step solves its own contact model (soft constraints, PGS/Newton) and computes no gradient.\n");
  bcg_model_free(model);
  return BCG_EXIT_OK;
}
