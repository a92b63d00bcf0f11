/* bench/emu/include/cublas_v2.h - host stand-in for the cuBLAS calls of
 * core/cuda/nn_cuda.cu (bench/emu/nn_run.sh): cublas{D,S}gemm run as
 * OpenBLAS cblas_{d,s}gemm in column-major order with the same arguments, so
 * the emulation computes what cuBLAS computes (up to summation order on the
 * real device). Not a cuBLAS implementation. */
#pragma once
#include <cblas.h>
#include "cuda_runtime.h"
#ifndef __forceinline__
#define __forceinline__ inline
#endif
typedef struct emu_cublas *cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_INVALID_VALUE = 7 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0 } cublasMath_t;
static inline cublasStatus_t cublasCreate(cublasHandle_t *h) { *h = (cublasHandle_t)malloc(8); return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasDestroy(cublasHandle_t h) { free(h); return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
static inline CBLAS_TRANSPOSE emu_op(cublasOperation_t o) { return o == CUBLAS_OP_T ? CblasTrans : CblasNoTrans; }
/* cuBLAS's checks of the leading dimensions (column-major: lda >= rows of A as stored) */
static inline int emu_gemm_ok(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldc) {
  return m >= 0 && n >= 0 && k >= 0 && lda >= (ta == CUBLAS_OP_N ? (m > 1 ? m : 1) : (k > 1 ? k : 1)) &&
         ldb >= (tb == CUBLAS_OP_N ? (k > 1 ? k : 1) : (n > 1 ? n : 1)) && ldc >= (m > 1 ? m : 1);
}
static inline cublasStatus_t cublasDgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                         const double *alpha, const double *A, int lda, const double *B, int ldb,
                                         const double *beta, double *C, int ldc) {
  if (!emu_gemm_ok(ta, tb, m, n, k, lda, ldb, ldc)) return CUBLAS_STATUS_INVALID_VALUE;
  cblas_dgemm(CblasColMajor, emu_op(ta), emu_op(tb), m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
  return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda, const float *B, int ldb,
                                         const float *beta, float *C, int ldc) {
  if (!emu_gemm_ok(ta, tb, m, n, k, lda, ldb, ldc)) return CUBLAS_STATUS_INVALID_VALUE;
  cblas_sgemm(CblasColMajor, emu_op(ta), emu_op(tb), m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
  return CUBLAS_STATUS_SUCCESS;
}
