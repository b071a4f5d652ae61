// Rotary position embedding in place on the q and k heads of the fused QKV (semantics:
// kernels/rotary_args.h). Equals the reference bit for bit: the same libm cosf / sinf, each
// product and sum rounded to fp16 as the header says.
#pragma once

#include "kernels/rotary_args.h"

namespace offgen::kernels::cpu {

void rotary(const RotaryArgs& args);

}  // namespace offgen::kernels::cpu
