/* config_keys.c - the core's declared INI keys, one table per section.
 *
 * To add a key: add a row to the section's table (name, type, default as INI
 * text, range or choices, one-line help) and document it in configs/defaults.ini.
 * Plugin sections ([contact] [estimator] [learner] [task]) are declared by the
 * plugins themselves. */
#include <math.h>
#include <string.h>

#include "bcg/config.h"

#define INF HUGE_VAL

static const bcg_key_spec run_keys[] = {
    {"name", BCG_KEY_STRING, "", 0, 0, NULL,
     "run name, the folder under out_dir; empty: the config file's base name"},
    {"seed", BCG_KEY_INT, "0", 0, 2147483647.0, NULL, "seed of every random stream of the run"},
    {"device", BCG_KEY_CHOICE, "cpu", 0, 0, "cpu|cuda", "where the batched simulation runs"},
    {"iterations", BCG_KEY_INT, "2000", 0, 1e9, NULL,
     "stop after this many learner iterations (0: no limit)"},
    {"samples", BCG_KEY_INT, "0", 0, 1e15, NULL,
     "stop after this many simulated control steps (0: no limit)"},
    {"seconds", BCG_KEY_REAL, "0", 0, INF, NULL, "stop after this much wall-clock time (0: no limit)"},
    {"num_envs", BCG_KEY_INT, "64", 1, 1e6, NULL, "parallel environments (paper: 64)"},
    {"threads", BCG_KEY_INT, "0", 0, 4096, NULL, "CPU threads (0: all cores)"},
    {"flush_denormals", BCG_KEY_CHOICE, "auto", 0, 0, "auto|true|false",
     "flush subnormal numbers to zero on the CPU threads (x86 FTZ and DAZ): a float adjoint that decays into "
     "them runs tens of times slower per operation; auto: true in the float build, and in the double build the "
     "threads' modes left as they are (flushing would not change its results in practice, its subnormals "
     "starting at 2.2e-308); false: cleared"},
    {"nn_min_batch", BCG_KEY_INT, "64", 1, 1e9, NULL,
     "device = cuda: MLP batches of at least this many rows run on the GPU (cuBLAS), smaller ones on the CPU"},
    {"sim_min_batch", BCG_KEY_INT, "2048", 1, 1e9, NULL,
     "device = cuda: control steps of batches of at least this many environments run on the GPU, smaller ones "
     "on the CPU (one GPU thread per environment leaves small batches latency-bound; 1: all on the GPU)"},
    {"checkpoint_every", BCG_KEY_INT, "50", 0, 1e9, NULL,
     "write a checkpoint every this many iterations (0: only at the end)"},
    {"keep_last", BCG_KEY_INT, "10", 0, 1e9, NULL,
     "keep the newest this many checkpoints and delete older ones once a new one is on disk, except those "
     "keep_every keeps (0: keep every checkpoint)"},
    {"keep_every", BCG_KEY_INT, "500", 0, 1e9, NULL,
     "also keep the checkpoints of iterations that are multiples of this, for eval --select-best and later "
     "comparisons (0: none beyond keep_last)"},
    {"out_dir", BCG_KEY_STRING, "runs", 0, 0, NULL, "runs go to out_dir/<name>/<UTC stamp>/"},
    {"rank_seed", BCG_KEY_CHOICE, "offset", 0, 0, "offset|same",
     "data-parallel runs (mpirun -np P bcg train): offset: rank r > 0 draws its environments' streams from a "
     "seed of its own, mixed from seed and r (rank 0 keeps seed); same: every rank the same streams (the ranks "
     "then step identical environments: a check of the reductions, not a way to train)"},
    {"check_replicas", BCG_KEY_BOOL, "false", 0, 0, NULL,
     "data-parallel runs: after every iteration compare the learner's parameters across the ranks (a hash) "
     "and stop with an error when they differ (a debugging aid; costs one reduction per iteration)"},
};

static const bcg_key_spec model_keys[] = {
    {"path", BCG_KEY_PATH, "/usr/share/mujoco/model/humanoid/humanoid.xml", 0, 0, NULL,
     "MJCF file, compiled by libmujoco (default: MuJoCo's humanoid; relative to the working directory)"},
    {"allow_no_floor", BCG_KEY_BOOL, "false", 0, 0, NULL,
     "accept a model without floor contact (no floor plane, or no geom touching it) for a task that needs one "
     "(imitation, locomotion); false: an error"},
    {"contact_bodies", BCG_KEY_STRING, "", 0, 0, NULL,
     "comma-separated body names whose collision geoms touch the floor in bcg (e.g. the feet); empty: every "
     "body's. MuJoCo (bcg eval) keeps all of the model's contacts"},
    {"mesh_contact_points", BCG_KEY_INT, "6", 0, 64, NULL,
     "contact points of a mesh collision geom against the floor: at most this many vertices of its convex hull "
     "(the lowest in the default pose first, then farthest apart); 0: mesh geoms do not touch the floor in bcg"},
};

static const bcg_key_spec sim_keys[] = {
    {"substeps", BCG_KEY_INT, "4", 1, 1000, NULL, "substeps per control step (paper: 4 of 5 ms)"},
    {"control_dt", BCG_KEY_REAL, "0.02", 1e-5, 1.0, NULL, "control step in seconds (paper: 0.02)"},
    {"actuation", BCG_KEY_CHOICE, "motor", 0, 0, "motor|pd",
     "motor: action is the control of the MJCF's actuators (motor: a torque scaled by gear; position and "
     "velocity servos with their kp/kv; general affine); pd: action is a target joint position of bcg's PD law"},
    {"kp", BCG_KEY_REAL, "500", 0, INF, NULL,
     "PD position gain of an actuator with gear 100 (N m/rad); each actuator's gain is kp * gear / 100"},
    {"kd", BCG_KEY_REAL, "10", 0, INF, NULL,
     "PD velocity gain of an actuator with gear 100 (N m s/rad); scaled by gear / 100 like kp"},
    {"kp_joints", BCG_KEY_STRING, "", 0, 0, NULL,
     "PD position gains in N m/rad by joint name, 'pattern:value, ...' (a pattern matches a joint whose name "
     "contains it; the first match wins; e.g. 'hip:100, knee:150, ankle:40'); unmatched joints get kp * gear / 100"},
    {"kd_joints", BCG_KEY_STRING, "", 0, 0, NULL,
     "PD velocity gains in N m s/rad by joint name, as kp_joints; unmatched joints get kd * gear / 100"},
    {"action_scale", BCG_KEY_REAL, "0.5", 0, INF, NULL,
     "pd: target = default pose + action_scale * action (rad); motor: unused"},
    {"pd_torque_limit", BCG_KEY_BOOL, "true", 0, 0, NULL,
     "pd: clip each PD torque to the actuator's gear * ctrlrange (the MJCF's strength)"},
    {"joint_limit_stiffness", BCG_KEY_REAL, "1000", 0, INF, NULL,
     "joint limits as a smooth penalty k * w * softplus(violation / w) (N m/rad)"},
    {"joint_limit_width", BCG_KEY_REAL, "0.01", 1e-6, 1, NULL,
     "softening width w of the joint-limit penalty (rad or m)"},
    {"joint_limit_damping", BCG_KEY_REAL, "5", 0, INF, NULL,
     "damping applied beyond a joint limit, weighted by sigmoid(violation / w) (N m s/rad)"},
    {"contact_margin", BCG_KEY_REAL, "0.01", 0, 1, NULL,
     "a contact point is active when its gap is at most this (m); > 0 gives pre-contact gradients "
     "(smoothed_kappa tapers its weight to 0 here, so the step is continuous)"},
    {"friction", BCG_KEY_REAL, "-1", -1, 10, NULL,
     "friction coefficient of every contact; -1 uses the MJCF's (MuJoCo's max pairing rule)"},
    {"frictionloss_velocity", BCG_KEY_REAL, "0.1", 1e-6, 100, NULL,
     "a joint's dry friction (MJCF frictionloss f) acts as -f tanh(qdot / v) with this v (rad/s or m/s): "
     "smooth and differentiable; MuJoCo's is a constraint (docs/physics-notes.md)"},
    {"max_contacts", BCG_KEY_INT, "16", 0, BCG_MAX_CONTACT, NULL,
     "active contacts kept per environment, deepest first (at most BCG_MAX_CONTACT: 24, or the build's MAX_CONTACT)"},
    {"dr_friction_min", BCG_KEY_REAL, "-1", -1, 10, NULL,
     "domain randomisation: per-environment friction ~ U[dr_friction_min, dr_friction_max]; -1: off"},
    {"dr_friction_max", BCG_KEY_REAL, "-1", -1, 10, NULL,
     "upper end of the per-environment friction range (>= dr_friction_min when that is on)"},
    {"dr_mass_scale", BCG_KEY_REAL, "0", 0, 0.9, NULL,
     "domain randomisation: per-environment, per-body mass and inertia scale ~ U[1-s, 1+s]; 0: off"},
    {"dr_com_offset", BCG_KEY_REAL, "0", 0, 0.5, NULL,
     "domain randomisation: per-environment, per-body centre-of-mass offset ~ U[-h, h]^3 (m); 0: off"},
    {"dr_push_interval", BCG_KEY_REAL, "0", 0, 1e6, NULL,
     "random pushes: one every this many seconds on average (per control step with p = control_dt / it); 0: off"},
    {"dr_push_velocity", BCG_KEY_REAL, "0", 0, 100, NULL,
     "random pushes: horizontal kick of this magnitude added to the root's linear velocity (m/s)"},
};

static const bcg_key_spec eval_keys[] = {
    {"episodes", BCG_KEY_INT, "5", 1, 256, NULL, "evaluation episodes per simulator (paper: 5)"},
    {"seconds", BCG_KEY_REAL, "10", 0.01, 1e6, NULL, "length of one episode in seconds (the clip's end stops it earlier)"},
    {"simulator", BCG_KEY_CHOICE, "both", 0, 0, "bcg|mujoco|both",
     "bcg: the training simulator; mujoco: transfer to MuJoCo; both: both, with the penetration gap Delta d"},
    {"fall_height", BCG_KEY_REAL, "0.3", 0, 10, NULL,
     "an episode counts as a fall when the root drops below this height (m)"},
    {"mujoco_timestep", BCG_KEY_REAL, "0", 0, 1, NULL,
     "MuJoCo's timestep in the transfer evaluation (s); 0: bcg's substep (control_dt / substeps). The control "
     "step must be a whole number of them; the policy's actions are held over them"},
    {"seed", BCG_KEY_INT, "1", 0, 2147483647.0, NULL, "seed of the initial-state noise"},
    {"noise_q", BCG_KEY_REAL, "0.01", 0, 1, NULL, "std of the joint-angle noise added to each initial state (rad)"},
    {"noise_u", BCG_KEY_REAL, "0.05", 0, 10, NULL, "std of the velocity noise added to each initial state"},
    {"after_train", BCG_KEY_BOOL, "false", 0, 0, NULL,
     "bcg train evaluates the final policy (bcg eval RUN_DIR, eval.h5) when a training reaches its budget"},
    {"curve", BCG_KEY_BOOL, "false", 0, 0, NULL,
     "bcg eval RUN_DIR (and after_train) also evaluates every checkpoint: E_fixed and falls against samples and "
     "wall time in eval_curve.h5, drawn by bcg report --plots"},
};

static const bcg_key_spec sweep_keys[] = {
    {"mode", BCG_KEY_CHOICE, "grid", 0, 0, "grid|zip",
     "grid: every combination of the listed values; zip: the i-th values together"},
};

#define ROW(s, t) {s, t, (int)(sizeof(t) / sizeof((t)[0]))}
static const struct {
  const char *name;
  const bcg_key_spec *keys;
  int nkeys;
} core_sections[] = {
    ROW("run", run_keys),   ROW("model", model_keys),  ROW("sim", sim_keys),
    ROW("eval", eval_keys), ROW("sweep", sweep_keys),
};
#define NCORE ((int)(sizeof core_sections / sizeof core_sections[0]))

int bcg_core_section_count(void) { return NCORE; }

const char *bcg_core_section_name(int i) {
  return (i >= 0 && i < NCORE) ? core_sections[i].name : NULL;
}

const bcg_key_spec *bcg_core_keys(const char *section, int *nkeys) {
  for (int i = 0; i < NCORE; i++)
    if (section && strcmp(section, core_sections[i].name) == 0) {
      if (nkeys) *nkeys = core_sections[i].nkeys;
      return core_sections[i].keys;
    }
  if (nkeys) *nkeys = 0;
  return NULL;
}
