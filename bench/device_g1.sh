#!/bin/bash
# bench/device_g1.sh - the Unitree G1 runs on the device machine (docs/g1.md):
# through bench/device_train.sh, side by side, for TRAIN_SECONDS each, then
# E_fixed in bcg of every checkpoint and the transfer evaluation (MuJoCo and
# bcg) of each final policy over the 10 s segment.
#
#   run(command="BCG_DEBS=build-debs-min bash bench/device_g1.sh", carry=["build-debs-min", "deps", "data"])
#   (build-debs-min: the iniparser and CUnit packages of build-debs, which the CUDA image
#   lacks; all of build-debs with data/ is over the 64 MiB a call may carry)
#   The next call continues the runs: unpack this call's runs.tgz and every
#   policies-NAME.tgz into one folder, tar it into a carried path, and pass
#   RESUME_TGZ=that.tgz (device_train.sh).
#
# data/ holds the G1 and the LAFAN1 clips as docs/g1.md section 1 says.
# Default runs: PPO on the jump segment on the GPU (the float build: the double
# stepper's stack frames do not fit an 80 GB GPU, docs/performance.md), and
# SHAC+BCG with the ladder settings on the jump and run segments with 64
# environments on 6 CPU threads each (the CPU runs so far used 16 environments
# on one thread). G1_RUNS replaces the list (device_train.sh's RUNS format).
set -u
cd "$(dirname "$0")/.."
for f in data/unitree_g1/scene_29dof.xml data/lafan1_g1/jump.csv data/lafan1_g1/run.csv; do
  [ -f "$f" ] || { echo "device_g1.sh: $f missing: put the G1 and the clips under data/ (docs/g1.md section 1) and carry data"; exit 2; }
done
L=configs/ladder
O="run.iterations=0 run.checkpoint_every=100"
R="g1jump_ppo|configs/experiments/g1_jump_ppo.ini|run.device=cuda run.threads=4 run.checkpoint_every=10"
R="$R;g1jump_bcg64|$L/g1_jump_shac_bcg.ini|$O run.num_envs=64 run.threads=6"
R="$R;g1run_bcg64|$L/g1_run_shac_bcg.ini|$O run.num_envs=64 run.threads=6"
export RUNS=${G1_RUNS:-$R}
export FLOAT_CUDA=1
export EVAL_SECONDS=${EVAL_SECONDS:-10}
export TRAIN_SECONDS=${TRAIN_SECONDS:-360}
export THRESHOLDS=${THRESHOLDS:-"90 80 60 40 30 20 15"}
exec bash bench/device_train.sh
