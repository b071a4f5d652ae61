// The golden fixtures (tests/data/golden/<model>/expected.json, made by tools/make_golden.py) as
// engine requests, for the test binaries that link the engine.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/runtime/engine.h"
#include "tests/support/test_support.h"

namespace offgen::test {

// The engine keeps activations in fp16 (fp32 accumulation) while the references are fp32: Hugging
// Face itself in fp16 differs from these fixtures by up to 0.026 nats on these models, so 0.05.
constexpr float kGoldenLogprobTolerance = 0.05f;
// The LLaMA family's fixtures add a term relative to the log-probability: the engine rounds the
// rotary cos / sin and the RMS-normalized rows to fp16 as transformers does in fp16, while the
// fp32 references do not, and the error grows with the logit's size. Measured worst: 0.084 nats
// on a -15.8 log-probability (tiny-mistral-bin), 0.082 on -23.3 (tiny-llama3-tied); every greedy
// token matches exactly.
constexpr float kGoldenLlamaRelativeTolerance = 0.005f;

inline nlohmann::json golden_expected(const std::string& model) {
  std::ifstream in(data_dir() / "golden" / model / "expected.json");
  return nlohmann::json::parse(in);
}

// A fixture's scored texts ("score": [{"token_ids": ...}]) as score requests.
inline std::vector<ScoreRequest> score_requests(const nlohmann::json& expected) {
  std::vector<ScoreRequest> requests;
  for (const auto& item : expected["score"]) {
    requests.push_back({item["token_ids"].get<std::vector<std::int32_t>>()});
  }
  return requests;
}

// The texts Hugging Face scored for `model`, as score requests.
inline std::vector<ScoreRequest> golden_score_requests(const std::string& model = "tiny-preln") {
  return score_requests(golden_expected(model));
}

// A fixture's generation prompts ({"prompts", "max_new_tokens"}) as greedy requests; EOS is
// ignored unless `eos_enabled` (Hugging Face generated with it disabled, unless told otherwise).
inline std::vector<GenerationRequest> greedy_requests(const nlohmann::json& fixture,
                                                      bool eos_enabled = false) {
  std::vector<GenerationRequest> requests;
  for (const auto& prompt : fixture["prompts"]) {
    GenerationRequest request;
    request.prompt = prompt.get<std::vector<std::int32_t>>();
    request.max_tokens = fixture["max_new_tokens"].get<int>();
    request.sampling.temperature = 0.0f;
    request.ignore_eos = !eos_enabled;
    requests.push_back(request);
  }
  return requests;
}

// The trained checkpoint models/opt-tiny-kjv-docs (its fixture: tools/make_trained_golden.py).
inline std::filesystem::path trained_model_dir() {
  return (data_dir() / ".." / ".." / "models" / "opt-tiny-kjv-docs").lexically_normal();
}

// Its fixture (tests/data/golden/opt-tiny-kjv-docs/expected.json).
inline nlohmann::json trained_golden_expected() {
  return golden_expected("opt-tiny-kjv-docs");
}

// Scores the fixture's texts with `engine` and checks every token's log-probability within
// `tolerance` of Hugging Face's and each text's mean error within `mean_tolerance`. Returns the
// results for further checks.
inline std::vector<ScoreResult> expect_trained_scores_match(Engine& engine,
                                                            const nlohmann::json& expected,
                                                            int prefill_tokens, double tolerance,
                                                            double mean_tolerance) {
  const std::vector<ScoreRequest> requests = score_requests(expected);
  auto results = engine.score(requests, prefill_tokens);
  EXPECT_EQ(results.size(), requests.size());
  for (std::size_t r = 0; r < results.size() && r < requests.size(); ++r) {
    SCOPED_TRACE(testing::Message()
                 << "text " << r << " (eval.jsonl line " << expected["score"][r]["eval_line"]
                 << "), prefill_tokens " << prefill_tokens);
    EXPECT_TRUE(results[r].error.empty()) << results[r].error;
    const auto& want = expected["score"][r]["token_logprobs"];
    EXPECT_EQ(results[r].token_logprobs.size(), want.size());
    if (results[r].token_logprobs.size() != want.size()) continue;
    double error_sum = 0.0;
    for (std::size_t i = 1; i < want.size(); ++i) {
      const double got = results[r].token_logprobs[i];
      EXPECT_TRUE(std::isfinite(got)) << "token " << i;
      EXPECT_NEAR(got, want[i].get<double>(), tolerance) << "token " << i;
      error_sum += got - want[i].get<double>();
    }
    EXPECT_NEAR(error_sum / static_cast<double>(want.size() - 1), 0.0, mean_tolerance)
        << "mean error over the text";
  }
  return results;
}

// Scores a fixture's texts ("score": [{"token_ids", "token_logprobs"}]) with `engine`, the first
// `prefill_tokens` of each as one prefill and the rest through the KV cache, and checks every
// log-probability within `tolerance` + `relative` x |expected|; the first is NaN (no context).
// Returns the largest difference seen.
inline float expect_scores_match(Engine& engine, const nlohmann::json& expected, int prefill_tokens,
                                 float tolerance, float relative) {
  const std::vector<ScoreRequest> requests = score_requests(expected);
  const auto results = engine.score(requests, prefill_tokens);
  EXPECT_EQ(results.size(), requests.size());
  float worst = 0.0f;
  for (std::size_t r = 0; r < results.size() && r < requests.size(); ++r) {
    SCOPED_TRACE(testing::Message() << "sequence " << r << ", prefill_tokens " << prefill_tokens);
    EXPECT_TRUE(results[r].error.empty()) << results[r].error;
    const auto& want = expected["score"][r]["token_logprobs"];
    if (results[r].token_logprobs.size() != want.size()) {
      ADD_FAILURE() << "got " << results[r].token_logprobs.size() << " log-probs, want "
                    << want.size();
      continue;
    }
    EXPECT_TRUE(std::isnan(results[r].token_logprobs[0]));
    for (std::size_t i = 1; i < want.size(); ++i) {
      const float got = results[r].token_logprobs[i];
      EXPECT_TRUE(std::isfinite(got)) << "token " << i;
      const float value = want[i].get<float>();
      worst = std::max(worst, std::abs(got - value));
      EXPECT_NEAR(got, value, tolerance + relative * std::abs(value)) << "token " << i;
    }
  }
  return worst;
}

}  // namespace offgen::test
