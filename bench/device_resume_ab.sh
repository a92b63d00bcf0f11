#!/bin/bash
# bench/device_resume_ab.sh - seconds per training iteration in a run's steady
# state, the working tree against an earlier commit, in one device call: a run
# carried from an earlier call (RESUME_TGZ, the archives bench/device_train.sh
# returns: runs.tgz and the policies' pieces) is resumed from its last
# checkpoint for ITERS more iterations (`bcg train --resume`), once with each
# build, alternating REPEAT times, each time from the same checkpoint. `bcg
# bench --train` times the first iterations of an untrained policy, which for
# SHAC+BCG are not what a long run spends its time on (more contacts, more
# bundles); this times the iterations the run is at.
#
#   run(command="BCG_DEBS=build-debs-min RESUME_TGZ='runs.tgz pieces...' bash bench/device_resume_ab.sh",
#       carry=["build-debs-min", "deps", "the archives"])
#
# Environment: RESUME_TGZ (required), BASE (default HEAD of the machine's git
# copy), ITERS (60), REPEAT (2), THREADS (all cores), OVERRIDES (more run.*
# keys a resume may change). Files under $OUT: resume_ab.txt (the table,
# seconds per iteration with `bcg train`'s split), resume_ab_full.txt (the
# trainings' output), log-new.h5 and log-base.h5 (the first round's run logs,
# to compare the builds' iterations bit for bit). run_samples: the run's total at the end (all runs start
# from the same checkpoint, so its differences are the sessions').
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/build-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/resume_ab.log") 2>&1
T0=$(date +%s)
say() { echo "[resume_ab +$(($(date +%s) - T0))s] $*"; }
NP=$(nproc)
N=${ITERS:-60}
TH=${THREADS:-$NP}
[ -n "${RESUME_TGZ:-}" ] || { say "RESUME_TGZ is required"; exit 2; }
BUILD_ONLY=1 KEEP_BASE=1 bash bench/device_ab.sh || exit 2
. bench/device_deps.sh # the library paths it sets, for this shell's runs
BB=/tmp/bcg-ab-base/build-ab-base/bcg
O=/tmp/bcg-resume-orig
rm -rf $O && mkdir -p $O
. bench/device_unpack.sh
unpack_archives $O "$RESUME_TGZ" || exit 2
run0=$(dirname "$(find $O -name config.ini | head -n 1)")
ck=$(ls "$run0"/checkpoints/ckpt_*.h5 2>/dev/null | sort | tail -n 1)
[ -n "$ck" ] || { say "no checkpoint under $O"; exit 2; }
it0=$(basename "$ck" .h5 | sed 's/^ckpt_0*//')
say "resuming $(basename "$(dirname "$run0")") at iteration $it0 for $N iterations, $TH threads"
R="$OUT/resume_ab.txt"
{
  echo "# bcg train --resume RUN run.iterations=$((it0 + N)) run.seconds=0 run.threads=$TH ${OVERRIDES:-}; $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "# $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1), $NP cores; run at iteration $it0"
  echo "# new: the working tree sent with the call; base: $(git -C /tmp/bcg-ab-base log -1 --format=%h)"
  echo "# seconds per iteration: the session's training wall time and its split, over the $N iterations"
  printf "%-5s %4s %9s %9s %9s %9s %9s %9s %9s %12s\n" build rep s/it phys_fwd adjoint networks task estim rest run_samples
} >"$R"
for rep in $(seq 1 ${REPEAT:-2}); do
  for b in new base; do
    bin=$PWD/build-ab-new/bcg
    [ $b = base ] && bin=$BB
    W=/tmp/bcg-resume-run
    rm -rf $W && cp -r $O $W
    d=$(dirname "$(find $W -name config.ini | head -n 1)")
    log=/tmp/bcg-resume-$b.log
    # shellcheck disable=SC2086
    timeout 250 "$bin" train --resume "$d" run.iterations=$((it0 + N)) run.seconds=0 run.threads=$TH \
      run.checkpoint_every=100000 ${OVERRIDES:-} >$log 2>&1 || { say "$b failed:"; tail -n 5 $log; }
    { echo "#### $b rep $rep"; cat $log; } >>"$OUT/resume_ab_full.txt"
    [ "$rep" = 1 ] && cp "$d/log.h5" "$OUT/log-$b.h5" # for a bit-for-bit comparison of the two builds
    # "finished after I iterations, S samples, T s" (totals over the run), "time in this session: ..."
    awk -v b=$b -v r=$rep -v n=$N '
      /time in this session:/ {
        for (i = 1; i <= NF; i++) {
          if ($i == "forward") f = $(i+1); if ($i == "adjoint") a = $(i+1); if ($i == "networks") nn = $(i+1)
          if ($i == "task") t = $(i+1); if ($i == "estimator") e = $(i+1); if ($i == "checkpoints)") x = $(i+1)
        }
        tot = f + a + nn + t + e + x
        printf "%-5s %4s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f", b, r, tot / n, f / n, a / n, nn / n, t / n, e / n, x / n
      }
      /finished after/ { for (i = 1; i <= NF; i++) if ($(i+1) ~ /^samples/) s = $i }
      END { printf " %12s\n", s }' $log >>"$R"
  done
done
cat "$R"
git worktree remove --force /tmp/bcg-ab-base >/dev/null 2>&1
say "done in $(($(date +%s) - T0)) s"
