// quest (query-aware page selection) through the whole engine, on the golden checkpoints: a step
// attends to the pages its query bounds highest, and nothing is evicted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/runtime/engine.h"
#include "tests/support/golden.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

constexpr int kPageSize = 2;

std::vector<ScoreResult> score_with(PolicyKind kind, KvBudget budget, const std::string& model,
                                    CpuKernelSet kernels = CpuKernelSet::optimized,
                                    int dense_layers = 0) {
  EngineOptions options;
  options.model = (test::data_dir() / "golden" / model).string();
  options.device = DeviceChoice::cpu;
  options.cpu_kernels = kernels;
  options.placement.gpu_batch = 4;
  options.policy.kind = kind;
  options.policy.page_size = kPageSize;
  options.policy.dense_layers = dense_layers;
  options.kv_budget = budget;
  Engine engine(options);
  return engine.score(test::golden_score_requests(), 3);
}

class QuestOnModel : public ::testing::TestWithParam<std::string> {};

// A step attends to every token while the cache holds at most S pages (S = C / P); later tokens
// see only the sink, the newest page and the best bounds, so some log-probabilities move.
TEST_P(QuestOnModel, OnlyTokensPastTheBudgetOfPagesChange) {
  const int budget = 4;  // S = 2 pages of 2
  const auto full = score_with(PolicyKind::full, KvBudget{}, GetParam());
  const auto quest = score_with(PolicyKind::quest, KvBudget::tokens(budget), GetParam());
  ASSERT_EQ(full.size(), quest.size());
  bool any_different = false;
  for (std::size_t r = 0; r < full.size(); ++r) {
    ASSERT_TRUE(quest[r].error.empty()) << quest[r].error;
    for (std::size_t i = 1; i < quest[r].token_logprobs.size(); ++i) {
      const double got = quest[r].token_logprobs[i];
      ASSERT_TRUE(std::isfinite(got)) << "text " << r << " token " << i;
      // Token i is predicted by a step whose cache holds its i predecessors.
      if (i <= static_cast<std::size_t>(budget)) {
        EXPECT_EQ(got, full[r].token_logprobs[i]) << "text " << r << " token " << i;
      } else {
        any_different |= got != full[r].token_logprobs[i];
      }
    }
  }
  EXPECT_TRUE(any_different) << "a budget of " << budget << " never changed a log-probability";
}

TEST_P(QuestOnModel, BothKernelSetsAgree) {
  const auto optimized = score_with(PolicyKind::quest, KvBudget::tokens(6), GetParam());
  const auto reference =
      score_with(PolicyKind::quest, KvBudget::tokens(6), GetParam(), CpuKernelSet::reference);
  ASSERT_EQ(optimized.size(), reference.size());
  for (std::size_t r = 0; r < optimized.size(); ++r) {
    for (std::size_t i = 1; i < optimized[r].token_logprobs.size(); ++i) {
      // The golden tests' tolerance (fp16 activations, other summation orders); the pages chosen
      // are the same wherever the bounds are not within rounding of each other.
      EXPECT_NEAR(optimized[r].token_logprobs[i], reference[r].token_logprobs[i], 0.05)
          << "text " << r << " token " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, QuestOnModel,
                         ::testing::Values(std::string("tiny-preln"),
                                           std::string("tiny-llama-gqa")),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Dense layers attend every token: with both of the tiny models' layers dense, quest is full.
TEST_P(QuestOnModel, DenseLayersAttendEveryToken) {
  const auto full = score_with(PolicyKind::full, KvBudget{}, GetParam());
  const auto dense = score_with(PolicyKind::quest, KvBudget::tokens(4), GetParam(),
                                CpuKernelSet::optimized, /*dense_layers=*/2);
  const auto first_dense = score_with(PolicyKind::quest, KvBudget::tokens(4), GetParam(),
                                      CpuKernelSet::optimized, /*dense_layers=*/1);
  const auto none_dense = score_with(PolicyKind::quest, KvBudget::tokens(4), GetParam());
  bool one_differs = false;
  for (std::size_t r = 0; r < full.size(); ++r) {
    for (std::size_t i = 1; i < full[r].token_logprobs.size(); ++i) {
      EXPECT_EQ(dense[r].token_logprobs[i], full[r].token_logprobs[i]) << "text " << r;
      one_differs |= first_dense[r].token_logprobs[i] != none_dense[r].token_logprobs[i];
    }
  }
  EXPECT_TRUE(one_differs) << "a dense first layer changed nothing";
}

TEST(QuestEngine, RefusesAPageOfNoSlots) {
  EngineOptions options;
  options.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.device = DeviceChoice::cpu;
  options.policy.kind = PolicyKind::quest;
  options.kv_budget = KvBudget::fraction(0.2);
  options.policy.page_size = 0;
  EXPECT_THROW(Engine engine(options), Error);
  options.policy.page_size = 16;
  options.policy.dense_layers = -1;
  EXPECT_THROW(Engine engine(options), Error);
  options.policy.dense_layers = 2;
  options.kv_budget = {};  // quest needs a budget of tokens per step
  EXPECT_THROW(Engine engine(options), Error);
}

}  // namespace
}  // namespace offgen
