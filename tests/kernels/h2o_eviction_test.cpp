// Parity of the h2o eviction ops (h2o_prefill_keep, h2o_decode_update) against their truth, the
// policy code: driven together through random prefill + decode sequences
// (tests/kernels/h2o_state_check.h), every implementation keeps exactly the tokens the policy
// keeps — positions, scores and write slots after every call.
#include <string>

#include "tests/kernels/h2o_state_check.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

class H2oEvictionParity : public ParityTest {};

TEST_P(H2oEvictionParity, KeepsWhatThePolicyKeeps) {
  for (const H2oCase& c : h2o_cases()) {
    SCOPED_TRACE("case seed " + std::to_string(c.seed));
    EXPECT_TRUE(h2o_matches_policy(c, impl().h2o_prefill_keep, impl().h2o_decode_update));
  }
}

INSTANTIATE_TEST_SUITE_P(All, H2oEvictionParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
