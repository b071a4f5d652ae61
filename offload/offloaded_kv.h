// The KV cache of sequences that keep it in pinned host memory instead of on the gpu tier (the
// KV placement splits each GPU batch by sequences: its first `resident` sequences keep their KV
// on the gpu tier, the rest here). Per (layer, GPU batch) it moves only what it must:
//
//   prefill   the cache is written into a gpu staging slot, then copied out to the host whole.
//   decode, gpu attention   the host cache is copied into a staging slot (prefetched while the
//             task before computes) and attended there — with page selection only the pages the
//             step attends, gathered by the compute stream after the choice; only the new token's
//             k, v rows (and their write slots) come back, and a host task appends them to the host
//             cache.
//   decode, cpu attention   nothing of the cache crosses PCIe: the new rows go down, a host task
//             appends them and runs decode attention on the CPU (TBB), and the output (plus the
//             softmax rows an attention-score policy needs) comes back up.
//
// With int4 storage the host caches and their staging keep packed rows (kernels/packed_kv.h), so
// a third of the bytes cross PCIe, and a task's cache is expanded into an fp16 block before it is
// attended (on the gpu tier, or in host memory for cpu attention), where the new token is appended
// in fp16; the new rows are packed into the host cache by the host task that appends them. The
// prefill stores through the gpu block and packs it into the staging slot before it goes out.
//
// Two staging slots and two sets of row buffers alternate between consecutive tasks, so task
// i + 1's load overlaps task i's compute. Ordering is events only: every buffer is reused only
// after the event of its last reader, and a host cache is read only after its last store.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/core/compression.h"
#include "engine/device/device.h"
#include "engine/model/model_config.h"
#include "kernels/ops.h"
#include "scheduler/block_task.h"

namespace offgen {

// Page selection (quest) of one task's offloaded sequences: what BlockKvCache decided for the
// step, from the task's first offloaded sequence on (none, null first_page, in a dense layer).
// Device pointers, except that cpu attention reads first_page and pages_per_step on the host (valid
// until the step's streams are synchronized) and chooses into its own host arrays.
struct OffloadedPages {
  const std::int32_t* slot_count = nullptr;      // prefill: [offloaded] the prompt's slots
  const std::int32_t* first_page = nullptr;      // [offloaded] the first page summarised again
  const std::int32_t* pages_per_step = nullptr;  // decode: [offloaded] S
  std::int32_t* selected = nullptr;              // gpu attention: [offloaded, kv heads, pages]
  std::int32_t* selected_count = nullptr;        // gpu attention: [offloaded, kv heads]
  // Decode into a compact staging (OffloadedKv::compact): where it keeps each sequence's newest
  // page (kernels::staged_newest_page), the slots it then holds (kernels::selected_slots) and the
  // new token's slot there ([offloaded, kv heads]).
  const std::int32_t* staged_page = nullptr;
  const std::int32_t* staged_slot_count = nullptr;
  const std::int32_t* staged_write_slot = nullptr;
};

class OffloadedKv {
 public:
  // offloaded[g]: sequences of GPU batch g whose KV lives here (0 for a batch with none).
  // capacity: slots per (layer, sequence, head). keeps_attention_scores: the policy keeps attention
  // scores, so cpu attention returns its softmax rows. Allocates offloaded_kv_layout
  // (scheduler/kv_cache_layout.h); throws OutOfMemoryError when a tier cannot hold it.
  // page_size > 0: quest's page selection (kernels/page_selection_args.h); each (layer, GPU
  // batch) keeps its sequences' page summaries where they attend (the gpu tier, or pinned memory
  // for cpu attention), and every store and decode step takes OffloadedPages.
  // staged_capacity in (0, capacity), with page selection attended on the gpu tier: a compact
  // staging (see compact()).
  OffloadedKv(Device& device, Ops& ops, const ModelConfig& config, std::vector<int> offloaded,
              int capacity, bool keeps_attention_scores, bool cpu_attention,
              Storage storage = Storage::fp16, int page_size = 0, int staged_capacity = 0);
  OffloadedKv(const OffloadedKv&) = delete;
  OffloadedKv& operator=(const OffloadedKv&) = delete;
  ~OffloadedKv();

  bool cpu_attention() const { return cpu_attention_; }
  // A compact staging: a decode step's staging holds only the pages it attends, staged_capacity
  // slots per (sequence, head) laid out in the order of the choice (GatherPagesArgs::dst_capacity),
  // and is attended as a cache of those slots alone — so the gpu tier holds the summaries and the
  // attended pages, not the caches. A prefill's caches go out through the same staging, as many
  // sequences' whole caches at a time as it holds, and so do the dense layers' decode steps (no
  // prefetch: their first chunk comes in once the layer's task runs). Every choosing decode step
  // takes the staged arrays of OffloadedPages; there is no speculation.
  bool compact() const { return staged_capacity_ < capacity_; }
  int staged_capacity() const { return staged_capacity_; }
  int offloaded(int gpu_batch) const { return offloaded_[static_cast<std::size_t>(gpu_batch)]; }

  // Starts a pass (a prefill or one decode step): task numbers start again at 0. Task i of a pass
  // uses staging slot i % 2.
  void begin_pass();

  // Prefill of `task`'s offloaded sequences, after their attention: stores their prompt tokens'
  // k, v (qkv rows [offloaded, seq], token_slot [offloaded, heads, seq], both device pointers of
  // the offloaded sequences) and copies the cache out to the host.
  // With page selection, summarises every page of the prompt's slots (pages.slot_count,
  // pages.first_page all 0) beside the cache.
  void store_prefill(const BlockTask& task, const Half* qkv, const std::int32_t* token_slot,
                     int seq, const OffloadedPages& pages = {});

  // Decode with gpu attention: starts copying `task`'s host cache into its staging slot (does
  // nothing if already started). Call for task i + 1 before enqueuing task i's compute; not for
  // a layer that selects pages, whose decode brings in only the pages it attends.
  void prefetch(const BlockTask& task);
  // Decode with gpu attention and page selection, during the task before `task` (the layer
  // below, same GPU batch): chooses `task`'s pages from a guess of its query (qkv: the offloaded
  // sequences' rows, laid out as decode_gpu's; slot_count, pages: `task`'s) on compute, then
  // gathers the newest token's page and the guessed ones into `task`'s staging slot on the KV
  // copy stream, overlapping the rest of the task before. decode_gpu then gathers only the
  // chosen pages the guess missed; what is attended is the same (InfiniGen's speculation, Lee et
  // al., OSDI 2024, over Quest's choice).
  // q_stride: PageSelectArgs::q_stride of qkv (0: qkv rows; the guess may be q alone).
  void speculate(const BlockTask& task, const Half* qkv, std::int64_t q_stride,
                 const std::int32_t* slot_count, const OffloadedPages& pages);
  // Decode with gpu attention, on compute, after the qkv projection: appends the new rows
  // (qkv [offloaded, (H + 2·KV)·D], write_slot [offloaded, KV heads]) to the staged cache, queues
  // their copy back to the host cache, and runs decode attention over the staged cache (args: the
  // offloaded sequences' pointers; its caches are filled in here). With page selection it then
  // gathers only the newest page's rows from the host cache before the append, summarises that
  // page again, chooses the pages (into pages.selected), gathers those and attends to them alone:
  // the bytes that cross PCIe are the attended rows'.
  void decode_gpu(const BlockTask& task, const std::int32_t* write_slot,
                  kernels::DecodeAttentionArgs args, const OffloadedPages& pages = {});

  // Decode with cpu attention, on compute, after the qkv projection: sends the new rows down;
  // queues a host task that appends them and runs attention, and the copy of its output
  // (args.out, device) and softmax rows (args.probs, device, when the policy keeps attention
  // scores) back up. slot_count is a host pointer that stays valid until the step's streams are
  // synchronized. With page selection the host task summarises, chooses and attends to the chosen
  // pages where they lie, so still only q goes down and the output comes up.
  void decode_cpu(const BlockTask& task, const std::int32_t* write_slot,
                  const std::int32_t* host_slot_count, kernels::DecodeAttentionArgs args,
                  const OffloadedPages& pages = {});
  // Makes compute wait for decode_cpu's output of `task` (call after enqueuing the gpu work that
  // can overlap it).
  void finish_cpu(const BlockTask& task);

  // One GPU batch's host K (or V) cache of one layer: [offloaded, heads, capacity, head_dim] as
  // stored (fp16, or packed codes then parameters, each a run per sequence). Continuous batching
  // copies a sequence in or out of it between passes, when no copy or host task touches it.
  Buffer& host_k(int layer, int gpu_batch) { return k_host_[cache_index(layer, gpu_batch)]; }
  Buffer& host_v(int layer, int gpu_batch) { return v_host_[cache_index(layer, gpu_batch)]; }
  // Its page summaries ([offloaded, heads, 2, head_dim, pages] fp16; empty without page
  // selection), which continuous batching moves with the caches.
  Buffer& summary(int layer, int gpu_batch) { return summary_[cache_index(layer, gpu_batch)]; }

  // Bytes of host cache (all layers, K and V) and of gpu staging this allocated.
  std::uint64_t host_cache_bytes() const;
  std::uint64_t gpu_bytes() const;
  // PCIe traffic so far: host-to-device and device-to-host bytes. loaded_bytes waits for the
  // gathers queued so far (their bytes are counted where they run).
  std::uint64_t loaded_bytes() const;
  std::uint64_t stored_bytes() const { return stored_bytes_; }

 private:
  struct Slot {
    Buffer k, v;                   // gpu staging: whole caches, or compact (staged_sequence_slots)
    Buffer rows, slots;            // gpu: the task's new qkv rows and write slots
    Buffer host_rows, host_slots;  // pinned copies of them
    Buffer host_out, host_probs;   // pinned: cpu attention's output and softmax rows
    // Page selection with cpu attention: a prefill's summaries on their way out (gpu), and the
    // host task's chosen pages and their counts.
    Buffer staged_summary, host_selected, host_selected_count;
    // Page selection with gpu attention: the pages speculate() chose for the slot's task.
    Buffer speculated, speculated_count;
    std::unique_ptr<Event> loaded, computed, saved, rows_ready, rows_free, out_ready, chosen;
    int loaded_task = -1;      // the task whose cache was copied in (prefetch, or speculate)
    bool speculative = false;  // what came in is speculate()'s pages, not the whole cache
  };

  Slot& slot_of(const BlockTask& task) { return slots_[task.index % 2]; }
  std::size_t cache_index(const BlockTask& task) const;
  std::size_t cache_index(int layer, int gpu_batch) const {
    return static_cast<std::size_t>(layer) * offloaded_.size() +
           static_cast<std::size_t>(gpu_batch);
  }
  std::size_t cache_elements(int gpu_batch) const;
  // Bytes of one GPU batch's offloaded K (or V) cache in one layer, as stored.
  std::size_t cache_bytes(int gpu_batch) const;
  // Rows (sequence, head, slot) of one GPU batch's offloaded cache in one layer.
  std::int64_t cache_rows(int gpu_batch) const;
  // Rows of its staging in a decode step (a compact staging's are fewer).
  std::int64_t staged_rows(int gpu_batch) const;
  // Rows [first_row, first_row + rows) of one GPU batch's host cache and a staging holding just
  // those rows (fp16, or int4: a run of codes and one of parameters), copied either way on
  // `stream`. Returns the bytes.
  std::uint64_t copy_rows(Buffer& host, Buffer& staged, int gpu_batch, std::int64_t first_row,
                          std::int64_t rows, bool to_host, Stream& stream);
  // Calls body(slot, first, count, first_row, rows) for each chunk of prefill_chunk_ of the task's
  // offloaded sequences (all of them in one without a compact staging), the chunks taking the
  // two staging slots in turn from the task's own; rows of the chunk's caches from first_row.
  template <typename Body>
  void for_each_chunk(const BlockTask& task, Body&& body);
  // The task's new rows back to its host cache: send_rows, then a host task appending them.
  void write_back(const BlockTask& task, Slot& slot, const Half* qkv,
                  const std::int32_t* write_slot);
  // A dense layer's decode over a compact staging: prefill_chunk_ sequences' whole caches come
  // in at a time, each chunk appended and attended as a cache of its own.
  void decode_whole(const BlockTask& task, const std::int32_t* write_slot,
                    const kernels::DecodeAttentionArgs& args);
  // Copies the task's new rows and write slots down to the slot's pinned buffers, after the
  // task's earlier compute; the d2h stream then holds them for the host task that follows.
  void send_rows(const BlockTask& task, Slot& slot, const Half* qkv,
                 const std::int32_t* write_slot);
  // Page selection with gpu attention: enqueues on compute the gather of the task's host K and V
  // rows into the slot's staging (kernels/page_selection_args.h: the newest token's page with
  // selected null, else the chosen pages before it), every plane of their storage.
  // `present` (optional, with selected): pages already in the staging, not gathered again. On
  // `ops` (compute's, or the copy stream's).
  void gather_pages(Ops& ops, const BlockTask& task, Slot& slot, const std::int32_t* slot_count,
                    const std::int32_t* first_page, const std::int32_t* selected,
                    const std::int32_t* selected_count, const std::int32_t* present = nullptr,
                    const std::int32_t* present_count = nullptr,
                    const std::int32_t* staged_page = nullptr);

  Device& device_;
  Ops& ops_;
  Stream& compute_;
  Stream& h2d_;
  Stream& d2h_;
  int q_heads_;  // query heads: the width of the qkv rows and attention output
  int heads_;    // KV heads: the cache's, its slots' and its scores'
  int head_dim_;
  int capacity_;
  int staged_capacity_;               // slots per (sequence, head) of a decode step's staging
  int prefill_chunk_;                 // sequences whose whole caches a staging slot holds
  kernels::DecodeSplit whole_split_;  // decode attention's split of such a chunk (dense layers)
  bool keeps_attention_scores_;
  bool cpu_attention_;
  Storage storage_;
  std::vector<int> offloaded_;
  // int4: the fp16 blocks a task's cache is expanded into, on the gpu tier and (cpu attention) in
  // host memory.
  Buffer expanded_k_, expanded_v_, host_expanded_k_, host_expanded_v_;
  std::vector<Buffer> k_host_, v_host_;  // per (layer, GPU batch): pinned
  std::vector<Buffer> summary_;          // per (layer, GPU batch): page summaries (gpu, or pinned)
  kernels::PageGeometry geometry_;       // of page selection (page_size 0: none)
  // Page selection with gpu attention: the kernels on the KV copy stream (speculate's gather),
  // and the bytes every gather copied (gpu tier, one counter).
  std::unique_ptr<Ops> copy_ops_;
  Buffer gathered_bytes_;
  std::vector<std::unique_ptr<Event>> cache_stored_;  // per (layer, GPU batch): its last store
  Slot slots_[2];
  std::uint64_t loaded_bytes_ = 0;
  std::uint64_t stored_bytes_ = 0;
};

}  // namespace offgen
