// RMS norm over the last dimension (semantics: kernels/rms_norm_args.h): the header's fixed-order
// fp32 sum of squares, so the output equals the reference's bit for bit.
#pragma once

#include "kernels/rms_norm_args.h"

namespace offgen::kernels::cpu {

void rms_norm(const RmsNormArgs& args);

}  // namespace offgen::kernels::cpu
