// Sampled generation as users run it: OPT's real head size (50272 rows) beside a tokenizer with
// fewer entries, mixed prompt lengths in one batch, and a request's tokens independent of its
// batch-mates — greedy and seeded sampling alike.
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "engine/runtime/engine.h"
#include "tests/runtime/real_vocab_model.h"

namespace offgen {
namespace {

std::vector<GenerationRequest> mixed_requests() {
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 12; ++i) {
    GenerationRequest r;
    r.prompt = {2};
    for (int t = 0; t < 1 + (i * 7) % 23; ++t) r.prompt.push_back(4 + (i * 31 + t * 17) % 990);
    r.max_tokens = 4 + i % 9;
    r.seed = 1000 + static_cast<std::uint64_t>(i);
    r.ignore_eos = true;
    switch (i % 4) {
      case 0:
        r.sampling = {0.0f, 0, 1.0f};  // greedy
        break;
      case 1:
        r.sampling = {1.0f, 0, 1.0f};
        break;
      case 2:
        r.sampling = {1.0f, 0, 0.9f};
        break;
      case 3:
        r.sampling = {0.7f, 40, 0.95f};
        break;
    }
    requests.push_back(r);
  }
  return requests;
}

class SampledGeneration : public ::testing::Test {
 protected:
  void SetUp() override { test::write_real_vocab_model(dir_.path()); }
  Engine engine(int batch, PolicyKind policy = PolicyKind::full, KvBudget kv_budget = {},
                CpuKernelSet kernels = CpuKernelSet::optimized) {
    EngineOptions options;
    options.cpu_kernels = kernels;
    options.model = dir_.path().string();
    options.device = DeviceChoice::cpu;
    options.placement.gpu_batch = batch;
    options.policy.kind = policy;
    options.policy.sinks = 2;
    options.policy.observation_window = 2;  // snapkv: a window that fits the small budgets
    options.policy.pool_kernel = 3;
    options.policy.page_size = 2;     // quest: pages small enough to choose among
    options.policy.dense_layers = 0;  // in both of the model's layers
    options.kv_budget = kv_budget;
    return Engine(options);
  }
  test::TempDir dir_;
};

TEST_F(SampledGeneration, EverySampledIdHasATokenizerEntry) {
  // With random weights nearly all of the mass sits on the 49272 ids the tokenizer lacks: none
  // may be drawn, and every result decodes.
  Engine e = engine(8);
  ASSERT_NE(e.tokenizer(), nullptr);
  const auto requests = mixed_requests();
  const auto results = e.generate(requests);
  int sampled = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].error.empty()) << results[i].error;
    ASSERT_EQ(results[i].tokens.size(), static_cast<std::size_t>(requests[i].max_tokens));
    if (requests[i].sampling.temperature == 0.0f) continue;
    for (std::int32_t id : results[i].tokens) {
      EXPECT_TRUE(e.tokenizer()->has_id(id)) << "request " << i << " drew id " << id;
      ++sampled;
    }
    EXPECT_NO_THROW(e.tokenizer()->decode(results[i].tokens));
  }
  EXPECT_GT(sampled, 50);
}

TEST_F(SampledGeneration, DifferentSeedsDrawDifferentTokens) {
  auto requests = mixed_requests();
  Engine e = engine(8);
  const auto first = e.generate(requests);
  for (auto& r : requests) r.seed += 77;
  const auto second = e.generate(requests);
  int differ = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].sampling.temperature == 0.0f) {
      EXPECT_EQ(first[i].tokens, second[i].tokens);  // greedy takes no draw
    } else {
      differ += first[i].tokens != second[i].tokens;
    }
  }
  EXPECT_GE(differ, 6);
}

// A policy and --kv-budget: fractions resolve per request (of its own prompt + max_tokens), so a
// request's cache, and so its tokens, are the same whatever it runs with.
struct PolicyCase {
  PolicyKind policy;
  KvBudget kv_budget;
};

class BatchMates : public SampledGeneration, public ::testing::WithParamInterface<PolicyCase> {};

TEST_P(BatchMates, ARequestsResultDoesNotDependOnItsBatchMates) {
  const auto [policy, kv_budget] = GetParam();
  const auto requests = mixed_requests();  // mixed lengths, greedy and seeded sampling
  Engine together = engine(8, policy, kv_budget);
  const auto batched = together.generate(requests);
  // Alone (as after an out-of-memory split down to one request), in reverse order among others
  // (other neighbours, other padding, other GPU batches), and as a resumed run that only has the
  // second half left to do.
  Engine single = engine(1, policy, kv_budget);
  Engine mixed = engine(5, policy, kv_budget);
  const std::vector<GenerationRequest> reversed(requests.rbegin(), requests.rend());
  const auto reversed_results = mixed.generate(reversed);
  const std::size_t half = requests.size() / 2;
  const auto resumed = together.generate(std::span(requests).subspan(half));
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(batched[i].error.empty()) << batched[i].error;
    const auto alone = single.generate(std::span(&requests[i], 1));
    EXPECT_EQ(alone[0].tokens, batched[i].tokens) << "request " << i << " alone";
    EXPECT_EQ(reversed_results[requests.size() - 1 - i].tokens, batched[i].tokens)
        << "request " << i << " among others";
    if (i >= half) {
      EXPECT_EQ(resumed[i - half].tokens, batched[i].tokens) << "request " << i << " resumed";
    }
  }

  // Scores through the cache (teacher forcing past a short prefill) the same way, bit for bit, on
  // both kernel sets: every CPU GEMM path sums an output in one order, whatever the row count.
  std::vector<ScoreRequest> texts;
  for (const auto& r : requests) {
    ScoreRequest t;
    t.tokens = r.prompt;
    for (int k = 0; k < 2 * r.max_tokens; ++k) t.tokens.push_back(4 + (k * 13 + 5) % 990);
    texts.push_back(t);
  }
  for (const CpuKernelSet kernels : {CpuKernelSet::reference, CpuKernelSet::optimized}) {
    Engine kernels_together = engine(8, policy, kv_budget, kernels);
    Engine kernels_single = engine(1, policy, kv_budget, kernels);
    const auto scored = kernels_together.score(texts, /*prefill_tokens=*/4);
    for (std::size_t i = 0; i < texts.size(); ++i) {
      const auto alone = kernels_single.score(std::span(&texts[i], 1), 4);
      ASSERT_EQ(alone[0].token_logprobs.size(), scored[i].token_logprobs.size());
      for (std::size_t t = 1; t < alone[0].token_logprobs.size(); ++t) {
        EXPECT_EQ(alone[0].token_logprobs[t], scored[i].token_logprobs[t])
            << "text " << i << " token " << t
            << (kernels == CpuKernelSet::reference ? " (reference)" : " (optimized)");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Policies, BatchMates,
    ::testing::Values(PolicyCase{PolicyKind::full, KvBudget{}},
                      PolicyCase{PolicyKind::local, KvBudget::fraction(0.3)},
                      PolicyCase{PolicyKind::h2o, KvBudget::fraction(0.3)},
                      PolicyCase{PolicyKind::streaming, KvBudget::fraction(0.4)},
                      PolicyCase{PolicyKind::h2o, KvBudget::tokens(6)},
                      PolicyCase{PolicyKind::tova, KvBudget::fraction(0.3)},
                      PolicyCase{PolicyKind::tova, KvBudget::tokens(6)},
                      PolicyCase{PolicyKind::snapkv, KvBudget::fraction(0.3)},
                      PolicyCase{PolicyKind::snapkv, KvBudget::tokens(6)},
                      PolicyCase{PolicyKind::pyramidkv, KvBudget::fraction(0.3)},
                      PolicyCase{PolicyKind::pyramidkv, KvBudget::tokens(6)},
                      PolicyCase{PolicyKind::quest, KvBudget::fraction(0.3)},
                      PolicyCase{PolicyKind::quest, KvBudget::tokens(6)}),
    [](const auto& param_info) {
      const PolicyCase& c = param_info.param;
      return std::string(policy_name(c.policy)) + "_" +
             std::to_string(static_cast<int>(c.kv_budget.value() * 10));
    });

}  // namespace
}  // namespace offgen
