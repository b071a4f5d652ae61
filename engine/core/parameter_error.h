// Errors about values a caller chose. Below the CLI a message names them as the API does (the
// fields of EngineOptions, Placement, PolicyOptions); the CLI, which knows the flag that sets
// each, words the same message with flag names (engine/cli/flag_names.h). So the engine never
// speaks of flags, and a user of the CLI never reads a field name.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "engine/core/error.h"

namespace offgen {

// The values a message may name.
enum class Parameter {
  device,
  gpu_batch,
  num_gpu_batches,
  kv_gpu_fraction,
  weights_gpu_share,
  weights_pinned_share,
  disk_folder,
  gpu_budget,
  pinned_budget,
  placement,  // the whole placement, as one choice (the CLI's placement flags)
  policy,
  kv_budget,
  recent_fraction,
  sinks,
  observation_window,
  pool_kernel,
  pyramid_beta,
  page_size,
  dense_layers,
  prefill_tokens,
  prefill_math,
  compress_weights,  // int4 weights
  int8_weights,
};

// How a message names a parameter.
using ParameterNamer = std::string (*)(Parameter);

// The API's name: "gpu_batch", "weights.pinned", "budgets.gpu", ...
std::string api_name(Parameter parameter);

// An error of type Base (Error, OutOfMemoryError) whose message names parameters: what() names
// them as the API does; message(namer) words it again with another namer's names.
template <typename Base>
class ParameterError : public Base {
 public:
  using Render = std::function<std::string(ParameterNamer)>;

  explicit ParameterError(Render render) : Base(render(api_name)), render_(std::move(render)) {}

  std::string message(ParameterNamer name) const { return render_(name); }
  // Throws a plain Base whose message names the parameters with `name`.
  [[noreturn]] void rethrow_naming(ParameterNamer name) const { throw Base(message(name)); }

 private:
  Render render_;
};

// Throws ParameterError<Base> with the message `render(namer)` gives.
template <typename Base = Error>
[[noreturn]] void fail_naming(typename ParameterError<Base>::Render render) {
  throw ParameterError<Base>(std::move(render));
}

}  // namespace offgen

// OFFGEN_CHECK for a message that names parameters: the second argument is a callable taking a
// ParameterNamer and returning the message (variadic only so a lambda's commas pass through).
#define OFFGEN_CHECK_NAMING(cond, ...)                 \
  do {                                                 \
    if (!(cond)) ::offgen::fail_naming<>(__VA_ARGS__); \
  } while (0)
