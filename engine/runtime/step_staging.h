// A step's host inputs reach the device through one pinned staging buffer: each upload copies its
// array into the next free part and enqueues one async copy on the compute stream, so the host
// never waits for a step's inputs. A part is reused only after reset(), which the owner calls once
// the compute stream has been synchronized (every copy out of the buffer has run).
#pragma once

#include <cstddef>

#include "engine/device/device.h"

namespace offgen {

class StepStaging {
 public:
  // staging: pinned memory large enough for every upload of one step.
  StepStaging(Device& device, Buffer staging);

  // Copies `bytes` from host_src into staging now and enqueues their copy to device_dst on the
  // compute stream. Throws offgen::Error when the step's uploads outgrow the buffer.
  void upload(void* device_dst, const void* host_src, std::size_t bytes);
  // After the compute stream is synchronized: the whole buffer is free again.
  void reset() { used_ = 0; }

 private:
  Device& device_;
  Stream& compute_;
  Buffer staging_;
  std::size_t used_ = 0;
};

}  // namespace offgen
