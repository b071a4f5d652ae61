// Linear layer y = act(x · Wᵀ + b) with Hugging Face's weight layout W[n, k] (out × in).
// fp16 inputs, fp32 accumulation, bias and activation applied in fp32, one rounding to fp16.
#pragma once

#include <cstdint>

#include "engine/core/half.h"
#include "kernels/activation.h"

namespace offgen::kernels::cpu {

// x: [m, k], weight: [n, k], bias: [n] or null, y: [m, n]. y must not alias x.
void linear(const Half* x, const Half* weight, const Half* bias, Half* y, std::int64_t m, int n,
            int k, Activation activation);

// Logits of the tied LM head, kept in fp32: out[m, vocab] = x[m, dim] · embedᵀ.
void logits(const Half* x, const Half* embed, float* out, std::int64_t m, int vocab, int dim);

}  // namespace offgen::kernels::cpu
