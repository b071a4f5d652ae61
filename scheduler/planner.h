// Chooses a run's placement under the memory budgets, by the cost model (cost_model.h). It
// searches the whole plan space of the block schedule:
//
//   GPU batch size        powers of two up to max_gpu_batch (or fixed by `block`)
//   GPU batches / block   1, 2, 4, ... up to max_gpu_batches
//   weights on gpu tier   100%, 95%, ..., 0% of each layer; the rest in pinned memory, or — with
//                         a disk folder, when the pinned budget cannot hold it — the most that
//                         fits there (5% steps) and the remainder on disk
//   KV on the gpu tier    100%, 75%, 50%, 25%, 0% of each GPU batch's sequences; the rest pinned
//   cpu attention         off, or on when some KV lives in pinned memory
//   activations           the block's hidden states on the gpu tier, or in pinned memory
//
// Every placement whose memory fits is predicted and the fastest wins (ties: the smaller block,
// then fewer GPU batches, then more on the gpu tier). One exception keeps the fast path fast:
// when the largest block the request allows fits entirely on the gpu tier in one GPU batch, that
// plan is taken — at a given block, offloading only adds transfers.
//
// The memory it plans is the sum of the layouts the engine allocates from (weight_layout.h,
// runner_layout.h, kv_cache_layout.h), so it is what the engine takes (a test holds it equal).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "scheduler/block_shape.h"
#include "scheduler/cost_model.h"
#include "scheduler/placement.h"

namespace offgen {

struct PlanRequest {
  int prompt_len = 512;
  int gen_len = 32;
  int kv_tokens = 0;  // C: the tokens the KV budget keeps per (layer, sequence, head)
  // Slots per cache (KvPolicy::cache_slots); 0: kv_tokens + 1. More for pyramidkv, whose lower
  // layers keep more than C.
  int kv_capacity = 0;
  int cache_slots() const { return kv_capacity > 0 ? kv_capacity : kv_tokens + 1; }
  bool per_layer_budgets = false;  // pyramidkv: KvCacheShape::per_layer_budgets
  int page_size = 0;               // quest: KvCacheShape::page_size
  int pages_per_step = 0;          // quest: RunShape::pages_per_step
  int dense_layers = 0;            // quest: RunShape::dense_layers
  bool keeps_attention_scores = false;
  std::uint64_t gpu_bytes = 0;     // budget of the gpu tier
  std::uint64_t pinned_bytes = 0;  // budget of pinned host memory
  bool disk = false;               // a disk folder can take the weights pinned memory cannot
  Compression compression{};       // how weights and KV are stored: every plan keeps it
  kernels::PrefillMath prefill_math = kernels::PrefillMath::fp32;  // every plan keeps it too
  int multiprocessors = 0;   // of the device (Device::multiprocessors): sizes scratch
  int max_gpu_batch = 1024;  // the largest GPU batch tried
  int max_gpu_batches = 16;  // the most GPU batches per block tried
  // > 0: the sequences there are to run; blocks stop at the power of two that covers them.
  int max_sequences = 0;
  // > 0: every plan runs blocks of exactly this many sequences (a bench row's batch), split into
  // GPU batches of ceil(block / num_gpu_batches).
  int block = 0;
};

// Bytes a placement puts on each tier.
struct PlanMemory {
  std::uint64_t gpu = 0;
  std::uint64_t pinned = 0;  // the peak, load staging included
  std::uint64_t disk = 0;
};

struct Plan {
  Placement placement;
  // Sequences per block the plan is for: placement.block_size(), or fewer when the run has
  // fewer sequences (PlanRequest::max_sequences) or its block is given (PlanRequest::block).
  int block = 1;
  // What it needs on each tier (the peak: pinned memory also holds the weight store's load
  // staging while the model loads).
  PlanMemory memory;
  Prediction prediction;

  // "block 32 = 8 x 4 GPU batches, weights 40/60/0% gpu/cpu/disk, KV 50% on the gpu tier (cpu
  // attention), activations on the gpu, predicted 12.3 tokens/s": for logs.
  std::string describe() const;
};

// What `placement` puts on each tier for blocks of `block` sequences.
PlanMemory plan_memory(const ModelConfig& model, const PlanRequest& request,
                       const Placement& placement, int block);

// The offloaded sequences of each GPU batch of a block (as split_block gives them).
std::vector<int> offloaded_per_gpu_batch(int block, const BlockShape& shape);

// The run a plan predicts (for the cost model).
RunShape plan_run_shape(const PlanRequest& request, const Plan& plan);

// nullopt when nothing fits, not even one sequence with every layer streamed.
std::optional<Plan> choose_plan(const ModelConfig& model, const MachineProfile& profile,
                                const PlanRequest& request);

}  // namespace offgen
