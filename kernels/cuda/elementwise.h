// CUDA element-wise ops. Semantics: kernels/cpu/elementwise.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/core/half.h"

namespace offgen::kernels::cuda {

void add_inplace(Half* y, const Half* x, std::int64_t n, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
