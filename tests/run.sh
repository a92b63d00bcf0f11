#!/bin/sh
# Runs every CUnit suite given on the command line, prints each suite's CUnit
# summary, then one closing line "N passed, N failed, N skipped" over all
# tests (skipped: a test that lacks what it needs here, e.g. a GPU; it is
# neither passed nor failed).
# Exits non-zero if any suite failed or crashed.
#
# Temporary files: the suites run with BCG_TEST_TMP and TMPDIR pointing at a
# directory made for this run under ${TMPDIR:-/tmp}; each suite makes its own
# directory in it (tests/testutil.h, bcg_test_tmpdir) and removes it when it
# exits. A suite fails when it leaves anything in the run's directory, or
# when a new entry named bcg* appears in ${TMPDIR:-/tmp} itself while it runs
# and is still there at the end (one that went away again belonged to some
# other process). BCG_KEEP_TMP=1 keeps the files and skips the check.
base=${TMPDIR:-/tmp}
listbcg() { (cd "$base" && ls -d bcg* 2>/dev/null | grep -v '^bcg_tests_' | sort); }
seen=$(listbcg)
run_tmp=$(mktemp -d "$base/bcg_tests_XXXXXX") || { echo "!!! cannot make a directory in $base"; exit 1; }
export BCG_TEST_TMP="$run_tmp" TMPDIR="$run_tmp"

passed=0; failed=0; skipped=0; bad=""; appeared=""
for t in "$@"; do
  name=$(basename "$t")
  echo "=== $name"
  out=$("$t" 2>&1); rc=$?
  echo "$out"
  line=$(echo "$out" | grep '^BCGSUITE' | tail -n 1)
  leaked=""
  if [ -z "$BCG_KEEP_TMP" ]; then
    left=$(ls -A "$run_tmp")
    if [ -n "$left" ]; then
      echo "!!! $name left files in $run_tmp:"; echo "$left" | sed 's/^/    /'
      rm -rf "$run_tmp"/* "$run_tmp"/.[!.]* 2>/dev/null
      leaked=1
    fi
    now=$(listbcg)
    new=$(printf '%s\n' "$now" | grep -vxF "$(printf '%s\n' "$seen")" | grep .)
    [ -n "$new" ] && appeared="$appeared$(printf '%s\n' "$new" | sed "s|\$| $name|")
"
    seen=$now
  fi
  if [ -z "$line" ]; then
    echo "!!! $name crashed or printed no summary (exit $rc)"
    failed=$((failed + 1)); bad="$bad $name"; continue
  fi
  n=$(echo "$line" | sed 's/.*tests=\([0-9]*\).*/\1/')
  f=$(echo "$line" | sed 's/.* failed=\([0-9]*\) .*/\1/')
  k=$(echo "$line" | sed -n 's/.*skipped=\([0-9]*\).*/\1/p')
  k=${k:-0}
  passed=$((passed + n - f - k)); failed=$((failed + f)); skipped=$((skipped + k))
  if [ "$rc" != 0 ] || [ -n "$leaked" ]; then
    [ "$f" = 0 ] && failed=$((failed + 1))
    bad="$bad $name"
  fi
done
if [ -n "$BCG_KEEP_TMP" ]; then echo "kept $run_tmp (BCG_KEEP_TMP)"; else rm -rf "$run_tmp"; fi
# new bcg* entries of $base that are still there, with the suite that ran when each appeared
left=$(printf '%s' "$appeared" | while read -r entry suite; do
  [ -n "$entry" ] && [ -e "$base/$entry" ] && echo "$entry $suite"
done)
if [ -n "$left" ]; then
  echo "!!! new entries left in $base (the suite that ran when each appeared):"
  echo "$left" | sed 's/^/    /'
  for s in $(echo "$left" | cut -d' ' -f2 | sort -u); do
    case " $bad " in *" $s "*) ;; *) bad="$bad $s"; failed=$((failed + 1)) ;; esac
  done
fi
echo
[ -n "$bad" ] && echo "failing suites:$bad"
echo "$passed passed, $failed failed, $skipped skipped"
[ -z "$bad" ] && [ "$passed" -gt 0 ]
