#!/bin/bash
# bench/device_profile.sh - where a training iteration's time goes on the
# device machine, at the paper's settings, in one call:
#
#   run(command="BCG_DEBS=build-debs-min bash bench/device_profile.sh",
#       carry=["build-debs-min", "deps", "data"])
#
# 1. the CPU and the OpenBLAS kernels it gets (bcg bench prints them);
# 2. `bcg bench --train` of each config in CONFIGS (default: the humanoid jump
#    SHAC+BCG and PPO configs) with run.device=cuda and cpu (DEVICES), all
#    threads, with BENCH_ARGS added (e.g. --nn-split: the networks' GPU calls
#    split into their phases); where bcg replaced OpenBLAS's own choice of
#    kernels, the same bench again with OpenBLAS's choice (OPENBLAS_CORETYPE);
# 3. if nsys is installed: one PPO bench --train (cuda) under `nsys profile`,
#    with its CUDA API and kernel summaries (where the networks' time goes).
# Files under $OUT: device_profile.log (everything), bench_train.txt (the
# benches in full). About 5-7 minutes on one GPU box with 16 cores.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/build-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device_profile.log") 2>&1
T0=$(date +%s)
say() { echo "[device_profile +$(($(date +%s) - T0))s] $*"; }
NP=$(nproc)
command -v nvcc >/dev/null || export PATH=$PATH:/usr/local/cuda/bin
say "environment"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | sed 's/^/  /'
grep -m1 'model name' /proc/cpuinfo | sed 's/^/  /'
echo "  cpu family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2) model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2); $NP cores"
echo "  commit: ${BCG_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}"
. bench/device_deps.sh
export TMPDIR=$(mktemp -d /tmp/bcg-nvcc.XXXXXX)
B=${BUILD:-build-prof}
say "build $B (CUDA, REAL=${REAL:-double})"
make -j"$NP" BUILD=$B REAL=${REAL:-double} CUDA=1 all >/tmp/bcg-prof-build.log 2>&1 || { tail -n 40 /tmp/bcg-prof-build.log; exit 2; }
ldd $B/bcg | grep -i blas | sed 's/^/  /'
CONFIGS=${CONFIGS:-"configs/experiments/jump_shac_bcg.ini configs/experiments/jump_ppo.ini"}
DEVICES=${DEVICES:-"cuda cpu"}
ITERS=${ITERS:-3}
R="$OUT/bench_train.txt"
bench() { # label, env..., -- args
  say "bench $*"
  echo "#### $*" >>"$R"
  timeout ${BENCH_S:-150} env "$@" >/tmp/bcg-prof-last.txt 2>&1 || echo "(rc $?)" >>/tmp/bcg-prof-last.txt
  cat /tmp/bcg-prof-last.txt >>"$R"
  grep -E '^(threads|physics|networks|task|the rest|total|samples|  )' /tmp/bcg-prof-last.txt | sed 's/^/    /'
}
for cfg in $CONFIGS; do
  for dev in $DEVICES; do
    # PPO's 4096 environments on the CPU take minutes per iteration: cuda only
    case "$cfg" in *ppo*) [ $dev = cpu ] && continue ;; esac
    bench $B/bcg bench --train $cfg --iterations $ITERS ${BENCH_ARGS:-} run.device=$dev run.threads=$NP
    own=$(grep -o "OpenBLAS's own choice: [A-Za-z]*" /tmp/bcg-prof-last.txt | awk '{print $4}')
    if [ -n "$own" ]; then
      bench OPENBLAS_CORETYPE=$own $B/bcg bench --train $cfg --iterations $ITERS run.device=$dev run.threads=$NP
    fi
  done
done
if command -v nsys >/dev/null && [ -n "${NSYS_CONFIG:-configs/experiments/jump_ppo.ini}" ]; then
  c=${NSYS_CONFIG:-configs/experiments/jump_ppo.ini}
  say "nsys: $c"
  timeout 200 nsys profile -o /tmp/bcg-prof --force-overwrite true -t cuda,osrt --sample=none \
    $B/bcg bench --train $c --iterations 2 run.device=cuda run.threads=$NP >/tmp/bcg-nsys.log 2>&1
  say "nsys rc $?"
  timeout 120 nsys stats -r cuda_api_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum /tmp/bcg-prof.nsys-rep 2>&1 |
    grep -v '^\s*$' | cut -c1-200 | head -n 90 | tee "$OUT/nsys_stats.txt" | head -n 60
else
  say "nsys not installed"
fi
say "done in $(($(date +%s) - T0)) s"
