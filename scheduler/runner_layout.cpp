#include "scheduler/runner_layout.h"

#include <algorithm>

#include "kernels/logit_edit_args.h"
#include "kernels/sampling_args.h"
#include "scheduler/kv_cache_layout.h"

namespace offgen {

int output_chunk_rows(int block, int num_gpu_batches) {
  return std::max(gpu_batch_size(block, num_gpu_batches), 64);
}

MemoryLayout runner_own_layout(const ModelConfig& config, const RunnerShape& shape) {
  const BlockShape& placement = shape.placement;
  const auto block = static_cast<std::uint64_t>(shape.block);
  const std::uint64_t rows = block * static_cast<std::uint64_t>(shape.max_prompt);
  const std::uint64_t gpu_batch_rows =
      static_cast<std::uint64_t>(gpu_batch_size(shape.block, placement.num_gpu_batches)) *
      static_cast<std::uint64_t>(shape.max_prompt);
  const auto out =
      static_cast<std::uint64_t>(output_chunk_rows(shape.block, placement.num_gpu_batches));
  const auto h = static_cast<std::uint64_t>(config.hidden_size);
  const auto p = static_cast<std::uint64_t>(config.word_embed_proj_dim);
  const auto f = static_cast<std::uint64_t>(config.ffn_dim);
  const auto heads = static_cast<std::uint64_t>(config.kv_heads());  // of the cache's slots
  const auto qkv = static_cast<std::uint64_t>(config.qkv_dim());
  const auto rope = static_cast<std::uint64_t>(config.rotary() ? config.head_dim() / 2 : 0);
  // A decode step's slot counts: one row per layer when the budgets differ by layer (pyramidkv).
  const auto count_rows =
      static_cast<std::uint64_t>(shape.per_layer_budgets ? config.num_layers : 1);
  const auto vocab = static_cast<std::uint64_t>(config.vocab_size);

  MemoryLayout layout;
  // The step's inputs.
  layout.add("token ids", Tier::gpu, rows * kInt32Bytes);
  layout.add("valid mask", Tier::gpu, rows * sizeof(std::uint8_t));
  layout.add("positions", Tier::gpu, rows * kInt32Bytes);
  layout.add("picks", Tier::gpu, block * kInt32Bytes);
  layout.add("sampling parameters", Tier::gpu, block * sizeof(kernels::SampleParams));
  layout.add("newest rows", Tier::gpu, block * kInt32Bytes);
  layout.add("host picks", Tier::pinned, block * kInt32Bytes);
  const auto edits = static_cast<std::uint64_t>(shape.logit_edits);
  const std::uint64_t penalty_bytes = edits == 0 ? 0 : block * sizeof(kernels::RowPenalties);
  const std::uint64_t edit_bytes = edits * sizeof(kernels::LogitEdit) + penalty_bytes;
  layout.add("logit edits", Tier::gpu, edits * sizeof(kernels::LogitEdit));
  layout.add("row penalties", Tier::gpu, penalty_bytes);
  layout.add("saved logits", Tier::gpu, edits * kFloatBytes);
  // Every step's uploads fit: ids + valid + positions + per-head token slots of a prefill, or the
  // arrays of a decode step, the newest row of each sequence, the sampling parameters (five
  // words a sequence), page selection's first pages and pages per step, plus one chunk of output
  // row ids and targets, each rounded up to 16 bytes, and the logit edits with their rows'
  // penalties; and once, before the first step, the rotary frequencies.
  static_assert(sizeof(kernels::SampleParams) == 5 * kInt32Bytes);
  layout.add(
      "step staging", Tier::pinned,
      kInt32Bytes * ((3 + heads) * rows + (12 + heads + count_rows) * block + 2 * out + rope) +
          edit_bytes + 1024);
  layout.add("rope frequencies", Tier::gpu, rope * kFloatBytes);
  // Activations: the block's hidden states, one GPU batch's scratch.
  layout.add("hidden states", Tier::gpu, placement.activations_on_host ? 0 : rows * h * kHalfBytes);
  layout.add("normed", Tier::gpu, gpu_batch_rows * std::max(h, p) * kHalfBytes);
  layout.add("embedded", Tier::gpu, config.has_projections() ? gpu_batch_rows * p * kHalfBytes : 0);
  layout.add("qkv", Tier::gpu, gpu_batch_rows * qkv * kHalfBytes);
  layout.add("attention output", Tier::gpu, gpu_batch_rows * h * kHalfBytes);
  layout.add("ffn", Tier::gpu,
             gpu_batch_rows * static_cast<std::uint64_t>(config.ffn_in_rows()) * kHalfBytes);
  // A gated MLP's silu(gate) * up, the down projection's input.
  layout.add("gated ffn", Tier::gpu, config.gated_mlp() ? gpu_batch_rows * f * kHalfBytes : 0);
  // The output head's chunk.
  layout.add("output rows", Tier::gpu, out * kInt32Bytes);
  layout.add("gathered", Tier::gpu, out * h * kHalfBytes);
  layout.add("projected", Tier::gpu, out * p * kHalfBytes);
  layout.add("logits", Tier::gpu, out * vocab * kFloatBytes);
  layout.add("targets", Tier::gpu, out * kInt32Bytes);
  layout.add("log-probs", Tier::gpu, out * kFloatBytes);
  layout.add("host log-probs", Tier::pinned, out * kFloatBytes);
  const auto top = out * static_cast<std::uint64_t>(shape.top_logprobs);
  layout.add("top log-prob ids", Tier::gpu, top * kInt32Bytes);
  layout.add("top log-probs", Tier::gpu, top * kFloatBytes);
  layout.add("host top log-probs", Tier::pinned, top * (kInt32Bytes + kFloatBytes));
  return layout;
}

MemoryLayout host_activations_layout(const std::vector<GpuBatch>& gpu_batches,
                                     int max_rows_per_sequence, int hidden) {
  std::uint64_t block = 0, largest = 0;
  for (const GpuBatch& g : gpu_batches) {
    block += static_cast<std::uint64_t>(g.size);
    largest = std::max(largest, static_cast<std::uint64_t>(g.size));
  }
  const std::uint64_t row = static_cast<std::uint64_t>(hidden) * kHalfBytes;
  const auto seq = static_cast<std::uint64_t>(max_rows_per_sequence);
  MemoryLayout layout;
  layout.add("host hidden states", Tier::pinned, block * seq * row);
  layout.add("hidden state slots", Tier::gpu, largest * seq * row, 2);
  return layout;
}

MemoryLayout runner_layout(const ModelConfig& config, const RunnerShape& shape) {
  const std::vector<GpuBatch> gpu_batches = split_block(shape.block, shape.placement);
  MemoryLayout layout = runner_own_layout(config, shape);
  if (shape.placement.activations_on_host) {
    layout.append(host_activations_layout(gpu_batches, shape.max_prompt, config.hidden_size));
  }
  KvCacheShape kv;
  kv.gpu_batches = gpu_batches;
  kv.capacity = shape.kv_capacity;
  kv.max_prompt = shape.max_prompt;
  kv.keeps_attention_scores = shape.keeps_attention_scores;
  kv.per_layer_budgets = shape.per_layer_budgets;
  kv.cpu_attention = shape.placement.cpu_attention;
  kv.multiprocessors = shape.multiprocessors;
  kv.storage = shape.kv_storage;
  kv.page_size = shape.page_size;
  kv.staged_capacity = shape.kv_staged_capacity;
  layout.append(block_kv_cache_layout(config, kv));
  return layout;
}

}  // namespace offgen
