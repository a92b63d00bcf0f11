/* tests/test_model.c - MJCF loading and conversion (core/model.c) and the
 * MuJoCo reference helper (core/mjref.c). */
#include <mujoco/mujoco.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcg/mjref.h"
#include "bcg/model.h"
#include "bcg/sim.h"
#include "testutil.h"

#define HUMANOID "/usr/share/mujoco/model/humanoid/humanoid.xml"
#define HUMANOID_BODY "/usr/share/mujoco/model/humanoid100/humanoid_body.xml"
#define BIPED "models/biped2d.xml"
#define QUADRUPED "models/quadruped.xml"

static char errbuf[2048];

/* a file in the suite's scratch directory (removed at exit) */
static const char *tmp_path(const char *name) { return bcg_test_tmp_path(name); }

/* Write an MJCF into the temp dir and return its path. */
static const char *write_xml(const char *name, const char *xml) {
  const char *p = tmp_path(name);
  FILE *f = fopen(p, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(xml, f);
  fclose(f);
  return p;
}

/* Source-relative model path: tests run from the repository root normally;
 * fall back to the directory above the build tree. */
static const char *model_path(const char *rel) {
  static char p[1024];
  if (access(rel, R_OK) == 0) return rel;
  snprintf(p, sizeof p, "%s/../%s", bcg_test_build_dir(), rel);
  return p;
}

static bcg_model *load_ok(const char *path) {
  errbuf[0] = 0;
  bcg_model *m = bcg_model_load(path, errbuf, sizeof errbuf);
  if (!m) fprintf(stderr, "unexpected load failure: %s\n", errbuf);
  return m;
}

/* Loading must fail and the message must contain every given piece. */
static void expect_error(const char *path, const char *piece1, const char *piece2) {
  errbuf[0] = 0;
  bcg_model *m = bcg_model_load(path, errbuf, sizeof errbuf);
  CU_ASSERT_PTR_NULL(m);
  if (m) {
    fprintf(stderr, "%s loaded but should have failed\n", path);
    bcg_model_free(m);
    return;
  }
  if (getenv("BCG_TEST_VERBOSE")) fprintf(stderr, "  expected error: %s\n", errbuf);
  CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, path));
  CU_ASSERT_PTR_NULL(strchr(errbuf, '\n'));
  if (piece1) CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, piece1));
  if (piece2) CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, piece2));
  if ((piece1 && !strstr(errbuf, piece1)) || (piece2 && !strstr(errbuf, piece2)))
    fprintf(stderr, "message '%s' lacks '%s' / '%s'\n", errbuf, piece1 ? piece1 : "", piece2 ? piece2 : "");
}

static int count_cp_of(const bcg_model *m, const char *geom) {
  int n = 0;
  for (int k = 0; k < m->m.ncp; k++)
    if (strcmp(m->cp_geom_name[k], geom) == 0) n++;
  return n;
}

/* Structure shared by every model: tree order, address tables, MuJoCo copies. */
static void check_structure(const bcg_model *model) {
  const bcg_mdata *d = &model->m;
  const mjModel *mj = model->mj;
  CU_ASSERT_EQUAL(d->body_parent[0], -1);
  for (int b = 1; b < d->nbody; b++) {
    CU_ASSERT(d->body_parent[b] >= 0 && d->body_parent[b] < b);
    CU_ASSERT_EQUAL(d->body_parent[b], mj->body_parentid[b]);
    CU_ASSERT_DOUBLE_EQUAL(d->body_mass[b], mj->body_mass[b], 1e-12);
    for (int i = 0; i < 3; i++) {
      CU_ASSERT_DOUBLE_EQUAL(d->body_pos[b][i], mj->body_pos[3 * b + i], 1e-12);
      CU_ASSERT_DOUBLE_EQUAL(d->body_ipos[b][i], mj->body_ipos[3 * b + i], 1e-12);
      CU_ASSERT_DOUBLE_EQUAL(d->body_inertia[b][i], mj->body_inertia[3 * b + i], 1e-12);
    }
    for (int i = 0; i < 4; i++) {
      CU_ASSERT_DOUBLE_EQUAL(d->body_quat[b][i], mj->body_quat[4 * b + i], 1e-12);
      CU_ASSERT_DOUBLE_EQUAL(d->body_iquat[b][i], mj->body_iquat[4 * b + i], 1e-12);
    }
    CU_ASSERT_EQUAL(bcg_model_body_id(model, model->body_name[b]), model->body_name[b][0] ? b : -1);
  }
  /* joints of one body are contiguous, qpos/dof addresses follow the types */
  int q = 0, v = 0;
  for (int j = 0; j < d->njnt; j++) {
    static const int nqj[4] = {7, 4, 1, 1}, nvj[4] = {6, 3, 1, 1};
    int b = d->jnt_body[j];
    CU_ASSERT(j >= d->body_jntadr[b] && j < d->body_jntadr[b] + d->body_jntnum[b]);
    CU_ASSERT_EQUAL(d->jnt_qposadr[j], q);
    CU_ASSERT_EQUAL(d->jnt_dofadr[j], v);
    for (int k = 0; k < nvj[d->jnt_type[j]]; k++) {
      CU_ASSERT_EQUAL(d->dof_jnt[v + k], j);
      CU_ASSERT_EQUAL(d->dof_body[v + k], b);
    }
    q += nqj[d->jnt_type[j]];
    v += nvj[d->jnt_type[j]];
  }
  CU_ASSERT_EQUAL(q, d->nq);
  CU_ASSERT_EQUAL(v, d->nv);
  for (int k = 0; k < d->nv; k++) {
    CU_ASSERT_EQUAL(d->dof_parent[k], mj->dof_parentid[k]);
    CU_ASSERT(d->dof_parent[k] < k);
    /* the parent dof is on this body or an ancestor */
    if (d->dof_parent[k] >= 0) {
      int pb = d->dof_body[d->dof_parent[k]], b = d->dof_body[k];
      while (b > pb) b = d->body_parent[b];
      CU_ASSERT_EQUAL(b, pb);
    }
  }
  for (int k = 0; k < d->ncp; k++) {
    CU_ASSERT(d->cp_body[k] > 0 && d->cp_body[k] < d->nbody);
    CU_ASSERT_EQUAL(d->cp_body[k], mj->geom_bodyid[d->cp_geom[k]]);
    CU_ASSERT(d->cp_radius[k] >= 0);
  }
  for (int a = 0; a < d->nu; a++) {
    CU_ASSERT_EQUAL(d->act_dof[a], d->jnt_dofadr[d->act_jnt[a]]);
    CU_ASSERT(d->jnt_type[d->act_jnt[a]] == BCG_JNT_HINGE || d->jnt_type[d->act_jnt[a]] == BCG_JNT_SLIDE);
  }
}

/* MuJoCo agreement on which geoms touch the floor: lower the model into the
 * floor, run mj_forward, and compare MuJoCo's floor contacts with the slots:
 * every geom MuJoCo puts in contact with the floor has slots, and every slot
 * that penetrates the floor by more than a little belongs to a geom MuJoCo
 * reports. */
static void check_contacts_vs_mujoco(const bcg_model *model, int root_z_qadr, double drop) {
  const bcg_mdata *d = &model->m;
  const mjModel *mj = model->mj;
  mjData *dd = mj_makeData(mj);
  dd->qpos[root_z_qadr] -= drop;
  mj_forward(mj, dd);
  int floor = -1;
  for (int g = 0; g < mj->ngeom; g++)
    if (mj->geom_type[g] == mjGEOM_PLANE) floor = g;
  CU_ASSERT_FATAL(floor >= 0);
  int hits = 0;
  for (int c = 0; c < dd->ncon; c++) {
    int g1 = dd->contact[c].geom1, g2 = dd->contact[c].geom2;
    if (g1 != floor && g2 != floor) continue;
    int g = g1 == floor ? g2 : g1, found = 0;
    for (int k = 0; k < d->ncp; k++) found |= d->cp_geom[k] == g;
    CU_ASSERT(found);
    hits++;
  }
  CU_ASSERT(hits > 0);
  int deep = 0;
  for (int k = 0; k < d->ncp; k++) {
    int b = d->cp_body[k];
    mjtNum p[3], pos[3] = {d->cp_pos[k][0], d->cp_pos[k][1], d->cp_pos[k][2]};
    mju_mulMatVec(p, dd->xmat + 9 * b, pos, 3, 3);
    mju_addTo3(p, dd->xpos + 3 * b);
    if (p[2] - d->cp_radius[k] > d->floor_z - 1e-3) continue;
    deep++;
    int found = 0;
    for (int c = 0; c < dd->ncon; c++)
      found |= (dd->contact[c].geom1 == d->cp_geom[k] || dd->contact[c].geom2 == d->cp_geom[k]);
    CU_ASSERT(found);
  }
  CU_ASSERT(deep > 0);
  mj_deleteData(dd);
}


/* A robot file with what real robots use: armature, damping, frictionloss,
 * actuatorfrcrange, motor / position (kp, kv, dampratio) / velocity /
 * general affine actuators with ctrl and force ranges, two actuators on one
 * joint, cylinder and mesh collision geoms. Shared with test_step (FD). */
#define GENERAL_XML model_path("tests/models/general_robot.xml")

/* The actuators' generalised force against MuJoCo's qfrc_actuator (motor
 * mode: the MJCF's actuators), with controls inside and beyond their ranges
 * and states that saturate the force ranges and the joint's
 * actuatorfrcrange; dampratio compiled to a damping as MuJoCo does. */
static void test_general_actuators(void) {
  const char *p = GENERAL_XML;
  bcg_model *model = load_ok(p);
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  const bcg_mdata *m = &model->m;
  CU_ASSERT_EQUAL(m->nu, 5);
  CU_ASSERT(m->dof_frictionloss[6] > 0.39 && m->dof_actfrclimited[7] && !m->dof_actfrclimited[6]);
  CU_ASSERT(m->act_bias[4][2] < 0); /* dampratio: a damping by now */
  bcg_simparams sp;
  bcg_simparams_default(model, &sp);
  bcg_mjref *r = bcg_mjref_new(model, BCG_MJREF_NO_CONSTRAINT);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  double worst = 0;
  int sat = 0;
  for (int trial = 0; trial < 40; trial++) {
    double q[BCG_MAX_Q], u[BCG_MAX_DOF], a[BCG_MAX_ACT], mjact[BCG_MAX_DOF], t[BCG_MAX_DOF];
    for (int i = 0; i < m->nq; i++) q[i] = m->qpos0[i];
    for (int i = 7; i < m->nq; i++) q[i] += 0.8 * sin(1.3 * trial + i);
    for (int i = 0; i < m->nv; i++) u[i] = 3 * cos(0.7 * trial + 2 * i);
    for (int i = 0; i < m->nu; i++) a[i] = 1.8 * sin(0.9 * trial + 3 * i);
    bcg_mjref_forward(r, q, u, a, NULL);
    bcg_mjref_actuator(r, mjact);
    bcg_actuator_qfrc(m, &sp, q, u, a, t);
    for (int d = 0; d < m->nv; d++) worst = fmax(worst, fabs(t[d] - mjact[d]) / (1 + fabs(mjact[d])));
    sat += fabs(t[7]) >= 3 - 1e-12; /* actuatorfrcrange holds j2 */
  }
  bcg_test_report("actuator forces vs MuJoCo qfrc_actuator (rel)", worst);
  CU_ASSERT(worst < 1e-12);
  CU_ASSERT(sat > 0);
  bcg_mjref_free(r);
  bcg_model_free(model);
}

/* Cylinder and mesh geoms against the floor: the contact points are the
 * convex hull's vertices (the interior vertex is not one) and rim points of
 * the cylinder's end circles. For tilted, penetrating states the deepest bcg
 * point of every geom equals MuJoCo's contact distance (sphere, capsule, box,
 * mesh) or is above it by at most the rim chord r (1 - cos(pi / 8))
 * (cylinder); every geom MuJoCo reports in contact has bcg points below the
 * floor and the other way round. */
static void test_cylinder_mesh_contacts(void) {
  char p[1024];
  snprintf(p, sizeof p, "%s", GENERAL_XML);
  bcg_model *model = load_ok(p);
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  const bcg_mdata *d = &model->m;
  CU_ASSERT_EQUAL(count_cp_of(model, "hull"), 4);
  CU_ASSERT_EQUAL(count_cp_of(model, "can"), 16);
  const mjModel *mj = model->mj;
  mjData *dd = mj_makeData(mj);
  int floor = mj_name2id(mj, mjOBJ_GEOM, "floor");
  double worst = 0, cyl_over = 0;
  int compared = 0, cyl = 0, mesh = 0;
  for (int trial = 0; trial < 60; trial++) {
    mj_resetData(mj, dd);
    double e[3] = {0.7 * sin(1.1 * trial), 0.5 * sin(2.3 * trial + 1), 0.9 * trial};
    mju_euler2Quat(dd->qpos + 3, e, "xyz");
    for (int i = 7; i < mj->nq; i++) dd->qpos[i] = 0.6 * sin(0.37 * trial + i);
    mj_kinematics(mj, dd);
    /* the lowest bcg point of one geom (each in turn) 5 mm into the floor */
    static bcg_kin k;
    bcg_kinematics(d, dd->qpos, &k);
    int target = 1 + trial % (mj->ngeom - 1);
    double lo = 1e9;
    for (int i = 0; i < d->ncp; i++) {
      double pc[3];
      bcg_contact_point(d, &k, i, pc);
      if (d->cp_geom[i] == target) lo = fmin(lo, pc[2] + k.o[2] - d->floor_z);
    }
    dd->qpos[2] -= lo + 0.005;
    mj_forward(mj, dd);
    bcg_kinematics(d, dd->qpos, &k);
    double mjmin[64], bmin[64];
    for (int g = 0; g < mj->ngeom; g++) mjmin[g] = 1e9, bmin[g] = 1e9;
    for (int c = 0; c < dd->ncon; c++) {
      int g1 = dd->contact[c].geom[0], g2 = dd->contact[c].geom[1];
      if (g1 != floor && g2 != floor) continue;
      int g = g1 == floor ? g2 : g1;
      mjmin[g] = fmin(mjmin[g], dd->contact[c].dist);
    }
    for (int i = 0; i < d->ncp; i++) {
      double pc[3];
      bcg_contact_point(d, &k, i, pc);
      bmin[d->cp_geom[i]] = fmin(bmin[d->cp_geom[i]], pc[2] + k.o[2] - d->floor_z);
    }
    for (int g = 0; g < mj->ngeom; g++) {
      if (g == floor) continue;
      if (bmin[g] < -1e-6) CU_ASSERT(mjmin[g] < 0);
      if (mjmin[g] > 0 || mjmin[g] > 1e8) continue;
      compared++;
      if (mj->geom_type[g] == mjGEOM_CYLINDER) {
        double over = bmin[g] - mjmin[g], chord = mj->geom_size[3 * g] * (1 - cos(mjPI / 8));
        CU_ASSERT(over > -1e-9 && over < chord + 1e-9);
        cyl_over = fmax(cyl_over, over);
        cyl++;
      } else {
        worst = fmax(worst, fabs(bmin[g] - mjmin[g]));
        mesh += mj->geom_type[g] == mjGEOM_MESH;
      }
    }
  }
  bcg_test_report("deepest point vs MuJoCo contact distance (m): sphere, capsule, box, mesh", worst);
  bcg_test_report("cylinder: bcg above MuJoCo by at most (m)", cyl_over);
  CU_ASSERT(worst < 1e-9);
  if (getenv("BCG_TEST_VERBOSE")) fprintf(stderr, "compared %d cylinder %d mesh %d\n", compared, cyl, mesh);
  CU_ASSERT(compared > 60 && cyl > 5 && mesh > 5);
  /* 0 mesh points: the mesh geom does not touch the floor; contact_bodies
   * keeps only the listed bodies' geoms */
  bcg_model_opts o;
  bcg_model_opts_default(&o);
  o.mesh_points = 0;
  o.contact_bodies = "base, a2";
  bcg_model *m2 = bcg_model_load_opts(p, &o, errbuf, sizeof errbuf);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m2);
  CU_ASSERT_EQUAL(count_cp_of(m2, "hull"), 0);
  CU_ASSERT_EQUAL(count_cp_of(m2, "arm"), 0);
  CU_ASSERT_EQUAL(count_cp_of(m2, "chassis"), 8);
  CU_ASSERT_EQUAL(count_cp_of(m2, "can"), 16);
  bcg_model_free(m2);
  o.contact_bodies = "base, nosuch";
  CU_ASSERT_PTR_NULL(bcg_model_load_opts(p, &o, errbuf, sizeof errbuf));
  CU_ASSERT_STRING_EQUAL(o.failed_key, "contact_bodies");
  CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "no body named 'nosuch'"));
  mj_deleteData(dd);
  bcg_model_free(model);
}

/* Unitree's G1 (../shared/robots, where present): loads unmodified (MuJoCo 3
 * attributes, frictionloss, armature, actuatorfrcrange, mesh and sphere
 * collision geoms), its facts, and its contact points against MuJoCo's. */
static void test_g1(void) {
  char p[1024];
  snprintf(p, sizeof p, "%s", model_path("../shared/robots/unitree_g1/scene_29dof.xml"));
  if (access(p, R_OK) != 0) {
    char why[1100];
    snprintf(why, sizeof why, "%s absent", p);
    bcg_test_skip(why);
    return;
  }
  bcg_model *model = load_ok(p);
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  const bcg_mdata *d = &model->m;
  CU_ASSERT_EQUAL(d->nq, 36);
  CU_ASSERT_EQUAL(d->nv, 35);
  CU_ASSERT_EQUAL(d->nu, 29);
  CU_ASSERT(d->has_floor);
  for (int v = 6; v < d->nv; v++) {
    CU_ASSERT(d->dof_frictionloss[v] > 0);
    CU_ASSERT(d->dof_armature[v] > 0);
    CU_ASSERT(d->dof_actfrclimited[v]);
  }
  for (int a = 0; a < d->nu; a++) CU_ASSERT_DOUBLE_EQUAL(d->act_gear[a], 1, 0);
  check_contacts_vs_mujoco(model, 2, 0.02);
  bcg_model_free(model);
}

/* ---- self-collision capsules (bcg_model sc_*) ------------------------------ */

/* capsule k of the model in the world frame of MuJoCo's kinematics d */
static void sc_world(const bcg_model *M, const mjData *d, int k, double A[3], double C[3]) {
  int b = M->sc_body[k];
  double la[3] = {M->sc_a[k][0], M->sc_a[k][1], M->sc_a[k][2]}, lc[3] = {M->sc_c[k][0], M->sc_c[k][1], M->sc_c[k][2]};
  mju_mulMatVec3(A, d->xmat + 9 * b, la);
  mju_addTo3(A, d->xpos + 3 * b);
  mju_mulMatVec3(C, d->xmat + 9 * b, lc);
  mju_addTo3(C, d->xpos + 3 * b);
}

/* the distance between two segments: the distance of a point of one to the
 * other is convex along the first, so a ternary search finds the minimum
 * (independent of the library's closed form) */
static double pt_seg(const double *P, const double *b0, const double *b1) {
  double e[3], r[3], Q[3];
  mju_sub3(e, b1, b0);
  mju_sub3(r, P, b0);
  double ee = mju_dot3(e, e), t = ee > 1e-18 ? mju_clip(mju_dot3(r, e) / ee, 0, 1) : 0;
  for (int q = 0; q < 3; q++) Q[q] = b0[q] + t * e[q];
  return mju_dist3(P, Q);
}
static double seg_seg(const double *a0, const double *a1, const double *b0, const double *b1) {
  double lo = 0, hi = 1, P[3];
  for (int i = 0; i < 200; i++) {
    double m1 = lo + (hi - lo) / 3, m2 = hi - (hi - lo) / 3, P1[3], P2[3];
    for (int q = 0; q < 3; q++) P1[q] = a0[q] + m1 * (a1[q] - a0[q]), P2[q] = a0[q] + m2 * (a1[q] - a0[q]);
    if (pt_seg(P1, b0, b1) < pt_seg(P2, b0, b1)) hi = m2;
    else lo = m1;
  }
  for (int q = 0; q < 3; q++) P[q] = a0[q] + 0.5 * (lo + hi) * (a1[q] - a0[q]);
  return pt_seg(P, b0, b1);
}

/* surface distance of the model's capsules x and y at d */
static double sc_gap(const bcg_model *M, const mjData *d, int x, int y) {
  double A[3], C[3], B[3], D[3];
  sc_world(M, d, x, A, C);
  sc_world(M, d, y, B, D);
  return seg_seg(A, C, B, D) - M->sc_r[x] - M->sc_r[y];
}

static int sc_index(const bcg_model *M, int geom) {
  for (int k = 0; k < M->nsc; k++)
    if (M->sc_geom[k] == geom) return k;
  return -1;
}

static int sc_has_pair(const bcg_model *M, int x, int y) {
  for (int i = 0; i < M->nsc_pair; i++)
    if ((M->sc_pair[i][0] == x && M->sc_pair[i][1] == y) || (M->sc_pair[i][0] == y && M->sc_pair[i][1] == x)) return 1;
  return 0;
}

/* random poses: MuJoCo's body-body contacts against the capsules. Every such
 * contact must be a kept pair; returns the number compared, the largest
 * |MuJoCo distance - capsule distance| over exact pairs (*exact_err) and,
 * over pairs with a fitted capsule, how many have the capsules within
 * `near` m (*fit_near) and the median absolute error (*fit_med). */
static int sc_vs_mujoco(const bcg_model *M, int poses, double near, double *exact_err, int *n_exact, int *fit_near,
                        int *n_fit, double *fit_med, int *deep, int *deep_unmatched) {
  const mjModel *mj = M->mj;
  mjData *d = mj_makeData(mj);
  double *err = malloc(sizeof(double) * 100000);
  int nerr = 0, missing = 0;
  *exact_err = 0, *n_exact = 0, *fit_near = 0, *n_fit = 0, *deep = 0, *deep_unmatched = 0;
  for (int t = 0; t < poses; t++) {
    mj_resetData(mj, d);
    for (int j = 0; j < mj->njnt; j++) {
      if (mj->jnt_type[j] != mjJNT_HINGE && mj->jnt_type[j] != mjJNT_SLIDE) continue;
      double lo = mj->jnt_limited[j] ? mj->jnt_range[2 * j] : -1.5, hi = mj->jnt_limited[j] ? mj->jnt_range[2 * j + 1] : 1.5;
      double u = 0.5 + 0.5 * sin(12.9898 * (t + 1) + 78.233 * (j + 1)) ; /* deterministic in [0, 1] */
      d->qpos[mj->jnt_qposadr[j]] = lo + u * (hi - lo);
    }
    d->qpos[2] += 5; /* well above the floor */
    mj_forward(mj, d);
    for (int c = 0; c < d->ncon; c++) {
      int g1 = d->contact[c].geom[0], g2 = d->contact[c].geom[1];
      if (mj->body_weldid[mj->geom_bodyid[g1]] == 0 || mj->body_weldid[mj->geom_bodyid[g2]] == 0) continue;
      int x = sc_index(M, g1), y = sc_index(M, g2);
      if (x < 0 || y < 0 || !sc_has_pair(M, x, y)) { missing++; continue; }
      double gap = sc_gap(M, d, x, y);
      if (!M->sc_fitted[x] && !M->sc_fitted[y]) {
        *exact_err = fmax(*exact_err, fabs(gap - d->contact[c].dist));
        (*n_exact)++;
      } else {
        (*n_fit)++;
        if (gap < near) (*fit_near)++;
        if (nerr < 100000) err[nerr++] = fabs(gap - d->contact[c].dist);
      }
    }
    /* the other way: kept pairs whose capsules overlap by more than 1 cm, and
     * how many of them MuJoCo does not report in contact */
    for (int i = 0; i < M->nsc_pair; i++) {
      int x = M->sc_pair[i][0], y = M->sc_pair[i][1];
      if (sc_gap(M, d, x, y) > -0.01) continue;
      (*deep)++;
      int found = 0;
      for (int c = 0; c < d->ncon && !found; c++) {
        int g1 = d->contact[c].geom[0], g2 = d->contact[c].geom[1];
        found = (g1 == M->sc_geom[x] && g2 == M->sc_geom[y]) || (g1 == M->sc_geom[y] && g2 == M->sc_geom[x]);
      }
      *deep_unmatched += !found;
    }
  }
  /* the median by selection (small n) */
  *fit_med = 0;
  for (int i = 0; i < nerr; i++) {
    int below = 0;
    for (int j = 0; j < nerr; j++) below += err[j] < err[i];
    if (below == nerr / 2) { *fit_med = err[i]; break; }
  }
  free(err);
  mj_deleteData(d);
  CU_ASSERT_EQUAL(missing, 0); /* every body-body contact MuJoCo finds is a kept pair */
  return *n_exact + *n_fit;
}

static void test_self_capsules(void) {
  /* humanoid.xml: capsules and spheres only, exact; the same segments as the
   * floor contact's slots; every pair of bodies not parent and child */
  bcg_model *h = load_ok(HUMANOID);
  CU_ASSERT_PTR_NOT_NULL_FATAL(h);
  const mjModel *mj = h->mj;
  int ngeom = 0;
  for (int g = 0; g < mj->ngeom; g++) ngeom += mj->body_weldid[mj->geom_bodyid[g]] != 0;
  CU_ASSERT_EQUAL(h->nsc, ngeom);
  CU_ASSERT_EQUAL(h->sc_dropped, 0);
  CU_ASSERT_EQUAL(h->sc_rest_pairs, 0);
  for (int k = 0; k < h->nsc; k++) {
    CU_ASSERT_FALSE(h->sc_fitted[k]);
    int i = 0;
    while (i < h->m.ncp && h->m.cp_geom[i] != h->sc_geom[k]) i++;
    CU_ASSERT_FATAL(i < h->m.ncp);
    int last = i + (mj->geom_type[h->sc_geom[k]] == mjGEOM_CAPSULE);
    for (int q = 0; q < 3; q++) {
      CU_ASSERT_EQUAL(h->sc_a[k][q], h->m.cp_pos[i][q]);
      CU_ASSERT_EQUAL(h->sc_c[k][q], h->m.cp_pos[last][q]);
    }
    CU_ASSERT_EQUAL(h->sc_r[k], h->m.cp_radius[i]);
  }
  /* MuJoCo's filters: bodies welded together (the head and the hands have
   * no joint) count as one, and such a body and its parent's are not paired */
  int want = 0;
  for (int x = 0; x < h->nsc; x++)
    for (int y = x + 1; y < h->nsc; y++) {
      int w1 = mj->body_weldid[h->sc_body[x]], w2 = mj->body_weldid[h->sc_body[y]];
      want += w1 != w2 && mj->body_weldid[mj->body_parentid[w1]] != w2 && mj->body_weldid[mj->body_parentid[w2]] != w1;
    }
  CU_ASSERT_EQUAL(h->nsc_pair, want);
  double ex, med;
  int ne, fn, nf, dp, du;
  sc_vs_mujoco(h, 400, 0, &ex, &ne, &fn, &nf, &med, &dp, &du);
  bcg_test_report("humanoid: |MuJoCo contact distance - capsule distance| (m)", ex);
  CU_ASSERT(ne > 50 && nf == 0);
  CU_ASSERT(ex < 1e-9);
  CU_ASSERT(dp > 0 && du == 0); /* exact capsules: every overlap is a MuJoCo contact */
  bcg_model_free(h);

  /* fitted shapes: a box and a cylinder along x; the pairs MuJoCo's filters allow */
  bcg_model *gm = load_ok(GENERAL_XML);
  CU_ASSERT_PTR_NOT_NULL_FATAL(gm);
  mj = gm->mj;
  int box = sc_index(gm, mj_name2id(mj, mjOBJ_GEOM, "chassis")), can = sc_index(gm, mj_name2id(mj, mjOBJ_GEOM, "can"));
  int hull = sc_index(gm, mj_name2id(mj, mjOBJ_GEOM, "hull")), arm = sc_index(gm, mj_name2id(mj, mjOBJ_GEOM, "arm"));
  CU_ASSERT_FATAL(box >= 0 && can >= 0 && hull >= 0 && arm >= 0);
  CU_ASSERT(gm->sc_fitted[box] && gm->sc_fitted[can] && gm->sc_fitted[hull] && !gm->sc_fitted[arm]);
  /* box .2 x .1 x .05: every corner sqrt(.1^2 + .05^2) from the x axis; the segment +-(.2 - r) */
  double rb = sqrt(0.01 + 0.0025);
  CU_ASSERT_DOUBLE_EQUAL(gm->sc_r[box], rb, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(fabs(gm->sc_a[box][0] - gm->sc_c[box][0]), 2 * (0.2 - rb), 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(fabs(gm->sc_a[box][1]) + fabs(gm->sc_a[box][2]) + fabs(gm->sc_c[box][1]) + fabs(gm->sc_c[box][2]), 0, 1e-9);
  /* cylinder fromto 0 -> .2 along x, radius .03: the capsule from .03 to .17 */
  CU_ASSERT_DOUBLE_EQUAL(gm->sc_r[can], 0.03, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(fmin(gm->sc_a[can][0], gm->sc_c[can][0]), 0.03, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(fmax(gm->sc_a[can][0], gm->sc_c[can][0]), 0.17, 1e-9);
  /* bodies base, a1 (base's child), a2 (a1's), a3 (base's), a4 (a3's): 6 pairs are not parent and child */
  CU_ASSERT_EQUAL(gm->nsc_pair, 6);
  CU_ASSERT_EQUAL(gm->sc_rest_pairs, 0);
  CU_ASSERT_FALSE(sc_has_pair(gm, box, arm));
  CU_ASSERT_TRUE(sc_has_pair(gm, box, can));
  bcg_model_free(gm);

  /* an <exclude> and contype/conaffinity remove pairs as in MuJoCo; a fitted
   * capsule overlapping its neighbour at qpos0 is left out */
  const char *xp = write_xml("sc_filters.xml",
      "<mujoco><worldbody><geom name='floor' type='plane' size='5 5 .1'/>"
      "<body name='b0' pos='0 0 1'><freejoint/><geom name='g0' size='.05'/>"
      " <body name='b1' pos='.2 0 0'><joint axis='0 1 0'/><geom name='g1' size='.05'/>"
      "  <body name='b2' pos='.2 0 0'><joint axis='0 1 0'/><geom name='g2' size='.05'/>"
      "   <body name='b3' pos='.2 0 0'><joint axis='0 1 0'/><geom name='g3' size='.05' contype='2' conaffinity='2'/>"
      "    <body name='b4' pos='.12 0 0'><joint axis='0 1 0'/><geom name='g4' type='box' pos='-.2 0 0' size='.1 .02 .02'/></body>"
      "</body></body></body></body></worldbody>"
      "<contact><exclude body1='b0' body2='b2'/></contact></mujoco>");
  bcg_model *fm = load_ok(xp);
  CU_ASSERT_PTR_NOT_NULL_FATAL(fm);
  mj = fm->mj;
  int G[5];
  for (int i = 0; i < 5; i++) {
    char nm[16];
    snprintf(nm, sizeof nm, "g%d", i);
    G[i] = sc_index(fm, mj_name2id(mj, mjOBJ_GEOM, nm));
  }
  /* candidates not parent and child: 0-2 (excluded), 0-3 (types 1 vs 2: no), 0-4, 1-3 (no), 1-4, 2-4 (the box,
   * placed back along b3, reaches into g2 at qpos0: left out) */
  CU_ASSERT_FALSE(sc_has_pair(fm, G[0], G[2]));
  CU_ASSERT_FALSE(sc_has_pair(fm, G[0], G[3]));
  CU_ASSERT_FALSE(sc_has_pair(fm, G[1], G[3]));
  CU_ASSERT_FALSE(sc_has_pair(fm, G[2], G[4]));
  CU_ASSERT_TRUE(sc_has_pair(fm, G[0], G[4]));
  CU_ASSERT_TRUE(sc_has_pair(fm, G[1], G[4]));
  CU_ASSERT_EQUAL(fm->nsc_pair, 2);
  CU_ASSERT_EQUAL(fm->sc_rest_pairs, 1);
  bcg_model_free(fm);

  /* Unitree's G1 (where present): meshes and cylinders fitted, feet spheres
   * exact; MuJoCo's self-contacts in random poses found by the capsules */
  char p[1024];
  snprintf(p, sizeof p, "%s", model_path("../shared/robots/unitree_g1/scene_29dof.xml"));
  if (access(p, R_OK) != 0) {
    bcg_test_skip("../shared/robots/unitree_g1 absent");
    return;
  }
  bcg_model *g1 = load_ok(p);
  CU_ASSERT_PTR_NOT_NULL_FATAL(g1);
  CU_ASSERT_EQUAL(g1->nsc, 37);
  CU_ASSERT_EQUAL(g1->sc_dropped, 0);
  int n = sc_vs_mujoco(g1, 400, 0.02, &ex, &ne, &fn, &nf, &med, &dp, &du);
  if (getenv("BCG_TEST_VERBOSE"))
    fprintf(stderr, "G1: %d pairs, %d left out at rest; %d contacts: %d exact (err %.2e), %d fitted, %d within 2 cm, "
            "median error %.4f m; %d capsule overlaps > 1 cm, %d without a MuJoCo contact\n", g1->nsc_pair,
            g1->sc_rest_pairs, n, ne, ex, nf, fn, med, dp, du);
  double recall = nf ? (double)fn / nf : 0, unmatched = dp ? (double)du / dp : 1;
  bcg_test_report("G1: MuJoCo body-body contacts with the capsules within 2 cm (fraction)", recall);
  bcg_test_report("G1: median |MuJoCo distance - capsule distance| of fitted pairs (m)", med);
  bcg_test_report("G1: capsule overlaps > 1 cm without a MuJoCo contact (fraction)", unmatched);
  CU_ASSERT(nf > 100);
  CU_ASSERT(ex < 1e-9);
  CU_ASSERT(recall > 0.9);
  CU_ASSERT(med < 0.02);
  CU_ASSERT(unmatched < 0.2);
  bcg_model_free(g1);
}

static void test_humanoid(void) {
  bcg_model *model = load_ok(HUMANOID);
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  const bcg_mdata *d = &model->m;
  CU_ASSERT_EQUAL(d->nq, 28);
  CU_ASSERT_EQUAL(d->nv, 27);
  CU_ASSERT_EQUAL(d->nu, 21);
  CU_ASSERT_EQUAL(d->nbody, 17); /* world + 16 */
  CU_ASSERT_EQUAL(d->njnt, 22);  /* root + 21 hinges */
  CU_ASSERT_EQUAL(d->jnt_type[0], BCG_JNT_FREE);
  for (int j = 1; j < d->njnt; j++) CU_ASSERT_EQUAL(d->jnt_type[j], BCG_JNT_HINGE);
  CU_ASSERT_DOUBLE_EQUAL(d->timestep, 0.005, 1e-15);
  CU_ASSERT_DOUBLE_EQUAL(d->gravity[2], -9.81, 1e-12);
  CU_ASSERT_STRING_EQUAL(model->path, HUMANOID);
  CU_ASSERT_STRING_EQUAL(model->body_name[0], "world");
  CU_ASSERT_EQUAL(bcg_model_body_id(model, "torso"), 1);
  CU_ASSERT_EQUAL(bcg_model_body_id(model, "left_foot"), mj_name2id(model->mj, mjOBJ_BODY, "left_foot"));
  CU_ASSERT_EQUAL(bcg_model_body_id(model, "no_such_body"), -1);
  check_structure(model);

  /* 16 capsules x 2 + 3 spheres (head, hands) x 1 = 35 slots */
  CU_ASSERT_EQUAL(d->ncp, 35);
  static const char *caps[] = {"torso", "upper_waist", "lower_waist", "butt", "right_thigh", "right_shin",
                               "right_right_foot", "left_right_foot", "left_thigh", "left_shin",
                               "left_left_foot", "right_left_foot", "right_upper_arm", "right_lower_arm",
                               "left_upper_arm", "left_lower_arm"};
  for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) CU_ASSERT_EQUAL(count_cp_of(model, caps[i]), 2);
  CU_ASSERT_EQUAL(count_cp_of(model, "head"), 1);
  CU_ASSERT_EQUAL(count_cp_of(model, "right_hand"), 1);
  CU_ASSERT_EQUAL(count_cp_of(model, "left_hand"), 1);
  CU_ASSERT_EQUAL(count_cp_of(model, "floor"), 0);
  /* torso capsule fromto 0 -.07 0 -> 0 .07 0, radius .07: ends at y = +-.07 */
  for (int k = 0; k < d->ncp; k++)
    if (strcmp(model->cp_geom_name[k], "torso") == 0) {
      CU_ASSERT_DOUBLE_EQUAL(fabs(d->cp_pos[k][1]), 0.07, 1e-9);
      CU_ASSERT_DOUBLE_EQUAL(d->cp_pos[k][0], 0, 1e-9);
      CU_ASSERT_DOUBLE_EQUAL(d->cp_radius[k], 0.07, 1e-12);
    }
  /* head sphere at the head body's origin */
  for (int k = 0; k < d->ncp; k++)
    if (strcmp(model->cp_geom_name[k], "head") == 0) {
      CU_ASSERT_EQUAL(d->cp_body[k], bcg_model_body_id(model, "head"));
      CU_ASSERT_DOUBLE_EQUAL(d->cp_radius[k], 0.09, 1e-12);
    }
  /* geoms friction .7 vs floor default 1: max = 1 (condim max(1,3) = 3) */
  for (int k = 0; k < d->ncp; k++) CU_ASSERT_DOUBLE_EQUAL(d->cp_friction[k], 1.0, 1e-12);
  CU_ASSERT(d->has_floor);
  CU_ASSERT_DOUBLE_EQUAL(d->floor_z, 0, 1e-15);

  /* joints, dofs, actuators */
  int j = mj_name2id(model->mj, mjOBJ_JOINT, "right_knee");
  CU_ASSERT_STRING_EQUAL(model->jnt_name[j], "right_knee");
  CU_ASSERT(d->jnt_limited[j]);
  CU_ASSERT_DOUBLE_EQUAL(d->jnt_range[j][0], -160 * M_PI / 180, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(d->jnt_range[j][1], 2 * M_PI / 180, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(d->jnt_stiffness[j], 1, 1e-15);
  CU_ASSERT_DOUBLE_EQUAL(d->jnt_axis[j][1], -1, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(d->jnt_pos[j][2], 0.02, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(d->dof_armature[d->jnt_dofadr[j]], 0.01, 1e-15);
  CU_ASSERT_DOUBLE_EQUAL(d->dof_damping[d->jnt_dofadr[j]], 0.2, 1e-15);
  j = mj_name2id(model->mj, mjOBJ_JOINT, "right_hip_y");
  CU_ASSERT_DOUBLE_EQUAL(d->jnt_stiffness[j], 20, 1e-15);
  CU_ASSERT_DOUBLE_EQUAL(d->dof_damping[d->jnt_dofadr[j]], 5, 1e-15);
  /* right_ankle_x axis "1 0 .5" normalised */
  j = mj_name2id(model->mj, mjOBJ_JOINT, "right_ankle_x");
  CU_ASSERT_DOUBLE_EQUAL(d->jnt_axis[j][0], 1 / sqrt(1.25), 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(d->jnt_axis[j][2], 0.5 / sqrt(1.25), 1e-12);
  CU_ASSERT_EQUAL(d->jnt_limited[0], 0);
  CU_ASSERT_DOUBLE_EQUAL(d->qpos0[2], 1.5, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(d->qpos0[3], 1, 1e-12);
  for (int i = 0; i < d->nq; i++) CU_ASSERT_DOUBLE_EQUAL(d->qpos_spring[i], d->qpos0[i], 1e-12);
  int a = mj_name2id(model->mj, mjOBJ_ACTUATOR, "right_hip_y");
  CU_ASSERT_STRING_EQUAL(model->act_name[a], "right_hip_y");
  CU_ASSERT_DOUBLE_EQUAL(d->act_gear[a], 120, 1e-12);
  CU_ASSERT_EQUAL(d->act_jnt[a], j = mj_name2id(model->mj, mjOBJ_JOINT, "right_hip_y"));
  CU_ASSERT_EQUAL(d->act_dof[a], d->jnt_dofadr[j]);
  CU_ASSERT(d->act_ctrllimited[a]);
  CU_ASSERT_DOUBLE_EQUAL(d->act_ctrlrange[a][0], -1, 0);
  CU_ASSERT_DOUBLE_EQUAL(d->act_ctrlrange[a][1], 1, 0);

  check_contacts_vs_mujoco(model, 2, 1.3);
  bcg_model_free(model);
}

static void test_own_models(void) {
  bcg_model *m = load_ok(model_path(BIPED));
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(m->m.nq, 9);
  CU_ASSERT_EQUAL(m->m.nv, 9);
  CU_ASSERT_EQUAL(m->m.nu, 6);
  CU_ASSERT_EQUAL(m->m.nbody, 8);
  CU_ASSERT_EQUAL(m->m.ncp, 26);
  CU_ASSERT_EQUAL(m->m.jnt_type[0], BCG_JNT_SLIDE);
  CU_ASSERT_EQUAL(m->m.jnt_type[2], BCG_JNT_HINGE);
  CU_ASSERT_EQUAL(count_cp_of(m, "marker"), 0); /* visual */
  CU_ASSERT_EQUAL(count_cp_of(m, "right_foot"), 8);
  for (int k = 0; k < m->m.ncp; k++) {
    CU_ASSERT_DOUBLE_EQUAL(m->m.cp_friction[k], 0.9, 1e-12); /* max(.9, .8) */
    if (strcmp(m->cp_geom_name[k], "right_foot") == 0) {
      CU_ASSERT_EQUAL(m->m.cp_radius[k], 0);
      CU_ASSERT_DOUBLE_EQUAL(fabs(m->m.cp_pos[k][0] - 0.05), 0.1, 1e-12);
      CU_ASSERT_DOUBLE_EQUAL(fabs(m->m.cp_pos[k][1]), 0.04, 1e-12);
      CU_ASSERT_DOUBLE_EQUAL(fabs(m->m.cp_pos[k][2]), 0.025, 1e-12);
    }
  }
  check_structure(m);
  check_contacts_vs_mujoco(m, 1, 1.2);
  bcg_model_free(m);

  m = load_ok(model_path(QUADRUPED));
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(m->m.nq, 19);
  CU_ASSERT_EQUAL(m->m.nv, 17);
  CU_ASSERT_EQUAL(m->m.nu, 8);
  CU_ASSERT_EQUAL(m->m.nbody, 11);
  CU_ASSERT_EQUAL(m->m.ncp, 23);
  int nball = 0;
  for (int j = 0; j < m->m.njnt; j++) nball += m->m.jnt_type[j] == BCG_JNT_BALL;
  CU_ASSERT_EQUAL(nball, 1);
  CU_ASSERT(fabs(m->m.body_quat[bcg_model_body_id(m, "front_left_leg")][3]) > 0.1); /* rotated about z */
  check_structure(m);
  check_contacts_vs_mujoco(m, 2, 0.7);
  bcg_model_free(m);

  /* MuJoCo's floorless humanoid body: loads, no floor, no slots */
  m = load_ok(HUMANOID_BODY);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(m->m.nv, 27);
  CU_ASSERT_EQUAL(m->m.has_floor, 0);
  CU_ASSERT_EQUAL(m->m.ncp, 0);
  bcg_model_free(m);
}

static void test_contact_rules(void) {
  const char *p = write_xml("pairing.xml",
    "<mujoco><worldbody>\n"
    " <geom name='floor' type='plane' size='1 1 .1' pos='0 0 -0.25' friction='0.8 0.005 0.0001'/>\n"
    " <geom name='wall_visual' type='box' size='.1 .1 .1' pos='3 0 0' contype='0' conaffinity='0'/>\n"
    " <body name='a' pos='0 0 1'><freejoint/>\n"
    "  <geom name='low' type='sphere' size='.1' friction='0.3'/>\n"
    "  <geom name='high' type='sphere' size='.1' pos='.2 0 0' friction='1.5'/>\n"
    "  <geom name='prio' type='sphere' size='.1' pos='.4 0 0' friction='0.2' priority='1'/>\n"
    "  <geom name='nocon' type='sphere' size='.1' pos='.6 0 0' condim='1'/>\n"
    "  <geom name='affonly' type='sphere' size='.1' pos='.8 0 0' contype='0' conaffinity='1'/>\n"
    "  <geom name='otherbit' type='sphere' size='.1' pos='1 0 0' contype='2' conaffinity='2'/>\n"
    "  <geom name='visual' type='ellipsoid' size='.1 .2 .3' contype='0' conaffinity='0'/>\n"
    "  <geom type='capsule' size='.05 .2' pos='0 1 0' euler='90 0 0'/>\n"
    "  <body name='excl' pos='0 0 .5'><joint axis='0 1 0'/><geom name='excluded' size='.1'/></body>\n"
    " </body>\n"
    " <body name='static' pos='5 0 0'><geom name='static_cyl' type='cylinder' size='.1 .1' contype='2' conaffinity='2'/></body>\n"
    "</worldbody>\n"
    "<contact><exclude body1='world' body2='excl'/></contact></mujoco>\n");
  bcg_model *m = load_ok(p);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  const bcg_mdata *d = &m->m;
  CU_ASSERT_DOUBLE_EQUAL(d->floor_z, -0.25, 1e-15);
  CU_ASSERT_EQUAL(count_cp_of(m, "otherbit"), 0);
  CU_ASSERT_EQUAL(count_cp_of(m, "visual"), 0);
  CU_ASSERT_EQUAL(count_cp_of(m, "excluded"), 0);
  CU_ASSERT_EQUAL(count_cp_of(m, "affonly"), 1);
  CU_ASSERT_EQUAL(count_cp_of(m, ""), 2); /* the unnamed capsule */
  CU_ASSERT_EQUAL(d->ncp, 7);
  for (int k = 0; k < d->ncp; k++) {
    const char *n = m->cp_geom_name[k];
    double want = !strcmp(n, "low") ? 0.8 : !strcmp(n, "high") ? 1.5 : !strcmp(n, "prio") ? 0.2 : 1.0;
    if (!strcmp(n, "nocon")) want = 1.0; /* condim max(1, 3) = 3: friction kept */
    if (!strcmp(n, "affonly")) want = 1.0;
    CU_ASSERT_DOUBLE_EQUAL(d->cp_friction[k], want, 1e-12);
    if (!n[0]) { /* capsule rotated 90 deg about x: ends at y = 1 -+ .2 */
      CU_ASSERT_DOUBLE_EQUAL(fabs(d->cp_pos[k][1] - 1), 0.2, 1e-9);
      CU_ASSERT_DOUBLE_EQUAL(d->cp_pos[k][2], 0, 1e-9);
      CU_ASSERT_DOUBLE_EQUAL(d->cp_radius[k], 0.05, 1e-15);
    }
  }
  bcg_model_free(m);

  /* both sides frictionless (condim 1): friction 0 */
  p = write_xml("frictionless.xml",
    "<mujoco><worldbody><geom name='floor' type='plane' size='1 1 .1' condim='1'/>\n"
    " <body pos='0 0 1'><freejoint/><geom name='s' size='.1' condim='1'/></body>\n"
    "</worldbody></mujoco>\n");
  m = load_ok(p);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(m->m.ncp, 1);
  CU_ASSERT_DOUBLE_EQUAL(m->m.cp_friction[0], 0, 0);
  bcg_model_free(m);
}

static void test_errors(void) {
  const char *p;
  expect_error(tmp_path("does_not_exist.xml"), "does_not_exist.xml", "No such file");

  p = write_xml("broken.xml", "<mujoco><worldbody><body name='a'>\n<geom size='.1'/></worldbody></mujoco>\n");
  expect_error(p, "broken.xml", "XML");

  p = write_xml("tendon.xml",
    "<mujoco><worldbody><body><joint name='j1'/><geom size='.1'/>\n"
    "<body pos='0 0 1'><joint name='j2'/><geom size='.1'/></body></body></worldbody>\n"
    "<tendon><fixed name='tie'><joint joint='j1' coef='1'/><joint joint='j2' coef='-1'/></fixed></tendon>\n"
    "</mujoco>\n");
  expect_error(p, "tendon 'tie'", "not supported");

  p = write_xml("equality.xml",
    "<mujoco><worldbody><body><joint name='j1'/><geom size='.1'/>\n"
    "<body pos='0 0 1'><joint name='j2'/><geom size='.1'/></body></body></worldbody>\n"
    "<equality><joint name='same' joint1='j1' joint2='j2'/></equality></mujoco>\n");
  expect_error(p, "equality 'same'", "not supported");

  p = write_xml("ellipsoid.xml",
    "<mujoco><worldbody><geom name='floor' type='plane' size='1 1 .1'/>\n"
    "<body pos='0 0 1'><freejoint/><geom name='egg' type='ellipsoid' size='.1 .2 .3'/></body>\n"
    "</worldbody></mujoco>\n");
  expect_error(p, "geom 'egg'", "ellipsoid");

  p = write_xml("unnamed_cyl.xml",
    "<mujoco><worldbody><geom type='plane' size='1 1 .1'/>\n"
    "<body pos='0 0 1'><freejoint/><geom type='ellipsoid' size='.1 .2 .3'/></body>\n"
    "</worldbody></mujoco>\n");
  expect_error(p, "geom #1", "ellipsoid");

  p = write_xml("tilted.xml",
    "<mujoco><worldbody><geom name='ramp' type='plane' size='1 1 .1' euler='10 0 0'/>\n"
    "<body pos='0 0 1'><freejoint/><geom size='.1'/></body></worldbody></mujoco>\n");
  expect_error(p, "geom 'ramp'", "horizontal");

  p = write_xml("upside_down.xml",
    "<mujoco><worldbody><geom name='ceiling' type='plane' size='1 1 .1' euler='180 0 0'/>\n"
    "<body pos='0 0 1'><freejoint/><geom size='.1'/></body></worldbody></mujoco>\n");
  expect_error(p, "geom 'ceiling'", "normal +z");

  p = write_xml("servo.xml",
    "<mujoco><worldbody><body><joint name='j'/><geom size='.1'/></body></worldbody>\n"
    "<actuator><intvelocity name='servo' joint='j' kp='10' actrange='-1 1'/></actuator></mujoco>\n");
  expect_error(p, "actuator 'servo'", "activation");

  p = write_xml("site_act.xml",
    "<mujoco><worldbody><body><freejoint/><geom size='.1'/><site name='s'/></body></worldbody>\n"
    "<actuator><motor name='thruster' site='s' gear='0 0 1 0 0 0'/></actuator></mujoco>\n");
  expect_error(p, "actuator 'thruster'", "transmission");

  p = write_xml("ball_act.xml",
    "<mujoco><worldbody><body><joint name='b' type='ball'/><geom size='.1'/></body></worldbody>\n"
    "<actuator><motor name='ballmotor' joint='b'/></actuator></mujoco>\n");
  expect_error(p, "actuator 'ballmotor'", "hinge and slide");

  p = write_xml("static_box.xml",
    "<mujoco><worldbody><geom name='floor' type='plane' size='1 1 .1'/>\n"
    "<geom name='step' type='box' size='.2 .2 .05' pos='1 0 .05'/>\n"
    "<body pos='0 0 1'><freejoint/><geom size='.1'/></body></worldbody></mujoco>\n");
  expect_error(p, "geom 'step'", "static");

  /* too many bodies: a chain longer than BCG_MAX_BODY */
  {
    char *xml = malloc(200000);
    CU_ASSERT_PTR_NOT_NULL_FATAL(xml);
    size_t n = (size_t)sprintf(xml, "<mujoco><worldbody>");
    for (int i = 0; i < BCG_MAX_BODY; i++) n += (size_t)sprintf(xml + n, "<body pos='0 0 .1'><joint/><geom size='.01'/>");
    for (int i = 0; i < BCG_MAX_BODY; i++) n += (size_t)sprintf(xml + n, "</body>");
    sprintf(xml + n, "</worldbody></mujoco>\n");
    p = write_xml("many_bodies.xml", xml);
    expect_error(p, "BCG_MAX_BODY", NULL);
    /* too many contact points: boxes give 8 each */
    n = (size_t)sprintf(xml, "<mujoco><worldbody><geom type='plane' size='1 1 .1'/><body pos='0 0 1'><freejoint/>");
    for (int i = 0; i < BCG_MAX_CP / 8 + 1; i++) n += (size_t)sprintf(xml + n, "<geom type='box' size='.1 .1 .1' pos='%d 0 0'/>", i);
    sprintf(xml + n, "</body></worldbody></mujoco>\n");
    p = write_xml("many_cps.xml", xml);
    expect_error(p, "BCG_MAX_CP", NULL);
    free(xml);
  }
}

/* Every geom and joint error names the element (name and index) and its
 * body; actuators name their joint and its body. */
static void test_error_labels(void) {
  const char *p = write_xml("named_cyl.xml",
    "<mujoco><worldbody><geom name='floor' type='plane' size='1 1 .1'/>\n"
    "<body name='torso' pos='0 0 1'><freejoint/><geom name='egg' type='ellipsoid' size='.1 .2 .3'/></body>\n"
    "</worldbody></mujoco>\n");
  expect_error(p, "geom 'egg' (#1) of body 'torso': ellipsoid collision geom", NULL);
  p = write_xml("unnamed_cyl2.xml",
    "<mujoco><worldbody><geom type='plane' size='1 1 .1'/>\n"
    "<body pos='0 0 1'><freejoint/><geom type='ellipsoid' size='.1 .2 .3'/></body>\n"
    "</worldbody></mujoco>\n");
  expect_error(p, "geom #1 of body #1: ellipsoid", NULL);
  p = write_xml("servo2.xml",
    "<mujoco><worldbody><body name='arm'><joint name='j'/><geom size='.1'/></body></worldbody>\n"
    "<actuator><general name='servo' joint='j' gaintype='affine' gainprm='1 2 0'/></actuator></mujoco>\n");
  expect_error(p, "actuator 'servo' (#0) on joint 'j' (#0) of body 'arm': gain type not supported", NULL);
  p = write_xml("two_floors.xml",
    "<mujoco><worldbody><geom name='a' type='plane' size='1 1 .1'/><geom name='b' type='plane' size='1 1 .1'/>\n"
    "<body pos='0 0 1'><freejoint/><geom size='.1'/></body></worldbody></mujoco>\n");
  expect_error(p, "geom 'b' (#1) of the world body: more than one floor plane (first is geom 'a' (#0) of the world body)",
               NULL);
}

/* a floating chain with `hinges` one-dof joints (three hinges and three
 * slides to a body: MuJoCo takes at most 6 dofs to a body) after its free
 * root: 6 + hinges dofs */
static const char *chain_xml(const char *name, int hinges) {
  static char xml[16384];
  int o = snprintf(xml, sizeof xml, "<mujoco><worldbody><body name='root' pos='0 0 1'><freejoint/><geom size='.1'/>\n");
  int bodies = 0;
  for (int h = 0; h < hinges; bodies++) {
    o += snprintf(xml + o, sizeof xml - o, "<body name='b%d' pos='0 0 .2'><geom size='.05'/>", bodies);
    for (int k = 0; k < 6 && h < hinges; k++, h++)
      o += snprintf(xml + o, sizeof xml - o, "<joint type='%s' axis='%d %d %d'/>", k < 3 ? "hinge" : "slide",
                    k % 3 == 0, k % 3 == 1, k % 3 == 2);
    o += snprintf(xml + o, sizeof xml - o, "\n");
  }
  for (int b = 0; b < bodies; b++) o += snprintf(xml + o, sizeof xml - o, "</body>");
  snprintf(xml + o, sizeof xml - o, "</body></worldbody></mujoco>\n");
  return write_xml(name, xml);
}

/* The build's capacity (bcg/dims.h; make MAX_DOF=N): a model with exactly
 * BCG_MAX_DOF dofs loads, one more is refused with the limit named */
static void test_dof_capacity(void) {
  bcg_model *m = load_ok(chain_xml("cap_full.xml", BCG_MAX_DOF - 6));
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(m->m.nv, BCG_MAX_DOF);
  CU_ASSERT_EQUAL(m->m.nq, BCG_MAX_DOF + 1);
  bcg_model_free(m);
  char want[96];
  snprintf(want, sizeof want, "%d dofs exceed BCG_MAX_DOF = %d", BCG_MAX_DOF + 1, BCG_MAX_DOF);
  expect_error(chain_xml("cap_over.xml", BCG_MAX_DOF - 5), want, NULL);
}

/* Names bcg cannot keep whole are refused, and names in messages cannot
 * break the one-line rule (found by tests/fuzz/fuzz_model): a joint name of
 * 60 characters was cut to 47, so a motion file's column of that name no
 * longer matched it; a name holding a newline (XML &#10;) split the error
 * message. */
static void test_names(void) {
  const char *p = write_xml("long_name.xml",
    "<mujoco><worldbody><body name='pole' pos='0 0 1'>\n"
    "<joint name='joint_with_a_really_long_name_that_exceeds_forty_seven_chars'/><geom size='.1'/></body>\n"
    "</worldbody></mujoco>\n");
  expect_error(p, "joint 'joint_with_a_really_long_name_that_exceeds_forty_seven_chars' (#0) of body 'pole': name "
               "longer than 47 characters (bcg keeps names of at most 47)", NULL);
  /* 47 characters fit */
  p = write_xml("name47.xml",
    "<mujoco><worldbody><body name='b2345678901234567890123456789012345678901234567' pos='0 0 1'>\n"
    "<joint/><geom size='.1'/></body></worldbody></mujoco>\n");
  bcg_model *m = load_ok(p);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(bcg_model_body_id(m, m->body_name[1]), 1);
  bcg_model_free(m);
  p = write_xml("newline_name.xml",
    "<mujoco><worldbody><geom type='plane' size='1 1 .1'/>\n"
    "<body name='a&#10;b' pos='0 0 1'><freejoint/><geom name='c&#10;d' type='ellipsoid' size='.1 .2 .3'/></body>\n"
    "</worldbody></mujoco>\n");
  expect_error(p, "geom 'c?d' (#1) of body 'a?b': ellipsoid collision geom", NULL);
  CU_ASSERT_PTR_NULL(strchr(errbuf, '\n'));
}

/* bcg_pd_check_gains: humanoid.xml's default gains (kp = 500: the stiffest
 * joint 600 N m/rad) hold it (M g h about 340); kp = 200 (240) and a
 * gear-1 robot's 5 N m/rad do not. */
static void test_pd_gains(void) {
  bcg_model *m = load_ok(HUMANOID);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  bcg_simparams sp;
  bcg_simparams_default(m, &sp);
  bcg_pd_check c;
  for (int i = 0; i < m->m.nu; i++) sp.kp[i] = (bcg_real)(500 * m->m.act_gear[i] / 100);
  CU_ASSERT_EQUAL(bcg_pd_check_gains(m, &sp, &c), 0);
  CU_ASSERT_DOUBLE_EQUAL(c.kp_max, 600, 1e-9);
  CU_ASSERT(c.mass > 35 && c.mass < 45);
  CU_ASSERT(c.h > 0.7 && c.h < 1.0);
  CU_ASSERT(c.need > 300 && c.need < 400);
  CU_ASSERT_STRING_EQUAL(m->act_name[c.act_max], "right_hip_y");
  for (int i = 0; i < m->m.nu; i++) sp.kp[i] = (bcg_real)(200 * m->m.act_gear[i] / 100);
  CU_ASSERT_EQUAL(bcg_pd_check_gains(m, &sp, &c), 1);
  for (int i = 0; i < m->m.nu; i++) sp.kp[i] = 5; /* kp = 500 on a gear-1 robot */
  CU_ASSERT_EQUAL(bcg_pd_check_gains(m, &sp, &c), 1);
  CU_ASSERT_DOUBLE_EQUAL(c.kp_max, 5, 1e-9);
  bcg_model_free(m);
  /* no criterion without gravity */
  const char *p = write_xml("nograv.xml",
    "<mujoco><option gravity='0 0 0'/><worldbody><geom type='plane' size='1 1 .1'/>\n"
    "<body pos='0 0 1'><freejoint/><geom size='.1'/><body pos='0 0 .3'><joint name='j' axis='0 1 0'/>"
    "<geom size='.1'/></body></body></worldbody><actuator><motor joint='j' gear='1'/></actuator></mujoco>\n");
  m = load_ok(p);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  bcg_simparams_default(m, &sp);
  sp.kp[0] = (bcg_real)1e-3;
  CU_ASSERT_EQUAL(bcg_pd_check_gains(m, &sp, &c), 0);
  CU_ASSERT_EQUAL(c.need, 0);
  bcg_model_free(m);
}

static void test_default_path(void) {
  const char *old = getenv("BCG_MODEL");
  char *saved = old ? strdup(old) : NULL;
  unsetenv("BCG_MODEL");
  CU_ASSERT_STRING_EQUAL(bcg_model_default_path(), HUMANOID);
  setenv("BCG_MODEL", "/x/y.xml", 1);
  CU_ASSERT_STRING_EQUAL(bcg_model_default_path(), "/x/y.xml");
  if (saved) {
    setenv("BCG_MODEL", saved, 1);
    free(saved);
  } else {
    unsetenv("BCG_MODEL");
  }
  CU_ASSERT_PTR_NULL(bcg_model_load(NULL, errbuf, sizeof errbuf));
  bcg_model_free(NULL);
}

static void test_mjref(void) {
  bcg_model *model = load_ok(HUMANOID);
  CU_ASSERT_PTR_NOT_NULL_FATAL(model);
  bcg_mjref *r = bcg_mjref_new(model, BCG_MJREF_NO_CONSTRAINT);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  int nq = bcg_mjref_nq(r), nv = bcg_mjref_nv(r), nu = bcg_mjref_nu(r), nb = bcg_mjref_nbody(r);
  CU_ASSERT(nq == 28 && nv == 27 && nu == 21 && nb == 17);
  double qpos[28], qvel[27], ctrl[21], frc[27], M[27 * 27], bias[27], pas[27], act[27], con[27], qacc[27];
  for (int i = 0; i < nq; i++) qpos[i] = model->m.qpos0[i];
  for (int i = 7; i < nq; i++) qpos[i] = 0.1 * sin(i);
  for (int i = 0; i < nv; i++) { qvel[i] = 0.3 * cos(i); frc[i] = 0.05 * i; }
  for (int i = 0; i < nu; i++) ctrl[i] = 0.5 * sin(2 * i);
  bcg_mjref_forward(r, qpos, qvel, ctrl, frc);
  bcg_mjref_fullM(r, M);
  bcg_mjref_bias(r, bias);
  bcg_mjref_passive(r, pas);
  bcg_mjref_actuator(r, act);
  bcg_mjref_constraint(r, con);
  bcg_mjref_qacc(r, qacc);
  /* M qacc = act + passive + applied - bias with the constraint solver off */
  double worst = 0;
  for (int i = 0; i < nv; i++) {
    double lhs = 0;
    for (int k = 0; k < nv; k++) lhs += M[i * nv + k] * qacc[k];
    CU_ASSERT_DOUBLE_EQUAL(M[i * nv + i] > 0, 1, 0);
    for (int k = 0; k < nv; k++) CU_ASSERT_DOUBLE_EQUAL(M[i * nv + k], M[k * nv + i], 1e-12);
    double e = bcg_relerr(lhs, act[i] + pas[i] + frc[i] - bias[i] + con[i], 1e-8);
    if (e > worst) worst = e;
  }
  CU_ASSERT(worst < 1e-9);
  bcg_test_report("mjref M qacc residual", worst);
  /* actuator force: gear * ctrl on the actuated dof */
  for (int a = 0; a < nu; a++)
    CU_ASSERT_DOUBLE_EQUAL(act[model->m.act_dof[a]], model->m.act_gear[a] * ctrl[a], 1e-9);
  /* body poses: torso at the root position; world at the origin */
  double xpos[17 * 3], xquat[17 * 4], xipos[17 * 3];
  bcg_mjref_bodies(r, xpos, xquat, xipos);
  CU_ASSERT_DOUBLE_EQUAL(xpos[3 + 2], qpos[2], 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(xquat[4], qpos[3], 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(xpos[0], 0, 0);
  /* Jacobian of the torso origin: translation part of the free joint */
  double jacp[3 * 27], jacr[3 * 27];
  bcg_mjref_jac(r, 1, xpos + 3, jacp, jacr);
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++) CU_ASSERT_DOUBLE_EQUAL(jacp[i * nv + k], i == k, 1e-12);
  /* stepping and timing */
  double q2[28], v2[27];
  bcg_mjref_step(r, ctrl, 3);
  bcg_mjref_state(r, q2, v2);
  CU_ASSERT(q2[2] < qpos[2] + 0.1);
  double sps = bcg_mjref_steps_per_sec(r, qpos, qvel, ctrl, 20);
  CU_ASSERT(sps > 0);
  bcg_mjref_free(r);

  /* contacts on: dropping into the floor gives MuJoCo contacts */
  r = bcg_mjref_new(model, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  qpos[2] = 0.3;
  bcg_mjref_forward(r, qpos, NULL, NULL, NULL);
  CU_ASSERT(bcg_mjref_ncon(r) > 0);
  bcg_mjref_free(r);
  r = bcg_mjref_new(model, BCG_MJREF_NO_CONTACT);
  bcg_mjref_forward(r, qpos, NULL, NULL, NULL);
  CU_ASSERT_EQUAL(bcg_mjref_ncon(r), 0);
  bcg_mjref_free(r);
  CU_ASSERT_PTR_NULL(bcg_mjref_new(NULL, 0));
  bcg_model_free(model);
}

BCG_TESTS({"error_labels", test_error_labels}, {"pd_gains", test_pd_gains}, {"humanoid", test_humanoid}, {"own_models", test_own_models}, {"contact_rules", test_contact_rules},
          {"errors", test_errors}, {"default_path", test_default_path}, {"mjref", test_mjref}, {"names", test_names}, {"dof capacity", test_dof_capacity},
          {"general_actuators", test_general_actuators}, {"cylinder_mesh_contacts", test_cylinder_mesh_contacts},
          {"g1", test_g1}, {"self_capsules", test_self_capsules});
BCG_RUN("model")
