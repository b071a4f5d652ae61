// Arguments of the KV-cache writes, shared by the reference, the CPU kernel and the CUDA kernel:
// each token's k and v head rows, cut from the fused QKV projection output, go into the cache slot
// chosen for them. Layouts of qkv and of one layer's k_cache / v_cache: kernels/attention_args.h.
// Slot order carries no meaning, so a policy may overwrite any slot in place.
#pragma once

#include <cstdint>

#include "engine/core/half.h"

namespace offgen::kernels {

// Prefill: token i of sequence b goes, in head h, to slot token_slot[b, h, i], or nowhere when
// that is -1 (left padding, or dropped by the eviction policy).
struct StorePrefillKvArgs {
  const Half* qkv = nullptr;                 // [batch * seq, 3 * heads * head_dim]
  const std::int32_t* token_slot = nullptr;  // [batch, heads, seq]
  Half* k_cache = nullptr;                   // [batch, heads, capacity, head_dim]
  Half* v_cache = nullptr;
  int batch = 0;
  int seq = 0;
  int heads = 0;
  int head_dim = 0;
  int capacity = 0;
};

// Decode: each sequence's one new token goes, in head h, to slot write_slot[b * heads + h] —
// heads may differ under eviction.
struct AppendKvArgs {
  const Half* qkv = nullptr;                 // [batch, 3 * heads * head_dim]
  const std::int32_t* write_slot = nullptr;  // [batch, heads]
  Half* k_cache = nullptr;                   // [batch, heads, capacity, head_dim]
  Half* v_cache = nullptr;
  int batch = 0;
  int heads = 0;
  int head_dim = 0;
  int capacity = 0;
};

// A slot outside [0, capacity) (other than prefill's -1) is a caller bug: the TBB kernels of
// kernels/cpu throw offgen::Error on it; a CUDA kernel cannot, so it skips the write, the one
// choice that never writes outside the (sequence, head) cache.

}  // namespace offgen::kernels
