#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {
namespace {

// Token `token` of qkv ([tokens, 3 * heads * head_dim]): its k and v rows of head h into `slot` of
// cache (b, h).
void copy_kv(const Half* qkv, std::int64_t token, int b, int h, std::int64_t slot, int heads,
             int head_dim, Half* k_cache, Half* v_cache, int capacity) {
  const std::int64_t hd = std::int64_t{heads} * head_dim;
  const Half* src = qkv + token * 3 * hd + std::int64_t{h} * head_dim;
  const std::int64_t dst = ((std::int64_t{b} * heads + h) * capacity + slot) * head_dim;
  for (int d = 0; d < head_dim; ++d) {
    k_cache[dst + d] = src[hd + d];
    v_cache[dst + d] = src[2 * hd + d];
  }
}

}  // namespace

void store_prefill_kv(const StorePrefillKvArgs& a) {
  for (int b = 0; b < a.batch; ++b) {
    for (int h = 0; h < a.heads; ++h) {
      for (int i = 0; i < a.seq; ++i) {
        const std::int32_t slot = a.token_slot[(std::int64_t{b} * a.heads + h) * a.seq + i];
        if (slot < 0) continue;
        copy_kv(a.qkv, std::int64_t{b} * a.seq + i, b, h, slot, a.heads, a.head_dim, a.k_cache,
                a.v_cache, a.capacity);
      }
    }
  }
}

void append_kv(const AppendKvArgs& a) {
  for (int b = 0; b < a.batch; ++b) {
    for (int h = 0; h < a.heads; ++h) {
      copy_kv(a.qkv, b, b, h, a.write_slot[b * a.heads + h], a.heads, a.head_dim, a.k_cache,
              a.v_cache, a.capacity);
    }
  }
}

}  // namespace offgen::kernels::reference
