// Layer norm over the last dimension, fp32 statistics (two-pass mean / variance), one rounding.
#pragma once

#include <cstdint>

#include "engine/core/half.h"

namespace offgen::kernels::cpu {

// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * gamma + beta. gamma / beta may be null
// (layer_norm_elementwise_affine = false): then 1 and 0. x and y may alias.
void layer_norm(const Half* x, const Half* gamma, const Half* beta, Half* y, std::int64_t rows,
                int dim, float eps);

}  // namespace offgen::kernels::cpu
