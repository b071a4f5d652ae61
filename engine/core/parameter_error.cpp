#include "engine/core/parameter_error.h"

namespace offgen {

std::string api_name(Parameter parameter) {
  switch (parameter) {
    case Parameter::device:
      return "device";
    case Parameter::gpu_batch:
      return "gpu_batch";
    case Parameter::num_gpu_batches:
      return "block.num_gpu_batches";
    case Parameter::kv_gpu_fraction:
      return "block.kv_gpu_fraction";
    case Parameter::weights_gpu_share:
      return "weights.gpu";
    case Parameter::weights_pinned_share:
      return "weights.pinned";
    case Parameter::disk_folder:
      return "disk";
    case Parameter::gpu_budget:
      return "budgets.gpu";
    case Parameter::pinned_budget:
      return "budgets.pinned";
    case Parameter::placement:
      return "placement";
    case Parameter::policy:
      return "policy";
    case Parameter::kv_budget:
      return "kv_budget";
    case Parameter::recent_fraction:
      return "recent_fraction";
    case Parameter::sinks:
      return "sinks";
    case Parameter::observation_window:
      return "observation_window";
    case Parameter::pool_kernel:
      return "pool_kernel";
    case Parameter::pyramid_beta:
      return "pyramid_beta";
    case Parameter::page_size:
      return "page_size";
    case Parameter::dense_layers:
      return "dense_layers";
    case Parameter::prefill_tokens:
      return "prefill_tokens";
    case Parameter::compress_weights:
      return "compression.weights = int4";
    case Parameter::int8_weights:
      return "compression.weights = int8";
    case Parameter::prefill_math:
      return "prefill_math";
  }
  return "?";
}

}  // namespace offgen
