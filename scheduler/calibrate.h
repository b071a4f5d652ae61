// `offgen calibrate`: measures what the cost model needs on this machine and device — copy
// bandwidth between every pair of tiers the schedule uses (pinned and pageable host memory, each
// direction and both at once), the GEMM rate at a model's shapes, decode attention bandwidth on
// the device and on the CPU, and optionally a disk folder's read and write bandwidth — and saves
// them as a profile file the planner reads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/model_config.h"
#include "engine/runtime/device_setup.h"

namespace offgen {

struct Measurement {
  std::string name;    // e.g. "h2d_pinned"
  double value = 0;    // in `unit`
  std::string unit;    // "GB/s", "TFLOP/s"
  std::string detail;  // what exactly was timed
};

struct CalibrationOptions {
  std::uint64_t copy_bytes = std::uint64_t{256} << 20;  // per copy measurement
  int repeats = 3;                                      // best of
  std::filesystem::path disk;                           // empty: no disk measurement
};

// The most bytes of each device tier calibrate() holds at once with these shapes and options
// (its cpu attention and disk buffers are plain host memory, outside the device's tiers), on a
// device with `multiprocessors` (Device::multiprocessors: sizes decode attention's split scratch),
// with the int8 weight sets too when `int8_weights` (measures_int8: the cpu device).
struct CalibrationFootprint {
  std::uint64_t gpu = 0;
  std::uint64_t pinned = 0;
  std::uint64_t host = 0;
};
CalibrationFootprint calibration_footprint(const ModelConfig& model,
                                           const CalibrationOptions& options,
                                           int multiprocessors = 0, bool int8_weights = false);

// Runs every measurement on the opened device, with GEMM and attention shapes of `model`.
std::vector<Measurement> calibrate(OpenedDevice& device, const ModelConfig& model,
                                   const CalibrationOptions& options);

// Whether calibrate measures the bf16 prefill GEMMs (PrefillMath::bf16) on this device: the cpu
// device on a CPU with AVX512-BF16.
bool measures_bf16(const Device& device);
// Whether calibrate measures the GEMMs over int8 weights (--int8-weights): the cpu device.
bool measures_int8(const Device& device);

// The profile file: {"device": ..., "model": ..., "hidden_size": the shapes' hidden size,
// "measurements": {name: {value, unit, detail}}}.
nlohmann::json profile_json(const std::string& device_name, const std::string& model_name,
                            int hidden_size, const std::vector<Measurement>& measurements);

}  // namespace offgen
