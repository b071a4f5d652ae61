// Parity of token_logprobs (log p of each row's target) and top_logprobs (the k most likely ids
// and their log p) against the reference.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;

class TokenLogprobsParity : public ParityTest {};

TEST_P(TokenLogprobsParity, MatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const std::int64_t rows : {1, 3, 17}) {
    for (const int vocab : {1, 5, 64, 1000, 50272}) {
      SCOPED_TRACE("rows=" + std::to_string(rows) + " vocab=" + std::to_string(vocab));
      const auto logits = rng.floats(rows * vocab, -10, 10);
      std::vector<std::int32_t> targets(rows);
      for (auto& t : targets) t = rng.integer(0, vocab - 1);
      targets.back() = vocab - 1;
      Guarded<float> actual(rows, float_nan());
      std::vector<float> expected(rows);
      kernels::TokenLogprobsArgs args{.logits = logits.data(),
                                      .targets = targets.data(),
                                      .out = actual.data(),
                                      .rows = rows,
                                      .vocab = vocab};
      impl().token_logprobs(args);
      args.out = expected.data();
      ref::token_logprobs(args);
      EXPECT_TRUE(actual.guards_intact());
      EXPECT_TRUE(all_close(actual.values(), expected, log_sum_exp_tolerance(vocab, 10)));
    }
  }
}

// The ids exactly (ties broken by the lower id, NaN last), the values as token_logprobs gives them
// in the same set, for every k up to the limit on OPT's head size.
TEST_P(TokenLogprobsParity, TopLogprobsAreTheReferencesIdsWithTokenLogprobsValues) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 5;
  for (const int vocab : {1, 7, 50272}) {
    auto logits = rng.floats(rows * vocab, -10, 10);
    if (vocab > 100) {
      for (int i = 0; i < 6; ++i) logits[static_cast<std::size_t>(3 * i + 11)] = 9.999f;  // ties
      logits[std::size_t{2} * vocab + 5] = 12.0f;  // row 2's best
    }
    for (const int k : {1, 5, 20}) {
      if (k > vocab) continue;
      SCOPED_TRACE("vocab=" + std::to_string(vocab) + " k=" + std::to_string(k));
      Guarded<std::int32_t> ids(rows * k, -1);
      Guarded<float> values(rows * k, float_nan());
      std::vector<std::int32_t> expected_ids(rows * k);
      std::vector<float> expected_values(rows * k);
      kernels::TopLogprobsArgs args{logits.data(), ids.data(), values.data(), rows, vocab, k};
      impl().top_logprobs(args);
      args.ids = expected_ids.data();
      args.values = expected_values.data();
      ref::top_logprobs(args);
      EXPECT_TRUE(ids.guards_intact());
      EXPECT_TRUE(values.guards_intact());
      ASSERT_EQ(ids.values(), expected_ids);
      EXPECT_TRUE(all_close(values.values(), expected_values, log_sum_exp_tolerance(vocab, 10)));
      // Each value is the set's own token_logprobs of its id, bit for bit.
      for (std::int64_t r = 0; r < rows; ++r) {
        std::vector<float> row_logits(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
        std::vector<float> same(static_cast<std::size_t>(k));
        std::vector<std::int32_t> targets(expected_ids.begin() + r * k,
                                          expected_ids.begin() + (r + 1) * k);
        std::vector<float> repeated;
        for (int j = 0; j < k; ++j)
          repeated.insert(repeated.end(), row_logits.begin(), row_logits.end());
        impl().token_logprobs({repeated.data(), targets.data(), same.data(), k, vocab});
        for (int j = 0; j < k; ++j) {
          EXPECT_EQ(values.values()[static_cast<std::size_t>(r * k + j)],
                    same[static_cast<std::size_t>(j)])
              << "row " << r << " rank " << j;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, TokenLogprobsParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
