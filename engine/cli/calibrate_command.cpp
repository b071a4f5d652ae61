#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "bench/rewritten_file.h"
#include "engine/cli/commands.h"
#include "engine/core/error.h"
#include "engine/core/units.h"
#include "engine/runtime/engine.h"
#include "scheduler/calibrate.h"

namespace offgen::cli {

void add_calibrate_command(CLI::App& app, CalibrateOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "measure this machine for the cost model (copy bandwidths, GEMM rate, attention "
      "bandwidth, disk) and save a profile");
  cmd->add_option("--device", options.device, "auto, cuda or cpu")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->capture_default_str();
  cmd->add_option("--model", options.model,
                  "whose shapes the GEMM and attention measurements use: a config name, "
                  "dummy:NAME, a checkpoint directory or a Hugging Face name in the local cache "
                  "(only its config.json is read)")
      ->capture_default_str();
  cmd->add_option("--output", options.output,
                  "profile file (JSON); default: the device's cached profile, which generate, "
                  "score, bench and plan use when no --profile is given");
  cmd->add_option("--copy-size", options.copy_size,
                  "bytes per copy measurement, e.g. 256MiB; also the most weights the GEMM "
                  "measurement cycles through (copies of a layer's, one per model layer)")
      ->capture_default_str();
  cmd->add_option("--disk", options.disk, "also measure read / write bandwidth in this folder");
  cmd->add_option("--repeats", options.repeats, "best of this many runs per measurement")
      ->check(kPositiveInteger)
      ->capture_default_str();
}

int run_calibrate(const CalibrateOptions& options) {
  // Only the shapes matter here, so a bare config name is as good as dummy:NAME.
  const ModelConfig model =
      resolve_model_name(options.model, BareConfigName::dummy_weights).config();
  CalibrationOptions settings;
  settings.copy_bytes = parse_bytes(options.copy_size);
  settings.repeats = options.repeats;
  settings.disk = options.disk;
  OpenedDevice opened = open_device(parse_device_choice(options.device), DeviceBudgets{});
  const std::string device_name = opened.device->name();
  fmt::print("device: {}   shapes of: {}\n", device_name, options.model);
  const auto measurements = calibrate(opened, model, settings);
  for (const Measurement& m : measurements) {
    fmt::print("{:<26} {:>10.2f} {:<8} {}\n", m.name, m.value, m.unit, m.detail);
  }
  const std::string text =
      profile_json(device_name, options.model, model.hidden_size, measurements).dump(2) + "\n";
  std::filesystem::path output = options.output;
  if (output.empty()) {
    output = cached_profile_path(device_name, model.hidden_size);
    OFFGEN_CHECK(!output.empty(),
                 "neither XDG_CACHE_HOME nor HOME is set, so there is no cache for the profile: "
                 "give --output FILE");
    std::error_code error;
    std::filesystem::create_directories(output.parent_path(), error);
    // The cache is read by every run on this machine, perhaps while this one writes it: replaced
    // at once, never seen half written.
    bench::write_file_atomically(output, text);
  } else {
    std::ofstream out(output);  // --output may be a pipe or a device, which cannot be renamed over
    OFFGEN_CHECK(out.good(), "cannot write the profile to {}", output.string());
    out << text;
    OFFGEN_CHECK(out.good(), "writing the profile to {} failed", output.string());
  }
  fmt::print("profile written to {}\n", output.string());
  return 0;
}

}  // namespace offgen::cli
