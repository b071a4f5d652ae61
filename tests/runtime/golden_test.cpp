// Golden parity with Hugging Face's OPTForCausalLM: fixtures made by tools/make_golden.py from
// small random checkpoints (pre-LN; post-LN with project_in/out, sharded; bf16 without the
// "model." prefix), references computed in fp32 from the stored weights. Each runs from its
// safetensors files and again from the same weights saved by torch.save (<name>-bin, made by
// tools/make_torch_save_fixtures.py), against the same expected values.
// And with the LLaMA family's (tools/make_llama_golden.py): LlamaForCausalLM with grouped-query
// attention and an untied head; with LLaMA 3.1's rope scaling, tied, bf16, sharded;
// Qwen2ForCausalLM with q / k / v biases and one KV head; MistralForCausalLM from a .bin; and
// the LLaMA 3.1-scaled one again as transformers 5 saves it (rope_parameters).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/runtime/engine.h"
#include "tests/support/golden.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

bool is_llama_family(const std::string& model) {
  return model.find("llama") != std::string::npos || model.find("qwen2") != std::string::npos ||
         model.find("mistral") != std::string::npos;
}

// Each checkpoint runs on both cpu kernel sets: the TBB kernels and the naive references.
class Golden : public ::testing::TestWithParam<std::tuple<std::string, CpuKernelSet>> {
 protected:
  std::string name() const { return std::get<0>(GetParam()); }
  // The fixture holding the expected values: a -bin directory's safetensors twin.
  nlohmann::json expected() const {
    std::string model = name();
    const bool has_own =
        std::filesystem::exists(test::data_dir() / "golden" / model / "expected.json");
    if (model.ends_with("-bin") && !has_own) model.resize(model.size() - 4);
    return test::golden_expected(model);
  }
  EngineOptions options_for(const std::string& model, int batch) const {
    EngineOptions options;
    options.model = (test::data_dir() / "golden" / model).string();
    options.device = DeviceChoice::cpu;
    options.cpu_kernels = std::get<1>(GetParam());
    options.placement.gpu_batch = batch;
    return options;
  }
};

void expect_scores_match(Engine& engine, const nlohmann::json& expected, int prefill_tokens) {
  const bool llama = is_llama_family(expected["model"].get<std::string>());
  test::expect_scores_match(engine, expected, prefill_tokens, test::kGoldenLogprobTolerance,
                            llama ? test::kGoldenLlamaRelativeTolerance : 0.0f);
}

TEST_P(Golden, ScoreMatchesHuggingFaceAsOnePrefill) {
  const auto expected = this->expected();
  Engine engine(options_for(name(), 4));
  expect_scores_match(engine, expected, 0);
}

TEST_P(Golden, ScoreMatchesThroughTheKvCache) {
  // Teacher-forced decode steps through the cache give the same log-probabilities as one prefill.
  const auto expected = this->expected();
  Engine engine(options_for(name(), 3));
  expect_scores_match(engine, expected, 4);
  expect_scores_match(engine, expected, 1);
}

void expect_generation_matches(Engine& engine, const nlohmann::json& fixture, bool eos_enabled) {
  const auto results = engine.generate(test::greedy_requests(fixture, eos_enabled));
  for (std::size_t r = 0; r < results.size(); ++r) {
    SCOPED_TRACE(testing::Message() << "prompt " << r);
    ASSERT_TRUE(results[r].error.empty()) << results[r].error;
    const auto want = fixture["outputs"][r].get<std::vector<std::int32_t>>();
    EXPECT_EQ(results[r].tokens, want);
    const bool stopped = !want.empty() && want.back() == 2 && eos_enabled;
    EXPECT_EQ(results[r].finish, stopped ? FinishReason::stop : FinishReason::length);
  }
}

TEST_P(Golden, GreedyGenerationOfALeftPaddedBatchMatches) {
  const auto expected = this->expected();
  Engine engine(options_for(name(), 4));  // all four prompts in one left-padded batch
  expect_generation_matches(engine, expected["generate"], /*eos_enabled=*/false);
}

TEST_P(Golden, GreedyGenerationOneSequenceAtATimeMatches) {
  const auto expected = this->expected();
  Engine engine(options_for(name(), 1));
  expect_generation_matches(engine, expected["generate"], /*eos_enabled=*/false);
}

TEST_P(Golden, GenerationStopsAtEos) {
  const auto expected = this->expected();
  ASSERT_TRUE(expected.contains("generate_eos"));
  Engine engine(options_for(name(), 4));
  expect_generation_matches(engine, expected["generate_eos"], /*eos_enabled=*/true);
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, Golden,
    ::testing::Combine(::testing::Values("tiny-preln", "tiny-postln-proj", "tiny-bf16-noprefix",
                                         "tiny-preln-bin", "tiny-postln-proj-bin",
                                         "tiny-bf16-noprefix-bin", "tiny-llama-gqa",
                                         "tiny-llama3-tied", "tiny-llama3-tied-tf5",
                                         "tiny-qwen2-mqa", "tiny-mistral-bin"),
                       ::testing::Values(CpuKernelSet::optimized, CpuKernelSet::reference)),
    [](const auto& param_info) {
      std::string name = std::get<0>(param_info.param);
      for (char& c : name) {
        if (c == '-') c = '_';
      }
      return name +
             (std::get<1>(param_info.param) == CpuKernelSet::reference ? "_reference" : "_cpu");
    });

}  // namespace
}  // namespace offgen
