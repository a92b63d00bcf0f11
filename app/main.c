/* main.c - the bcg command: a dispatch table of subcommands (see cmd.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcg/config.h"
#include "bcg/dist.h"
#include "bcg/real.h"
#include "bcg/version.h"
#include "cmd.h"

static const struct command {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *args;
  const char *summary;
  const char *help;
} commands[] = {
    {"train", bcg_cmd_train, "CONFIG [section.key=value ...] | --resume RUN_DIR [run.key=value ...]",
     "train a policy; writes runs/<name>/<stamp>/",
     "Validates CONFIG (with the overrides applied), creates <out_dir>/<name>/<UTC stamp>/\n"
     "with config.ini (the resolved configuration), log.h5 and checkpoints/, then runs\n"
     "the learner until the first [run] budget (iterations, samples, seconds) is spent.\n"
     "Each iteration appends its curves to log.h5 and prints a progress line; a checkpoint\n"
     "is written every [run] checkpoint_every iterations and at the end; older ones are\n"
     "deleted except the newest [run] keep_last and those of multiples of keep_every.\n"
     "Ctrl-C finishes the iteration, writes a checkpoint and exits 0 (twice: at once).\n"
     "--resume RUN_DIR continues a run from its latest checkpoint (bit for bit on the CPU);\n"
     "overrides may extend run.iterations, run.samples, run.seconds or change\n"
     "run.checkpoint_every, run.keep_last, run.keep_every and run.threads."},
    {"eval", bcg_cmd_eval, "RUN_DIR|CHECKPOINT [--sim mujoco|bcg|both] [--runs N] [--seconds S] [--fall-penalty M] [--out FILE|-] [--trace FILE] [--initial|--compare-initial] [--select-best] [--curve] [section.key=value ...]",
     "evaluate a trained policy in MuJoCo and bcg",
     "Runs the policy (mean action) of the latest checkpoint of RUN_DIR (or of CHECKPOINT) from the start of\n"
     "the task's reference with small seeded noise, in MuJoCo (libmujoco, PD servos with bcg's law, its own\n"
     "contact) and in bcg, and reports falls (root below [eval] fall_height), the mean foot penetration of each\n"
     "simulator and their difference Delta d, the tracking error E_track until the fall, and E_fixed, the\n"
     "tracking error over a fixed window (--seconds from the clip's start, each step clipped at M m, every\n"
     "step after a fall counted as M m; --fall-penalty, default 1) with the fraction of it survived, which is\n"
     "comparable between policies. Writes RUN_DIR/eval.h5 (--out: another file; -: none).\n"
     "--initial evaluates the untrained policy; --compare-initial both, with a one-line result and a verdict.\n"
     "--select-best (RUN_DIR): evaluates every checkpoint in bcg only and reports the one with the lowest E_fixed\n"
     "(learning is not monotone; MuJoCo plays no part in the choice).\n"
     "--curve (RUN_DIR; or [eval] curve = true): first evaluates the untrained policy and every checkpoint the same\n"
     "way and writes E_fixed, falls and foot penetration per simulator against samples and wall time to\n"
     "RUN_DIR/eval_curve.h5.\n"
     "--trace FILE: also writes every step of every episode (state, action, reward; MuJoCo's self-contacts) to\n"
     "the HDF5 FILE, per simulator, to see where and how the two simulators part."},
    {"bench", bcg_cmd_bench,
     "[--model MJCF] [--envs N] [--seconds S] [--contact NAME] [--mean] | --train CONFIG|RUN_DIR [--iterations N] [--nn-split]\n"
     "  [section.key=value ...]",
     "physics steps/s beside MuJoCo mj_step; seconds per training iteration",
     "Physics steps per second (forward and forward+backward) per contact model on the CPU, one thread and all\n"
     "threads, beside MuJoCo's mj_step on the same model and state measured in the same run, as ratios;\n"
     "each rate from the fastest of short repetitions over S seconds (default 1), bcg's and MuJoCo's alike\n"
     "(--mean: total work over total time); --contact NAME: only that contact model (none, soft,\n"
     "smoothed_kappa, hard).\n"
     "--train CONFIG: 1 + N iterations (default N = 3) of the training CONFIG describes, in a temporary run\n"
     "directory removed afterwards; over the N after the warm-up, seconds per iteration split into physics\n"
     "forward, physics adjoint, networks, task, estimator and the rest, samples/s, the thread counts, the\n"
     "machine (CPU, cores, load average) and the commit. --nn-split also splits the networks' time into the\n"
     "GPU calls' phases (parameters and inputs in, GEMMs, bias and activations, LayerNorm, batch sums, outputs\n"
     "back; each phase waits for the device) and the calls that stayed on the CPU. --train RUN_DIR: the same\n"
     "for a copy of the run resumed from its latest checkpoint (the iterations a long run is at; the run\n"
     "directory is only read; overrides as bcg train --resume takes them, and the placement keys\n"
     "run.sim_min_batch, run.nn_min_batch and run.flush_denormals)."},
    {"plugins", bcg_cmd_plugins, "", "list the plugins found",
     "Lists every plugin found on the search path ($BCG_PLUGIN_PATH, the build tree's\n"
     "plugins/, PREFIX/lib/bcg/plugins) with kind, name, file and description;\n"
     "plugin files that failed to load are reported as warnings on stderr."},
    {"describe", bcg_cmd_describe, "NAME | KIND/NAME | SECTION", "show a plugin's or section's keys",
     "Prints the INI keys of a plugin (or of a core section such as run or sim) with\n"
     "type, default, range or choices and help, and the plugin's capability flags."},
    {"check", bcg_cmd_check, "CONFIG [section.key=value ...]", "validate a config and print it resolved",
     "Validates CONFIG against the core's keys and each selected plugin's keys, with\n"
     "the overrides applied first, and prints the fully resolved configuration."},
    {"gradstats", bcg_cmd_gradstats, "CONFIG --checkpoint FILE [--estimators a,b] [--kappas k1,k2] [--repeats R] [--per-rollout] [--no-sensitivity] [--out FILE]",
     "policy-gradient variance per estimator and kappa at a fixed policy",
     "Loads the checkpoint's policy into CONFIG with each listed estimator (default autodiff,truncate,bcg) and\n"
     "kappa, keeps the policy fixed (learning rates 0), runs R fresh rollouts and reports the policy-gradient\n"
     "variance across environments, the gradient norm and the bundled fraction; then the root's sensitivity\n"
     "d v_z(H) / d p_z(0) over one bundle window from a stiff state: autodiff, bcg with one branch (per-branch)\n"
     "and bcg with its branches (bundled), 16 draws each; writes gradstats.h5.\n"
     "--per-rollout prints every rollout's variance, norm and bundled fraction (the variance is heavy-tailed:\n"
     "one environment can carry most of it); --no-sensitivity skips the sensitivity part."},
    {"sweep", bcg_cmd_sweep,
     "CONFIG [--jobs N] [--dir DIR] [--dry-run] [--slurm [SLURM OPTIONS]] [section.key=value ...] | --status DIR",
     "train the runs of [sweep], N at a time; restartable",
     "Expands the [sweep] section (section.key = v1, v2, ...; mode = grid: every combination, zip: the i-th values\n"
     "together) into runs named <[run] name>-<key>_<value>..., each `bcg train CONFIG overrides <its values>` in a\n"
     "child process, N at a time (--jobs, default 1), each with run.threads = max(1, cores / N) unless the config\n"
     "sets run.threads, and under run.device = cuda its own CUDA_VISIBLE_DEVICES (the visible GPUs in turn).\n"
     "Repetitions: [sweep] run.seed = 0, 1, 2. The sweep directory DIR (default <[run] out_dir>/<[run] name>) holds\n"
     "the runs, their output (NAME/train.out) and sweep.manifest; the same command again skips the finished runs,\n"
     "resumes the interrupted ones and tries the failed ones again. Ctrl-C or SIGTERM: every run checkpoints and\n"
     "stops (twice: at once). One line per run shows its state, iteration, samples, return and tracking error.\n"
     "--status DIR lists each run's state (pending, running, finished, failed, interrupted, queued); --dry-run\n"
     "prints what would run.\n"
     "--slurm submits the runs that need training as one Slurm job array instead (sbatch; one array task per run,\n"
     "each running `bcg sweep CONFIG --dir DIR --task N`, which trains run N or resumes it from its checkpoint);\n"
     "the same command again submits only what is neither finished nor queued or running; --status adds the\n"
     "scheduler's state of each task (squeue, else sacct). Options: --partition P, --time T, --mem M, --account A,\n"
     "--qos Q, --constraint C, --cpus-per-run N (run.threads; default 1 or the config's run.threads),\n"
     "--gpus-per-run G (--gres=gpu:G), --jobs N (at most N tasks at a time: the array's %N), --sbatch-arg ARG\n"
     "(any other sbatch option, repeatable). The batch script and each task's output are in DIR/slurm/."},
    {"report", bcg_cmd_report, "RUN_DIR|DIR ... [--csv] [--runs] [--plots OUTDIR] [--paper]",
     "compare training runs: mean +- std per configuration",
     "Groups the runs found (a DIR that is not a run is searched three levels deep, e.g. a sweep directory) by\n"
     "configuration: every key of their config.ini except run.seed, run.name, run.out_dir, run.threads, the\n"
     "checkpoint keys, the device batch sizes and [sweep]. One row per group, labelled by the keys that differ,\n"
     "with mean +- std over its runs: iterations, samples and wall time logged, the final mean return, the last\n"
     "tracking error (track_err), and E_fixed and falls per simulator from eval.h5 (bcg eval). A Markdown table;\n"
     "--csv for spreadsheets. --runs: one row per run instead (plugins, return first -> last and best, ...).\n"
     "--plots OUTDIR: learning curves (return and track_err against samples and wall time, and E_fixed per\n"
     "simulator of runs with an eval_curve.h5 of bcg eval --curve; mean and +-1 std per group) as PNG files,\n"
     "drawn by bcg_plots.py with python3, matplotlib and h5py ($BCG_PYTHON, else the first python3 on PATH\n"
     "or /usr/bin/python3 with them).\n"
     "--paper: the BCG paper's Table 1 (SHAC+BCG per kappa and motion: falls in MuJoCo, Delta d) and Table 2 (per\n"
     "motion, SHAC+BCG against PPO: E_track, E_fixed, falls in MuJoCo) from the evaluated runs, the paper's\n"
     "numbers beside them for reference (docs/usage.md section 9).\n"
     "Exit status 1 if a log is unreadable (the run is left out and named)."},
    {"feasibility", bcg_cmd_feasibility,
     "MOTION ... [--model MJCF] [--fps F] [--window N] [--contact fit|soft] [--contact-tol M] [--residual-tol F] [--arm-tol M] [--out FILE]",
     "is a reference clip dynamically feasible for the model's actuators",
     "Inverse dynamics of each clip (CSV or HDF5, read as the imitation task reads it) on MJCF (default: $BCG_MODEL or\n"
     "MuJoCo's humanoid.xml): qvel and qacc from a local quadratic fit over --window frames (default 7) in MuJoCo's\n"
     "tangent space, mj_inverse, and the contact forces of the points within --contact-tol of the floor (default 0.005 m)\n"
     "fitted inside their friction cones (--contact soft: MuJoCo's own soft contact on the clip as given instead).\n"
     "Reports per actuated joint the peak and RMS torque against its limit (gear x ctrlrange, bcg's PD clip) and the\n"
     "fraction of frames over it; the residual force and torque on the root (what no contact can supply) in N, N m\n"
     "and against m g; the lowest point and foot point; and one verdict line per clip: feasible, or NOT feasible with\n"
     "the reasons (a joint over its limit; residual force above --residual-tol x m g, default 0.05; residual torque\n"
     "above m g x --arm-tol, default 0.02 m). --out FILE (one MOTION): the per-frame values as CSV.\n"
     "docs/feasibility.md explains the method and the shipped clips' results."},
    {"render", bcg_cmd_render,
     "RUN_DIR|CHECKPOINT [--sim mujoco|bcg] [--out FILE.mp4|FILE.gif|FILE.png] [--seconds S] [--width W --height H] [--fps F] [--frames N] [--no-ghost] [section.key=value ...]",
     "draw the policy's rollout into a video (MuJoCo's renderer, headless)",
     "Runs the policy (mean action) of the latest checkpoint of RUN_DIR (or of CHECKPOINT) for one episode from the\n"
     "start of the task's reference, without noise, in MuJoCo (--sim mujoco, the default) or in bcg (the rollout of bcg\n"
     "eval, --trace), and draws every frame with MuJoCo's renderer offscreen on the CPU (OSMesa) with a camera that\n"
     "follows the root; the task's reference motion, where it tracks one, is drawn as a translucent blue ghost\n"
     "(--no-ghost: not). Frames at --fps (default 30) show the nearest control step; --seconds defaults to 5 s or the\n"
     "task's episode_seconds if shorter; --width/--height default 640x480. ffmpeg encodes --out by its extension\n"
     "(default RUN_DIR/render-<sim>.mp4): .mp4 (H.264; even width and height), .gif, or .png: one image of --frames\n"
     "frames (default 6) evenly spaced from 0 to --seconds, side by side. Needs ffmpeg and libOSMesa (Debian packages\n"
     "ffmpeg and libosmesa6; make deps installs them). Overrides apply as in bcg eval (task.motion=...: another clip)."},
};
#define NCMD ((int)(sizeof commands / sizeof commands[0]))

static void usage(FILE *f) {
  fprintf(f, "usage: bcg COMMAND [ARGS]\n\ncommands:\n");
  for (int i = 0; i < NCMD; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(f,
          "\n'bcg help COMMAND' describes one; 'bcg --version' prints the version.\n"
          "Overrides section.key=value are applied before validation.\n");
}

static const struct command *find(const char *name) {
  for (int i = 0; i < NCMD; i++)
    if (strcmp(commands[i].name, name) == 0) return &commands[i];
  return NULL;
}

static int unknown(const char *name) {
  const char *c[NCMD];
  for (int i = 0; i < NCMD; i++) c[i] = commands[i].name;
  const char *best = bcg_closest(name, c, NCMD);
  fprintf(stderr, "bcg: unknown command '%s'%s%s%s; see 'bcg --help'\n", name, best ? " (did you mean " : "",
          best ? best : "", best ? "?)" : "");
  return BCG_EXIT_USAGE;
}

static int help(const char *name) {
  const struct command *c = find(name);
  if (!c) return unknown(name);
  printf("usage: bcg %s %s\n\n%s\n", c->name, c->args, c->help);
  return BCG_EXIT_OK;
}

/* OpenMP threads that wait for work sleep (OMP_WAIT_POLICY=passive) unless
 * the caller chose a policy: libgomp's default spins after every parallel
 * region, and with thousands of short regions per training iteration a
 * spinning thread takes the core that another thread (another process, or
 * this one's next region) needs: 2 threads on 2 cores with one of them busy
 * ran 20x slower than 1 thread (docs/performance.md section 6). libgomp reads
 * the policy once when it loads, so bcg sets it and starts itself again. */
static void omp_passive(char **argv) {
  if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1)) return;
  execv("/proc/self/exe", argv); /* returns only on failure: carry on as we are */
}

int main(int argc, char **argv) {
  omp_passive(argv);
  if (argc < 2) {
    usage(stderr);
    return BCG_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) return usage(stdout), BCG_EXIT_OK;
  if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
    printf("bcg %s (%s precision)\n", BCG_VERSION, BCG_REAL_NAME);
    return BCG_EXIT_OK;
  }
  if (!strcmp(cmd, "help")) {
    if (argc == 2) return usage(stdout), BCG_EXIT_OK;
    if (argc > 3) return fprintf(stderr, "bcg: help: expects one COMMAND\n"), BCG_EXIT_USAGE;
    return help(argv[2]);
  }
  if (cmd[0] == '-') {
    fprintf(stderr, "bcg: unknown option '%s'; see 'bcg --help'\n", cmd);
    return BCG_EXIT_USAGE;
  }
  const struct command *c = find(cmd);
  if (!c) return unknown(cmd);
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return help(cmd);
  /* started by mpirun / srun: the ranks of a data-parallel training (bcg/dist.h) */
  char err[512];
  if (bcg_dist_init(&argc, &argv, err, sizeof err)) {
    fprintf(stderr, "bcg: error: %s\n", err);
    return BCG_EXIT_ERROR;
  }
  if (bcg_dist_size() > 1 && strcmp(cmd, "train") != 0) {
    if (bcg_dist_rank() == 0)
      fprintf(stderr, "bcg: error: %s: started as %d processes (mpirun, srun); only 'bcg train' runs as several\n",
              cmd, bcg_dist_size());
    return BCG_EXIT_ERROR;
  }
  return c->fn(argc - 1, argv + 1);
}
