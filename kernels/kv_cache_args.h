// Arguments of the KV-cache writes, shared by the reference, the CPU kernel and the CUDA kernel:
// each token's k and v head rows, cut from the fused QKV projection output, go into the cache slot
// chosen for them. Layouts of qkv and of one layer's k_cache / v_cache, and grouped-query
// attention (kv_heads): kernels/attention_args.h. Slot order carries no meaning, so a policy may
// overwrite any slot in place.
//
// `heads` is the number of query heads (it fixes where k starts in a qkv row); the cache, the
// slot tables and the writes are per kv head (kv_heads; 0 = heads). heads must be a multiple of
// kv_heads (every implementation checks it on the host and throws offgen::Error otherwise).
#pragma once

#include <cstdint>

#include "engine/core/half.h"

namespace offgen::kernels {

// Prefill: token i of sequence b goes, in kv head c, to slot token_slot[b, c, i], or nowhere when
// that is -1 (left padding, or dropped by the eviction policy).
struct StorePrefillKvArgs {
  const Half* qkv = nullptr;                 // [batch * seq, (heads + 2 * kv_heads) * head_dim]
  const std::int32_t* token_slot = nullptr;  // [batch, kv_heads, seq]
  Half* k_cache = nullptr;                   // [batch, kv_heads, capacity, head_dim]
  Half* v_cache = nullptr;
  int batch = 0;
  int seq = 0;
  int heads = 0;  // query heads
  int head_dim = 0;
  int capacity = 0;
  int kv_heads = 0;  // 0 = heads

  constexpr int kv_head_count() const { return kv_heads > 0 ? kv_heads : heads; }
};

// Decode: each sequence's one new token goes, in kv head c, to slot write_slot[b * kv_heads + c]
// — heads may differ under eviction.
struct AppendKvArgs {
  const Half* qkv = nullptr;                 // [batch, (heads + 2 * kv_heads) * head_dim]
  const std::int32_t* write_slot = nullptr;  // [batch, kv_heads]
  Half* k_cache = nullptr;                   // [batch, kv_heads, capacity, head_dim]
  Half* v_cache = nullptr;
  int batch = 0;
  int heads = 0;  // query heads
  int head_dim = 0;
  int capacity = 0;
  int kv_heads = 0;  // 0 = heads

  constexpr int kv_head_count() const { return kv_heads > 0 ? kv_heads : heads; }
};

// A slot outside [0, capacity) (other than prefill's -1) is a caller bug: the TBB kernels of
// kernels/cpu throw offgen::Error on it; a CUDA kernel cannot, so it skips the write, the one
// choice that never writes outside the (sequence, kv head) cache.

}  // namespace offgen::kernels
