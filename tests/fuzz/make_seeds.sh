#!/bin/sh
# tests/fuzz/make_seeds.sh - remakes the seed corpora of the HDF5 harnesses
# (tests/fuzz/corpus/motion_h5/ and checkpoint/; the others are text files
# made by hand from the repository's configs, models and clips). Run from
# the repository root after `make` (it uses BUILD/bcg, default build/):
# the checkpoints come from one-iteration trainings of
# tests/fuzz/checkpoint_shac.ini and checkpoint_ppo.ini (about a second),
# described by tests/fuzz/make_seeds.c.
set -e
b=${BUILD:-build}
[ -x "$b/bcg" ] || { echo "make_seeds.sh: $b/bcg missing (run make first)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
h5c=$(pkg-config --cflags hdf5 2>/dev/null || echo -I/usr/include/hdf5/serial)
h5l=$(pkg-config --libs hdf5 2>/dev/null || echo -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5)
${CC:-cc} -O1 -D_GNU_SOURCE $h5c -Itests/fuzz -o "$tmp/make_seeds" tests/fuzz/make_seeds.c $h5l
mkdir -p tests/fuzz/corpus/motion_h5 tests/fuzz/corpus/checkpoint
rm -f tests/fuzz/corpus/motion_h5/* tests/fuzz/corpus/checkpoint/*
"$tmp/make_seeds" motion tests/fuzz/corpus/motion_h5
opt=0
for s in shac ppo; do
  "$b/bcg" train "tests/fuzz/checkpoint_$s.ini" run.out_dir="$tmp/runs" >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
  ck=$(ls "$tmp"/runs/fuzz_$s/*/checkpoints/ckpt_*.h5 | tail -n 1)
  d=tests/fuzz/corpus/checkpoint
  # options byte: bit 0 the session, bit 1 seal, bit 2 one iteration after the load
  "$tmp/make_seeds" describe "$ck" "$d/$s.desc" $opt
  "$tmp/make_seeds" describe "$ck" "$d/${s}_iterate.desc" $((opt | 4))
  "$tmp/make_seeds" describe "$ck" "$d/${s}_seal_iterate.desc" $((opt | 6))
  "$tmp/make_seeds" describe "$ck" "$d/${s}_other_session.desc" $((opt ^ 1))
  # the file's bytes, for BCG_FUZZ_H5_RAW=1
  printf "\\$(printf %o $opt)" > "$d/raw_$s.h5"
  cat "$ck" >> "$d/raw_$s.h5"
  opt=1
done
ls tests/fuzz/corpus/motion_h5 tests/fuzz/corpus/checkpoint | wc -l
