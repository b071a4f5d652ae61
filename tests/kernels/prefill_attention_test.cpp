// Parity of prefill attention against the reference, and of the reference's key sums against
// the spec computed by brute force.
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
using kernels::PrefillAttentionArgs;

// Key sums straight from the spec, in double: independent of reference.cpp. queries: the
// key_sum_queries of the args (0 = every query).
std::vector<double> brute_key_sums(const std::vector<Half>& qkv,
                                   const std::vector<std::uint8_t>& valid, const PrefillCase& c,
                                   float scale, int queries) {
  const int hd = c.heads * c.head_dim;
  std::vector<double> sums(std::size_t(c.batch) * c.heads * c.seq, 0.0);
  auto at = [&](int b, int i, int part, int h, int d) {
    return double(
        half_to_float(qkv[(std::size_t(b) * c.seq + i) * 3 * hd + part * hd + h * c.head_dim + d]));
  };
  for (int b = 0; b < c.batch; ++b) {
    for (int h = 0; h < c.heads; ++h) {
      for (int i = 0; i < c.seq; ++i) {
        if (!valid[b * c.seq + i] || (queries > 0 && i < c.seq - queries)) continue;
        std::vector<double> p(i + 1, 0.0);
        double max = -INFINITY, total = 0;
        for (int j = 0; j <= i; ++j) {
          if (!valid[b * c.seq + j]) continue;
          for (int d = 0; d < c.head_dim; ++d) p[j] += at(b, i, 0, h, d) * at(b, j, 1, h, d);
          p[j] *= scale;
          max = std::max(max, p[j]);
        }
        for (int j = 0; j <= i; ++j) {
          p[j] = valid[b * c.seq + j] ? std::exp(p[j] - max) : 0.0;
          total += p[j];
        }
        for (int j = 0; j <= i; ++j) sums[(b * c.heads + h) * c.seq + j] += p[j] / total;
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
      const auto qkv = rng.halves(tokens * 3 * hd, -1, 1);
      const auto valid = left_padding(c.seq, c.pads);
      const float scale = attention_scale(c.head_dim);
      Guarded<Half> out(tokens * hd, half_nan());
      Guarded<float> sums(std::size_t(c.batch) * c.heads * c.seq, float_nan());
      std::vector<Half> expected_out(tokens * hd);
      std::vector<float> expected_sums(sums.size());

      PrefillAttentionArgs args{
          qkv.data(), valid.data(), out.data(), with_sums ? sums.data() : nullptr, c.batch, c.seq,
          c.heads,    c.head_dim,   scale};
      args.key_sum_queries = std::max(0, sum_queries);
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
                            {0, 2 * kFloatEps, "reference: double sums, rounded to fp32 once"}))
          << "reference key sums";
      EXPECT_TRUE(
          all_close(sums.values(), brute_f, prob_tolerance(c.head_dim, scale, c.seq, c.seq)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, PrefillAttentionParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
