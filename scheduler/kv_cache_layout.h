// The memory of a block's KV cache (engine/runtime/block_kv_cache.h), as layouts
// (memory_layout.h): the gpu-resident K/V of each GPU batch, the per-head state of a policy that
// keeps attention scores, the KV of the sequences kept in pinned memory with its staging, and the
// step's slot arrays. The cache and its parts allocate from these; the planner sums them.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/compression.h"
#include "engine/model/model_config.h"
#include "kernels/decode_split.h"
#include "scheduler/block_shape.h"
#include "scheduler/memory_layout.h"

namespace offgen {

// Bytes of one layer's K (or V) cache of `sequences` sequences: [sequences, heads, capacity,
// head_dim] fp16, or those rows int4-packed (kernels/packed_kv.h).
std::uint64_t kv_cache_bytes(const ModelConfig& config, int sequences, int capacity,
                             Storage storage = Storage::fp16);
// Bytes of one token's k (or v) row in one layer and head, as the cache stores it.
std::uint64_t kv_row_bytes(const ModelConfig& config, Storage storage);

// Page selection (quest; kernels/page_selection_args.h): pages of `page_size` slots per cache of
// `capacity` slots, at least 2 (0 when page_size is 0: no selection), and the bytes of one layer's
// page summaries of `sequences` sequences ([sequences, kv heads, 2, head_dim, pages] fp16).
int page_count(int capacity, int page_size);
std::uint64_t page_summary_bytes(const ModelConfig& config, int sequences, int pages);

// AttentionScoreState of `sequences` sequences: per layer each slot's position (int32) and score
// (fp32) and each head's write slot (int32); once, the prefill's key-probability sums [sequences,
// heads, max_prompt] and a decode step's probability rows [sequences, heads, capacity] (fp32),
// and each sequence's budget and recent window (int32).
MemoryLayout attention_score_state_layout(int sequences, int layers, int heads, int capacity,
                                          int max_prompt);

// OffloadedKv: offloaded[g] sequences of GPU batch g keep their KV in pinned memory (a cache per
// (layer, GPU batch)); two staging slots, each sized for the most offloaded sequences of any GPU
// batch, hold a task's cache on the gpu tier and its new rows on both sides; with cpu attention,
// its output (and the softmax rows of a policy keeping attention scores) come back through
// pinned memory. With int4 storage the caches and their staging hold packed rows, and a task's
// cache is expanded into fp16 blocks before it is attended: one pair on the gpu tier (the
// prefill stores through it too) and, with cpu attention, one pair in host memory.
// With page selection (page_size > 0) every (layer, GPU batch) keeps its sequences' page
// summaries where they attend: on the gpu tier, or in pinned memory with cpu attention, which
// also takes a gpu staging of a prefill's summaries and, per staging slot, host arrays of the
// chosen pages.
// staged_capacity in (0, capacity): a compact staging (OffloadedKv::compact), whose slots hold
// staged_sequence_slots sequence-slots of every head: a decode step's attended pages of the most
// offloaded sequences, or one prefill's whole cache, whichever is more.
MemoryLayout offloaded_kv_layout(const ModelConfig& config, const std::vector<int>& offloaded,
                                 int capacity, bool keeps_attention_scores, bool cpu_attention,
                                 Storage storage = Storage::fp16, int page_size = 0,
                                 int staged_capacity = 0);
int staged_sequence_slots(int most_offloaded, int capacity, int staged_capacity);
// The sequences whose whole caches such a staging slot holds at once (a prefill's, or a dense
// layer's decode, go through it that many at a time): every offloaded one without compaction.
int compact_chunk_sequences(int most_offloaded, int capacity, int staged_capacity);

// The slots per (sequence, head) of a compact staging for sequences that attend up to
// pages_per_step pages of page_size slots of caches of `capacity` slots: 0 (staging of whole
// caches) without page selection, with host caches attended on the CPU (nothing is staged), when
// speculation applies (its guesses land where the pages lie) or when the pages are not fewer than
// the cache's. Dense layers then bring whole caches through it in chunks.
int compact_staged_capacity(int capacity, int page_size, int pages_per_step, bool cpu_attention,
                            bool speculates);

// What sizes a block's KV cache.
struct KvCacheShape {
  std::vector<GpuBatch> gpu_batches;  // the block's split (split_block)
  int capacity = 1;                   // slots per (layer, sequence, head): the largest C + 1
  int max_prompt = 1;                 // the longest prefill
  bool keeps_attention_scores = false;
  bool cpu_attention = false;  // host-resident sequences attend on the CPU
  // Of the device (Device::multiprocessors): sizes decode attention's split; 0 = never splits.
  int multiprocessors = 0;
  // The policy's budgets differ by layer (pyramidkv): a decode step's slot counts are per layer.
  bool per_layer_budgets = false;
  Storage storage = Storage::fp16;  // how the K and V rows are kept (and moved)
  int page_size = 0;                // quest: slots per page; 0 = every cached token is attended
  // quest over host caches attended on the gpu tier, without speculation: slots per (sequence,
  // head) of a compact staging (compact_staged_capacity; 0: staging of whole caches).
  int staged_capacity = 0;
};

// How decode attention splits one GPU batch's caches (kernels/decode_split.h): over its
// gpu-resident sequences, and over its host-resident ones staged on the gpu tier (when they
// attend there). Planned once per cache; every decode step reuses it.
struct DecodeSplits {
  kernels::DecodeSplit resident;
  kernels::DecodeSplit offloaded;
  // A compact staging's dense layers: chunks of compact_chunk_sequences whole caches.
  kernels::DecodeSplit offloaded_whole;
};
DecodeSplits decode_splits(const ModelConfig& config, const GpuBatch& batch,
                           const KvCacheShape& shape);

// BlockKvCache's own buffers: the step's slot arrays, each GPU batch's resident K and V (one
// buffer per layer each), and the scratch of decode attention's largest split (one buffer: every
// decode attention runs on the compute stream, one after another); with int4 storage, one fp16
// K and V block of the largest GPU batch's resident sequences, which a task's packed cache is
// expanded into (the same reasoning: one at a time). With page selection: each GPU batch's
// resident page summaries (per layer), and the step's first pages to summarise, pages per step,
// chosen pages and their counts for the whole block.
MemoryLayout block_kv_cache_own_layout(const ModelConfig& config, const KvCacheShape& shape);
// Everything a BlockKvCache allocates: its own buffers, each GPU batch's AttentionScoreState
// (when the policy keeps attention scores) and the OffloadedKv (when some KV lives in pinned
// memory).
MemoryLayout block_kv_cache_layout(const ModelConfig& config, const KvCacheShape& shape);

// The offloaded sequences of each GPU batch.
std::vector<int> offloaded_per_gpu_batch(const std::vector<GpuBatch>& gpu_batches);

}  // namespace offgen
