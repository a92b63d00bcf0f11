/* bcg/plugin.h - the plugin ABI (the public SDK header every plugin includes).
 *
 * A plugin is a shared object that exports exactly one symbol:
 *
 *     BCG_EXTERN_C BCG_EXPORT const bcg_plugin_desc *bcg_plugin_entry(void);
 *
 * returning a pointer to a const descriptor that lives as long as the .so.
 * The descriptor begins with the ABI version and its own size, so a host can
 * refuse a plugin built against another ABI before reading anything else.
 * No constructors or destructors are relied on: the host calls the function
 * table's create/destroy explicitly, and passes a services table to create.
 *
 * Every per-environment function of a plugin is written once as BCG_HD static
 * inline code (see real.h); CPU entry points and CUDA entry points of the same
 * .so call the same functions. */
#ifndef BCG_PLUGIN_H
#define BCG_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include "bcg/dims.h"
#include "bcg/real.h"

BCG_BEGIN_DECLS

/* ABI rule (SDK 1.0). BCG_ABI_VERSION changes only when something a built
 * plugin relies on changes meaning or place; a plugin of another version is
 * refused. Within a version the descriptor and the function tables only grow,
 * by entries appended at their end, and every new entry is optional: a plugin
 * built against an older bcg of the same version (a smaller desc_size or ops
 * size) loads, and the core sees the entries it lacks as NULL/zero (the
 * registry keeps zero-padded copies at its own sizes; a table's size field
 * stays the plugin's). A plugin built against a newer bcg (larger sizes) is
 * refused with "update bcg". Plugins that call an optional entry of another
 * plugin (or the core's services) check the size first: BCG_OPS_HAS below. */
#define BCG_ABI_VERSION 1u
#define BCG_PLUGIN_ENTRY_SYMBOL "bcg_plugin_entry"

typedef enum bcg_kind {
  BCG_KIND_CONTACT = 1,
  BCG_KIND_ESTIMATOR = 2,
  BCG_KIND_LEARNER = 3,
  BCG_KIND_TASK = 4
} bcg_kind;

/* ---- declared INI keys -------------------------------------------------- */

typedef enum bcg_key_type {
  BCG_KEY_INT = 1,   /* integer, range [min, max] */
  BCG_KEY_REAL = 2,  /* floating point, range [min, max] */
  BCG_KEY_BOOL = 3,  /* true/false/yes/no/1/0 */
  BCG_KEY_STRING = 4,/* free text (paths, names) */
  BCG_KEY_CHOICE = 5,/* one of `choices`, written "a|b|c" */
  BCG_KEY_LIST = 6,  /* comma-separated integers, each in [min, max] (layer sizes) */
  BCG_KEY_PATH = 7   /* a file name: free text like STRING; a relative one is relative to the working
                        directory, and a run's config.ini stores it absolute (resume and eval from
                        anywhere) */
} bcg_key_type;

typedef struct bcg_key_spec {
  const char *name;    /* key inside the plugin's section */
  bcg_key_type type;
  const char *def;     /* default, as INI text; NULL means required */
  double min, max;     /* inclusive range for INT, REAL and LIST elements */
  const char *choices; /* "a|b|c" for CHOICE, else NULL */
  const char *help;    /* one line; say where a default comes from */
} bcg_key_spec;

/* Capability flags. */
#define BCG_CAP_NEEDS_DELASSUS (1ull << 0) /* contact: wants G = J H^-1 J^T */
#define BCG_CAP_CUDA (1ull << 1)           /* has CUDA entry points in this .so */
#define BCG_CAP_DIFFERENTIABLE (1ull << 2) /* provides exact VJPs */
#define BCG_CAP_NEEDS_BACKWARD (1ull << 3) /* learner: uses estimator backward */
#define BCG_CAP_NEEDS_FLOOR (1ull << 4)    /* task: its episodes stand on a floor; the env refuses a model
                                              without floor contact unless [model] allow_no_floor = true */
#define BCG_CAP_SLICES (1ull << 5)         /* contact: solve and solve_vjp may run concurrently on disjoint
                                              blocks of environments (a sub-batch), from several threads */
#define BCG_CAP_DATA_PARALLEL (1ull << 6)  /* learner: trains with several ranks (mpirun; bcg/dist.h): its
                                              gradients and statistics reduced over them with the services'
                                              dist_* entries, the parameters the same on every rank */

/* ---- services the host hands to plugins ---------------------------------- */

typedef struct bcg_params bcg_params; /* one resolved, validated INI section */

typedef struct bcg_services {
  uint32_t abi_version;
  uint32_t size;
  /* typed access to the plugin's own validated section; keys must be declared */
  long (*get_int)(const bcg_params *p, const char *key);
  double (*get_real)(const bcg_params *p, const char *key);
  int (*get_bool)(const bcg_params *p, const char *key);
  const char *(*get_string)(const bcg_params *p, const char *key);
  /* LIST keys: writes at most cap values, returns the count */
  int (*get_list)(const bcg_params *p, const char *key, long *out, int cap);
  /* informational message (the host decides where it goes) */
  void (*log)(int level, const char *fmt, ...);
  /* (appended; check size) why a runtime call is about to return non-zero: the
   * plugin's own code and a one-line message. The core prints it with the
   * plugin's kind and name, the call and the step, e.g. "[estimator] clipped:
   * backward at step 12 returned -1: adjoint not finite (code 3)". Only the
   * first message of a failing call is kept; any thread may call it. */
  void (*error)(int code, const char *fmt, ...);
  /* (appended in SDK 1.2; check size) the ranks of a data-parallel run (bcg/dist.h):
   * in place, x[i] := the sum over the ranks (collective: every rank calls it
   * in the same order with the same n; the identity with one rank); 0 or -1.
   * A learner with BCG_CAP_DATA_PARALLEL averages its gradients with it. */
  int (*dist_sum)(double *x, size_t n);
  int (*dist_sum_real)(bcg_real *x, size_t n);
  /* rank root's bytes to every rank (e.g. the initial parameters); 0 or -1 */
  int (*dist_bcast)(void *buf, size_t bytes, int root);
  /* 1 if the bytes are the same on every rank, 0 if not, -1 on error */
  int (*dist_same)(const void *p, size_t n);
} bcg_services;

/* 1 if the table `ops` of type T (a bcg_*_ops table or bcg_services: each
 * begins with its size) reaches entry f and sets it: the check before calling
 * an optional entry, since a table built against an older bcg ends earlier */
#define BCG_OPS_HAS(ops, T, f) ((ops)->size >= offsetof(T, f) + sizeof((ops)->f) && (ops)->f)
/* svc->error(code, ...) when the host has the entry (an older host may not) */
#define BCG_SVC_HAS(svc, f) BCG_OPS_HAS(svc, bcg_services, f)

/* Opaque host objects a plugin may receive (declared in their own headers). */
typedef struct bcg_model bcg_model;
typedef struct bcg_sim bcg_sim;
typedef struct bcg_env bcg_env;

/* Error reporting convention for create(): return NULL and write a one-line
 * message into err (capacity errlen). */

/* ---- contact models ------------------------------------------------------ */

/* One substep's contact problem for a batch of environments, in contact-frame
 * coordinates (normal first, then two tangents). The core compacts each
 * environment's active contacts (gap <= margin; the deepest ones when more
 * than max_contacts are, listed in contact-point slot order, not by depth, so
 * that the order of a Gauss-Seidel sweep does not change with the state) into
 * the first nactive[e] of ncon slots; a plugin reads only those and must leave
 * the impulse of every other slot zero. Arrays are [nenv][...] contiguous. A
 * contact's force should go to zero as its gap approaches margin, where it
 * leaves the list (smoothed_kappa tapers its weight), or the forward map
 * jumps there. */
typedef struct bcg_contact_batch {
  int nenv;
  int ncon;              /* slots per environment in these arrays (max active) */
  bcg_real dt;
  bcg_real margin;       /* activation margin the core used */
  const int *nactive;    /* [nenv] active contacts of each environment */
  const bcg_real *gap;   /* [nenv][ncon] signed gap, > 0 apart */
  const bcg_real *v0;    /* [nenv][ncon][3] contact velocity at start of substep */
  const bcg_real *c;     /* [nenv][ncon][3] free velocity J u_free */
  const bcg_real *G;     /* [nenv][3ncon][3ncon] Delassus, or NULL if not asked */
  const bcg_real *mu;    /* [nenv][ncon] friction coefficient */
  bcg_real *lam;         /* out [nenv][ncon][3] impulses */
  bcg_real *fn;          /* out [nenv][ncon] normal force lam_n / dt */
} bcg_contact_batch;

/* Adjoint of one substep's contact solve: given lam_bar, accumulate (+=) into
 * the adjoints of its inputs. */
typedef struct bcg_contact_adjoint {
  const bcg_real *lam_bar; /* [nenv][ncon][3] */
  bcg_real *gap_bar;       /* [nenv][ncon] */
  bcg_real *v0_bar;        /* [nenv][ncon][3] */
  bcg_real *c_bar;         /* [nenv][ncon][3] */
  bcg_real *G_bar;         /* [nenv][3ncon][3ncon] or NULL; of each environment's block only the
                              leading 3 nactive x 3 nactive is zeroed before and read after */
} bcg_contact_adjoint;

typedef struct bcg_contact_ops {
  uint32_t size;
  void *(*create)(const bcg_services *svc, const bcg_params *params,
                  const bcg_model *model, char *err, size_t errlen);
  void (*destroy)(void *self);
  /* CPU batched solve and its VJP. */
  int (*solve)(void *self, bcg_contact_batch *b);
  int (*solve_vjp)(void *self, const bcg_contact_batch *b, bcg_contact_adjoint *adj);
  /* CUDA versions (device pointers), NULL unless BCG_CAP_CUDA. */
  int (*solve_cuda)(void *self, bcg_contact_batch *b, void *stream);
  int (*solve_vjp_cuda)(void *self, const bcg_contact_batch *b, bcg_contact_adjoint *adj,
                        void *stream);
  /* (appended; optional, check with BCG_OPS_HAS) the adjoint's solve and VJP
   * without solving twice: solve_keep solves as solve does (the same lam and
   * fn) and leaves in keep ([nenv][keep_size(self, ncon)] reals, the
   * caller's) what solve_vjp_kept then reads in place of re-solving; the
   * latter gets the same batch (lam_bar added) and accumulates what solve_vjp
   * would. The CPU stepper's adjoint uses the pair when all three are set. */
  size_t (*keep_size)(void *self, int ncon);
  int (*solve_keep)(void *self, bcg_contact_batch *b, bcg_real *keep);
  int (*solve_vjp_kept)(void *self, const bcg_contact_batch *b, bcg_contact_adjoint *adj, bcg_real *keep);
} bcg_contact_ops;

/* ---- gradient estimators -------------------------------------------------- */

/* States are passed explicitly (see bcg/env.h): x [nenv][nx] with nx = nq+nv
 * (qpos then qvel), state adjoints [nenv][2nv] (tangent q_bar, then u_bar). */
typedef struct bcg_estimator_stats {
  uint64_t samples;     /* simulated control steps, every branch counted */
  uint64_t transitions; /* environment transitions taken (forward calls x envs) */
  uint64_t triggered;   /* transitions that bundled / truncated */
} bcg_estimator_stats;

typedef struct bcg_estimator_ops {
  uint32_t size;
  /* horizon: most forward steps between two begin() calls that backward()
   * will be asked about (0: forward only, no tape) */
  void *(*create)(const bcg_services *svc, const bcg_params *params, bcg_env *env, int horizon, char *err,
                  size_t errlen);
  void (*destroy)(void *self);
  /* start a new horizon: forget the tape and end every bundle */
  int (*begin)(void *self);
  /* advance every environment from x_t to x_{t+1} under a_t (t counts from begin) */
  int (*forward)(void *self, int t, const bcg_real *x, const bcg_real *a, bcg_real *xn);
  /* given the adjoint of x_{t+1}, write the adjoint of x_t and accumulate (+=)
   * the adjoint of a_t; called for t = T-1 down to 0 */
  int (*backward)(void *self, int t, const bcg_real *xn_bar, bcg_real *x_bar, bcg_real *a_bar);
  /* these environments were reset after step t: end their bundles (the
   * learner cuts their adjoints itself) */
  int (*reset_envs)(void *self, const int *envs, int n);
  void (*stats)(const void *self, bcg_estimator_stats *out);
  /* optional (may be NULL; check size first: a table built against an
   * earlier plugin.h ends at stats, and the loader accepts both sizes):
   * checkpoint I/O of the state a resumed run needs to continue bit for bit
   * (e.g. bcg's draw counter), into an open HDF5 group (hid_t as int64), the
   * checkpoint's group "estimator". load is called after create, before the
   * first begin; a checkpoint without the group leaves the created state. */
  int (*save)(void *self, int64_t group);
  int (*load)(void *self, int64_t group);
  /* (appended in SDK 1.0; optional, check size first) the estimator's own
   * per-iteration values, asked once after every learner iteration: up to cap
   * (name, value) pairs into names[] and values[] (names [a-z0-9_]+, at most
   * 27 characters, the same set every iteration); the core logs each as the
   * curve "est_<name>" of log.h5. Returns how many, or -1 on failure. The
   * values must follow from the run's state (e.g. counts since begin()), not
   * from the process's history, so that a resumed run logs what an
   * uninterrupted one does (test_crash compares them). */
  int (*log_values)(void *self, const char **names, double *values, int cap);
  /* (appended in SDK 1.1; mandatory with BCG_CAP_CUDA, else NULL or absent)
   * the GPU estimator: forward and backward on DEVICE arrays of the same
   * shapes, with the env's CUDA stream (bcg_env_cuda_stream). With [run]
   * device = cuda the core calls these instead of forward and backward: it
   * keeps device copies of the learner's host arrays, so the estimator's own
   * per-environment work (stepping with bcg_env_step_cuda and
   * bcg_env_step_vjp_cuda, its kernels on the adjoints) runs on the device,
   * its tapes stay there, and only the states and adjoints the learner
   * needs cross the bus. With device = cpu forward and backward run, so the
   * same plugin works on either. Results must be complete on return (a
   * stream synchronise, or a synchronous copy, at the end). */
  int (*forward_cuda)(void *self, int t, const bcg_real *x, const bcg_real *a, bcg_real *xn, void *stream);
  int (*backward_cuda)(void *self, int t, const bcg_real *xn_bar, bcg_real *x_bar, bcg_real *a_bar, void *stream);
} bcg_estimator_ops;

/* ---- learners ---------------------------------------------------------------- */

typedef struct bcg_learner_stats bcg_learner_stats; /* bcg/train.h */
typedef struct bcg_trainer bcg_trainer;             /* bcg/train.h */

typedef struct bcg_learner_ops {
  uint32_t size;
  void *(*create)(const bcg_services *svc, const bcg_params *params, bcg_trainer *tr, char *err, size_t errlen);
  void (*destroy)(void *self);
  /* one iteration: collect, compute losses, update; fills stats */
  int (*iterate)(void *self, bcg_learner_stats *stats);
  /* checkpoint I/O into an open HDF5 group (hid_t as int64) */
  int (*save)(void *self, int64_t group);
  int (*load)(void *self, int64_t group);
  /* mean action of the policy for observations obs [n][obs_dim] (evaluation) */
  int (*act)(void *self, const bcg_real *obs, int n, bcg_real *a);
} bcg_learner_ops;

/* ---- tasks --------------------------------------------------------------------- */

/* The per-environment episode clock. It is owned by the caller (a learner,
 * an evaluator), one per environment, written by reset() and advanced by the
 * caller (t++ after every control step); tasks read it and keep no
 * per-episode mutable state of their own. Everything a task's observation or
 * reward depends on besides x and the actions is in the clock, so a caller
 * that stores the clock of each step (with x and the actions) can evaluate
 * the VJPs of any earlier step exactly, even after the environment has been
 * reset since (docs/design.md section 12: a backward pass reads only what the
 * forward saved). */
typedef struct bcg_task_clock {
  int32_t t;     /* control steps since the episode's reset */
  int32_t flags; /* reserved, 0 */
  double phase;  /* episode constant chosen by reset() (imitation: reference start time in s; else 0) */
} bcg_task_clock;

/* Arrays are [nenv][...] contiguous; clk is [nenv]. Within one step the
 * caller: x_{t+1} = physics(x_t, a_t); clk[e].t++; reward(x_{t+1}, a_t,
 * a_{t-1}, clk); the next observation observe(x_{t+1}, a_t, clk). The
 * previous action a_{t-1} is zero right after a reset (no action of the new
 * episode has been taken yet). */
typedef struct bcg_task_ops {
  uint32_t size;
  void *(*create)(const bcg_services *svc, const bcg_params *params, bcg_env *env, char *err, size_t errlen);
  void (*destroy)(void *self);
  int (*obs_dim)(const void *self);
  int (*act_dim)(const void *self);
  /* reset the listed environments: write their initial states into the rows
   * of x [nenv][nx] and their clocks clk[e] = {0, 0, phase} (rows of other
   * environments untouched); draw is a counter for the random stream
   * (reproducible: same draw, same states and phases) */
  int (*reset)(void *self, const int *envs, int n, uint64_t draw, bcg_real *x, bcg_task_clock *clk);
  /* observation of state x under the previous action prev_a [nenv][nu] */
  int (*observe)(void *self, const bcg_real *x, const bcg_real *prev_a, const bcg_task_clock *clk, bcg_real *obs);
  /* accumulate (+=) the adjoints of x and prev_a given obs_bar (prev_a_bar may be NULL) */
  int (*observe_vjp)(void *self, const bcg_real *x, const bcg_real *prev_a, const bcg_task_clock *clk,
                     const bcg_real *obs_bar, bcg_real *x_bar, bcg_real *prev_a_bar);
  /* reward of the transition that ended in x under action a, taken after the
   * previous action prev_a (zeros after a reset; for action-rate terms); clk
   * already counts the transition; done[e]: 0 running, 1 terminated (no
   * bootstrap), 2 time limit */
  int (*reward)(void *self, const bcg_real *x, const bcg_real *a, const bcg_real *prev_a, const bcg_task_clock *clk,
                bcg_real *rew, int *done);
  /* accumulate (+=) the adjoints of x, a and prev_a given rew_bar [nenv]
   * (a_bar and prev_a_bar may be NULL) */
  int (*reward_vjp)(void *self, const bcg_real *x, const bcg_real *a, const bcg_real *prev_a,
                    const bcg_task_clock *clk, const bcg_real *rew_bar, bcg_real *x_bar, bcg_real *a_bar,
                    bcg_real *prev_a_bar);
  /* optional (may be NULL): once per learner iteration (e.g. train ADD's discriminator) */
  int (*update)(void *self, int64_t iteration);
  /* optional (may be NULL): per environment, the mean over bodies of the
   * distance between simulated and reference body positions (m) at x under
   * clk (E_track of the evaluation); for tasks that track a reference */
  int (*tracking_error)(void *self, const bcg_real *x, const bcg_task_clock *clk, bcg_real *err);
  /* optional (may be NULL; check size first): checkpoint I/O of the task's own
   * training state (e.g. ADD's discriminator) into an open HDF5 group (hid_t
   * as int64), the checkpoint's group "task" */
  int (*save)(void *self, int64_t group);
  int (*load)(void *self, int64_t group);
  /* (appended in SDK 1.0; optional, may be NULL; check size first) the
   * reference pose the task tracks: for each of the n clocks clk[i], the
   * reference's generalized positions (MuJoCo's qpos layout, nq numbers) at
   * that clock into qpos [n][nq], the same pose the reward compares the state
   * with at that clock (imitation: the clip at phase + t * control_dt).
   * Returns 0, or -1 when there is none to give. For drawing (bcg render's
   * ghost); tasks without a reference leave it NULL. */
  int (*reference_qpos)(void *self, const bcg_task_clock *clk, int n, bcg_real *qpos);
  /* (appended after reference_qpos; optional, may be NULL; check size first)
   * observe only the environments envs[0..n): row envs[i] of obs from rows
   * envs[i] of x, prev_a and clk (arrays of all environments, as observe
   * takes them), bit for bit what observe writes there; other rows of obs
   * are left as they are. Learners call it after resets, where most rows are
   * already observed; without it they call observe for all. */
  int (*observe_envs)(void *self, const int *envs, int n, const bcg_real *x, const bcg_real *prev_a,
                      const bcg_task_clock *clk, bcg_real *obs);
  /* (appended after observe_envs; optional, may be NULL; check size first)
   * one control step's task outputs in one pass over the environments, bit
   * for bit what reward(x, a, prev_a, clk, rew, done), then (where err is not
   * NULL) tracking_error(x, clk, err), then observe(x, a, clk, obs) write:
   * the action just taken is the next observation's previous action. A task
   * with per-environment scratch reads it once per control step instead of
   * three times. Learners call it where present, else the three. */
  int (*reward_observe)(void *self, const bcg_real *x, const bcg_real *a, const bcg_real *prev_a,
                        const bcg_task_clock *clk, bcg_real *rew, int *done, bcg_real *err, bcg_real *obs);
} bcg_task_ops;

/* ---- the descriptor ----------------------------------------------------------- */

typedef struct bcg_plugin_desc {
  uint32_t abi_version;     /* BCG_ABI_VERSION */
  uint32_t desc_size;       /* sizeof(bcg_plugin_desc) */
  uint32_t kind;            /* bcg_kind */
  const char *name;         /* unique, [a-z0-9_]+ */
  const char *description;  /* one line */
  uint32_t real_size;       /* sizeof(bcg_real) the plugin was built with, in the low 8 bits; above them
                               BCG_DIMS_TAG, its capacities (bcg/dims.h) */
  const bcg_key_spec *keys; /* declared INI keys of its section */
  int nkeys;
  uint64_t caps;            /* BCG_CAP_* */
  const void *ops;          /* bcg_{contact,estimator,learner,task}_ops per kind */
} bcg_plugin_desc;

typedef const bcg_plugin_desc *(*bcg_plugin_entry_fn)(void);

/* the size of an ABI-1 descriptor without any appended field */
#define BCG_DESC_MIN_SIZE (offsetof(bcg_plugin_desc, ops) + sizeof(const void *))

/* Convenience for plugin authors: fills the fixed header fields. */
#define BCG_PLUGIN_HEADER(kind_, name_, descr_)                                   \
  BCG_ABI_VERSION, (uint32_t)sizeof(bcg_plugin_desc), (uint32_t)(kind_), (name_), \
      (descr_), ((uint32_t)sizeof(bcg_real) | BCG_DIMS_TAG)

#define BCG_NKEYS(arr) ((int)(sizeof(arr) / sizeof((arr)[0])))

BCG_END_DECLS

#endif
