// The batched sampler (kernels/sampling_args.h): every implementation against the reference on
// random rows of real vocabulary sizes, and the reference's own semantics — the tempered softmax,
// top-k with ties, top-p renormalisation, never an unsampleable id, NaN never picked — checked
// with evenly spaced draws, so the frequencies are exact up to one draw per token.
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;
using kernels::SampleParams;

class SampleRowsParity : public ParityTest {
 protected:
  // Runs the implementation under test over `rows` rows of `logits`; checks its guards.
  std::vector<std::int32_t> sample(const std::vector<float>& logits,
                                   const std::vector<SampleParams>& params, int vocab,
                                   const std::vector<std::uint8_t>* sampleable = nullptr) {
    Guarded<std::int32_t> out(params.size(), -1);
    kernels::SampleRowsArgs args;
    args.logits = logits.data();
    args.params = params.data();
    args.sampleable = sampleable ? sampleable->data() : nullptr;
    args.out = out.data();
    args.rows = static_cast<std::int64_t>(params.size());
    args.vocab = vocab;
    impl().sample_rows(args);
    EXPECT_TRUE(out.guards_intact());
    return out.values();
  }
};

std::vector<std::int32_t> reference_picks(const std::vector<float>& logits,
                                          const std::vector<SampleParams>& params, int vocab,
                                          const std::vector<std::uint8_t>* sampleable = nullptr) {
  std::vector<std::int32_t> out(params.size(), -1);
  ref::sample_rows({logits.data(), params.data(), sampleable ? sampleable->data() : nullptr,
                    out.data(), static_cast<std::int64_t>(params.size()), vocab});
  return out;
}

// `n` draws spaced evenly over [0, 1) with the same parameters.
std::vector<SampleParams> evenly_spaced(int n, float temperature, int top_k, float top_p) {
  std::vector<SampleParams> params(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    params[static_cast<std::size_t>(i)] = {temperature, top_k, top_p,
                                           (static_cast<float>(i) + 0.5f) / static_cast<float>(n)};
  }
  return params;
}

// The same row repeated once per draw.
std::vector<float> repeated(const std::vector<float>& row, std::size_t times) {
  std::vector<float> out;
  for (std::size_t i = 0; i < times; ++i) out.insert(out.end(), row.begin(), row.end());
  return out;
}

std::map<int, int> histogram(const std::vector<std::int32_t>& picks) {
  std::map<int, int> counts;
  for (int p : picks) ++counts[p];
  return counts;
}

TEST_P(SampleRowsParity, MatchesTheReferenceOnRandomRows) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const std::vector<float> temperatures = {0.0f, 0.3f, 0.7f, 1.0f, 1.6f};
  const std::vector<int> top_ks = {0, 0, 1, 3, 40, 2000};
  const std::vector<float> top_ps = {1.0f, 1.0f, 0.95f, 0.9f, 0.5f, 0.01f};
  const std::vector<float> min_ps = {0.0f, 0.0f, 0.0f, 0.05f, 0.3f};
  for (const int vocab : {5, 1000, 50272}) {
    SCOPED_TRACE("vocab=" + std::to_string(vocab));
    const int rows = vocab == 50272 ? 48 : 300;
    std::vector<SampleParams> params;
    for (int r = 0; r < rows; ++r) {
      params.push_back({temperatures[static_cast<std::size_t>(rng.integer(0, 4))],
                        top_ks[static_cast<std::size_t>(rng.integer(0, 5))],
                        top_ps[static_cast<std::size_t>(rng.integer(0, 5))],
                        rng.uniform(0.0f, 0.999f),
                        min_ps[static_cast<std::size_t>(rng.integer(0, 4))]});
    }
    const auto logits = rng.floats(static_cast<std::size_t>(rows) * vocab, -8.0f, 8.0f);
    // OPT's head has 50272 rows, its tokenizer 50265 entries: the last 7 are never sampled.
    std::vector<std::uint8_t> sampleable(static_cast<std::size_t>(vocab), 1);
    for (int i = std::max(0, vocab - 7); i < vocab && vocab > 7; ++i) {
      sampleable[static_cast<std::size_t>(i)] = 0;
    }
    const auto actual = sample(logits, params, vocab, &sampleable);
    const auto expected = reference_picks(logits, params, vocab, &sampleable);
    int agree = 0;
    for (int r = 0; r < rows; ++r) {
      const auto i = static_cast<std::size_t>(r);
      ASSERT_GE(actual[i], 0) << "row " << r;
      ASSERT_LT(actual[i], vocab) << "row " << r;
      const bool greedy = params[i].temperature == 0.0f || params[i].top_k == 1;
      if (!greedy) {
        EXPECT_TRUE(sampleable[static_cast<std::size_t>(actual[i])]) << "row " << r;
      }
      if (greedy || impl().exact_sampling) {
        EXPECT_EQ(actual[i], expected[i])
            << "row " << r << " T " << params[i].temperature << " k " << params[i].top_k << " p "
            << params[i].top_p << " u " << params[i].uniform << " min_p " << params[i].min_p;
      }
      agree += actual[i] == expected[i];
    }
    // A device whose exp differs from the reference's in the last bit may pick a neighbour only
    // where a running sum lands within that bit of the draw: rare on random rows.
    EXPECT_GE(agree, rows * 95 / 100);
  }
}

TEST_P(SampleRowsParity, DrawsFollowTheTemperedSoftmax) {
  // p = softmax(logits / T); 20000 evenly spaced draws put within 2 of 20000·p on each token.
  const std::vector<float> row = {0.0f, 1.0f, 2.0f, -1.5f};
  const float temperature = 0.7f;
  const int n = 20000;
  const auto counts = histogram(sample(repeated(row, n), evenly_spaced(n, temperature, 0, 1.0f),
                                       static_cast<int>(row.size())));
  double z = 0;
  for (float l : row) z += std::exp(l / temperature);
  for (int t = 0; t < static_cast<int>(row.size()); ++t) {
    const double expected = n * std::exp(row[static_cast<std::size_t>(t)] / temperature) / z;
    EXPECT_NEAR(counts.count(t) ? counts.at(t) : 0, expected, 2.0) << "token " << t;
  }
}

TEST_P(SampleRowsParity, TopPRenormalisesOverTheNucleus) {
  // probs 0.5, 0.3, 0.2 (logits are their logs): top_p 0.7 keeps {0, 1}, drawn 0.625 / 0.375.
  const std::vector<float> row = {std::log(0.2f), std::log(0.5f), std::log(0.3f)};
  const int n = 8000;
  const auto counts = histogram(sample(repeated(row, n), evenly_spaced(n, 1.0f, 0, 0.7f), 3));
  EXPECT_EQ(counts.count(0), 0u);
  EXPECT_NEAR(counts.at(1), 0.625 * n, 2.0);
  EXPECT_NEAR(counts.at(2), 0.375 * n, 2.0);
}

TEST_P(SampleRowsParity, MinPKeepsTokensAtLeastMinPTimesTheLargestProbabilityThenTopP) {
  // probs 0.5, 0.3, 0.15, 0.05: min_p 0.25 keeps those >= 0.125 (ids 0-2), drawn 10 : 6 : 3; with
  // top_p 0.8 as well (vLLM's order: min-p first), the nucleus of {0.5, 0.3, 0.15} is {0, 1}.
  const std::vector<float> row = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  const int n = 9500;
  auto params = evenly_spaced(n, 1.0f, 0, 1.0f);
  for (SampleParams& p : params) p.min_p = 0.25f;
  const auto counts = histogram(sample(repeated(row, n), params, 4));
  EXPECT_EQ(counts.count(3), 0u);
  EXPECT_NEAR(counts.at(0), n * 10.0 / 19.0, 2.0);
  EXPECT_NEAR(counts.at(1), n * 6.0 / 19.0, 2.0);
  EXPECT_NEAR(counts.at(2), n * 3.0 / 19.0, 2.0);
  for (SampleParams& p : params) p.top_p = 0.8f;
  const auto nucleus = histogram(sample(repeated(row, n), params, 4));
  EXPECT_EQ(nucleus.count(2) + nucleus.count(3), 0u);
  EXPECT_NEAR(nucleus.at(0), n * 0.625, 2.0);
}

TEST_P(SampleRowsParity, TopKKeepsTokensTiedWithTheKth) {
  // k = 2 but three tokens share the 2nd-largest logit: all three stay (Hugging Face semantics).
  const std::vector<float> row = {3.0f, 1.0f, 1.0f, 1.0f, -5.0f, 0.5f};
  const int n = 3000;
  const auto counts = histogram(sample(repeated(row, n), evenly_spaced(n, 1.0f, 2, 1.0f), 6));
  for (int t : {0, 1, 2, 3}) EXPECT_GT(counts.count(t) ? counts.at(t) : 0, 0) << t;
  EXPECT_EQ(counts.count(4) + counts.count(5), 0u);
}

TEST_P(SampleRowsParity, TinyTopPKeepsOnlyTheMostLikelyToken) {
  const std::vector<float> row = {0.1f, 3.0f, 2.9f, 0.0f};
  const int n = 500;
  const auto picks = sample(repeated(row, n), evenly_spaced(n, 1.0f, 0, 1e-6f), 4);
  for (int p : picks) ASSERT_EQ(p, 1);
}

TEST_P(SampleRowsParity, NeverDrawsAnUnsampleableIdEvenWhenItIsTheMostLikely) {
  // The excluded ids carry almost all the mass; greedy rows still take the exact argmax.
  const int vocab = 50272;
  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<float> row = rng.floats(vocab, -2.0f, 2.0f);
  std::vector<std::uint8_t> sampleable(vocab, 1);
  for (int i = 50265; i < vocab; ++i) {
    row[static_cast<std::size_t>(i)] = 30.0f;
    sampleable[static_cast<std::size_t>(i)] = 0;
  }
  const int n = 64;
  auto params = evenly_spaced(n, 1.0f, 0, 1.0f);
  params[0].top_p = 0.5f;
  params[1].top_k = 3;
  params[2] = {};  // greedy
  const auto picks = sample(repeated(row, n), params, vocab, &sampleable);
  EXPECT_EQ(picks[2], 50265);
  for (int r = 0; r < n; ++r) {
    if (r != 2) {
      EXPECT_LT(picks[static_cast<std::size_t>(r)], 50265) << "row " << r;
    }
  }
}

TEST_P(SampleRowsParity, NanLogitsAreNeverPickedOverRealOnes) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> row = {nan, 0.5f, nan, 2.0f, -std::numeric_limits<float>::infinity()};
  const int n = 400;
  auto params = evenly_spaced(n, 1.0f, 0, 0.99f);
  params[0] = {};  // greedy
  const auto counts = histogram(sample(repeated(row, n), params, 5));
  EXPECT_EQ(counts.count(0) + counts.count(2) + counts.count(4), 0u);
  EXPECT_GT(counts.at(1), 0);
  EXPECT_GT(counts.at(3), counts.at(1));
}

TEST_P(SampleRowsParity, GreedyTakesTheLowestIdAmongEqualMaxima) {
  const std::vector<float> row = {0.5f, 2.0f, -1.0f, 2.0f};
  const std::vector<SampleParams> params = {{0.0f, 0, 1.0f, 0.9f}, {1.0f, 1, 1.0f, 0.9f}};
  EXPECT_EQ(sample(repeated(row, 2), params, 4), (std::vector<std::int32_t>{1, 1}));
}

TEST_P(SampleRowsParity, InfiniteLogitsShareTheDraw) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> row = {1.0f, inf, 3.0f, inf};
  const int n = 100;
  const auto counts = histogram(sample(repeated(row, n), evenly_spaced(n, 1.0f, 0, 1.0f), 4));
  EXPECT_EQ(counts.at(1), 50);
  EXPECT_EQ(counts.at(3), 50);
}

INSTANTIATE_TEST_SUITE_P(All, SampleRowsParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
