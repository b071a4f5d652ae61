// CUDA attention kernels. Layouts and semantics: kernels/attention_args.h and
// kernels/cpu/attention.h; the cache writes that come before them: kernels/cuda/kv_cache.h. The
// optional probability outputs (key_prob_sums at prefill, probs at decode) are computed in the
// same pass only when the pointer is non-null.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/attention_args.h"

namespace offgen::kernels::cuda {

void prefill_attention(const PrefillAttentionArgs& args, cudaStream_t stream);
void decode_attention(const DecodeAttentionArgs& args, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
