#include "engine/device/cpu_device.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "engine/core/error.h"
#include "tests/support/host_task_check.h"

namespace offgen {
namespace {

TEST(CpuDevice, AllocationsCountAgainstTheTierBudget) {
  CpuDevice device(DeviceBudgets{.gpu = 1 << 20, .pinned = 1 << 20, .host = 1 << 20});
  Buffer a = device.allocate(Tier::gpu, 600 << 10);
  EXPECT_EQ(device.usage(Tier::gpu).used, 600u << 10);
  EXPECT_EQ(device.usage(Tier::pinned).used, 0u);
  try {
    Buffer b = device.allocate(Tier::gpu, 600 << 10);
    FAIL() << "expected the budget to be enforced";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("gpu tier"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1.00 MiB budget"), std::string::npos) << e.what();
  }
  a.reset();
  EXPECT_EQ(device.usage(Tier::gpu).used, 0u);
  EXPECT_EQ(device.usage(Tier::gpu).peak, 600u << 10);
  Buffer c = device.allocate(Tier::gpu, 1 << 20);  // fits again once freed
  EXPECT_TRUE(c);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(c.data()) % 256, 0u);
}

TEST(CpuDevice, BuffersAreMoveOnlyAndFreeOnce) {
  CpuDevice device(DeviceBudgets{.gpu = 1 << 20, .pinned = 1 << 20, .host = 1 << 20});
  Buffer a = device.allocate(Tier::host, 1000);
  Buffer b = std::move(a);
  EXPECT_FALSE(a);
  EXPECT_TRUE(b);
  EXPECT_EQ(device.usage(Tier::host).used, 1000u);
  b = Buffer();
  EXPECT_EQ(device.usage(Tier::host).used, 0u);
}

TEST(CpuDevice, WorkOnOneStreamRunsInIssueOrder) {
  CpuDevice device;
  CpuStream& stream = device.cpu_stream(StreamRole::compute);
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) stream.enqueue([&order, i] { order.push_back(i); });
  stream.synchronize();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(CpuDevice, EventsOrderWorkAcrossStreams) {
  CpuDevice device;
  CpuStream& copy = device.cpu_stream(StreamRole::h2d_weights);
  CpuStream& compute = device.cpu_stream(StreamRole::compute);
  for (int trial = 0; trial < 20; ++trial) {
    int value = 0;  // written by the copy stream, read by compute: only the event orders them
    auto ready = device.create_event();
    copy.enqueue([&value] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      value = 42;
    });
    ready->record(copy);
    ready->wait_on(compute);
    int seen = -1;
    compute.enqueue([&] { seen = value; });
    compute.synchronize();
    EXPECT_EQ(seen, 42);
    EXPECT_TRUE(ready->query());
  }
}

TEST(CpuDevice, EventWaitsForTheRecordMadeBeforeTheWait) {
  CpuDevice device;
  CpuStream& a = device.cpu_stream(StreamRole::h2d_kv);
  auto event = device.create_event();
  std::atomic<bool> release{false};
  a.enqueue([&] {
    while (!release) std::this_thread::yield();
  });
  event->record(a);
  EXPECT_FALSE(event->query());
  release = true;
  event->synchronize();
  EXPECT_TRUE(event->query());
}

TEST(CpuDevice, AnEventNeverRecordedDoesNotBlock) {
  CpuDevice device;
  auto event = device.create_event();
  event->wait_on(device.stream(StreamRole::compute));
  event->synchronize();
  device.stream(StreamRole::compute).synchronize();
  EXPECT_TRUE(event->query());
}

TEST(CpuDevice, CopyAsyncCopiesInStreamOrder) {
  CpuDevice device;
  Buffer src = device.allocate(Tier::pinned, 4096);
  Buffer dst = device.allocate(Tier::gpu, 4096);
  std::memset(src.data(), 7, 4096);
  Stream& stream = device.stream(StreamRole::h2d_weights);
  device.copy_async(dst.data(), src.data(), 4096, stream);
  stream.synchronize();
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), 4096), 0);
}

TEST(CpuDevice, HostTasksKeepTheStreamsOrder) {
  CpuDevice device;
  check_host_tasks_keep_stream_order(device, StreamRole::d2h_kv);
  check_host_tasks_keep_stream_order(device, StreamRole::disk_read);
}

TEST(CpuDevice, EveryStreamRoleHasItsOwnStream) {
  CpuDevice device;
  for (int r = 0; r < kNumStreamRoles; ++r) {
    const auto role = static_cast<StreamRole>(r);
    EXPECT_EQ(device.stream(role).role(), role);
    EXPECT_NE(stream_role_name(role), "?");
    for (int other = 0; other < r; ++other) {
      EXPECT_NE(&device.stream(role), &device.stream(static_cast<StreamRole>(other)));
    }
  }
  EXPECT_EQ(stream_role_name(StreamRole::disk_read), "disk-read");
}

TEST(CpuDevice, AHostTasksErrorIsStickyAndSurfacesAtSynchronize) {
  CpuDevice device;
  check_host_task_errors_are_sticky(device, StreamRole::compute);
}

TEST(CpuDevice, ErrorsAreStickyAndSurfaceAtSynchronize) {
  CpuDevice device;
  CpuStream& stream = device.cpu_stream(StreamRole::compute);
  bool later_ran = false;
  stream.enqueue([] { throw Error("kernel failed"); });
  stream.enqueue([&] { later_ran = true; });
  EXPECT_THROW(stream.synchronize(), Error);
  EXPECT_FALSE(later_ran);
  EXPECT_THROW(stream.synchronize(), Error);
}

}  // namespace
}  // namespace offgen

namespace offgen {
namespace {

TEST(CpuDevice, AStreamsErrorDoesNotHangStreamsWaitingOnItsEvents) {
  CpuDevice device;
  CpuStream& copy = device.cpu_stream(StreamRole::h2d_kv);
  CpuStream& compute = device.cpu_stream(StreamRole::compute);
  auto event = device.create_event();
  copy.enqueue([] { throw Error("copy failed"); });
  event->record(copy);
  event->wait_on(compute);
  bool ran = false;
  compute.enqueue([&] { ran = true; });
  compute.synchronize();  // released: the record still signals after the error
  EXPECT_TRUE(ran);
  event->synchronize();
  EXPECT_THROW(copy.synchronize(), Error);  // the error surfaces where it happened
}

TEST(CpuDevice, AbsurdSizesAreOutOfMemoryNotWrapAround) {
  CpuDevice device(DeviceBudgets{.gpu = 1 << 20, .pinned = 1 << 20, .host = 1 << 20});
  Buffer small = device.allocate(Tier::gpu, 4096);
  EXPECT_THROW(device.allocate(Tier::gpu, std::numeric_limits<std::size_t>::max() - 100),
               OutOfMemoryError);
  EXPECT_EQ(device.usage(Tier::gpu).used, 4096u);
}

TEST(CpuDevice, BusyTimeCountsWorkAndNotEventWaits) {
  using namespace std::chrono_literals;
  CpuDevice device;
  CpuStream& compute = device.cpu_stream(StreamRole::compute);
  CpuStream& copies = device.cpu_stream(StreamRole::h2d_weights);
  EXPECT_EQ(device.busy_seconds(StreamRole::compute), 0.0);
  // The copy stream waits ~60 ms for compute's event, then does nothing: not busy.
  compute.enqueue([] { std::this_thread::sleep_for(60ms); });
  auto done = device.create_event();
  done->record(compute);
  done->wait_on(copies);
  copies.synchronize();
  EXPECT_GE(device.busy_seconds(StreamRole::compute), 0.055);
  EXPECT_LT(device.busy_seconds(StreamRole::h2d_weights), 0.03);
}

}  // namespace
}  // namespace offgen
