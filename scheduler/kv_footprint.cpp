#include "scheduler/kv_footprint.h"

#include "scheduler/kv_cache_layout.h"

namespace offgen {

std::uint64_t KvFootprint::largest_batch(std::uint64_t memory) const {
  return per_sequence() == 0 ? 0 : memory / per_sequence();
}

KvFootprint kv_footprint(const ModelConfig& config, int capacity, bool keeps_attention_scores,
                         int max_prompt, Storage storage) {
  KvFootprint footprint;
  // K and V of every layer.
  footprint.cache_bytes = 2 * static_cast<std::uint64_t>(config.num_layers) *
                          kv_cache_bytes(config, 1, capacity, storage);
  if (storage == Storage::int4) {
    footprint.expanded_bytes = 2 * kv_cache_bytes(config, 1, capacity, Storage::fp16);
  }
  if (keeps_attention_scores) {
    footprint.policy_state_bytes =
        attention_score_state_layout(1, config.num_layers, config.kv_heads(), capacity, max_prompt)
            .bytes(Tier::gpu);
  }
  return footprint;
}

}  // namespace offgen
