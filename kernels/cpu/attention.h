// CPU attention kernels (TBB over sequences × heads). Layouts and semantics:
// kernels/attention_args.h.
#pragma once

#include <cstdint>

#include "engine/core/half.h"
#include "kernels/attention_args.h"

namespace offgen::kernels::cpu {

// Causal attention with a padding mask: real query i of a sequence attends to real keys j <= i.
void prefill_attention(const kernels::PrefillAttentionArgs& args);

// Copies each prompt token's k and v into the cache slot chosen for it, per head:
// token_slot[b, h, i] (layout [batch, heads, seq]) is the slot of token i of sequence b in head h,
// or -1 when it is not cached (left padding, or dropped by the eviction policy).
void store_prefill_kv(const Half* qkv, const std::int32_t* token_slot, int batch, int seq,
                      int heads, int head_dim, Half* k_cache, Half* v_cache, int capacity);

// Decode: writes each sequence's new k, v (qkv is [batch, 3·H·D], one token per sequence) into
// slot write_slot[b * heads + h] of each (sequence, head) cache — heads may differ under eviction.
void append_kv(const Half* qkv, const std::int32_t* write_slot, int batch, int heads, int head_dim,
               Half* k_cache, Half* v_cache, int capacity);

// One query per sequence over its cached slots (the new token was appended first, so it attends
// to itself). A sequence with slot_count 0 gets zeros.
void decode_attention(const kernels::DecodeAttentionArgs& args);

}  // namespace offgen::kernels::cpu
