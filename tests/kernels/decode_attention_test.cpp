// Parity of decode attention against the reference, its probability rows summing to 1, and decode
// agreeing with the last prefill row over a cache the prefill stored.
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
using kernels::DecodeAttentionArgs;

// The full policy's prefill layout: real token i of a sequence in slot i of every head.
std::vector<std::int32_t> compact_token_slots(const std::vector<std::uint8_t>& valid, int batch,
                                              int heads, int seq) {
  std::vector<std::int32_t> slots;
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      int next = 0;
      for (int i = 0; i < seq; ++i) slots.push_back(valid[std::size_t(b) * seq + i] ? next++ : -1);
    }
  }
  return slots;
}

class DecodeAttentionParity : public ParityTest {};

TEST_P(DecodeAttentionParity, MatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& c : kDecodeCases) {
    for (const bool with_probs : {false, true}) {
      SCOPED_TRACE(describe(c) + (with_probs ? " probs" : ""));
      const int hd = c.heads * c.head_dim;
      const std::size_t cache_size = std::size_t(c.batch) * c.heads * c.capacity * c.head_dim;
      const auto qkv = rng.halves(std::size_t(c.batch) * 3 * hd, -1, 1);
      const auto k_cache = rng.halves(cache_size, -1, 1);
      const auto v_cache = rng.halves(cache_size, -1, 1);
      const float scale = attention_scale(c.head_dim);
      const std::size_t probs_size = std::size_t(c.batch) * c.heads * c.capacity;
      Guarded<Half> out(std::size_t(c.batch) * hd, half_nan());
      Guarded<float> probs(probs_size, float_nan());
      std::vector<Half> expected_out(out.size());
      std::vector<float> expected_probs(probs_size);

      // No split: the cpu kernels ignore it, and the cuda set plans its own
      // (cuda_kernel_sets.cpp).
      DecodeAttentionArgs args{.qkv = qkv.data(),
                               .k_cache = k_cache.data(),
                               .v_cache = v_cache.data(),
                               .slot_count = c.counts.data(),
                               .out = out.data(),
                               .probs = with_probs ? probs.data() : nullptr,
                               .batch = c.batch,
                               .heads = c.heads,
                               .head_dim = c.head_dim,
                               .capacity = c.capacity,
                               .scale = scale};
      impl().decode_attention(args);
      args.out = expected_out.data();
      args.probs = with_probs ? expected_probs.data() : nullptr;
      ref::decode_attention(args);

      EXPECT_TRUE(out.guards_intact());
      EXPECT_TRUE(all_close(out.values(), expected_out,
                            attention_tolerance(c.head_dim, scale, c.capacity)));
      if (!with_probs) continue;
      EXPECT_TRUE(probs.guards_intact());
      EXPECT_TRUE(all_close(probs.values(), expected_probs,
                            prob_tolerance(c.head_dim, scale, c.capacity, 1)));
      const auto p = probs.values();
      for (int b = 0; b < c.batch; ++b) {
        for (int h = 0; h < c.heads; ++h) {
          const float* row = p.data() + (std::size_t(b) * c.heads + h) * c.capacity;
          double total = 0;
          for (int j = 0; j < c.counts[b]; ++j) total += row[j];
          for (int j = c.counts[b]; j < c.capacity; ++j) {
            ASSERT_EQ(row[j], 0.0f) << "slot " << j << " past slot_count of sequence " << b;
          }
          if (c.counts[b] > 0) {
            EXPECT_NEAR(total, 1.0,
                        prob_rel_error(c.head_dim, scale, c.capacity) + c.capacity * kFloatEps)
                << "probabilities of sequence " << b << " head " << h;
          }
        }
      }
    }
  }
}

// The engine's contract between the two attention paths: after store_prefill_kv, decoding the
// last prompt token's query over the cache gives that token's prefill output.
TEST_P(DecodeAttentionParity, DecodeOverStoredPrefillMatchesLastPrefillRow) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& c : kPrefillCases) {
    SCOPED_TRACE(describe(c));
    const int hd = c.heads * c.head_dim;
    const auto qkv = rng.halves(std::size_t(c.batch) * c.seq * 3 * hd, -1, 1);
    const auto valid = left_padding(c.seq, c.pads);
    const float scale = attention_scale(c.head_dim);
    std::vector<Half> prefill_out(std::size_t(c.batch) * c.seq * hd);
    impl().prefill_attention({qkv.data(), valid.data(), prefill_out.data(), nullptr, c.batch, c.seq,
                              c.heads, c.head_dim, scale});
    const int capacity = c.seq + 2;
    const std::size_t size = std::size_t(c.batch) * c.heads * capacity * c.head_dim;
    std::vector<Half> k(size), v(size);
    const auto slots = compact_token_slots(valid, c.batch, c.heads, c.seq);
    impl().store_prefill_kv({.qkv = qkv.data(),
                             .token_slot = slots.data(),
                             .k_cache = k.data(),
                             .v_cache = v.data(),
                             .batch = c.batch,
                             .seq = c.seq,
                             .heads = c.heads,
                             .head_dim = c.head_dim,
                             .capacity = capacity});
    std::vector<Half> last_qkv, expected;
    std::vector<std::int32_t> counts;
    for (int b = 0; b < c.batch; ++b) {
      const auto* row = qkv.data() + (std::size_t(b) * c.seq + c.seq - 1) * 3 * hd;
      last_qkv.insert(last_qkv.end(), row, row + 3 * hd);
      const auto* out = prefill_out.data() + (std::size_t(b) * c.seq + c.seq - 1) * hd;
      expected.insert(expected.end(), out, out + hd);
      counts.push_back(c.seq - c.pads[b]);
    }
    Guarded<Half> decoded(std::size_t(c.batch) * hd, half_nan());
    impl().decode_attention({.qkv = last_qkv.data(),
                             .k_cache = k.data(),
                             .v_cache = v.data(),
                             .slot_count = counts.data(),
                             .out = decoded.data(),
                             .batch = c.batch,
                             .heads = c.heads,
                             .head_dim = c.head_dim,
                             .capacity = capacity,
                             .scale = scale});
    EXPECT_TRUE(decoded.guards_intact());
    auto tol = attention_tolerance(c.head_dim, scale, c.seq);
    tol.abs *= 2;  // both sides carry their own error
    tol.rel *= 2;
    EXPECT_TRUE(all_close(decoded.values(), expected, tol));
  }
}

INSTANTIATE_TEST_SUITE_P(All, DecodeAttentionParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
