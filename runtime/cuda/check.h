//===- check.h - a check around every CUDA and cuBLASLt call -------*- C++ -*-===//
//
// llm.c's habit: every call of the CUDA runtime and cuBLASLt is wrapped; a
// failure is fatal with the call, the file and line, and the library's
// message (no error code is ignored or passed on).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CUDA_CHECK_H
#define SHARDC_RUNTIME_CUDA_CHECK_H

#include "runtime/runtime.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#define CUDA_CHECK(call)                                                       \
  do {                                                                         \
    cudaError_t err_ = (call);                                                 \
    if (err_ != cudaSuccess)                                                   \
      ::shardc::runtime::fatal("%s failed at %s:%d: %s", #call, __FILE__,      \
                               __LINE__, cudaGetErrorString(err_));            \
  } while (0)

#define CUBLAS_CHECK(call)                                                     \
  do {                                                                         \
    cublasStatus_t st_ = (call);                                               \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                          \
      ::shardc::runtime::fatal("%s failed at %s:%d: %s", #call, __FILE__,      \
                               __LINE__, cublasLtGetStatusString(st_));          \
  } while (0)

/// NCCL's errors: one line per rank, "rank R: <call> failed at <file>:<line>:
/// <NCCL's error> (<NCCL's last message>)".
#define NCCL_CHECK(call)                                                       \
  do {                                                                         \
    ncclResult_t nr_ = (call);                                                 \
    if (nr_ != ncclSuccess)                                                    \
      ::shardc::runtime::cuda::ncclFailed(#call, __FILE__, __LINE__, nr_,      \
                                          nullptr);                            \
  } while (0)

namespace shardc::runtime::cuda {
[[noreturn]] void ncclFailed(const char *call, const char *file, int line,
                             ncclResult_t result, ncclComm_t comm);
}

/// After a kernel launch: the launch itself succeeded.
#define CUDA_LAUNCHED() CUDA_CHECK(cudaGetLastError())

#endif // SHARDC_RUNTIME_CUDA_CHECK_H
