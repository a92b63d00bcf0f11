#!/bin/sh
# Runs every CUnit suite given on the command line, prints each suite's CUnit
# summary, then one closing line "N passed, N failed" over all tests.
# Exits non-zero if any suite failed or crashed.
passed=0; failed=0; bad=""
for t in "$@"; do
  name=$(basename "$t")
  echo "=== $name"
  out=$("$t" 2>&1); rc=$?
  echo "$out"
  line=$(echo "$out" | grep '^BCGSUITE' | tail -n 1)
  if [ -z "$line" ]; then
    echo "!!! $name crashed or printed no summary (exit $rc)"
    failed=$((failed + 1)); bad="$bad $name"; continue
  fi
  n=$(echo "$line" | sed 's/.*tests=\([0-9]*\).*/\1/')
  f=$(echo "$line" | sed 's/.*failed=\([0-9]*\) .*/\1/')
  passed=$((passed + n - f)); failed=$((failed + f))
  if [ "$rc" != 0 ]; then
    [ "$f" = 0 ] && failed=$((failed + 1))
    bad="$bad $name"
  fi
done
echo
[ -n "$bad" ] && echo "failing suites:$bad"
echo "$passed passed, $failed failed"
[ -z "$bad" ] && [ "$passed" -gt 0 ]
