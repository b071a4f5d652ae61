// KV eviction policies through the whole engine, on the golden checkpoints.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/runtime/block_runner.h"
#include "engine/runtime/engine.h"
#include "tests/support/golden.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

std::vector<ScoreResult> score_with(PolicyKind kind, KvBudget budget, int prefill_tokens,
                                    CpuKernelSet kernels = CpuKernelSet::optimized,
                                    const std::string& model = "tiny-preln") {
  EngineOptions options;
  options.model = (test::data_dir() / "golden" / model).string();
  options.device = DeviceChoice::cpu;
  options.cpu_kernels = kernels;
  options.placement.gpu_batch = 4;
  options.policy.kind = kind;
  options.policy.sinks = 2;
  options.policy.observation_window = 2;  // snapkv: a window that fits the small budgets
  options.policy.pool_kernel = 3;
  options.policy.dense_layers = 0;  // quest selects in both of the tiny models' layers
  options.kv_budget = budget;
  Engine engine(options);
  return engine.score(test::golden_score_requests(), prefill_tokens);
}

// Each policy on an OPT checkpoint and on a LLaMA one (grouped-query attention: the policies keep
// and score per KV head).
using PolicyOnModel = std::tuple<PolicyKind, std::string>;
std::string policy_on_model_name(const ::testing::TestParamInfo<PolicyOnModel>& info) {
  std::string model = std::get<1>(info.param);
  std::replace(model.begin(), model.end(), '-', '_');
  return std::string(policy_name(std::get<0>(info.param))) + "_" + model;
}

class EveryPolicy : public ::testing::TestWithParam<PolicyOnModel> {
 protected:
  PolicyKind policy() const { return std::get<0>(GetParam()); }
  const std::string& model() const { return std::get<1>(GetParam()); }
};

TEST_P(EveryPolicy, ABudgetAsLongAsTheTextGivesExactlyFullsLogprobs) {
  const auto full = score_with(PolicyKind::full, KvBudget{}, 3, CpuKernelSet::optimized, model());
  // >= every text's length
  const auto policy =
      score_with(this->policy(), KvBudget::tokens(64), 3, CpuKernelSet::optimized, model());
  ASSERT_EQ(full.size(), policy.size());
  for (std::size_t r = 0; r < full.size(); ++r) {
    ASSERT_TRUE(policy[r].error.empty()) << policy[r].error;
    for (std::size_t i = 1; i < full[r].token_logprobs.size(); ++i) {
      EXPECT_EQ(policy[r].token_logprobs[i], full[r].token_logprobs[i])
          << "text " << r << " token " << i;
    }
  }
}

// The policies that evict (full keeps everything; the golden tests cover it).
using EvictingPolicy = EveryPolicy;

TEST_P(EvictingPolicy, ASmallBudgetChangesLaterTokensOnlyAndStaysFinite) {
  const int budget = 6;
  const int prefill = 3;
  const auto full =
      score_with(PolicyKind::full, KvBudget{}, prefill, CpuKernelSet::optimized, model());
  const auto policy = score_with(this->policy(), KvBudget::tokens(budget), prefill,
                                 CpuKernelSet::optimized, model());
  bool any_different = false;
  for (std::size_t r = 0; r < full.size(); ++r) {
    const auto& got = policy[r].token_logprobs;
    for (std::size_t i = 1; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << "text " << r << " token " << i;
      // Until the cache first overflows (C tokens cached, plus the new one), nothing differs.
      if (i <= static_cast<std::size_t>(budget) + 1) {
        EXPECT_EQ(got[i], full[r].token_logprobs[i]) << "text " << r << " token " << i;
      } else if (got[i] != full[r].token_logprobs[i]) {
        any_different = true;
      }
    }
  }
  EXPECT_TRUE(any_different) << "a budget of " << budget << " never changed a log-probability";
}

TEST_P(EvictingPolicy, BothKernelSetsAgree) {
  const auto optimized =
      score_with(policy(), KvBudget::tokens(8), 2, CpuKernelSet::optimized, model());
  const auto reference =
      score_with(policy(), KvBudget::tokens(8), 2, CpuKernelSet::reference, model());
  for (std::size_t r = 0; r < optimized.size(); ++r) {
    for (std::size_t i = 1; i < optimized[r].token_logprobs.size(); ++i) {
      // Same tolerance as the golden tests: fp16 activations, different summation orders.
      EXPECT_NEAR(optimized[r].token_logprobs[i], reference[r].token_logprobs[i], 0.05)
          << "text " << r << " token " << i;
    }
  }
}

const auto kModels = ::testing::Values(std::string("tiny-preln"), std::string("tiny-llama-gqa"));
INSTANTIATE_TEST_SUITE_P(Policies, EvictingPolicy,
                         ::testing::Combine(::testing::Values(PolicyKind::local, PolicyKind::h2o,
                                                              PolicyKind::streaming,
                                                              PolicyKind::tova, PolicyKind::snapkv),
                                            kModels),
                         policy_on_model_name);
INSTANTIATE_TEST_SUITE_P(
    Policies, EveryPolicy,
    ::testing::Combine(::testing::Values(PolicyKind::full, PolicyKind::local, PolicyKind::h2o,
                                         PolicyKind::streaming, PolicyKind::tova,
                                         PolicyKind::snapkv, PolicyKind::quest),
                       kModels),
    policy_on_model_name);

// pyramidkv's upper layers keep fewer than C tokens, so even a budget as long as the text can
// change log-probabilities; they stay finite, and both kernel sets agree.
TEST(PolicyEngine, PyramidKvScoresFinitelyOnBothKernelSets) {
  const auto optimized =
      score_with(PolicyKind::pyramidkv, KvBudget::tokens(8), 2, CpuKernelSet::optimized);
  const auto reference =
      score_with(PolicyKind::pyramidkv, KvBudget::tokens(8), 2, CpuKernelSet::reference);
  const auto full = score_with(PolicyKind::full, KvBudget{}, 2);
  bool any_different = false;
  for (std::size_t r = 0; r < optimized.size(); ++r) {
    ASSERT_TRUE(optimized[r].error.empty()) << optimized[r].error;
    for (std::size_t i = 1; i < optimized[r].token_logprobs.size(); ++i) {
      ASSERT_TRUE(std::isfinite(optimized[r].token_logprobs[i])) << "text " << r << " token " << i;
      EXPECT_NEAR(optimized[r].token_logprobs[i], reference[r].token_logprobs[i], 0.05)
          << "text " << r << " token " << i;
      any_different |= optimized[r].token_logprobs[i] != full[r].token_logprobs[i];
    }
  }
  EXPECT_TRUE(any_different);
}

TEST(PolicyEngine, AFractionalBudgetShrinksTheKvCache) {
  EngineOptions options;
  options.model = "dummy:opt-125m";
  options.device = DeviceChoice::cpu;
  Engine full(options);
  const std::uint64_t full_bytes = full.make_runner(2, 512, 511, 1024)->kv_bytes();
  options.policy.kind = PolicyKind::h2o;
  options.kv_budget = KvBudget::fraction(0.2);
  Engine h2o(options);
  const std::uint64_t h2o_bytes = h2o.make_runner(2, 512, 511, 1024)->kv_bytes();
  // C = ceil(0.2 * 1024) = 205 (+1 spare slot) against 1023 (+1).
  EXPECT_LE(static_cast<double>(h2o_bytes), 0.21 * static_cast<double>(full_bytes));
}

TEST(PolicyEngine, PoliciesOtherThanFullNeedABudget) {
  EngineOptions options;
  options.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.device = DeviceChoice::cpu;
  options.policy.kind = PolicyKind::local;
  EXPECT_THROW(Engine engine(options), Error);
}

}  // namespace
}  // namespace offgen

namespace offgen {
namespace {

TEST(StopHook, EndsARequestWhereItSaysSoWithFinishStop) {
  EngineOptions options;
  options.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.device = DeviceChoice::cpu;
  Engine engine(options);
  std::vector<GenerationRequest> requests(2);
  for (GenerationRequest& r : requests) {
    r.prompt = test::golden_score_requests().front().tokens;
    r.prompt.resize(4);
    r.max_tokens = 8;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
  }
  int calls = 0;
  requests[0].stop = [&](std::span<const std::int32_t> generated) {
    ++calls;
    return generated.size() == 3;
  };
  const auto results = engine.generate(requests);
  EXPECT_EQ(calls, 3);
  ASSERT_EQ(results[0].tokens.size(), 3u);
  EXPECT_EQ(results[0].finish, FinishReason::stop);
  ASSERT_EQ(results[1].tokens.size(), 8u);  // its neighbour in the batch runs on
  EXPECT_EQ(results[1].finish, FinishReason::length);
  // The first three tokens are the same either way.
  EXPECT_TRUE(
      std::equal(results[0].tokens.begin(), results[0].tokens.end(), results[1].tokens.begin()));
}

}  // namespace
}  // namespace offgen
