#!/bin/bash
# bench/device_g1.sh - the Unitree G1 runs on the device machine (docs/g1.md):
# through bench/device_train.sh, side by side, for TRAIN_SECONDS each, then
# E_fixed in bcg of every checkpoint and the transfer evaluation (MuJoCo and
# bcg) of each final policy over the 10 s segment.
#
#   run(command="BCG_DEBS=build-debs-min bash bench/device_g1.sh", carry=["build-debs-min", "deps", "data"])
#   or, with plain copies of the robot and the clips in build-g1data/ (G1_DATA below):
#   run(command="G1_DATA=build-g1data G1_CLIP=dance BCG_DEBS=build-debs-min bash bench/device_g1.sh",
#       carry=["build-debs-min", "deps", "build-g1data"])
#   (build-debs-min, made by bench/fetch_debs.sh: the iniparser, CUnit and libmujoco-samples
#   packages of build-debs, which the CUDA image lacks; all of build-debs with data/ is over
#   the 64 MiB a call may carry)
#   The next call continues the runs: copy this call's runs.tgz and its
#   policies-NAME.tgz into an ignored folder that the call carries (e.g.
#   build-resume) and pass RESUME_TGZ="build-resume/runs.tgz
#   build-resume/policies-NAME.tgz" and RESUME_SECONDS_BEFORE = the training
#   seconds so far (device_train.sh).
#
# data/ holds the G1 and the LAFAN1 clips as docs/g1.md section 1 says;
# G1_DATA=DIR reads them from DIR instead (DIR/unitree_g1, DIR/lafan1_g1),
# e.g. an ignored folder of plain copies that the call carries (build-g1data:
# data/'s entries may be links to a place the device machine does not have).
# Default run: PPO with the paper's settings (configs/experiments/g1_CLIP_ppo.ini)
# on one segment, G1_CLIP = run, jump, fight or dance (default jump), on the GPU
# with every core (the float build: the double stepper's stack frames do not fit
# an 80 GB GPU, docs/performance.md), with the ladder configs' task and contact
# settings (erp 0.2, the joint-limit and self-collision penalties) so that its
# reward is the SHAC+BCG ladder runs'. On an H100 the jump run reached 0/5 falls
# in both simulators after 2160 iterations in three calls of 470 s
# (bench/results/2026-12-06-h100-g1-jump-ppo.txt). G1_RUNS replaces the list
# (device_train.sh's RUNS format), e.g. the SHAC+BCG ladder runs on the CPUs.
set -u
cd "$(dirname "$0")/.."
C=${G1_CLIP:-jump}
case "$C" in run | jump | fight | dance) ;; *) echo "device_g1.sh: G1_CLIP=$C: run, jump, fight or dance"; exit 2 ;; esac
D=${G1_DATA:-data}
for f in $D/unitree_g1/scene_29dof.xml $D/lafan1_g1/$C.csv; do
  [ -f "$f" ] || { echo "device_g1.sh: $f missing: put the G1 and the clips under $D/ (docs/g1.md section 1) and carry $D"; exit 2; }
done
DOV=""
[ "$D" = data ] || DOV=" model.path=$D/unitree_g1/scene_29dof.xml task.motion=$D/lafan1_g1/$C.csv"
export RUNS=${G1_RUNS:-"g1${C}_ppo|configs/experiments/g1_${C}_ppo.ini|run.device=cuda run.checkpoint_every=50 contact.erp=0.2 task.w_limit=100 task.self_margin=0.02$DOV"}
export THREADS_1=${THREADS_1:-$(nproc)}
export FLOAT_CUDA=1
export EVAL_SECONDS=${EVAL_SECONDS:-10}
export TRAIN_SECONDS=${TRAIN_SECONDS:-470}
export THRESHOLDS=${THRESHOLDS:-"90 80 60 40 30 20 15"}
exec bash bench/device_train.sh
