/* bcg/mjref.h - MuJoCo reference quantities for cross-checks and benchmarks.
 *
 * A bcg_mjref is a small context holding a private copy of a loaded model's
 * mjModel (so option flags can be changed without touching model->mj) and an
 * mjData. bcg_mjref_forward() sets MuJoCo's state and inputs and runs
 * mj_forward; the getters then read the results. Every array is double, in
 * MuJoCo's layout. Nothing here prints. */
#ifndef BCG_MJREF_H
#define BCG_MJREF_H

#include "bcg/model.h"

BCG_BEGIN_DECLS

typedef struct bcg_mjref bcg_mjref;

/* Flags for bcg_mjref_new: turn MuJoCo features off in the private copy. */
enum {
  BCG_MJREF_NO_CONTACT = 1 << 0, /* no contacts (mjDSBL_CONTACT) */
  BCG_MJREF_NO_LIMIT = 1 << 1,   /* no joint-limit constraints (mjDSBL_LIMIT) */
  BCG_MJREF_NO_PASSIVE = 1 << 2, /* no springs or damping (mjDSBL_SPRING | mjDSBL_DAMPER) */
  BCG_MJREF_NO_GRAVITY = 1 << 3, /* gravity off (mjDSBL_GRAVITY) */
  BCG_MJREF_NO_CLAMPCTRL = 1 << 4, /* ctrl not clamped to ctrlrange (mjDSBL_CLAMPCTRL) */
  BCG_MJREF_NO_CONSTRAINT = 1 << 5 /* whole constraint solver off (mjDSBL_CONSTRAINT) */
};

/* NULL if the model has no mjModel or on allocation failure. */
bcg_mjref *bcg_mjref_new(const bcg_model *model, int flags);
void bcg_mjref_free(bcg_mjref *r);

int bcg_mjref_nq(const bcg_mjref *r);
int bcg_mjref_nv(const bcg_mjref *r);
int bcg_mjref_nu(const bcg_mjref *r);
int bcg_mjref_nbody(const bcg_mjref *r);

/* Set qpos (nq), qvel (nv), ctrl (nu) and qfrc_applied (nv), then mj_forward.
 * qvel, ctrl and qfrc_applied may be NULL (zeros); qpos NULL means qpos0. */
void bcg_mjref_forward(bcg_mjref *r, const double *qpos, const double *qvel, const double *ctrl,
                       const double *qfrc_applied);

/* Results of the last forward (or step). */
void bcg_mjref_fullM(const bcg_mjref *r, double *M);    /* nv x nv row-major, armature included */
void bcg_mjref_bias(const bcg_mjref *r, double *qfrc_bias); /* nv: C(q,v) v + g(q) */
void bcg_mjref_passive(const bcg_mjref *r, double *qfrc_passive); /* nv: springs, damping */
void bcg_mjref_actuator(const bcg_mjref *r, double *qfrc_actuator); /* nv */
void bcg_mjref_constraint(const bcg_mjref *r, double *qfrc_constraint); /* nv */
void bcg_mjref_qacc(const bcg_mjref *r, double *qacc);  /* nv */
/* Per body (nbody x 3 / nbody x 4, world included); any pointer may be NULL. */
void bcg_mjref_bodies(const bcg_mjref *r, double *xpos, double *xquat, double *xipos);
/* Translational and rotational Jacobians (3 x nv each, row-major; either may
 * be NULL) of a world point attached to body b, at the last forward. */
void bcg_mjref_jac(const bcg_mjref *r, int body, const double point[3], double *jacp, double *jacr);
int bcg_mjref_ncon(const bcg_mjref *r); /* active MuJoCo contacts */
/* Contact i of the last forward: signed distance (< 0: penetration), the
 * world point midway between the surfaces, and the two geom ids. */
void bcg_mjref_contact(const bcg_mjref *r, int i, double *dist, double pos[3], int *geom1, int *geom2);
/* contacts between two moving bodies (self-collision: bcg models only the
 * floor, so these are one place where bcg and MuJoCo differ) */
int bcg_mjref_self_contacts(const bcg_mjref *r);

/* Current state (after forward or step); either may be NULL. */
void bcg_mjref_state(const bcg_mjref *r, double *qpos, double *qvel);

/* Run nsteps of mj_step from the current state holding ctrl (NULL: zeros).
 * bcg_mjref_steps_per_sec first sets the state as bcg_mjref_forward does,
 * then times nsteps of mj_step (wall clock) and returns steps per second. */
void bcg_mjref_step(bcg_mjref *r, const double *ctrl, int nsteps);
double bcg_mjref_steps_per_sec(bcg_mjref *r, const double *qpos, const double *qvel, const double *ctrl,
                               int nsteps);

/* Sim-to-sim transfer: turn every (joint) motor into a PD servo with bcg's
 * law, force = kp (ctrl - q) - kd qdot clipped to +-tau_max (tau_max NULL or
 * <= 0: unclipped), so that ctrl is the PD target in joint coordinates; and
 * switch to MuJoCo's implicit-in-velocity integrator, which treats the kd
 * term implicitly as bcg does. Returns -1 if an actuator is not on a joint. */
int bcg_mjref_use_pd(bcg_mjref *r, const double *kp, const double *kd, const double *tau_max);
/* Set qpos/qvel (everything else reset) and run mj_forward. */
void bcg_mjref_set_state(bcg_mjref *r, const double *qpos, const double *qvel);
double bcg_mjref_timestep(const bcg_mjref *r);
void bcg_mjref_set_timestep(bcg_mjref *r, double dt);

/* Inverse dynamics (bcg feasibility): set qpos, qvel and qacc (everything
 * else reset), run mj_inverse and copy qfrc_inverse (nv): the generalised
 * force that produces qacc, M qacc + bias - passive - the constraint forces
 * MuJoCo's soft constraints (contacts, joint limits) give at that state and
 * acceleration; with BCG_MJREF_NO_CONSTRAINT it is M qacc + bias - passive.
 * Afterwards bcg_mjref_bodies and bcg_mjref_jac read the kinematics of qpos. */
void bcg_mjref_inverse(bcg_mjref *r, const double *qpos, const double *qvel, const double *qacc,
                       double *qfrc_inverse);
/* (qpos2 - qpos1) / dt in the tangent space (mj_differentiatePos): nv
 * numbers in qvel's layout, quaternions as rotation vectors in the frame of
 * qpos1 (a free joint's rotation in its body frame, as qvel's). */
void bcg_mjref_diff_pos(const bcg_mjref *r, const double *qpos1, const double *qpos2, double dt, double *qvel);
double bcg_mjref_total_mass(const bcg_mjref *r); /* mj_getTotalmass (kg) */

BCG_END_DECLS

#endif
