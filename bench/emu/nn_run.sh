#!/bin/sh
# bench/emu/nn_run.sh - checks core/cuda/nn_cuda.cu (MLPs on the GPU) without a
# GPU: the file is compiled by g++ against the stub cuda_runtime.h (device
# memory is host memory; a kernel launch runs every thread as a loop, blocks in
# a scrambled order) and cublas_v2.h (cublas{D,S}gemm as OpenBLAS cblas_{d,s}gemm
# in column-major order) and linked into tests/test_nn_cuda.c, whose
# bcg_cuda_nn_* calls then interpose the CUDA=0 library's stubs. The suite
# compares the "device" with core/nn.c's CPU path and prints the worst errors.
# The emulation runs LayerNorm one thread per row (bcg_layernorm itself): it
# has no warps, so the device's warp-per-row kernels are checked on a GPU only
# (bench/device_nn.sh).
#   sh bench/emu/nn_run.sh [double|float]    (builds build-nn-cpu[-float] with CUDA=0 first)
# CHUNK=1000000: one chunk for the batch sums, the CPU's summation order: the
# emulated device must then equal the CPU bit for bit (the GEMM calls are the
# same OpenBLAS calls), but for the ELU, which the CPU evaluates with libmvec's
# vector expm1 where it has it and the device code with expm1 (within 2 ulp).
# FMA="-mfma -ffp-contract=fast" estimates the device's rounding of the kernels.
# STAGE (default 4100 bytes: chunks of 4096 bytes in double, 4100 in float)
# sets the halves of the pinned staging buffer, so every copy of the suite
# runs through several chunks and a partial last one.
set -e
cd "$(dirname "$0")/../.."
REAL=${1:-double}
B=${EMU_BUILD:-build-nn-cpu}; DEF=""
[ "$REAL" = float ] && { B=${EMU_BUILD:-build-nn-cpu}-float; DEF=-DBCG_REAL_FLOAT; }
make -s CUDA=0 REAL=$REAL BUILD=$B $B/libbcg.so >/dev/null
T=$B/emu-nn; mkdir -p $T
cp core/cuda/nn_cuda.cu $T/nn_emu.cpp
echo 'thread_local uint3e blockIdx, blockDim, threadIdx;' >>$T/nn_emu.cpp
g++ -std=c++17 -O2 ${FMA:-} ${CHUNK:+-DBCG_NN_CUDA_CHUNK=$CHUNK} -DBCG_NN_CUDA_STAGE=${STAGE:-4100} -fPIC -Wall -Wextra -Wno-unused-parameter \
  -D_GNU_SOURCE -DBCG_HAVE_CUDA $DEF -Ibench/emu/include -Icore/include -Icore -c $T/nn_emu.cpp -o $T/nn_emu.o
gcc -std=c11 -O1 -D_GNU_SOURCE $DEF -Icore/include -Itests -c tests/test_nn_cuda.c -o $T/test.o
gcc -std=c11 -O1 $DEF -c tests/testutil.c -o $T/testutil.o
g++ -o $T/test_nn_cuda_emu $T/test.o $T/testutil.o $T/nn_emu.o -L$B -lbcg -Wl,-rpath,"$PWD/$B" -lopenblas \
  -lcunit -lpthread -fopenmp -lm
BUILD=$B $T/test_nn_cuda_emu
