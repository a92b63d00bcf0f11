/* bcg/real.h - the scalar type and the host/device qualifier.
 *
 * bcg_real is chosen at build time: `make REAL=double` (default) or
 * `make REAL=float`, which defines BCG_REAL_FLOAT. Every translation unit of the
 * core and of every plugin must agree; the loader refuses a plugin whose
 * descriptor reports another sizeof(bcg_real).
 *
 * BCG_HD marks per-environment functions written once for CPU and GPU:
 * `__host__ __device__ static inline` under nvcc, `static inline` under gcc. */
#ifndef BCG_REAL_H
#define BCG_REAL_H

#include <math.h>

#ifdef BCG_REAL_FLOAT
typedef float bcg_real;
#define BCG_REAL_NAME "float"
#define BCG_EPS 1.1920929e-7f
#else
typedef double bcg_real;
#define BCG_REAL_NAME "double"
#define BCG_EPS 2.220446049250313e-16
#endif

#ifdef __CUDACC__
#define BCG_HD __host__ __device__ static inline
#else
#define BCG_HD static inline
#endif

#ifdef __cplusplus
#define BCG_EXTERN_C extern "C"
#define BCG_BEGIN_DECLS extern "C" {
#define BCG_END_DECLS }
#else
#define BCG_EXTERN_C
#define BCG_BEGIN_DECLS
#define BCG_END_DECLS
#endif

#define BCG_EXPORT __attribute__((visibility("default")))

#endif
