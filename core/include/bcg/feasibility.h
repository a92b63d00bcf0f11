/* bcg/feasibility.h - dynamic feasibility of a reference motion (`bcg
 * feasibility`, docs/feasibility.md): the joint torques an inverse-dynamics
 * replay of the clip needs against the actuators' limits, and the residual
 * wrench on the free root (the force and torque an invisible hand would have
 * to apply) that no contact force can supply.
 *
 * Per frame:
 *   1. qvel and qacc from a local quadratic least-squares fit (a
 *      Savitzky-Golay filter) over `window` frames around the frame, in
 *      MuJoCo's tangent space: each neighbour's offset from the frame is
 *      mj_differentiatePos(frame -> neighbour), so quaternions are handled as
 *      rotation vectors in the body frame (qvel's convention). Near the ends
 *      the window is shifted inside the clip. window = 3 is the plain central
 *      difference (one-sided at the ends). The window does not cross a
 *      switch between touching the floor (a contact point within
 *      contact_tol) and flight: it is shifted inside its phase, so a
 *      touchdown or take-off (an impulse contact can deliver) is not smeared
 *      into accelerations of the flight frames; the root's velocity jump
 *      there is reported (max_dv).
 *   2. tau = mj_inverse with MuJoCo's constraints off: M qacc + bias -
 *      passive (gravity, Coriolis, the joints' springs and damping), nv
 *      numbers.
 *   3. contact (mode FIT, the default): the contact points of bcg's contact
 *      geometry (the lowest points of the collision spheres and capsule
 *      ends, as bcg's simulator uses) at most contact_tol above the floor may
 *      push with any force inside their friction cone (the model's friction
 *      with the floor, the cone as an inscribed pyramid of 8 edges). The
 *      contact forces are chosen by a non-negative least-squares fit that
 *      minimises, in this order of priority (weights), the residual on the
 *      root and on any unactuated dof, then sum_j (tau_j / limit_j)^2 over the
 *      actuated joints: the least demanding contact forces that realise the
 *      motion. The actuated joints need tau_j - (J_c^T f)_j; the root's six
 *      components of tau - J_c^T f are the residual wrench.
 *      Mode SOFT: MuJoCo's own mj_inverse with its soft contact and joint
 *      limits on the clip as given; its contact force is a function of the
 *      penetration and of the contact points' velocity and acceleration, so a
 *      clip whose feet rest exactly on the floor (zero depth) gets no
 *      support from it and the weight shows up as root residual.
 * Torque limits are bcg's: gear * max|ctrlrange| of each actuator, the PD
 * clip of sim.pd_torque_limit (bcg_simparams_default), which is also the
 * motor actuation's range. */
#ifndef BCG_FEASIBILITY_H
#define BCG_FEASIBILITY_H

#include "bcg/model.h"

BCG_BEGIN_DECLS

enum { BCG_FEAS_FIT = 0, BCG_FEAS_SOFT = 1 };

typedef struct bcg_feas_opts {
  int window;          /* frames of the local quadratic fit (odd, >= 3; default 7) */
  int contact;         /* BCG_FEAS_FIT (default) | BCG_FEAS_SOFT */
  double contact_tol;  /* FIT: a point at most this high above the floor may push (m; default 0.005) */
  double residual_tol; /* verdict: peak residual force at most residual_tol * m g (default 0.05) */
  double arm_tol;      /* verdict: peak residual torque at most arm_tol * m g (m; default 0.02) */
  int keep_frames;     /* fill the per-frame arrays of the result */
} bcg_feas_opts;

void bcg_feas_opts_default(bcg_feas_opts *o);

/* One actuated joint (dof). */
typedef struct bcg_feas_joint {
  int dof;
  char name[BCG_NAME_LEN];
  double limit;           /* N m (or N); 0: unlimited */
  double peak, peak_t;    /* largest |tau| and its time (s) */
  double rms;             /* RMS of tau over the frames */
  double over_frac;       /* fraction of the frames with |tau| > limit */
  double over_t0, over_t1; /* first and last time over the limit (-1: never) */
} bcg_feas_joint;

typedef struct bcg_feas_result {
  int nframes, njoint;
  double fps, mass, weight; /* frames per second, kg, m g (N) */
  bcg_feas_joint joint[BCG_MAX_DOF];
  /* residual on the root: force (world axes, N) and torque (about the root
   * joint's origin, N m) */
  double resF_peak, resF_peak_t, resF_rms, resF_over_frac; /* over: frames above residual_tol m g */
  double resF_axis_peak[3];                                /* largest |x|, |y|, |z| component */
  double resT_peak, resT_peak_t, resT_rms, resT_over_frac; /* over: frames above arm_tol m g */
  /* geometry (bcg's contact points): lowest point over the clip (m, < 0:
   * penetration), lowest foot point (bodies named *foot*), frames with no
   * point within contact_tol of the floor */
  double min_gap, min_gap_t, min_foot_gap, min_foot_gap_t, flight_frac;
  /* FIT, foot skate: the largest speed along the floor of a contact point the
   * fit loads with more than 2 % of m g (m/s; the fit treats every point as
   * sticking), and the fraction of the frames in which a loaded point moves
   * faster than 0.1 m/s; NAN in SOFT */
  double max_slip, max_slip_t, skate_frac;
  /* the largest jump of the root's velocity where the clip switches between
   * touching the floor and flight (m/s): an impact or a push-off impulse,
   * which the per-phase fit of qacc leaves out */
  double max_dv, max_dv_t;
  int feasible;
  char verdict[1024]; /* "feasible" or "NOT feasible: <reasons, worst first>" */
  /* per frame, when keep_frames (else NULL): */
  double *tau;      /* [nframes][njoint] actuator torque needed */
  double *res;      /* [nframes][6] residual force (world) and torque (world axes) */
  double *fcontact; /* [nframes][3] total contact force (world; SOFT: 0) */
  double *gap;      /* [nframes][2] lowest point, lowest foot point (m) */
} bcg_feas_result;

/* Analyse nframes qpos frames (nq each, MuJoCo's layout, quaternions w x y z)
 * at fps. The model needs a free root and an actuator on every other dof.
 * Returns 0, or -1 with a one-line message. */
int bcg_feasibility(const bcg_model *model, const double *qpos, int nframes, double fps, const bcg_feas_opts *o,
                    bcg_feas_result *res, char *err, size_t errlen);
void bcg_feas_result_free(bcg_feas_result *res);

BCG_END_DECLS

#endif
