#!/bin/bash
# bench/device_nn.sh - the MLP-on-GPU checks (core/cuda/nn_cuda.cu) on the
# device machine, in one call from the repository root:
#   here:    sh bench/fetch_debs.sh            (once; fills build-debs/)
#   device:  run(command="bash bench/device_nn.sh", carry=["build-debs", "deps"])
# Builds libbcg, tests/test_nn_cuda and bench/nn_bench in double
# (build-h200-nn) and float (build-h200-nn-float), runs test_nn_cuda (device
# vs CPU) and nn_bench (PPO actor 200 -> 512,256,128 -> 21, batch 4096 and
# 24576, CPU with all threads vs GPU). Logs under $OUT: device_nn.log,
# test_nn_cuda_{double,float}.log, nn_bench.txt. About 3 minutes on one H200.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/build-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device_nn.log") 2>&1
T0=$(date +%s)
say() { echo "[device_nn +$(($(date +%s) - T0))s] $*"; }
fail=""
NP=$(nproc)
command -v nvcc >/dev/null || export PATH=$PATH:/usr/local/cuda/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | sed 's/^/  /'
. bench/device_deps.sh
export TMPDIR=$(mktemp -d /tmp/bcg-nvcc.XXXXXX)
for p in double float; do
  b=build-h200-nn; [ $p = float ] && b=build-h200-nn-float
  say "build $b"
  timeout 300 make -k -j"$NP" BUILD=$b REAL=$p CUDA=1 $b/libbcg.so $b/tests/test_nn_cuda $b/bench/nn_bench \
    >/tmp/bcg-nn-build-$p.log 2>&1 || { fail="$fail build-$p"; tail -n 30 /tmp/bcg-nn-build-$p.log; }
  [ -x $b/tests/test_nn_cuda ] || continue
  say "test_nn_cuda ($p)"
  if BUILD=$b timeout 200 sh tests/run.sh $b/tests/test_nn_cuda >"$OUT/test_nn_cuda_$p.log" 2>&1; then
    say "test_nn_cuda ($p): passed"
  else
    fail="$fail test_nn_cuda-$p"; say "test_nn_cuda ($p): FAILED"
  fi
  grep -E 'skipped|measured|device vs|FAIL|BCGSUITE|ln [0-9]' "$OUT/test_nn_cuda_$p.log" | sed 's/^/  /' | head -n 40
done
export OMP_NUM_THREADS=$NP OPENBLAS_NUM_THREADS=$NP
: >"$OUT/nn_bench.txt"
for p in double float; do
  b=build-h200-nn; [ $p = float ] && b=build-h200-nn-float
  [ -x $b/bench/nn_bench ] || continue
  say "nn_bench ($p)"
  timeout 120 $b/bench/nn_bench --sizes 4096,24576 --seconds 1 >>"$OUT/nn_bench.txt" || fail="$fail nn_bench-$p"
done
cat "$OUT/nn_bench.txt"
say "done;${fail:- all passed}${fail:+ failed:}"
[ -z "$fail" ]
