// CPU attention kernels (TBB over sequences × heads). Layouts and semantics:
// kernels/attention_args.h; the cache writes that come before them: kernels/cpu/kv_cache.h.
#pragma once

#include "kernels/attention_args.h"

namespace offgen::kernels::cpu {

// Causal attention with a padding mask: real query i of a sequence attends to real keys j <= i.
void prefill_attention(const kernels::PrefillAttentionArgs& args);

// One query per sequence over its cached slots (the new token was appended first, so it attends
// to itself). A sequence with slot_count 0 gets zeros.
void decode_attention(const kernels::DecodeAttentionArgs& args);

}  // namespace offgen::kernels::cpu
