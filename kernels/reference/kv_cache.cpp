#include "engine/core/error.h"
#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {
namespace {

// Where one token's k and v rows sit in a qkv row ([(heads + 2 * kv_heads) * head_dim]) and in
// one layer's caches ([batch, kv_heads, capacity, head_dim]).
struct KvLayout {
  int heads;     // query heads: k starts after their q columns
  int kv_heads;  // cache heads
  int head_dim;
  int capacity;
};

KvLayout layout_of(const char* op, int heads, int kv_heads, int head_dim, int capacity) {
  OFFGEN_CHECK(kv_heads > 0 && heads % kv_heads == 0,
               "{}: {} query heads do not split into groups over {} kv heads", op, heads, kv_heads);
  return {heads, kv_heads, head_dim, capacity};
}

// Token `token` of qkv: its k and v rows of kv head c into `slot` of cache (b, c).
void copy_kv(const Half* qkv, std::int64_t token, int b, int c, std::int64_t slot,
             const KvLayout& l, Half* k_cache, Half* v_cache) {
  const std::int64_t stride = std::int64_t{l.heads + 2 * l.kv_heads} * l.head_dim;
  const Half* k = qkv + token * stride + std::int64_t{l.heads + c} * l.head_dim;
  const Half* v = k + std::int64_t{l.kv_heads} * l.head_dim;
  const std::int64_t dst = ((std::int64_t{b} * l.kv_heads + c) * l.capacity + slot) * l.head_dim;
  for (int d = 0; d < l.head_dim; ++d) {
    k_cache[dst + d] = k[d];
    v_cache[dst + d] = v[d];
  }
}

}  // namespace

void store_prefill_kv(const StorePrefillKvArgs& a) {
  if (a.heads <= 0) return;
  const KvLayout l =
      layout_of("store_prefill_kv", a.heads, a.kv_head_count(), a.head_dim, a.capacity);
  for (int b = 0; b < a.batch; ++b) {
    for (int c = 0; c < l.kv_heads; ++c) {
      for (int i = 0; i < a.seq; ++i) {
        const std::int32_t slot = a.token_slot[(std::int64_t{b} * l.kv_heads + c) * a.seq + i];
        if (slot < 0) continue;
        copy_kv(a.qkv, std::int64_t{b} * a.seq + i, b, c, slot, l, a.k_cache, a.v_cache);
      }
    }
  }
}

void append_kv(const AppendKvArgs& a) {
  if (a.heads <= 0) return;
  const KvLayout l = layout_of("append_kv", a.heads, a.kv_head_count(), a.head_dim, a.capacity);
  for (int b = 0; b < a.batch; ++b) {
    for (int c = 0; c < l.kv_heads; ++c) {
      copy_kv(a.qkv, b, b, c, a.write_slot[std::int64_t{b} * l.kv_heads + c], l, a.k_cache,
              a.v_cache);
    }
  }
}

}  // namespace offgen::kernels::reference
