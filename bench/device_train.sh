#!/bin/bash
# bench/device_train.sh - the longer training runs of issue 7 on the device
# machine's CPUs: SHAC+BCG and PPO on the jump clip with the paper's settings
# (configs/experiments/jump_{shac_bcg,ppo}.ini), side by side with half the
# cores each, for TRAIN_SECONDS of wall time each; then the transfer
# evaluation (bcg eval, MuJoCo and bcg) of each final policy, and E_track in
# bcg of every checkpoint (samples and wall time to a fixed tracking error).
#
#   run(command="bash bench/device_train.sh", carry=["build-debs"])
#
# Files under $OUT: device_train.log (everything), runs.tgz (both runs:
# config.ini, log.h5, eval.h5, the last checkpoint).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/build-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device_train.log") 2>&1
T0=$(date +%s)
say() { echo "[device_train +$(($(date +%s) - T0))s] $*"; }
S=${TRAIN_SECONDS:-400}
NP=$(nproc)
H=$((NP / 2))
say "cores $NP; $(grep PRETTY_NAME /etc/os-release 2>/dev/null); commit $(git log --oneline -1 2>/dev/null)"
. bench/device_deps.sh
say "build (CPU only)"
make -j"$NP" BUILD=build-train CUDA=0 all >/tmp/bcg-train-build.log 2>&1 || { tail -n 40 /tmp/bcg-train-build.log; exit 2; }
B=build-train/bcg
R=/tmp/bcg-runs
rm -rf "$R"
say "train SHAC+BCG and PPO on jump for $S s each, $H threads each"
$B train configs/experiments/jump_shac_bcg.ini run.seconds=$S run.threads=$H run.checkpoint_every=10 run.out_dir=$R \
  >/tmp/bcg-shac.log 2>&1 &
p1=$!
$B train configs/experiments/jump_ppo.ini run.seconds=$S run.threads=$H run.checkpoint_every=2 run.out_dir=$R \
  >/tmp/bcg-ppo.log 2>&1 &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
say "SHAC+BCG exit $r1, PPO exit $r2"
tail -n 4 /tmp/bcg-shac.log /tmp/bcg-ppo.log
for name in jump_shac_bcg jump_ppo; do
  d=$(ls -td $R/$name/*/ 2>/dev/null | head -n 1)
  [ -n "$d" ] || { say "no run directory for $name"; continue; }
  say "E_track in bcg of every checkpoint of $name"
  for c in "$d"/checkpoints/ckpt_*.h5; do
    OMP_NUM_THREADS=$NP $B eval "$c" --sim bcg --runs 5 --seconds 8 2>&1 | grep -E "^policy|^bcg " | tr '\n' ' '
    echo
  done
  say "transfer evaluation of $name ($d)"
  OMP_NUM_THREADS=$NP $B eval "$d" --runs 5 --seconds 8
  ls "$d"/checkpoints/ckpt_*.h5 | head -n -1 | xargs rm -f
done
tar czf "$OUT/runs.tgz" -C "$R" . 2>/dev/null
say "done in $(($(date +%s) - T0)) s"
