#!/bin/bash
# bench/device_nn_split.sh - the networks on the GPU at the paper's settings,
# checked and timed in one device call:
#
#   run(command="BCG_DEBS=build-debs-min BASE=<commit> bash bench/device_nn_split.sh",
#       carry=["build-debs-min", "deps", "data"])
#
# 1. builds the working tree (CUDA, double) and runs tests/test_nn_cuda (the
#    device's MLPs against the CPU's, the profile's bookkeeping), or the test
#    programs TESTS names (e.g. TESTS="test_nn_cuda test_cuda");
# 2. bench/device_ab.sh against BASE with `--nn-split`: `bcg bench --train`
#    of the humanoid jump SHAC+BCG and PPO configs, device = cuda, all
#    threads, the two builds alternating (each bench's split of the networks
#    into the GPU calls' phases and the calls left on the CPU; NN_SPLIT=0:
#    without --nn-split, whose synchronisations slow the calls down);
# 3. the same trainings with both builds, device = cuda (3 iterations of
#    each config, PPO at its 4096 environments): their log.h5 come back for a
#    bit-for-bit comparison on the dev machine.
# Files under $OUT: TEST.log of each test, device_ab.txt, device_ab_full.txt,
# bit.tgz: bit/{new,base,new2}-{shac,ppo}.h5 (the trainings' log.h5; new2: the new build
# again, the run-to-run floor). About 5 minutes on one GPU box with 16 cores.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/build-out}
mkdir -p "$OUT"
T0=$(date +%s)
say() { echo "[device_nn_split +$(($(date +%s) - T0))s] $*"; }
NP=$(nproc)
command -v nvcc >/dev/null || export PATH=$PATH:/usr/local/cuda/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | sed 's/^/  /'
. bench/device_deps.sh
export TMPDIR=$(mktemp -d /tmp/bcg-nvcc.XXXXXX)
B=build-ab-new
TESTS=${TESTS:-test_nn_cuda}
say "build $B and $TESTS"
make -j"$NP" BUILD=$B CUDA=1 all $(for t in $TESTS; do echo $B/tests/$t; done) >/tmp/bcg-nns-build.log 2>&1 ||
  { tail -n 30 /tmp/bcg-nns-build.log; exit 2; }
for t in $TESTS; do
  BUILD=$B timeout 200 sh tests/run.sh $B/tests/$t >"$OUT/$t.log" 2>&1
  say "$t: rc $?"
  grep -E 'measured|BCGSUITE|FAIL|passed|parameters in place|rows:' "$OUT/$t.log" | sed 's/^/  /' | tail -n 12
done
SPLIT="--nn-split"
[ "${NN_SPLIT:-1}" = 0 ] && SPLIT=""
KEEP_BASE=1 CONFIGS="configs/experiments/jump_shac_bcg.ini configs/experiments/jump_ppo.ini" \
  OVERRIDES="$SPLIT run.device=cuda run.threads=$NP" bash bench/device_ab.sh
mkdir -p "$OUT/bit"
for b in new base new2; do
  bin=$PWD/build-ab-new/bcg
  [ $b = base ] && bin=/tmp/bcg-ab-base/build-ab-base/bcg
  for c in shac:jump_shac_bcg ppo:jump_ppo; do
    rm -rf /tmp/bit-run
    say "train $b ${c#*:} (3 iterations, device = cuda)"
    timeout 120 "$bin" train configs/experiments/${c#*:}.ini run.iterations=3 run.device=cuda run.threads=$NP \
      run.out_dir=/tmp/bit-run >/tmp/bit.log 2>&1 || tail -n 5 /tmp/bit.log
    cp "$(find /tmp/bit-run -name log.h5 | head -n 1)" "$OUT/bit/$b-${c%%:*}.h5" 2>/dev/null || say "no log.h5"
  done
done
tar czf "$OUT/bit.tgz" -C "$OUT" bit && rm -rf "$OUT/bit" # one file back (a call returns few)
git worktree remove --force /tmp/bcg-ab-base >/dev/null 2>&1
say "done in $(($(date +%s) - T0)) s"
