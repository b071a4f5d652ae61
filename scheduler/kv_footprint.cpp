#include "scheduler/kv_footprint.h"

#include <algorithm>

#include "engine/core/half.h"
#include "scheduler/block_shape.h"

namespace offgen {

std::uint64_t KvFootprint::largest_batch(std::uint64_t memory) const {
  return per_sequence() == 0 ? 0 : memory / per_sequence();
}

KvFootprint kv_footprint(const OptConfig& config, int capacity, bool keeps_attention_scores,
                         int max_prompt) {
  const auto layers = static_cast<std::uint64_t>(config.num_layers);
  const auto heads = static_cast<std::uint64_t>(config.num_heads);
  const auto slots = heads * static_cast<std::uint64_t>(capacity);  // per layer
  KvFootprint footprint;
  footprint.cache_bytes =
      2 * layers * slots * static_cast<std::uint64_t>(config.head_dim()) * sizeof(Half);
  if (keeps_attention_scores) {
    // Per layer: each slot's position (int32) and score (fp32), each head's write slot (int32).
    // Once per batch: prefill key-probability sums [heads, prompt] and a decode row [heads, cap],
    // and the sequence's own budget and window (int32 each).
    footprint.policy_state_bytes =
        layers * (slots * (sizeof(std::int32_t) + sizeof(float)) + heads * sizeof(std::int32_t)) +
        heads * static_cast<std::uint64_t>(max_prompt) * sizeof(float) + slots * sizeof(float) +
        2 * sizeof(std::int32_t);
  }
  return footprint;
}

std::uint64_t runner_scratch_bytes(const OptConfig& config, int batch, int max_prompt,
                                   int num_gpu_batches, bool activations_on_host) {
  const auto rows = static_cast<std::uint64_t>(batch) * static_cast<std::uint64_t>(max_prompt);
  const auto lane_rows = static_cast<std::uint64_t>(gpu_batch_size(batch, num_gpu_batches)) *
                         static_cast<std::uint64_t>(max_prompt);
  const auto b = static_cast<std::uint64_t>(batch);
  const auto h = static_cast<std::uint64_t>(config.hidden_size);
  const auto p = static_cast<std::uint64_t>(config.word_embed_proj_dim);
  const auto f = static_cast<std::uint64_t>(config.ffn_dim);
  const auto heads = static_cast<std::uint64_t>(config.num_heads);
  const auto vocab = static_cast<std::uint64_t>(config.vocab_size);
  const std::uint64_t wide = std::max(h, p);
  const std::uint64_t out = std::max<std::uint64_t>(
      static_cast<std::uint64_t>(gpu_batch_size(batch, num_gpu_batches)), 64);
  constexpr std::uint64_t i32 = 4, half = 2, f32 = 4;
  // Mirrors BatchRunner's constructor, buffer by buffer.
  std::uint64_t bytes = rows * (i32 + 1 + i32 + i32 * heads);  // ids, valid, positions, slots
  // write slots, counts, advancing, picks, sampling parameters, newest
  bytes += b * (i32 * heads + i32 + 1 + i32 + 4 * i32 + i32);
  // Hidden states: the block's, or two GPU batches' slots when they live in pinned memory.
  bytes += activations_on_host ? 2 * lane_rows * half * h : rows * half * h;
  bytes += lane_rows * half * (wide + (config.has_projections() ? p : 0) + 3 * h + h + f);
  bytes += out * (i32 + half * h + half * p + f32 * vocab + i32 + f32);  // output head chunk
  return bytes;
}

}  // namespace offgen
