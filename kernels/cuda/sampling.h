// The batched token sampler on the cuda device: one block per row, no sort — top-k by a radix
// select of the k-th largest logit, top-p by a binary search over the fp32 bits of the threshold,
// the draw by a prefix sum over contiguous chunks in id order. Every reduction has a fixed order,
// so a row's pick is deterministic. Semantics: kernels/sampling_args.h.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/sampling_args.h"

namespace offgen::kernels::cuda {

void sample_rows(const SampleRowsArgs& args, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
