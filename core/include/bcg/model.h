/* bcg/model.h - bcg's own model, converted from an mjModel compiled by libmujoco.
 *
 * The per-environment physics reads only bcg_mdata: a plain struct of
 * fixed-capacity arrays (no pointers), so the CPU backend passes its address
 * and the CUDA backend copies it to the device with one memcpy. Conventions
 * are MuJoCo's: qpos/qvel layout, quaternions w x y z, free-joint linear
 * velocity in the world frame and angular velocity in the body frame, hinge
 * and slide axes in the body frame, joints of one body applied in order. */
#ifndef BCG_MODEL_H
#define BCG_MODEL_H

#include <stddef.h>
#include "bcg/dims.h"
#include "bcg/real.h"

BCG_BEGIN_DECLS

#define BCG_MAX_BODY 48
#define BCG_MAX_JNT 64
/* BCG_MAX_DOF and BCG_MAX_Q: bcg/dims.h (build options) */
#define BCG_MAX_ACT 64
#define BCG_MAX_CP 256 /* contact points (sphere slots) */
#define BCG_MAX_SC 64  /* self-collision capsules (struct bcg_model) */
#define BCG_NAME_LEN 48

/* same numbering as MuJoCo's mjtJoint */
enum { BCG_JNT_FREE = 0, BCG_JNT_BALL = 1, BCG_JNT_SLIDE = 2, BCG_JNT_HINGE = 3 };

typedef struct bcg_mdata {
  int nq, nv, nu, nbody, njnt, ncp;
  bcg_real timestep;
  bcg_real gravity[3];

  /* bodies; 0 is the world. A body's parent index is smaller than its own. */
  int body_parent[BCG_MAX_BODY];
  int body_jntadr[BCG_MAX_BODY]; /* first joint, -1 if none */
  int body_jntnum[BCG_MAX_BODY];
  bcg_real body_pos[BCG_MAX_BODY][3];  /* frame offset in the parent frame */
  bcg_real body_quat[BCG_MAX_BODY][4]; /* frame orientation in the parent frame */
  bcg_real body_mass[BCG_MAX_BODY];
  bcg_real body_ipos[BCG_MAX_BODY][3];  /* centre of mass in the body frame */
  bcg_real body_iquat[BCG_MAX_BODY][4]; /* principal inertia frame in the body frame */
  bcg_real body_inertia[BCG_MAX_BODY][3];

  /* joints */
  int jnt_type[BCG_MAX_JNT];
  int jnt_body[BCG_MAX_JNT];
  int jnt_qposadr[BCG_MAX_JNT];
  int jnt_dofadr[BCG_MAX_JNT];
  bcg_real jnt_pos[BCG_MAX_JNT][3];  /* anchor in the body frame */
  bcg_real jnt_axis[BCG_MAX_JNT][3]; /* unit axis in the body frame (hinge, slide) */
  int jnt_limited[BCG_MAX_JNT];
  bcg_real jnt_range[BCG_MAX_JNT][2];
  bcg_real jnt_stiffness[BCG_MAX_JNT]; /* spring towards qpos_spring */

  /* dofs */
  int dof_body[BCG_MAX_DOF];
  int dof_jnt[BCG_MAX_DOF];
  int dof_parent[BCG_MAX_DOF]; /* previous dof on the path to the root, -1 */
  bcg_real dof_armature[BCG_MAX_DOF];
  bcg_real dof_damping[BCG_MAX_DOF];
  /* dry friction (MuJoCo's frictionloss), smoothed in bcg: -f tanh(u / v),
   * v = [sim] frictionloss_velocity (docs/physics-notes.md) */
  bcg_real dof_frictionloss[BCG_MAX_DOF];
  /* MuJoCo 3's actuatorfrcrange: the sum of the actuator forces on the
   * dof is clamped to this range when dof_actfrclimited */
  int dof_actfrclimited[BCG_MAX_DOF];
  bcg_real dof_actfrcrange[BCG_MAX_DOF][2];

  /* qpos0: MuJoCo's reference pose. Hinge and slide joints move their body by
   * qpos - qpos0 (MuJoCo's joint `ref`); it is 0 unless the MJCF sets ref. */
  bcg_real qpos0[BCG_MAX_Q];
  bcg_real qpos_spring[BCG_MAX_Q];

  /* actuators: joint transmission (hinge/slide) with MuJoCo's affine law
   * (motor, position, velocity and general actuators without activation):
   *   ctrl   = a clamped to ctrlrange when act_ctrllimited
   *   force  = act_gain * ctrl + bias[0] + bias[1] * gear q + bias[2] * gear u
   *            clamped to act_forcerange when act_forcelimited
   *   torque on dof act_dof = act_gear * force
   * (motor: gain 1, bias 0; position: gain kp, bias (0, -kp, -kv); velocity:
   * gain kv, bias (0, 0, -kv)) */
  int act_jnt[BCG_MAX_ACT];
  int act_dof[BCG_MAX_ACT];
  bcg_real act_gear[BCG_MAX_ACT];
  bcg_real act_gain[BCG_MAX_ACT];
  bcg_real act_bias[BCG_MAX_ACT][3];
  int act_ctrllimited[BCG_MAX_ACT];
  bcg_real act_ctrlrange[BCG_MAX_ACT][2];
  int act_forcelimited[BCG_MAX_ACT];
  bcg_real act_forcerange[BCG_MAX_ACT][2];

  /* contact points: spheres rigidly attached to bodies, tested against the
   * ground plane z = floor_z (normal +z). */
  int cp_body[BCG_MAX_CP];
  int cp_geom[BCG_MAX_CP];             /* MuJoCo geom id it came from */
  /* cp_radius is 0 for box corners; cp_friction is 0 for a frictionless
   * (condim 1) pairing */
  bcg_real cp_pos[BCG_MAX_CP][3];      /* sphere centre in the body frame */
  bcg_real cp_radius[BCG_MAX_CP];
  bcg_real cp_friction[BCG_MAX_CP];    /* sliding friction paired with the floor */
  int has_floor;
  bcg_real floor_z;
} bcg_mdata;

/* The host-side model: the POD data plus names and provenance. */
struct bcg_model {
  bcg_mdata m;
  char path[1024];
  char body_name[BCG_MAX_BODY][BCG_NAME_LEN];
  char jnt_name[BCG_MAX_JNT][BCG_NAME_LEN];
  char act_name[BCG_MAX_ACT][BCG_NAME_LEN];
  char cp_geom_name[BCG_MAX_CP][BCG_NAME_LEN];
  void *mj; /* the compiled mjModel (kept for cross-checks and transfer) */

  /* Self-collision capsules, for the tasks' self-collision penalty (bcg's
   * stepper collides bodies with the floor only; MuJoCo also with each
   * other): one capsule per collision geom of a moving body (every body,
   * whatever [model] contact_bodies says), the segment sc_a - sc_c with
   * radius sc_r in the body frame. Spheres and capsules are exact; boxes,
   * cylinders, ellipsoids and meshes (their convex hull's vertices) get a
   * fitted capsule (sc_fitted = 1): the axis is the principal axis of the
   * shape's points, the radius the points' mean distance from it, the segment
   * spans their extent along it less the radius at each end.
   * Pairs follow MuJoCo's filters: contype/conaffinity, <exclude>, bodies
   * welded together, parent and child (unless the model disables
   * filterparent); a pair with a fitted capsule that overlaps at the default
   * pose (qpos0) is left out as an artefact of the fit (sc_rest_pairs counts
   * them). Geoms beyond BCG_MAX_SC are left out (sc_dropped counts them). */
  int nsc, nsc_pair, sc_dropped, sc_rest_pairs;
  int sc_body[BCG_MAX_SC];
  int sc_geom[BCG_MAX_SC];
  int sc_fitted[BCG_MAX_SC];
  bcg_real sc_a[BCG_MAX_SC][3], sc_c[BCG_MAX_SC][3], sc_r[BCG_MAX_SC];
  short sc_pair[BCG_MAX_SC * (BCG_MAX_SC - 1) / 2][2];
};
typedef struct bcg_model bcg_model;

/* Load an MJCF file through libmujoco and convert it. Returns NULL and writes
 * a one-line message naming the file and the offending element on failure. */
bcg_model *bcg_model_load(const char *path, char *err, size_t errlen);

/* Conversion options ([model] keys of the same names). */
typedef struct bcg_model_opts {
  int mesh_points;            /* contact points per mesh geom: convex hull vertices (0: none) */
  const char *contact_bodies; /* comma-separated body names whose geoms touch the floor; NULL/"": all */
  char failed_key[32];        /* out: the option a failure is about ("" when the file is) */
} bcg_model_opts;
void bcg_model_opts_default(bcg_model_opts *o); /* mesh_points 6, every body */
bcg_model *bcg_model_load_opts(const char *path, bcg_model_opts *opts, char *err, size_t errlen);
void bcg_model_free(bcg_model *model);

/* Default model path: $BCG_MODEL, else MuJoCo's installed humanoid.xml. */
const char *bcg_model_default_path(void);

int bcg_model_body_id(const bcg_model *model, const char *name); /* -1 if absent */

/* The model's weight, its total mass (the bodies after the world) times
 * |gravity|, in N; the mass (kg) into *mass unless NULL. */
double bcg_model_weight(const bcg_mdata *m, double *mass);

BCG_END_DECLS

#endif
