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
# config.ini, log.h5, eval.h5, the last checkpoint). KAPPA=1 trains
# SHAC+BCG at kappa 50 and 300 instead (the transfer ablation); RUNS=...
# any two runs.
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
# RUNS: "name|config|overrides;..." (two runs side by side); default SHAC+BCG vs PPO on jump;
# KAPPA=1: SHAC+BCG on jump at kappa 50 and 300 (the paper's transfer ablation)
if [ -n "${KAPPA:-}" ]; then
  RUNS="kappa50|configs/experiments/jump_shac_bcg.ini|contact.kappa=50 run.checkpoint_every=10;kappa300|configs/experiments/jump_shac_bcg.ini|contact.kappa=300 run.checkpoint_every=10"
fi
RUNS=${RUNS:-"jump_shac_bcg|configs/experiments/jump_shac_bcg.ini|run.checkpoint_every=10;jump_ppo|configs/experiments/jump_ppo.ini|run.checkpoint_every=2"}
say "train for $S s each, $H threads each: $RUNS"
pids=""
names=""
IFS=';' read -ra SPEC <<<"$RUNS"
for spec in "${SPEC[@]}"; do
  IFS='|' read -r name cfg ovs <<<"$spec"
  $B train "$cfg" run.name=$name run.seconds=$S run.threads=$H run.out_dir=$R $ovs >/tmp/bcg-$name.log 2>&1 &
  pids="$pids $!"
  names="$names $name"
done
for p in $pids; do wait $p; say "run (pid $p) exit $?"; done
for name in $names; do tail -n 3 /tmp/bcg-$name.log; done
for name in $names; do
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
