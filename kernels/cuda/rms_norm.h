// CUDA RMS norm. Semantics: kernels/rms_norm_args.h (the header's fixed-order fp32 sum of
// squares, so the output equals the reference's bit for bit; x and y may alias). Only enqueues on
// `stream` (and throws offgen::Error on a bad launch).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/rms_norm_args.h"

namespace offgen::kernels::cuda {

void rms_norm(const RmsNormArgs& args, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
