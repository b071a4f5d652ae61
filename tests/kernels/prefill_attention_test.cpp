// Parity of prefill attention against the reference, of the reference's key sums against the
// spec computed by brute force, and grouped-query attention against multi-head attention with the
// kv heads repeated.
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
using kernels::PrefillAttentionArgs;

// Key sums straight from the spec, in double: independent of reference.cpp. queries: the
// key_sum_queries of the args (0 = every query). Per kv head: the sum over its group's query heads.
std::vector<double> brute_key_sums(const std::vector<Half>& qkv,
                                   const std::vector<std::uint8_t>& valid, const PrefillCase& c,
                                   float scale, int queries) {
  std::vector<double> sums(std::size_t(c.batch) * c.kv() * c.seq, 0.0);
  // Element d of query head h (part 0), or of kv head h's k (part 1), of token i of sequence b.
  auto at = [&](int b, int i, int part, int h, int d) {
    const int column = part == 0 ? h * c.head_dim : (c.heads + h) * c.head_dim;
    return double(half_to_float(qkv[(std::size_t(b) * c.seq + i) * c.qkv_width() + column + d]));
  };
  for (int b = 0; b < c.batch; ++b) {
    for (int h = 0; h < c.heads; ++h) {
      const int kv = h / c.group();
      for (int i = 0; i < c.seq; ++i) {
        if (!valid[b * c.seq + i] || (queries > 0 && i < c.seq - queries)) continue;
        std::vector<double> p(i + 1, 0.0);
        double max = -INFINITY, total = 0;
        for (int j = 0; j <= i; ++j) {
          if (!valid[b * c.seq + j]) continue;
          for (int d = 0; d < c.head_dim; ++d) p[j] += at(b, i, 0, h, d) * at(b, j, 1, kv, d);
          p[j] *= scale;
          max = std::max(max, p[j]);
        }
        for (int j = 0; j <= i; ++j) {
          p[j] = valid[b * c.seq + j] ? std::exp(p[j] - max) : 0.0;
          total += p[j];
        }
        for (int j = 0; j <= i; ++j) sums[(b * c.kv() + kv) * c.seq + j] += p[j] / total;
      }
    }
  }
  return sums;
}

class PrefillAttentionParity : public ParityTest {};

TEST_P(PrefillAttentionParity, MatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  // -1: no key sums; 0: summed over every query; N: over the last N (1: tova, a few: snapkv's
  // window, 40: across a 64-query tile boundary of seq 70 and longer than the shorter prompts).
  for (const auto& c : kPrefillCases) {
    for (const int sum_queries : {-1, 0, 1, 3, 40}) {
      const bool with_sums = sum_queries >= 0;
      SCOPED_TRACE(describe(c) +
                   (with_sums ? " key sums over " + std::to_string(sum_queries) + " queries" : ""));
      const int hd = c.heads * c.head_dim;
      const std::size_t tokens = std::size_t(c.batch) * c.seq;
      const auto qkv = rng.halves(tokens * c.qkv_width(), -1, 1);
      const auto valid = left_padding(c.seq, c.pads);
      const float scale = attention_scale(c.head_dim);
      Guarded<Half> out(tokens * hd, half_nan());
      Guarded<float> sums(std::size_t(c.batch) * c.kv() * c.seq, float_nan());
      std::vector<Half> expected_out(tokens * hd);
      std::vector<float> expected_sums(sums.size());

      PrefillAttentionArgs args{
          qkv.data(), valid.data(), out.data(), with_sums ? sums.data() : nullptr, c.batch, c.seq,
          c.heads,    c.head_dim,   scale};
      args.key_sum_queries = std::max(0, sum_queries);
      args.kv_heads = c.kv_heads;
      impl().prefill_attention(args);
      args.out = expected_out.data();
      args.key_prob_sums = with_sums ? expected_sums.data() : nullptr;
      ref::prefill_attention(args);

      EXPECT_TRUE(out.guards_intact());
      EXPECT_TRUE(
          all_close(out.values(), expected_out, attention_tolerance(c.head_dim, scale, c.seq)));
      const auto actual = out.values();
      for (std::size_t t = 0; t < tokens; ++t) {
        if (valid[t]) continue;
        for (int d = 0; d < hd; ++d) {
          ASSERT_EQ(half_to_float(actual[t * hd + d]), 0.0f) << "padding row " << t;
        }
      }
      if (!with_sums) continue;
      EXPECT_TRUE(sums.guards_intact());
      const auto brute = brute_key_sums(qkv, valid, c, scale, sum_queries);
      const std::vector<float> brute_f(brute.begin(), brute.end());
      EXPECT_TRUE(all_close(expected_sums, brute_f,
                            {0, (c.group() + 1) * kFloatEps,
                             "reference: each query head's double sum rounded to fp32, then the "
                             "group's G of them added in fp32 (G - 1 more roundings), all terms "
                             "positive"}))
          << "reference key sums";
      EXPECT_TRUE(all_close(sums.values(), brute_f,
                            prob_tolerance(c.head_dim, scale, c.seq, c.group() * c.seq)));
    }
  }
}

// Runs prefill attention over `qkv` (c's layout, kv_heads as given) with key sums over every
// query; returns out and key sums.
struct PrefillResult {
  std::vector<Half> out;
  std::vector<float> sums;
};
template <typename Prefill>
PrefillResult run_prefill(Prefill&& prefill, const std::vector<Half>& qkv,
                          const std::vector<std::uint8_t>& valid, const PrefillCase& c,
                          int kv_heads, int key_sum_queries) {
  PrefillResult r{std::vector<Half>(std::size_t(c.batch) * c.seq * c.heads * c.head_dim),
                  std::vector<float>(std::size_t(c.batch) * kv_heads * c.seq)};
  PrefillAttentionArgs args{qkv.data(),    valid.data(), r.out.data(),
                            r.sums.data(), c.batch,      c.seq,
                            c.heads,       c.head_dim,   attention_scale(c.head_dim)};
  args.key_sum_queries = key_sum_queries;
  args.kv_heads = kv_heads;
  prefill(args);
  return r;
}

// The definition of grouped-query attention, checked on the reference by hand-checkable means:
// two query heads over one kv head give exactly what two heads over two copies of that kv head
// give, and the kv head's key sums are the fp32 sum of the two copies' sums, head 0 first.
TEST(PrefillAttentionReference, GroupedQueryIsMultiHeadOverRepeatedKv) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const PrefillCase c{2, 6, 4, 8, {0, 2}, 2};  // heads 0, 1 read kv head 0; heads 2, 3 kv head 1
  const auto qkv = rng.halves(std::size_t(c.batch) * c.seq * c.qkv_width(), -1, 1);
  const auto valid = left_padding(c.seq, c.pads);
  const auto mha_qkv =
      repeat_kv_in_qkv(qkv, std::size_t(c.batch) * c.seq, c.heads, c.kv(), c.head_dim);
  // Spot-check the repetition itself: token 3's k of query head 1 is kv head 0's k.
  const std::size_t hd = std::size_t(c.heads) * c.head_dim;
  for (int d = 0; d < c.head_dim; ++d) {
    ASSERT_EQ(mha_qkv[3 * 3 * hd + hd + c.head_dim + d].bits,
              qkv[3 * std::size_t(c.qkv_width()) + hd + d].bits);
  }
  const auto gqa = run_prefill(ref::prefill_attention, qkv, valid, c, c.kv(), 0);
  const auto mha = run_prefill(ref::prefill_attention, mha_qkv, valid, c, c.heads, 0);
  EXPECT_TRUE(bitwise_equal(gqa.out, mha.out));
  EXPECT_TRUE(all_close(gqa.sums, sum_groups(mha.sums, c.batch, c.heads, c.kv(), c.seq),
                        {0, 0, "the same fp32 additions in the same order"}));
  // Each kv head's sums are those of two heads' softmax rows: they total twice the real queries.
  for (int b = 0; b < c.batch; ++b) {
    for (int kv = 0; kv < c.kv(); ++kv) {
      double total = 0;
      for (int j = 0; j < c.seq; ++j) total += gqa.sums[(std::size_t(b) * c.kv() + kv) * c.seq + j];
      EXPECT_NEAR(total, 2.0 * (c.seq - c.pads[b]), 1e-5) << "sequence " << b << " kv head " << kv;
    }
  }
}

// Every implementation computes a query head the same way whether or not its kv head is shared,
// so grouped-query runs equal multi-head runs over the repeated kv heads exactly, and their key
// sums the repeated run's rows added in head order.
TEST_P(PrefillAttentionParity, GroupedQueryIsMultiHeadOverRepeatedKv) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& c : kPrefillCases) {
    if (c.kv() == c.heads) continue;
    for (const int sum_queries : {0, 3}) {
      SCOPED_TRACE(describe(c) + " key sums over " + std::to_string(sum_queries) + " queries");
      const std::size_t tokens = std::size_t(c.batch) * c.seq;
      const auto qkv = rng.halves(tokens * c.qkv_width(), -1, 1);
      const auto valid = left_padding(c.seq, c.pads);
      const auto mha_qkv = repeat_kv_in_qkv(qkv, tokens, c.heads, c.kv(), c.head_dim);
      const auto gqa = run_prefill(impl().prefill_attention, qkv, valid, c, c.kv(), sum_queries);
      const auto mha =
          run_prefill(impl().prefill_attention, mha_qkv, valid, c, c.heads, sum_queries);
      EXPECT_TRUE(bitwise_equal(gqa.out, mha.out));
      EXPECT_TRUE(all_close(gqa.sums, sum_groups(mha.sums, c.batch, c.heads, c.kv(), c.seq),
                            {0, 0, "the same fp32 additions in the same order"}));
    }
  }
}

// A sequence's attention is the same bits whatever left padding its batch-mates impose: the same
// real tokens after 0, 1, 5, 16 or 19 pad positions give the same outputs and key sums at those
// tokens (a request's result never depends on its batch-mates).
TEST_P(PrefillAttentionParity, LeftPaddingDoesNotChangeARealTokensBits) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int real = 41;  // crosses 16- and 32-key steps
  const PrefillCase alone{1, real, 4, 24, {0}, 2};
  const auto tokens = rng.halves(std::size_t(real) * alone.qkv_width(), -1, 1);
  const auto base =
      run_prefill(impl().prefill_attention, tokens, left_padding(real, {0}), alone, alone.kv(), 0);
  const std::size_t out_width = std::size_t(alone.heads) * alone.head_dim;
  for (const int pad : {1, 5, 16, 19}) {
    SCOPED_TRACE("pad " + std::to_string(pad));
    const PrefillCase padded{1, real + pad, alone.heads, alone.head_dim, {pad}, alone.kv_heads};
    auto qkv = rng.halves(std::size_t(pad) * alone.qkv_width(), -1, 1);  // junk under the mask
    qkv.insert(qkv.end(), tokens.begin(), tokens.end());
    const auto r = run_prefill(impl().prefill_attention, qkv, left_padding(padded.seq, {pad}),
                               padded, padded.kv(), 0);
    EXPECT_TRUE(bitwise_equal(
        std::vector<Half>(r.out.begin() + std::ptrdiff_t(pad * out_width), r.out.end()), base.out));
    for (int kv = 0; kv < alone.kv(); ++kv) {
      for (int j = 0; j < real; ++j) {
        ASSERT_EQ(r.sums[std::size_t(kv) * padded.seq + pad + j],
                  base.sums[std::size_t(kv) * real + j])
            << "kv head " << kv << " key " << j;
      }
    }
  }
}

// Query heads that do not split into whole groups are a caller bug the kernels refuse.
TEST_P(PrefillAttentionParity, RejectsPartialGroups) {
  const PrefillCase c{1, 4, 6, 8, {0}, 4};
  const std::vector<Half> qkv(std::size_t(c.seq) * c.qkv_width(), Half{});
  const auto valid = left_padding(c.seq, c.pads);
  std::vector<Half> out(std::size_t(c.seq) * c.heads * c.head_dim);
  PrefillAttentionArgs args{qkv.data(), valid.data(), out.data(), nullptr, c.batch,
                            c.seq,      c.heads,      c.head_dim, 1.0f};
  args.kv_heads = c.kv_heads;
  EXPECT_THROW(impl().prefill_attention(args), Error);
  EXPECT_THROW(ref::prefill_attention(args), Error);
}

INSTANTIATE_TEST_SUITE_P(All, PrefillAttentionParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
