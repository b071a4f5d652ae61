// CUDA layer norm. Semantics: kernels/layer_norm_args.h (fp32 statistics, one rounding; x and y
// may alias; gamma / beta may be null).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/layer_norm_args.h"

namespace offgen::kernels::cuda {

void layer_norm(const LayerNormArgs& args, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
