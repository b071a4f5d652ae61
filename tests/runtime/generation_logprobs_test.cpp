// Log-probabilities of generated tokens (GenerationRequest::logprobs): each token's
// log p(token | prompt, earlier tokens) under the model, read on the device as the token is
// picked. Checked against the scoring path (one prefill over prompt + generated tokens), for
// greedy and sampled requests of mixed lengths on OPT's real head size, on both CPU kernel sets;
// a request's log-probs do not depend on its batch-mates; requests that do not ask get none.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/runtime/engine.h"
#include "tests/runtime/real_vocab_model.h"

namespace offgen {
namespace {

// The scoring path runs one prefill, generation a prefill and decode steps: the same math in
// another order of fp16 roundings.
constexpr float kTolerance = 2e-3f;

std::vector<GenerationRequest> requests_with_logprobs() {
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest r;
    r.prompt = {2};
    for (int t = 0; t < 2 + (i * 5) % 11; ++t) r.prompt.push_back(4 + (i * 37 + t * 13) % 900);
    r.max_tokens = 3 + i % 4;
    r.seed = 50 + static_cast<std::uint64_t>(i);
    r.ignore_eos = true;
    r.sampling = i % 2 == 0 ? SamplingParams{0.0f, 0, 1.0f} : SamplingParams{1.0f, 0, 0.9f};
    r.logprobs = i != 5;  // the last asks for none
    requests.push_back(r);
  }
  return requests;
}

class GenerationLogprobs : public ::testing::TestWithParam<CpuKernelSet> {
 protected:
  void SetUp() override { test::write_real_vocab_model(dir_.path()); }
  Engine engine(int batch) {
    EngineOptions options;
    options.cpu_kernels = GetParam();
    options.model = dir_.path().string();
    options.device = DeviceChoice::cpu;
    options.placement.gpu_batch = batch;
    return Engine(options);
  }
  test::TempDir dir_;
};

TEST_P(GenerationLogprobs, EqualTheScoresOfTheGeneratedTokens) {
  Engine e = engine(4);
  const std::vector<GenerationRequest> requests = requests_with_logprobs();
  const std::vector<GenerationResult> results = e.generate(requests);
  const std::vector<ScoreResult> scores = test::scores_of_generated(e, requests, results);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "request " << i);
    ASSERT_TRUE(results[i].error.empty()) << results[i].error;
    if (!requests[i].logprobs) {
      EXPECT_TRUE(results[i].token_logprobs.empty());
      continue;
    }
    ASSERT_EQ(results[i].token_logprobs.size(), results[i].tokens.size());
    for (std::size_t t = 0; t < results[i].tokens.size(); ++t) {
      const float want = scores[i].token_logprobs[requests[i].prompt.size() + t];
      const float got = results[i].token_logprobs[t];
      EXPECT_LE(got, 0.0f);
      EXPECT_NEAR(got, want, kTolerance) << "token " << t;
    }
  }
}

TEST_P(GenerationLogprobs, DoNotDependOnBatchMates) {
  const std::vector<GenerationRequest> requests = requests_with_logprobs();
  const std::vector<GenerationResult> together = engine(4).generate(requests);
  Engine alone = engine(1);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const std::vector<GenerationResult> one =
        alone.generate(std::span<const GenerationRequest>(&requests[i], 1));
    EXPECT_EQ(one[0].tokens, together[i].tokens) << i;
    EXPECT_EQ(one[0].token_logprobs, together[i].token_logprobs) << i;  // bit for bit
  }
}

// top_logprobs k: at each token the k most likely ids, most likely first, each with the log-prob
// the token's own read gives it (a greedy token is the first of its list, with its own value bit
// for bit); a request asking fewer than a batch-mate gets its own k; nothing depends on the mates.
TEST_P(GenerationLogprobs, TopLogprobsAreTheMostLikelyIdsWithTheirOwnValues) {
  std::vector<GenerationRequest> requests = requests_with_logprobs();
  requests[0].top_logprobs = 5;
  requests[1].top_logprobs = 20;
  requests[2].top_logprobs = 1;
  requests[2].shaping.repetition_penalty = 2.0f;  // edited picks, raw alternatives
  const std::vector<GenerationResult> together = engine(4).generate(requests);
  Engine alone = engine(1);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "request " << i);
    const GenerationResult& r = together[i];
    if (requests[i].top_logprobs == 0) {
      EXPECT_TRUE(r.top_logprobs.empty());
      continue;
    }
    ASSERT_EQ(r.top_logprobs.size(), r.tokens.size());
    for (std::size_t t = 0; t < r.tokens.size(); ++t) {
      const auto& top = r.top_logprobs[t];
      ASSERT_EQ(top.size(), static_cast<std::size_t>(requests[i].top_logprobs));
      for (std::size_t j = 1; j < top.size(); ++j) EXPECT_GE(top[j - 1].second, top[j].second);
      EXPECT_GE(top[0].second, r.token_logprobs[t]);
      const bool greedy = requests[i].sampling.temperature == 0.0f;
      if (greedy && requests[i].shaping.repetition_penalty == 1.0f) {
        EXPECT_EQ(top[0].first, r.tokens[t]);
        EXPECT_EQ(top[0].second, r.token_logprobs[t]);
      }
      for (const auto& [id, value] : top) {
        if (id == r.tokens[t]) {
          EXPECT_EQ(value, r.token_logprobs[t]);
        }
      }
    }
    const GenerationResult one = alone.generate({&requests[i], 1}).front();
    EXPECT_EQ(one.top_logprobs, r.top_logprobs);
  }
}

INSTANTIATE_TEST_SUITE_P(KernelSets, GenerationLogprobs,
                         ::testing::Values(CpuKernelSet::optimized, CpuKernelSet::reference));

}  // namespace
}  // namespace offgen
