/* cmd_gradstats.c - `bcg gradstats CONFIG --checkpoint FILE`: the policy-
 * gradient statistics of the paper's Figure 4 at a fixed policy.
 *
 * For every estimator and every kappa listed, the checkpoint's policy is
 * loaded into a session of CONFIG whose [estimator] section is replaced by
 * that estimator (keeping the keys it declares, e.g. force_threshold) and
 * whose kappa is set, with the learning rates at 0 so the policy stays fixed,
 * and `repeats` learner iterations (fresh rollouts) are run. Each iteration
 * measures the policy-gradient variance across environments (the learner's
 * grad_var: sum over parameters of the sample variance of the per-environment
 * gradients), the gradient norm and the fraction of bundled / truncated
 * transitions. Then the per-branch and bundled sensitivity d v_z(H) / d p_z(0)
 * of the root over one bundle window from a stiff state (the paper's Figure 4
 * measure): autodiff, bcg with one branch (a single perturbed start: one
 * branch's sensitivity) and bcg with its B branches (the bundled one), over
 * 16 draws each, per kappa. Results: tables and gradstats.h5 beside the
 * checkpoint's run. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/loader.h"
#include "bcg/runlog.h"
#include "bcg/train.h"
#include "cmd.h"

/* the resolved CONFIG with its [estimator] section replaced */
static int write_variant(const bcg_config *cfg, const char *est, const char *path, char *err, size_t errlen) {
  char *buf = NULL;
  size_t len = 0;
  FILE *mf = open_memstream(&buf, &len);
  if (!mf) return snprintf(err, errlen, "out of memory"), -1;
  bcg_config_resolved_write(cfg, mf);
  fclose(mf);
  const bcg_plugin *pl = bcg_registry_find(bcg_registry_global(), BCG_KIND_ESTIMATOR, est);
  if (!pl) {
    free(buf);
    return snprintf(err, errlen, "no estimator plugin named '%s'", est), -1;
  }
  const bcg_params *old = bcg_config_section(cfg, "estimator");
  FILE *f = fopen(path, "w");
  if (!f) {
    free(buf);
    return snprintf(err, errlen, "cannot write %s", path), -1;
  }
  int skip = 0;
  for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
    const char *t = line;
    while (*t == ' ') t++;
    if (*t == '[') {
      skip = strncmp(t, "[estimator]", 11) == 0;
      if (skip) {
        fprintf(f, "[estimator]\nplugin = %s\n", est);
        for (int i = 0; i < pl->desc->nkeys; i++) {
          const char *k = pl->desc->keys[i].name;
          const char *v = old ? bcg_params_value(old, k) : NULL;
          if (v) fprintf(f, "%s = %s\n", k, v);
        }
        continue;
      }
    }
    if (!skip) fprintf(f, "%s\n", line);
  }
  fclose(f);
  free(buf);
  return 0;
}

typedef struct row {
  char est[64];
  double kappa;
  int n;
  double var_mean, var_std, norm_mean, norm_std, bundle;
} row;

/* Sensitivity d v_z(H) / d p_z(0) of the root over one bundle window, from a
 * stiff state (the default pose with the lowest contact point 3 mm in the
 * floor, falling at 0.5 m/s; PD holding the pose, zero action), through the
 * session's estimator: forward H control steps, backward from the root's
 * vertical velocity. Environment 0's value. */
static int window_sensitivity(bcg_session *S, int H, double *out, char *err, size_t errlen) {
  bcg_env *env = S->env;
  const bcg_mdata *m = &env->model->m;
  int n = env->nenv, nx = env->nx, nv = env->nv, nu = env->nu;
  if (!bcg_has_free_root(m)) return snprintf(err, errlen, "the sensitivity needs a free-floating root"), -1;
  size_t xs = (size_t)n * nx, bs = (size_t)n * 2 * nv;
  bcg_real *x = calloc(xs * (size_t)(H + 1), sizeof(bcg_real)), *a = calloc((size_t)n * nu, sizeof(bcg_real));
  bcg_real *xb = calloc(bs, sizeof(bcg_real)), *xb0 = calloc(bs, sizeof(bcg_real)), *ab = calloc((size_t)n * nu, sizeof(bcg_real));
  bcg_kin *k = malloc(sizeof *k);
  int rc = -1;
  if (!x || !a || !xb || !xb0 || !ab || !k) { snprintf(err, errlen, "out of memory"); goto out; }
  for (int e = 0; e < n; e++) {
    bcg_real *xe = x + (size_t)e * nx;
    for (int i = 0; i < env->nq; i++) xe[i] = m->qpos0[i];
    bcg_kinematics(m, xe, k);
    int qa = m->jnt_qposadr[m->body_jntadr[1]], da = m->jnt_dofadr[m->body_jntadr[1]];
    xe[qa + 2] -= (bcg_real)0.003 + bcg_lowest_gap(m, k);
    xe[env->nq + da + 2] = (bcg_real)-0.5;
  }
  if (S->est_ops->begin(S->est)) { snprintf(err, errlen, "estimator begin failed"); goto out; }
  for (int t = 0; t < H; t++)
    if (S->est_ops->forward(S->est, t, x + (size_t)t * xs, a, x + (size_t)(t + 1) * xs)) {
      snprintf(err, errlen, "estimator forward failed");
      goto out;
    }
  int da = m->jnt_dofadr[m->body_jntadr[1]];
  xb[nv + da + 2] = 1; /* env 0: d v_z(H) */
  for (int t = H - 1; t >= 0; t--) {
    memset(xb0, 0, sizeof(bcg_real) * bs);
    if (S->est_ops->backward(S->est, t, xb, xb0, ab)) { snprintf(err, errlen, "estimator backward failed"); goto out; }
    memcpy(xb, xb0, sizeof(bcg_real) * bs);
  }
  *out = xb[da + 2]; /* d / d p_z(0): the free joint's world z translation */
  rc = 0;
out:
  free(x); free(a); free(xb); free(xb0); free(ab); free(k);
  return rc;
}

/* one run of bcg gradstats: its arguments, the estimators and kappas, the
 * table rows and the sensitivities */
#define GS_DRAWS 16
typedef struct gs {
  const char *cfgpath, *ckpt, *out;
  int repeats, verbose, nosens;
  bcg_config *cfg;
  const bcg_plugin *cp; /* the contact plugin */
  int has_kappa;
  double klist[16];
  int nk;
  char elist[16][64];
  int ne;
  row rows[256];
  int nrow;
  double sens[3][16][GS_DRAWS]; /* [autodiff | per-branch | bundled][kappa][draw] */
  int have_sens;
  char vpath[PATH_MAX]; /* the temporary config of each variant */
  char err[4096];
} gs;

/* the command line into G; -1 when complete, else the exit status of the
 * usage error it printed */
static int gs_parse(int argc, char **argv, gs *G, const char **ests, const char **kappas) {
  G->repeats = 5;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--checkpoint") && i + 1 < argc) G->ckpt = argv[++i];
    else if (!strcmp(a, "--estimators") && i + 1 < argc) *ests = argv[++i];
    else if (!strcmp(a, "--kappas") && i + 1 < argc) *kappas = argv[++i];
    else if (!strcmp(a, "--repeats") && i + 1 < argc) G->repeats = atoi(argv[++i]);
    else if (!strcmp(a, "--out") && i + 1 < argc) G->out = argv[++i];
    else if (!strcmp(a, "--per-rollout")) G->verbose = 1;
    else if (!strcmp(a, "--no-sensitivity")) G->nosens = 1;
    else if (a[0] == '-') return bcg_cli_usage("gradstats", "unknown option '%s'", a);
    else if (!G->cfgpath) G->cfgpath = a;
    else return bcg_cli_usage("gradstats", "unexpected argument '%s'", a);
  }
  if (!G->cfgpath || !G->ckpt) return bcg_cli_usage("gradstats", "usage: bcg gradstats CONFIG --checkpoint FILE");
  if (G->repeats < 1) return bcg_cli_usage("gradstats", "--repeats must be at least 1");
  return -1;
}

/* the configuration, the kappa list (--kappas, else the config's) and the
 * estimator list; -1 when done, else the exit status of the error printed */
static int gs_setup(gs *G, const char *ests, const char *kappas) {
  if (bcg_config_load_with(&G->cfg, bcg_registry_global(), G->cfgpath, 0, NULL, G->err, sizeof G->err))
    return bcg_cli_error("%s", G->err);
  const bcg_plugin *lp = bcg_config_plugin(G->cfg, BCG_KIND_LEARNER);
  if (!lp || !bcg_params_value(bcg_config_section(G->cfg, "learner"), "grad_var_every"))
    return bcg_cli_error("%s: gradstats needs a learner that measures the gradient variance (shac)", G->cfgpath);
  G->cp = bcg_config_plugin(G->cfg, BCG_KIND_CONTACT);
  G->has_kappa = G->cp && bcg_params_value(bcg_config_section(G->cfg, "contact"), "kappa");
  if (kappas) {
    if (!G->has_kappa) return bcg_cli_error("%s: --kappas needs a contact plugin with a kappa key", G->cfgpath);
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", kappas);
    for (char *t = strtok(tmp, ","); t && G->nk < 16; t = strtok(NULL, ",")) G->klist[G->nk++] = atof(t);
  } else {
    G->klist[G->nk++] = G->has_kappa ? bcg_params_get_real(bcg_config_section(G->cfg, "contact"), "kappa") : NAN;
  }
  char tmp[512];
  snprintf(tmp, sizeof tmp, "%s", ests);
  for (char *t = strtok(tmp, ","); t && G->ne < 16; t = strtok(NULL, ",")) snprintf(G->elist[G->ne++], 64, "%s", t);
  return -1;
}

/* the first table: gradient variance and norm of estimator ei at kappa ki
 * over `repeats` rollouts of the fixed policy, one row */
static int gs_variance_row(gs *G, int ei, int ki) {
  if (write_variant(G->cfg, G->elist[ei], G->vpath, G->err, sizeof G->err)) return bcg_cli_error("%s", G->err);
  char o1[64], o2[64];
  char *ov[8];
  int nov = 0;
  ov[nov++] = "learner.actor_lr=0";
  ov[nov++] = "learner.critic_lr=0";
  ov[nov++] = "learner.grad_var_every=1";
  snprintf(o1, sizeof o1, "run.iterations=%d", G->repeats);
  ov[nov++] = o1;
  if (G->has_kappa) {
    snprintf(o2, sizeof o2, "contact.kappa=%g", G->klist[ki]);
    ov[nov++] = o2;
  }
  bcg_config *vc = NULL;
  if (bcg_config_load_with(&vc, bcg_registry_global(), G->vpath, nov, ov, G->err, sizeof G->err))
    return bcg_cli_error("%s", G->err);
  bcg_session S;
  if (bcg_session_open(&S, vc, G->err, sizeof G->err) ||
      bcg_session_load(&S, G->ckpt, NULL, NULL, NULL, NULL, G->err, sizeof G->err)) {
    bcg_config_free(vc);
    return bcg_cli_error("%s", G->err);
  }
  int rc = BCG_EXIT_OK;
  row *r = &G->rows[G->nrow++];
  size_t el = strnlen(G->elist[ei], sizeof r->est - 1);
  memcpy(r->est, G->elist[ei], el);
  r->est[el] = 0;
  r->kappa = G->klist[ki];
  double sv = 0, sv2 = 0, sn = 0, sn2 = 0, sb = 0;
  int n = 0;
  for (int it = 0; it < G->repeats; it++) {
    bcg_learner_stats st;
    memset(&st, 0, sizeof st);
    S.tr.iteration = it;
    S.tr.max_iterations = G->repeats;
    if (S.lops->iterate(S.learner, &st)) { rc = bcg_cli_error("%s: iteration failed", G->elist[ei]); break; }
    if (G->verbose)
      printf("  rollout %d: grad variance %.4g, grad norm %.4g, bundled %.3f\n", it, st.grad_var, st.grad_norm,
             isfinite(st.bundle_frac) ? st.bundle_frac : 0);
    if (!isfinite(st.grad_var)) continue;
    sv += st.grad_var; sv2 += st.grad_var * st.grad_var;
    sn += st.grad_norm; sn2 += st.grad_norm * st.grad_norm;
    sb += isfinite(st.bundle_frac) ? st.bundle_frac : 0;
    n++;
  }
  r->n = n;
  r->var_mean = n ? sv / n : NAN;
  r->var_std = n > 1 ? sqrt(fmax(0, (sv2 - n * r->var_mean * r->var_mean) / (n - 1))) : 0;
  r->norm_mean = n ? sn / n : NAN;
  r->norm_std = n > 1 ? sqrt(fmax(0, (sn2 - n * r->norm_mean * r->norm_mean) / (n - 1))) : 0;
  r->bundle = n ? sb / n : NAN;
  printf("%-10s %8g %12.4g +- %-9.3g %10.4g +- %-9.3g %9.3f\n", r->est, r->kappa, r->var_mean, r->var_std,
         r->norm_mean, r->norm_std, r->bundle);
  fflush(stdout);
  bcg_session_close(&S);
  bcg_config_free(vc);
  return rc;
}

/* the second table at kappa ki: the root's sensitivity over one bundle
 * window, autodiff (one value) and bcg with 1 branch (per-branch) and with
 * its branches (bundled), each over GS_DRAWS seeds */
static int gs_sensitivity(gs *G, int ki) {
  for (int kind = 0; kind < 3; kind++) {
    if (write_variant(G->cfg, kind == 0 ? "autodiff" : "bcg", G->vpath, G->err, sizeof G->err))
      return bcg_cli_error("%s", G->err);
    int nd = kind == 0 ? 1 : GS_DRAWS;
    for (int d = 0; d < nd; d++) {
      char o1[64], o2[64], o3[64];
      char *ov[8];
      int nov = 0;
      snprintf(o1, sizeof o1, "run.seed=%d", 1000 + d);
      ov[nov++] = o1;
      ov[nov++] = "run.num_envs=1";
      if (G->has_kappa) { snprintf(o2, sizeof o2, "contact.kappa=%g", G->klist[ki]); ov[nov++] = o2; }
      if (kind == 1) { snprintf(o3, sizeof o3, "estimator.branches=1"); ov[nov++] = o3; }
      bcg_config *vc = NULL;
      bcg_session S;
      if (bcg_config_load_with(&vc, bcg_registry_global(), G->vpath, nov, ov, G->err, sizeof G->err) ||
          bcg_session_open(&S, vc, G->err, sizeof G->err)) {
        bcg_config_free(vc);
        return bcg_cli_error("%s", G->err);
      }
      int H = kind == 0 ? 2 : (int)bcg_params_get_int(bcg_config_section(vc, "estimator"), "duration");
      double v;
      int rc = BCG_EXIT_OK;
      if (window_sensitivity(&S, H, &v, G->err, sizeof G->err)) rc = bcg_cli_error("%s", G->err);
      else G->sens[kind][ki][d] = v;
      bcg_session_close(&S);
      bcg_config_free(vc);
      if (rc != BCG_EXIT_OK) return rc;
    }
  }
  double mean[3], sd[3];
  for (int kind = 0; kind < 3; kind++) {
    int nd = kind == 0 ? 1 : GS_DRAWS;
    double s1 = 0, s2 = 0;
    for (int d = 0; d < nd; d++) {
      double v = G->sens[kind][ki][d];
      s1 += v; s2 += v * v;
    }
    mean[kind] = s1 / nd;
    sd[kind] = nd > 1 ? sqrt(fmax(0, (s2 - nd * mean[kind] * mean[kind]) / (nd - 1))) : 0;
  }
  printf("%8g %22.4g %10.4g +- %-9.3g %10.4g +- %-9.3g\n", G->klist[ki], mean[0], mean[1], sd[1], mean[2], sd[2]);
  G->have_sens = ki + 1;
  fflush(stdout);
  return BCG_EXIT_OK;
}

/* gradstats.h5 (--out, else next to the checkpoint's run directory) */
static int gs_write(gs *G) {
  char path[PATH_MAX];
  if (G->out) snprintf(path, sizeof path, "%s", G->out);
  else {
    snprintf(path, sizeof path, "%s", G->ckpt);
    char *s = strrchr(path, '/');
    if (s) *s = 0; else snprintf(path, sizeof path, ".");
    size_t l = strlen(path);
    snprintf(path + l, sizeof path - l, "/../gradstats.h5");
  }
  char *err = G->err;
  size_t errlen = sizeof G->err;
  bcg_checkpoint *ck = bcg_checkpoint_begin(path, err, errlen);
  if (!ck) return bcg_cli_error("%s", err);
  int64_t root = bcg_checkpoint_root(ck);
  int w = 0;
  for (int i = 0; i < G->nrow && !w; i++) {
    const row *r = &G->rows[i];
    char g[128];
    snprintf(g, sizeof g, "%.63s_kappa%g", r->est, r->kappa);
    int64_t gr = bcg_h5_group(root, g, 1, err, errlen);
    if (gr < 0) { w = 1; break; }
    double v[7] = {r->kappa, r->var_mean, r->var_std, r->norm_mean, r->norm_std, r->bundle, r->n};
    w = bcg_h5_write_doubles(gr, "kappa_var_mean_std_norm_mean_std_bundled_n", v, 7, err, errlen) ||
        bcg_h5_write_str(gr, "estimator", r->est, err, errlen);
    bcg_h5_group_close(gr);
  }
  for (int ki = 0; ki < G->have_sens && !w; ki++) {
    char g[96];
    snprintf(g, sizeof g, "sensitivity_kappa%g", G->klist[ki]);
    int64_t gr = bcg_h5_group(root, g, 1, err, errlen);
    if (gr < 0) { w = 1; break; }
    w = bcg_h5_write_doubles(gr, "autodiff", G->sens[0][ki], 1, err, errlen) ||
        bcg_h5_write_doubles(gr, "per_branch", G->sens[1][ki], (size_t)GS_DRAWS, err, errlen) ||
        bcg_h5_write_doubles(gr, "bundled", G->sens[2][ki], (size_t)GS_DRAWS, err, errlen);
    bcg_h5_group_close(gr);
  }
  if (w) {
    bcg_checkpoint_abort(ck);
    return bcg_cli_error("%s", err);
  }
  if (bcg_checkpoint_commit(ck, err, errlen)) return bcg_cli_error("%s", err);
  printf("written: %s\n", path);
  return BCG_EXIT_OK;
}

int bcg_cmd_gradstats(int argc, char **argv) {
  gs *G = calloc(1, sizeof *G);
  if (!G) return bcg_cli_error("out of memory");
  const char *ests = "autodiff,truncate,bcg", *kappas = NULL;
  int rc = gs_parse(argc, argv, G, &ests, &kappas);
  if (rc < 0) rc = gs_setup(G, ests, kappas);
  if (rc >= 0) goto done;
  const char *td = getenv("TMPDIR");
  snprintf(G->vpath, sizeof G->vpath, "%s/bcg_gradstats_XXXXXX", td && td[0] ? td : "/tmp");
  int fd = mkstemp(G->vpath);
  if (fd < 0) {
    rc = bcg_cli_error("cannot create a temporary config");
    goto done;
  }
  close(fd);
  rc = BCG_EXIT_OK;
  printf("gradient statistics at %s (%d rollouts each, policy fixed)\n", G->ckpt, G->repeats);
  printf("%-10s %8s %24s %22s %10s\n", "estimator", "kappa", "grad variance", "grad norm", "bundled");
  for (int ei = 0; ei < G->ne && rc == BCG_EXIT_OK; ei++)
    for (int ki = 0; ki < G->nk && rc == BCG_EXIT_OK; ki++) rc = gs_variance_row(G, ei, ki);
  /* per-branch and bundled sensitivity of the root over a bundle window:
   * bcg with one branch (a single perturbed start) against bcg with its B
   * branches, each over GS_DRAWS seeds, and autodiff */
  const bcg_plugin *bp = bcg_registry_find(bcg_registry_global(), BCG_KIND_ESTIMATOR, "bcg");
  if (rc == BCG_EXIT_OK && !G->nosens && bp && G->cp && bcg_config_plugin(G->cfg, BCG_KIND_CONTACT)) {
    printf("\nroot sensitivity d v_z(H) / d p_z(0) over one bundle window from a stiff state (feet 3 mm in the floor,\n"
           "falling at 0.5 m/s), %d draws: autodiff, bcg with 1 branch (per-branch), bcg with its branches (bundled)\n",
           GS_DRAWS);
    printf("%8s %22s %22s %22s\n", "kappa", "autodiff", "per-branch", "bundled");
    for (int ki = 0; ki < G->nk && rc == BCG_EXIT_OK; ki++) rc = gs_sensitivity(G, ki);
  }
  unlink(G->vpath);
  if (rc == BCG_EXIT_OK) rc = gs_write(G);
done:
  bcg_config_free(G->cfg);
  free(G);
  return rc;
}
