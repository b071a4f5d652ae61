// --int8-weights (Storage::int8, kernels/int8_matrix.h) through the whole engine on the cpu
// device: the layers are packed at load, kept, moved and streamed packed, and multiplied as they
// are, so every weight placement (resident, pinned, on disk, split) gives the resident run's
// scores and tokens bit for bit; the optimized kernels give the reference kernels' tokens; a
// request's results do not depend on its batch-mates; about half the bytes are kept and moved;
// the outputs stay close to the fp16 model's; with bf16 prefill math the GEMMs stay int8 and the
// prefill's attention runs in bf16. The cuda device refuses it by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/model/model_config.h"
#include "engine/runtime/engine.h"
#include "kernels/cpu/attention_bf16.h"
#include "scheduler/weight_layout.h"
#include "tests/support/golden.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

const std::filesystem::path kInt8Tiny = test::data_dir() / "golden" / "tiny-preln";
const std::filesystem::path kInt8TinyLlama = test::data_dir() / "golden" / "tiny-llama-gqa";

EngineOptions int8_options(const std::filesystem::path& model) {
  EngineOptions options;
  options.model = model.string();
  options.device = DeviceChoice::cpu;
  options.placement.gpu_batch = 4;
  options.compression.weights = Storage::int8;
  return options;
}

std::vector<GenerationRequest> int8_requests() {
  std::vector<GenerationRequest> requests;
  int n = 0;
  for (const ScoreRequest& text : test::golden_score_requests()) {
    GenerationRequest r;
    r.prompt.assign(text.tokens.begin(), text.tokens.begin() + 3 + (n % 4));
    r.max_tokens = 8;
    r.ignore_eos = true;
    r.sampling.temperature = n % 2 == 0 ? 0.0f : 0.9f;
    r.sampling.top_p = 0.9f;
    r.seed = 11 + static_cast<std::uint64_t>(n);
    r.logprobs = true;
    requests.push_back(r);
    ++n;
  }
  return requests;
}

class Int8WeightsOf : public ::testing::TestWithParam<std::filesystem::path> {};

TEST_P(Int8WeightsOf, EveryPlacementGivesTheResidentRunsBits) {
  const test::TempDir dir;
  Engine resident(int8_options(GetParam()));
  const auto texts = test::golden_score_requests();
  const auto want_scores = resident.score(texts, 3);
  const auto want = resident.generate(int8_requests());
  const WeightPlacement placements[] = {{0.4, 0.6}, {0.0, 1.0}, {0.2, 0.3}};
  for (const WeightPlacement& weights : placements) {
    SCOPED_TRACE(fmt::format("weights {}/{}/{} gpu/pinned/disk", weights.gpu, weights.pinned,
                             weights.disk()));
    EngineOptions options = int8_options(GetParam());
    options.placement.weights = weights;
    options.placement.block.num_gpu_batches = 2;
    options.disk = (dir.path() / "disk").string();
    std::filesystem::create_directories(options.disk);
    Engine placed(options);
    const auto scores = placed.score(texts, 3);
    for (std::size_t r = 0; r < texts.size(); ++r) {
      ASSERT_TRUE(scores[r].error.empty()) << scores[r].error;
      ASSERT_EQ(scores[r].token_logprobs.size(), want_scores[r].token_logprobs.size());
      for (std::size_t i = 1; i < scores[r].token_logprobs.size(); ++i) {  // 0 has none
        EXPECT_EQ(scores[r].token_logprobs[i], want_scores[r].token_logprobs[i])
            << "text " << r << " token " << i;
      }
    }
    const auto got = placed.generate(int8_requests());
    for (std::size_t r = 0; r < want.size(); ++r) {
      ASSERT_TRUE(got[r].error.empty()) << got[r].error;
      EXPECT_EQ(got[r].tokens, want[r].tokens) << "request " << r;
      EXPECT_EQ(got[r].token_logprobs, want[r].token_logprobs) << "request " << r;
    }
  }
}

// The int8 GEMMs equal their reference bit for bit (tests/kernels/cpu_int8_gemm.cpp); the other
// ops sum in other orders than the reference's, as in an fp16 run, so tokens agree and log-probs
// are close. Each request alone gives the bits it has among its batch-mates.
TEST_P(Int8WeightsOf, EqualTheReferenceKernelsAndDoNotDependOnBatchMates) {
  const std::vector<GenerationRequest> requests = int8_requests();
  EngineOptions fast_options = int8_options(GetParam());
  EngineOptions truth_options = fast_options;
  truth_options.cpu_kernels = CpuKernelSet::reference;
  EngineOptions alone_options = fast_options;
  alone_options.placement.gpu_batch = 1;
  Engine fast_engine(fast_options), truth_engine(truth_options), alone(alone_options);
  const auto fast = fast_engine.generate(requests);
  const auto truth = truth_engine.generate(requests);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "request " << i);
    ASSERT_TRUE(fast[i].error.empty()) << fast[i].error;
    EXPECT_EQ(fast[i].tokens, truth[i].tokens);
    ASSERT_EQ(fast[i].token_logprobs.size(), truth[i].token_logprobs.size());
    for (std::size_t t = 0; t < fast[i].token_logprobs.size(); ++t) {
      EXPECT_NEAR(fast[i].token_logprobs[t], truth[i].token_logprobs[t], 2e-3f) << "token " << t;
    }
    const GenerationResult one = alone.generate({&requests[i], 1}).front();
    EXPECT_EQ(one.tokens, fast[i].tokens);
    EXPECT_EQ(one.token_logprobs, fast[i].token_logprobs);
  }
}

// How far one run's whole-text scores moved off another's: the largest and the mean |Δ log p| over
// every token but each text's first (which has no log-prob of its own).
struct Drift {
  double max = 0, mean = 0;
};

void drift_of(const std::vector<ScoreResult>& got, const std::vector<ScoreResult>& want,
              Drift& out) {
  double sum = 0;
  std::size_t count = 0;
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t r = 0; r < got.size(); ++r) {
    ASSERT_TRUE(got[r].error.empty()) << got[r].error;
    ASSERT_EQ(got[r].token_logprobs.size(), want[r].token_logprobs.size());
    for (std::size_t i = 1; i < got[r].token_logprobs.size(); ++i) {
      const double d = std::abs(got[r].token_logprobs[i] - want[r].token_logprobs[i]);
      out.max = std::max(out.max, d);
      sum += d;
      ++count;
    }
  }
  ASSERT_GT(count, 0u);
  out.mean = sum / static_cast<double>(count);
}

// Whole-text scores move off the fp16 model's by int8 rounding: not nothing, and boundedly. (These
// random tiny models have one activation group per row, hidden 64, and are far less forgiving
// than a trained one: SmolLM2's perplexity moves by 1.2%, tests/real_model.)
TEST_P(Int8WeightsOf, StayCloseToTheFp16Model) {
  EngineOptions fp16 = int8_options(GetParam());
  fp16.compression.weights = Storage::fp16;
  Engine int8_engine(int8_options(GetParam())), fp16_engine(fp16);
  const auto texts = test::golden_score_requests();
  Drift moved;
  ASSERT_NO_FATAL_FAILURE(
      drift_of(int8_engine.score(texts, 3), fp16_engine.score(texts, 3), moved));
  EXPECT_GT(moved.max, 0.0) << "int8 weights gave the fp16 run's bits: they were not applied";
  EXPECT_LT(moved.mean, 0.3) << "mean |Δ log p|";
  EXPECT_LT(moved.max, 1.5);
}

// --prefill-math bf16 with int8 weights: the GEMMs stay int8 (their own math) and the prefill's
// attention runs in bf16 (kernels/cpu/attention_bf16.h). The scores move off the int8 run's by
// bf16 rounding of q, k, v and the probabilities: on these random models (sharp attention, hidden
// 64) a mean |Δ log p| of 0.03-0.05; on SmolLM2 the perplexity moves 0.4% (tests/real_model). A
// request's bits are its own.
TEST_P(Int8WeightsOf, WithBf16PrefillMathRunTheAttentionInBf16) {
  if (!kernels::cpu::use_bf16_prefill_attention({.prefill_math = kernels::PrefillMath::bf16})) {
    GTEST_SKIP() << "no bf16 attention here (no AVX512-BF16, or OFFGEN_CPU_ISA caps it)";
  }
  EngineOptions bf16_options = int8_options(GetParam());
  bf16_options.prefill_math = kernels::PrefillMath::bf16;
  Engine bf16_engine(bf16_options), int8_engine(int8_options(GetParam()));
  const auto texts = test::golden_score_requests();
  Drift moved;
  ASSERT_NO_FATAL_FAILURE(
      drift_of(bf16_engine.score(texts, 3), int8_engine.score(texts, 3), moved));
  std::printf("bf16 attention against int8 alone: mean |d log p| %.4f, max %.4f\n", moved.mean,
              moved.max);
  EXPECT_GT(moved.max, 0.0) << "bf16 attention gave the int8 run's bits: it was not applied";
  EXPECT_LT(moved.mean, 0.08) << "mean |d log p|";
  EXPECT_LT(moved.max, 0.3);
  const std::vector<GenerationRequest> requests = int8_requests();
  EngineOptions alone_options = bf16_options;
  alone_options.placement.gpu_batch = 1;
  Engine alone(alone_options);
  const auto together = bf16_engine.generate(requests);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "request " << i);
    ASSERT_TRUE(together[i].error.empty()) << together[i].error;
    const GenerationResult one = alone.generate({&requests[i], 1}).front();
    EXPECT_EQ(one.tokens, together[i].tokens);
    EXPECT_EQ(one.token_logprobs, together[i].token_logprobs);
  }
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, Int8WeightsOf, ::testing::Values(kInt8Tiny, kInt8TinyLlama),
                         [](const auto& param_info) {
                           std::string name = param_info.param.filename().string();
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(Int8Weights, KeepAndMoveAboutHalfTheBytes) {
  EngineOptions fp16 = int8_options(kInt8Tiny);
  fp16.compression.weights = Storage::fp16;
  fp16.placement.weights = {0.0, 1.0};
  EngineOptions int8 = fp16;
  int8.compression.weights = Storage::int8;
  Engine a(fp16), b(int8);
  ASSERT_GT(a.weight_offloaded_bytes(), 0u);
  const double ratio = static_cast<double>(b.weight_offloaded_bytes()) /
                       static_cast<double>(a.weight_offloaded_bytes());
  // One byte per weight plus a scale per row and a sum per row and 128 columns; on this tiny
  // model (hidden 64) the fp16 biases and norms, the 48-row panels' padding and the 256-byte
  // steps add a fifth.
  EXPECT_GT(ratio, 0.5);
  EXPECT_LT(ratio, 0.75);
  b.generate(int8_requests());
  a.generate(int8_requests());
  const double moved =
      static_cast<double>(b.weight_bytes_moved()) / static_cast<double>(a.weight_bytes_moved());
  EXPECT_NEAR(moved, ratio, 1e-9);
}

// At a real model's shapes the overheads are small: a byte per weight and 4 bytes of sums per 128
// of them, about 0.52 of fp16.
TEST(Int8Weights, HalveTheLayerBytesOfRealShapes) {
  for (const char* name : {"opt-125m", "opt-30b", "llama-3-8b"}) {
    SCOPED_TRACE(name);
    const ModelConfig config = ModelConfig::from_name(name).value();
    const double ratio = static_cast<double>(weight_layout(config, {}, Storage::int8).layer_bytes) /
                         static_cast<double>(weight_layout(config, {}).layer_bytes);
    EXPECT_GT(ratio, 0.5);
    EXPECT_LT(ratio, 0.52);
    // Nothing is expanded: no fp16 block beside the packed layers.
    EXPECT_EQ(weight_layout(config, {}, Storage::int8).held.at("expanded layer").bytes, 0u);
  }
}

void expect_refused(EngineOptions options, const std::string& message) {
  try {
    Engine e(options);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find(message), std::string::npos) << err.what();
  }
}

TEST(Int8Weights, TheCudaDeviceRefusesThemByName) {
  EngineOptions cuda = int8_options(kInt8Tiny);
  cuda.device = DeviceChoice::cuda;
  // Before the device is looked for: the same message with or without a GPU.
  expect_refused(cuda, "compression.weights = int8 is for the cpu device");
}

}  // namespace
}  // namespace offgen
