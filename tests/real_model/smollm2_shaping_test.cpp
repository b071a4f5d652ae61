// Penalties, logit_bias and min_tokens on a real model: SmolLM2-135M-Instruct's greedy
// continuations under each equal transformers' (fp32, tools/make_smollm2_shaping_golden.py:
// Hugging Face's repetition penalty and min_new_tokens, vLLM's frequency / presence penalties and
// logit_bias as logits processors), in one batch with the other cases and alone.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/runtime/engine.h"
#include "tests/support/real_model.h"

namespace offgen {
namespace {

nlohmann::json shaping_cases() {
  std::ifstream in(test::data_dir() / "golden" / "smollm2-q4_1" / "shaping.json");
  return nlohmann::json::parse(in)["cases"];
}

GenerationRequest request_of(const nlohmann::json& c) {
  GenerationRequest r;
  r.prompt = c["prompt_ids"].get<std::vector<std::int32_t>>();
  r.max_tokens = c["max_tokens"].get<int>();
  r.sampling.temperature = 0.0f;
  r.ignore_eos = c["ignore_eos"].get<bool>();
  r.shaping.repetition_penalty = c["repetition_penalty"].get<float>();
  r.shaping.frequency_penalty = c["frequency_penalty"].get<float>();
  r.shaping.presence_penalty = c["presence_penalty"].get<float>();
  r.shaping.min_tokens = c["min_tokens"].get<int>();
  for (const auto& [id, bias] : c["logit_bias"].items()) {
    r.shaping.logit_bias.emplace_back(std::stoi(id), bias.get<float>());
  }
  return r;
}

void expect_cases_match(int batch, const std::filesystem::path& model) {
  EngineOptions options;
  options.model = model.string();
  options.device = DeviceChoice::cpu;
  options.placement.gpu_batch = batch;
  Engine engine(options);
  const nlohmann::json cases = shaping_cases();
  std::vector<GenerationRequest> requests;
  for (const auto& c : cases) requests.push_back(request_of(c));
  const auto results = engine.generate(requests);
  ASSERT_EQ(results.size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i]["name"].get<std::string>());
    ASSERT_TRUE(results[i].error.empty()) << results[i].error;
    EXPECT_EQ(results[i].tokens, cases[i]["output_ids"].get<std::vector<std::int32_t>>());
  }
}

TEST(Smollm2Shaping, GreedyContinuationsUnderEachShapingAreTransformers) {
  const auto model = test::smollm2_gguf();
  if (!model) GTEST_SKIP() << test::kNoSmollm2;
  expect_cases_match(6, *model);  // every case in one left-padded batch
  expect_cases_match(1, *model);  // each alone
}

}  // namespace
}  // namespace offgen
