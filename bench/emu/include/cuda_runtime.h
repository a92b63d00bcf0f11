/* bench/emu/include/cuda_runtime.h - host stand-in for the few CUDA runtime calls
 * core/cuda/sim_cuda.cu makes (bench/emu/run.sh); not a CUDA implementation */
#pragma once
#include <stdlib.h>
#include <string.h>
#include <functional>
#define __global__
#define __host__
#define __device__
#define __forceinline__ inline
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDefault };
typedef struct emu_stream *cudaStream_t;
typedef struct emu_event { double t; } *cudaEvent_t;
struct uint3e { unsigned x, y, z; };
extern thread_local uint3e blockIdx, blockDim, threadIdx;
struct cudaDeviceProp { char name[256]; int multiProcessorCount; int maxThreadsPerMultiProcessor; size_t totalGlobalMem; int l2CacheSize; int major, minor; };
static inline const char *cudaGetErrorString(cudaError_t e) { return e ? "emu error" : "no error"; }
static inline cudaError_t cudaGetLastError(void) { return 0; }
static inline cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return 0; }
static inline cudaError_t cudaGetDevice(int *d) { *d = 0; return 0; }
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) { memset(p, 0, sizeof *p); strcpy(p->name, "emu"); return 0; }
static inline cudaError_t cudaDriverGetVersion(int *v) { *v = 13000; return 0; }
static inline cudaError_t cudaRuntimeGetVersion(int *v) { *v = 13000; return 0; }
static inline cudaError_t cudaMalloc(void **p, size_t b) { *p = malloc(b ? b : 1); if (*p) memset(*p, 0xAB, b); return *p ? 0 : 2; }
static inline cudaError_t cudaFree(void *p) { free(p); return 0; }
enum { cudaHostAllocDefault = 0 };
static inline cudaError_t cudaHostAlloc(void **p, size_t b, unsigned) { *p = malloc(b ? b : 1); return *p ? 0 : 2; }
static inline cudaError_t cudaFreeHost(void *p) { free(p); return 0; }
enum { cudaHostRegisterDefault = 0 };
static inline cudaError_t cudaHostRegister(void *, size_t, unsigned) { return 0; }
static inline cudaError_t cudaHostUnregister(void *) { return 0; }
static inline cudaError_t cudaMemset(void *p, int v, size_t b) { memset(p, v, b); return 0; }
static inline cudaError_t cudaMemsetAsync(void *p, int v, size_t b, cudaStream_t) { memset(p, v, b); return 0; }
static inline cudaError_t cudaMemcpy(void *d, const void *s, size_t b, cudaMemcpyKind) { memcpy(d, s, b); return 0; }
static inline cudaError_t cudaMemcpy2D(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, cudaMemcpyKind) {
  for (size_t r = 0; r < h; r++) memcpy((char *)d + r * dp, (const char *)s + r * sp, w);
  return 0;
}
static inline cudaError_t cudaMemGetInfo(size_t *fr, size_t *tot) { *fr = *tot = (size_t)1 << 34; return 0; }
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t b, cudaMemcpyKind, cudaStream_t) { memcpy(d, s, b); return 0; }
static inline cudaError_t cudaStreamCreate(cudaStream_t *s) { *s = (cudaStream_t)malloc(8); return 0; }
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) { free(s); return 0; }
enum { cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2 };
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { return cudaStreamCreate(s); }
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return 0; }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return 0; }
static inline cudaError_t cudaDeviceSynchronize(void) { return 0; }
static inline cudaError_t cudaEventCreate(cudaEvent_t *e) { *e = (cudaEvent_t)calloc(1, sizeof **e); return 0; }
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { return cudaEventCreate(e); }
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return 0; }
static inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return 0; }
static inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return 0; }
static inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t, cudaEvent_t) { *ms = 0; return 0; }
/* run every thread of the grid, in a scrambled block order */
static inline void emu_run(int g, int b, const std::function<void()> &f) {
  for (int i = 0; i < g; i++) {
    int bi = (int)(((long long)i * 7919) % g); if (g % 7919 == 0) bi = i;
    blockIdx.x = bi; blockDim.x = b;
    for (int t = b - 1; t >= 0; t--) { threadIdx.x = t; f(); }
  }
}
#define EMU_LAUNCH(g, b, K, ...) emu_run((g), (b), [&] { K(__VA_ARGS__); })
struct cudaFuncAttributes { size_t localSizeBytes; };
enum cudaLimit { cudaLimitStackSize };
static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, const void *) { a->localSizeBytes = 1200; return 0; }
static inline cudaError_t cudaDeviceGetLimit(size_t *v, cudaLimit) { *v = 1024; return 0; }
static inline cudaError_t cudaDeviceSetLimit(cudaLimit, size_t) { return 0; }
