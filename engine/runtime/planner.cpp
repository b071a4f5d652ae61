#include "engine/runtime/planner.h"

#include <algorithm>
#include <cmath>

#include "engine/core/half.h"
#include "offload/weight_store.h"

namespace offgen {

std::uint64_t plan_gpu_bytes(const OptConfig& model, const PlanRequest& request, int batch,
                             double weights_gpu) {
  const WeightLayoutBytes weights = weight_layout_bytes(model);
  const auto layers = static_cast<std::uint64_t>(model.num_layers);
  const std::uint64_t layer_elements = weights.layer / sizeof(Half);
  std::uint64_t bytes = weights.globals;
  bytes += layer_share_elements(layer_elements, weights_gpu) * sizeof(Half) * layers;
  if (weights_gpu < 1.0) bytes += 2 * weights.layer;
  const KvFootprint kv =
      kv_footprint(model, request.kv_budget + 1, request.scored_policy, request.prompt_len);
  bytes += static_cast<std::uint64_t>(batch) * kv.per_sequence();
  bytes += runner_scratch_bytes(model, batch, request.prompt_len);
  return bytes;
}

std::optional<Plan> choose_plan(const OptConfig& model, const MachineProfile& profile,
                                const PlanRequest& request) {
  std::optional<Plan> best;
  const double layers_bytes =
      static_cast<double>(weight_layout_bytes(model).layer) * static_cast<double>(model.num_layers);
  for (int batch = 1; batch <= request.max_batch; batch *= 2) {
    for (int percent = 100; percent >= 0; percent -= 5) {
      const double share = percent / 100.0;
      const std::uint64_t gpu = plan_gpu_bytes(model, request, batch, share);
      const auto pinned = static_cast<std::uint64_t>((1.0 - share) * layers_bytes);
      if (gpu > request.gpu_bytes || pinned > request.pinned_bytes) continue;
      RunShape run;
      run.batch = batch;
      run.prompt_len = request.prompt_len;
      run.gen_len = request.gen_len;
      run.kv_capacity = request.kv_budget + 1;
      run.weights_gpu = share;
      const Prediction prediction = predict(model, profile, run);
      // The first share that fits is the most resident one: fewer bytes moved, never slower.
      if (!best || prediction.tokens_per_second > best->prediction.tokens_per_second * 1.0001) {
        best = Plan{batch, share, gpu, pinned, prediction};
      }
      break;
    }
  }
  return best;
}

}  // namespace offgen
