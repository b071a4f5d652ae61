// CUDA gated-MLP activation, out = half(half(silu(gate)) · up). Semantics:
// kernels/gated_mlp_args.h (the CPU's fast_exp, so the output equals the reference's bit for
// bit). Only enqueues on `stream` (and throws offgen::Error on a bad launch).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/gated_mlp_args.h"

namespace offgen::kernels::cuda {

void silu_mul(const SiluMulArgs& args, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
