#!/bin/sh
# tools/fetch_mujoco.sh DIR - put MuJoCo's C library and headers under DIR
# (DIR/include/mujoco/*.h, DIR/lib/libmujoco.so.VERSION, DIR/LICENSE).
#
# bcg compiles MJCF files and runs its transfer evaluations with MuJoCo 3
# (Unitree's G1 and other current robot files need it); Debian 12 packages only
# MuJoCo 2.2.2. DeepMind's `mujoco` wheel on PyPI carries the same libmujoco.so
# and C headers as their release tarballs, so this script downloads one pinned
# wheel with pip (hash checked) and unpacks the C parts; nothing is installed
# into the system or into Python.
#
# Without network: MUJOCO_WHEEL=path/to/the/wheel unpacks a wheel fetched
# elsewhere (the device scripts carry it in build-debs/, see bench/fetch_debs.sh).
set -eu
VERSION=3.17.0
WHEEL=mujoco-$VERSION-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
SHA256=d66928d86a2d1b601bbaa4dc11db50214d17d5301bb8afd84721313b67ff0874
DIR=${1:?usage: tools/fetch_mujoco.sh DIR}

die() { echo "bcg: fetching MuJoCo $VERSION: $*" >&2; exit 1; }
[ "$(uname -m)" = x86_64 ] || die "only the x86_64 Linux wheel is pinned here (this machine is $(uname -m)); \
unpack the mujoco $VERSION wheel for it with MUJOCO_WHEEL=..."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${MUJOCO_WHEEL:-}" ]; then
  [ -f "$MUJOCO_WHEEL" ] || die "MUJOCO_WHEEL=$MUJOCO_WHEEL: no such file"
  whl=$MUJOCO_WHEEL
elif [ -f "build-debs/$WHEEL" ]; then
  whl=build-debs/$WHEEL
else
  command -v python3 >/dev/null || die "python3 not found (make deps installs it)"
  python3 -m pip --version >/dev/null 2>&1 || die "pip not found (make deps installs python3-pip)"
  echo "mujoco==$VERSION --hash=sha256:$SHA256" >"$tmp/req.txt"
  echo "bcg: downloading MuJoCo $VERSION (the mujoco wheel from PyPI, $WHEEL)"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --python-version 3.11 --implementation cp --abi cp311 --require-hashes -r "$tmp/req.txt" -d "$tmp" ||
    die "pip download failed (no network? fetch $WHEEL elsewhere and set MUJOCO_WHEEL=...)"
  whl=$tmp/$WHEEL
fi
sum=$(sha256sum "$whl" | cut -d' ' -f1)
[ "$sum" = "$SHA256" ] || die "$whl: sha256 $sum, expected $SHA256"

if command -v python3 >/dev/null; then python3 -m zipfile -e "$whl" "$tmp/x" || die "$whl: cannot unpack"
elif command -v unzip >/dev/null; then unzip -q "$whl" -d "$tmp/x" || die "$whl: cannot unpack"
else die "neither python3 nor unzip found to unpack $whl"; fi
rm -rf "$DIR.new"
mkdir -p "$DIR.new/lib"
cp -r "$tmp/x/mujoco/include" "$DIR.new/include"
cp "$tmp/x/mujoco/libmujoco.so.$VERSION" "$DIR.new/lib/"
cp "$tmp/x/mujoco-$VERSION.dist-info/licenses/LICENSE" "$DIR.new/LICENSE"
cp "$tmp/x/mujoco-$VERSION.dist-info/licenses/LICENSES_THIRD_PARTY.md" "$DIR.new/"
echo "$VERSION" >"$DIR.new/VERSION"
rm -rf "$DIR"
mv "$DIR.new" "$DIR"
echo "bcg: MuJoCo $VERSION in $DIR"
