// Planning a run when the user gave no placement: the machine profile (given, cached, or measured
// now and cached), the planner's request from the run's lengths and budgets, and the plan
// written into the engine options.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/rewritten_file.h"
#include "engine/cli/commands.h"
#include "engine/cli/flag_names.h"
#include "engine/core/error.h"
#include "engine/core/units.h"
#include "policies/kv_budget.h"
#include "policies/kv_policy.h"
#include "scheduler/calibrate.h"
#include "scheduler/machine_load.h"

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
// opt-1.3b's, so it stays within seconds on a CPU, and no smaller than opt-125m's, because the
// profile is cached for the device and rates measured at a toy model's shapes (per-call overhead,
// not bandwidth) would mislead every later plan of a real one.
ModelConfig quick_shapes(const ModelConfig& model) {
  const ModelConfig largest = ModelConfig::from_name("opt-1.3b").value();
  const ModelConfig smallest = ModelConfig::from_name("opt-125m").value();
  if (model.hidden_size > largest.hidden_size) return largest;
  if (model.hidden_size < smallest.hidden_size) return smallest;
  return model;
}

// What a quick calibration measures: GEMMs and attention at quick_shapes(model), copies of 64
// MiB. Both shrink (to smaller released shapes, to halved copies) until the calibration fits what
// the tiers have free, so a small --gpu-mem / --cpu-mem still gets a profile. Throws an Error
// naming the budgets when not even opt-125m's shapes and 4 KiB copies fit.
struct QuickCalibration {
  ModelConfig shapes;
  CalibrationOptions options;
};

QuickCalibration quick_calibration(const ModelConfig& model, const Device& device) {
  const auto free_bytes = [&device](Tier tier) {
    const TierUsage usage = device.usage(tier);
    return usage.budget > usage.used ? usage.budget - usage.used : std::uint64_t{0};
  };
  const std::uint64_t gpu = free_bytes(Tier::gpu);
  const std::uint64_t pinned = free_bytes(Tier::pinned);
  const std::uint64_t host = free_bytes(Tier::host);
  const auto fits = [&](const ModelConfig& shapes, const CalibrationOptions& options) {
    const CalibrationFootprint need =
        calibration_footprint(shapes, options, device.multiprocessors(), measures_int8(device));
    return need.gpu <= gpu && need.pinned <= pinned && need.host <= host;
  };
  std::vector<ModelConfig> candidates = {quick_shapes(model)};
  for (const char* smaller : {"opt-350m", "opt-125m"}) {
    const ModelConfig known = ModelConfig::from_name(smaller).value();
    if (known.hidden_size < candidates.back().hidden_size) candidates.push_back(known);
  }
  QuickCalibration quick;
  quick.options.repeats = 1;
  for (const ModelConfig& shapes : candidates) {
    quick.shapes = shapes;
    for (quick.options.copy_bytes = std::uint64_t{64} << 20; quick.options.copy_bytes >= 4096;
         quick.options.copy_bytes /= 2) {
      if (fits(shapes, quick.options)) return quick;
    }
  }
  CalibrationOptions smallest;
  smallest.copy_bytes = 4096;
  const CalibrationFootprint need = calibration_footprint(
      candidates.back(), smallest, device.multiprocessors(), measures_int8(device));
  throw OutOfMemoryError(fmt::format(
      "it needs at least gpu {}, pinned {} and host {} free, and the budgets leave gpu {}, "
      "pinned {} and host {}",
      format_bytes(need.gpu), format_bytes(need.pinned), format_bytes(need.host), format_bytes(gpu),
      format_bytes(pinned), format_bytes(host)));
}

// Caches a profile just measured. Replaced at once (a temporary renamed over it): another process
// reading the cache (a second MPI rank, a concurrent run) sees the old profile or the new, never
// part of one, and a write that fails (a full disk, a file-size limit) leaves the old one as it
// was. False, with a warning, when it could not be cached; the run goes on with the measurement.
bool write_profile(const std::filesystem::path& path, const nlohmann::json& profile) {
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  try {
    bench::write_file_atomically(path, profile.dump(2) + "\n");
    return true;
  } catch (const Error& e) {
    spdlog::warn("could not cache the machine profile: {}", e.what());
    return false;
  }
}

}  // namespace

std::filesystem::path cached_profile_path(const std::string& device_name, int hidden_size) {
  std::filesystem::path base;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    base = xdg;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    base = std::filesystem::path(home) / ".cache";
  } else {
    return {};
  }
  return base / "offgen" /
         ("profile-" + sanitize(device_name) + "-h" + std::to_string(hidden_size) + ".json");
}

MachineProfile resolve_profile(const std::string& path, OpenedDevice& opened,
                               const ModelConfig& model, std::filesystem::path* used) {
  if (!path.empty()) {
    if (used != nullptr) *used = path;
    return MachineProfile::load(path);
  }
  const std::string device = opened.device->name();
  // Profiles are cached per shape: one measured at another model's shapes is neither used for
  // this one nor overwritten by its calibration. This model's own (`offgen calibrate --model`),
  // else the one a quick calibration for it measured.
  const int quick_hidden = quick_shapes(model).hidden_size;
  std::vector<int> candidates = {model.hidden_size};
  if (quick_hidden != model.hidden_size) candidates.push_back(quick_hidden);
  struct Cached {
    std::filesystem::path path;
    MachineProfile profile;
  };
  std::vector<Cached> found;
  for (const int hidden : candidates) {
    const std::filesystem::path cached = cached_profile_path(device, hidden);
    if (cached.empty() || !std::filesystem::exists(cached)) continue;
    try {
      MachineProfile profile = MachineProfile::load(cached);
      if (profile.hidden_size != hidden) {
        spdlog::warn("ignoring the cached profile {}: it says it was measured at hidden {}",
                     cached.string(), profile.hidden_size);
        continue;
      }
      if (!profile.layer_gemms) {
        // A cache, so an older offgen's measurement is remeasured rather than trusted.
        spdlog::info(
            "the cached profile {} was measured by an older offgen (one GEMM, its weights hot in "
            "the cache): measuring again",
            cached.string());
        continue;
      }
      if (profile.gemm_bf16_large <= 0 && measures_bf16(*opened.device)) {
        // A cache again: this CPU's bf16 prefill rates were not measured, and a bf16 run could
        // not be predicted from it.
        spdlog::info(
            "the cached profile {} was measured by an older offgen (no bf16 GEMM rates): "
            "measuring again",
            cached.string());
        continue;
      }
      if (profile.gemm_int8_large <= 0 && measures_int8(*opened.device)) {
        spdlog::info(
            "the cached profile {} was measured by an older offgen (no int8 GEMM rates): "
            "measuring again",
            cached.string());
        continue;
      }
      if (profile.others_load <= kBusyCores) {
        if (used != nullptr) *used = cached;
        return profile;
      }
      found.push_back({cached, std::move(profile)});
    } catch (const Error& e) {
      spdlog::warn("ignoring the cached profile: {}", flag_message(e));
    }
  }
  // Only profiles measured on a busy machine, whose rates are low (predictions pessimistic, plans
  // skewed): measure again, and keep whichever was measured on the quieter machine.
  for (const Cached& busy : found) {
    spdlog::info(
        "the cached profile {} was measured while other processes used {:.2f} cores: measuring "
        "again",
        busy.path.string(), busy.profile.others_load);
  }
  const QuickCalibration quick = quick_calibration(model, *opened.device);
  if (found.empty()) {
    spdlog::info(
        "no machine profile for {} at these shapes: a quick calibration at {} shapes with {} "
        "copies (`offgen calibrate` measures more carefully)",
        device, quick.shapes.name, format_bytes(quick.options.copy_bytes));
  }
  const auto start = std::chrono::steady_clock::now();
  const auto measurements = calibrate(opened, quick.shapes, quick.options);
  const nlohmann::json profile =
      profile_json(device, quick.shapes.name, quick.shapes.hidden_size, measurements);
  spdlog::debug("quick calibration took {:.2f} s",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  double load = -1;
  for (const Measurement& m : measurements) {
    if (m.name == "other_processes_load") load = m.value;
  }
  const auto quieter =
      std::ranges::min_element(found, {}, [](const Cached& c) { return c.profile.others_load; });
  if (quieter != found.end() && load >= 0 && quieter->profile.others_load <= load) {
    // Still busy, and no quieter than before: the earlier profile stays.
    if (used != nullptr) *used = quieter->path;
    return quieter->profile;
  }
  // Planned from the measurement in memory, not read back from the cache, which another process
  // may replace at any moment (or which could not be written).
  const std::filesystem::path file = cached_profile_path(device, quick.shapes.hidden_size);
  const bool cached = !file.empty() && write_profile(file, profile);
  if (used != nullptr) *used = cached ? file : std::filesystem::path("(measured now, not cached)");
  return MachineProfile::from_json(profile, cached ? file : std::filesystem::path(device));
}

PlanRequest plan_request(const EngineOptions& engine, const ModelConfig& model,
                         const Device& device, int prompt_len, int gen_len, int total_len) {
  PlanRequest request;
  request.prompt_len = prompt_len;
  request.gen_len = gen_len;
  // The last generated token is never fed back: gen_len - 1 decode positions.
  request.kv_tokens = policy_budget(engine.policy.kind, engine.kv_budget, prompt_len, gen_len - 1,
                                    total_len > 0 ? total_len : prompt_len + gen_len);
  const std::unique_ptr<KvPolicy> policy =
      sequence_policy(engine.policy, engine.kv_budget, prompt_len, gen_len - 1,
                      total_len > 0 ? total_len : prompt_len + gen_len);
  request.keeps_attention_scores = policy->needs_attention_scores();
  request.kv_capacity = policy->cache_slots(model.num_layers);
  request.per_layer_budgets = policy->layer_policy(0, model.num_layers) != nullptr;
  request.page_size = policy->page_size();
  if (request.page_size > 0) {
    request.pages_per_step = policy->pages_per_step();
    request.dense_layers = policy->dense_layers();
  }
  request.gpu_bytes = device.usage(Tier::gpu).budget;
  request.pinned_bytes = device.usage(Tier::pinned).budget;
  request.disk = !engine.disk.empty();
  request.compression = engine.compression;
  request.prefill_math = engine.prefill_math;
  request.multiprocessors = device.multiprocessors();
  return request;
}

std::optional<Plan> plan_automatically(const CommonOptions& common, const RunLengths& lengths,
                                       EngineOptions& engine, MachineProfile* profile_out) {
  if (common.placement_source != PlacementSource::planned) return std::nullopt;
  const ModelConfig model = model_config(engine.model);
  OpenedDevice opened = open_device(engine.device, engine.budgets, engine.cpu_kernels,
                                    engine.gpu_slot, engine.prefill_math);
  const MachineProfile profile = resolve_profile(common.profile, opened, model);
  if (profile_out != nullptr) *profile_out = profile;
  PlanRequest request = plan_request(engine, model, *opened.device, lengths.prompt_len,
                                     lengths.gen_len, lengths.total_len);
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
  const bool speculative = engine.placement.block.speculative_pages;  // a quest option
  engine.placement = plan->placement;
  engine.placement.block.speculative_pages = speculative;
  spdlog::info("planned for prompt {} + gen {}: {} (gpu {}, pinned {})", lengths.prompt_len,
               lengths.gen_len, plan->describe(), format_bytes(plan->memory.gpu),
               format_bytes(plan->memory.pinned));
  return plan;
}

}  // namespace offgen::cli
