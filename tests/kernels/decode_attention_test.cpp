// Parity of decode attention against the reference, its probability rows summing to 1 (per query
// head; a kv head's row to its group size), decode agreeing with the last prefill row over a cache
// the prefill stored, and grouped-query attention against multi-head attention with the kv heads
// repeated.
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
using kernels::DecodeAttentionArgs;

// The full policy's prefill layout: real token i of a sequence in slot i of every (kv) head.
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
      const std::size_t cache_size = std::size_t(c.batch) * c.kv() * c.capacity * c.head_dim;
      const auto qkv = rng.halves(std::size_t(c.batch) * c.qkv_width(), -1, 1);
      const auto k_cache = rng.halves(cache_size, -1, 1);
      const auto v_cache = rng.halves(cache_size, -1, 1);
      const float scale = attention_scale(c.head_dim);
      const std::size_t probs_size = std::size_t(c.batch) * c.kv() * c.capacity;
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
                               .scale = scale,
                               .kv_heads = c.kv_heads};
      impl().decode_attention(args);
      args.out = expected_out.data();
      args.probs = with_probs ? expected_probs.data() : nullptr;
      ref::decode_attention(args);

      EXPECT_TRUE(out.guards_intact());
      EXPECT_TRUE(all_close(out.values(), expected_out,
                            attention_tolerance(c.head_dim, scale, c.capacity)));
      if (!with_probs) continue;
      EXPECT_TRUE(probs.guards_intact());
      // A kv head's entry is the fp32 sum of its group's G probabilities.
      EXPECT_TRUE(all_close(probs.values(), expected_probs,
                            prob_tolerance(c.head_dim, scale, c.capacity, c.group())));
      const auto p = probs.values();
      for (int b = 0; b < c.batch; ++b) {
        for (int kv = 0; kv < c.kv(); ++kv) {
          const float* row = p.data() + (std::size_t(b) * c.kv() + kv) * c.capacity;
          double total = 0;
          for (int j = 0; j < c.counts[b]; ++j) total += row[j];
          for (int j = c.counts[b]; j < c.capacity; ++j) {
            ASSERT_EQ(row[j], 0.0f) << "slot " << j << " past slot_count of sequence " << b;
          }
          if (c.counts[b] > 0) {  // G softmax rows, each summing to 1
            EXPECT_NEAR(total, c.group(),
                        c.group() * (prob_rel_error(c.head_dim, scale, c.capacity) +
                                     (c.capacity + c.group()) * kFloatEps))
                << "probabilities of sequence " << b << " kv head " << kv;
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
    const auto qkv = rng.halves(std::size_t(c.batch) * c.seq * c.qkv_width(), -1, 1);
    const auto valid = left_padding(c.seq, c.pads);
    const float scale = attention_scale(c.head_dim);
    std::vector<Half> prefill_out(std::size_t(c.batch) * c.seq * hd);
    kernels::PrefillAttentionArgs prefill{qkv.data(), valid.data(), prefill_out.data(),
                                          nullptr,    c.batch,      c.seq,
                                          c.heads,    c.head_dim,   scale};
    prefill.kv_heads = c.kv_heads;
    impl().prefill_attention(prefill);
    const int capacity = c.seq + 2;
    const std::size_t size = std::size_t(c.batch) * c.kv() * capacity * c.head_dim;
    std::vector<Half> k(size), v(size);
    const auto slots = compact_token_slots(valid, c.batch, c.kv(), c.seq);
    impl().store_prefill_kv({.qkv = qkv.data(),
                             .token_slot = slots.data(),
                             .k_cache = k.data(),
                             .v_cache = v.data(),
                             .batch = c.batch,
                             .seq = c.seq,
                             .heads = c.heads,
                             .head_dim = c.head_dim,
                             .capacity = capacity,
                             .kv_heads = c.kv_heads});
    std::vector<Half> last_qkv, expected;
    std::vector<std::int32_t> counts;
    for (int b = 0; b < c.batch; ++b) {
      const auto* row = qkv.data() + (std::size_t(b) * c.seq + c.seq - 1) * c.qkv_width();
      last_qkv.insert(last_qkv.end(), row, row + c.qkv_width());
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
                             .scale = scale,
                             .kv_heads = c.kv_heads});
    EXPECT_TRUE(decoded.guards_intact());
    auto tol = attention_tolerance(c.head_dim, scale, c.seq);
    tol.abs *= 2;  // both sides carry their own error
    tol.rel *= 2;
    EXPECT_TRUE(all_close(decoded.values(), expected, tol));
  }
}

// Runs decode attention with probabilities over caches of `kv_heads` heads; returns out and probs.
struct DecodeResult {
  std::vector<Half> out;
  std::vector<float> probs;
};
template <typename Decode>
DecodeResult run_decode(Decode&& decode, const std::vector<Half>& qkv, const std::vector<Half>& k,
                        const std::vector<Half>& v, const DecodeCase& c, int kv_heads) {
  DecodeResult r{std::vector<Half>(std::size_t(c.batch) * c.heads * c.head_dim),
                 std::vector<float>(std::size_t(c.batch) * kv_heads * c.capacity)};
  decode(DecodeAttentionArgs{.qkv = qkv.data(),
                             .k_cache = k.data(),
                             .v_cache = v.data(),
                             .slot_count = c.counts.data(),
                             .out = r.out.data(),
                             .probs = r.probs.data(),
                             .batch = c.batch,
                             .heads = c.heads,
                             .head_dim = c.head_dim,
                             .capacity = c.capacity,
                             .scale = attention_scale(c.head_dim),
                             .kv_heads = kv_heads});
  return r;
}

// The decode query of each sequence in multi-head layout: q as it is, k and v (unread) repeated.
std::vector<Half> repeat_decode_qkv(const std::vector<Half>& qkv, const DecodeCase& c) {
  return repeat_kv_in_qkv(qkv, std::size_t(c.batch), c.heads, c.kv(), c.head_dim);
}

// The definition of grouped-query attention, checked on the reference by hand-checkable means:
// four query heads over one kv head (multi-query) give exactly what four heads over four copies of
// its cache give, and the kv head's probabilities are the fp32 sum of the four copies' rows, head
// 0 first.
TEST(DecodeAttentionReference, GroupedQueryIsMultiHeadOverRepeatedKv) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const DecodeCase c{2, 4, 8, 6, {6, 3}, 1};
  const std::size_t cache_size = std::size_t(c.batch) * c.kv() * c.capacity * c.head_dim;
  const auto qkv = rng.halves(std::size_t(c.batch) * c.qkv_width(), -1, 1);
  const auto k = rng.halves(cache_size, -1, 1);
  const auto v = rng.halves(cache_size, -1, 1);
  const auto mha_k = repeat_kv_in_cache(k, c.batch, c.heads, c.kv(), c.capacity, c.head_dim);
  const auto mha_v = repeat_kv_in_cache(v, c.batch, c.heads, c.kv(), c.capacity, c.head_dim);
  // Spot-check the repetition: sequence 1's query head 3 reads sequence 1's only kv head.
  const std::size_t rows = std::size_t(c.capacity) * c.head_dim;
  for (std::size_t e = 0; e < rows; ++e)
    ASSERT_EQ(mha_k[(1 * 4 + 3) * rows + e].bits, k[rows + e].bits);
  const auto gqa = run_decode(ref::decode_attention, qkv, k, v, c, c.kv());
  const auto mha =
      run_decode(ref::decode_attention, repeat_decode_qkv(qkv, c), mha_k, mha_v, c, c.heads);
  EXPECT_TRUE(bitwise_equal(gqa.out, mha.out));
  EXPECT_TRUE(all_close(gqa.probs, sum_groups(mha.probs, c.batch, c.heads, c.kv(), c.capacity),
                        {0, 0, "the same fp32 additions in the same order"}));
  for (int b = 0; b < c.batch; ++b) {  // four softmax rows, each summing to 1
    double total = 0;
    for (int j = 0; j < c.capacity; ++j) total += gqa.probs[std::size_t(b) * c.capacity + j];
    EXPECT_NEAR(total, 4.0, 1e-5) << "sequence " << b;
  }
}

// Every implementation computes a query head the same way whether or not its kv head is shared,
// so grouped-query runs equal multi-head runs over the repeated caches exactly, and their
// probabilities the repeated run's rows added in head order.
TEST_P(DecodeAttentionParity, GroupedQueryIsMultiHeadOverRepeatedKv) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& c : kDecodeCases) {
    if (c.kv() == c.heads) continue;
    SCOPED_TRACE(describe(c));
    const std::size_t cache_size = std::size_t(c.batch) * c.kv() * c.capacity * c.head_dim;
    const auto qkv = rng.halves(std::size_t(c.batch) * c.qkv_width(), -1, 1);
    const auto k = rng.halves(cache_size, -1, 1);
    const auto v = rng.halves(cache_size, -1, 1);
    const auto gqa = run_decode(impl().decode_attention, qkv, k, v, c, c.kv());
    const auto mha = run_decode(
        impl().decode_attention, repeat_decode_qkv(qkv, c),
        repeat_kv_in_cache(k, c.batch, c.heads, c.kv(), c.capacity, c.head_dim),
        repeat_kv_in_cache(v, c.batch, c.heads, c.kv(), c.capacity, c.head_dim), c, c.heads);
    EXPECT_TRUE(bitwise_equal(gqa.out, mha.out));
    EXPECT_TRUE(all_close(gqa.probs, sum_groups(mha.probs, c.batch, c.heads, c.kv(), c.capacity),
                          {0, 0, "the same fp32 additions in the same order"}));
  }
}

// Query heads that do not split into whole groups are a caller bug the kernels refuse.
TEST_P(DecodeAttentionParity, RejectsPartialGroups) {
  const DecodeCase c{1, 6, 8, 4, {2}, 4};
  const std::vector<Half> qkv(std::size_t(c.qkv_width()), Half{});
  const std::vector<Half> cache(std::size_t(c.kv()) * c.capacity * c.head_dim, Half{});
  EXPECT_THROW(run_decode(impl().decode_attention, qkv, cache, cache, c, c.kv()), Error);
  EXPECT_THROW(run_decode(ref::decode_attention, qkv, cache, cache, c, c.kv()), Error);
}

// Page selection: attending to chosen pages is attending to a cache that holds only their slots,
// in slot order — bit for bit in the same set — and matches the reference's masked softmax; the
// probabilities of every other slot are 0.
TEST_P(DecodeAttentionParity, ChosenPagesAreACacheOfTheirSlotsAlone) {
  if (!impl().page_select) GTEST_SKIP() << impl().name << " has no page-selection kernels yet";
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& c : kDecodeCases) {
    SCOPED_TRACE(describe(c));
    constexpr int kPage = 8;
    const int max_pages = (c.capacity + kPage - 1) / kPage;
    const int kv = c.kv();
    const std::size_t cache_size = std::size_t(c.batch) * kv * c.capacity * c.head_dim;
    const auto qkv = rng.halves(std::size_t(c.batch) * c.qkv_width(), -1, 1);
    const auto k_cache = rng.halves(cache_size, -1, 1);
    const auto v_cache = rng.halves(cache_size, -1, 1);
    // Per sequence (every kv head the same, so the compact caches below need one count per
    // sequence): a random ascending subset of its pages with the newest one in it.
    std::vector<std::int32_t> pages(std::size_t(c.batch) * kv * max_pages, -1), page_count;
    std::vector<Half> k_compact(cache_size), v_compact(cache_size);
    std::vector<std::int32_t> compact_count(std::size_t(c.batch), 0);
    for (int b = 0; b < c.batch; ++b) {
      const int n = (c.counts[std::size_t(b)] + kPage - 1) / kPage;
      std::vector<std::int32_t> chosen;
      for (int p = 0; p < n; ++p) {
        if (p + 1 == n || rng.integer(0, 2) != 0) chosen.push_back(p);
      }
      for (int h = 0; h < kv; ++h) {
        std::copy(chosen.begin(), chosen.end(),
                  pages.begin() + std::ptrdiff_t((std::size_t(b) * kv + h) * max_pages));
        page_count.push_back(static_cast<std::int32_t>(chosen.size()));
      }
    }
    // The compact caches: the chosen slots, in slot order, from slot 0.
    for (int b = 0; b < c.batch; ++b) {
      for (int h = 0; h < kv; ++h) {
        const std::size_t row = std::size_t(b) * kv + h;
        int slots = 0;
        for (int i = 0; i < page_count[row]; ++i) {
          const int p = pages[row * max_pages + std::size_t(i)];
          for (int s = p * kPage; s < std::min(c.counts[std::size_t(b)], (p + 1) * kPage); ++s) {
            const std::size_t from = (row * c.capacity + std::size_t(s)) * c.head_dim;
            const std::size_t to = (row * c.capacity + std::size_t(slots++)) * c.head_dim;
            std::copy_n(k_cache.begin() + std::ptrdiff_t(from), c.head_dim,
                        k_compact.begin() + std::ptrdiff_t(to));
            std::copy_n(v_cache.begin() + std::ptrdiff_t(from), c.head_dim,
                        v_compact.begin() + std::ptrdiff_t(to));
          }
        }
        compact_count[std::size_t(b)] = slots;
      }
    }
    const std::size_t out_size = std::size_t(c.batch) * c.heads * c.head_dim;
    const std::size_t probs_size = std::size_t(c.batch) * kv * c.capacity;
    std::vector<Half> out(out_size), compact_out(out_size), expected(out_size);
    std::vector<float> probs(probs_size, float_nan()), compact_probs(probs_size);
    DecodeAttentionArgs args{.qkv = qkv.data(),
                             .k_cache = k_cache.data(),
                             .v_cache = v_cache.data(),
                             .slot_count = c.counts.data(),
                             .out = out.data(),
                             .probs = probs.data(),
                             .batch = c.batch,
                             .heads = c.heads,
                             .head_dim = c.head_dim,
                             .capacity = c.capacity,
                             .scale = attention_scale(c.head_dim),
                             .kv_heads = c.kv_heads,
                             .pages = pages.data(),
                             .page_count = page_count.data(),
                             .page_size = kPage,
                             .max_selected = max_pages};
    impl().decode_attention(args);
    DecodeAttentionArgs compact = args;
    compact.k_cache = k_compact.data();
    compact.v_cache = v_compact.data();
    compact.slot_count = compact_count.data();
    compact.out = compact_out.data();
    compact.probs = compact_probs.data();
    compact.pages = nullptr;
    compact.page_count = nullptr;
    impl().decode_attention(compact);
    EXPECT_TRUE(bitwise_equal(out, compact_out));
    args.out = expected.data();
    args.probs = nullptr;
    ref::decode_attention(args);
    EXPECT_TRUE(all_close(out, expected, attention_tolerance(c.head_dim, args.scale, c.capacity)));
    // Chosen slots carry the compact cache's probabilities, in order; the rest are 0.
    for (int b = 0; b < c.batch; ++b) {
      for (int h = 0; h < kv; ++h) {
        const std::size_t row = std::size_t(b) * kv + h;
        int next = 0;
        for (int s = 0; s < c.capacity; ++s) {
          bool chosen = false;
          for (int i = 0; i < page_count[row]; ++i) {
            chosen |= s / kPage == pages[row * max_pages + std::size_t(i)] &&
                      s < c.counts[std::size_t(b)];
          }
          const float want = chosen ? compact_probs[row * c.capacity + std::size_t(next++)] : 0.0f;
          EXPECT_EQ(probs[row * c.capacity + std::size_t(s)], want)
              << "b " << b << " h " << h << " slot " << s;
        }
      }
    }
  }
}

TEST_P(DecodeAttentionParity, RefusesChosenPagesOutOfOrderOrPastTheCache) {
  if (!impl().page_select) GTEST_SKIP() << impl().name << " has no page-selection kernels yet";
  if (!impl().checks_device_values) GTEST_SKIP() << impl().name << " reads page lists on a device";
  const int dim = 16, capacity = 32;
  const std::vector<Half> qkv(3 * dim, float_to_half(0.5f));
  const std::vector<Half> cache(std::size_t(capacity) * dim, float_to_half(0.25f));
  const std::vector<std::int32_t> count = {capacity};
  std::vector<Half> out(dim);
  for (const std::vector<std::int32_t>& pages :
       {std::vector<std::int32_t>{2, 1}, std::vector<std::int32_t>{0, 4}}) {
    const std::vector<std::int32_t> page_count = {2};
    EXPECT_THROW(impl().decode_attention({.qkv = qkv.data(),
                                          .k_cache = cache.data(),
                                          .v_cache = cache.data(),
                                          .slot_count = count.data(),
                                          .out = out.data(),
                                          .batch = 1,
                                          .heads = 1,
                                          .head_dim = dim,
                                          .capacity = capacity,
                                          .scale = 1.0f,
                                          .pages = pages.data(),
                                          .page_count = page_count.data(),
                                          .page_size = 8,
                                          .max_selected = 2}),
                 Error);
  }
}

INSTANTIATE_TEST_SUITE_P(All, DecodeAttentionParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
