// Arguments of RMS norm over the last dimension (the LLaMA family's norm), shared by the
// reference, the CPU kernel and the CUDA kernel.
#pragma once

#include <cstdint>

#include "engine/core/half.h"

namespace offgen::kernels {

// y[r, i] = half(gamma[i] * half(x[r, i] * rsqrt(mean_j(x[r, j]^2) + eps))), the statistic in
// fp32: Hugging Face's LlamaRMSNorm on fp16, which rounds the normalized row to fp16 before it
// multiplies by the weight. gamma is never null. x and y may alias.
struct RmsNormArgs {
  const Half* x = nullptr;      // [rows, dim]
  const Half* gamma = nullptr;  // [dim]
  Half* y = nullptr;            // [rows, dim]
  std::int64_t rows = 0;
  int dim = 0;
  float eps = 0.0f;
};

}  // namespace offgen::kernels
