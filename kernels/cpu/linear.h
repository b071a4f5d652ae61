// Linear layer y = act(x · Wᵀ + b) and the tied LM head's logits (semantics:
// kernels/linear_args.h): fp16 inputs, fp32 accumulation, bias and activation applied in fp32, one
// rounding to fp16 (logits stay fp32).
#pragma once

#include "kernels/linear_args.h"

namespace offgen::kernels::cpu {

void linear(const LinearArgs& args);
void logits(const LogitsArgs& args);

}  // namespace offgen::kernels::cpu
