#!/bin/sh
# bench/fetch_debs.sh - run HERE (a Debian/Ubuntu machine with apt and
# network), before a device run: downloads into build-debs/ (ignored by git
# through /build-*/) the Debian packages bcg builds against that the device
# machine's CUDA image may lack: the -dev packages of iniparser, hdf5, cunit
# and openblas, humanoid.xml (libmujoco-samples), and every shared library
# libbcg.so loads that is not part of glibc or gcc. MuJoCo 3 travels as the
# unpacked deps/ folder (make deps puts it there; 8 MB against the wheel's 26).
# bench/device_run.sh unpacks them privately (dpkg-deb -x, never into /) and
# uses only the libraries the device lacks. It also fills build-debs-min/
# with the few of them the device's CUDA image lacks (below). Carry the
# folder with the call:
#   run(command="bash bench/device_run.sh", carry=["build-debs", "deps"])
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
du -sh .
ls
# build-debs-min: what the device's CUDA image lacks (iniparser, CUnit) and
# humanoid.xml (libmujoco-samples), for calls whose other carried folders
# (the G1 data) leave no room for all of build-debs
cd ..
rm -rf build-debs-min && mkdir -p build-debs-min
cp build-debs/libiniparser*.deb build-debs/libcunit*.deb build-debs/libmujoco-samples*.deb build-debs-min/
echo "fetch_debs: build-debs-min: $(ls build-debs-min | tr '\n' ' ')"
