// Checked CUDA, cuBLAS and kernel-launch calls: every failure becomes an offgen::Error naming the
// call, the file and line, and CUDA's own description (OutOfMemoryError for an allocation).
//
// Deliberately free of fmt and of engine/core/error.h: nvcc's front end cannot compile fmt's
// C++20 format-string checks, so .cu files include only this, and the throwing lives in
// cuda_check.cpp (library offgen_cuda_check, built with the CUDA toolkit).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

namespace offgen::detail {

[[noreturn]] void cuda_failed(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void cublas_failed(cublasStatus_t status, const char* call, const char* file,
                                int line);
// For argument checks in .cu files: throws offgen::Error("<what> at file:line").
[[noreturn]] void cuda_precondition_failed(const char* what, const char* file, int line);

}  // namespace offgen::detail

// Throws offgen::Error (OutOfMemoryError for cudaErrorMemoryAllocation) unless `expr` succeeds.
#define OFFGEN_CUDA_CHECK(expr)                                                 \
  do {                                                                          \
    const cudaError_t offgen_status_ = (expr);                                  \
    if (offgen_status_ != cudaSuccess) {                                        \
      ::offgen::detail::cuda_failed(offgen_status_, #expr, __FILE__, __LINE__); \
    }                                                                           \
  } while (0)

#define OFFGEN_CUBLAS_CHECK(expr)                                                 \
  do {                                                                            \
    const cublasStatus_t offgen_status_ = (expr);                                 \
    if (offgen_status_ != CUBLAS_STATUS_SUCCESS) {                                \
      ::offgen::detail::cublas_failed(offgen_status_, #expr, __FILE__, __LINE__); \
    }                                                                             \
  } while (0)

// After a <<<...>>> launch: reports a bad configuration (grid, shared memory) at the launch site.
#define OFFGEN_CUDA_CHECK_LAUNCH() OFFGEN_CUDA_CHECK(cudaGetLastError())

// Argument check usable in .cu files: throws offgen::Error with `message` unless `condition`.
#define OFFGEN_CUDA_REQUIRE(condition, message)                                \
  do {                                                                         \
    if (!(condition)) {                                                        \
      ::offgen::detail::cuda_precondition_failed(message, __FILE__, __LINE__); \
    }                                                                          \
  } while (0)
