#include "engine/cli/flag_names.h"

namespace offgen::cli {

std::string flag_name(Parameter parameter) {
  switch (parameter) {
    case Parameter::device:
      return "--device";
    case Parameter::gpu_batch:
      return "--batch-size";
    case Parameter::num_gpu_batches:
      return "--num-gpu-batches";
    case Parameter::kv_gpu_fraction:
      return "--kv-gpu";
    case Parameter::weights_gpu_share:
      return "--weights-gpu";
    case Parameter::weights_pinned_share:
      return "--weights-cpu";
    case Parameter::disk_folder:
      return "--disk";
    case Parameter::gpu_budget:
      return "--gpu-mem";
    case Parameter::pinned_budget:
      return "--cpu-mem";
    case Parameter::placement:
      return "placement flags";
    case Parameter::policy:
      return "--policy";
    case Parameter::kv_budget:
      return "--kv-budget";
    case Parameter::recent_fraction:
      return "--recent-fraction";
    case Parameter::sinks:
      return "--sinks";
    case Parameter::observation_window:
      return "--observation-window";
    case Parameter::pool_kernel:
      return "--pool-kernel";
    case Parameter::pyramid_beta:
      return "--pyramid-beta";
    case Parameter::page_size:
      return "--page-size";
    case Parameter::dense_layers:
      return "--dense-layers";
    case Parameter::prefill_tokens:
      return "--prefill-tokens";
    case Parameter::compress_weights:
      return "--compress-weights";
    case Parameter::int8_weights:
      return "--int8-weights";
    case Parameter::prefill_math:
      return "--prefill-math";
  }
  return "?";
}

std::string flag_message(const Error& e) {
  if (const auto* oom = dynamic_cast<const ParameterError<OutOfMemoryError>*>(&e)) {
    return oom->message(flag_name);
  }
  if (const auto* named = dynamic_cast<const ParameterError<Error>*>(&e)) {
    return named->message(flag_name);
  }
  return e.what();
}

}  // namespace offgen::cli
