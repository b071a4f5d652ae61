// bf16 prefill (--prefill-math bf16) on the real SmolLM2-135M-Instruct: the perplexity of the
// texts transformers scored stays within 1% of the exact run's and of transformers' own, and a
// greedy request's continuation does not depend on its batch-mates. How many continuations stay
// the exact run's is printed, not asserted: one bf16 rounding can flip a near tie.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "engine/runtime/engine.h"
#include "kernels/cpu/cpu_features.h"
#include "tests/support/golden.h"
#include "tests/support/real_model.h"

namespace offgen {
namespace {

using kernels::PrefillMath;

class Smollm2Bf16 : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto found = test::smollm2_gguf();
    if (!found) GTEST_SKIP() << test::kNoSmollm2;
    if (!kernels::cpu::cpu_features().bf16_gemm()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
    path_ = *found;
  }
  Engine engine(PrefillMath math, int batch) const {
    EngineOptions options;
    options.model = path_.string();
    options.device = DeviceChoice::cpu;
    options.placement.gpu_batch = batch;
    options.prefill_math = math;
    return Engine(options);
  }
  std::filesystem::path path_;
};

TEST_F(Smollm2Bf16, PerplexityStaysWithinOnePercentOfExactAndOfTransformers) {
  const nlohmann::json fixture = test::golden_expected("smollm2-q4_1");
  const std::vector<ScoreRequest> requests = test::score_requests(fixture);
  const auto scored = [&](PrefillMath math) {
    std::vector<std::vector<float>> out;
    for (const ScoreResult& r : engine(math, 4).score(requests)) {
      EXPECT_TRUE(r.error.empty()) << r.error;
      out.push_back(r.token_logprobs);
    }
    return test::perplexity_of(out);
  };
  const double bf16 = scored(PrefillMath::bf16);
  const double exact = scored(PrefillMath::fp32);
  const double transformers = test::perplexity_of(test::fixture_logprobs(fixture));
  std::printf("perplexity: bf16 %.4f, exact %.4f, transformers %.4f\n", bf16, exact, transformers);
  EXPECT_NEAR(bf16 / exact, 1.0, 0.01);
  EXPECT_NEAR(bf16 / transformers, 1.0, 0.01);
}

TEST_F(Smollm2Bf16, AGreedyContinuationDoesNotDependOnItsBatchMates) {
  const nlohmann::json fixture = test::golden_expected("smollm2-q4_1")["generate"];
  const std::vector<GenerationRequest> requests = test::greedy_requests(fixture);
  const auto together = engine(PrefillMath::bf16, 8).generate(requests);
  const auto exact = engine(PrefillMath::fp32, 8).generate(requests);
  Engine alone = engine(PrefillMath::bf16, 1);
  int same_as_exact = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "prompt " << i);
    ASSERT_TRUE(together[i].error.empty()) << together[i].error;
    EXPECT_EQ(alone.generate({&requests[i], 1}).front().tokens, together[i].tokens);
    same_as_exact += together[i].tokens == exact[i].tokens ? 1 : 0;
  }
  std::printf("greedy continuations equal to the exact run's: %d of %zu\n", same_as_exact,
              requests.size());
}

}  // namespace
}  // namespace offgen
