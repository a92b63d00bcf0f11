#!/bin/bash
# bench/device_train.sh - the longer training runs on the device
# machine's CPUs: SHAC+BCG and PPO on the jump clip with the paper's settings
# (configs/experiments/jump_{shac_bcg,ppo}.ini), side by side with half the
# cores each, for TRAIN_SECONDS of wall time each; then E_fixed in bcg (the
# fixed-window tracking error of `bcg eval`, comparable between policies) of
# the initial policy and of every checkpoint, all evaluations in parallel, as
# a table iteration / samples / wall s / E_fixed, and for each threshold the
# samples and wall time of the first checkpoint at or below it (samples and
# wall time to a fixed tracking error); and the transfer evaluation (MuJoCo
# and bcg) of each final policy.
#
#   run(command="bash bench/device_train.sh", carry=["build-debs", "deps"])
#
# Environment (all optional):
#   TRAIN_SECONDS  training wall time of each run (default 420; with the build
#                  and the evaluations the whole script stays under 580 s on
#                  16 cores)
#   SHAC_OVERRIDES extra section.key=value overrides of the first run (SHAC+BCG),
#                  e.g. "run.device=cuda" (then the build includes CUDA)
#   PPO_OVERRIDES  the same for the second run (PPO), e.g. "run.device=cuda"
#   THREADS_1, THREADS_2  CPU threads of the first / second run (default NP / 2 each)
#   EVAL_SECONDS   E_fixed's window from the clip's start (default 8: the whole
#                  jump clip); EVAL_RUNS episodes per checkpoint (default 3)
#   THRESHOLDS     E_fixed thresholds in cm (default "90 80 70 60 50 40 30 20")
#   KAPPA=1        SHAC+BCG at kappa 50 and 300 instead (the transfer ablation);
#   RUNS=...       any two runs ("name|config|overrides;...")
#   BUILD_DIR      build folder (default build-train); SKIP_BUILD=1 uses it as is
#   FLOAT_CUDA=1   runs with run.device=cuda use a second build, REAL=float with CUDA, in
#                  BUILD_DIR-float (trained and evaluated with it), the others the double
#                  CPU build: on an 80 GB GPU the double stepper kernels' stack frames do
#                  not fit (docs/performance.md), and a float process leaves room for others
#   NP             cores to use (default nproc)
#   SELECT_BEST=1  also evaluate (MuJoCo and bcg) each run's checkpoint of lowest E_fixed in bcg
#                  (bcg eval --select-best)
#   RESUME_TGZ     an earlier call's archives, carried, separated by spaces: its
#                  runs.tgz and its policies-NAME.tgz (or all pieces of a split
#                  one, policies-NAME.tgz.part-*), unpacked into one folder;
#                  each run there continues with
#                  `bcg train --resume` for TRAIN_SECONDS more (run.seconds counts
#                  training wall time over all calls: RESUME_SECONDS_BEFORE (seconds as
#                  `bcg train` prints them, e.g. 1085.5), default
#                  TRAIN_SECONDS, is added); runs of RUNS not in it start afresh
#
# Files under $OUT: device_train.log (everything), runs.tgz (every run's
# config.ini, log.h5, eval.h5), policies-NAME.tgz (each run's last checkpoint;
# above 16 MB in pieces of 15 MB, policies-NAME.tgz.part-aa, -ab, ...), efixed.tsv (the table).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/build-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device_train.log") 2>&1
T0=$(date +%s)
say() { echo "[device_train +$(($(date +%s) - T0))s] $*"; }
S=${TRAIN_SECONDS:-420}
# the training seconds of earlier calls, as `bcg train` prints them (e.g. 1085.5)
RSB=${RESUME_SECONDS_BEFORE:-$S}
case "$RSB" in
  '' | *[!0-9.]* | *.*.* | .*) say "RESUME_SECONDS_BEFORE=$RSB: a number of seconds (e.g. 1085.5)"; exit 2 ;;
esac
case "$S" in '' | *[!0-9]*) say "TRAIN_SECONDS=$S: a whole number of seconds"; exit 2 ;; esac
NP=${NP:-$(nproc)}
H=$((NP / 2))
[ "$H" -ge 1 ] || H=1
ES=${EVAL_SECONDS:-8}
ER=${EVAL_RUNS:-3}
TH=${THRESHOLDS:-"90 80 70 60 50 40 30 20"}
SO=${SHAC_OVERRIDES:-}
PO=${PPO_OVERRIDES:-}
T1=${THREADS_1:-$H}
T2=${THREADS_2:-$H}
BD=${BUILD_DIR:-build-train}
CUDA_BUILD=0
case "$SO $PO ${RUNS:-}" in *device=cuda*) CUDA_BUILD=1 ;; esac
FC=${FLOAT_CUDA:-}
[ -n "$FC" ] && [ $CUDA_BUILD = 1 ] || FC=""
say "cores $NP; $(grep PRETTY_NAME /etc/os-release 2>/dev/null); commit $(git log --oneline -1 2>/dev/null)"
. bench/device_deps.sh
if [ -z "${SKIP_BUILD:-}" ]; then
  say "build (CUDA=$CUDA_BUILD) in $BD"
  [ $CUDA_BUILD = 1 ] && export TMPDIR=$(mktemp -d /tmp/bcg-nvcc.XXXXXX)
  if [ -n "$FC" ]; then
    make -j"$NP" BUILD=$BD CUDA=0 all >/tmp/bcg-train-build.log 2>&1 || { tail -n 40 /tmp/bcg-train-build.log; exit 2; }
    say "float CUDA build in $BD-float"
    make -j"$NP" BUILD=$BD-float REAL=float CUDA=1 all >/tmp/bcg-train-build-f.log 2>&1 ||
      { tail -n 40 /tmp/bcg-train-build-f.log; exit 2; }
  else
    make -j"$NP" BUILD=$BD CUDA=$CUDA_BUILD all >/tmp/bcg-train-build.log 2>&1 || { tail -n 40 /tmp/bcg-train-build.log; exit 2; }
  fi
fi
B=$BD/bcg
# the binary of run NAME (FLOAT_CUDA: the float build for the runs on the GPU)
binof() { cat "/tmp/bcg-bin-$1" 2>/dev/null || echo "$B"; }
R=/tmp/bcg-runs
rm -rf "$R" /tmp/bcg-bin-*
mkdir -p "$R"
if [ -n "${RESUME_TGZ:-}" ]; then
  . bench/device_unpack.sh
  unpack_archives "$R" "$RESUME_TGZ" || exit 2
  say "resuming the runs of $RESUME_TGZ: $(ls $R | tr '\n' ' ')"
fi
# RUNS: "name|config|overrides;..." (two runs side by side); default SHAC+BCG vs PPO on jump;
# KAPPA=1: SHAC+BCG on jump at kappa 50 and 300 (the paper's transfer ablation)
if [ -n "${KAPPA:-}" ]; then
  RUNS="kappa50|configs/experiments/jump_shac_bcg.ini|contact.kappa=50 run.checkpoint_every=10;kappa300|configs/experiments/jump_shac_bcg.ini|contact.kappa=300 run.checkpoint_every=10"
fi
RUNS=${RUNS:-"jump_shac_bcg|configs/experiments/jump_shac_bcg.ini|run.checkpoint_every=10;jump_ppo|configs/experiments/jump_ppo.ini|run.checkpoint_every=2"}
say "train for $S s each, $T1 / $T2 threads: $RUNS${SO:+ (first run also: $SO)}${PO:+ (second run also: $PO)}"
pids=""
names=""
first=1
IFS=';' read -ra SPEC <<<"$RUNS"
for spec in "${SPEC[@]}"; do
  IFS='|' read -r name cfg ovs <<<"$spec"
  extra="$PO"; th=$T2
  [ $first = 1 ] && extra="$SO" && th=$T1
  first=0
  rb=$B
  [ -n "$FC" ] && case "$ovs $extra" in *device=cuda*) rb=$BD-float/bcg ;; esac
  echo "$rb" >"/tmp/bcg-bin-$name"
  # keep_last=0: every checkpoint stays for the E_fixed curve below (no rotation)
  prev=$(ls -td $R/$name/*/ 2>/dev/null | head -n 1)
  if [ -n "$prev" ]; then
    # the run's own thread count (an override of RUNS) stays; other overrides are in its config.ini
    rth=$(echo "$ovs $extra" | tr ' ' '\n' | grep '^run.threads=' | tail -n 1)
    $rb train --resume "$prev" run.seconds=$(awk -v a="$S" -v b="$RSB" 'BEGIN { printf "%.3f", a + b }') run.threads=$th $rth run.keep_last=0 >/tmp/bcg-$name.log 2>&1 &
  else
    $rb train "$cfg" run.name=$name run.seconds=$S run.threads=$th run.out_dir=$R run.keep_last=0 $ovs $extra >/tmp/bcg-$name.log 2>&1 &
  fi
  pids="$pids $!"
  names="$names $name"
done
for p in $pids; do wait $p; say "run (pid $p) exit $?"; done
for name in $names; do tail -n 3 /tmp/bcg-$name.log; done

# ---- E_fixed of the initial policy and of every checkpoint, in parallel ----
E=/tmp/bcg-efixed
rm -rf "$E"
mkdir -p "$E"
jobs=$E/jobs
: >"$jobs"
for name in $names; do
  d=$(ls -td $R/$name/*/ 2>/dev/null | head -n 1)
  [ -n "$d" ] || { say "no run directory for $name"; continue; }
  echo "$name initial ${d%/} --initial" >>"$jobs"
  for c in "$d"checkpoints/ckpt_*.h5; do
    [ -e "$c" ] || continue
    it=$(basename "$c" .h5 | sed 's/ckpt_0*//')
    echo "$name ${it:-0} $c" >>"$jobs"
  done
done
say "E_fixed in bcg ($ER episodes, $ES s window from the clip's start) of $(wc -l <"$jobs") policies, $NP at a time"
# one evaluation: prints "name iteration samples wall_s E_fixed_mean E_fixed_std up_mean E_track_mean falls"
ev() {
  local name=$1 it=$2 target=$3 flag=${4:-}
  local log=$E/$name.$it.txt
  OMP_NUM_THREADS=1 $(binof "$name") eval "$target" $flag --sim bcg --runs $ER --seconds $ES --out - run.threads=1 run.device=cpu >"$log" 2>&1
  awk -v n="$name" -v it="$it" '
    /^policy of / { for (i = 1; i <= NF; i++) { if ($i == "(iteration") { it2 = $(i+1); sub(",", "", it2) }
                                                if ($i == "samples,") s = $(i-1); if ($i == "s" && $(i+1) == "of") w = $(i-1) } }
    /^bcg / { split($2, f, "/"); printf "%s %s %s %s %s %s %s %s %s\n", n, (it == "initial" ? 0 : it2), (it == "initial" ? 0 : s),
                     (it == "initial" ? 0 : w), $15, $17, $12, $9, f[1] "/" f[2] }' "$log"
}
export -f ev binof
export B E ER ES
xargs -P "$NP" -L 1 bash -c 'ev "$@"' _ <"$jobs" >"$E/rows" 2>"$E/xargs.err"
sort -k1,1 -k2,2n "$E/rows" >"$E/sorted"
n_ok=$(wc -l <"$E/sorted")
[ "$n_ok" -lt "$(wc -l <"$jobs")" ] && say "only $n_ok of $(wc -l <"$jobs") evaluations gave a row (see $E/*.txt)" && tail -n 5 "$E"/*.txt | head -n 40
{
  printf "# E_fixed: bcg eval --sim bcg --runs %s --seconds %s (window from the clip's start, steps after a fall count 1 m)\n" "$ER" "$ES"
  printf "%-16s %9s %11s %9s %18s %7s %11s %6s\n" run iteration samples wall_s "E_fixed cm" up "E_track cm" falls
  awk '{ printf "%-16s %9s %11s %9s %9.2f +- %-6.2f %7.3f %11.2f %6s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9 }' "$E/sorted"
} | tee "$OUT/efixed.tsv"
echo
echo "samples and wall time (training, s) to E_fixed <= threshold (first checkpoint at or below it):"
printf "%-16s" "threshold cm"
for name in $names; do printf " %32s" "$name"; done
echo
for t in $TH; do
  printf "%-16s" "$t"
  for name in $names; do
    cell=$(awk -v n="$name" -v t="$t" '$1 == n && $5 <= t { printf "%s samples, %s s (it. %s)", $3, $4, $2; exit }' "$E/sorted")
    printf " %32s" "${cell:-not reached}"
  done
  echo
done

# ---- the transfer evaluation of each final policy (MuJoCo and bcg), in parallel ----
tpids=""
for name in $names; do
  d=$(ls -td $R/$name/*/ 2>/dev/null | head -n 1)
  [ -n "$d" ] || continue
  OMP_NUM_THREADS=$H $(binof "$name") eval "$d" --runs 5 --seconds $ES run.device=cpu >/tmp/bcg-transfer-$name.log 2>&1 &
  tpids="$tpids $!"
  # the checkpoint with the lowest E_fixed in bcg (MuJoCo plays no part in the choice), in both
  [ -n "${SELECT_BEST:-}" ] && OMP_NUM_THREADS=1 $(binof "$name") eval "$d" --select-best --runs 5 --seconds $ES --out - run.device=cpu \
    >/tmp/bcg-best-$name.log 2>&1 &
  tpids="$tpids $!"
done
for p in $tpids; do wait $p; done # not a bare wait: that would wait for the tee above too
for name in $names; do
  d=$(ls -td $R/$name/*/ 2>/dev/null | head -n 1)
  [ -n "$d" ] || continue
  say "transfer evaluation of $name ($d)"
  cat /tmp/bcg-transfer-$name.log
  [ -n "${SELECT_BEST:-}" ] && say "transfer evaluation of $name's best checkpoint in bcg" && cat /tmp/bcg-best-$name.log
  ls "$d"/checkpoints/ckpt_*.h5 | head -n -1 | xargs rm -f
done
# runs.tgz: every run's config.ini, log.h5 and eval.h5; policies-NAME.tgz: each run's final
# checkpoint (a later call's RESUME_TGZ takes them all), one file per run so that a large
# one does not take the others with it; one over the 16 MiB a returned file may have goes
# back in pieces
tar czf "$OUT/runs.tgz" -C "$R" --exclude=checkpoints . 2>/dev/null
for name in $names; do
  (cd "$R" && tar czf "$OUT/policies-$name.tgz" $name/*/checkpoints) 2>/dev/null
  sz=$(stat -c %s "$OUT/policies-$name.tgz" 2>/dev/null || echo 0)
  if [ "$sz" -gt 16000000 ]; then # a returned file has at most 16 MiB: in pieces (SHAC+BCG's are about 18 MB)
    split -b 15000000 "$OUT/policies-$name.tgz" "$OUT/policies-$name.tgz.part-" && rm -f "$OUT/policies-$name.tgz"
    say "policies-$name.tgz ($sz bytes) in pieces: $(cd "$OUT" && ls policies-$name.tgz.part-* | tr '\n' ' ')"
  fi
done
say "done in $(($(date +%s) - T0)) s"
