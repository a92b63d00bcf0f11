#!/bin/sh
# bench/fetch_debs.sh - run HERE (a Debian/Ubuntu machine with apt and
# network), before a device run: downloads into build-debs/ (ignored by git
# through /build-*/) the Debian packages bcg builds against that the device
# machine's CUDA image may lack: the -dev packages of iniparser, hdf5, cunit
# and openblas, humanoid.xml (libmujoco-samples), and every shared library
# libbcg.so loads that is not part of glibc or gcc; and the pinned MuJoCo 3
# wheel (tools/fetch_mujoco.sh unpacks it from build-debs/ when it is there).
# bench/device_run.sh unpacks them privately (dpkg-deb -x, never into /) and
# uses only the libraries the device lacks. Carry the folder with the call:
#   run(command="bash bench/device_run.sh", carry=["build-debs"])
set -e
cd "$(dirname "$0")/.."
LIB=${1:-build/libbcg.so}
[ -f "$LIB" ] || { echo "fetch_debs: build $LIB first (make)" >&2; exit 1; }
mkdir -p build-debs
pkgs="libmujoco-samples libiniparser-dev libhdf5-dev libcunit1-dev libcunit1 libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread"
# owners of the shared libraries libbcg.so (and the test programs) load
for so in $(ldd "$LIB" | awk '$3 ~ /^\// {print $3}'); do
  real=$(readlink -f "$so")
  p=$(dpkg -S "$real" 2>/dev/null | head -n1 | cut -d: -f1) || true
  [ -z "$p" ] && p=$(dpkg -S "$so" 2>/dev/null | head -n1 | cut -d: -f1) || true
  case "$p" in
    ""|libc6|libmujoco*|libstdc++6|libgcc-s1|libgomp1|libcrypt1) ;;  # glibc and gcc: the device has its own
    *) pkgs="$pkgs $p" ;;
  esac
done
pkgs=$(echo $pkgs | tr ' ' '\n' | sort -u | tr '\n' ' ')
echo "fetch_debs: $pkgs"
cd build-debs
rm -f ./*.deb
apt-get download $pkgs
cd ..
w=$(sed -n 's/^WHEEL=//p' tools/fetch_mujoco.sh | sed "s/\$VERSION/$(sed -n 's/^VERSION=//p' tools/fetch_mujoco.sh)/")
python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
  --python-version 3.11 --implementation cp --abi cp311 \
  "mujoco==$(sed -n 's/^VERSION=//p' tools/fetch_mujoco.sh)" -d build-debs
[ -f "build-debs/$w" ] || { echo "fetch_debs: $w not downloaded" >&2; exit 1; }
cd build-debs
du -sh .
ls
