// Parity of log_softmax against the reference, up to a real vocabulary's width.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;

class LogSoftmaxParity : public ParityTest {};

TEST_P(LogSoftmaxParity, MatchesReference) {
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
      EXPECT_TRUE(all_close(actual.values(), expected, log_sum_exp_tolerance(cols, 10)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, LogSoftmaxParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
