// Arguments of layer norm over the last dimension, shared by the reference, the CPU kernel and the
// CUDA kernel.
#pragma once

#include <cstdint>

#include "engine/core/half.h"

namespace offgen::kernels {

// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * gamma + beta, with fp32 statistics (biased
// variance, as torch.nn.LayerNorm) and one rounding to fp16. x and y may alias.
struct LayerNormArgs {
  const Half* x = nullptr;  // [rows, dim]
  // [dim] each; null (layer_norm_elementwise_affine = false) means 1 and 0.
  const Half* gamma = nullptr;
  const Half* beta = nullptr;
  Half* y = nullptr;  // [rows, dim]
  std::int64_t rows = 0;
  int dim = 0;
  float eps = 0.0f;
};

}  // namespace offgen::kernels
