// Parity of log_softmax / token_logprobs against the reference.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;

// Logits in [-r, r].
Tolerance log_softmax_tolerance(int cols, double r) {
  const double lse_max = r + std::log(double(cols));
  return {std::ldexp(1.0, -22) + (64 + std::log2(double(cols))) * kFloatEps + lse_max * kFloatEps,
          kFloatEps,
          "log-sum-exp error: exp within 2 ulp (2^-22 relative); the sum of positive terms "
          "in fp32 blocks of <= 64 or a tree, (64 + log2 cols)·2^-24 relative, which log turns "
          "into absolute; lse rounded to fp32, 2^-24·|lse|; the subtraction's rounding, "
          "2^-24 relative"};
}

class SoftmaxParity : public ParityTest {};

TEST_P(SoftmaxParity, LogSoftmaxMatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const std::int64_t rows : {1, 3, 17}) {
    for (const int cols : {1, 5, 64, 1000, 50272}) {
      SCOPED_TRACE("rows=" + std::to_string(rows) + " cols=" + std::to_string(cols));
      const auto logits = rng.floats(rows * cols, -10, 10);
      Guarded<float> actual(logits);
      std::vector<float> expected = logits;
      impl().log_softmax({.values = actual.data(), .rows = rows, .cols = cols});
      ref::log_softmax({.values = expected.data(), .rows = rows, .cols = cols});
      EXPECT_TRUE(actual.guards_intact());
      EXPECT_TRUE(all_close(actual.values(), expected, log_softmax_tolerance(cols, 10)));
    }
  }
}

TEST_P(SoftmaxParity, TokenLogprobsMatchReference) {
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
      EXPECT_TRUE(all_close(actual.values(), expected, log_softmax_tolerance(vocab, 10)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, SoftmaxParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
