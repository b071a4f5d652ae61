// Multi-head attention over the fused QKV projection output, and the KV cache it reads and writes,
// with grouped-query attention (GQA): `kv_heads` key / value heads shared by `heads` query heads.
//
// Layouts (all row-major), with H = heads, KV = kv_heads (0 in the args means KV = H: plain
// multi-head attention, today's OPT layout) and D = head_dim:
//   qkv      [tokens, (H + 2 * KV) * D]: q heads in columns [0, H·D), k heads in [H·D, H·D + KV·D),
//            v heads after; head h occupies [h·D, (h+1)·D) inside each of the three. q is NOT
//            pre-scaled: the kernel multiplies q·k by `scale` (OPT: head_dim^-0.5) in fp32.
//   out      [tokens, H * D]
//   k_cache, v_cache  [batch, KV, capacity, D] — one layer. Slot order carries no meaning (OPT adds
//            positions at the embedding, LLaMA rotates q and k before the cache), so policies may
//            overwrite any slot in place.
// H must be a multiple of KV (callers guarantee it; every implementation checks it on the host
// and throws offgen::Error otherwise). Query head h attends with kv head h / (H / KV): the group of
// kv head c is query heads [c·G, (c+1)·G), G = H / KV. Softmax is fp32 with the row max subtracted;
// p·v accumulates in fp32; one rounding to fp16.
//
// The probabilities eviction policies consume are per kv head (the cache's unit): the fp32 sum,
// over the group's query heads in ascending order, of each query head's own probabilities. With
// KV = H that is each head's own, exactly as without GQA.
#pragma once

#include <cstdint>

#include "engine/core/half.h"
#include "kernels/decode_split.h"
#include "kernels/prefill_math.h"

namespace offgen::kernels {

struct PrefillAttentionArgs {
  const Half* qkv = nullptr;            // [batch * seq, (heads + 2 * kv_heads) * head_dim]
  const std::uint8_t* valid = nullptr;  // [batch * seq]: 1 = real token, 0 = left padding
  Half* out = nullptr;                  // [batch * seq, heads * head_dim]; padding rows -> 0
  // Optional (null = not wanted): [batch, kv_heads, seq]. For one query head, entry j is the sum
  // over the real queries i >= j of its softmax probability on key j (padding keys: 0); the kv
  // head's entry is the fp32 sum of that over its group's query heads, in ascending head order.
  // What H2O-like policies score prompts with.
  float* key_prob_sums = nullptr;
  int batch = 0;
  int seq = 0;
  int heads = 0;  // query heads
  int head_dim = 0;
  float scale = 1.0f;
  // Which queries key_prob_sums sums over: 0 = all; N > 0 = only the last N rows, i >= seq - N
  // (prompts are left-padded, so these are each sequence's last N real tokens, or all of a shorter
  // one's) — tova scores the prompt by its last query, snapkv by its observation window.
  int key_sum_queries = 0;
  // Key / value heads; 0 = heads (multi-head attention).
  int kv_heads = 0;
  // The GPU kernel's per-query-head key-sum rows when key_prob_sums is wanted and kv_heads <
  // heads: device memory of prefill_key_sum_scratch_bytes(...) bytes (null otherwise). The cpu
  // kernels ignore it.
  float* key_sum_scratch = nullptr;
  // bf16: the cpu kernel's q·k and p·v over bf16 operands where the CPU has AVX512-BF16 (AMX's
  // tile unit where it has that; kernels/prefill_math.h); the reference and the CUDA kernel are
  // exact either way.
  PrefillMath prefill_math = PrefillMath::fp32;

  constexpr int kv_head_count() const { return kv_heads > 0 ? kv_heads : heads; }
};

// Bytes of PrefillAttentionArgs::key_sum_scratch: one fp32 row of seq per (sequence, query head)
// under GQA (kv_heads in (0, heads)); 0 for multi-head attention, whose rows are the output's.
inline std::uint64_t prefill_key_sum_scratch_bytes(int batch, int heads, int kv_heads, int seq) {
  if (kv_heads <= 0 || kv_heads >= heads || batch <= 0 || seq <= 0) return 0;
  return static_cast<std::uint64_t>(batch) * static_cast<std::uint64_t>(heads) *
         static_cast<std::uint64_t>(seq) * sizeof(float);
}

struct DecodeAttentionArgs {
  const Half* qkv = nullptr;      // [batch, (heads + 2 * kv_heads) * head_dim]; only q is read
  const Half* k_cache = nullptr;  // [batch, kv_heads, capacity, head_dim]
  const Half* v_cache = nullptr;
  const std::int32_t* slot_count = nullptr;  // [batch]: attend over slots [0, slot_count[b])
  Half* out = nullptr;                       // [batch, heads * head_dim]
  // Optional: [batch, kv_heads, capacity]; the fp32 sum over the kv head's group of query heads,
  // in ascending order, of each one's softmax row (slots >= slot_count[b] written as 0).
  float* probs = nullptr;
  int batch = 0;
  int heads = 0;  // query heads
  int head_dim = 0;
  int capacity = 0;
  float scale = 1.0f;
  // The GPU kernel's split of each (sequence, query head)'s slots (kernels/decode_split.h),
  // planned by the caller for this batch, query heads and capacity, and its scratch: device memory
  // of decode_split_scratch_bytes(split, batch, heads, head_dim, kv_heads) bytes (null when that
  // is 0). The cpu kernels ignore both.
  DecodeSplit split = {};
  float* split_scratch = nullptr;
  // Key / value heads; 0 = heads (multi-head attention).
  int kv_heads = 0;
  // Optional page selection (kernels/page_selection_args.h): each (sequence, kv head) attends
  // only to the slots < slot_count[b] of its chosen pages — pages [batch, kv_heads,
  // max_selected] ascending, page_count [batch, kv_heads] of them, page_size slots each — as if
  // those slots, in slot order, were the whole cache; probs is 0 at every other slot. Null pages:
  // every slot [0, slot_count[b]).
  const std::int32_t* pages = nullptr;
  const std::int32_t* page_count = nullptr;
  int page_size = 0;
  int max_selected = 0;

  constexpr int kv_head_count() const { return kv_heads > 0 ? kv_heads : heads; }
};

}  // namespace offgen::kernels
