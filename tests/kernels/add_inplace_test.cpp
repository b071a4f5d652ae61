// Parity of add_inplace (the residual add) against the reference, across the vector widths'
// tails.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;

class AddInplaceParity : public ParityTest {};

TEST_P(AddInplaceParity, MatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const std::int64_t n : {1, 7, 4095, 4096, 4097, 100003}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const auto y = rng.halves(n, -8, 8);
    const auto x = rng.halves(n, -0.01f, 0.01f);  // small residual updates: exponents differ
    Guarded<Half> actual(y);
    std::vector<Half> expected = y;
    impl().add_inplace(actual.data(), x.data(), n);
    ref::add_inplace(expected.data(), x.data(), n);
    EXPECT_TRUE(actual.guards_intact());
    EXPECT_TRUE(all_close(actual.values(), expected, kSumOfTwoHalves));
  }
}

INSTANTIATE_TEST_SUITE_P(All, AddInplaceParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
