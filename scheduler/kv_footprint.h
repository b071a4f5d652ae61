// What a batch's KV cache costs, per sequence, before anything is allocated: the memory planner
// and `bench` size batches from it. The cache holds budget + 1 slots per (layer, sequence, head),
// so memory follows the policy's budget C, not the sequence length; a score-keeping policy (h2o)
// adds its per-slot positions and fp32 scores and one layer's attention probabilities.
#pragma once

#include <cstdint>

#include "engine/model/opt_config.h"

namespace offgen {

struct KvFootprint {
  std::uint64_t cache_bytes = 0;         // K and V of every layer, per sequence
  std::uint64_t policy_state_bytes = 0;  // score-keeping policy state, per sequence

  std::uint64_t per_sequence() const { return cache_bytes + policy_state_bytes; }
  // The largest batch whose KV cache and policy state fit in `memory` bytes (0 if none does).
  std::uint64_t largest_batch(std::uint64_t memory) const;
};

// capacity: slots per (layer, sequence, head), i.e. budget + 1. keeps_attention_scores: the policy
// keeps attention scores (h2o). max_prompt: the longest prompt a batch prefills (sizes the prefill
// probability sums).
KvFootprint kv_footprint(const OptConfig& config, int capacity, bool keeps_attention_scores,
                         int max_prompt);

// Gpu-tier bytes a BatchRunner allocates besides its KV cache and policy state: the step's inputs
// and hidden states for batch x max_prompt rows, one GPU batch's activation scratch, and the
// output head's chunk (at least 64 rows of fp32 logits). With the activations on the host, the
// hidden states' two gpu slots instead of the block's (their pinned part: host_activations.h).
// The planner sizes batches with it; a test holds it equal to what a runner takes.
std::uint64_t runner_scratch_bytes(const OptConfig& config, int batch, int max_prompt,
                                   int num_gpu_batches = 1, bool activations_on_host = false);

}  // namespace offgen
