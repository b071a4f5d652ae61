// CPU attention kernels (TBB: prefill over sequences × query heads, decode over sequences × kv
// heads). Layouts, grouped-query attention and semantics: kernels/attention_args.h; the cache
// writes that come before them: kernels/cpu/kv_cache.h. A heads count that is not a multiple of
// kv_heads throws offgen::Error. Both ignore the GPU-only scratch fields of their args.
#pragma once

#include "kernels/attention_args.h"

namespace offgen::kernels::cpu {

// Causal attention with a padding mask: real query i of a sequence attends to real keys j <= i.
void prefill_attention(const kernels::PrefillAttentionArgs& args);

// One query per sequence over its cached slots (the new token was appended first, so it attends
// to itself). A sequence with slot_count 0 gets zeros.
void decode_attention(const kernels::DecodeAttentionArgs& args);

}  // namespace offgen::kernels::cpu
