// Arguments of RMS norm over the last dimension (the LLaMA family's norm), shared by the
// reference, the CPU kernel and the CUDA kernel.
#pragma once

#include <cstdint>

#include "engine/core/half.h"

namespace offgen::kernels {

// y[r, i] = half(gamma[i] * half(x[r, i] * rsqrt(mean_j(x[r, j]^2) + eps))), the statistic in
// fp32: Hugging Face's LlamaRMSNorm on fp16, which rounds the normalized row to fp16 before it
// multiplies by the weight. gamma is never null. x and y may alias.
//
// The fp32 sum of squares has one fixed order, so the reference, the CPU kernel and the CUDA
// kernel agree bit for bit: x[r, j]^2 (exact in fp32 for an fp16 x) goes into partial sum j % 32,
// in increasing j; the 32 partials are then halved pairwise (p[k] += p[k + 16] for k < 16, then
// + 8, + 4, + 2, + 1), which is a warp's butterfly on CUDA and 32 fp32 lanes on the CPU. The mean
// is p[0] / dim and rsqrt(m + eps) is 1 / sqrt(m + eps), each step one correctly rounded fp32
// operation (not an approximate rsqrt).
struct RmsNormArgs {
  const Half* x = nullptr;      // [rows, dim]
  const Half* gamma = nullptr;  // [dim]
  Half* y = nullptr;            // [rows, dim]
  std::int64_t rows = 0;
  int dim = 0;
  float eps = 0.0f;
};

}  // namespace offgen::kernels
