// Element-wise ops on fp16 buffers (fp32 math, one rounding).
#pragma once

#include <cstdint>

#include "engine/core/half.h"

namespace offgen::kernels::cpu {

// y[i] += x[i]: the residual add.
void add_inplace(Half* y, const Half* x, std::int64_t n);

}  // namespace offgen::kernels::cpu
