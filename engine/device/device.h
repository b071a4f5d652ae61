// The device layer: memory of each tier with byte budgets, streams, events and async copies.
// Two implementations share this contract: `cpu` (cpu_device.h; streams are worker threads, the
// "gpu" tier is host memory with a hard budget) and `cuda` (device memory, pinned host memory).
//
// Ownership: a Device owns its streams; Buffers and Events are move-only handles that must not
// outlive the Device that made them. Threads: allocate / free / stream / event calls may come from
// any thread; work on one stream runs in issue order.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace offgen {

enum class DeviceKind { cpu, cuda };
// gpu: accelerator memory (the cpu device emulates it with a budgeted host arena).
// pinned: page-locked host memory that async copies stream from. host: ordinary host memory.
// The disk tier lives in offload/, not here: a device only manages memory.
enum class Tier { gpu, pinned, host };
constexpr int kNumTiers = 3;
// compute runs kernels; the three copy streams let weight loads, KV loads and KV stores overlap it;
// disk_read runs the disk tier's reads (host tasks) ahead of the copy stream that consumes them.
enum class StreamRole { compute, h2d_weights, h2d_kv, d2h_kv, disk_read };
constexpr int kNumStreamRoles = 5;

std::string_view tier_name(Tier tier);
std::string_view device_kind_name(DeviceKind kind);
std::string_view stream_role_name(StreamRole role);

class Device;

// Bytes of one tier of one device. Move-only; frees on destruction (never throws).
class Buffer {
 public:
  Buffer() = default;
  Buffer(Device* device, void* data, std::size_t bytes, Tier tier)
      : device_(device), data_(data), bytes_(bytes), tier_(tier) {}
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  void reset() noexcept;
  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }
  Tier tier() const { return tier_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  Device* device_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Tier tier_ = Tier::host;
};

class Stream {
 public:
  virtual ~Stream() = default;
  virtual StreamRole role() const = 0;
  // Blocks the calling host thread until all work issued so far has finished. Rethrows the first
  // error raised by work on this stream (errors are sticky, as CUDA's are).
  virtual void synchronize() = 0;
};

class Event {
 public:
  virtual ~Event() = default;
  // Captures the work issued to `stream` so far; a later wait / synchronize waits for exactly that.
  virtual void record(Stream& stream) = 0;
  // Makes all future work on `stream` wait until the last record() of this event has completed.
  virtual void wait_on(Stream& stream) = 0;
  // Blocks the host until the last record() has completed.
  virtual void synchronize() = 0;
  // True when the last record() has completed (or there was none).
  virtual bool query() = 0;
};

struct TierUsage {
  std::uint64_t budget = 0;  // bytes this tier may hold
  std::uint64_t used = 0;
  std::uint64_t peak = 0;
};

struct DeviceBudgets {
  std::uint64_t gpu = 0;  // 0 = the device's default (what it has, less a reserve)
  std::uint64_t pinned = 0;
  std::uint64_t host = 0;
  // Processes on this machine sharing its memory (ranks of one MPI job): the defaults of the
  // tiers in host memory are divided among them.
  std::uint32_t host_sharers = 1;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceKind kind() const = 0;
  // "cpu (2 threads)", "NVIDIA H100 80GB HBM3 (sm_90)".
  virtual std::string name() const = 0;
  // Streaming multiprocessors of a GPU, which its kernels spread work over (decode attention plans
  // its split by them: kernels/decode_split.h); 0 for a device whose kernels run on the host.
  virtual int multiprocessors() const { return 0; }

  // Throws OutOfMemoryError naming the tier, the request and the budget when it does not fit.
  // Memory is 256-byte aligned and not initialised.
  Buffer allocate(Tier tier, std::size_t bytes);
  TierUsage usage(Tier tier) const;
  void reset_peaks();

  virtual Stream& stream(StreamRole role) = 0;
  virtual std::unique_ptr<Event> create_event() = 0;
  // Copies between any two buffers of this device (any tiers), ordered on `stream`.
  virtual void copy_async(void* dst, const void* src, std::size_t bytes, Stream& stream) = 0;
  // Runs `task` on a host thread in `stream`'s order: after the work issued to it before, before
  // the work issued after (CPU attention, scatters into host memory). The task must not call
  // this device. An exception it throws is rethrown by the stream's synchronize(), and the
  // stream's later host tasks are skipped.
  virtual void enqueue_host(Stream& stream, std::function<void()> task) = 0;
  // Waits for every stream.
  void synchronize();
  // Seconds stream `role` has spent doing work since the device was made (waiting on events
  // excluded), for checking that copies and compute overlap; negative where the device does not
  // measure it. cpu: the time its worker spent running tasks. cuda: from timing events, counted
  // once the work has completed (all of it after a synchronize()): exact per copy / host task on
  // streams whose CUDA handle was never handed out; on a stream running kernels the device does
  // not see (the compute stream), the time between event waits and synchronizes, so it also
  // counts gaps where that stream waited for the host to launch more (CudaDevice::busy_seconds).
  virtual double busy_seconds(StreamRole role) const {
    (void)role;
    return -1.0;
  }

 protected:
  // `budgets` must be resolved (no zeros) by the implementation.
  explicit Device(const DeviceBudgets& budgets);
  virtual void* raw_allocate(Tier tier, std::size_t bytes) = 0;
  virtual void raw_free(Tier tier, void* data, std::size_t bytes) noexcept = 0;

 private:
  friend class Buffer;
  void release(Tier tier, void* data, std::size_t bytes) noexcept;

  mutable std::mutex accounting_mutex_;
  std::array<TierUsage, kNumTiers> usage_{};
};

}  // namespace offgen
