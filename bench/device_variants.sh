#!/bin/bash
# bench/device_variants.sh - seconds per training iteration of one build
# under several sets of overrides, alternated on the same machine in the same
# call: `bcg bench --train` of each config (or run directory) with each
# variant, REPEAT rounds, with the split of each; then, unless TESTS is empty,
# the test suites named in TESTS (default test_learners: its checks that need
# a GPU run where one is found).
#
#   run(command="VARIANTS='learner.critic_overlap=false|learner.critic_overlap=true' BCG_DEBS=build-debs-min bash bench/device_variants.sh",
#       carry=["build-debs-min", "deps"])
#
# Environment: VARIANTS (required: override sets separated by '|', each a
# space-separated list of section.key=value), CONFIGS (default the humanoid
# jump SHAC+BCG config; a run directory measures the run resumed from its
# latest checkpoint, bench --train RUN_DIR), OVERRIDES (common to every
# variant, default run.device=cuda run.threads=<cores>), ITERS (10), REPEAT
# (2), REAL (double), TESTS (default test_learners; empty: none), RUNS_TGZ
# (an earlier device_train.sh call's archives, carried: runs.tgz and the
# policies' pieces, unpacked into /tmp/bcg-var-runs first, so that CONFIGS
# may name /tmp/bcg-var-runs/NAME/STAMP, e.g. the 3000-iteration protocol
# run at its end: CONFIGS='$(ls -d /tmp/bcg-var-runs/*/*/)'). Files under
# $OUT: device_variants.txt (the table), device_variants_full.txt (every
# bench's output), device_variants.log (everything).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/build-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device_variants.log") 2>&1
T0=$(date +%s)
say() { echo "[device_variants +$(($(date +%s) - T0))s] $*"; }
[ -n "${VARIANTS:-}" ] || { echo "device_variants.sh: set VARIANTS='k=v ...|k=v ...'"; exit 2; }
NP=$(nproc)
REAL=${REAL:-double}
CONFIGS=${CONFIGS:-"configs/experiments/jump_shac_bcg.ini"}
OV=${OVERRIDES:-"run.device=cuda run.threads=$NP"}
. bench/device_deps.sh
export TMPDIR=$(mktemp -d /tmp/bcg-nvcc.XXXXXX)
say "commit $(git log -1 --format='%h %s' 2>/dev/null | cut -c1-100); build REAL=$REAL CUDA=${CUDA:-1}"
make -j"$NP" BUILD=build-var REAL=$REAL CUDA=${CUDA:-1} all tests-build >/tmp/var-build.log 2>&1 ||
  { tail -n 30 /tmp/var-build.log; exit 2; }
if [ -n "${RUNS_TGZ:-}" ]; then
  . bench/device_unpack.sh
  mkdir -p /tmp/bcg-var-runs
  unpack_archives /tmp/bcg-var-runs "$RUNS_TGZ" || exit 2
  say "unpacked $RUNS_TGZ: $(ls -d /tmp/bcg-var-runs/*/*/ | tr '\n' ' ')"
  CONFIGS=$(eval echo "$CONFIGS")
fi
R="$OUT/device_variants.txt"
IFS='|' read -r -a VS <<<"$VARIANTS"
{
  echo "# bcg bench --train CONFIG --iterations ${ITERS:-10} $OV <variant>; $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "# $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1), $NP cores; REAL=$REAL;" \
    "commit $(git log -1 --format=%h 2>/dev/null)"
  for i in "${!VS[@]}"; do echo "# variant $i: ${VS[$i]}"; done
  printf "%-44s %3s %4s %8s %8s %8s %8s %8s %8s %8s %9s\n" config var rep total fwd adjoint networks task rest beside samples/s
} >"$R"
for cfg in $CONFIGS; do
  for rep in $(seq 1 ${REPEAT:-2}); do
    for i in "${!VS[@]}"; do
      log=/tmp/var-$i.txt
      timeout 300 build-var/bcg bench --train "$cfg" --iterations ${ITERS:-10} $OV ${VS[$i]} >$log 2>&1
      awk -v c="$cfg" -v v=$i -v r=$rep '
        /^physics forward/ { f = $3 } /^physics adjoint/ { a = $3 } /^networks  / { n = $2 } /^task/ { t = $2 }
        /^the rest/ { x = $3 } /^total/ { tot = $2 } /^networks beside/ { b = $3 }
        /^samples:/ { for (i = 1; i <= NF; i++) if ($i == "samples/s") s = $(i-1) }
        END { printf "%-44s %3s %4s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %9s\n", c, v, r, tot, f, a, n, t, x, b, s }' \
        $log >>"$R"
      { echo "#### variant $i (${VS[$i]}) rep $rep: $cfg"; cat $log; } >>"$OUT/device_variants_full.txt"
      grep -q '^total' $log || { say "variant $i $cfg failed:"; tail -n 5 $log; }
    done
  done
done
cat "$R"
for t in ${TESTS-test_learners}; do
  say "tests: $t"
  BUILD=build-var timeout 400 sh tests/run.sh build-var/tests/$t 2>&1 | tail -n 25
done
say "done in $(($(date +%s) - T0)) s"
