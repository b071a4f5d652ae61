// CPU KV-cache writes: each kept token's k and v head rows are one memcpy each into their slot.
#include "kernels/cpu/kv_cache.h"

#include <tbb/parallel_for.h>

#include <cstring>

#include "engine/core/error.h"

namespace offgen::kernels::cpu {
namespace {

// Copies head h of one token's k and v into `slot` of that (sequence, head) cache.
void write_head(const Half* token_qkv, int b, int h, int slot, int heads, int head_dim,
                Half* k_cache, Half* v_cache, int capacity) {
  const std::int64_t hd = std::int64_t{heads} * head_dim;
  const auto bytes = static_cast<std::size_t>(head_dim) * sizeof(Half);
  const std::int64_t dst = ((std::int64_t{b} * heads + h) * capacity + slot) * head_dim;
  std::memcpy(k_cache + dst, token_qkv + hd + std::int64_t{h} * head_dim, bytes);
  std::memcpy(v_cache + dst, token_qkv + 2 * hd + std::int64_t{h} * head_dim, bytes);
}

}  // namespace

void store_prefill_kv(const StorePrefillKvArgs& a) {
  const std::int64_t stride = 3 * std::int64_t{a.heads} * a.head_dim;
  tbb::parallel_for(0, a.batch * a.heads, [&](int bh) {
    const int b = bh / a.heads;
    const int h = bh % a.heads;
    const std::int32_t* slots = a.token_slot + std::int64_t{bh} * a.seq;
    for (int i = 0; i < a.seq; ++i) {
      if (slots[i] < 0) continue;
      OFFGEN_CHECK(slots[i] < a.capacity,
                   "store_prefill_kv: slot {} of sequence {} head {} is outside the capacity {}",
                   slots[i], b, h, a.capacity);
      write_head(a.qkv + (std::int64_t{b} * a.seq + i) * stride, b, h, slots[i], a.heads,
                 a.head_dim, a.k_cache, a.v_cache, a.capacity);
    }
  });
}

void append_kv(const AppendKvArgs& a) {
  const std::int64_t stride = 3 * std::int64_t{a.heads} * a.head_dim;
  for (int b = 0; b < a.batch; ++b) {
    for (int h = 0; h < a.heads; ++h) {
      const std::int32_t slot = a.write_slot[b * a.heads + h];
      OFFGEN_CHECK(slot >= 0 && slot < a.capacity,
                   "append_kv: slot {} of sequence {} head {} is outside the cache capacity {}",
                   slot, b, h, a.capacity);
      write_head(a.qkv + b * stride, b, h, slot, a.heads, a.head_dim, a.k_cache, a.v_cache,
                 a.capacity);
    }
  }
}

}  // namespace offgen::kernels::cpu
