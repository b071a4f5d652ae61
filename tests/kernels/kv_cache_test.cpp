// Parity of the KV-cache writes (store_prefill_kv, append_kv) against the reference: bit for bit,
// and slots not written keep what they held; under grouped-query attention the writes are per kv
// head.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "kernels/reference/reference.h"
#include "tests/kernels/attention_cases.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;

// An eviction policy's prefill layout: each (kv) head keeps a random subset of the real tokens in
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
    const auto qkv = rng.halves(std::size_t(c.batch) * c.seq * c.qkv_width(), -1, 1);
    const auto valid = left_padding(c.seq, c.pads);
    for (const int capacity : {c.seq, c.seq + 3}) {  // exactly full, and with free slots
      const std::size_t size = std::size_t(c.batch) * c.kv() * capacity * c.head_dim;
      const auto k_init = rng.halves(size, -1, 1);  // slots not written must stay as they were
      const auto v_init = rng.halves(size, -1, 1);
      Guarded<Half> k(k_init), v(v_init);
      std::vector<Half> k_expected = k_init, v_expected = v_init;
      const auto slots = random_token_slots(rng, valid, c.batch, c.kv(), c.seq, capacity);
      kernels::StorePrefillKvArgs args{.qkv = qkv.data(),
                                       .token_slot = slots.data(),
                                       .k_cache = k.data(),
                                       .v_cache = v.data(),
                                       .batch = c.batch,
                                       .seq = c.seq,
                                       .heads = c.heads,
                                       .head_dim = c.head_dim,
                                       .capacity = capacity,
                                       .kv_heads = c.kv_heads};
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
    const std::size_t size = std::size_t(c.batch) * c.kv() * c.capacity * c.head_dim;
    const auto qkv = rng.halves(std::size_t(c.batch) * c.qkv_width(), -1, 1);
    std::vector<std::int32_t> slots(std::size_t(c.batch) * c.kv());  // per (sequence, kv head)
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
                               .capacity = c.capacity,
                               .kv_heads = c.kv_heads};
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

// Under grouped-query attention, by hand: kv head c's cache row gets the token's k and v columns of
// kv head c — (heads + c) · head_dim and (heads + kv_heads + c) · head_dim — never a query head's.
TEST_P(KvCacheParity, GroupedQueryWritesEachKvHeadsColumns) {
  constexpr int kHeads = 4, kKvHeads = 2, kDim = 8, kCapacity = 3;
  constexpr int kWidth = (kHeads + 2 * kKvHeads) * kDim;
  std::vector<Half> qkv(kWidth);  // one token, element e holding e
  for (int e = 0; e < kWidth; ++e) qkv[std::size_t(e)] = float_to_half(float(e));
  const std::vector<std::int32_t> write_slot = {2, 0};  // kv head 0 -> slot 2, kv head 1 -> slot 0
  const std::size_t size = std::size_t(kKvHeads) * kCapacity * kDim;
  Guarded<Half> k(size, Half{}), v(size, Half{});
  impl().append_kv({.qkv = qkv.data(),
                    .write_slot = write_slot.data(),
                    .k_cache = k.data(),
                    .v_cache = v.data(),
                    .batch = 1,
                    .heads = kHeads,
                    .head_dim = kDim,
                    .capacity = kCapacity,
                    .kv_heads = kKvHeads});
  std::vector<Half> k_expected(size, Half{}), v_expected(size, Half{});
  for (int d = 0; d < kDim; ++d) {
    k_expected[std::size_t(0 * kCapacity + 2) * kDim + d] = float_to_half(float(32 + d));
    k_expected[std::size_t(1 * kCapacity + 0) * kDim + d] = float_to_half(float(40 + d));
    v_expected[std::size_t(0 * kCapacity + 2) * kDim + d] = float_to_half(float(48 + d));
    v_expected[std::size_t(1 * kCapacity + 0) * kDim + d] = float_to_half(float(56 + d));
  }
  EXPECT_TRUE(k.guards_intact());
  EXPECT_TRUE(v.guards_intact());
  EXPECT_TRUE(bitwise_equal(k.values(), k_expected));
  EXPECT_TRUE(bitwise_equal(v.values(), v_expected));

  // The prefill store of the same token through token_slot [batch, kv_heads, seq] agrees.
  Guarded<Half> k2(size, Half{}), v2(size, Half{});
  impl().store_prefill_kv({.qkv = qkv.data(),
                           .token_slot = write_slot.data(),
                           .k_cache = k2.data(),
                           .v_cache = v2.data(),
                           .batch = 1,
                           .seq = 1,
                           .heads = kHeads,
                           .head_dim = kDim,
                           .capacity = kCapacity,
                           .kv_heads = kKvHeads});
  EXPECT_TRUE(bitwise_equal(k2.values(), k_expected));
  EXPECT_TRUE(bitwise_equal(v2.values(), v_expected));
}

// Query heads that do not split into whole groups are a caller bug the kernels refuse.
TEST_P(KvCacheParity, RejectsPartialGroups) {
  constexpr int kHeads = 6, kKvHeads = 4, kDim = 8, kCapacity = 2;
  const std::vector<Half> qkv(std::size_t(kHeads + 2 * kKvHeads) * kDim, Half{});
  const std::vector<std::int32_t> slots(kKvHeads, 0);
  std::vector<Half> k(std::size_t(kKvHeads) * kCapacity * kDim), v(k.size());
  const kernels::AppendKvArgs append{.qkv = qkv.data(),
                                     .write_slot = slots.data(),
                                     .k_cache = k.data(),
                                     .v_cache = v.data(),
                                     .batch = 1,
                                     .heads = kHeads,
                                     .head_dim = kDim,
                                     .capacity = kCapacity,
                                     .kv_heads = kKvHeads};
  EXPECT_THROW(impl().append_kv(append), Error);
  EXPECT_THROW(ref::append_kv(append), Error);
  const kernels::StorePrefillKvArgs store{.qkv = qkv.data(),
                                          .token_slot = slots.data(),
                                          .k_cache = k.data(),
                                          .v_cache = v.data(),
                                          .batch = 1,
                                          .seq = 1,
                                          .heads = kHeads,
                                          .head_dim = kDim,
                                          .capacity = kCapacity,
                                          .kv_heads = kKvHeads};
  EXPECT_THROW(impl().store_prefill_kv(store), Error);
  EXPECT_THROW(ref::store_prefill_kv(store), Error);
}

INSTANTIATE_TEST_SUITE_P(All, KvCacheParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
