// `offgen calibrate` measures every quantity the cost model needs, on the cpu device here.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "engine/core/error.h"
#include "scheduler/calibrate.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

// An OPT model, and a LLaMA one whose attention is measured over its (fewer) KV heads.
class CalibrateModel : public ::testing::TestWithParam<std::string> {};

TEST_P(CalibrateModel, MeasuresEveryQuantityWithPositiveFiniteValues) {
  test::TempDir disk;
  OpenedDevice opened = open_device(DeviceChoice::cpu, DeviceBudgets{});
  const ModelConfig model =
      ModelConfig::from_json_file(test::data_dir() / "golden" / GetParam() / "config.json");
  CalibrationOptions options;
  options.copy_bytes = 1 << 20;
  options.repeats = 1;
  options.disk = disk.path();
  const auto measurements = calibrate(opened, model, options);
  std::set<std::string> names;
  for (const auto& m : measurements) {
    names.insert(m.name);
    if (m.name == "copy_compute_overlap") {
      EXPECT_TRUE(m.value >= 0 && m.value <= 1) << m.value;  // a share: 0 on a loaded CPU
    } else if (m.name == "other_processes_load") {
      EXPECT_TRUE(std::isfinite(m.value) && m.value >= 0) << m.value;  // 0 on a quiet machine
    } else {
      EXPECT_TRUE(std::isfinite(m.value) && m.value > 0) << m.name << " = " << m.value;
    }
    EXPECT_FALSE(m.unit.empty()) << m.name;
  }
  for (const char* wanted :
       {"h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable", "duplex_pinned",
        "gemm_layer_m1", "gemm_layer_m32", "gemm_layer_m128", "gemm_layer_m512",
        "prefill_attention", "copy_compute_overlap", "decode_attention_device",
        "decode_attention_cpu", "disk_read", "disk_write", "other_processes_load"}) {
    EXPECT_TRUE(names.count(wanted)) << wanted;
  }
  EXPECT_EQ(names.count("prefill_attention_bf16"), measures_bf16(*opened.device) ? 1u : 0u);
  // The temporary file is gone.
  EXPECT_TRUE(std::filesystem::is_empty(disk.path()));

  const auto profile = profile_json(opened.device->name(), "tiny", 64, measurements);
  EXPECT_EQ(profile["measurements"].size(), measurements.size());
  EXPECT_DOUBLE_EQ(profile["measurements"]["h2d_pinned"]["value"].get<double>(),
                   measurements.front().value);
}

INSTANTIATE_TEST_SUITE_P(Models, CalibrateModel,
                         ::testing::Values(std::string("tiny-preln"),
                                           std::string("tiny-llama-gqa")),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

TEST(Calibrate, AMissingDiskFolderIsAnErrorNamingIt) {
  OpenedDevice opened = open_device(DeviceChoice::cpu, DeviceBudgets{});
  const ModelConfig model =
      ModelConfig::from_json_file(test::data_dir() / "golden" / "tiny-preln" / "config.json");
  CalibrationOptions options;
  options.copy_bytes = 1 << 20;
  options.repeats = 1;
  options.disk = "/nonexistent/offgen-disk";
  try {
    calibrate(opened, model, options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/offgen-disk"), std::string::npos);
  }
}

}  // namespace
}  // namespace offgen
