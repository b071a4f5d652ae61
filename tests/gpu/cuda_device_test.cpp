// The cuda device against the Device contract (tests/device/cpu_device_test.cpp checks the cpu
// device against the same one). Every test skips itself on a machine without a CUDA GPU.
#include <gtest/gtest.h>

// Compiled only where the CUDA toolkit's headers are on the include path (a CUDA build).
#if __has_include(<cuda_runtime_api.h>)

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "engine/core/cuda_check.h"
#include "engine/core/error.h"
#include "engine/device/cpu_device.h"
#include "engine/device/cuda_device.h"
#include "engine/device/cuda_probe.h"
#include "engine/device/make_device.h"
#include "engine/device/mapped_copy.h"
#include "tests/support/host_task_check.h"

namespace offgen {
namespace {

constexpr StreamRole kAllRoles[] = {StreamRole::compute, StreamRole::h2d_weights,
                                    StreamRole::h2d_kv, StreamRole::d2h_kv, StreamRole::disk_read};
constexpr DeviceBudgets kSmallBudgets{.gpu = 1 << 20, .pinned = 1 << 20, .host = 1 << 20};

// Holds a stream at a host function until open(): a test can then look at work queued behind it
// that certainly has not run yet. The destructor opens the gate and drains the stream, since the
// host function reads the gate (declare it after the device, so it goes first).
class Gate {
 public:
  explicit Gate(cudaStream_t stream) : stream_(stream) {
    OFFGEN_CUDA_CHECK(cudaLaunchHostFunc(stream_, &Gate::wait, this));
  }
  ~Gate() {
    open();
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  void open() { open_.store(true); }

 private:
  static void CUDART_CB wait(void* self) {
    const auto* gate = static_cast<const Gate*>(self);
    while (!gate->open_.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }

  cudaStream_t stream_;
  std::atomic<bool> open_{false};
};

void fill_random(Buffer& buffer, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto* bytes = buffer.as<unsigned char>();
  for (std::size_t i = 0; i < buffer.bytes(); ++i) bytes[i] = static_cast<unsigned char>(rng());
}

bool same_bytes(const Buffer& a, const Buffer& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

std::size_t free_gpu_memory() {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  OFFGEN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

TEST(CudaDevice, NamesItsGpuAndResolvesDefaultBudgets) {
  const auto gpus = list_cuda_gpus();
  if (gpus.empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, {});
  EXPECT_EQ(device.kind(), DeviceKind::cuda);
  EXPECT_EQ(device.gpu_index(), 0);
  EXPECT_NE(device.name().find(gpus[0].name), std::string::npos) << device.name();
  EXPECT_NE(device.name().find(fmt::format("(sm_{})", gpus[0].compute_capability)),
            std::string::npos)
      << device.name();

  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  OFFGEN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const std::uint64_t reserve = std::max<std::uint64_t>(1ull << 30, total_bytes / 20);
  const TierUsage gpu = device.usage(Tier::gpu);
  EXPECT_GT(gpu.budget, 0u);
  EXPECT_LE(gpu.budget, total_bytes - reserve);
  EXPECT_EQ(gpu.used, 0u);
  EXPECT_EQ(device.usage(Tier::pinned).budget, physical_memory_bytes() / 4);
  EXPECT_EQ(device.usage(Tier::host).budget, physical_memory_bytes() / 2);
}

TEST(CudaDevice, AskingForAGpuThatIsNotThereIsAnError) {
  const auto gpus = list_cuda_gpus();
  if (gpus.empty()) GTEST_SKIP() << "no CUDA GPU";
  EXPECT_THROW(CudaDevice(static_cast<int>(gpus.size()), {}), Error);
  EXPECT_THROW(CudaDevice(-1, {}), Error);
  const std::unique_ptr<Device> made = make_cuda_device(0, kSmallBudgets);
  EXPECT_EQ(made->kind(), DeviceKind::cuda);
  EXPECT_EQ(made->usage(Tier::gpu).budget, 1u << 20);
}

TEST(CudaDevice, AllocationsCountAgainstTheTierBudgetInEveryTier) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, kSmallBudgets);
  for (const Tier tier : {Tier::gpu, Tier::pinned, Tier::host}) {
    SCOPED_TRACE(tier_name(tier));
    Buffer a = device.allocate(tier, 600 << 10);
    ASSERT_TRUE(a);
    EXPECT_EQ(a.tier(), tier);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % 256, 0u);
    EXPECT_EQ(device.usage(tier).used, 600u << 10);
    try {
      Buffer b = device.allocate(tier, 600 << 10);
      FAIL() << "expected the budget to be enforced";
    } catch (const OutOfMemoryError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("cuda device"), std::string::npos) << message;
      EXPECT_NE(message.find(fmt::format("{} tier", tier_name(tier))), std::string::npos)
          << message;
      EXPECT_NE(message.find("1.00 MiB budget"), std::string::npos) << message;
    }
    EXPECT_EQ(device.usage(tier).used, 600u << 10);  // the refused request left no trace
    a.reset();
    EXPECT_EQ(device.usage(tier).used, 0u);
    EXPECT_EQ(device.usage(tier).peak, 600u << 10);
    Buffer c = device.allocate(tier, 1 << 20);  // fits again once freed
    EXPECT_TRUE(c);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(c.data()) % 256, 0u);
    EXPECT_EQ(device.usage(tier).peak, 1u << 20);
    c.reset();
    device.reset_peaks();
    EXPECT_EQ(device.usage(tier).peak, 0u);
  }
  Buffer empty = device.allocate(Tier::gpu, 0);
  EXPECT_FALSE(empty);
  EXPECT_EQ(device.usage(Tier::gpu).used, 0u);
}

TEST(CudaDevice, BuffersAreMoveOnlyAndFreeOnce) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, kSmallBudgets);
  Buffer a = device.allocate(Tier::gpu, 1000);
  Buffer b = std::move(a);
  EXPECT_FALSE(a);
  EXPECT_TRUE(b);
  EXPECT_EQ(device.usage(Tier::gpu).used, 1000u);
  b = Buffer();
  EXPECT_EQ(device.usage(Tier::gpu).used, 0u);
  EXPECT_EQ(device.cached_bytes(Tier::gpu), 1024u);  // kept for reuse, rounded to 256 bytes
}

TEST(CudaDevice, WhatTheGpuCannotHoldIsOutOfMemoryNamingTheTier) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  OFFGEN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // A budget far beyond the GPU, so that cudaMalloc itself refuses.
  CudaDevice device(0,
                    DeviceBudgets{.gpu = 4ull * total_bytes, .pinned = 1 << 20, .host = 1 << 20});
  { Buffer cached = device.allocate(Tier::gpu, 64 << 20); }
  EXPECT_EQ(device.cached_bytes(Tier::gpu), 64u << 20);
  try {
    Buffer huge = device.allocate(Tier::gpu, 2 * total_bytes);
    FAIL() << "expected cudaMalloc to refuse " << 2 * total_bytes << " bytes";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("gpu tier"), std::string::npos) << e.what();
  }
  EXPECT_EQ(device.usage(Tier::gpu).used, 0u);
  EXPECT_EQ(device.cached_bytes(Tier::gpu), 0u);  // released before the retry
  // The failure does not linger where a later kernel-launch check would find it.
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  Buffer fine = device.allocate(Tier::gpu, 1 << 20);
  EXPECT_TRUE(fine);
}

TEST(CudaDevice, AbsurdSizesAreOutOfMemoryNotWrapAround) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, kSmallBudgets);
  Buffer small = device.allocate(Tier::gpu, 4096);
  EXPECT_THROW(device.allocate(Tier::gpu, std::numeric_limits<std::size_t>::max() - 100),
               OutOfMemoryError);
  EXPECT_EQ(device.usage(Tier::gpu).used, 4096u);
}

TEST(CudaDevice, FreedGpuBlocksAreReusedWithoutCudaMalloc) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, {});
  constexpr std::size_t kBytes = 256 << 20;
  void* first = nullptr;
  {
    Buffer a = device.allocate(Tier::gpu, kBytes);
    first = a.data();
  }
  EXPECT_EQ(device.cached_bytes(Tier::gpu), kBytes);
  EXPECT_EQ(device.usage(Tier::gpu).used, 0u);

  const std::size_t free_before = free_gpu_memory();
  Buffer again = device.allocate(Tier::gpu, kBytes);
  const std::size_t free_after = free_gpu_memory();
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(free_after, free_before) << "the second allocation grew CUDA's memory";
  EXPECT_EQ(device.cached_bytes(Tier::gpu), 0u);
  EXPECT_EQ(device.usage(Tier::gpu).used, kBytes);

  // A request that rounds to the same 256-byte size takes the same block.
  {
    Buffer odd = device.allocate(Tier::gpu, 1000);
    first = odd.data();
  }
  Buffer rounded = device.allocate(Tier::gpu, 1024);
  EXPECT_EQ(rounded.data(), first);

  again.reset();
  device.release_cached_memory();
  EXPECT_EQ(device.cached_bytes(Tier::gpu), 0u);
  EXPECT_GE(free_gpu_memory(), free_after + kBytes / 2) << "releasing gave nothing back to CUDA";
}

TEST(CudaDevice, FreedPinnedBlocksAreReused) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, {});
  constexpr std::size_t kBytes = 16 << 20;
  void* first = nullptr;
  {
    Buffer a = device.allocate(Tier::pinned, kBytes);
    first = a.data();
  }
  EXPECT_EQ(device.cached_bytes(Tier::pinned), kBytes);
  Buffer again = device.allocate(Tier::pinned, kBytes);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(device.cached_bytes(Tier::pinned), 0u);
  cudaPointerAttributes attributes{};
  OFFGEN_CUDA_CHECK(cudaPointerGetAttributes(&attributes, again.data()));
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);  // page-locked, known to CUDA
  EXPECT_EQ(device.cached_bytes(Tier::host), 0u);
}

TEST(CudaDevice, CopiesRoundTripThroughEveryTierOnEveryStream) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, {});
  constexpr std::size_t kBytes = (8 << 20) + 3;  // not a multiple of anything
  std::uint64_t seed = 1;
  for (const StreamRole role : kAllRoles) {
    SCOPED_TRACE(stream_role_name(role));
    Stream& stream = device.stream(role);
    EXPECT_EQ(stream.role(), role);
    Buffer host = device.allocate(Tier::host, kBytes);
    Buffer gpu = device.allocate(Tier::gpu, kBytes);
    Buffer gpu2 = device.allocate(Tier::gpu, kBytes);
    Buffer pinned = device.allocate(Tier::pinned, kBytes);
    Buffer host_back = device.allocate(Tier::host, kBytes);
    fill_random(host, seed++);
    std::memset(pinned.data(), 0, kBytes);
    std::memset(host_back.data(), 0, kBytes);

    device.copy_async(gpu.data(), host.data(), kBytes, stream);     // host -> gpu
    device.copy_async(gpu2.data(), gpu.data(), kBytes, stream);     // gpu -> gpu
    device.copy_async(pinned.data(), gpu2.data(), kBytes, stream);  // gpu -> pinned
    stream.synchronize();
    EXPECT_TRUE(same_bytes(host, pinned));

    fill_random(pinned, seed++);
    device.copy_async(gpu.data(), pinned.data(), kBytes, stream);     // pinned -> gpu
    device.copy_async(host_back.data(), gpu.data(), kBytes, stream);  // gpu -> host
    stream.synchronize();
    EXPECT_TRUE(same_bytes(pinned, host_back));
  }
  device.copy_async(nullptr, nullptr, 0, device.stream(StreamRole::compute));  // nothing to do
  device.synchronize();
}

TEST(CudaDevice, UploadsFromPinnedMemoryArriveWholeAtEverySizeAndAlignment) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, {});
  // Up to kMappedCopyMaxBytes a kernel copies (engine/device/mapped_copy.h), above it a copy
  // engine: both sides of the line, odd sizes and both ends misaligned.
  constexpr std::size_t kMost = kMappedCopyMaxBytes + 64;
  Buffer pinned = device.allocate(Tier::pinned, kMost);
  Buffer gpu = device.allocate(Tier::gpu, kMost);
  Buffer back = device.allocate(Tier::pinned, kMost);
  fill_random(pinned, 11);
  Stream& stream = device.stream(StreamRole::h2d_kv);
  for (const std::size_t bytes :
       {std::size_t{1}, std::size_t{3}, std::size_t{16}, std::size_t{17}, std::size_t{4103},
        kMappedCopyMaxBytes, kMappedCopyMaxBytes + 1}) {
    for (const std::size_t offset : {std::size_t{0}, std::size_t{1}, std::size_t{8}}) {
      SCOPED_TRACE(testing::Message() << bytes << " bytes at offset " << offset);
      std::memset(back.data(), 0, kMost);
      device.copy_async(gpu.as<std::byte>() + 2 * offset, pinned.as<std::byte>() + offset, bytes,
                        stream);
      device.copy_async(back.data(), gpu.as<std::byte>() + 2 * offset, bytes, stream);
      stream.synchronize();
      EXPECT_EQ(std::memcmp(back.data(), pinned.as<std::byte>() + offset, bytes), 0);
      EXPECT_EQ(back.as<unsigned char>()[bytes], 0) << "wrote past the end";
    }
  }
}

TEST(CudaDevice, ASmallUploadDoesNotQueueBehindABigCopyOnAnotherStream) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, {});
  constexpr std::size_t kBig = std::size_t{2} << 30;  // tens of ms on any PCIe
  constexpr std::size_t kSmall = 256 << 10;           // a GPU batch's cpu attention output
  Buffer big_src = device.allocate(Tier::pinned, kBig);
  Buffer big_dst = device.allocate(Tier::gpu, kBig);
  Buffer small_src = device.allocate(Tier::pinned, kSmall);
  Buffer small_dst = device.allocate(Tier::gpu, kSmall);
  std::memset(big_src.data(), 1, kBig);
  fill_random(small_src, 3);
  Stream& weights = device.stream(StreamRole::h2d_weights);
  Stream& kv = device.stream(StreamRole::h2d_kv);
  auto big_done = device.create_event();
  auto small_done = device.create_event();
  const auto trial = [&](const auto& small_upload) {
    device.copy_async(small_dst.data(), small_src.data(), kSmall, kv);  // warm-up
    device.synchronize();
    device.copy_async(big_dst.data(), big_src.data(), kBig, weights);
    big_done->record(weights);
    small_upload();
    small_done->record(kv);
    small_done->synchronize();
    const bool big_still_running = !big_done->query();
    device.synchronize();
    return big_still_running;
  };
  // What a copy engine does (reported, not required: it is the hardware's choice).
  const bool engine_passes = trial([&] {
    OFFGEN_CUDA_CHECK(cudaMemcpyAsync(small_dst.data(), small_src.data(), kSmall,
                                      cudaMemcpyHostToDevice,
                                      device.cuda_stream(StreamRole::h2d_kv)));
  });
  std::cout << "a copy-engine upload of " << kSmall << " bytes "
            << (engine_passes ? "overtook" : "waited for") << " a " << kBig
            << "-byte copy on another stream\n";
  EXPECT_TRUE(trial([&] { device.copy_async(small_dst.data(), small_src.data(), kSmall, kv); }))
      << "the small upload waited for the big copy";
  Buffer back = device.allocate(Tier::pinned, kSmall);
  device.copy_async(back.data(), small_dst.data(), kSmall, kv);
  kv.synchronize();
  EXPECT_TRUE(same_bytes(small_src, back));
}

TEST(CudaDevice, HostTasksKeepTheStreamsOrder) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, {});
  for (const StreamRole role : kAllRoles) {
    SCOPED_TRACE(stream_role_name(role));
    check_host_tasks_keep_stream_order(device, role);
  }
}

TEST(CudaDevice, AHostTasksErrorIsStickyAndSurfacesAtSynchronize) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, {});
  check_host_task_errors_are_sticky(device, StreamRole::d2h_kv);
}

TEST(CudaDevice, HostSideCopiesKeepTheStreamsOrder) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, {});
  constexpr std::size_t kBytes = (4 << 20) + 5;
  Buffer source = device.allocate(Tier::pinned, kBytes);
  Buffer gpu = device.allocate(Tier::gpu, kBytes);
  Buffer pinned = device.allocate(Tier::pinned, kBytes);
  Buffer host = device.allocate(Tier::host, kBytes);
  Buffer host2 = device.allocate(Tier::host, kBytes);
  Buffer zeros = device.allocate(Tier::host, kBytes);
  fill_random(source, 7);
  for (Buffer* b : {&pinned, &host, &host2, &zeros}) std::memset(b->data(), 0, kBytes);
  Stream& stream = device.stream(StreamRole::d2h_kv);
  device.copy_async(gpu.data(), source.data(), kBytes, stream);
  stream.synchronize();
  {
    Gate gate(device.cuda_stream(StreamRole::d2h_kv));
    device.copy_async(pinned.data(), gpu.data(), kBytes, stream);   // gpu -> pinned
    device.copy_async(host.data(), pinned.data(), kBytes, stream);  // pinned -> host, after it
    device.copy_async(host2.data(), host.data(), kBytes, stream);   // host -> host, after that
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_TRUE(same_bytes(host, zeros)) << "a host-side copy ran ahead of its stream";
    EXPECT_TRUE(same_bytes(host2, zeros)) << "a host-side copy ran ahead of its stream";
    gate.open();
    stream.synchronize();
  }
  EXPECT_TRUE(same_bytes(source, pinned));
  EXPECT_TRUE(same_bytes(source, host));
  EXPECT_TRUE(same_bytes(source, host2));
}

TEST(CudaDevice, AnEventOrdersACopyAfterWorkOnAnotherStream) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, {});
  constexpr std::size_t kBytes = 64 << 20;
  Buffer src = device.allocate(Tier::pinned, kBytes);
  Buffer staged = device.allocate(Tier::gpu, kBytes);
  Buffer dst = device.allocate(Tier::pinned, kBytes);
  Stream& compute = device.stream(StreamRole::compute);
  Stream& kv = device.stream(StreamRole::h2d_kv);
  fill_random(src, 42);
  std::memset(dst.data(), 0, kBytes);
  {
    Gate gate(device.cuda_stream(StreamRole::compute));  // compute waits here until open()
    device.copy_async(staged.data(), src.data(), kBytes, compute);
    auto staged_ready = device.create_event();
    staged_ready->record(compute);
    staged_ready->wait_on(kv);
    device.copy_async(dst.data(), staged.data(), kBytes, kv);
    auto copied = device.create_event();
    copied->record(kv);

    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(staged_ready->query());
    EXPECT_FALSE(copied->query()) << "the h2d-kv copy ran without waiting for compute's event";
    gate.open();
    kv.synchronize();
    EXPECT_TRUE(copied->query());
    EXPECT_TRUE(staged_ready->query());
  }
  EXPECT_TRUE(same_bytes(src, dst));
}

TEST(CudaDevice, EventsOrderWorkAcrossStreamsTrialAfterTrial) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, {});
  constexpr std::size_t kBytes = 32 << 20;
  Buffer src = device.allocate(Tier::pinned, kBytes);
  Buffer staged = device.allocate(Tier::gpu, kBytes);
  Buffer dst = device.allocate(Tier::pinned, kBytes);
  Stream& compute = device.stream(StreamRole::compute);
  Stream& kv = device.stream(StreamRole::h2d_kv);
  auto ready = device.create_event();
  for (int trial = 0; trial < 10; ++trial) {
    // Without the wait, the kv copy would read what the previous trial left in `staged`.
    fill_random(src, 100 + trial);
    device.copy_async(staged.data(), src.data(), kBytes, compute);
    ready->record(compute);
    ready->wait_on(kv);
    device.copy_async(dst.data(), staged.data(), kBytes, kv);
    kv.synchronize();
    EXPECT_TRUE(same_bytes(src, dst)) << "trial " << trial;
    EXPECT_TRUE(ready->query());
    compute.synchronize();
  }
}

TEST(CudaDevice, QueryIsFalseUntilTheRecordedWorkHasRun) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, {});
  auto event = device.create_event();
  EXPECT_TRUE(event->query());  // never recorded
  {
    Gate gate(device.cuda_stream(StreamRole::d2h_kv));
    event->record(device.stream(StreamRole::d2h_kv));
    EXPECT_FALSE(event->query());
    EXPECT_FALSE(event->query());
    // "Not ready" is an answer, not an error left behind for the next launch check.
    EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
    gate.open();
    event->synchronize();
    EXPECT_TRUE(event->query());
  }
  {
    Gate gate(device.cuda_stream(StreamRole::compute));
    event->record(device.stream(StreamRole::compute));
    EXPECT_FALSE(event->query());
    gate.open();
    device.stream(StreamRole::compute).synchronize();
    EXPECT_TRUE(event->query());
  }
}

TEST(CudaDevice, AnEventNeverRecordedDoesNotBlock) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, {});
  auto event = device.create_event();
  event->wait_on(device.stream(StreamRole::compute));
  event->synchronize();
  device.stream(StreamRole::compute).synchronize();
  EXPECT_TRUE(event->query());
}

TEST(CudaDevice, StreamsAndEventsAreMoveOnlyHandles) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  static_assert(!std::is_copy_constructible_v<CudaStream>);
  static_assert(!std::is_copy_constructible_v<CudaEvent>);
  static_assert(std::is_nothrow_move_constructible_v<CudaStream>);
  static_assert(std::is_nothrow_move_constructible_v<CudaEvent>);
  CudaDevice device(0, {});
  device.make_current();
  CudaEvent a;
  EXPECT_NE(a.handle(), nullptr);
  CudaEvent b = std::move(a);
  EXPECT_EQ(a.handle(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state
  EXPECT_NE(b.handle(), nullptr);
  b.record(device.stream(StreamRole::compute));
  b.synchronize();
  EXPECT_THROW(a.record(device.stream(StreamRole::compute)), Error);

  CudaStream s(StreamRole::h2d_weights);
  const cudaStream_t handle = s.handle();
  EXPECT_NE(handle, nullptr);
  CudaStream t = std::move(s);
  EXPECT_EQ(t.handle(), handle);
  EXPECT_EQ(s.handle(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(cuda_stream_handle(t), handle);
  t.synchronize();
  for (const StreamRole role : kAllRoles) {
    EXPECT_EQ(device.cuda_stream(role), cuda_stream_handle(device.stream(role)));
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(CudaDevice, ACopyStreamsBusyTimeIsItsCopiesTimeAndAnIdleStreamsIsZero) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, {});
  constexpr std::size_t kBytes = std::size_t{512} << 20;
  Buffer pinned = device.allocate(Tier::pinned, kBytes);
  Buffer gpu = device.allocate(Tier::gpu, kBytes);
  std::memset(pinned.data(), 3, kBytes);
  // No handle of these streams is handed out: every copy is bracketed on its own.
  Stream& copies = device.stream(StreamRole::h2d_weights);
  Stream& idle = device.stream(StreamRole::d2h_kv);
  device.copy_async(gpu.data(), pinned.data(), kBytes, copies);  // warm-up
  copies.synchronize();
  EXPECT_GT(device.busy_seconds(StreamRole::h2d_weights), 0.0);

  const double copies_before = device.busy_seconds(StreamRole::h2d_weights);
  const double idle_before = device.busy_seconds(StreamRole::d2h_kv);
  auto marker = device.create_event();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 4; ++i) device.copy_async(gpu.data(), pinned.data(), kBytes, copies);
  marker->record(copies);
  marker->wait_on(idle);  // waiting is not work
  marker->record(idle);
  copies.synchronize();
  idle.synchronize();
  const double wall = seconds_since(start);
  const double busy = device.busy_seconds(StreamRole::h2d_weights) - copies_before;
  // bytes / bandwidth, with the bandwidth the wall clock saw: the copies were all the stream did.
  EXPECT_GT(busy, 0.7 * wall) << "busy " << busy << " s, wall " << wall << " s";
  EXPECT_LT(busy, wall + 1e-3) << "busy " << busy << " s, wall " << wall << " s";
  const double gb_per_second = 4.0 * static_cast<double>(kBytes) / busy * 1e-9;
  EXPECT_GT(gb_per_second, 1.0);
  EXPECT_LT(gb_per_second, 1000.0);
  EXPECT_LT(device.busy_seconds(StreamRole::d2h_kv) - idle_before, 1e-4);
  EXPECT_EQ(device.busy_seconds(StreamRole::h2d_kv), 0.0);  // never used
}

TEST(CudaDevice, BusyTimeExcludesEventWaitsOnCopyAndKernelStreams) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, {});
  constexpr std::size_t kBig = std::size_t{2} << 30;
  constexpr std::size_t kSmall = 1 << 20;
  Buffer pinned = device.allocate(Tier::pinned, kBig);
  Buffer gpu = device.allocate(Tier::gpu, kBig);
  Buffer gpu_small = device.allocate(Tier::gpu, kSmall);
  std::memset(pinned.data(), 5, kBig);
  Stream& slow = device.stream(StreamRole::h2d_kv);
  Stream& copies = device.stream(StreamRole::h2d_weights);
  // The compute stream's handle is handed out (kernels could run on it): measured in spans.
  (void)device.cuda_stream(StreamRole::compute);
  Stream& compute = device.stream(StreamRole::compute);
  device.copy_async(gpu.data(), pinned.data(), kSmall, slow);  // warm-up
  device.synchronize();
  const double slow_before = device.busy_seconds(StreamRole::h2d_kv);
  const double copies_before = device.busy_seconds(StreamRole::h2d_weights);
  const double compute_before = device.busy_seconds(StreamRole::compute);

  auto done = device.create_event();
  device.copy_async(gpu.data(), pinned.data(), kBig, slow);
  done->record(slow);
  // A copy stream that waits for the big copy, then copies a little.
  done->wait_on(copies);
  device.copy_async(gpu_small.data(), pinned.data(), kSmall, copies);
  // The compute stream works 10 ms, waits for the big copy, then works 10 ms more.
  const auto sleep_10ms = [] { std::this_thread::sleep_for(std::chrono::milliseconds(10)); };
  device.enqueue_host(compute, sleep_10ms);
  done->wait_on(compute);
  device.enqueue_host(compute, sleep_10ms);
  device.synchronize();

  const double slow_busy = device.busy_seconds(StreamRole::h2d_kv) - slow_before;
  const double copies_busy = device.busy_seconds(StreamRole::h2d_weights) - copies_before;
  const double compute_busy = device.busy_seconds(StreamRole::compute) - compute_before;
  ASSERT_GT(slow_busy, 0.03) << "a 2 GiB copy should take longer than this";
  EXPECT_LT(copies_busy, 0.2 * slow_busy) << copies_busy << " s";
  EXPECT_GT(compute_busy, 0.019) << compute_busy << " s";
  EXPECT_LT(compute_busy, 0.03) << compute_busy << " s (the wait counted?)";

  // A span ends at synchronize(): time the stream then sits idle is not counted.
  const double compute_after = device.busy_seconds(StreamRole::compute);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  device.enqueue_host(compute, [] {});
  compute.synchronize();
  EXPECT_LT(device.busy_seconds(StreamRole::compute) - compute_after, 0.005);
}

TEST(CudaDevice, StreamsOfAnotherDeviceKindAreRejected) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, kSmallBudgets);
  CpuStream foreign(StreamRole::compute);
  Buffer a = device.allocate(Tier::gpu, 256);
  Buffer b = device.allocate(Tier::gpu, 256);
  EXPECT_THROW(device.copy_async(a.data(), b.data(), 256, foreign), Error);
  auto event = device.create_event();
  EXPECT_THROW(event->record(foreign), Error);
  EXPECT_THROW(event->wait_on(foreign), Error);
}

TEST(CudaDevice, ConcurrentAllocationsKeepTheBooks) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  CudaDevice device(0, DeviceBudgets{.gpu = 256 << 20, .pinned = 256 << 20, .host = 256 << 20});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&device, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<Buffer> held;
      for (int i = 0; i < 200; ++i) {
        const Tier tier = i % 3 == 0 ? Tier::pinned : Tier::gpu;
        held.push_back(device.allocate(tier, (1 + rng() % 16) * 4096));
        if (held.size() > 4) held.erase(held.begin());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const Tier tier : {Tier::gpu, Tier::pinned}) {
    EXPECT_EQ(device.usage(tier).used, 0u) << tier_name(tier);
    EXPECT_LE(device.usage(tier).peak, device.usage(tier).budget) << tier_name(tier);
    EXPECT_GT(device.cached_bytes(tier), 0u) << tier_name(tier);
  }
}

}  // namespace
}  // namespace offgen

#else  // no CUDA headers: this build has no cuda device to test

TEST(CudaDevice, NeedsACudaBuild) {
  GTEST_SKIP() << "built without the CUDA toolkit";
}

#endif
