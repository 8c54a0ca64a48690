/* Shared by the CUDA sources of reference/cuda (compiled as C++ by nvcc): the project's
 * C headers with C linkage, and the CHECK macros that turn CUDA / cuBLAS failures into
 * vstatus errors carrying the expression, the error string and file:line. */
#ifndef VOUCH_REFERENCE_CUDA_CUDA_COMMON_H
#define VOUCH_REFERENCE_CUDA_CUDA_COMMON_H

/* System headers first, so that the extern "C" block below does not wrap C++ overloads. */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

/* Host+device helpers (static functions only). */
#include "common/philox.h"
#include "model/synth_rule.h"

#ifdef __cplusplus
extern "C" {
#endif
#include "common/path.h"
#include "common/trace.h"
#include "common/vstatus.h"
#include "model/config.h"
#include "model/model.h"
#include "common/tensor.h"
#ifdef __cplusplus
}
#endif

/* Returns a V_ERR naming the failed expression and the CUDA error string. */
#define CUDA_CHECK(expr)                                                                         \
  do {                                                                                           \
    cudaError_t cuda_e_ = (expr);                                                                \
    if (cuda_e_ != cudaSuccess)                                                                  \
      return verr_set(__FILE__, __LINE__, "CUDA error at %s:%d: %s: %s (%s)", __FILE__, __LINE__, \
                      #expr, cudaGetErrorString(cuda_e_), cudaGetErrorName(cuda_e_));            \
  } while (0)

/* Same for cuBLAS calls. */
#define CUBLAS_CHECK(expr)                                                                         \
  do {                                                                                             \
    cublasStatus_t cublas_s_ = (expr);                                                             \
    if (cublas_s_ != CUBLAS_STATUS_SUCCESS)                                                        \
      return verr_set(__FILE__, __LINE__, "cuBLAS error at %s:%d: %s: %s", __FILE__, __LINE__, #expr, \
                      cublasGetStatusString(cublas_s_));                                           \
  } while (0)

/* After a kernel launch: reports a bad launch configuration or an earlier async fault. */
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#endif
