// CUDA h2o eviction: the attention-score state beside the cache is updated by kernels right after
// the attention that produced the probabilities (no host round trip).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/eviction_args.h"

namespace offgen::kernels::cuda {

// Semantics: kernels/eviction_args.h. One block per (sequence, head); deterministic.
void h2o_prefill_keep(const H2oPrefillArgs& args, cudaStream_t stream);
void h2o_decode_update(const H2oDecodeArgs& args, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
