// A machine profile written by hand, shaped like a PCIe GPU with a slow link: the planner's choices
// from it are deterministic (a calibration on this machine would not be).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "tests/support/test_support.h"

namespace offgen::test {

// Writes it as dir/profile.json and returns the path.
inline std::string write_profile(const std::filesystem::path& dir) {
  const auto path = dir / "profile.json";
  nlohmann::json profile = {{"device", "test"}};
  const std::pair<const char*, double> values[] = {{"h2d_pinned", 4},
                                                   {"d2h_pinned", 4},
                                                   {"gemm_fc1_m32", 50},
                                                   {"gemm_fc1_m512", 300},
                                                   {"decode_attention_device", 1500},
                                                   {"decode_attention_cpu", 60},
                                                   {"gemm_layer_int8_m1", 5},
                                                   {"gemm_layer_int8_m32", 100},
                                                   {"gemm_layer_int8_m128", 400},
                                                   {"gemm_layer_int8_m512", 600}};
  for (const auto& [name, value] : values) profile["measurements"][name] = {{"value", value}};
  write_file(path, profile.dump());
  return path.string();
}

}  // namespace offgen::test
