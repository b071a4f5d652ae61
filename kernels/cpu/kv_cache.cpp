// CPU KV-cache writes: each kept token's k and v rows of a kv head are one memcpy each into their
// slot.
#include "kernels/cpu/kv_cache.h"

#include <tbb/parallel_for.h>

#include <cstring>

#include "engine/core/error.h"

namespace offgen::kernels::cpu {
namespace {

// Where one token's k and v rows sit in a qkv row ([(heads + 2 * kv_heads) * head_dim]) and in
// one layer's caches ([batch, kv_heads, capacity, head_dim]).
struct KvLayout {
  int heads;     // query heads: k starts after their q columns
  int kv_heads;  // cache heads
  int head_dim;
  int capacity;

  std::int64_t stride() const { return std::int64_t{heads + 2 * kv_heads} * head_dim; }
};

KvLayout layout_of(const char* op, int heads, int kv_heads, int head_dim, int capacity) {
  OFFGEN_CHECK(kv_heads > 0 && heads % kv_heads == 0,
               "{}: {} query heads do not split into groups over {} kv heads", op, heads, kv_heads);
  return {heads, kv_heads, head_dim, capacity};
}

// Copies kv head c of one token's k and v into `slot` of that (sequence, kv head) cache.
void write_head(const Half* token_qkv, int b, int c, int slot, const KvLayout& l, Half* k_cache,
                Half* v_cache) {
  const auto bytes = static_cast<std::size_t>(l.head_dim) * sizeof(Half);
  const Half* k = token_qkv + std::int64_t{l.heads + c} * l.head_dim;
  const Half* v = k + std::int64_t{l.kv_heads} * l.head_dim;
  const std::int64_t dst = ((std::int64_t{b} * l.kv_heads + c) * l.capacity + slot) * l.head_dim;
  std::memcpy(k_cache + dst, k, bytes);
  std::memcpy(v_cache + dst, v, bytes);
}

}  // namespace

void store_prefill_kv(const StorePrefillKvArgs& a) {
  if (a.heads <= 0) return;
  const KvLayout l =
      layout_of("store_prefill_kv", a.heads, a.kv_head_count(), a.head_dim, a.capacity);
  tbb::parallel_for(0, a.batch * l.kv_heads, [&](int bc) {
    const int b = bc / l.kv_heads;
    const int c = bc % l.kv_heads;
    const std::int32_t* slots = a.token_slot + std::int64_t{bc} * a.seq;
    for (int i = 0; i < a.seq; ++i) {
      if (slots[i] < 0) continue;
      OFFGEN_CHECK(slots[i] < a.capacity,
                   "store_prefill_kv: slot {} of sequence {} kv head {} is outside the capacity {}",
                   slots[i], b, c, a.capacity);
      write_head(a.qkv + (std::int64_t{b} * a.seq + i) * l.stride(), b, c, slots[i], l, a.k_cache,
                 a.v_cache);
    }
  });
}

void append_kv(const AppendKvArgs& a) {
  if (a.heads <= 0) return;
  const KvLayout l = layout_of("append_kv", a.heads, a.kv_head_count(), a.head_dim, a.capacity);
  for (int b = 0; b < a.batch; ++b) {
    for (int c = 0; c < l.kv_heads; ++c) {
      const std::int32_t slot = a.write_slot[std::int64_t{b} * l.kv_heads + c];
      OFFGEN_CHECK(slot >= 0 && slot < a.capacity,
                   "append_kv: slot {} of sequence {} kv head {} is outside the cache capacity {}",
                   slot, b, c, a.capacity);
      write_head(a.qkv + b * l.stride(), b, c, slot, l, a.k_cache, a.v_cache);
    }
  }
}

}  // namespace offgen::kernels::cpu
