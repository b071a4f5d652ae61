#include "engine/runtime/kv_footprint.h"

#include "engine/core/half.h"

namespace offgen {

std::uint64_t KvFootprint::largest_batch(std::uint64_t memory) const {
  return per_sequence() == 0 ? 0 : memory / per_sequence();
}

KvFootprint kv_footprint(const OptConfig& config, int capacity, bool scored, int max_prompt) {
  const auto layers = static_cast<std::uint64_t>(config.num_layers);
  const auto heads = static_cast<std::uint64_t>(config.num_heads);
  const auto slots = heads * static_cast<std::uint64_t>(capacity);  // per layer
  KvFootprint footprint;
  footprint.cache_bytes =
      2 * layers * slots * static_cast<std::uint64_t>(config.head_dim()) * sizeof(Half);
  if (scored) {
    // Per layer: each slot's position (int32) and score (fp32), each head's write slot (int32).
    // Once per batch: prefill key-probability sums [heads, prompt] and a decode row [heads, cap].
    footprint.policy_state_bytes =
        layers * (slots * (sizeof(std::int32_t) + sizeof(float)) + heads * sizeof(std::int32_t)) +
        heads * static_cast<std::uint64_t>(max_prompt) * sizeof(float) + slots * sizeof(float);
  }
  return footprint;
}

}  // namespace offgen
