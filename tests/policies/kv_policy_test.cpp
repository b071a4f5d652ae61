// Hand-worked traces of every policy through a small prefill + decode, plus the factory's errors.
#include "policies/kv_policy.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cache_simulator.h"
#include "engine/core/error.h"

namespace offgen {
namespace {

using test::make;

using Rows = std::vector<std::vector<float>>;
using Sets = std::vector<std::vector<int>>;
using test::CacheSimulator;

// Runs `policy` through the prefill and the decode rows; the kept positions after the prefill and
// after every step.
Sets trace(const KvPolicy& policy, const Rows& prefill, const Rows& decode) {
  CacheSimulator sim(policy);
  Sets kept = {sim.prefill(prefill)};
  for (const auto& row : decode) {
    sim.decode(row);
    kept.push_back(sim.kept());
  }
  return kept;
}

// The main example: P = 5, C = 3, 4 decode steps. All values are dyadic so the float sums are
// exact. Column sums over the prompt's queries: t0 1.375, t1 1.5625, t2 0.8125, t3 0.75, t4 0.5.
const Rows kPrefill = {
    {1.0f},
    {0.125f, 0.875f},
    {0.125f, 0.5f, 0.375f},
    {0.0625f, 0.125f, 0.3125f, 0.5f},
    {0.0625f, 0.0625f, 0.125f, 0.25f, 0.5f},
};
// Rows over the C cached tokens (ascending position) plus the new one.
const Rows kDecode = {
    {0.125f, 0.125f, 0.25f, 0.5f},
    {0.0625f, 0.0625f, 0.625f, 0.25f},
    {0.0625f, 0.75f, 0.125f, 0.0625f},
    {0.25f, 0.25f, 0.25f, 0.25f},
};

TEST(PolicyTrace, LocalKeepsTheLastCPositions) {
  const auto policy = make(PolicyKind::local, 3);
  EXPECT_EQ(trace(*policy, kPrefill, kDecode),
            (Sets{{2, 3, 4}, {3, 4, 5}, {4, 5, 6}, {5, 6, 7}, {6, 7, 8}}));
}

TEST(PolicyTrace, StreamingWithOneSinkKeepsToken0AndTheLastTwo) {
  const auto policy = make(PolicyKind::streaming, 3, 0.5, 1);
  EXPECT_EQ(trace(*policy, kPrefill, kDecode),
            (Sets{{0, 3, 4}, {0, 4, 5}, {0, 5, 6}, {0, 6, 7}, {0, 7, 8}}));
}

TEST(PolicyTrace, StreamingWithTwoSinksKeepsTokens0And1AndTheLastOne) {
  const auto policy = make(PolicyKind::streaming, 3, 0.5, 2);
  EXPECT_EQ(trace(*policy, kPrefill, kDecode),
            (Sets{{0, 1, 4}, {0, 1, 5}, {0, 1, 6}, {0, 1, 7}, {0, 1, 8}}));
}

// R = max(1, round(3 * 0.5)) = 2, H = 1.
//   prefill: window {3, 4}; heavy = argmax{t0 1.375, t1 1.5625, t2 0.8125} = t1 -> {1, 3, 4}
//            scores 1:1.5625 3:0.75 4:0.5
//   step 1 (+5): 1:1.6875 3:0.875 4:0.75 5:0.5; window {4, 5}; min{1, 3} = 3 -> {1, 4, 5}
//                (5 scores lower than 3 but is in the window)
//   step 2 (+6): 1:1.75 4:0.8125 5:1.125 6:0.25; window {5, 6}; min{1, 4} = 4 -> {1, 5, 6}
//   step 3 (+7): 1:1.8125 5:1.875 6:0.375 7:0.0625; window {6, 7}; min{1, 5} = 1 -> {5, 6, 7}
//                (the prefill's heavy hitter loses to 5)
//   step 4 (+8): 5:2.125 6:0.625 7:0.3125 8:0.25; window {7, 8}; min{5, 6} = 6 -> {5, 7, 8}
TEST(PolicyTrace, H2oKeepsTheRecentWindowPlusTheHeaviestHitter) {
  const auto policy = make(PolicyKind::h2o, 3, 0.5);
  CacheSimulator sim(*policy);
  EXPECT_EQ(sim.prefill(kPrefill), (std::vector<int>{1, 3, 4}));
  EXPECT_EQ(sim.prefill_scores(), (std::vector<float>{1.375f, 1.5625f, 0.8125f, 0.75f, 0.5f}));
  EXPECT_EQ(sim.kept_scores(), (std::vector<float>{1.5625f, 0.75f, 0.5f}));

  const Sets kept = {{1, 4, 5}, {1, 5, 6}, {5, 6, 7}, {5, 7, 8}};
  const std::vector<int> evicted = {3, 4, 1, 6};
  const std::vector<std::vector<float>> scores = {{1.6875f, 0.75f, 0.5f},
                                                  {1.75f, 1.125f, 0.25f},
                                                  {1.875f, 0.375f, 0.0625f},
                                                  {2.125f, 0.3125f, 0.25f}};
  for (std::size_t i = 0; i < kDecode.size(); ++i) {
    SCOPED_TRACE("decode step " + std::to_string(i + 1));
    const auto step = sim.decode(kDecode[i]);
    EXPECT_TRUE(step.evicted);
    EXPECT_EQ(step.evicted_position, evicted[i]);
    EXPECT_EQ(sim.kept(), kept[i]);
    EXPECT_EQ(sim.kept_scores(), scores[i]);
  }
}

TEST(PolicyTrace, FullKeepsEverythingAndNeverEvicts) {
  const auto policy = make(PolicyKind::full, 9);  // C = P + D = 5 + 4
  const Rows decode = {
      {0.25f, 0.125f, 0.125f, 0.125f, 0.125f, 0.25f},
      {0.25f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f},
      {0.25f, 0.125f, 0.125f, 0.125f, 0.0625f, 0.0625f, 0.125f, 0.125f},
      {0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.0625f, 0.0625f, 0.125f},
  };
  CacheSimulator sim(*policy);
  EXPECT_EQ(sim.prefill(kPrefill), (std::vector<int>{0, 1, 2, 3, 4}));
  for (std::size_t i = 0; i < decode.size(); ++i) {
    const auto step = sim.decode(decode[i]);
    EXPECT_FALSE(step.evicted);
  }
  EXPECT_EQ(sim.kept(), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(PolicyTrace, NoPolicyEvictsWhileThePromptFits) {
  // P = 2 <= C = 3: everything is kept after the prefill; the first step fills the cache to C,
  // the second one to C + 1.
  const Rows prefill = {{1.0f}, {0.5f, 0.5f}};
  const Rows decode = {{0.25f, 0.25f, 0.5f}, {0.25f, 0.25f, 0.25f, 0.25f}};
  EXPECT_EQ(trace(*make(PolicyKind::local, 3), prefill, decode),
            (Sets{{0, 1}, {0, 1, 2}, {1, 2, 3}}));
  EXPECT_EQ(trace(*make(PolicyKind::streaming, 3, 0.5, 1), prefill, decode),
            (Sets{{0, 1}, {0, 1, 2}, {0, 2, 3}}));
  // h2o: 0:2 1:1 2:0.75 3:0.25 after step 2; R = 2, window {2, 3}; min{0, 1} = 1.
  EXPECT_EQ(trace(*make(PolicyKind::h2o, 3), prefill, decode),
            (Sets{{0, 1}, {0, 1, 2}, {0, 2, 3}}));
}

// h2o decode tie, with the older token in a HIGHER slot than the newer one, so a policy that broke
// ties by slot order would evict the wrong token. C = 2, recent_fraction 0.5: R = 1, H = 1.
//   prefill (P = 2): t0 1.125, t1 0.875; slots [0, 1, -]
//   step 1 (+2 -> slot 2): 0:1.25 1:1.5 2:0.25; window {2}; min{0, 1} = 0 (slot 0) -> {1, 2}
//   step 2 (+3 -> slot 0): 1:1.5625 2:0.4375 3:0.75; window {3}; min{1, 2} = 2 (slot 2) -> {1, 3}
//   step 3 (+4 -> slot 2): 1:1.625 3:1.625 4:0.0625; window {4}; TIE between 1 (slot 1) and
//                          3 (slot 0): the older, 1, goes -> {3, 4}
//   step 4 (+5 -> slot 1): 3:2.125 4:0.3125 5:0.25; window {5}; min{3, 4} = 4 -> {3, 5}
TEST(PolicyTrace, H2oDecodeTieEvictsTheOlderToken) {
  const auto policy = make(PolicyKind::h2o, 2, 0.5);
  const Rows prefill = {{1.0f}, {0.125f, 0.875f}};
  const Rows decode = {{0.125f, 0.625f, 0.25f},
                       {0.0625f, 0.1875f, 0.75f},
                       {0.0625f, 0.875f, 0.0625f},
                       {0.5f, 0.25f, 0.25f}};
  CacheSimulator sim(*policy);
  EXPECT_EQ(sim.prefill(prefill), (std::vector<int>{0, 1}));
  auto step = sim.decode(decode[0]);
  EXPECT_EQ(step.evicted_position, 0);
  EXPECT_EQ(step.victim_slot, 0);
  step = sim.decode(decode[1]);
  EXPECT_EQ(step.evicted_position, 2);
  EXPECT_EQ(step.victim_slot, 2);
  step = sim.decode(decode[2]);
  EXPECT_EQ(step.slot_positions, (std::vector<std::int32_t>{3, 1, 4}));
  EXPECT_EQ(step.slot_scores, (std::vector<float>{1.625f, 1.625f, 0.0625f}));
  EXPECT_EQ(step.evicted_position, 1);
  EXPECT_EQ(step.victim_slot, 1);
  EXPECT_EQ(sim.kept(), (std::vector<int>{3, 4}));
  step = sim.decode(decode[3]);
  EXPECT_EQ(step.evicted_position, 4);
  EXPECT_EQ(sim.kept(), (std::vector<int>{3, 5}));
}

// h2o prefill tie for the only heavy slot: P = 5, C = 3 (R = 2, H = 1); t0 and t1 both 1.875.
// The newer one stays (the older one goes, as at decode).
TEST(PolicyTrace, H2oPrefillTieKeepsTheNewerToken) {
  const auto policy = make(PolicyKind::h2o, 3, 0.5);
  const Rows prefill = {
      {1.0f},
      {0.25f, 0.75f},
      {0.25f, 0.5f, 0.25f},
      {0.25f, 0.25f, 0.25f, 0.25f},
      {0.125f, 0.375f, 0.25f, 0.125f, 0.125f},
  };
  CacheSimulator sim(*policy);
  EXPECT_EQ(sim.prefill(prefill), (std::vector<int>{1, 3, 4}));
  EXPECT_EQ(sim.prefill_scores(), (std::vector<float>{1.875f, 1.875f, 0.75f, 0.375f, 0.125f}));
}

// h2o prefill tie at the boundary of the heavy set: P = 5, C = 4 (R = 2, H = 2); t0 2.25 is in,
// t1 and t2 tie at 1.0 for the second heavy slot: t2 (newer) stays.
TEST(PolicyTrace, H2oPrefillTieAtTheHeavyBoundaryKeepsTheNewerToken) {
  const auto policy = make(PolicyKind::h2o, 4, 0.5);
  const Rows prefill = {
      {1.0f},
      {0.5f, 0.5f},
      {0.25f, 0.125f, 0.625f},
      {0.25f, 0.25f, 0.25f, 0.25f},
      {0.25f, 0.125f, 0.125f, 0.25f, 0.25f},
  };
  CacheSimulator sim(*policy);
  EXPECT_EQ(sim.prefill(prefill), (std::vector<int>{0, 2, 3, 4}));
  EXPECT_EQ(sim.prefill_scores(), (std::vector<float>{2.25f, 1.0f, 1.0f, 0.5f, 0.25f}));
}

// recent_fraction 1: R = C, H = 0 -> h2o is local.
TEST(PolicyTrace, H2oWithRecentFractionOneIsLocal) {
  EXPECT_EQ(trace(*make(PolicyKind::h2o, 3, 1.0), kPrefill, kDecode),
            (Sets{{2, 3, 4}, {3, 4, 5}, {4, 5, 6}, {5, 6, 7}, {6, 7, 8}}));
}

// recent_fraction 0: R = max(1, 0) = 1, H = 2.
//   prefill: window {4}; heavy = top 2 of {t0 1.375, t1 1.5625, t2 0.8125, t3 0.75} -> {0, 1, 4}
//   step 1 (+5): 0:1.5 1:1.6875 4:0.75 5:0.5; window {5}; min{0, 1, 4} = 4 -> {0, 1, 5}
//   step 2 (+6): 0:1.5625 1:1.75 5:1.125 6:0.25; window {6}; min = 5 -> {0, 1, 6}
//   step 3 (+7): 0:1.625 1:2.5 6:0.375 7:0.0625; window {7}; min = 6 -> {0, 1, 7}
//   step 4 (+8): 0:1.875 1:2.75 7:0.3125 8:0.25; window {8}; min = 7 -> {0, 1, 8}
TEST(PolicyTrace, H2oWithRecentFractionZeroKeepsAWindowOfOne) {
  EXPECT_EQ(trace(*make(PolicyKind::h2o, 3, 0.0), kPrefill, kDecode),
            (Sets{{0, 1, 4}, {0, 1, 5}, {0, 1, 6}, {0, 1, 7}, {0, 1, 8}}));
}

TEST(PolicyErrors, FullVictimThrows) {
  const auto policy = make(PolicyKind::full, 3);
  const std::vector<std::int32_t> positions = {0, 1, 2, 3};
  EXPECT_THROW(policy->victim(positions, {}), Error);
}

TEST(PolicyErrors, FullPrefillLongerThanItsBudgetThrows) {
  const auto policy = make(PolicyKind::full, 3);
  EXPECT_THROW(policy->keep_after_prefill(5, {}), Error);
}

TEST(PolicyErrors, StreamingBudgetMustExceedTheSinks) {
  EXPECT_THROW(make(PolicyKind::streaming, 4, 0.5, 4), Error);
  EXPECT_THROW(make(PolicyKind::streaming, 3, 0.5, 4), Error);
  EXPECT_THROW(make(PolicyKind::streaming, 2), Error);  // default 4 sinks
  EXPECT_NO_THROW(make(PolicyKind::streaming, 5, 0.5, 4));
  EXPECT_NO_THROW(make(PolicyKind::streaming, 1, 0.5, 0));
  try {
    make(PolicyKind::streaming, 4, 0.5, 4);
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("sink"), std::string::npos) << message;
    EXPECT_NE(message.find('4'), std::string::npos) << message;
  }
}

TEST(PolicyErrors, NegativeSinksAreRejected) {
  EXPECT_THROW(make(PolicyKind::streaming, 4, 0.5, -1), Error);
}

TEST(PolicyErrors, RecentFractionMustBeInZeroOne) {
  EXPECT_THROW(make(PolicyKind::h2o, 8, -0.1), Error);
  EXPECT_THROW(make(PolicyKind::h2o, 8, 1.5), Error);
  EXPECT_NO_THROW(make(PolicyKind::h2o, 8, 0.0));
  EXPECT_NO_THROW(make(PolicyKind::h2o, 8, 1.0));
  try {
    make(PolicyKind::h2o, 8, 1.5);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("recent"), std::string::npos) << e.what();
  }
}

TEST(PolicyErrors, BudgetZeroIsRejectedForEveryPolicy) {
  for (PolicyKind kind :
       {PolicyKind::full, PolicyKind::local, PolicyKind::h2o, PolicyKind::streaming,
        PolicyKind::tova, PolicyKind::snapkv, PolicyKind::pyramidkv}) {
    SCOPED_TRACE(std::string(policy_name(kind)));
    EXPECT_THROW(make(kind, 0, 0.5, 0), Error);
    EXPECT_THROW(make(kind, -1, 0.5, 0), Error);
  }
}

TEST(PolicyNames, RoundTrip) {
  for (PolicyKind kind :
       {PolicyKind::full, PolicyKind::local, PolicyKind::h2o, PolicyKind::streaming,
        PolicyKind::tova, PolicyKind::snapkv, PolicyKind::pyramidkv}) {
    EXPECT_EQ(parse_policy(policy_name(kind)), kind);
  }
  EXPECT_EQ(policy_name(PolicyKind::full), "full");
  EXPECT_EQ(policy_name(PolicyKind::local), "local");
  EXPECT_EQ(policy_name(PolicyKind::h2o), "h2o");
  EXPECT_EQ(policy_name(PolicyKind::streaming), "streaming");
  EXPECT_EQ(policy_name(PolicyKind::tova), "tova");
  EXPECT_EQ(policy_name(PolicyKind::snapkv), "snapkv");
  EXPECT_EQ(policy_name(PolicyKind::pyramidkv), "pyramidkv");
  EXPECT_EQ(policy_name(PolicyKind::quest), "quest");
  EXPECT_EQ(policy_names(), (std::vector<std::string>{"full", "local", "h2o", "streaming", "tova",
                                                      "snapkv", "pyramidkv", "quest"}));
}

TEST(PolicyNames, ParseRejectsUnknownNamesAndListsTheChoices) {
  for (const std::string text : {"", "H2O", "lru", "stream", "full "}) {
    SCOPED_TRACE("'" + text + "'");
    EXPECT_THROW(parse_policy(text), Error);
    try {
      parse_policy(text);
    } catch (const Error& e) {
      const std::string message = e.what();
      for (const char* choice :
           {"full", "local", "h2o", "streaming", "tova", "snapkv", "pyramidkv"}) {
        EXPECT_NE(message.find(choice), std::string::npos) << message;
      }
    }
  }
}

TEST(PolicyFactory, KindBudgetAndNeedsScores) {
  for (PolicyKind kind :
       {PolicyKind::full, PolicyKind::local, PolicyKind::h2o, PolicyKind::streaming,
        PolicyKind::tova, PolicyKind::snapkv, PolicyKind::pyramidkv}) {
    const auto policy = make(kind, 7);
    EXPECT_EQ(policy->kind(), kind);
    EXPECT_EQ(policy->budget(), 7);
    EXPECT_EQ(policy->needs_attention_scores(),
              kind == PolicyKind::h2o || kind == PolicyKind::tova || kind == PolicyKind::snapkv ||
                  kind == PolicyKind::pyramidkv)
        << policy_name(kind);
  }
}

}  // namespace
}  // namespace offgen
