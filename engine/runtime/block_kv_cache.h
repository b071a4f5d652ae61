// The KV cache of one block of sequences (design sections 5 and 6): for every GPU batch and layer,
// K and V [resident, heads, capacity, head_dim] fp16 on the gpu tier for the batch's first
// `resident` sequences, and the rest's in pinned memory (offloaded_kv.h), plus what decides which
// tokens each cache keeps — the host slot plan of a position-based policy (cache_slots.h), or the
// per-head state of a policy that keeps attention scores (attention_score_state.h) — and the
// per-sequence counters both need (tokens cached, real tokens seen).
//
// A step has a host side and a device side. The host side runs once per step, before its pass:
// start_prefill() / start_decode() plan the step's slots and upload them (through the runner's
// staging); commit() after the pass advances the counters. The device side runs per BlockTask of
// the pass, on the compute stream: attend_prefill() / attend_decode() run the task's attention over
// its GPU batch and store the new K/V wherever its sequences keep them; prefetch() starts loading
// the next task's host-resident cache while the current one computes.
//
// With int4 storage (engine/core/compression.h) every cache keeps its rows packed
// (kernels/packed_kv.h), and a task works on an fp16 block: the prefill stores its tokens there and
// packs them; a decode step expands the cache into it, appends the new token in fp16, packs that
// row back, and attends over the block. So a token attends to itself exactly at its own step and
// is seen through its int4 codes from the next step on — FlexGen's order — and attention, the
// policies and their scores are the fp16 ones, unchanged.
//
// A selection policy (quest: KvPolicy::page_size() > 0) keeps every token, and beside each
// layer's cache the per-page key summaries of kernels/page_selection_args.h, where the sequence
// attends (the gpu tier; a host cache's on the gpu tier too, or in pinned memory with cpu
// attention). The prefill summarises every page of the prompt after storing it; a decode step
// appends the new token, summarises its page again, chooses the pages from this layer's query,
// and attends to those alone (but in the first KvPolicy::dense_layers(), which attend every
// token and keep no summaries). With int4 storage the summaries are of the fp16 keys the step sees:
// the prompt's before packing, and the newest page as expanded (its new token in fp16).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/device/device.h"
#include "engine/model/model_config.h"
#include "engine/runtime/attention_score_state.h"
#include "engine/runtime/step_staging.h"
#include "kernels/ops.h"
#include "offload/offloaded_kv.h"
#include "policies/cache_slots.h"
#include "policies/kv_policy.h"
#include "scheduler/batch_formation.h"
#include "scheduler/block_task.h"
#include "scheduler/kv_cache_layout.h"

namespace offgen {

// KV cache traffic of the decode steps so far: attention reads every cached K and V row of each
// (layer, sequence, head) it attends over, and each step writes one new row.
struct KvTraffic {
  std::uint64_t read_bytes = 0;
  std::uint64_t written_bytes = 0;
  int decode_steps = 0;
  // Of the host-resident KV: bytes copied host-to-device and device-to-host (prefill included).
  std::uint64_t loaded_bytes = 0;
  std::uint64_t stored_bytes = 0;
  double moved_per_step() const {
    return decode_steps > 0 ? static_cast<double>(read_bytes + written_bytes) / decode_steps : 0.0;
  }
};

class BlockKvCache {
 public:
  // policies: one per sequence of the block, all of one kind, each with its own budget C (they
  // must outlive the cache); every cache has the largest C + 1 slots. gpu_batches: the block's
  // split (block_shape.h). max_prompt: the longest prefill. cpu_attention: the host-resident
  // sequences attend on the CPU. Allocates block_kv_cache_layout (scheduler/kv_cache_layout.h),
  // decode attention's split planned for the device; throws OutOfMemoryError when a tier cannot
  // hold it.
  // min_capacity: slots per cache at least (0: the largest C + 1), so sequences of later
  // requests with larger budgets can take a finished sequence's caches (adopt); likewise
  // min_pages_per_step for quest's pages attended per step.
  // Quest over host caches attended on the gpu tier, not
  // speculating (speculative_pages: whether the runner guesses pages), stages only the attended
  // pages (OffloadedKv::compact; compact_staged_capacity).
  BlockKvCache(Device& device, Ops& ops, const ModelConfig& config,
               std::vector<const KvPolicy*> policies, const std::vector<GpuBatch>& gpu_batches,
               int max_prompt, bool cpu_attention, Storage storage = Storage::fp16,
               int min_capacity = 0, bool speculative_pages = false, int min_pages_per_step = 0);
  BlockKvCache(const BlockKvCache&) = delete;
  BlockKvCache& operator=(const BlockKvCache&) = delete;
  ~BlockKvCache();

  int capacity() const { return capacity_; }
  // Whether the policy keeps attention scores (h2o): attention then emits probabilities.
  bool keeps_attention_scores() const { return keeps_attention_scores_; }
  // Whether some sequences keep their KV in pinned memory (the KV streams then carry work).
  bool has_offloaded() const { return offloaded_ != nullptr; }

  // Host side of a prefill of `prompts`: resets the counters and uploads the prompt tokens' slots.
  void start_prefill(const PaddedBatch& prompts, StepStaging& staging);
  // Host side of a decode step: uploads its slot counts, write slots and `advancing` (one per
  // sequence: 0 = the token is not kept). Returns each sequence's new token's HF position, valid
  // until commit().
  std::span<const std::int32_t> start_decode(std::span<const std::uint8_t> advancing,
                                             StepStaging& staging);
  // After a decode step's pass is enqueued: advances the counters (evicting where a cache is over
  // budget), counts the step's traffic.
  void commit(std::span<const std::uint8_t> advancing);

  // Whether sequence b keeps its KV on the gpu tier (the others keep it in a host cache).
  bool resident(int b) const;
  // Continuous batching: sequence b (finished) takes the caches of sequence from_b of `from` — a
  // cache of the same capacity and storage that has just prefilled it — under `policy` (its own,
  // outliving this cache): K and V of every layer (between the gpu tier and host caches as each
  // sequence keeps them), the attention-score state or the slot plan, its budget and its token
  // count. The copies are enqueued on `stream` (the compute stream, after from's prefill, before
  // the next step); a host cache must be idle (both runners synchronized), and `stream` must be
  // synchronized before a pass loads a host cache on another stream (BlockRunner::decode does).
  void adopt(Device& device, Stream& stream, int b, BlockKvCache& from, int from_b,
             const KvPolicy* policy);
  // Sequence b has finished (its row waits for a request); `policy` (outliving this cache)
  // stands in for it, so no entry points at a policy another row may free.
  void park(int b, const KvPolicy* policy);

  // A pass (a prefill or one decode step) begins: task numbers restart at 0.
  void begin_pass();
  // Decode: starts copying `task`'s host-resident cache in (call for task i + 1 before enqueuing
  // task i's compute; nothing to do for gpu-resident or cpu-attended sequences).
  void prefetch(const BlockTask& task);
  // Speculative page selection (OffloadedKv::speculate): whether `next`, the task after
  // `current`, is worth a guess — the layer above of the same GPU batch, choosing pages, with
  // host caches attended on the gpu tier.
  bool speculates(const BlockTask& current, const BlockTask& next) const;
  // On compute, during `current`: chooses next's pages of its offloaded sequences from qkv (a
  // guess of next's q, one row per offloaded sequence, rows q_stride apart: PageSelectArgs) and
  // starts gathering them.
  void speculate(const BlockTask& next, const Half* qkv, std::int64_t q_stride);
  // Prefill of task's GPU batch, on compute: causal attention over qkv ([batch * seq, 3·H·D])
  // with the prompts' mask valid ([batch * seq], device) into out, then the policy's choice of
  // prompt tokens is stored in the task's layer. math: how the cpu kernel multiplies
  // (kernels/prefill_math.h).
  void attend_prefill(const BlockTask& task, const Half* qkv, const std::uint8_t* valid, Half* out,
                      int seq, kernels::PrefillMath math = kernels::PrefillMath::fp32);
  // Decode of task's GPU batch, on compute: appends each sequence's new k, v (qkv [batch, 3·H·D])
  // and attends over its cache into out; positions: the step's new-token positions of the whole
  // block (device, as uploaded from start_decode's answer).
  void attend_decode(const BlockTask& task, const Half* qkv, const std::int32_t* positions,
                     Half* out);

  // Bytes of K/V cache (all layers, every tier), of it in pinned memory, and of the attention
  // score state (0 for position-based policies).
  std::uint64_t bytes() const;
  std::uint64_t host_bytes() const;
  std::uint64_t policy_state_bytes() const;
  // int4: the fp16 K and V block resident caches are expanded into (0 for fp16).
  std::uint64_t expanded_bytes() const { return expanded_k_.bytes() + expanded_v_.bytes(); }
  KvTraffic traffic() const;

 private:
  // One GPU batch's gpu-resident cache and policy state.
  struct GpuBatchCache {
    std::vector<Buffer> k, v;  // per layer: [resident, heads, capacity, head_dim], or packed
    std::vector<Buffer>
        summary;  // page selection, per layer: [resident, heads, 2, head_dim, pages]
    std::unique_ptr<AttentionScoreState> scores;  // when the policy keeps attention scores
    DecodeSplits splits;                          // of its decode attention, planned once
  };

  const ModelConfig& config_;
  Ops& ops_;
  std::vector<const KvPolicy*> policies_;
  int block_;
  int max_prompt_;
  int capacity_;
  bool keeps_attention_scores_;
  Storage storage_;
  std::vector<GpuBatchCache> gpu_batches_;
  std::vector<GpuBatch> batches_;  // the block's split, one per gpu_batches_ entry
  // Where sequence b is: its GPU batch and its index within it.
  std::pair<std::size_t, int> locate(int b) const;
  // Sequence b's K and V of a layer: the buffers holding them, how many sequences each holds and
  // b's index among those (its GPU batch's resident cache, or its host cache).
  struct SequenceKv {
    Buffer* k;
    Buffer* v;
    int count;
    int index;
  };
  SequenceKv sequence_kv(int b, int layer);
  // The page summaries holding sequence b's of a layer (at sequence_kv's index).
  Buffer& sequence_summary(int b, int layer);
  ScoreTrace trace_;  // OFFGEN_TRACE_SCORES (score_trace.h)
  // int4: the fp16 K and V block a task's resident cache is expanded into (gpu tier).
  Buffer expanded_k_, expanded_v_;
  std::unique_ptr<OffloadedKv> offloaded_;  // null when every sequence's KV is gpu-resident
  std::optional<CacheSlots> slots_;         // position-based policies only

  // The step's device inputs, for the whole block (a GPU batch's part starts at its first
  // sequence): the prefill's token -> slot map [block, heads, seq], a decode step's write slots
  // [block, heads], attended slot counts [rows, block] and advancing flags [block].
  Buffer token_slot_, write_slot_, slot_count_, advancing_;
  // Decode attention's split scratch, sized for the largest split (gpu tier).
  Buffer decode_scratch_;
  Buffer key_sum_scratch_;  // grouped-query attention's prompt key sums per query head (gpu)
  // Page selection (page_size() > 0): the caches' shape of it; the step's first page to
  // summarise again and pages to attend per sequence [block], and the chosen pages [block, heads,
  // max_pages()] and their counts [block, heads] (gpu; one layer's at a time).
  kernels::PageGeometry geometry_;
  int page_size() const { return geometry_.page_size; }
  int max_pages() const { return geometry_.max_pages; }
  int dense_layers_ = 0;  // the first layers attend every token
  bool selects(int layer) const { return page_size() > 0 && layer >= dense_layers_; }
  Buffer first_page_, pages_per_step_, selected_, selected_count_;
  // What the step uploads of them, kept on the host for cpu attention's host tasks (valid until
  // the next start_*).
  std::vector<std::int32_t> step_first_page_, step_pages_per_step_;
  // A compact staging of host caches (OffloadedKv::compact): each step's newest page places,
  // staged slot counts [block] and write slots [block, heads].
  Buffer staged_page_, staged_slot_count_, staged_write_slot_;
  std::vector<std::int32_t> step_staged_page_, step_staged_count_, step_staged_write_;
  bool compact() const { return offloaded_ && offloaded_->compact(); }
  // The page selection inputs of task's offloaded sequences (on the host for cpu attention).
  OffloadedPages offloaded_pages(const BlockTask& task, bool prefill);
  // The attended slots of a sequence whose cache holds `count` at this step, under its policy's
  // page selection (count itself without one).
  int attended_slots(int b, int count) const;

  // C of each sequence, per layer where the policy's budgets differ by layer (pyramidkv), else
  // one row for every layer: [rows][block].
  std::vector<std::vector<int>> budgets_;
  std::vector<std::int32_t> seen_;  // real tokens of each sequence so far: the next HF position
  // The current decode step's positions and attended slot counts ([rows][block] flattened; uploaded
  // with its inputs).
  std::vector<std::int32_t> step_positions_, step_counts_;
  // The row of step_counts_ (and of slot_count_) that `layer` attends with.
  std::int64_t count_row(int layer) const {
    return budgets_.size() > 1 ? std::int64_t{layer} * block_ : 0;
  }
  // Host arrays rebuilt every step, kept so a step allocates nothing: the position-based
  // policies' slot plan.
  std::vector<std::int32_t> step_sequence_slot_, step_slot_counts_, step_write_slot_;
  KvTraffic traffic_;
};

}  // namespace offgen
