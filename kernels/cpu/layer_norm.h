// Layer norm over the last dimension (semantics: kernels/layer_norm_args.h): fp32 statistics
// (two-pass mean / variance), one rounding.
#pragma once

#include "kernels/layer_norm_args.h"

namespace offgen::kernels::cpu {

void layer_norm(const LayerNormArgs& args);

}  // namespace offgen::kernels::cpu
