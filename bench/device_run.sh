#!/bin/bash
# bench/device_run.sh - everything the CUDA stepper needs checked on a GPU
# machine, in ONE call, from the repository root, with $OUT set:
#
#   here:    sh bench/fetch_debs.sh            (once; fills build-debs/, ~27 MB)
#   device:  run(command="bash bench/device_run.sh", carry=["build-debs", "deps"])
#            (MAX_DOF=40 MAX_CONTACT=16 bash bench/device_run.sh: the same with smaller capacities)
#
# The device machine (an H200 with this workplace's CUDA image: nvcc, gcc, no
# network, no apt) lacks iniparser, hdf5, cunit and openblas (MuJoCo 3: the deps/ folder, carried). The
# Debian packages carried in build-debs/ are unpacked privately under
# /tmp/bcgdeps (dpkg-deb -x, never into /), and only the libraries and -dev
# names the machine does not already have are put on the search paths, so
# nothing of the image (compilers, CUDA) is shadowed. humanoid.xml comes from
# libmujoco-samples; where /usr/share/mujoco/model is absent it is linked
# there (the CPU suites use that path).
#
# Steps (progress on stdout, prefixed [device_run +Ns]):
#   1. environment: GPU, driver, nvcc, gcc, cores
#   2. dependencies from build-debs/ (only if some are missing)
#   3. build double (build-h200) and float (build-h200-float) with make -k:
#      libbcg with the CUDA stepper, the contact plugins, test_cuda,
#      bench/gpu_bench (double: also the CPU suites of step 4); then the SDK
#      example hunt_crossley (CUDA entries) from a prefix installed from build-h200
#   4. in the background: the CPU suites that bear on it (test_step, test_dyn,
#      test_contact_plugins, test_physics; double; 200 s each at most)
#   5. test_cuda in double and float (GPU vs CPU; tolerances in the suite; double also
#      hunt_crossley's CUDA entries),
#      then test_cuda (double) under compute-sanitizer memcheck ($MEMCHECK_S, 240 s at most)
#   6. gpu_bench: float and double, no contact plugin and smoothed_kappa,
#      n = 1024 ... 65536 (float: ... 131072) on the GPU, the CPU stepper (all threads) at n = 1024
#      and 4096, per-stage GPU times; none starts past $DEADLINE (400 s)
#   6d. $CONCURRENT (3) float PPO trainings side by side on the GPU (forward-only sims
#      reserve only the forward kernels' stack), 2 iterations each
#   7. training iterations, device = cpu and cuda, with the time split
#      (physics forward, adjoint, networks, the rest); none past 500 s
#
# Files under $OUT (at most 8 come back): device_run.log (everything above,
# with build warnings), bench_gpu.txt, test_cuda_double.log,
# test_cuda_float.log, sanitizer.log, tests_cpu.log. Expected: 5-7 minutes
# on one H200 with 16 cores (builds ~2 min, tests ~1-2 min, bench ~3 min),
# at most about 9.5 minutes. Exit status 0 if every step passed (timeouts of
# CPU suites and of memcheck are reported, not counted).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/build-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device_run.log") 2>&1
T0=$(date +%s)
# the commit the working tree was taken from: BCG_COMMIT=$(git rev-parse --short HEAD) from the caller's
# checkout (the device's copy of .git may name an older commit)
COMMIT=${BCG_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}
say() { echo "[device_run +$(($(date +%s) - T0))s] $*"; }
fail=""
NP=$(nproc)
JOBS=$NP

# ---- 1. environment ----------------------------------------------------------------
say "environment"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv 2>&1 | sed 's/^/  /'
command -v nvcc >/dev/null || export PATH=$PATH:/usr/local/cuda/bin
nvcc --version 2>&1 | tail -n 2 | sed 's/^/  /'
gcc --version 2>&1 | head -n 1 | sed 's/^/  /'
echo "  cores: $NP; $(grep PRETTY_NAME /etc/os-release 2>/dev/null)"
# make takes MAX_DOF and MAX_CONTACT from the environment (bcg/dims.h; docs/usage.md section 1)
echo "  capacities: MAX_DOF=${MAX_DOF:-64 (default)} MAX_CONTACT=${MAX_CONTACT:-24 (default)}"
echo "  commit: $COMMIT (device's git: $(git log --oneline -1 2>/dev/null | cut -c1-60))"

# ---- 2. dependencies (shared with bench/device_train.sh) ---------------------------------
. bench/device_deps.sh

# ---- 3. builds ------------------------------------------------------------------------
# Only what this run uses: libbcg, the contact plugins, test_cuda, gpu_bench
# (and in double the CPU suites below). -k: one broken target must not stop
# the others; what is needed is checked by its file.
CPU_SUITES="test_step test_dyn test_contact_plugins test_physics"
export TMPDIR=$(mktemp -d /tmp/bcg-nvcc.XXXXXX) # nvcc's temporary files, private to this run
for p in double float; do
  b=build-h200; [ $p = float ] && b=build-h200-float
  targets="all $b/tests/test_cuda bench-gpu"
  [ -f tests/test_nn_cuda.c ] && targets="$targets $b/tests/test_nn_cuda"
  [ $p = double ] && for t in $CPU_SUITES; do targets="$targets $b/tests/$t"; done
  say "build $b (REAL=$p, -j$NP)"
  timeout 300 make -k -j"$NP" BUILD=$b REAL=$p CUDA=1 $targets >/tmp/bcg-build-$p.log 2>&1
  rc=$?
  grep -iE 'warning|error' /tmp/bcg-build-$p.log | grep -v '^\(cc\|gcc\|nvcc\|/\)' | head -n 30 | sed 's/^/  [build] /'
  for x in libbcg.so tests/test_cuda bench/gpu_bench; do
    [ -e $b/$x ] || { fail="$fail build-$p:$x"; say "FAILED: $b/$x not built (make rc $rc)"; tail -n 30 /tmp/bcg-build-$p.log; }
  done
  [ $rc = 0 ] || say "make -k exited $rc for REAL=$p (see [build] lines)"
done

# ---- 3b. the SDK examples with CUDA entries (plugins/example/hunt_crossley.c, a contact model;
# clip_autodiff.c, a GPU estimator), built out of tree from an installed prefix as a third party
# would; test_cuda (double) compares their GPU entries with their CPU ones (BCG_TEST_CUDA_PLUGINS,
# BCG_TEST_CUDA_ESTIMATORS)
if [ -e build-h200/libbcg.so ]; then
  say "SDK example hunt_crossley with CUDA entries, from an installed prefix"
  rm -rf /tmp/bcg-sdk /tmp/bcg-ex
  if make -s install-built BUILD=build-h200 REAL=double CUDA=1 PREFIX=/tmp/bcg-sdk >/tmp/bcg-sdk.log 2>&1 &&
     make -s -C plugins/example PREFIX=/tmp/bcg-sdk OUT=/tmp/bcg-ex CUDA=1 \
       /tmp/bcg-ex/hunt_crossley.so /tmp/bcg-ex/clip_autodiff.so >>/tmp/bcg-sdk.log 2>&1; then
    export BCG_TEST_CUDA_PLUGINS_DOUBLE=/tmp/bcg-ex/hunt_crossley.so BCG_TEST_CUDA_ESTIMATORS_DOUBLE=/tmp/bcg-ex/clip_autodiff.so
    say "built /tmp/bcg-ex/hunt_crossley.so and /tmp/bcg-ex/clip_autodiff.so"
  else
    fail="$fail sdk-example"; say "FAILED: the SDK example did not build"; tail -n 20 /tmp/bcg-sdk.log
  fi
fi

# ---- 4. CPU suites, in the background --------------------------------------------------------
say "CPU suites in the background (double, 2 threads each, 200 s each at most): $CPU_SUITES"
pids=""
for t in $CPU_SUITES; do
  rm -f /tmp/bcg-$t.rc
  [ -x build-h200/tests/$t ] || { echo 127 >/tmp/bcg-$t.rc; continue; }
  (OMP_NUM_THREADS=2 BUILD=build-h200 timeout 200 sh tests/run.sh build-h200/tests/$t >/tmp/bcg-$t.log 2>&1
   echo $? >/tmp/bcg-$t.rc) &
  pids="$pids $!"
done

# ---- 5. GPU tests --------------------------------------------------------------------------
export OMP_NUM_THREADS=4
for p in double float; do
  b=build-h200; [ $p = float ] && b=build-h200-float
  [ -x $b/tests/test_cuda ] || continue
  say "test_cuda ($p)"
  xp=""; xe=""; [ $p = double ] && { xp=${BCG_TEST_CUDA_PLUGINS_DOUBLE:-}; xe=${BCG_TEST_CUDA_ESTIMATORS_DOUBLE:-}; }
  if BCG_TEST_CUDA_PLUGINS=$xp BCG_TEST_CUDA_ESTIMATORS=$xe BUILD=$b timeout 200 sh tests/run.sh $b/tests/test_cuda >"$OUT/test_cuda_$p.log" 2>&1; then
    say "test_cuda ($p): passed"
  else
    fail="$fail test_cuda-$p"; say "test_cuda ($p): FAILED"
  fi
  grep -E 'skipped|n= |\[measured\]|FAIL|BCGSUITE|refused|device:|not tested|compared' "$OUT/test_cuda_$p.log" | sed 's/^/  /' | head -n 60
  if [ -x $b/tests/test_nn_cuda ]; then
    say "test_nn_cuda ($p)"
    if BUILD=$b timeout 120 sh tests/run.sh $b/tests/test_nn_cuda >"$OUT/test_nn_cuda_$p.log" 2>&1; then
      say "test_nn_cuda ($p): passed"
    else
      fail="$fail test_nn_cuda-$p"; say "test_nn_cuda ($p): FAILED"
    fi
    grep -E 'skipped|\[measured\]|FAIL|BCGSUITE' "$OUT/test_nn_cuda_$p.log" | sed 's/^/  /' | head -n 30
  fi
done
if grep -q 'skipped: no CUDA device' "$OUT/test_cuda_double.log" 2>/dev/null; then
  say "no CUDA device: memcheck skipped"; fail="$fail no-device"
elif [ "${MEMCHECK_S:-240}" = 0 ]; then
  say "MEMCHECK_S=0: memcheck skipped"
elif command -v compute-sanitizer >/dev/null && [ -x build-h200/tests/test_cuda ]; then
  MEMCHECK_S=${MEMCHECK_S:-240}
  say "test_cuda (double) under compute-sanitizer memcheck (${MEMCHECK_S} s at most)"
  BUILD=build-h200 timeout $MEMCHECK_S compute-sanitizer --tool memcheck --leak-check no --error-exitcode 99 \
    build-h200/tests/test_cuda >"$OUT/sanitizer.log" 2>&1
  rc=$?
  grep -E 'ERROR SUMMARY|BCGSUITE|Invalid|out of bounds' "$OUT/sanitizer.log" | head -n 10 | sed 's/^/  /'
  case $rc in 0) say "memcheck: clean" ;; 124) say "memcheck: timed out (partial log kept; not counted as a failure)" ;;
    *) fail="$fail memcheck"; say "memcheck: FAILED (rc $rc)" ;; esac
else
  say "compute-sanitizer not found: memcheck skipped"
fi

say "waiting for the CPU suites"
wait $pids
: >"$OUT/tests_cpu.log"
for t in $CPU_SUITES; do
  rc=$(cat /tmp/bcg-$t.rc 2>/dev/null || echo "?")
  [ -f /tmp/bcg-$t.log ] && cat /tmp/bcg-$t.log >>"$OUT/tests_cpu.log"
  case $rc in
    0) say "$t: passed" ;;
    124) say "$t: timed out at 200 s (not counted as a failure)" ;;
    127) say "$t: not built" ;;
    *) fail="$fail $t"; say "$t: FAILED (rc $rc)"; grep -E 'FAIL|BCGSUITE|crashed' /tmp/bcg-$t.log | head -n 10 | sed 's/^/  /' ;;
  esac
done

# ---- 6. benchmark ---------------------------------------------------------------------------
if [ -n "${TESTS_ONLY:-}" ]; then
  say "TESTS_ONLY: no benchmark; done in $(($(date +%s) - T0)) s;${fail:- all steps passed}${fail:+ failed:}"
  [ -z "$fail" ]
  exit $?
fi
export OMP_NUM_THREADS=$NP
DEADLINE=${DEADLINE:-400} # seconds since the start: no stepper benchmark starts past it
TRAIN_DEADLINE=${TRAIN_DEADLINE:-500} # nor a training-iteration timing past this
PROFILE_DEADLINE=${PROFILE_DEADLINE:-560}
B="$OUT/bench_gpu.txt"
{
  echo "# bcg CUDA stepper benchmark, $(date -u +%Y-%m-%dT%H:%MZ), commit $COMMIT"
  echo "# $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null); $NP CPU cores"
  echo "# rates are env-substeps per second = n * substeps / time; humanoid.xml, motor actuation,"
  echo "# half the environments airborne, half with the feet in the floor; see bench/gpu_bench.c"
} >"$B"
for p in ${BENCH_REALS-float double}; do # BENCH_REALS="": no stepper benchmark
  b=build-h200; [ $p = float ] && b=build-h200-float
  [ -x $b/bench/gpu_bench ] || { echo "## $p: gpu_bench not built" >>"$B"; continue; }
  for plug in none smoothed_kappa; do
    left=$((DEADLINE - ($(date +%s) - T0)))
    if [ $left -lt 30 ]; then say "skip bench $p $plug (time budget)"; echo "## $p $plug: skipped (time budget)" >>"$B"; continue; fi
    [ $left -gt 150 ] && left=150
    arg=none; cpu=1024,4096
    if [ $plug != none ]; then
      arg=$b/plugins/$plug.so; cpu=1024
      [ -f "$arg" ] || { echo "## $p $plug: plugin not built" >>"$B"; continue; }
    fi
    say "gpu_bench $p $plug (${left} s at most)"
    echo >>"$B"
    sizes=256,1024,4096,16384,65536
    [ $p = float ] && sizes=$sizes,131072
    timeout $left $b/bench/gpu_bench --plugin "$arg" --sizes $sizes --cpu-sizes $cpu \
      --seconds 0.3 >>"$B"
    rc=$?
    [ $rc = 0 ] || { fail="$fail bench-$p-$plug"; say "gpu_bench $p $plug: FAILED (rc $rc)"; echo "## (exit $rc)" >>"$B"; }
  done
done
# ---- 6d. forward-only processes side by side on the one GPU: a sim reserves the per-thread stack of
# the forward kernels at creation and the adjoints' only at its first backward pass, so PPO
# trainings (float, 4096 envs) can share a GPU; $CONCURRENT of them, 2 iterations each, must all finish
NC=${CONCURRENT:-3}
if [ "$NC" -gt 0 ] && [ -x build-h200-float/bcg ] && [ $(($(date +%s) - T0)) -lt $((TRAIN_DEADLINE - 120)) ]; then
  say "$NC float PPO trainings (jump_ppo, device = cuda, 2 iterations) side by side on the GPU"
  cpids=""
  for i in $(seq 1 $NC); do
    timeout 150 build-h200-float/bcg train configs/experiments/jump_ppo.ini run.iterations=2 run.device=cuda \
      run.threads=$((NP / NC > 0 ? NP / NC : 1)) run.checkpoint_every=0 run.out_dir=/tmp/bcg-conc run.name=c$i \
      >/tmp/bcg-conc-$i.log 2>&1 &
    cpids="$cpids $!"
  done
  sleep 20
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/  GPU memory while they run: /'
  i=0
  for p in $cpids; do
    i=$((i + 1))
    if wait $p; then say "  PPO process $i: $(grep -o 'finished after .*samples, [0-9.]* s' /tmp/bcg-conc-$i.log | tail -n 1)"
    else fail="$fail concurrent-$i"; say "  PPO process $i FAILED:"; tail -n 3 /tmp/bcg-conc-$i.log; fi
  done
fi

# ---- 7. training iterations: SHAC+BCG (64 envs, horizon 32, B = 10) and PPO (4096 envs) ---------
# wall time of training iterations with device = cpu (all cores) and device = cuda, same commit,
# the paper's settings (configs/experiments/jump_*.ini, domain randomisation on); double build.
T="$OUT/bench_train.txt"
echo "# training iterations, $(date -u +%Y-%m-%dT%H:%MZ), commit $COMMIT, $NP cores" >"$T"
printf "%-14s %-8s %6s %10s %10s %12s\n" run device iters samples wall_s s_per_iter >>"$T"
# cuda: [run] sim_min_batch as configured (default 2048: SHAC's 64-env batches step on the CPU,
# its networks' large batches on cuBLAS); cuda-all: sim_min_batch = 1 (every batch on the GPU)
TRAIN_SPECS=${TRAIN_SPECS-"jump_shac_bcg:3:cpu,cuda,cuda-all jump_ppo:2:cpu,cuda"}
for spec in $TRAIN_SPECS; do
  set -- $(echo $spec | tr ':' ' ')
  devs=$(echo $3 | tr ',' ' ')
  for dev in $devs; do
    extra=""; d=$dev
    [ $dev = cuda-all ] && { d=cuda; extra=run.sim_min_batch=1; }
    left=$((TRAIN_DEADLINE - ($(date +%s) - T0)))
    [ $left -gt 40 ] || { say "skip $1 $dev (time budget)"; echo "$1 $dev skipped (time budget)" >>"$T"; continue; }
    say "train $1 on $dev ($2 iterations, ${left} s at most)"
    log=/tmp/bcg-bt-$1-$dev.log
    timeout $left build-h200/bcg train configs/experiments/$1.ini run.iterations=$2 run.device=$d $extra \
      run.threads=$NP run.checkpoint_every=0 run.out_dir=/tmp/bcg-bt >$log 2>&1
    rc=$?
    tail -n 2 $log | sed 's/^/  /'
    line=$(grep -o 'finished after [0-9]* iterations, [0-9]* samples, [0-9.]* s' $log | tail -n 1)
    if [ -n "$line" ]; then
      set -- $1 $2 $(echo "$line" | awk '{print $3, $5, $7}')
      printf "%-14s %-8s %6s %10s %10s %12.3f\n" $1 $dev $3 $4 $5 $(awk -v w=$5 -v i=$3 'BEGIN{print w / i}') >>"$T"
      grep -o 'time in this session: .*' $log | tail -n 1 | sed 's/^/    /' >>"$T"
      set -- $1 $2
    else
      echo "$1 $dev failed (rc $rc): $(tail -n 1 $log)" >>"$T"; fail="$fail train-$1-$dev"
    fi
  done
done
cat "$T"

# ---- 6b. variants and counters (PROFILE=1): the backward pass with k_pre_vjp recomputing the first
# half instead of reading what the recompute kernel stored, and Nsight Compute on the main kernels
if [ -n "${PROFILE:-}" ] && [ -x build-h200-float/bench/gpu_bench ] && [ $(($(date +%s) - T0)) -lt $((PROFILE_DEADLINE - 120)) ]; then
  pk=build-h200-float/plugins/smoothed_kappa.so
  say "variant BCG_CUDA_PRE_VJP=recompute (float, smoothed_kappa)"
  { echo; echo "## variant: BCG_CUDA_PRE_VJP=recompute (k_pre_vjp recomputes the first half)"; } >>"$B"
  BCG_CUDA_PRE_VJP=recompute timeout 90 build-h200-float/bench/gpu_bench --plugin $pk --sizes 16384,65536 \
    --cpu-sizes none --seconds 0.3 >>"$B" 2>/dev/null
  if command -v ncu >/dev/null; then
    for kr in '^k_pre$|^pgs_solve_kernel$|^k_post$' '^k_post_vjp$|^pgs_vjp_kernel$|^k_pre_vjp$'; do
      say "ncu: $kr (float, smoothed_kappa, n = 16384)"
      timeout 80 ncu --clock-control none -k "regex:$kr" --launch-count 3 --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats \
        build-h200-float/bench/gpu_bench --plugin $pk --sizes 16384 --cpu-sizes none --seconds 0.02 \
        >>"$OUT/ncu.txt" 2>&1
      say "ncu rc $?"
    done
    grep -E '^  [a-z_]+\(|Duration|Memory Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit|Compute \(SM\)|Achieved Occupancy|Registers Per|Local Memory|Stall' "$OUT/ncu.txt" | head -n 80 | sed 's/^/  [ncu] /'
  fi
fi

# ---- 6c. the MLPs: cuBLAS vs OpenBLAS (all cores), PPO's actor -----------------------------
for p in float double; do
  b=build-h200; [ $p = float ] && b=build-h200-float
  [ -x $b/bench/nn_bench ] || continue
  say "nn_bench $p"
  { echo; timeout 60 $b/bench/nn_bench --sizes 4096,24576 --seconds 1; } >>"$B" 2>&1
done

say "bench results:"
cat "$B"
say "done in $(($(date +%s) - T0)) s;${fail:- all steps passed}${fail:+ failed:}"
[ -z "$fail" ]
