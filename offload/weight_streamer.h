// Streams offloaded layer weights into two gpu slots so layer j+1's weights copy while layer j
// computes (design section 6), and brings packed (int4) layers to the kernels: each layer is
// expanded into the store's fp16 block when it is acquired (WeightStore::bind_layer), whether it
// came through a slot or is resident — so with int4 weights a streamer runs even when nothing
// streams, and then copies nothing. Layer loads are numbered across passes (load n is layer n mod L
// of its pass, L = layers) and load n uses slot n % 2; the order between the copy stream and the
// compute stream is kept by events only — never a device-wide sync:
//   load n into slot s     waits for  `released[s]` (the kernels of load n - 2 finished)
//   compute of load n      waits for  `loaded[s]`   (its copy finished)
// Releasing load n starts load n + 2, so the last two layers of a pass start loading the next
// pass's first two: the weights are the same every pass, and the copies and disk reads keep
// running while the host reads a step's results and prepares the next (a run's last two such
// loads are simply not used). A layer's disk part is read on the disk_read stream, ahead of the
// copy stream (WeightStore::load_layer), so the thread that enqueues the layers never waits for
// the disk.
// A pass over the layers (one prefill or one decode step) calls begin_pass(), then for each
// layer acquire() before enqueuing its kernels and release() right after; release() of the last
// layer makes a failed disk read of the pass an error of the compute stream. A pass that stops
// early (an exception between begin_pass and the last release) makes the next begin_pass start
// a fresh numbering.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/device/device.h"
#include "offload/weight_store.h"
#include "scheduler/block_task.h"

namespace offgen {

class WeightStreamer {
 public:
  // Allocates the two slots on the gpu tier when the store streams (OutOfMemoryError if they do
  // not fit).
  WeightStreamer(Device& device, WeightStore& store, int layers);
  WeightStreamer(const WeightStreamer&) = delete;
  WeightStreamer& operator=(const WeightStreamer&) = delete;
  ~WeightStreamer();

  // Starts copying layers 0 and 1, unless the previous pass already did.
  void begin_pass();
  // Makes `compute` wait until layer `layer` is in its slot and points the store's weights at it.
  void acquire(int layer, Stream& compute);
  // After layer `layer`'s kernels are enqueued on `compute`: its slot is free once they ran, and
  // the layer two loads later (layer + 2, or the next pass's layer 0 or 1) starts copying into it.
  void release(int layer, Stream& compute);
  // The same per task of a block's pass (block_task.h): every GPU batch of a layer runs from the
  // layer's one slot, acquired for the layer's first GPU batch and released after its last.
  void acquire(const BlockTask& task, Stream& compute) {
    if (task.first_of_layer()) acquire(task.layer, compute);
  }
  void release(const BlockTask& task, Stream& compute) {
    if (task.last_of_layer()) release(task.layer, compute);
  }

  // Weight bytes copied host-to-device for the layers acquired so far (the offloaded parts;
  // resident parts move on the device only): exactly the offloaded bytes per pass.
  std::uint64_t bytes_moved() const { return bytes_moved_; }
  std::uint64_t slot_bytes() const;

 private:
  // Enqueues load n (layer (n - epoch_) mod layers_) into slot n % 2.
  void load(std::uint64_t n);

  WeightStore& store_;
  int layers_;
  Stream& copies_;
  bool streams_;  // the store streams: layers are copied into the slots
  Buffer slots_[2];
  std::unique_ptr<Event> loaded_[2];
  std::unique_ptr<Event> released_[2];
  std::uint64_t epoch_ = 0;       // load number of layer 0 of the numbering's first pass
  std::uint64_t pass_start_ = 0;  // load number of the current pass's layer 0
  std::uint64_t next_load_ = 0;   // loads below this have been enqueued
  bool started_ = false;          // a pass has begun since the numbering started
  bool in_pass_ = false;          // between begin_pass() and the last layer's release()
  std::uint64_t bytes_moved_ = 0;
};

}  // namespace offgen
