// Chooses a run's batch size and weight placement under the memory budgets, by the cost model:
// every batch size from 1 up (powers of two) and every share of the weights on the gpu tier (5%
// steps) whose memory fits is predicted, and the fastest wins (ties: the smaller batch, then the
// more resident weights). The KV cache stays on the gpu tier in this version.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/model/opt_config.h"
#include "engine/runtime/cost_model.h"
#include "engine/runtime/kv_footprint.h"

namespace offgen {

struct PlanRequest {
  int prompt_len = 512;
  int gen_len = 32;
  int kv_budget = 0;  // C, tokens kept per (layer, sequence, head)
  bool scored_policy = false;
  std::uint64_t gpu_bytes = 0;     // budget of the gpu tier
  std::uint64_t pinned_bytes = 0;  // budget of pinned host memory
  int max_batch = 1024;
};

struct Plan {
  int batch = 0;
  double weights_gpu = 1.0;
  std::uint64_t gpu_bytes = 0;  // what it needs on each tier
  std::uint64_t pinned_bytes = 0;
  Prediction prediction;
};

// Gpu-tier bytes of a placement: embeddings and final norm, the resident share of every layer,
// two streaming slots when any layer is split, and the batch's KV cache and scratch.
std::uint64_t plan_gpu_bytes(const OptConfig& model, const PlanRequest& request, int batch,
                             double weights_gpu);

// nullopt when not even batch 1 fits with every layer streamed.
std::optional<Plan> choose_plan(const OptConfig& model, const MachineProfile& profile,
                                const PlanRequest& request);

}  // namespace offgen
