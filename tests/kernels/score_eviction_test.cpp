// Parity of the attention-score eviction ops (score_prefill_keep, score_decode_update) against
// their truth, the policy code: driven together through random prefill + decode sequences
// (tests/kernels/score_state_check.h), every implementation keeps exactly the tokens the policy
// keeps — positions, scores and write slots after every call — under h2o, tova, snapkv and the
// layers of pyramidkv.
#include <string>
#include <vector>

#include "tests/kernels/parity.h"
#include "tests/kernels/score_state_check.h"

namespace offgen::test {
namespace {

class ScoreEvictionParity : public ParityTest {
 protected:
  void check(const std::vector<ScoreCase>& cases) {
    for (const ScoreCase& c : cases) {
      SCOPED_TRACE("case seed " + std::to_string(c.seed));
      EXPECT_TRUE(matches_policy(c, impl().score_prefill_keep, impl().score_decode_update));
    }
  }
};

TEST_P(ScoreEvictionParity, KeepsWhatThePolicyKeeps) {
  check(score_cases());
}

TEST_P(ScoreEvictionParity, KeepsWhatTovaKeeps) {
  check(tova_cases());
}

TEST_P(ScoreEvictionParity, KeepsWhatSnapKvKeeps) {
  check(snapkv_cases());
}

TEST_P(ScoreEvictionParity, KeepsWhatEachPyramidKvLayerKeeps) {
  check(pyramidkv_cases());
}

INSTANTIATE_TEST_SUITE_P(All, ScoreEvictionParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
