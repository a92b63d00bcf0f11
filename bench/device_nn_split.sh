#!/bin/bash
# bench/device_nn_split.sh - the networks on the GPU at the paper's settings,
# checked and timed in one device call:
#
#   run(command="BCG_DEBS=build-debs-min BASE=<commit> bash bench/device_nn_split.sh",
#       carry=["build-debs-min", "deps", "data"])
#
# 1. builds the working tree (CUDA, double) and runs tests/test_nn_cuda (the
#    device's MLPs against the CPU's, the profile's bookkeeping);
# 2. bench/device_ab.sh against BASE with `--nn-split`: `bcg bench --train`
#    of the humanoid jump SHAC+BCG and PPO configs, device = cuda, all
#    threads, the two builds alternating (each bench's split of the networks
#    into the GPU calls' phases and the calls left on the CPU);
# 3. the working tree's build again with OMP_WAIT_POLICY=active (bcg's
#    default is passive), and SHAC+BCG with run.nn_min_batch=64 (its rollout
#    batches of 64 rows on the GPU too).
# Files under $OUT: test_nn_cuda.log, device_ab.txt, device_ab_full.txt,
# extra.txt. About 5 minutes on one GPU box with 16 cores.
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
say "build $B and test_nn_cuda"
make -j"$NP" BUILD=$B CUDA=1 all $B/tests/test_nn_cuda >/tmp/bcg-nns-build.log 2>&1 || { tail -n 30 /tmp/bcg-nns-build.log; exit 2; }
BUILD=$B timeout 200 sh tests/run.sh $B/tests/test_nn_cuda >"$OUT/test_nn_cuda.log" 2>&1
say "test_nn_cuda: rc $?"
grep -E 'measured|BCGSUITE|FAIL|passed' "$OUT/test_nn_cuda.log" | sed 's/^/  /'
CONFIGS="configs/experiments/jump_shac_bcg.ini configs/experiments/jump_ppo.ini" \
  OVERRIDES="--nn-split run.device=cuda run.threads=$NP" bash bench/device_ab.sh
X="$OUT/extra.txt"
: >"$X"
# (the passive runs of the plain configs are device_ab.sh's "new" rows)
for cw in "jump_shac_bcg.ini run.nn_min_batch=64:passive" "jump_shac_bcg.ini:active" "jump_ppo.ini:active"; do
  c=${cw%:*} w=${cw##*:}
  say "bench $c, OMP_WAIT_POLICY=$w"
  echo "#### $c OMP_WAIT_POLICY=$w" >>"$X"
  # shellcheck disable=SC2086
  OMP_WAIT_POLICY=$w timeout 200 $B/bcg bench --train configs/experiments/$c --nn-split run.device=cuda \
    run.threads=$NP >>"$X" 2>&1
done
grep -E '^####|^total|^networks|^task|^the rest|device calls|CPU calls' "$X" | sed 's/^/  /'
say "done in $(($(date +%s) - T0)) s"
