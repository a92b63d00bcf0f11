# bench/device_deps.sh - sourced by the device scripts: makes
# iniparser, HDF5, CUnit and OpenBLAS available on the device machine (no
# network, no apt) from the Debian packages carried in build-debs/, unpacked
# privately under /tmp/bcgdeps; only what the machine lacks is put on the
# search paths. Expects say() and T0 from the caller. BCG_DEBS names another
# folder of packages (default build-debs), e.g. build-debs-min (the
# iniparser, CUnit and libmujoco-samples packages the CUDA image lacks, made
# by bench/fetch_debs.sh), when build-debs would push the carried files
# past the call's size limit (the G1 data is 27 MB).
D=/tmp/bcgdeps
have_hdr() { echo "#include <$1>" | gcc -E -x c - ${2:-} >/dev/null 2>&1; }
have_lib() { [ "$(gcc -print-file-name=lib$1.so)" != "lib$1.so" ]; }
missing=""
have_hdr iniparser/iniparser.h || missing="$missing iniparser"
have_hdr CUnit/CUnit.h || missing="$missing cunit"
have_hdr hdf5.h "-I/usr/include/hdf5/serial" || missing="$missing hdf5"
have_hdr cblas.h || missing="$missing cblas"
for l in iniparser cunit openblas; do have_lib $l || missing="$missing lib$l"; done
F=${BCG_FORCE_DEBS:-} # set: use every carried package even where the machine has its own (a test of this path)
[ -n "$F" ] && missing="$missing (forced)"
if [ -n "$missing" ]; then
  say "missing here:$missing"
  DEBS=${BCG_DEBS:-build-debs}
  if ! ls $DEBS/*.deb >/dev/null 2>&1; then
    say "FATAL: no $DEBS/*.deb: run 'sh bench/fetch_debs.sh' on the dev machine and carry $DEBS"
    exit 2
  fi
  rm -rf "$D"; mkdir -p "$D/lib-missing" "$D/lib-dev"
  for f in $DEBS/*.deb; do
    if command -v dpkg-deb >/dev/null; then dpkg-deb -x "$f" "$D"
    else t=$(mktemp -d); abs=$(readlink -f "$f"); (cd "$t" && ar x "$abs" && tar -xf data.tar.* -C "$D"); rm -rf "$t"; fi
  done
  # runtime libraries the machine lacks (by soname), and the -l names
  n=0
  while read -r f; do
    b=$(basename "$f")
    if [ -n "$F" ] || ! ldconfig -p | grep -q "^[[:space:]]*$b "; then ln -sf "$f" "$D/lib-missing/$b"; n=$((n + 1)); fi
  done < <(find "$D" \( -type f -o -type l \) -name 'lib*.so.*' | grep -v '/lib-missing/')
  for l in iniparser cunit openblas hdf5; do
    if [ -n "$F" ] || ! have_lib $l; then
      f=$(find "$D/usr" -name "lib$l.so" | grep -v 'lib-dev' | sort | head -n 1)
      [ -n "$f" ] && ln -sf "$f" "$D/lib-dev/lib$l.so"
    fi
  done
  export CPATH="$D/usr/include:$D/usr/include/hdf5/serial:$D/usr/include/x86_64-linux-gnu/openblas-pthread${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$D/lib-dev:$D/lib-missing${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$D/lib-missing${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  say "unpacked $(ls $DEBS/*.deb | wc -l) packages into $D; $n libraries taken from them: $(ls $D/lib-missing | tr '\n' ' ')"
  if [ ! -e /usr/share/mujoco/model/humanoid/humanoid.xml ] && [ -e "$D/usr/share/mujoco/model/humanoid/humanoid.xml" ]; then
    if [ ! -e /usr/share/mujoco/model ] && mkdir -p /usr/share/mujoco 2>/dev/null && ln -s "$D/usr/share/mujoco/model" /usr/share/mujoco/model; then
      say "linked /usr/share/mujoco/model -> $D/usr/share/mujoco/model"
    else
      export BCG_MODEL="$D/usr/share/mujoco/model/humanoid/humanoid.xml"
      say "BCG_MODEL=$BCG_MODEL (suites with the path built in may fail)"
    fi
  fi
  missing=""
    have_hdr iniparser/iniparser.h || missing="$missing iniparser"
  have_hdr CUnit/CUnit.h || missing="$missing cunit"
  have_hdr hdf5.h "-I/usr/include/hdf5/serial" || missing="$missing hdf5"
  have_hdr cblas.h || missing="$missing cblas"
  [ -n "$missing" ] && { say "FATAL: still missing:$missing"; exit 2; }
else
  say "all dependencies present"
fi

