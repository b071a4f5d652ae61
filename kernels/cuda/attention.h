// CUDA attention kernels. Layouts and semantics: kernels/attention_args.h and
// kernels/cpu/attention.h; the cache writes that come before them: kernels/cuda/kv_cache.h. The
// optional probability outputs (key_prob_sums at prefill, probs at decode) are computed in the
// same pass only when the pointer is non-null.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/attention_args.h"

namespace offgen::kernels::cuda {

// With key_prob_sums under grouped-query attention (kv_heads < heads), args.key_sum_scratch must
// hold prefill_key_sum_scratch_bytes(batch, heads, kv_heads, seq).
void prefill_attention(const PrefillAttentionArgs& args, cudaStream_t stream);

// The split decode_attention takes for `batch` sequences of `heads` query heads over `capacity`
// slots on the current device (kernels/decode_split.h; its scratch: decode_split_scratch_bytes).
// Plan once per cache shape, not per call.
DecodeSplit plan_decode_attention(int batch, int heads, int capacity);

// args.split must cover args.capacity (plan_decode_attention) and, with several splits or with
// probs under grouped-query attention, bring args.split_scratch of
// decode_split_scratch_bytes(split, batch, heads, head_dim, kv_heads).
void decode_attention(const DecodeAttentionArgs& args, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
