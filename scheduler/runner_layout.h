// The memory of a BlockRunner (engine/runtime/block_runner.h), as layouts (memory_layout.h): its
// step inputs and their pinned staging, the block's hidden states, one GPU batch's activation
// scratch, the output head's chunk, and — through kv_cache_layout.h — its KV cache. The runner
// and its parts allocate from these; the planner sums them.
#pragma once

#include <vector>

#include "engine/core/compression.h"
#include "engine/model/model_config.h"
#include "scheduler/block_shape.h"
#include "scheduler/memory_layout.h"

namespace offgen {

// What sizes a runner's memory.
struct RunnerShape {
  int block = 1;        // sequences (every GPU batch)
  int max_prompt = 1;   // the longest prefill
  int kv_capacity = 1;  // slots per (layer, sequence, head): the largest budget C + 1
  bool keeps_attention_scores = false;
  BlockShape placement;     // GPU batches, KV placement, cpu attention, where hidden states live
  int multiprocessors = 0;  // of the device (Device::multiprocessors)
  bool per_layer_budgets = false;      // pyramidkv: KvCacheShape::per_layer_budgets
  Storage kv_storage = Storage::fp16;  // KvCacheShape::storage
  int page_size = 0;                   // quest: KvCacheShape::page_size
  int kv_staged_capacity = 0;          // quest: KvCacheShape::staged_capacity
  // Logit edits one step can send (kernels/logit_edit_args.h): 0 where no request of the block
  // asks for penalties, logit_bias or min_tokens.
  std::int64_t logit_edits = 0;
  // The most likely ids a pick reports with its log-prob (0: none; at most kMaxTopLogprobs).
  int top_logprobs = 0;
};

// Rows of the output head's chunk: one GPU batch, at least 64.
int output_chunk_rows(int block, int num_gpu_batches);

// The runner's own buffers: the step inputs (ids, mask, positions) for block x max_prompt rows,
// picks and sampling parameters, logit edits, the pinned staging every step's inputs go through,
// the block's hidden states (unless they live in pinned memory), one GPU batch's activation
// scratch, and the output head's chunk (fp32 logits included).
MemoryLayout runner_own_layout(const ModelConfig& config, const RunnerShape& shape);

// HostActivations: the block's hidden states [block x max_rows_per_sequence rows, hidden] in
// pinned memory, and two gpu slots of the largest GPU batch's rows.
MemoryLayout host_activations_layout(const std::vector<GpuBatch>& gpu_batches,
                                     int max_rows_per_sequence, int hidden);

// Everything a runner's construction allocates: its own buffers, its KV cache's, and its hidden
// states' in pinned memory when the placement keeps them there.
MemoryLayout runner_layout(const ModelConfig& config, const RunnerShape& shape);

}  // namespace offgen
