#include "scheduler/kv_cache_layout.h"

#include <algorithm>
#include <limits>

#include "engine/core/error.h"
#include "kernels/attention_args.h"
#include "kernels/packed_kv.h"
#include "kernels/page_selection_args.h"

namespace offgen {

std::uint64_t kv_cache_bytes(const ModelConfig& config, int sequences, int capacity,
                             Storage storage) {
  const auto rows = static_cast<std::int64_t>(sequences) * config.kv_heads() * capacity;
  switch (storage) {
    case Storage::fp16:
      return static_cast<std::uint64_t>(rows) * static_cast<std::uint64_t>(config.head_dim()) *
             kHalfBytes;
    case Storage::int4:
      return kernels::packed_kv_bytes(rows, config.head_dim());
    case Storage::int8:
      fail("the KV cache has no int8 storage (fp16 or int4)");
  }
  return 0;
}

std::uint64_t kv_row_bytes(const ModelConfig& config, Storage storage) {
  return kv_cache_bytes(config, 1, 1, storage) / static_cast<std::uint64_t>(config.kv_heads());
}

int page_count(int capacity, int page_size) {
  // At least the two a step always chooses (the sink and the newest), so a choice always fits.
  return page_size > 0 ? std::max(2, (capacity + page_size - 1) / page_size) : 0;
}

std::uint64_t page_summary_bytes(const ModelConfig& config, int sequences, int pages) {
  return static_cast<std::uint64_t>(kernels::page_summary_elements(sequences, config.kv_heads(),
                                                                   config.head_dim(), pages)) *
         kHalfBytes;
}

MemoryLayout attention_score_state_layout(int sequences, int layers, int heads, int capacity,
                                          int max_prompt) {
  const std::uint64_t cells =
      static_cast<std::uint64_t>(sequences) * static_cast<std::uint64_t>(heads);
  const std::uint64_t slots = cells * static_cast<std::uint64_t>(capacity);
  MemoryLayout layout;
  layout.add("score positions", Tier::gpu, slots * kInt32Bytes, layers);
  layout.add("scores", Tier::gpu, slots * kFloatBytes, layers);
  layout.add("score write slots", Tier::gpu, cells * kInt32Bytes, layers);
  layout.add("prefill key probability sums", Tier::gpu,
             cells * static_cast<std::uint64_t>(max_prompt) * kFloatBytes);
  layout.add("decode probabilities", Tier::gpu, slots * kFloatBytes);
  // Per layer: pyramidkv's budgets and windows differ by layer.
  layout.add("budgets", Tier::gpu, static_cast<std::uint64_t>(sequences) * kInt32Bytes, layers);
  layout.add("recent windows", Tier::gpu, static_cast<std::uint64_t>(sequences) * kInt32Bytes,
             layers);
  return layout;
}

int staged_sequence_slots(int most_offloaded, int capacity, int staged_capacity) {
  const std::int64_t slots =
      staged_capacity <= 0 || staged_capacity >= capacity
          ? std::int64_t{most_offloaded} * capacity
          : std::max(std::int64_t{most_offloaded} * staged_capacity, std::int64_t{capacity});
  OFFGEN_CHECK(slots <= std::numeric_limits<int>::max(),
               "KV staging: {} sequences x {} slots is more than one buffer indexes",
               most_offloaded, capacity);
  return static_cast<int>(slots);
}

int compact_chunk_sequences(int most_offloaded, int capacity, int staged_capacity) {
  if (staged_capacity <= 0 || staged_capacity >= capacity) return most_offloaded;
  return std::min(most_offloaded,
                  staged_sequence_slots(most_offloaded, capacity, staged_capacity) / capacity);
}

int compact_staged_capacity(int capacity, int page_size, int pages_per_step, bool cpu_attention,
                            bool speculates) {
  if (page_size <= 0 || pages_per_step <= 0 || cpu_attention || speculates) return 0;
  const std::int64_t slots = std::int64_t{std::max(pages_per_step, 2)} * page_size;
  return slots < capacity ? static_cast<int>(slots) : 0;
}

MemoryLayout offloaded_kv_layout(const ModelConfig& config, const std::vector<int>& offloaded,
                                 int capacity, bool keeps_attention_scores, bool cpu_attention,
                                 Storage storage, int page_size, int staged_capacity) {
  const auto heads = static_cast<std::uint64_t>(config.kv_heads());
  const auto q_heads = static_cast<std::uint64_t>(config.num_heads);
  const auto head_dim = static_cast<std::uint64_t>(config.head_dim());
  const std::uint64_t most = static_cast<std::uint64_t>(
      offloaded.empty() ? 0 : *std::max_element(offloaded.begin(), offloaded.end()));
  MemoryLayout layout;
  for (const int n : offloaded) {
    layout.add("host k cache", Tier::pinned, kv_cache_bytes(config, n, capacity, storage),
               config.num_layers);
    layout.add("host v cache", Tier::pinned, kv_cache_bytes(config, n, capacity, storage),
               config.num_layers);
  }
  // Per sequence: one qkv row, a write slot per KV head, an attention output row and softmax rows
  // (per KV head).
  const std::uint64_t rows = most * static_cast<std::uint64_t>(config.qkv_dim()) * kHalfBytes;
  const std::uint64_t slots = most * heads * kInt32Bytes;
  const std::uint64_t out = cpu_attention ? most * q_heads * head_dim * kHalfBytes : 0;
  const std::uint64_t probs =
      cpu_attention && keeps_attention_scores
          ? most * heads * static_cast<std::uint64_t>(capacity) * kFloatBytes
          : 0;
  const int most_sequences = static_cast<int>(most);
  // Sequence-slots of every head a staging holds: whole caches, or compact.
  const int staged = staged_sequence_slots(most_sequences, capacity,
                                           cpu_attention || page_size <= 0 ? 0 : staged_capacity);
  const std::uint64_t staged_cache = kv_cache_bytes(config, 1, staged, storage);
  layout.add("staged k cache", Tier::gpu, staged_cache, 2);
  layout.add("staged v cache", Tier::gpu, staged_cache, 2);
  const bool packed = storage == Storage::int4;
  const std::uint64_t expanded = packed ? kv_cache_bytes(config, 1, staged) : 0;
  layout.add("staged expanded k cache", Tier::gpu, expanded);
  layout.add("staged expanded v cache", Tier::gpu, expanded);
  layout.add("host expanded k cache", Tier::host, cpu_attention ? expanded : 0);
  layout.add("host expanded v cache", Tier::host, cpu_attention ? expanded : 0);
  layout.add("staged rows", Tier::gpu, rows, 2);
  layout.add("staged write slots", Tier::gpu, slots, 2);
  layout.add("host rows", Tier::pinned, rows, 2);
  layout.add("host write slots", Tier::pinned, slots, 2);
  layout.add("host attention output", Tier::pinned, out, 2);
  layout.add("host probabilities", Tier::pinned, probs, 2);
  const int pages = page_count(capacity, page_size);
  const Tier summaries_at = cpu_attention ? Tier::pinned : Tier::gpu;
  for (const int n : offloaded) {
    layout.add("offloaded page summaries", summaries_at, page_summary_bytes(config, n, pages),
               config.num_layers);
  }
  const std::uint64_t chosen = cpu_attention ? most * heads * pages * kInt32Bytes : 0;
  layout.add("staged page summaries", Tier::gpu,
             cpu_attention ? page_summary_bytes(config, most_sequences, pages) : 0, 2);
  layout.add("host chosen pages", Tier::host, chosen, 2);
  layout.add("host chosen page counts", Tier::host,
             cpu_attention && pages > 0 ? most * heads * kInt32Bytes : 0, 2);
  // Gpu attention: a speculative choice per staging slot, and the count of the bytes gathered.
  const bool gathers = pages > 0 && !cpu_attention;
  layout.add("speculated pages", Tier::gpu, gathers ? most * heads * pages * kInt32Bytes : 0, 2);
  layout.add("speculated page counts", Tier::gpu, gathers ? most * heads * kInt32Bytes : 0, 2);
  layout.add("gathered bytes", Tier::gpu, gathers ? sizeof(unsigned long long) : 0);
  return layout;
}

DecodeSplits decode_splits(const ModelConfig& config, const GpuBatch& batch,
                           const KvCacheShape& shape) {
  DecodeSplits splits;
  splits.resident = kernels::plan_decode_split(batch.resident, config.num_heads, shape.capacity,
                                               shape.multiprocessors);
  if (!shape.cpu_attention) {
    // A compact staging is attended as a cache of its own slots.
    const bool compact = shape.staged_capacity > 0 && shape.staged_capacity < shape.capacity;
    splits.offloaded = kernels::plan_decode_split(batch.offloaded(), config.num_heads,
                                                  compact ? shape.staged_capacity : shape.capacity,
                                                  shape.multiprocessors);
    if (compact) {  // as OffloadedKv plans it, for the most offloaded sequences' chunks
      int most = 0;
      for (const GpuBatch& g : shape.gpu_batches) most = std::max(most, g.offloaded());
      splits.offloaded_whole = kernels::plan_decode_split(
          compact_chunk_sequences(most, shape.capacity, shape.staged_capacity), config.num_heads,
          shape.capacity, shape.multiprocessors);
    }
  }
  return splits;
}

MemoryLayout block_kv_cache_own_layout(const ModelConfig& config, const KvCacheShape& shape) {
  std::uint64_t block = 0;
  for (const GpuBatch& g : shape.gpu_batches) block += static_cast<std::uint64_t>(g.size);
  const auto heads = static_cast<std::uint64_t>(config.kv_heads());
  MemoryLayout layout;
  layout.add("token slots", Tier::gpu,
             block * static_cast<std::uint64_t>(shape.max_prompt) * heads * kInt32Bytes);
  layout.add("write slots", Tier::gpu, block * heads * kInt32Bytes);
  const std::uint64_t count_rows =
      shape.per_layer_budgets ? static_cast<std::uint64_t>(config.num_layers) : 1;
  layout.add("slot counts", Tier::gpu, count_rows * block * kInt32Bytes);
  layout.add("advancing", Tier::gpu, block * sizeof(std::uint8_t));
  int most_resident = 0;
  for (const GpuBatch& g : shape.gpu_batches) {
    const std::uint64_t bytes = kv_cache_bytes(config, g.resident, shape.capacity, shape.storage);
    layout.add("k cache", Tier::gpu, bytes, config.num_layers);
    layout.add("v cache", Tier::gpu, bytes, config.num_layers);
    most_resident = std::max(most_resident, g.resident);
  }
  const std::uint64_t expanded =
      shape.storage == Storage::int4 ? kv_cache_bytes(config, most_resident, shape.capacity) : 0;
  layout.add("expanded k cache", Tier::gpu, expanded);
  layout.add("expanded v cache", Tier::gpu, expanded);
  std::uint64_t scratch = 0;
  int most_offloaded = 0;
  for (const GpuBatch& g : shape.gpu_batches)
    most_offloaded = std::max(most_offloaded, g.offloaded());
  // A compact staging's dense layers attend this many whole caches at a time.
  const int whole_chunk =
      shape.staged_capacity > 0 && shape.staged_capacity < shape.capacity && !shape.cpu_attention
          ? compact_chunk_sequences(most_offloaded, shape.capacity, shape.staged_capacity)
          : 0;
  for (const GpuBatch& g : shape.gpu_batches) {
    const DecodeSplits splits = decode_splits(config, g, shape);
    const auto needs = [&](const kernels::DecodeSplit& split, int sequences) {
      return kernels::decode_split_scratch_bytes(split, sequences, config.num_heads,
                                                 config.head_dim(), config.kv_heads());
    };
    scratch = std::max({scratch, needs(splits.resident, g.resident),
                        needs(splits.offloaded, g.offloaded()),
                        needs(splits.offloaded_whole, std::min(g.offloaded(), whole_chunk))});
  }
  layout.add("decode attention scratch", Tier::gpu, scratch);
  // Grouped-query attention's per-query-head prompt key sums, before their group sum.
  std::uint64_t key_sums = 0;
  for (const GpuBatch& g : shape.gpu_batches) {
    if (!shape.keeps_attention_scores) break;
    key_sums =
        std::max(key_sums, kernels::prefill_key_sum_scratch_bytes(
                               g.size, config.num_heads, config.kv_heads(), shape.max_prompt));
  }
  layout.add("prefill key sum scratch", Tier::gpu, key_sums);
  const int pages = page_count(shape.capacity, shape.page_size);
  for (const GpuBatch& g : shape.gpu_batches) {
    layout.add("page summaries", Tier::gpu, page_summary_bytes(config, g.resident, pages),
               config.num_layers);
  }
  const std::uint64_t per_sequence = pages > 0 ? block * kInt32Bytes : 0;
  const bool compact = shape.staged_capacity > 0 && shape.staged_capacity < shape.capacity;
  layout.add("compact newest pages", Tier::gpu, compact ? per_sequence : 0);
  layout.add("compact slot counts", Tier::gpu, compact ? per_sequence : 0);
  layout.add("compact write slots", Tier::gpu, compact ? block * heads * kInt32Bytes : 0);
  layout.add("first pages", Tier::gpu, per_sequence);
  layout.add("pages per step", Tier::gpu, per_sequence);
  layout.add("chosen pages", Tier::gpu,
             block * heads * static_cast<std::uint64_t>(pages) * kInt32Bytes);
  layout.add("chosen page counts", Tier::gpu, pages > 0 ? block * heads * kInt32Bytes : 0);
  return layout;
}

MemoryLayout block_kv_cache_layout(const ModelConfig& config, const KvCacheShape& shape) {
  MemoryLayout layout = block_kv_cache_own_layout(config, shape);
  if (shape.keeps_attention_scores) {
    for (const GpuBatch& g : shape.gpu_batches) {
      layout.append(attention_score_state_layout(g.size, config.num_layers, config.kv_heads(),
                                                 shape.capacity, shape.max_prompt));
    }
  }
  const std::vector<int> offloaded = offloaded_per_gpu_batch(shape.gpu_batches);
  if (std::any_of(offloaded.begin(), offloaded.end(), [](int n) { return n > 0; })) {
    layout.append(offloaded_kv_layout(config, offloaded, shape.capacity,
                                      shape.keeps_attention_scores, shape.cpu_attention,
                                      shape.storage, shape.page_size, shape.staged_capacity));
  }
  return layout;
}

std::vector<int> offloaded_per_gpu_batch(const std::vector<GpuBatch>& gpu_batches) {
  std::vector<int> out;
  for (const GpuBatch& g : gpu_batches) out.push_back(g.offloaded());
  return out;
}

}  // namespace offgen
