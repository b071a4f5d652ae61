// Device::enqueue_host's contract, checked the same way on every device: a host task runs after
// the copies issued before it on its stream and before those issued after, and an exception it
// throws surfaces at the stream's synchronize() with the stream's later host tasks skipped.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>

#include "engine/device/device.h"

namespace offgen {

inline void check_host_tasks_keep_stream_order(Device& device, StreamRole role) {
  constexpr std::size_t kBytes = 1 << 16;
  Stream& stream = device.stream(role);
  Buffer pinned = device.allocate(Tier::pinned, kBytes);
  Buffer gpu = device.allocate(Tier::gpu, kBytes);
  Buffer back = device.allocate(Tier::pinned, kBytes);
  std::memset(pinned.data(), 1, kBytes);
  std::memset(back.data(), 0, kBytes);
  device.copy_async(gpu.data(), pinned.data(), kBytes, stream);
  // Runs after the copy above read `pinned`, so the gpu copy keeps the 1s; the copy below reads
  // the 2s it writes.
  device.enqueue_host(stream, [&] { std::memset(pinned.data(), 2, kBytes); });
  device.copy_async(back.data(), pinned.data(), kBytes, stream);
  device.copy_async(pinned.data(), gpu.data(), kBytes, stream);
  stream.synchronize();
  EXPECT_EQ(back.as<unsigned char>()[kBytes - 1], 2);
  EXPECT_EQ(pinned.as<unsigned char>()[0], 1);
}

inline void check_host_task_errors_are_sticky(Device& device, StreamRole role) {
  Stream& stream = device.stream(role);
  bool later_ran = false;
  device.enqueue_host(stream, [] { throw std::runtime_error("host task failed"); });
  device.enqueue_host(stream, [&] { later_ran = true; });
  EXPECT_THROW(stream.synchronize(), std::exception);
  EXPECT_FALSE(later_ran);
}

}  // namespace offgen
