#include "engine/cli/commands.h"

#include "engine/core/units.h"

namespace offgen::cli {

const CLI::Validator kPositiveInteger(
    [](std::string& text) -> std::string {
      std::size_t used = 0;
      try {
        if (std::stoll(text, &used) >= 1 && used == text.size()) return {};
      } catch (const std::exception&) {
      }
      return "must be a positive integer (got '" + text + "')";
    },
    "POSITIVE");

const CLI::Validator kNonNegativeNumber(
    [](std::string& text) -> std::string {
      std::size_t used = 0;
      try {
        if (std::stod(text, &used) >= 0.0 && used == text.size()) return {};
      } catch (const std::exception&) {
      }
      return "must be a number >= 0 (got '" + text + "')";
    },
    ">=0");

const CLI::Validator kProbability(
    [](std::string& text) -> std::string {
      std::size_t used = 0;
      try {
        const double value = std::stod(text, &used);
        if (value > 0.0 && value <= 1.0 && used == text.size()) return {};
      } catch (const std::exception&) {
      }
      return "must be a number in (0, 1] (got '" + text + "')";
    },
    "(0,1]");

EngineOptions CommonOptions::engine_options() const {
  EngineOptions out;
  out.model = model;
  out.tokenizer = tokenizer;
  out.device = parse_device_choice(device);
  out.max_batch = batch_size;
  out.dummy_seed = dummy_seed;
  if (!gpu_mem.empty()) out.budgets.gpu = parse_bytes(gpu_mem);
  return out;
}

void add_common_options(CLI::App& app, CommonOptions& options) {
  app.add_option("--model", options.model,
                 "Hugging Face OPT checkpoint directory, or a config name (opt-125m ... opt-175b) "
                 "for deterministic dummy weights")
      ->capture_default_str();
  app.add_option("--tokenizer", options.tokenizer,
                 "directory with vocab.json + merges.txt (default: the model directory)");
  app.add_option("--device", options.device, "auto, cuda or cpu")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->capture_default_str();
  app.add_option("--batch-size", options.batch_size, "sequences per batch")
      ->check(kPositiveInteger)
      ->capture_default_str();
  app.add_option("--gpu-mem", options.gpu_mem,
                 "memory budget of the gpu tier, e.g. 16GiB (default: what the device has)");
  app.add_option("--dummy-seed", options.dummy_seed, "seed of dummy weights (config-name models)")
      ->capture_default_str();
}

}  // namespace offgen::cli
