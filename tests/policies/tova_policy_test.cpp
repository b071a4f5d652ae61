// tova by hand: the current query's row is a token's whole score (no accumulation), there is no
// protected window (the new token itself can go), prefill ranks by the last prompt query alone,
// and ties evict the older token. One head, so the head mean is that head's row.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cache_simulator.h"
#include "policies/kv_policy.h"

namespace offgen {
namespace {

using test::CacheSimulator;
using test::make;
using Rows = std::vector<std::vector<float>>;

// P = 5. The last query's row: t0 0.0625, t1 0.0625, t2 0.125, t3 0.25, t4 0.5 (the earlier rows
// weigh t0 and t1 heavily, which tova must ignore).
const Rows kTovaPrefill = {
    {1.0f},
    {0.5f, 0.5f},
    {0.75f, 0.125f, 0.125f},
    {0.5f, 0.25f, 0.125f, 0.125f},
    {0.0625f, 0.0625f, 0.125f, 0.25f, 0.5f},
};

TEST(TovaPolicy, ScoresThePromptByItsLastQueryAveragedOverHeadsWithoutAWindow) {
  const auto policy = make(PolicyKind::tova, 3);
  EXPECT_TRUE(policy->needs_attention_scores());
  EXPECT_EQ(policy->prefill_score_queries(), 1);
  EXPECT_EQ(policy->head_scores(), HeadScores::layer_mean);
  EXPECT_EQ(policy->decode_scores(), DecodeScores::replace);
  EXPECT_EQ(policy->recent_window(), 0);
  EXPECT_EQ(policy->pool_kernel(), 1);
}

// C = 3: the top 3 of the last row, {2, 3, 4}, though t0 has the largest column sum.
TEST(TovaPolicy, PrefillKeepsTheLastQuerysTopC) {
  const auto policy = make(PolicyKind::tova, 3);
  CacheSimulator sim(*policy);
  EXPECT_EQ(sim.prefill(kTovaPrefill), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(sim.kept_scores(), (std::vector<float>{0.125f, 0.25f, 0.5f}));
}

// C = 4: {2, 3, 4} plus one of t0 / t1, tied at 0.0625: the newer, t1, stays.
TEST(TovaPolicy, PrefillTieKeepsTheNewerToken) {
  const auto policy = make(PolicyKind::tova, 4);
  CacheSimulator sim(*policy);
  EXPECT_EQ(sim.prefill(kTovaPrefill), (std::vector<int>{1, 2, 3, 4}));
}

TEST(TovaPolicy, APromptThatFitsIsKeptWhole) {
  const auto policy = make(PolicyKind::tova, 5);
  CacheSimulator sim(*policy);
  EXPECT_EQ(sim.prefill(kTovaPrefill), (std::vector<int>{0, 1, 2, 3, 4}));
}

// C = 3 from {2, 3, 4}:
//   step 1 (+5): 2:0.5 3:0.25 4:0.1875 5:0.0625 -> the new token 5 is the lowest and goes
//   step 2 (+6): 2:0.125 3:0.125 4:0.25 6:0.5 -> 2 and 3 tie: the older, 2, goes -> {3, 4, 6}
//   step 3 (+7): 3:0.25 4:0.0625 6:0.5 7:0.1875 -> 4 goes -> {3, 6, 7}. Accumulated scores would
//                have been 3:0.375 4:0.3125 6:1.0 7:0.1875 and evicted 7: tova only looks at the
//                current row.
TEST(TovaPolicy, DecodeEvictsTheCurrentRowsLowestTheNewTokenIncluded) {
  const auto policy = make(PolicyKind::tova, 3);
  CacheSimulator sim(*policy);
  ASSERT_EQ(sim.prefill(kTovaPrefill), (std::vector<int>{2, 3, 4}));
  auto step = sim.decode({0.5f, 0.25f, 0.1875f, 0.0625f});
  EXPECT_TRUE(step.evicted);
  EXPECT_EQ(step.evicted_position, 5);
  EXPECT_EQ(step.victim_slot, 3);  // the new token's slot
  EXPECT_EQ(sim.kept(), (std::vector<int>{2, 3, 4}));
  step = sim.decode({0.125f, 0.125f, 0.25f, 0.5f});
  EXPECT_EQ(step.evicted_position, 2);
  EXPECT_EQ(sim.kept(), (std::vector<int>{3, 4, 6}));
  step = sim.decode({0.25f, 0.0625f, 0.5f, 0.1875f});
  EXPECT_EQ(step.evicted_position, 4);
  EXPECT_EQ(sim.kept(), (std::vector<int>{3, 6, 7}));
  EXPECT_EQ(sim.kept_scores(), (std::vector<float>{0.25f, 0.5f, 0.1875f}));
}

// C = 1: the cache holds one token, the better of the newest pair each step.
TEST(TovaPolicy, ABudgetOfOneKeepsTheBetterOfTwo) {
  const auto policy = make(PolicyKind::tova, 1);
  CacheSimulator sim(*policy);
  EXPECT_EQ(sim.prefill({{1.0f}, {0.75f, 0.25f}}), (std::vector<int>{0}));
  EXPECT_EQ(sim.decode({0.25f, 0.75f}).evicted_position, 0);
  EXPECT_EQ(sim.decode({0.5f, 0.5f}).evicted_position, 2);  // a tie: the older goes
  EXPECT_EQ(sim.kept(), (std::vector<int>{3}));
}

}  // namespace
}  // namespace offgen
