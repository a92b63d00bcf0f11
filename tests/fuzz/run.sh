#!/bin/sh
# tests/fuzz/run.sh BUILD SECONDS TARGET... - run each libFuzzer harness
# BUILD/fuzz/fuzz_TARGET for SECONDS from its seed corpus
# tests/fuzz/corpus/TARGET/ (read only) and its working corpus
# BUILD/corpus/TARGET/ (kept between runs: new inputs go there). Any crash,
# leak, timeout or sanitizer report stops that harness with an artifact in
# BUILD/artifacts/; the script goes on with the next one, prints one line per
# harness and exits non-zero if any failed, naming the artifacts and the
# command that reproduces each.
#
# Environment: FUZZ_JOBS (parallel jobs per harness, default 1),
# FUZZ_LOG_DIR (keep each harness's libFuzzer output there; default BUILD/logs).
build=$1; secs=$2; shift 2
[ -n "$build" ] && [ -n "$secs" ] && [ $# -gt 0 ] || { echo "usage: $0 BUILD SECONDS TARGET..." >&2; exit 2; }
# absolute paths: some harnesses work inside their own temporary directory
case "$build" in /*) ;; *) build="$(pwd)/$build" ;; esac
logs=${FUZZ_LOG_DIR:-$build/logs}
mkdir -p "$build/artifacts" "$logs"
# abort_on_error: a report ends the run as a crash; halt_on_error: UBSan too
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$(pwd)/tests/fuzz/lsan.supp:print_suppressions=0}"
export BCG_LOG_LEVEL=0 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# the harnesses' temporary directories, one place per run of this script (a
# crashed harness leaves its own)
TMPDIR=$(mktemp -d "$build/tmp.XXXXXX") || exit 1
export TMPDIR
failed=""
for t in "$@"; do
  bin="$build/fuzz/fuzz_$t"
  seeds="$(pwd)/tests/fuzz/corpus/$t"
  work="$build/corpus/$t"
  log="$logs/$t.log"
  [ -x "$bin" ] || { echo "fuzz $t: $bin missing (make fuzz-build)"; failed="$failed $t"; continue; }
  [ -d "$seeds" ] || { echo "fuzz $t: no seed corpus $seeds"; failed="$failed $t"; continue; }
  mkdir -p "$work"
  # slow-unit-* (an input slower than 10 s) is written but is not a failure
  before=$(ls "$build/artifacts" | grep "^$t-" | grep -vc "^$t-slow-unit-")
  start=$(date +%s)
  # -close_fd_mask=3: the harnesses' own output (bcg's messages) is not shown;
  # libFuzzer's and the sanitizers' reports are
  "$bin" -max_total_time="$secs" -timeout=60 -rss_limit_mb=4096 -malloc_limit_mb=4096 -close_fd_mask=3 \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" \
    $( [ -f "tests/fuzz/$t.dict" ] && echo "-dict=$(pwd)/tests/fuzz/$t.dict" ) \
    "$work" "$seeds" </dev/null >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
  after=$(ls "$build/artifacts" | grep "^$t-" | grep -vc "^$t-slow-unit-")
  if [ "$rc" != 0 ] || [ "$after" != "$before" ]; then
    echo "fuzz $t: FAILED after ${took} s (exit $rc; ${execs:-?} inputs, ${cov:-cov ?})"
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|fuzz harness:)' "$log" | head -n 5 | sed 's/^/    /'
    for a in $(ls -t "$build/artifacts" | grep "^$t-" | grep -v "^$t-slow-unit-" | head -n 3); do
      echo "    artifact: $build/artifacts/$a"
      echo "    reproduce: $bin $build/artifacts/$a"
    done
    echo "    full output: $log"
    failed="$failed $t"
  else
    echo "fuzz $t: ok, ${took} s, ${execs:-?} inputs, ${cov:-cov ?}, corpus $(ls "$work" | wc -l) + $(ls "$seeds" | wc -l) seeds"
  fi
done
rm -rf "$TMPDIR"
if [ -n "$failed" ]; then
  echo "fuzz: FAILED:$failed"
  exit 1
fi
echo "fuzz: all $# harnesses ran clean"
