// Parity of the KV-cache writes (store_prefill_kv, append_kv) against the reference: bit for bit,
// and slots not written keep what they held.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/attention_cases.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;

// An eviction policy's prefill layout: each head keeps a random subset of the real tokens in
// random distinct slots (different per head).
std::vector<std::int32_t> random_token_slots(Rng& rng, const std::vector<std::uint8_t>& valid,
                                             int batch, int heads, int seq, int capacity) {
  std::vector<std::int32_t> slots;
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      std::vector<std::int32_t> free(static_cast<std::size_t>(capacity));
      for (int s = 0; s < capacity; ++s) free[std::size_t(s)] = s;
      for (int i = 0; i < seq; ++i) {
        const bool real = valid[std::size_t(b) * seq + i] != 0;
        if (!real || free.empty() || rng.integer(0, 3) == 0) {  // padding, or dropped
          slots.push_back(-1);
          continue;
        }
        const auto pick = std::size_t(rng.integer(0, int(free.size()) - 1));
        slots.push_back(free[pick]);
        free.erase(free.begin() + std::ptrdiff_t(pick));
      }
    }
  }
  return slots;
}

class KvCacheParity : public ParityTest {};

TEST_P(KvCacheParity, StorePrefillKvMatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& c : kPrefillCases) {
    SCOPED_TRACE(describe(c));
    const int hd = c.heads * c.head_dim;
    const auto qkv = rng.halves(std::size_t(c.batch) * c.seq * 3 * hd, -1, 1);
    const auto valid = left_padding(c.seq, c.pads);
    for (const int capacity : {c.seq, c.seq + 3}) {  // exactly full, and with free slots
      const std::size_t size = std::size_t(c.batch) * c.heads * capacity * c.head_dim;
      const auto k_init = rng.halves(size, -1, 1);  // slots not written must stay as they were
      const auto v_init = rng.halves(size, -1, 1);
      Guarded<Half> k(k_init), v(v_init);
      std::vector<Half> k_expected = k_init, v_expected = v_init;
      const auto slots = random_token_slots(rng, valid, c.batch, c.heads, c.seq, capacity);
      kernels::StorePrefillKvArgs args{.qkv = qkv.data(),
                                       .token_slot = slots.data(),
                                       .k_cache = k.data(),
                                       .v_cache = v.data(),
                                       .batch = c.batch,
                                       .seq = c.seq,
                                       .heads = c.heads,
                                       .head_dim = c.head_dim,
                                       .capacity = capacity};
      impl().store_prefill_kv(args);
      args.k_cache = k_expected.data();
      args.v_cache = v_expected.data();
      ref::store_prefill_kv(args);
      EXPECT_TRUE(k.guards_intact());
      EXPECT_TRUE(v.guards_intact());
      EXPECT_TRUE(bitwise_equal(k.values(), k_expected));
      EXPECT_TRUE(bitwise_equal(v.values(), v_expected));
    }
  }
}

TEST_P(KvCacheParity, AppendKvMatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& c : kDecodeCases) {
    SCOPED_TRACE(describe(c));
    const int hd = c.heads * c.head_dim;
    const std::size_t size = std::size_t(c.batch) * c.heads * c.capacity * c.head_dim;
    const auto qkv = rng.halves(std::size_t(c.batch) * 3 * hd, -1, 1);
    std::vector<std::int32_t> slots(std::size_t(c.batch) * c.heads);  // per (sequence, head)
    for (auto& s : slots) s = rng.integer(0, c.capacity - 1);
    slots.back() = c.capacity - 1;
    const auto k_init = rng.halves(size, -1, 1);
    const auto v_init = rng.halves(size, -1, 1);
    Guarded<Half> k(k_init), v(v_init);
    std::vector<Half> k_expected = k_init, v_expected = v_init;
    kernels::AppendKvArgs args{.qkv = qkv.data(),
                               .write_slot = slots.data(),
                               .k_cache = k.data(),
                               .v_cache = v.data(),
                               .batch = c.batch,
                               .heads = c.heads,
                               .head_dim = c.head_dim,
                               .capacity = c.capacity};
    impl().append_kv(args);
    args.k_cache = k_expected.data();
    args.v_cache = v_expected.data();
    ref::append_kv(args);
    EXPECT_TRUE(k.guards_intact());
    EXPECT_TRUE(v.guards_intact());
    EXPECT_TRUE(bitwise_equal(k.values(), k_expected));
    EXPECT_TRUE(bitwise_equal(v.values(), v_expected));
  }
}

INSTANTIATE_TEST_SUITE_P(All, KvCacheParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
