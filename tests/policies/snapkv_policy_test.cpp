// snapkv by hand: prompt scores summed over the observation window, the prefix pooled (zero
// padding counted, the window never pooled into the prefix), the window kept whole, and h2o's
// accumulate-and-protect-the-window rule at decode.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cache_simulator.h"
#include "engine/core/error.h"
#include "policies/kv_budget.h"
#include "policies/kv_policy.h"

namespace offgen {
namespace {

using test::CacheSimulator;
using test::make_snapkv;

TEST(SnapKvPolicy, ScoresByItsObservationWindowPerHead) {
  const auto policy = make_snapkv(40, 32, 5);
  EXPECT_TRUE(policy->needs_attention_scores());
  EXPECT_EQ(policy->prefill_score_queries(), 32);
  EXPECT_EQ(policy->recent_window(), 32);
  EXPECT_EQ(policy->pool_kernel(), 5);
  EXPECT_EQ(policy->head_scores(), HeadScores::per_head);
  EXPECT_EQ(policy->decode_scores(), DecodeScores::accumulate);
}

// C = 3, w = 2, k = 3, P = 8: prefix t0..t5 = {0, 0, 0, 0.5, 0.5, 0.5}, window t6, t7 = 1.0.
// Pooled: t3 (0 + 0.5 + 0.5) / 3, t4 1.5 / 3, t5 (0.5 + 0.5 + 0) / 3 — t6 is the window, not
// padding the prefix, so t5 does not gain its 1.0. One heavy slot: t4 -> {4, 6, 7}.
TEST(SnapKvPolicy, PoolingStopsAtTheWindow) {
  const auto policy = make_snapkv(3, 2, 3);
  const std::vector<float> scores = {0, 0, 0, 0.5f, 0.5f, 0.5f, 1.0f, 1.0f};
  EXPECT_EQ(policy->keep_after_prefill(8, scores), (std::vector<int>{4, 6, 7}));
}

// C = 2, w = 1, k = 3, P = 5: prefix {0.75, 0, 0, 0.5}. Pooled with the padding counted (divide
// by 3 everywhere): t0 0.25, t1 0.25, t2 0.5 / 3, t3 0.5 / 3. t0 and t1 tie: the newer, t1, stays.
// (Dividing the edge by the 2 real neighbours would give t0 0.375 and keep it; unpooled, t0 too.)
TEST(SnapKvPolicy, PoolingCountsThePaddingAtTheEdges) {
  const auto policy = make_snapkv(2, 1, 3);
  const std::vector<float> scores = {0.75f, 0, 0, 0.5f, 1.0f};
  EXPECT_EQ(policy->keep_after_prefill(5, scores), (std::vector<int>{1, 4}));
  EXPECT_EQ(make_snapkv(2, 1, 1)->keep_after_prefill(5, scores), (std::vector<int>{0, 4}));
}

// A pooling window wider than the prefix: every prefix token pools all of it — all tie, and the
// newest ones stay.
TEST(SnapKvPolicy, APoolWiderThanThePrefixTiesAndKeepsTheNewest) {
  const auto policy = make_snapkv(3, 1, 9);
  const std::vector<float> scores = {1.0f, 0, 0.25f, 0, 0.5f};
  EXPECT_EQ(policy->keep_after_prefill(5, scores), (std::vector<int>{2, 3, 4}));
}

TEST(SnapKvPolicy, APromptThatFitsIsKeptWhole) {
  const auto policy = make_snapkv(8, 2, 5);
  EXPECT_EQ(policy->keep_after_prefill(8, std::vector<float>(8, 0.0f)),
            (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

// C = 3, w = 1, k = 1: the prompt is scored by its last query alone
// (t0 0.0625, t1 0.0625, t2 0.125, t3 0.25, t4 0.5): window {4}, heavy {2, 3}.
//   step 1 (+5): 2:0.25 3:0.375 4:0.75 5:0.5; window {5}; lowest of {2, 3, 4} = 2 -> {3, 4, 5}
//   step 2 (+6): 3:0.4375 4:0.8125 5:1.125 6:0.25; window {6}; lowest = 3 -> {4, 5, 6}
TEST(SnapKvPolicy, DecodeAccumulatesAndProtectsTheWindow) {
  const auto policy = make_snapkv(3, 1, 1);
  CacheSimulator sim(*policy);
  const std::vector<std::vector<float>> prefill = {
      {1.0f},
      {0.5f, 0.5f},
      {0.75f, 0.125f, 0.125f},
      {0.5f, 0.25f, 0.125f, 0.125f},
      {0.0625f, 0.0625f, 0.125f, 0.25f, 0.5f},
  };
  EXPECT_EQ(sim.prefill(prefill), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(sim.kept_scores(), (std::vector<float>{0.125f, 0.25f, 0.5f}));
  EXPECT_EQ(sim.decode({0.125f, 0.125f, 0.25f, 0.5f}).evicted_position, 2);
  const auto step = sim.decode({0.0625f, 0.0625f, 0.625f, 0.25f});
  EXPECT_EQ(step.evicted_position, 3);
  EXPECT_EQ(sim.kept(), (std::vector<int>{4, 5, 6}));
  EXPECT_EQ(sim.kept_scores(), (std::vector<float>{0.8125f, 1.125f, 0.25f}));
}

// A budget no larger than the window keeps a window of C - 1 (a fraction budget of a short
// sequence must still run); the prompt scores still come from the last w queries.
TEST(SnapKvPolicy, ABudgetWithinTheWindowNarrowsTheWindowToCMinusOne) {
  const auto policy = make_snapkv(3, 32, 5);
  EXPECT_EQ(policy->recent_window(), 2);
  EXPECT_EQ(policy->prefill_score_queries(), 32);
  EXPECT_EQ(make_snapkv(1, 32, 5)->recent_window(), 0);
}

TEST(SnapKvPolicy, RejectsAnEvenOrEmptyPoolAndAnEmptyWindow) {
  EXPECT_THROW(make_snapkv(40, 32, 4), Error);
  EXPECT_THROW(make_snapkv(40, 32, 0), Error);
  EXPECT_THROW(make_snapkv(40, 0, 5), Error);
  try {
    make_snapkv(40, 32, 4);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pool_kernel"), std::string::npos) << e.what();
  }
}

TEST(SnapKvPolicy, ATokenBudgetMustHoldTheWindowPlusOne) {
  PolicyOptions options;
  options.kind = PolicyKind::snapkv;
  options.observation_window = 32;
  EXPECT_THROW(validate_policy_budget(options, KvBudget::tokens(32)), Error);
  EXPECT_NO_THROW(validate_policy_budget(options, KvBudget::tokens(33)));
  EXPECT_NO_THROW(validate_policy_budget(options, KvBudget::fraction(0.1)));
  try {
    validate_policy_budget(options, KvBudget::tokens(32));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("observation_window"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace offgen
