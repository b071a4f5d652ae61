// config.json files written by transformers 5's own save_pretrained (the rope_parameters layout;
// tools/make_rope_config_fixtures.py), with the rotary inverse frequencies transformers computes
// for each: offgen reads theta and scaling from the new layout and gets the same frequencies, and
// refuses the rope types and the partial rotary it does not implement instead of running them
// as something else.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/model/model_config.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

std::filesystem::path rope_dir() {
  return test::data_dir() / "config" / "rope";
}

nlohmann::json expected() {
  return nlohmann::json::parse(test::read_file(rope_dir() / "expected.json"));
}

TEST(RopeConfigFiles, FrequenciesEqualTransformers5) {
  const nlohmann::json configs = expected()["configs"];
  int checked = 0;
  for (const char* file : {"llama-default.json", "llama3.json", "linear.json", "qwen2.json",
                           "mistral.json", "llama3-from-tf4.json"}) {
    SCOPED_TRACE(file);
    const ModelConfig config = ModelConfig::from_json_file(rope_dir() / file);
    const nlohmann::json& want = configs.at(file);
    EXPECT_EQ(config.rope_theta, want["rope_theta"].get<float>());
    const std::vector<float> got = config.rope_inv_freq();
    const auto inv_freq = want["inv_freq"].get<std::vector<float>>();
    ASSERT_EQ(got.size(), inv_freq.size());
    // transformers computes in fp32 (and torch's pow); a last-bit difference is the most allowed.
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], inv_freq[i], std::abs(inv_freq[i]) * 2e-7f) << "frequency " << i;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

TEST(RopeConfigFiles, WhatOffgenDoesNotImplementIsRefused) {
  const auto error = [](const char* file) {
    return test::error_of([file] { ModelConfig::from_json_file(rope_dir() / file); });
  };
  EXPECT_NE(error("dynamic.json").find("rope_parameters type 'dynamic' is not supported"),
            std::string::npos);
  // yarn's own fields are refused before its type is even looked at.
  EXPECT_NE(error("yarn.json").find("rope_parameters field 'beta_fast' is not supported"),
            std::string::npos);
  EXPECT_NE(error("phi.json").find("model_type is 'phi'"), std::string::npos);
}

}  // namespace
}  // namespace offgen
