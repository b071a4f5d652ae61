// CUDA rotary position embedding, in place on the q and k heads of the fused QKV. Semantics:
// kernels/rotary_args.h (fp32 cosf / sinf, so a c_i or s_i may differ from the host's by 1 fp16
// ulp; every other step rounds as the reference does). Only enqueues on `stream` (and throws
// offgen::Error on a bad launch or an odd head_dim).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/rotary_args.h"

namespace offgen::kernels::cuda {

void rotary(const RotaryArgs& args, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
