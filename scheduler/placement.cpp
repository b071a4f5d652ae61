#include "scheduler/placement.h"

#include <fmt/format.h>

#include <optional>
#include <type_traits>

#include "engine/core/error.h"
#include "engine/core/json_integer.h"
#include "engine/core/parameter_error.h"

namespace offgen {
namespace {

// Throws a ParameterError when `value` is outside [0, 1].
void check_share(Parameter parameter, double value) {
  OFFGEN_CHECK_NAMING(value >= 0.0 && value <= 1.0, [=](ParameterNamer name) {
    return fmt::format("{} must be in [0, 1] (got {})", name(parameter), value);
  });
}

void check_positive(Parameter parameter, int value) {
  OFFGEN_CHECK_NAMING(value >= 1, [=](ParameterNamer name) {
    return fmt::format("{} must be positive (got {})", name(parameter), value);
  });
}

// Reads file[field] into `out` when present; a wrong type or a value `valid` refuses is an
// error naming the field.
template <typename T, typename Valid>
void read_field(const nlohmann::json& file, const char* field, const char* expected,
                const Valid& valid, T& out) {
  if (!file.contains(field)) return;
  const nlohmann::json& value = file.at(field);
  bool ok = false;
  T parsed{};
  if constexpr (std::is_same_v<T, bool>) {
    ok = value.is_boolean();
    if (ok) parsed = value.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    const std::optional<T> number = json_integer<T>(value);
    ok = number.has_value();
    if (ok) parsed = *number;
  } else {
    ok = value.is_number();
    if (ok) parsed = value.get<T>();
  }
  // An array or object is named by its type: printing one nested deeply would recurse as deep.
  OFFGEN_CHECK(ok && valid(parsed), "'{}' must be {} (got {})", field, expected,
               value.is_structured() ? std::string(value.type_name()) : value.dump());
  out = parsed;
}

}  // namespace

bool Placement::all_resident() const {
  return weights.gpu >= 1.0 && block.kv_gpu_fraction >= 1.0 && block.num_gpu_batches == 1;
}

std::string Placement::describe() const {
  std::string kv = fmt::format("KV {:.0f}% on the gpu tier", 100.0 * block.kv_gpu_fraction);
  if (block.kv_gpu_fraction < 1.0) {
    kv += block.cpu_attention ? " (cpu attention)" : " (gpu attention)";
  }
  return fmt::format(
      "{} x {} GPU batch{}, weights {:.0f}/{:.0f}/{:.0f}% gpu/cpu/disk, {}, activations on the {}",
      gpu_batch, block.num_gpu_batches, block.num_gpu_batches == 1 ? "" : "es", 100.0 * weights.gpu,
      100.0 * weights.pinned, 100.0 * weights_disk(), kv,
      block.activations_on_host ? "cpu" : "gpu");
}

void Placement::validate() const {
  check_positive(Parameter::gpu_batch, gpu_batch);
  check_positive(Parameter::num_gpu_batches, block.num_gpu_batches);
  check_share(Parameter::kv_gpu_fraction, block.kv_gpu_fraction);
  check_share(Parameter::weights_gpu_share, weights.gpu);
  check_share(Parameter::weights_pinned_share, weights.pinned);
  OFFGEN_CHECK_NAMING(weights.gpu + weights.pinned <= 1.0 + 1e-9, [=, this](ParameterNamer name) {
    return fmt::format("{} + {} must be at most 1 (got {} + {})",
                       name(Parameter::weights_gpu_share), name(Parameter::weights_pinned_share),
                       weights.gpu, weights.pinned);
  });
}

nlohmann::ordered_json placement_json(const Placement& placement) {
  return {{"batch_size", placement.gpu_batch},
          {"num_gpu_batches", placement.block.num_gpu_batches},
          {"weights_gpu_percent", 100.0 * placement.weights.gpu},
          {"weights_cpu_percent", 100.0 * placement.weights.pinned},
          {"weights_disk_percent", 100.0 * placement.weights_disk()},
          {"kv_gpu_percent", 100.0 * placement.block.kv_gpu_fraction},
          {"cpu_attention", placement.block.cpu_attention},
          {"activations_cpu", placement.block.activations_on_host}};
}

Placement placement_from_json(const nlohmann::json& file) {
  Placement out;
  auto positive = [](auto v) { return v >= 1; };
  auto percent = [](double v) { return v >= 0.0 && v <= 100.0; };
  auto any = [](bool) { return true; };
  double gpu = 100.0 * out.weights.gpu;
  double pinned = 100.0 * out.weights.pinned;
  double kv = 100.0 * out.block.kv_gpu_fraction;
  read_field(file, "batch_size", "an integer >= 1", positive, out.gpu_batch);
  read_field(file, "num_gpu_batches", "an integer >= 1", positive, out.block.num_gpu_batches);
  const bool has_gpu = file.contains("weights_gpu_percent");
  read_field(file, "weights_gpu_percent", "a percentage in [0, 100]", percent, gpu);
  // A file with only the gpu share keeps the rest in pinned memory, as --weights-gpu alone does.
  if (has_gpu && !file.contains("weights_cpu_percent")) pinned = 100.0 - gpu;
  read_field(file, "weights_cpu_percent", "a percentage in [0, 100]", percent, pinned);
  read_field(file, "kv_gpu_percent", "a percentage in [0, 100]", percent, kv);
  read_field(file, "cpu_attention", "true or false", any, out.block.cpu_attention);
  read_field(file, "activations_cpu", "true or false", any, out.block.activations_on_host);
  OFFGEN_CHECK(gpu + pinned <= 100.0 + 1e-9,
               "'weights_gpu_percent' + 'weights_cpu_percent' must be at most 100 (got {} + {})",
               gpu, pinned);
  out.weights = {gpu / 100.0, pinned / 100.0};
  out.block.kv_gpu_fraction = kv / 100.0;
  return out;
}

}  // namespace offgen
