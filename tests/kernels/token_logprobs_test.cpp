// Parity of token_logprobs (log p of each row's target) against the reference.
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

INSTANTIATE_TEST_SUITE_P(All, TokenLogprobsParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
