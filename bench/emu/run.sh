#!/bin/sh
# bench/emu/run.sh - checks core/cuda/sim_cuda.cu's host logic without a GPU:
# the file is compiled by g++ against a stub cuda_runtime.h (device memory is
# host memory; a kernel launch runs every thread as a loop, blocks in a
# scrambled order) and linked into tests/test_cuda.c together with the contact
# plugins' CPU solves standing in for their CUDA entry points. With plain
# compilation the "GPU" must match bcg_sim bit for bit; with FMA="-mfma
# -ffp-contract=fast" the differences estimate the device's rounding.
#   sh bench/emu/run.sh [double|float]      (builds build-cpu[-float] with CUDA=0 first)
set -e
cd "$(dirname "$0")/../.."
REAL=${1:-double}
B=${EMU_BUILD:-build-cpu}; DEF=""
[ "$REAL" = float ] && { B=${EMU_BUILD:-build-cpu}-float; DEF=-DBCG_REAL_FLOAT; }
make -s CUDA=0 REAL=$REAL BUILD=$B all >/dev/null
T=$B/emu; mkdir -p $T
sed -E 's/([a-z_]+)<<<(grid\(s, n\)), s->block, 0, s->st>>>\(/EMU_LAUNCH(\2, s->block, \1, /' core/cuda/sim_cuda.cu >$T/sim_emu.cpp
echo 'thread_local uint3e blockIdx, blockDim, threadIdx;' >>$T/sim_emu.cpp
g++ -std=c++17 -O2 ${FMA:-} -fopenmp -fPIC -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -DBCG_HAVE_CUDA $DEF \
  -Ibench/emu/include -Icore/include -Icore -c $T/sim_emu.cpp -o $T/sim_emu.o
gcc -std=c11 -O1 -fopenmp -D_GNU_SOURCE -DBCG_HAVE_CUDA $DEF -Icore/include -Itests -c bench/emu/emu_driver.c -o $T/driver.o
gcc -std=c11 -O1 $DEF -c tests/testutil.c -o $T/testutil.o
g++ -o $T/test_cuda_emu $T/driver.o $T/testutil.o $T/sim_emu.o -L$B -lbcg -Wl,-rpath,"$PWD/$B" "$(ls $B/libmujoco.so.* | head -n 1)" -lopenblas \
  -lcunit -ldl -fopenmp -lm
BUILD=$B $T/test_cuda_emu
