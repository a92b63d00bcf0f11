/* bcg/sim.h - batched time stepping on the CPU (OpenMP over environments).
 *
 * A bcg_sim is stateless with respect to the physics: it steps whatever batch
 * of states it is given (environments, or the branches of a bundle) and keeps
 * only workspaces, the contact plugin and per-environment contact
 * diagnostics. States are x = (q[nq], u[nv]) per environment; state adjoints
 * are (q_bar[nv] in tangent coordinates, u_bar[nv]). */
#ifndef BCG_SIM_H
#define BCG_SIM_H

#include <stddef.h>
#include <stdint.h>
#include "bcg/model.h"
#include "bcg/plugin.h"
#include "bcg/step.h"

BCG_BEGIN_DECLS

/* Domain randomisation ([sim] dr_* keys, docs/design.md section 4.9), off by
 * default. Every value is drawn from the counter-based RNG (bcg/rng.h) as a
 * pure function of (seed, purpose, environment, draw/clock), so runs are
 * reproducible and independent of the thread count and of the backend. */
typedef struct bcg_drparams {
  bcg_real friction_min, friction_max; /* per-env friction ~ U[min, max]; min < 0: off */
  bcg_real mass_scale;    /* per-env, per-body mass and inertia scale ~ U[1-s, 1+s]; 0: off */
  bcg_real com_offset;    /* per-env, per-body centre-of-mass offset ~ U[-h, h]^3 (m); 0: off */
  bcg_real push_interval; /* mean seconds between pushes; 0: off */
  bcg_real push_velocity; /* magnitude of a push (m/s): a horizontal kick of the root's linear velocity */
} bcg_drparams;

void bcg_drparams_default(bcg_drparams *dr); /* everything off */
int bcg_drparams_active(const bcg_drparams *dr);

/* The randomised quantities of n environments, owned by the env
 * (bcg_env_set_domain) and shared by every sim stepping that env's states
 * (the env's own sim, an estimator's branch sims). A batch slot i of a sim
 * belongs to environment envmap[i] (identity when the sim has no envmap).
 *
 *   friction: mu[e] replaces the model's friction of every contact of env e
 *             that has friction at all (set in the contact batch's mu array
 *             after the first half of the substep); constant of the step.
 *   mass/com: m[e] is env e's copy of the model with body_mass,
 *             body_inertia scaled and body_ipos offset; the per-environment
 *             stepper halves get &m[e] (sizeof(bcg_mdata) per environment).
 *   pushes:   at the end of a forward control step of env e, with
 *             probability push_prob = control_dt / dr_push_interval, the
 *             root's (free joint's) world-frame linear velocity gets a kick
 *             push_vel (cos t, sin t, 0), t uniform: the decision and t are
 *             drawn from (seed, BCG_RNG_PUSH, e, clock[e]). The kick is an
 *             additive constant of the transition (it does not depend on the
 *             state or the action), so the control step's adjoint passes
 *             through it unchanged and the VJPs do nothing for it. clock[e]
 *             counts env e's transitions: bcg_env_step advances it, and
 *             estimators that step env->sim themselves call bcg_env_tick. */
typedef struct bcg_domain {
  int n;           /* environments */
  uint64_t seed;
  bcg_mdata *m;    /* [n] per-environment models, NULL unless mass/com randomisation is on */
  bcg_real *mu;    /* [n] per-environment friction, NULL unless friction randomisation is on */
  uint32_t *clock; /* [n] push clock */
  bcg_real push_prob, push_vel;
  int push_dof;    /* first dof of the free root joint; -1: no pushes */
  uint64_t *draw;  /* [n] the draw index env e's friction, masses and com offsets came from
                    * (bcg_env_randomize; checkpointed by the learners with clock) */
  uint32_t *ver;   /* [n] bumped each time env e is re-drawn: device copies re-send only the
                    * environments whose version changed since they last synchronised */
  uint64_t id;     /* unique per domain of the process (a new domain is sent whole) */
} bcg_domain;

/* Per-stage timing (for benchmarks), the CPU's counterpart of
 * bcg_cuda_sim_set_timing: while on, each stage of a substep and of its
 * adjoint adds its wall time (summed over the threads that ran it, so
 * thread-seconds with several) to stage_s; off by default, and a stage then
 * costs nothing extra. The adjoint's stages are its own, recompute
 * included: */
enum {
  BCG_SIM_STAGE_PRE = 0,         /* first half (bcg_substep_pre) */
  BCG_SIM_STAGE_CONTACT = 1,     /* the contact plugin's solve */
  BCG_SIM_STAGE_POST = 2,        /* second half */
  BCG_SIM_STAGE_PRE_RC = 3,      /* the adjoint's recompute of the first half */
  BCG_SIM_STAGE_CONTACT_RC = 4,  /* ... and of the contact solve */
  BCG_SIM_STAGE_POST_VJP = 5,    /* second half recomputed and its adjoint */
  BCG_SIM_STAGE_CONTACT_VJP = 6, /* the contact adjoints zeroed, the plugin's solve_vjp */
  BCG_SIM_STAGE_PRE_VJP = 7,     /* the first half's adjoint */
  BCG_SIM_NSTAGE = 8
};

struct bcg_sim {
  const bcg_model *model;
  bcg_simparams sp;
  int cap;  /* largest batch */
  int ncon; /* contact slots per environment in the batch arrays */
  const bcg_contact_ops *cops;
  void *cself;
  bcg_stepws *ws;
  bcg_stepadj *adj;
  int *nact;
  bcg_real *gap, *v0, *c, *G, *mu, *lam, *fn;
  bcg_real *lamb, *gapb, *v0b, *cb, *Gb;
  /* diagnostics of the last control step, per environment */
  bcg_real *maxfn;  /* largest normal force (N) */
  bcg_real *maxpen; /* deepest penetration (m, >= 0) */
  int *bad;         /* non-finite or non-SPD during the last control step */
  bcg_real *scratch;
  /* domain randomisation (NULL: none; not owned) and the batch slot ->
   * environment map (NULL: identity; not owned, set by callers that compact
   * or replicate environments, e.g. branch batches) */
  const bcg_domain *dom;
  const int *envmap;
  /* 1: the control step runs in one OpenMP parallel region, the contact
   * plugin called on each thread's block of environments (bcg_sim_set_slices) */
  int slices;
  /* per-stage timing (bcg_sim_set_timing): on, and the seconds so far */
  int timing;
  double stage_s[BCG_SIM_NSTAGE];
  /* with G: per slot, the active contacts of the last write of its Delassus
   * block, -1 while it is all zero (what the next write must clear) */
  int *Gused;
  /* the contact plugin's kept solve between the adjoint's solve and its VJP
   * (bcg_contact_ops.solve_keep): [cap][ckeep_n] reals, made on the first
   * adjoint; NULL where the plugin has no such pair */
  bcg_real *ckeep;
  size_t ckeep_n;
};

/* The contact plugin's batch over a backend's arrays (host or device): one
 * filler for the CPU stepper (core/sim.c) and the CUDA one. */
void bcg_contact_batch_fill(bcg_contact_batch *b, int n, int ncon, const bcg_simparams *sp, const int *nact,
                            const bcg_real *gap, const bcg_real *v0, const bcg_real *c, const bcg_real *G,
                            const bcg_real *mu, bcg_real *lam, bcg_real *fn);

/* The batch size and step parameters both backends need (cap > 0, 0 <=
 * ncmax <= BCG_MAX_CONTACT, dt > 0, substeps >= 1): 0, or -1 with a message. */
int bcg_sim_check_args(const bcg_simparams *sp, int cap, char *err, size_t errlen);

/* Defaults: the model's timestep, 4 substeps, motor actuation, limits on. */
void bcg_simparams_default(const bcg_model *model, bcg_simparams *sp);

/* cops may be NULL (no contact). Returns NULL with a message on failure. */
bcg_sim *bcg_sim_create(const bcg_model *model, const bcg_simparams *sp, int cap, const bcg_contact_ops *cops,
                        void *cself, char *err, size_t errlen);
void bcg_sim_free(bcg_sim *s);

/* One substep for n <= cap environments. Inputs and outputs may not alias. */
int bcg_sim_substep(bcg_sim *s, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a, bcg_real *qo,
                    bcg_real *uo);
/* Its adjoint, recomputed from the same inputs: given (qob, uob), writes qb,
 * ub and accumulates ab. */
int bcg_sim_substep_vjp(bcg_sim *s, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a,
                        const bcg_real *qob, const bcg_real *uob, bcg_real *qb, bcg_real *ub, bcg_real *ab);

/* Whether the control step and its adjoint may call the contact plugin on
 * blocks of environments from several threads at once (one parallel region
 * per control step instead of several per substep). bcg_sim_create turns it
 * on without a contact plugin; the env turns it on for a plugin that
 * declares BCG_CAP_SLICES. Results are the same either way. */
void bcg_sim_set_slices(bcg_sim *s, int on);

/* Subnormal numbers on the CPU. flush = 1 sets the x86 SSE modes
 * flush-to-zero and denormals-are-zero in the calling thread and in the
 * first max(omp_get_max_threads(), cores) threads of its OpenMP pool, the
 * threads bcg's parallel regions use (a thread started later inherits the
 * mode of the thread that starts it); 0 clears them. A float adjoint that decays over a horizon
 * reaches the subnormal range (below 1.2e-38), where each operation costs
 * tens of cycles: flushing made a float SHAC+BCG adjoint 24 % faster
 * (docs/performance.md). Returns 0, or -1 where the CPU has no such modes
 * (then nothing changes). [run] flush_denormals decides it for a session. */
int bcg_cpu_flush_denormals(int flush);
/* [run] flush_denormals's value applied as bcg_cpu_flush_denormals does:
 * "true" sets the modes, "false" clears them, "auto" sets them in the float
 * build and leaves them as they are in the double build (a program that
 * embeds libbcg may have set them). Returns -1 when flushing was asked of a
 * CPU without the modes, else 0. */
int bcg_cpu_denormals_setting(const char *value);
/* 1 if the calling thread flushes subnormals to zero, 0 if not, -1 where unknown */
int bcg_cpu_denormals_flushed(void);

/* Per-stage timing (the BCG_SIM_STAGE_* stages above) on or off */
void bcg_sim_set_timing(bcg_sim *s, int on); /* also resets the totals */
/* Seconds spent in each stage since timing was switched on. */
void bcg_sim_stage_seconds(const bcg_sim *s, double sec[BCG_SIM_NSTAGE]);

/* One control step (sp.substeps substeps holding a). tape, if not NULL,
 * receives each substep's input state: [substeps][n][nq + nv]. Updates the
 * per-environment diagnostics. */
int bcg_sim_control_step(bcg_sim *s, int n, const bcg_real *q, const bcg_real *u, const bcg_real *a, bcg_real *qo,
                         bcg_real *uo, bcg_real *tape);
/* Adjoint of a control step from its tape: xob [n][2nv] (q_bar, u_bar) of
 * the output, writes xb [n][2nv] for the input and accumulates ab [n][nu]. */
int bcg_sim_control_step_vjp(bcg_sim *s, int n, const bcg_real *tape, const bcg_real *a, const bcg_real *xob,
                             bcg_real *xb, bcg_real *ab);

/* Attach a domain (NULL: detach) and set the slot -> environment map
 * (NULL: identity); both pointers must outlive their use. The map must cover
 * every slot of the following calls, and must be the same for a forward call
 * and its VJP (the adjoint reads the same per-environment model). */
void bcg_sim_set_domain(bcg_sim *s, const bcg_domain *dom);
void bcg_sim_set_envmap(bcg_sim *s, const int *envmap);
/* The model of batch slot i (its environment's randomised copy, or the model) */
const bcg_mdata *bcg_sim_slot_model(const bcg_sim *s, int i);

/* Simulation parameters from a validated config's [sim] section (control
 * step = substeps * dt; dt = control_dt / substeps). need_G is taken from the
 * contact plugin's capabilities, if one is selected. Returns 0, or -1 with a
 * message naming the key. */
typedef struct bcg_config bcg_config;
int bcg_simparams_from_config(const bcg_config *cfg, const bcg_model *model, bcg_simparams *sp, char *err,
                              size_t errlen);

/* Plausibility of PD gains (actuation = pd): the largest effective gain
 * kp_i (N m/rad; [sim] kp * gear_i / 100) against M g h, M the model's mass,
 * g |gravity|, h the height of its centre of mass above its lowest contact
 * point (or lowest body origin without contact points) in the default pose.
 * A robot standing on one joint is an inverted pendulum, which a PD joint
 * holds upright only when kp > M g h: when even the stiffest joint is below
 * that, no joint can hold the robot up (a gear-1 robot such as the G1 gets
 * 5 N m/rad from kp = 500; humanoid.xml's stiffest joint gets 600 against
 * M g h of about 390). Returns 1 when implausible (kp_max < need), else 0;
 * need is 0 when the criterion does not apply (no actuators, no gravity,
 * h <= 0). */
typedef struct bcg_pd_check {
  double kp_max; /* the largest effective kp (N m/rad) */
  int act_max;   /* its actuator, -1 if none */
  double mass, g, h;
  double need; /* M g h (N m/rad) */
} bcg_pd_check;
int bcg_pd_check_gains(const bcg_model *model, const bcg_simparams *sp, bcg_pd_check *c);

/* Domain randomisation parameters from a config's [sim] dr_* keys. */
int bcg_drparams_from_config(const bcg_config *cfg, bcg_drparams *dr, char *err, size_t errlen);

/* Create the [contact] plugin instance of a config (NULL ops when the config
 * has no [contact] section). Returns 0 or -1 with a message. */
int bcg_contact_from_config(const bcg_config *cfg, const bcg_model *model, const bcg_contact_ops **ops,
                            void **self, char *err, size_t errlen);

/* Convert the gradient of a function of raw qpos coordinates into the
 * tangent adjoint at q (quaternions: q <- q * exp(delta)). */
void bcg_qgrad_to_tangent(const bcg_mdata *m, const bcg_real *q, const bcg_real *gq, bcg_real *tg);

BCG_END_DECLS

#endif
