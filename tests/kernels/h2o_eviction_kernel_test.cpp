// The cpu h2o eviction kernels keep exactly the tokens the policy code says, step by step.
#include <gtest/gtest.h>

#include "kernels/cpu/h2o_eviction.h"
#include "tests/support/h2o_state_check.h"

namespace offgen {
namespace {

TEST(H2oEvictionKernels, CpuKernelsKeepWhatThePolicyKeeps) {
  for (const test::H2oCase& c : test::h2o_cases()) {
    SCOPED_TRACE("case seed " + std::to_string(c.seed));
    EXPECT_TRUE(test::h2o_matches_policy(c, kernels::cpu::h2o_prefill_keep,
                                         kernels::cpu::h2o_decode_update));
  }
}

}  // namespace
}  // namespace offgen
