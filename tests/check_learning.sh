#!/bin/sh
# tests/check_learning.sh BCG - the slow learning checks (make check-learning).
#
# Two parts: the pendulum swing-up (below, about a minute) and rung 1 of the
# learning ladder, stand on humanoid.xml with SHAC+BCG for four seeds (at the
# end, 5-10 minutes per run on one thread, two at a time; the config of make
# demo; SKIP_STAND=1 skips it).
#
# SHAC and PPO train on the pendulum swing-up task of the learners' tests
# (tests/plugins/learn_task.c on tests/models/pendulum.xml, reward
# cos q - 0.01 u^2 - 0.01 a^2 per step, 100-step episodes: hanging still
# scores -100, balancing upright about +100, an unlearned Gaussian policy
# about -85) through the real `bcg train`, with the exact test estimator,
# 64 environments, one thread and the small networks below; every other key
# is the learner's default (SHAC's public configuration, rsl_rl's PPO).
#
# Pass: each reaches THRESHOLD (the mean of the last three reported episode
# returns) within its budget, and SHAC needs fewer samples than PPO. Samples
# and wall time to the threshold are printed.
set -u
BIN=${1:-build/bcg}
BUILD=$(dirname "$BIN")
THRESHOLD=${THRESHOLD:-70}
SHAC_ITERS=${SHAC_ITERS:-40}    # 64 envs x 32 steps: 82k samples at most
PPO_ITERS=${PPO_ITERS:-120}     # 64 envs x 24 steps: 184k samples at most
SEED=${SEED:-1}

for f in "$BUILD/tests/plugins/learn_task.so" "$BUILD/tests/plugins/test_exact_estimator.so"; do
  [ -f "$f" ] || { echo "check_learning: $f missing (make tests-build)" >&2; exit 1; }
done
TMP=$(mktemp -d /tmp/bcg_check_learning.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
mkdir "$TMP/plugins"
ln -s "$(cd "$BUILD/tests/plugins" && pwd)/learn_task.so" "$TMP/plugins/"
ln -s "$(cd "$BUILD/tests/plugins" && pwd)/test_exact_estimator.so" "$TMP/plugins/"
MODEL=$(pwd)/tests/models/pendulum.xml

write_ini() { # name learner-section
  cat > "$TMP/$1.ini" <<EOF
[run]
name = $1
seed = $SEED
num_envs = 64
threads = 1
checkpoint_every = 0
out_dir = $TMP/runs
[model]
path = $MODEL
[estimator]
plugin = test_exact_estimator
[learner]
$2
actor_layers = 64,64
critic_layers = 64,64
[task]
plugin = learn_task
EOF
}

# one value per line of a 1-D dataset of log.h5 (raw little-endian doubles through od)
curve() {
  h5dump -d "/$2" -b LE -o "$TMP/bin" "$1" > /dev/null || return 1
  od -An -v -t f8 -w8 "$TMP/bin" | tr -d ' '
}

# first iteration whose mean of the last three non-NaN returns >= THRESHOLD:
# prints "samples wall_time" or "- -"
to_threshold() {
  curve "$1" mean_return > "$TMP/r"
  curve "$1" samples > "$TMP/s"
  curve "$1" wall_time > "$TMP/w"
  paste "$TMP/r" "$TMP/s" "$TMP/w" | awk -v T="$THRESHOLD" '
    $1 != "nan" { a = b; b = c; c = $1 + 0; n++
      if (n >= 3 && (a + b + c) / 3 >= T) { printf "%d %.1f\n", $2, $3; found = 1; exit } }
    END { if (!found) print "- -" }'
}

run() { # name learner-section iterations
  write_ini "$1" "$2"
  BCG_PLUGIN_PATH="$TMP/plugins" "$BIN" train "$TMP/$1.ini" "run.iterations=$3" > "$TMP/$1.out" 2>&1 ||
    { echo "check_learning: bcg train $1 failed:"; tail -5 "$TMP/$1.out"; exit 1; }
  dir=$(sed -n 's/^bcg: train: run directory //p' "$TMP/$1.out")
  res=$(to_threshold "$dir/log.h5")
  final=$(curve "$dir/log.h5" mean_return | grep -v nan | tail -3 | awk '{ s += $1 } END { printf "%.1f", s / NR }')
  total=$(curve "$dir/log.h5" samples | tail -1)
  wall=$(curve "$dir/log.h5" wall_time | tail -1)
  echo "$res" > "$TMP/$1.res"
  printf '%-5s threshold %s: samples %-8s wall %-6s s   (final return %s after %s samples, %.0f s)\n' \
    "$1" "$THRESHOLD" $(echo "$res" | cut -d' ' -f1) $(echo "$res" | cut -d' ' -f2) "$final" "$total" "$wall"
}

echo "check_learning: pendulum swing-up, 64 envs, 1 thread, threshold $THRESHOLD (mean of 3 returns)"
echo "  shac: bcg train ... [learner] plugin = shac (defaults) for up to $SHAC_ITERS iterations"
echo "  ppo:  bcg train ... [learner] plugin = ppo (defaults) for up to $PPO_ITERS iterations"
run shac "plugin = shac" "$SHAC_ITERS"
run ppo "plugin = ppo" "$PPO_ITERS"
s=$(cut -d' ' -f1 "$TMP/shac.res")
p=$(cut -d' ' -f1 "$TMP/ppo.res")
ok=1
[ "$s" = "-" ] && { echo "FAIL: SHAC did not reach $THRESHOLD"; ok=0; }
[ "$p" = "-" ] && { echo "FAIL: PPO did not reach $THRESHOLD"; ok=0; }
if [ $ok = 1 ]; then
  if [ "$s" -lt "$p" ]; then
    echo "PASS: both reach $THRESHOLD; SHAC with $(awk -v a="$p" -v b="$s" 'BEGIN { printf "%.1f", a / b }')x fewer samples than PPO"
  else
    echo "FAIL: SHAC needed $s samples, PPO $p"; ok=0
  fi
fi

# ---- rung 1 of the learning ladder (docs/learning.md): stand on humanoid.xml ----
# SHAC+BCG (configs/ladder/stand_shac_bcg.ini) for STAND_ITERS iterations on
# one thread each, the LR decaying over them (350: the run of make demo), for
# every seed of STAND_SEEDS, STAND_JOBS runs at a time; then bcg eval (5
# episodes, both simulators) of each against its untrained policy. A single
# seed proves little: before the actor's output layer started near zero
# (init = orthogonal), about half the seeds stood and a change of rounding
# redrew which (docs/learning.md, "The seed lottery and the actor's
# initialisation"). Pass, for every seed: in bcg and in MuJoCo at most
# STAND_FALLS falls and E_fixed <= STAND_EFIXED cm, and the eval's verdict
# (MuJoCo) "clearly better" (fewer falls or none, E_fixed at most half the
# untrained policy's).
STAND_ITERS=${STAND_ITERS:-350}
STAND_SEEDS=${STAND_SEEDS:-0 1 2 3}
STAND_JOBS=${STAND_JOBS:-2}
STAND_EFIXED=${STAND_EFIXED:-10}
STAND_FALLS=${STAND_FALLS:-1}
stand_one() { # seed: train, eval, print one PASS/FAIL line into $TMP/stand$seed.res
  sd=$1
  "$BIN" train configs/ladder/stand_shac_bcg.ini run.iterations=$STAND_ITERS run.threads=1 run.seed=$sd \
    run.name=stand_s$sd run.out_dir="$TMP/runs" > "$TMP/stand$sd.out" 2>&1 ||
    { echo "FAIL: stand seed $sd: bcg train failed: $(tail -1 "$TMP/stand$sd.out")" > "$TMP/stand$sd.res"; return; }
  dir=$(sed -n 's/^bcg: train: run directory //p' "$TMP/stand$sd.out")
  "$BIN" eval "$dir" --compare-initial --out - > "$TMP/stand$sd.eval" 2>&1 ||
    { echo "FAIL: stand seed $sd: bcg eval failed: $(tail -1 "$TMP/stand$sd.eval")" > "$TMP/stand$sd.res"; return; }
  # the trained policy's rows are the last ones
  rb=$(grep '^bcg ' "$TMP/stand$sd.eval" | tail -1)
  rm=$(grep '^mujoco ' "$TMP/stand$sd.eval" | tail -1)
  fb=$(echo "$rb" | awk '{ split($2, f, "/"); print f[1] }')
  fm=$(echo "$rm" | awk '{ split($2, f, "/"); print f[1] }')
  eb=$(echo "$rb" | awk '{ print $15 }')
  em=$(echo "$rm" | awk '{ print $15 }')
  what="falls $fb/5 and $fm/5, E_fixed $eb / $em cm (bcg / MuJoCo)"
  if grep -q '^verdict.*clearly better than' "$TMP/stand$sd.eval" && [ "$fb" -le "$STAND_FALLS" ] &&
    [ "$fm" -le "$STAND_FALLS" ] && awk -v a="$eb" -v b="$em" -v t="$STAND_EFIXED" 'BEGIN { exit !(a <= t && b <= t) }'; then
    echo "PASS: stand seed $sd: $what" > "$TMP/stand$sd.res"
  else
    echo "FAIL: stand seed $sd: $what (max $STAND_FALLS falls, $STAND_EFIXED cm, MuJoCo clearly better)" > "$TMP/stand$sd.res"
  fi
}
if [ -z "${SKIP_STAND:-}" ]; then
  echo "check_learning: stand (configs/ladder/stand_shac_bcg.ini, $STAND_ITERS iterations, 1 thread), seeds $STAND_SEEDS, $STAND_JOBS at a time"
  n=0
  for sd in $STAND_SEEDS; do
    stand_one "$sd" &
    n=$((n + 1))
    [ $((n % STAND_JOBS)) = 0 ] && wait
  done
  wait
  for sd in $STAND_SEEDS; do
    cat "$TMP/stand$sd.res"
    grep -q '^PASS' "$TMP/stand$sd.res" || ok=0
  done
fi
[ $ok = 1 ]
