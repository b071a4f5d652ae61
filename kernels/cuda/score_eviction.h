// CUDA attention-score eviction (h2o, tova, snapkv): the state beside the cache is updated by
// kernels right after the attention that produced the probabilities (no host round trip).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/eviction_args.h"

namespace offgen::kernels::cuda {

// Semantics: kernels/eviction_args.h. One block per (sequence, head) — per sequence for a decode
// whose heads rank together; deterministic. A prefill that ranks by a head mean or pools stages
// its ranking in 2 * seq floats of shared memory.
void score_prefill_keep(const ScorePrefillArgs& args, cudaStream_t stream);
void score_decode_update(const ScoreDecodeArgs& args, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
