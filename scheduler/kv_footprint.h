// What a batch's KV cache costs, per sequence, before anything is allocated: `bench` and
// `compare` size batches from it. The cache holds budget + 1 slots per (layer, sequence, head),
// so memory follows the policy's budget C, not the sequence length; a policy that keeps attention
// scores (h2o) adds its per-slot positions and fp32 scores and one layer's attention
// probabilities.
#pragma once

#include <cstdint>

#include "engine/core/compression.h"
#include "engine/model/model_config.h"

namespace offgen {

struct KvFootprint {
  std::uint64_t cache_bytes = 0;         // K and V of every layer, per sequence
  std::uint64_t policy_state_bytes = 0;  // attention-score policy state, per sequence
  // int4 storage: the fp16 K and V block of one layer that a task's packed cache is expanded into
  // (kv_cache_layout.h), per sequence of the GPU batch.
  std::uint64_t expanded_bytes = 0;

  std::uint64_t per_sequence() const { return cache_bytes + policy_state_bytes + expanded_bytes; }
  // The largest batch whose KV cache and policy state fit in `memory` bytes (0 if none does).
  std::uint64_t largest_batch(std::uint64_t memory) const;
};

// capacity: slots per (layer, sequence, head), i.e. budget + 1. keeps_attention_scores: the policy
// keeps attention scores (h2o). max_prompt: the longest prompt a batch prefills (sizes the prefill
// probability sums). Per sequence of the layouts in kv_cache_layout.h, which grow linearly with
// the sequences.
// storage: fp16, or int4-packed rows (0.28x the cache bytes where head_dim is a multiple of 64)
// plus one layer's fp16 block to attend them in.
KvFootprint kv_footprint(const ModelConfig& config, int capacity, bool keeps_attention_scores,
                         int max_prompt, Storage storage = Storage::fp16);

}  // namespace offgen
