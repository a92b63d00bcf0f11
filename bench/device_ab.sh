#!/bin/bash
# bench/device_ab.sh - seconds per training iteration of the working tree
# against an earlier commit, on the same machine in the same call:
# `bcg bench --train` of each config, the two builds alternating, REPEAT
# times, with the split (physics, networks, task, rest) of each.
#
#   run(command="BCG_DEBS=build-debs-min bash bench/device_ab.sh",
#       carry=["build-debs-min", "deps", "data"])
#
# Environment: BASE (default HEAD of the machine's git copy, i.e. the commit the
# session's checkout started from: the call sends the working tree, not the
# commits since), CONFIGS (default the humanoid and G1 jump PPO configs),
# OVERRIDES (default run.device=cuda run.threads=16), ITERS (3), REPEAT (2),
# REAL (double). OVERRIDES may carry bench flags too (--nn-split). Build
# folders build-ab-new and build-ab-base (in the base's checkout
# /tmp/bcg-ab-base, removed at the end unless KEEP_BASE=1; BUILD_ONLY=1: build
# both, keep them and stop). Files under $OUT: device_ab.txt (the
# table), device_ab_full.txt (every bench's output).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/build-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device_ab.log") 2>&1
T0=$(date +%s)
say() { echo "[device_ab +$(($(date +%s) - T0))s] $*"; }
NP=$(nproc)
BASE=${BASE:-HEAD}
REAL=${REAL:-double}
CONFIGS=${CONFIGS:-"configs/experiments/jump_ppo.ini configs/experiments/g1_jump_ppo.ini"}
OV=${OVERRIDES:-"run.device=cuda run.threads=$NP"}
. bench/device_deps.sh
export TMPDIR=$(mktemp -d /tmp/bcg-nvcc.XXXXXX)
B=/tmp/bcg-ab-base
rm -rf $B
git worktree add -f $B "$BASE" >/dev/null 2>&1 || { say "cannot check out $BASE"; exit 2; }
BC=$(git -C $B log -1 --format=%h)
ln -sfn "$PWD/deps" $B/deps
[ -d data ] && ln -sfn "$PWD/data" $B/data
say "build new (working tree) and base ($BC), REAL=$REAL CUDA=${CUDA:-1}"
make -j"$NP" BUILD=build-ab-new REAL=$REAL CUDA=${CUDA:-1} all >/tmp/ab-new.log 2>&1 || { tail -n 30 /tmp/ab-new.log; exit 2; }
make -C $B -j"$NP" BUILD=build-ab-base REAL=$REAL CUDA=${CUDA:-1} all >/tmp/ab-base.log 2>&1 || { tail -n 30 /tmp/ab-base.log; exit 2; }
# BUILD_ONLY=1: the two builds only (the base's kept), for a caller's own runs
[ -n "${BUILD_ONLY:-}" ] && { say "built: build-ab-new/bcg, $B/build-ab-base/bcg"; exit 0; }
R="$OUT/device_ab.txt"
{
  echo "# bcg bench --train CONFIG --iterations ${ITERS:-3} $OV; $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "# $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1), $NP cores; REAL=$REAL"
  echo "# new: the working tree sent with the call; base: $BC"
  printf "%-40s %-5s %4s %9s %9s %9s %9s %9s %9s\n" config build rep total phys_fwd networks task rest samples/s
} >"$R"
for cfg in $CONFIGS; do
  for rep in $(seq 1 ${REPEAT:-2}); do
    for b in new base; do
      bin=build-ab-new/bcg; wd=$PWD
      [ $b = base ] && bin=$B/build-ab-base/bcg && wd=$B
      log=/tmp/ab-$b.txt
      (cd "$wd" && timeout 200 "$bin" bench --train "$cfg" --iterations ${ITERS:-3} $OV) >$log 2>&1
      awk -v c="$cfg" -v b=$b -v r=$rep '
        /^physics forward/ { f = $3 } /^networks  / && n == "" { n = $2 } /^task/ { t = $2 } /^the rest/ { x = $3 } /^total/ { tot = $2 }
        /^samples:/ { for (i = 1; i <= NF; i++) if ($i == "samples/s") s = $(i-1) }
        END { printf "%-40s %-5s %4s %9.3f %9.3f %9.3f %9.3f %9.3f %9s\n", c, b, r, tot, f, n, t, x, s }' $log >>"$R"
      { echo "#### $b rep $rep: $cfg"; cat $log; } >>"$OUT/device_ab_full.txt"
      grep -q '^total' $log || { say "$b $cfg failed:"; tail -n 5 $log; }
    done
  done
done
cat "$R"
# KEEP_BASE=1: leave the base's checkout and build (for the caller's own runs with $B/build-ab-base/bcg)
[ -n "${KEEP_BASE:-}" ] || git worktree remove --force $B >/dev/null 2>&1
say "done in $(($(date +%s) - T0)) s"
