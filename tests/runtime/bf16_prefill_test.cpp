// --prefill-math bf16 (EngineOptions::prefill_math) through the engine, on OPT's real head size:
// the optimized kernels give the reference kernels' tokens (and their log-probs within the other
// ops' rounding: the bf16 GEMM itself equals its reference bit for bit), a request's results do
// not depend on its batch-mates, greedy and sampled, and the prefill really is multiplied in bf16
// (its log-probs differ from the exact run's, by about bf16's rounding). The cuda device refuses it
// by name.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/runtime/engine.h"
#include "kernels/cpu/cpu_features.h"
#include "tests/runtime/real_vocab_model.h"

namespace offgen {
namespace {

using kernels::PrefillMath;

std::vector<GenerationRequest> bf16_requests() {
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest r;
    r.prompt = {2};
    for (int t = 0; t < 3 + (i * 7) % 19; ++t) r.prompt.push_back(4 + (i * 41 + t * 17) % 900);
    r.max_tokens = 2 + i % 4;
    r.seed = 70 + static_cast<std::uint64_t>(i);
    r.ignore_eos = true;
    r.sampling = i % 2 == 0 ? SamplingParams{0.0f, 0, 1.0f} : SamplingParams{1.0f, 0, 0.9f};
    r.logprobs = true;
    requests.push_back(r);
  }
  return requests;
}

class Bf16PrefillEngine : public ::testing::Test {
 protected:
  void SetUp() override { test::write_real_vocab_model(dir_.path()); }
  Engine engine(CpuKernelSet kernels, PrefillMath math, int batch) {
    EngineOptions options;
    options.cpu_kernels = kernels;
    options.prefill_math = math;
    options.model = dir_.path().string();
    options.device = DeviceChoice::cpu;
    options.placement.gpu_batch = batch;
    return Engine(options);
  }
  test::TempDir dir_;
};

TEST_F(Bf16PrefillEngine, EqualsTheReferenceKernelsAndDoesNotDependOnBatchMates) {
  if (!kernels::cpu::cpu_features().bf16_gemm()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const std::vector<GenerationRequest> requests = bf16_requests();
  const auto fast = engine(CpuKernelSet::optimized, PrefillMath::bf16, 4).generate(requests);
  const auto truth = engine(CpuKernelSet::reference, PrefillMath::bf16, 4).generate(requests);
  Engine alone = engine(CpuKernelSet::optimized, PrefillMath::bf16, 1);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "request " << i);
    ASSERT_TRUE(fast[i].error.empty()) << fast[i].error;
    EXPECT_EQ(fast[i].tokens, truth[i].tokens);
    // The bf16 GEMMs agree bit for bit (tests/kernels/cpu_bf16_gemm.cpp); the other ops sum in
    // other orders than the reference's, as in an exact run.
    ASSERT_EQ(fast[i].token_logprobs.size(), truth[i].token_logprobs.size());
    for (std::size_t t = 0; t < fast[i].token_logprobs.size(); ++t) {
      EXPECT_NEAR(fast[i].token_logprobs[t], truth[i].token_logprobs[t], 2e-3f) << "token " << t;
    }
    const GenerationResult one = alone.generate({&requests[i], 1}).front();
    EXPECT_EQ(one.tokens, fast[i].tokens);
    EXPECT_EQ(one.token_logprobs, fast[i].token_logprobs);
  }
}

// The reference kernels run bf16 on any CPU; their first token's log-prob (the prefill's) moves
// off the exact one by bf16 rounding, no more.
TEST_F(Bf16PrefillEngine, MovesThePrefillByBf16RoundingOnly) {
  const std::vector<GenerationRequest> requests = bf16_requests();
  const auto bf16 = engine(CpuKernelSet::reference, PrefillMath::bf16, 4).generate(requests);
  const auto exact = engine(CpuKernelSet::reference, PrefillMath::fp32, 4).generate(requests);
  double moved = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ASSERT_FALSE(bf16[i].token_logprobs.empty());
    const double d = std::abs(bf16[i].token_logprobs[0] - exact[i].token_logprobs[0]);
    // Random weights over 4 layers: a few bf16 ulps (2^-8) of the logits, never more than 0.1.
    EXPECT_LT(d, 0.1) << "request " << i;
    moved = std::max(moved, d);
  }
  EXPECT_GT(moved, 0.0) << "bf16 prefill gave the exact run's bits: it was not applied";
}

TEST_F(Bf16PrefillEngine, TheCudaDeviceRefusesItByName) {
  EngineOptions options;
  options.prefill_math = PrefillMath::bf16;
  options.model = dir_.path().string();
  options.device = DeviceChoice::cuda;
  try {
    Engine e(options);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    // Before the device is looked for: the same message with or without a GPU.
    EXPECT_NE(std::string(err.what()).find("prefill_math bf16 is for the cpu device"),
              std::string::npos)
        << err.what();
  }
}

}  // namespace
}  // namespace offgen
