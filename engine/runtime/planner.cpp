#include "engine/runtime/planner.h"

#include <algorithm>
#include <cmath>

namespace offgen {
namespace {

constexpr std::uint64_t kHalf = 2;

std::uint64_t round128(std::uint64_t elements) {
  return (elements + 127) / 128 * 128;
}

// One layer's bytes as the weight store lays them out (each piece 128-element aligned).
std::uint64_t layer_bytes(const OptConfig& m) {
  const auto h = static_cast<std::uint64_t>(m.hidden_size);
  const auto f = static_cast<std::uint64_t>(m.ffn_dim);
  const bool affine = m.layer_norm_elementwise_affine;
  const bool bias = m.enable_bias;
  std::uint64_t e = round128(3 * h * h) + round128(h * h) + round128(f * h) + round128(h * f);
  if (affine) e += 4 * round128(h);
  if (bias) e += round128(3 * h) + round128(h) + round128(f) + round128(h);
  return e * kHalf;
}

std::uint64_t global_bytes(const OptConfig& m) {
  const auto p = static_cast<std::uint64_t>(m.word_embed_proj_dim);
  const auto h = static_cast<std::uint64_t>(m.hidden_size);
  std::uint64_t e =
      round128(static_cast<std::uint64_t>(m.vocab_size) * p) +
      round128(static_cast<std::uint64_t>(m.max_position_embeddings + m.position_offset) * h);
  if (m.has_projections()) e += 2 * round128(h * p);
  if (m.has_final_layer_norm() && m.layer_norm_elementwise_affine) e += 2 * round128(h);
  return e * kHalf;
}

}  // namespace

std::uint64_t plan_gpu_bytes(const OptConfig& model, const PlanRequest& request, int batch,
                             double weights_gpu) {
  const std::uint64_t layer = layer_bytes(model);
  const auto layers = static_cast<std::uint64_t>(model.num_layers);
  std::uint64_t bytes = global_bytes(model);
  const std::uint64_t elements = layer / kHalf;
  const auto resident =
      std::min(elements,
               static_cast<std::uint64_t>(weights_gpu * static_cast<double>(elements)) / 128 * 128);
  bytes += resident * kHalf * layers;
  if (weights_gpu < 1.0) bytes += 2 * layer;
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
      static_cast<double>(layer_bytes(model)) * static_cast<double>(model.num_layers);
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
