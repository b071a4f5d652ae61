// Multi-head attention over the fused QKV projection output, and the KV cache it reads and writes.
//
// Layouts (all row-major):
//   qkv      [tokens, 3 * heads * head_dim]: q in columns [0, H·D), k in [H·D, 2·H·D), v after;
//            head h occupies [h·D, (h+1)·D) inside each of the three. q is NOT pre-scaled: the
//            kernel multiplies q·k by `scale` (OPT: head_dim^-0.5) in fp32.
//   out      [tokens, heads * head_dim]
//   k_cache, v_cache  [batch, heads, capacity, head_dim] — one layer. Slot order carries no meaning
//            (OPT adds positions at the embedding), so policies may overwrite any slot in place.
// Softmax is fp32 with the row max subtracted; p·v accumulates in fp32; one rounding to fp16.
#pragma once

#include <cstdint>

#include "engine/core/half.h"
#include "kernels/decode_split.h"

namespace offgen::kernels {

struct PrefillAttentionArgs {
  const Half* qkv = nullptr;            // [batch * seq, 3 * heads * head_dim]
  const std::uint8_t* valid = nullptr;  // [batch * seq]: 1 = real token, 0 = left padding
  Half* out = nullptr;                  // [batch * seq, heads * head_dim]; padding rows -> 0
  // Optional (null = not wanted): [batch, heads, seq]; entry j = sum over the real queries i >= j
  // of softmax probability on key j (padding keys: 0). What H2O-like policies score prompts with.
  float* key_prob_sums = nullptr;
  int batch = 0;
  int seq = 0;
  int heads = 0;
  int head_dim = 0;
  float scale = 1.0f;
  // Which queries key_prob_sums sums over: 0 = all; N > 0 = only the last N rows, i >= seq - N
  // (prompts are left-padded, so these are each sequence's last N real tokens, or all of a shorter
  // one's) — tova scores the prompt by its last query, snapkv by its observation window.
  int key_sum_queries = 0;
};

struct DecodeAttentionArgs {
  const Half* qkv = nullptr;      // [batch, 3 * heads * head_dim]; only q is read
  const Half* k_cache = nullptr;  // [batch, heads, capacity, head_dim]
  const Half* v_cache = nullptr;
  const std::int32_t* slot_count = nullptr;  // [batch]: attend over slots [0, slot_count[b])
  Half* out = nullptr;                       // [batch, heads * head_dim]
  // Optional: [batch, heads, capacity]; the softmax row (slots >= slot_count[b] written as 0).
  float* probs = nullptr;
  int batch = 0;
  int heads = 0;
  int head_dim = 0;
  int capacity = 0;
  float scale = 1.0f;
  // The GPU kernel's split of each (sequence, head)'s slots (kernels/decode_split.h), planned by
  // the caller for this batch, heads and capacity, and its scratch: device memory of
  // decode_split_scratch_bytes(split, ...) bytes (null with one split). The cpu kernels ignore
  // both.
  DecodeSplit split = {};
  float* split_scratch = nullptr;
};

}  // namespace offgen::kernels
