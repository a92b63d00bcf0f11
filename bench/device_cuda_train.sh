#!/bin/bash
# bench/device_cuda_train.sh - `bcg train` with [run] device = cuda against
# device = cpu on the device machine: the same seed must give the same
# training curves (the GPU stepper is bitwise close to the CPU one), and the
# wall time per iteration of each. SHAC + autodiff and PPO on the jump clip.
#   run(command="bash bench/device_cuda_train.sh", carry=["build-debs", "deps"])
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/build-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device_cuda_train.log") 2>&1
T0=$(date +%s)
say() { echo "[device_cuda_train +$(($(date +%s) - T0))s] $*"; }
NP=$(nproc)
. bench/device_deps.sh
export TMPDIR=$(mktemp -d /tmp/bcg-nvcc.XXXXXX)
say "build (CUDA)"
make -j"$NP" BUILD=build-cudatrain CUDA=1 all >/tmp/bcg-ct-build.log 2>&1 || { tail -n 40 /tmp/bcg-ct-build.log; exit 2; }
B=build-cudatrain/bcg
R=/tmp/bcg-ct-runs
for learner in shac ppo; do
  for dev in ${DEVICES:-cpu cuda}; do
    if [ $learner = shac ]; then cfg=configs/experiments/jump_shac.ini; ov="run.num_envs=256 learner.horizon=32"
    else cfg=configs/experiments/jump_ppo.ini; ov="run.num_envs=4096"; fi
    say "$learner on $dev"
    OMP_NUM_THREADS=$NP timeout 200 $B train $cfg $ov run.device=$dev run.iterations=3 run.threads=$NP \
      run.checkpoint_every=0 run.name=ct_${learner}_$dev run.out_dir=$R sim.dr_friction_min=-1 sim.dr_friction_max=-1 \
      sim.dr_mass_scale=0 sim.dr_com_offset=0 sim.dr_push_interval=0 sim.dr_push_velocity=0 2>&1 | tail -n 5
  done
done
say "done in $(($(date +%s) - T0)) s"
