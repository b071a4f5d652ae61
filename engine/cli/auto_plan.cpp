// Planning a run when the user gave no placement: the machine profile (given, cached, or measured
// now and cached), the planner's request from the run's lengths and budgets, and the plan
// written into the engine options.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>

#include "bench/calibrate.h"
#include "engine/cli/commands.h"
#include "engine/core/error.h"
#include "engine/core/units.h"
#include "policies/kv_budget.h"

namespace offgen::cli {
namespace {

// "cpu (2 threads)" -> "cpu-2-threads": a file name from a device name.
std::string sanitize(const std::string& name) {
  std::string out;
  for (const char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "device" : out;
}

// The shapes a quick calibration measures GEMMs and attention at: the model's, but no bigger than
// opt-1.3b's, so it stays within seconds on a CPU.
OptConfig quick_shapes(const OptConfig& model) {
  const OptConfig cap = OptConfig::from_name("opt-1.3b").value();
  return model.hidden_size <= cap.hidden_size ? model : cap;
}

void write_profile(const std::filesystem::path& path, const nlohmann::json& profile) {
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  std::ofstream out(path);
  out << profile.dump(2) << '\n';
  if (!out.good()) spdlog::warn("could not cache the machine profile at {}", path.string());
}

}  // namespace

std::filesystem::path cached_profile_path(const std::string& device_name) {
  std::filesystem::path base;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    base = xdg;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    base = std::filesystem::path(home) / ".cache";
  } else {
    return {};
  }
  return base / "offgen" / ("profile-" + sanitize(device_name) + ".json");
}

MachineProfile resolve_profile(const std::string& path, OpenedDevice& opened,
                               const OptConfig& model) {
  if (!path.empty()) return MachineProfile::load(path);
  const std::string device = opened.device->name();
  const std::filesystem::path cached = cached_profile_path(device);
  if (!cached.empty() && std::filesystem::exists(cached)) {
    try {
      return MachineProfile::load(cached);
    } catch (const Error& e) {
      spdlog::warn("ignoring the cached profile: {}", e.what());
    }
  }
  const OptConfig shapes = quick_shapes(model);
  spdlog::info(
      "no machine profile for {}: a quick calibration at {} shapes (`offgen calibrate` measures "
      "more carefully)",
      device, shapes.name);
  bench::CalibrateOptions quick;
  quick.copy_bytes = std::uint64_t{64} << 20;
  quick.repeats = 1;
  const auto start = std::chrono::steady_clock::now();
  const auto measurements = bench::calibrate(opened, shapes, quick);
  const nlohmann::json profile = bench::profile_json(device, shapes.name, measurements);
  std::filesystem::path file = cached;
  if (!file.empty()) {
    write_profile(file, profile);
  } else {
    // Nowhere to cache it: a temporary file to load it back from.
    file =
        std::filesystem::temp_directory_path() / ("offgen-profile-" + sanitize(device) + ".json");
    write_profile(file, profile);
  }
  spdlog::debug("quick calibration took {:.2f} s",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return MachineProfile::load(file);
}

PlanRequest plan_request(const EngineOptions& engine, const Device& device, int prompt_len,
                         int gen_len, int total_len) {
  PlanRequest request;
  request.prompt_len = prompt_len;
  request.gen_len = gen_len;
  // The last generated token is never fed back: gen_len - 1 decode positions.
  request.kv_budget = policy_budget(engine.policy.kind, engine.kv_budget, prompt_len, gen_len - 1,
                                    total_len > 0 ? total_len : prompt_len + gen_len);
  request.scored_policy =
      make_policy(effective_policy(engine.policy, request.kv_budget), request.kv_budget)
          ->needs_scores();
  request.gpu_bytes = device.usage(Tier::gpu).budget;
  request.pinned_bytes = device.usage(Tier::pinned).budget;
  request.disk = !engine.disk.empty();
  return request;
}

std::optional<Plan> plan_automatically(const CommonOptions& common, const RunLengths& lengths,
                                       EngineOptions& engine, MachineProfile* profile_out) {
  if (common.placement != Placement::planned) return std::nullopt;
  const OptConfig model = model_config(common.model);
  OpenedDevice opened = open_device(engine.device, engine.budgets, engine.cpu_kernels);
  const MachineProfile profile = resolve_profile(common.profile, opened, model);
  if (profile_out != nullptr) *profile_out = profile;
  PlanRequest request =
      plan_request(engine, *opened.device, lengths.prompt_len, lengths.gen_len, lengths.total_len);
  request.max_sequences = lengths.sequences;
  request.block = lengths.block;
  const std::optional<Plan> plan = choose_plan(model, profile, request);
  if (!plan) {
    spdlog::warn(
        "planner: nothing fits gpu {} and pinned {} for prompt {} + gen {}; running with the "
        "default placement",
        format_bytes(request.gpu_bytes), format_bytes(request.pinned_bytes), lengths.prompt_len,
        lengths.gen_len);
    return plan;
  }
  apply_plan(*plan, engine);
  spdlog::info("planned for prompt {} + gen {}: {} (gpu {}, pinned {})", lengths.prompt_len,
               lengths.gen_len, plan->describe(), format_bytes(plan->gpu_bytes),
               format_bytes(plan->pinned_bytes));
  return plan;
}

}  // namespace offgen::cli
