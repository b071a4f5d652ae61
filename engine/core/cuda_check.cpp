#include "engine/core/cuda_check.h"

#include "engine/core/error.h"

namespace offgen::detail {

void cuda_failed(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaErrorMemoryAllocation) {
    throw OutOfMemoryError(fmt::format("CUDA out of memory in {} ({}:{})", call, file, line));
  }
  fail("CUDA error {} ({}) in {} at {}:{}", cudaGetErrorName(status), cudaGetErrorString(status),
       call, file, line);
}

void cublas_failed(cublasStatus_t status, const char* call, const char* file, int line) {
  fail("cuBLAS error {} ({}) in {} at {}:{}", cublasLtGetStatusName(status),
       cublasLtGetStatusString(status), call, file, line);
}

void cuda_precondition_failed(const char* what, const char* file, int line) {
  fail("{} at {}:{}", what, file, line);
}

}  // namespace offgen::detail
