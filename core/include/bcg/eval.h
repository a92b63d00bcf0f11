/* bcg/eval.h - sim-to-sim transfer evaluation: a trained policy run in
 * MuJoCo (libmujoco) and in bcg from the same initial states, with falls,
 * foot penetration and tracking error.
 *
 * Both simulators are driven the same way: every control step the task
 * computes the observation from the simulator's state (qpos, qvel in
 * MuJoCo's layout, which is bcg's), the policy gives the mean action, and
 * the action is held for [sim] substeps substeps of control_dt / substeps.
 * With actuation = pd, MuJoCo's motors are turned into servos with bcg's PD
 * law (force = kp (target - q) - kd qdot, target = qdef + action_scale * a,
 * clipped to gear * ctrlrange) and MuJoCo's implicit-in-velocity integrator
 * treats the kd term implicitly, as bcg's stepper does; MuJoCo keeps its own
 * contact model (soft constraints) and joint-limit constraints, which is the
 * point of the transfer test. Penetration is measured with bcg's contact
 * geometry on each simulator's state, so both columns use one ruler.
 *
 * Two tracking errors. E_track is the mean body-position error over the
 * control steps before the fall (or the end): a policy that falls early is
 * averaged over its few good steps only, so it is not comparable between
 * policies. E_fixed is comparable: the mean over a fixed window of K control
 * steps from the same clip phase for every policy (the eval's initial state,
 * the clip's start), K = --seconds / control_dt, shortened only by the end of
 * the clip or of the task's episode (the same step for every run); each step
 * counts its error clipped at P = fall_penalty (1 m by default), and every
 * step of the window after a fall (root below fall_height, or a state that is
 * not finite) counts as P. Per run, E_fixed = up * mean(min(e, P) | up) +
 * (1 - up) * P with up the fraction of the window survived (also reported),
 * so a fall can never lower it and E_fixed <= P. No simulation after the fall
 * is needed, so it is defined the same way in both simulators. */
#ifndef BCG_EVAL_H
#define BCG_EVAL_H

#include <stdint.h>
#include "bcg/train.h"

BCG_BEGIN_DECLS

#define BCG_EVAL_MAX_RUNS 256

enum { BCG_EVAL_BCG = 1, BCG_EVAL_MUJOCO = 2 };

/* The policy: mean actions a [n][nu] for observations obs [n][obs_dim]. */
typedef int (*bcg_policy_fn)(void *ctx, const bcg_real *obs, int n, bcg_real *a);

typedef struct bcg_eval_opts {
  int runs;           /* episodes per simulator (at most BCG_EVAL_MAX_RUNS and the env's num_envs) */
  double seconds;     /* episode length (the clip's end stops it earlier) */
  double fall_height; /* the root below this (m) is a fall; the run stops there */
  uint64_t seed;      /* initial-state noise */
  double noise_q;     /* std of the joint-angle noise of the initial state (rad) */
  double noise_u;     /* std of the velocity noise of the initial state (rad/s, m/s) */
  int sims;           /* BCG_EVAL_BCG | BCG_EVAL_MUJOCO */
  double fall_penalty;/* E_fixed: the error (m) of a step after a fall, and the clip of every step's error; 0: 1 m */
  const char *trace;  /* non-NULL: also write every step of every episode to this HDF5 file (see bcg_eval) */
  double mj_timestep; /* MuJoCo's timestep (s); 0: bcg's substep (control_dt / substeps). The control step must
                         be a whole number of them (bcg_eval fails otherwise) */
} bcg_eval_opts;

typedef struct bcg_eval_run {
  int fell;          /* 1 if the root fell below fall_height */
  double length_s;   /* simulated seconds until the end or the fall */
  double pen_mm;     /* mean over control steps with a foot in contact of the deepest foot penetration (mm) */
  double etrack_cm;  /* mean over control steps of the mean body-position error (cm); NaN without a reference */
  double efixed_cm;  /* E_fixed over the fixed window (cm, see above); NaN without a reference */
  double up_frac;    /* fraction of the fixed window before the fall (1: no fall) */
  double travel_m;   /* root displacement along world x from the start to the end or the fall (m) */
  double selfc_frac; /* MuJoCo: fraction of the control steps before the fall that end with a contact between
                        two moving bodies (bcg does not model them: NaN in bcg) */
} bcg_eval_run;

typedef struct bcg_eval_stats {
  int n, falls;
  double length_mean, length_std, pen_mean, pen_std, etrack_mean, etrack_std;
  double efixed_mean, efixed_std, up_mean, up_std, travel_mean, travel_std, selfc_mean, selfc_std;
} bcg_eval_stats;

typedef struct bcg_eval_result {
  int runs;
  bcg_eval_run run[2][BCG_EVAL_MAX_RUNS]; /* [0] bcg, [1] mujoco */
  bcg_eval_stats stats[2];
  int have[2];
  int window_steps;      /* K of E_fixed (control steps) */
  double window_s;       /* K * control_dt */
  double penalty_m;      /* P of E_fixed (m) */
  double mj_timestep;    /* MuJoCo: its timestep (s) and steps per control step (have[1]) */
  int mj_steps;
} bcg_eval_result;

/* Evaluate policy in the simulators of opts->sims. S must be an open session
 * (its env, task and [sim] parameters are used; its learner is not).
 * With opts->trace, the episodes themselves go to that HDF5 file, one group
 * per simulator (bcg, mujoco) with
 *   x       [runs][steps + 1][nq + nv]  the state (qpos, qvel) before each step and after the last
 *   action  [runs][steps][nu]          the policy's mean action
 *   reward  [runs][steps]              the task's reward of each step
 *   self_contact [runs][steps]         (mujoco) 1 where the step ended in a body-body contact
 *   bcg_next [runs][steps][nq + nv]    (mujoco) bcg's step from MuJoCo's state under the same action:
 *                                      with x[:, 1:] the one-step mismatch of the two simulators
 *   ctrl    [runs][steps][nu]          (mujoco) the control MuJoCo's actuators got (pd: qdef + action_scale * a)
 * and at the top, with MuJoCo, how it was driven (a replay: tools/trace_mismatch.py --replay):
 *   mujoco_timestep_substeps [2]       MuJoCo's timestep (s) and steps per control step (implicit integrator)
 *   mujoco_pd_kp_kd_taumax [nu][3]     (pd actuation) bcg's PD law as MuJoCo servos: force kp (ctrl - q) - kd qdot,
 *                                      clipped to +-taumax (0: no clip); without it the model's own actuators
 *   length  [runs]                     steps simulated before the end or the fall
 *   phase   [runs]                     the task clock's phase of each run (its reset's, the same in both
 *                                      simulators): x[r][t] was reached at the clock {t, 0, phase[r]},
 *                                      e.g. for the task's reference_qpos (bcg render's ghost)
 * steps = the evaluation's window; after a fall or the end the state is held. */
int bcg_eval(bcg_session *S, bcg_policy_fn policy, void *ctx, const bcg_eval_opts *opts, bcg_eval_result *res,
             char *err, size_t errlen);

/* The session's learner as a policy (ctx = the session). */
int bcg_eval_learner_policy(void *session, const bcg_real *obs, int n, bcg_real *a);

/* Print the definition of the columns and the table; write eval.h5. */
void bcg_eval_print(const bcg_eval_result *res, FILE *f);
int bcg_eval_write(const bcg_eval_result *res, const bcg_eval_opts *opts, const char *path, char *err, size_t errlen);

BCG_END_DECLS

#endif
