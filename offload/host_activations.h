// The block's hidden states in pinned host memory instead of on the gpu tier (the activations
// placement, design section 6: activations live on one tier). The gpu tier then holds two
// staging slots of one GPU batch each instead of the whole block's hidden states, which is what
// lets a block of many GPU batches of long prompts fit.
//
// Per (layer, GPU batch) task of a pass, in the order the tasks are issued:
//
//   layer 0   the embedding is computed straight into the task's slot (nothing to load);
//   layer > 0 the GPU batch's rows are copied host -> slot on the h2d_kv stream, started while
//             the task before computes (prefetch);
//   after     the slot is copied back to the host on the d2h_kv stream.
//
// Slot i % 2 serves task i. Ordering is events only: a slot is refilled only after the store of
// the task that used it before, a GPU batch's rows are loaded only after their last store, and
// the output head (which gathers its rows straight from pinned memory: the CUDA device's pinned
// memory is mapped into the device's address space) waits for every store of the pass.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/core/half.h"
#include "engine/device/device.h"
#include "scheduler/block_shape.h"
#include "scheduler/block_task.h"

namespace offgen {

class HostActivations {
 public:
  // Hidden states of `gpu_batches` (a block's) for up to `max_rows_per_sequence` rows
  // (the prompt length) of `hidden` halves each, as host_activations_layout lays them out
  // (scheduler/runner_layout.h). Throws OutOfMemoryError when a tier cannot hold them.
  HostActivations(Device& device, std::vector<GpuBatch> gpu_batches, int max_rows_per_sequence,
                  int hidden);
  HostActivations(const HostActivations&) = delete;
  HostActivations& operator=(const HostActivations&) = delete;
  ~HostActivations();

  // Starts a pass whose steps have `rows_per_sequence` rows per sequence (the prompt length for
  // a prefill, 1 for a decode step).
  void begin_pass(int rows_per_sequence);
  // Starts copying a task's rows into its slot (layer > 0; nothing for layer 0, or when already
  // started). Call for task i + 1 before enqueuing task i's compute.
  void prefetch(const BlockTask& task);
  // On compute, before the task's kernels: the slot holding the task's rows, [GPU batch rows,
  // hidden] (for layer 0: free for the embedding to be written into).
  Half* acquire(const BlockTask& task);
  // On compute, after the task's kernels: queues the slot's copy back to the host.
  void release(const BlockTask& task);
  // Makes compute wait for every store of the pass, and returns the block's hidden states,
  // [block rows, hidden], in pinned memory, for the output head.
  const Half* finish_pass();

  std::uint64_t moved_bytes() const { return moved_bytes_; }

 private:
  struct Slot {
    Buffer rows;  // gpu: one GPU batch's rows
    std::unique_ptr<Event> loaded, saved;
    int loaded_task = -1;
  };
  Slot& slot_of(const BlockTask& task) { return slots_[task.index % 2]; }
  Half* host_rows(const GpuBatch& batch);
  std::size_t batch_bytes(const GpuBatch& batch) const;

  Device& device_;
  Stream& compute_;
  Stream& h2d_;
  Stream& d2h_;
  std::vector<GpuBatch> gpu_batches_;
  int max_rows_per_sequence_;
  int hidden_;
  int rows_per_sequence_ = 0;
  int released_through_ = -1;  // the last task of the pass whose rows were stored
  Buffer host_;                // pinned: [block rows, hidden]
  Slot slots_[2];
  std::unique_ptr<Event> computed_;
  std::vector<std::unique_ptr<Event>> gpu_batch_saved_;  // per GPU batch: its last store
  std::uint64_t moved_bytes_ = 0;
};

}  // namespace offgen
