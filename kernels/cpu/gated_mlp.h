// The gated MLP's activation, out = half(half(silu(gate)) · up) (semantics:
// kernels/gated_mlp_args.h). Equals the reference bit for bit: the same fast_exp, built without
// FMA contraction in every ISA clone.
#pragma once

#include "kernels/gated_mlp_args.h"

namespace offgen::kernels::cpu {

void silu_mul(const SiluMulArgs& args);

}  // namespace offgen::kernels::cpu
