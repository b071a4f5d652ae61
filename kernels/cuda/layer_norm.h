// CUDA layer norm. Semantics: kernels/cpu/layer_norm.h (fp32 statistics, one rounding; x and y
// may alias; gamma / beta may be null).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/core/half.h"

namespace offgen::kernels::cuda {

void layer_norm(const Half* x, const Half* gamma, const Half* beta, Half* y, std::int64_t rows,
                int dim, float eps, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
