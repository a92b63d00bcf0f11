/* bcg/env.h - the batched environment shared by tasks, estimators and
 * learners.
 *
 * An env owns the model, the batched simulator (with its contact plugin) and
 * nothing that changes during a rollout except bookkeeping: states are passed
 * explicitly between the learner, the estimator and the task, so that every
 * backward pass reads what its forward saved (never the env's "current"
 * state). A state is x = (q[nq], u[nv]) per environment, stride nx = nq+nv;
 * its adjoint is (q_bar[nv] in tangent coordinates, u_bar[nv]), stride 2 nv. */
#ifndef BCG_ENV_H
#define BCG_ENV_H

#include <stdint.h>
#include "bcg/model.h"
#include "bcg/plugin.h"
#include "bcg/sim.h"

BCG_BEGIN_DECLS

struct bcg_env {
  const bcg_model *model;
  bcg_sim *sim;        /* CPU batched stepper, capacity >= nenv * max_branches */
  void *cuda_sim;      /* private (core/env.c): the CUDA stepper and its buffers when device = cuda */
  int device;          /* 0 cpu, 1 cuda */
  int nenv, nq, nv, nu, nx;
  uint64_t seed;
  bcg_real control_dt; /* seconds per control step */
  /* the contact model */
  const bcg_contact_ops *contact_ops;
  void *contact;
  /* the task (set after the task plugin is created) */
  const bcg_task_ops *task_ops;
  void *task;
  int own; /* frees model and contact instance */
  /* domain randomisation ([sim] dr_* keys); dom is NULL when it is off */
  bcg_drparams dr;
  bcg_domain *dom;
  uint32_t dom_gen; /* bumped whenever dom is replaced or re-drawn (device copies refresh from it) */
  /* bcg_env_create_like: the env whose model, contact instance and domain
   * this one shares (none of them owned); NULL for a top-level env */
  const struct bcg_env *parent;
  /* private (core/env.c): the split q / u buffers of bcg_env_control_step, grown on demand */
  bcg_real *split;
  size_t nsplit;
  char contact_name[32]; /* the contact plugin's name ("" without one), for error messages */
  int split_pinned;      /* private: split is page-locked host memory (an env on the GPU) */
};

typedef struct bcg_config bcg_config;

/* Build an env from a validated config: [model] path, [sim] keys, the
 * [contact] plugin, [run] seed and device, with room for nenv environments.
 * The task is not created here (env->task stays NULL). */
bcg_env *bcg_env_create(const bcg_config *cfg, int nenv, char *err, size_t errlen);
/* Whether the config's task can run on model: a task plugin with
 * BCG_CAP_NEEDS_FLOOR (imitation, locomotion) needs floor contact (a floor
 * plane and at least one contact point), unless [model] allow_no_floor is
 * true. 0, or -1 with a one-line message naming the config's [model] path.
 * bcg_env_create and bcg check call it. */
int bcg_env_check_floor(const bcg_config *cfg, const bcg_model *model, char *err, size_t errlen);

/* The model as the config's [model] section asks (path, contact_bodies,
 * mesh_contact_points): NULL with a message naming the file and the key. */
bcg_model *bcg_model_from_config(const bcg_config *cfg, char *err, size_t errlen);
/* Build an env from parts (tests, tools). The env takes ownership of model
 * and of the contact instance when own != 0. */
bcg_env *bcg_env_create_from(bcg_model *model, const bcg_simparams *sp, const bcg_contact_ops *contact_ops,
                             void *contact, int nenv, uint64_t seed, int own, char *err, size_t errlen);
void bcg_env_free(bcg_env *env);
/* A batch "like" parent with room for nenv slots (e.g. an estimator's branch
 * batch): the same model, sim parameters, contact plugin instance, seed and
 * domain (shared, not owned: slots are mapped to the parent's environments
 * with bcg_env_set_envmap), on the same device (cuda when the parent is).
 * It follows later changes of the parent's domain by itself; its own
 * bcg_env_set_domain fails and bcg_env_randomize / bcg_env_tick do nothing
 * (re-draw and tick through the parent). Free it before the parent. */
bcg_env *bcg_env_create_like(const bcg_env *parent, int nenv, char *err, size_t errlen);

/* Domain randomisation (see bcg_domain in bcg/sim.h). bcg_env_create sets it
 * from the config's [sim] dr_* keys and draws every environment once
 * (draw 0; the learners re-draw at resets, see bcg_env_randomize).
 * bcg_env_set_domain (re)configures it (all keys off: removes it) and draws
 * every environment with draw 0. Returns 0 or -1 (out of memory /
 * no free root for pushes, with a message). */
int bcg_env_set_domain(bcg_env *env, const bcg_drparams *dr, char *err, size_t errlen);
/* Re-draw friction, masses and centre-of-mass offsets of environments envs[0..n-1]
 * (envs NULL: 0..n-1) from (seed, BCG_RNG_DOMAIN, env, draw): the same
 * (seed, env, draw) always gives the same model; dom->draw[e] records the
 * index. The learners call it for the environments they reset, with the
 * task's reset draw counter of that reset (the creation reset is draw 0, the
 * draw bcg_env_set_domain made), and checkpoint dom->draw and dom->clock
 * (learners/learner_util.h, lu_save_domain), so runs and --resume are
 * reproducible. The rule (docs/design.md section 4.9): a backward pass
 * reads the domain of the env when it runs, so re-drawing an environment
 * between a forward step and that step's backward would make the backward
 * use the new model. SHAC (and any learner that differentiates through the
 * physics) therefore defers the re-draw of environments reset inside a
 * horizon to the horizon boundary, after its backward pass: the rest of the
 * horizon of a new episode runs on the previous draw. PPO (forward only)
 * re-draws at the reset itself. A branch batch (bcg_env_create_like) and the
 * device copies follow through dom_gen, which every call bumps. No-op
 * without DR. envs lists each environment at most once (from 16 of them the
 * draws run over the OpenMP threads; a draw depends only on the seed, the
 * environment and `draw`, so the result does not depend on the threads). */
void bcg_env_randomize(bcg_env *env, const int *envs, int n, uint64_t draw);
/* Advance the push clock of environments envs[0..n-1] (NULL: 0..n-1) by one
 * transition. bcg_env_step does it itself; an estimator that steps with
 * bcg_env_control_step calls it once per transition. */
void bcg_env_tick(bcg_env *env, const int *envs, int n);
/* The batch slot -> environment map of the following control steps and
 * VJPs of env (NULL: identity): slot i steps environment envmap[i]'s
 * randomised model, friction and pushes (bcg_sim_set_envmap on the CPU, the
 * map copied to the device per call on cuda). The array must stay valid and
 * unchanged from a step to its VJP; the same map for both. Without domain
 * randomisation it changes nothing. */
void bcg_env_set_envmap(bcg_env *env, const int *envmap);
/* device = cuda: control steps and VJPs of batches of fewer than n
 * environments run on the env's CPU sim instead (the same code, the same
 * tape layout, so a step and its VJP may run on different devices); n <= 1:
 * every batch on the GPU. bcg_env_create sets [run] sim_min_batch; envs
 * created like another inherit it. No effect with device = cpu. */
void bcg_env_set_cuda_min_batch(bcg_env *env, int n);
/* Batches (control steps and their VJPs) that envs with device = cuda have
 * run on the GPU and, under sim_min_batch, on the CPU, process-wide since
 * start (diagnostics and tests). */
void bcg_env_device_batches(uint64_t *gpu, uint64_t *cpu);

/* The rollout interface of the estimators, in terms of explicit states:
 *   est->forward(t, x_t, a_t, x_{t+1})
 *   est->backward(t, xbar_{t+1}, xbar_t, abar_t)
 * with per-environment contact diagnostics of the transition after forward
 * (bcg_env_diagnostics). */

/* The per-environment (per batch slot) diagnostics of the last control step,
 * on either device: the largest normal contact force over its substeps (N),
 * the deepest penetration (m, >= 0), and a flag for non-finite or non-SPD
 * substeps. Writable: an estimator that replaces a transition (bcg's bundle
 * average) reports the diagnostics of what it returned. */
typedef struct bcg_env_diag {
  bcg_real *maxfn, *maxpen;
  int *bad;
} bcg_env_diag;
bcg_env_diag bcg_env_diagnostics(bcg_env *env);
/* substeps per control step; the contact activation margin (m) */
int bcg_env_substeps(const bcg_env *env);
bcg_real bcg_env_contact_margin(const bcg_env *env);

/* Default substep-level helpers for estimators: one control step of every
 * environment in a state batch (x: [n][nx]) with tape (may be NULL), and its
 * adjoint from the tape. */
int bcg_env_step(bcg_env *env, int n, const bcg_real *x, const bcg_real *a, bcg_real *xn, bcg_real *tape);
/* The same without advancing the push clock (for estimators that step
 * compacted or replicated batches and tick once per transition themselves).
 * Both run on the env's device and leave the diagnostics of the n slots in
 * bcg_env_diagnostics, on either device. */
int bcg_env_control_step(bcg_env *env, int n, const bcg_real *x, const bcg_real *a, bcg_real *xn, bcg_real *tape);
int bcg_env_step_vjp(bcg_env *env, int n, const bcg_real *tape, const bcg_real *a, const bcg_real *xnb,
                     bcg_real *xb, bcg_real *ab);
/* Seconds (wall, summed over calling threads) spent in bcg_env_control_step
 * (and bcg_env_step) and in bcg_env_step_vjp by every env of the process
 * since it started, on either device (the GPU path's copies included). The
 * training loop reports their differences per iteration (bcg/train.h). */
void bcg_env_time(double *fwd_s, double *vjp_s);
/* reals of tape one control step of n environments needs */
size_t bcg_env_tape_size(const bcg_env *env, int n);
/* The control steps of dt seconds that cover `seconds`: ceil(seconds / dt),
 * where a quotient within 1e-6 (relative) of a whole number is that number.
 * dt is a bcg_real (0.02 is 0.0199999996 in float), so a plain ceil gives
 * one step too many for durations that are whole multiples of it. For tasks'
 * episode lengths and evaluation windows. */
double bcg_steps_for(double seconds, double dt);

/* Device arrays, for GPU estimators (bcg_estimator_ops.forward_cuda): with
 * [run] device = cuda, bcg_env_step_cuda and bcg_env_step_vjp_cuda do what
 * bcg_env_step and bcg_env_step_vjp do, always on the GPU, with every array
 * a DEVICE pointer in the same layout (x, xn [n][nq + nv]; a, ab [n][nu];
 * xnb, xb [n][2 nv]; tape bcg_env_tape_size(env, n) reals, may be NULL in the
 * forward). Work runs on the env's CUDA stream (bcg_env_cuda_stream, a
 * cudaStream_t); when they return their results are complete, and the
 * diagnostics (bcg_env_diagnostics) are on the host. -1 on an env without
 * device = cuda (the error channel says so). bcg_env_on_cuda: 1 if the env
 * steps on the GPU. */
int bcg_env_on_cuda(const bcg_env *env);
void *bcg_env_cuda_stream(bcg_env *env);
int bcg_env_step_cuda(bcg_env *env, int n, const bcg_real *x, const bcg_real *a, bcg_real *xn, bcg_real *tape);
int bcg_env_step_vjp_cuda(bcg_env *env, int n, const bcg_real *tape, const bcg_real *a, const bcg_real *xnb,
                          bcg_real *xb, bcg_real *ab);

/* x (+) delta per environment: q by tangent displacement dq, u + du */
void bcg_env_perturb(const bcg_env *env, const bcg_real *x, const bcg_real *dq, const bcg_real *du, bcg_real *xo);

BCG_END_DECLS

#endif
