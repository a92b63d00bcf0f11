/* cmd_feasibility.c - `bcg feasibility MOTION ...`: whether reference clips
 * are dynamically feasible for a model's actuators (bcg/feasibility.h): per
 * clip a table of the joint torques an inverse-dynamics replay needs against
 * their limits, the root's residual wrench, the clearance, and one verdict
 * line. The motion files are read by the imitation task's loader
 * (tasks/motion.h), so whatever the task accepts is analysed as loaded. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/feasibility.h"
#include "bcg/model.h"
#include "cmd.h"
#include "../tasks/motion.h"

static int parse_num(const char *s, double *v) {
  char *end;
  *v = strtod(s, &end);
  return end != s && !*end && isfinite(*v) ? 0 : -1;
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* mm, without the sign of a rounding error of the file (a clip stores 1e-6 m) */
static double mm(double m) { return fabs(m) < 5e-6 ? 0.0 : 1e3 * m; }

static void print_clip(const char *path, const char *model_path, const bcg_feas_opts *o, const bcg_feas_result *r) {
  const double dur = (r->nframes - 1) / r->fps;
  printf("== %s: %d frames at %g fps (%.2f s); model %s: %.2f kg, m g = %.1f N\n", path, r->nframes, r->fps, dur,
         model_path, r->mass, r->weight);
  printf("qvel, qacc: local quadratic fit over %d frames (%.3f s); contact: %s\n", o->window, o->window / r->fps,
         o->contact == BCG_FEAS_SOFT ? "MuJoCo's soft contact on the clip as given (mj_inverse)"
                                     : "forces fitted in the friction cones of the points within");
  if (o->contact == BCG_FEAS_FIT) printf("  %.1f mm of the floor (least-squares: root residual first, then torque / limit)\n", 1e3 * o->contact_tol);
  printf("%-18s %9s %9s %7s %7s %9s %7s %8s  %s\n", "joint", "limit", "peak", "/limit", "at s", "RMS", "/limit",
         "frames", "over the limit");
  printf("%-18s %9s %9s %7s %7s %9s %7s %8s\n", "", "N m", "N m", "", "", "N m", "", "over");
  for (int j = 0; j < r->njoint; j++) {
    const bcg_feas_joint *J = &r->joint[j];
    if (J->limit > 0) {
      printf("%-18s %9.1f %9.1f %7.2f %7.2f %9.1f %7.2f %7.1f%%", J->name, J->limit, J->peak, J->peak / J->limit,
             J->peak_t, J->rms, J->rms / J->limit, 100 * J->over_frac);
      if (J->over_t0 >= 0) printf("  %s %.2f-%.2f s", J->peak > J->limit ? "!" : "", J->over_t0, J->over_t1);
      printf("\n");
    } else {
      printf("%-18s %9s %9.1f %7s %7.2f %9.1f %7s %8s\n", J->name, "none", J->peak, "-", J->peak_t, J->rms, "-", "-");
    }
  }
  printf("root residual      peak                          at s   RMS                    frames over\n");
  printf("  force  %9.1f N     (%5.1f%% of m g)       %7.2f %7.1f N  (%5.1f%% m g)  %5.1f%% (> %g%% m g)\n",
         r->resF_peak, 100 * r->resF_peak / r->weight, r->resF_peak_t, r->resF_rms, 100 * r->resF_rms / r->weight,
         100 * r->resF_over_frac, 100 * o->residual_tol);
  printf("         largest |x|, |y|, |z| components: %.1f, %.1f, %.1f N\n", r->resF_axis_peak[0],
         r->resF_axis_peak[1], r->resF_axis_peak[2]);
  printf("  torque %9.1f N m   (m g x %5.2f cm)        %7.2f %7.1f N m (m g x %.2f cm) %5.1f%% (> m g x %g cm)\n",
         r->resT_peak, 100 * r->resT_peak / r->weight, r->resT_peak_t, r->resT_rms, 100 * r->resT_rms / r->weight,
         100 * r->resT_over_frac, 100 * o->arm_tol);
  printf("clearance: lowest point %+.1f mm (at %.2f s), lowest foot point %+.1f mm (at %.2f s); "
         "no point within %.1f mm of the floor in %.1f%% of the frames\n",
         mm(r->min_gap), r->min_gap_t, mm(r->min_foot_gap), r->min_foot_gap_t, 1e3 * o->contact_tol,
         100 * r->flight_frac);
  if (r->max_dv > 0)
    printf("take-off / touchdown: largest jump of the root's velocity %.2f m/s (at %.2f s; an impulse, not in the "
           "accelerations)\n", r->max_dv, r->max_dv_t);
  if (o->contact == BCG_FEAS_FIT)
    printf("foot skate: a loaded contact point slides faster than 0.1 m/s in %.1f%% of the frames; fastest %.2f m/s "
           "(at %.2f s)\n", 100 * r->skate_frac, r->max_slip, r->max_slip_t);
}

static int write_frames(const char *out, const bcg_feas_result *r, char *err, size_t errlen) {
  FILE *f = fopen(out, "w");
  if (!f) return snprintf(err, errlen, "%s: cannot write", out), -1;
  fprintf(f, "t,lowest_gap,foot_gap,res_fx,res_fy,res_fz,res_tx,res_ty,res_tz,contact_fx,contact_fy,contact_fz");
  for (int j = 0; j < r->njoint; j++) fprintf(f, ",tau_%s", r->joint[j].name);
  fprintf(f, "\n");
  for (int i = 0; i < r->nframes; i++) {
    fprintf(f, "%.6f,%.6f,%.6f", i / r->fps, r->gap[2 * i], r->gap[2 * i + 1]);
    for (int a = 0; a < 6; a++) fprintf(f, ",%.4f", r->res[6 * i + a]);
    for (int a = 0; a < 3; a++) fprintf(f, ",%.4f", r->fcontact[3 * i + a]);
    for (int j = 0; j < r->njoint; j++) fprintf(f, ",%.4f", r->tau[(size_t)i * r->njoint + j]);
    fprintf(f, "\n");
  }
  if (fclose(f)) return snprintf(err, errlen, "%s: cannot write", out), -1;
  return 0;
}

int bcg_cmd_feasibility(int argc, char **argv) {
  const char *model_path = NULL, *outpath = NULL, *motions[256];
  int nmo = 0;
  double fps = 0, v;
  bcg_feas_opts o;
  bcg_feas_opts_default(&o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const int more = i + 1 < argc;
    if (!strcmp(a, "--model") && more) model_path = argv[++i];
    else if (!strcmp(a, "--out") && more) outpath = argv[++i];
    else if (!strcmp(a, "--fps") && more) {
      if (parse_num(argv[++i], &fps) || !(fps > 0)) return bcg_cli_usage("feasibility", "--fps must be a positive number");
    } else if (!strcmp(a, "--window") && more) {
      if (parse_num(argv[++i], &v) || v < 3 || fmod(v, 2) != 1)
        return bcg_cli_usage("feasibility", "--window must be an odd number of frames >= 3");
      o.window = (int)v;
    } else if (!strcmp(a, "--contact") && more) {
      const char *c = argv[++i];
      if (!strcmp(c, "fit")) o.contact = BCG_FEAS_FIT;
      else if (!strcmp(c, "soft")) o.contact = BCG_FEAS_SOFT;
      else return bcg_cli_usage("feasibility", "--contact must be fit or soft");
    } else if (!strcmp(a, "--contact-tol") && more) {
      if (parse_num(argv[++i], &o.contact_tol) || o.contact_tol < 0)
        return bcg_cli_usage("feasibility", "--contact-tol must be a distance >= 0 (m)");
    } else if (!strcmp(a, "--residual-tol") && more) {
      if (parse_num(argv[++i], &o.residual_tol) || !(o.residual_tol > 0))
        return bcg_cli_usage("feasibility", "--residual-tol must be a positive fraction of m g");
    } else if (!strcmp(a, "--arm-tol") && more) {
      if (parse_num(argv[++i], &o.arm_tol) || !(o.arm_tol > 0))
        return bcg_cli_usage("feasibility", "--arm-tol must be a positive length (m)");
    } else if (a[0] == '-') return bcg_cli_usage("feasibility", "unknown option or missing value '%s'", a);
    else if (nmo == 256) return bcg_cli_usage("feasibility", "more than 256 motions");
    else motions[nmo++] = a;
  }
  if (!nmo) return bcg_cli_usage("feasibility", "missing MOTION");
  if (outpath && nmo > 1) return bcg_cli_usage("feasibility", "--out needs a single MOTION");
  if (!model_path) model_path = bcg_model_default_path();
  char err[2048];
  bcg_model *model = bcg_model_load(model_path, err, sizeof err);
  if (!model) return bcg_cli_error("%s", err);
  o.keep_frames = outpath != NULL;
  char (*verdict)[1300] = calloc((size_t)nmo, sizeof *verdict);
  int rc = BCG_EXIT_OK;
  if (!verdict) {
    rc = bcg_cli_error("out of memory");
    goto out;
  }
  for (int c = 0; c < nmo; c++) {
    bcg_motion mo;
    if (bcg_motion_load(&mo, model, motions[c], fps, BCG_QUAT_FILE, err, sizeof err)) {
      rc = bcg_cli_error("%s", err);
      goto out;
    }
    bcg_feas_result r;
    if (bcg_feasibility(model, mo.qpos, mo.nframes, mo.fps, &o, &r, err, sizeof err)) {
      bcg_motion_free(&mo);
      rc = bcg_cli_error("%s: %s", motions[c], err);
      goto out;
    }
    if (c) printf("\n");
    print_clip(motions[c], model_path, &o, &r);
    char name[256];
    snprintf(name, sizeof name, "%s", base_name(motions[c]));
    char *dot = strrchr(name, '.');
    if (dot && dot != name) *dot = 0;
    snprintf(verdict[c], sizeof verdict[c], "%s: %s", name, r.verdict);
    printf("verdict: %s\n", verdict[c]);
    if (outpath) {
      if (write_frames(outpath, &r, err, sizeof err)) rc = bcg_cli_error("%s", err);
      else printf("written: %s (one row per frame)\n", outpath);
    }
    bcg_feas_result_free(&r);
    bcg_motion_free(&mo);
  }
  if (nmo > 1) {
    printf("\nsummary (feasible: every joint within gear x ctrlrange in every frame, root residual force <= %g%% "
           "of m g, torque <= m g x %g cm):\n",
           100 * o.residual_tol, 100 * o.arm_tol);
    for (int c = 0; c < nmo; c++) printf("  %s\n", verdict[c]);
  }
out:
  free(verdict);
  bcg_model_free(model);
  return rc;
}
