// Streams offloaded layer weights into two gpu slots so layer j+1's weights copy while layer j
// computes (design section 6). Layer l always uses slot l % 2; the order between the copy stream
// and the compute stream is kept by events only — never a device-wide sync:
//   copy of layer l into slot s  waits for  `released[s]` (the kernels of layer l - 2 finished)
//   compute of layer l           waits for  `loaded[s]`   (its copy finished)
// A layer's disk part is read on the disk_read stream, ahead of the copy stream (WeightStore::
// load_layer), so the thread that enqueues the layers never waits for the disk.
// A pass over the layers (one prefill or one decode step) calls begin_pass(), then for each
// layer acquire() before enqueuing its kernels and release() right after; release() of the last
// layer makes a failed disk read of the pass an error of the compute stream.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/device/device.h"
#include "offload/weight_store.h"

namespace offgen {

class WeightStreamer {
 public:
  // Allocates the two slots on the gpu tier (OutOfMemoryError if they do not fit).
  WeightStreamer(Device& device, WeightStore& store, int layers);
  WeightStreamer(const WeightStreamer&) = delete;
  WeightStreamer& operator=(const WeightStreamer&) = delete;
  ~WeightStreamer();

  // Starts copying layers 0 and 1 (each once its slot's previous reader is done).
  void begin_pass();
  // Makes `compute` wait until layer `layer` is in its slot and points the store's weights at it.
  void acquire(int layer, Stream& compute);
  // After layer `layer`'s kernels are enqueued on `compute`: its slot is free once they ran, and
  // layer + 2 of this pass starts copying into it.
  void release(int layer, Stream& compute);

  // Weight bytes copied host-to-device so far (the offloaded parts; resident parts move on the
  // device only).
  std::uint64_t bytes_moved() const { return bytes_moved_; }
  std::uint64_t slot_bytes() const;

 private:
  void load(int layer);

  Device& device_;
  WeightStore& store_;
  int layers_;
  Stream& copies_;
  Buffer slots_[2];
  std::unique_ptr<Event> loaded_[2];
  std::unique_ptr<Event> released_[2];
  std::uint64_t bytes_moved_ = 0;
};

}  // namespace offgen
