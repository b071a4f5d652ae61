// Parity of argmax_rows (greedy picks) against the reference: planted ties (the lowest id wins),
// NaN never wins, rows with nothing real, +inf.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;

class ArgmaxRowsParity : public ParityTest {};

TEST_P(ArgmaxRowsParity, MatchesTheReference) {
  // Random rows of real vocabulary sizes, ties planted (the lowest id wins), NaN and -inf rows.
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const int vocab : {1, 7, 1000, 50272}) {
    SCOPED_TRACE("vocab=" + std::to_string(vocab));
    const int rows = 9;
    auto logits = rng.floats(static_cast<std::size_t>(rows) * vocab, -5.0f, 5.0f);
    auto at = [&](int r, int i) -> float& {
      return logits[static_cast<std::size_t>(r) * vocab + static_cast<std::size_t>(i)];
    };
    if (vocab > 3) {
      at(1, vocab - 1) = 9.0f;  // a tie: the lower id wins
      at(1, 2) = 9.0f;
      at(2, 0) = nan;  // NaN never wins
      at(2, 1) = 7.0f;
    }
    for (int i = 0; i < vocab; ++i) at(3, i) = i % 2 ? nan : -inf;  // nothing real: 0
    for (int i = 0; i < vocab; ++i) at(4, i) = nan;
    at(5, vocab - 1) = inf;
    Guarded<std::int32_t> actual(static_cast<std::size_t>(rows), -1);
    std::vector<std::int32_t> expected(static_cast<std::size_t>(rows), -1);
    kernels::ArgmaxRowsArgs args{
        .logits = logits.data(), .out = actual.data(), .rows = rows, .vocab = vocab};
    impl().argmax_rows(args);
    args.out = expected.data();
    ref::argmax_rows(args);
    EXPECT_TRUE(actual.guards_intact());
    EXPECT_EQ(actual.values(), expected);
    if (vocab > 3) {
      EXPECT_EQ(expected[1], 2);
      EXPECT_EQ(expected[2], 1);
    }
    EXPECT_EQ(expected[3], 0);
    EXPECT_EQ(expected[4], 0);
    EXPECT_EQ(expected[5], vocab - 1);
  }
}

INSTANTIATE_TEST_SUITE_P(All, ArgmaxRowsParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
