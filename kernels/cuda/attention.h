// CUDA attention kernels and KV-cache writes. Layouts and semantics: kernels/attention_args.h and
// kernels/cpu/attention.h. The optional probability outputs (key_prob_sums at prefill, probs at
// decode) are computed in the same pass only when the pointer is non-null.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/core/half.h"
#include "kernels/attention_args.h"

namespace offgen::kernels::cuda {

void prefill_attention(const PrefillAttentionArgs& args, cudaStream_t stream);

void store_prefill_kv(const Half* qkv, const std::int32_t* token_slot, int batch, int seq,
                      int heads, int head_dim, Half* k_cache, Half* v_cache, int capacity,
                      cudaStream_t stream);

void append_kv(const Half* qkv, const std::int32_t* write_slot, int batch, int heads, int head_dim,
               Half* k_cache, Half* v_cache, int capacity, cudaStream_t stream);

void decode_attention(const DecodeAttentionArgs& args, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
