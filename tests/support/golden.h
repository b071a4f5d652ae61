// The golden fixtures (tests/data/golden/<model>/expected.json, made by tools/make_golden.py) as
// engine requests, for the test binaries that link the engine.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/runtime/engine.h"
#include "tests/support/test_support.h"

namespace offgen::test {

inline nlohmann::json golden_expected(const std::string& model) {
  std::ifstream in(data_dir() / "golden" / model / "expected.json");
  return nlohmann::json::parse(in);
}

// The texts Hugging Face scored for `model`, as score requests.
inline std::vector<ScoreRequest> golden_score_requests(const std::string& model = "tiny-preln") {
  const nlohmann::json expected = golden_expected(model);  // outlives the loop over its items
  std::vector<ScoreRequest> requests;
  for (const auto& item : expected["score"]) {
    requests.push_back({item["token_ids"].get<std::vector<std::int32_t>>()});
  }
  return requests;
}

}  // namespace offgen::test
