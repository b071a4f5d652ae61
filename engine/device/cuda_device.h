// The cuda device: the Device contract on one NVIDIA GPU through the CUDA runtime. The gpu tier is
// device memory (cudaMalloc), pinned is page-locked host memory (cudaHostAlloc), host is ordinary
// host memory; each stream is a non-blocking CUDA stream, each event a CUDA event without timing.
// Busy time per stream (Device::busy_seconds) comes from separate timing events (CudaBusyClock).
//
// Freed gpu and pinned blocks are not given back to CUDA: they go to a per-tier cache keyed by
// size, and the next allocation of that size takes them again. cudaFree synchronises the whole
// device and cudaFreeHost is slow, neither may happen in the middle of a run. The caches are
// emptied when a fresh allocation fails (which is then retried once), by release_cached_memory()
// and by the destructor. The byte budgets count what Buffers hold, not what the caches keep.
//
// As on the cpu device, a Buffer must not be freed while work queued on a stream still uses it:
// its block may be handed to the next allocation at once.
//
// Threads: like every Device, allocate / free / stream / event calls may come from any thread.
// CUDA's current device is per thread; the calls below select this device themselves, but a
// thread that launches kernels for a device other than GPU 0 must call make_current() first.
//
// Only targets built with the CUDA toolkit include this header; code that must also build without
// CUDA creates the device through make_device.h.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/device/device.h"

namespace offgen {

// The busy time of one CUDA stream, measured with pairs of timing events (start, end) recorded
// on the stream and read lazily: a pair counts once its end event has completed (found with
// cudaEventQuery, never by waiting), so the stream is never blocked and the events go back to a
// pool for reuse. Two ways of bracketing, see Device::busy_seconds:
//   operations: a pair around each copy / host task enqueued through the device;
//   spans:      for a stream whose handle was handed out for kernel launches, which the device
//               does not see: a span opens at the first operation enqueued through the device
//               after a synchronize() and right after each event wait, and closes right before
//               the next event wait or synchronize().
// Thread-safe; the enqueues it brackets are serialised by its mutex so that brackets from
// different threads never interleave.
class CudaBusyClock {
 public:
  explicit CudaBusyClock(int gpu_index);
  ~CudaBusyClock();  // destroys every event (CUDA frees pending ones when they complete)
  CudaBusyClock(const CudaBusyClock&) = delete;
  CudaBusyClock& operator=(const CudaBusyClock&) = delete;

  // Runs `enqueue` (which puts one operation on `stream`) inside a bracket.
  void bracket(cudaStream_t stream, const std::function<void()>& enqueue);
  // Runs `wait` (which makes `stream` wait on an event) outside any span.
  void around_wait(cudaStream_t stream, const std::function<void()>& wait);
  // Closes the open span, if any, before the stream is synchronised.
  void before_synchronize(cudaStream_t stream);
  // From now on, measure in spans (kernels may be launched on the stream behind the device).
  void use_spans();
  // Seconds of the brackets completed so far.
  double seconds();

 private:
  cudaEvent_t take_event();  // from the pool, else a new timing event on gpu_index_
  void record(cudaEvent_t event, cudaStream_t stream);
  void close_span(cudaStream_t stream);  // mutex_ held
  void harvest();                        // mutex_ held
  void destroy(cudaEvent_t event) noexcept;

  int gpu_index_;
  std::mutex mutex_;
  bool spans_ = false;
  cudaEvent_t span_start_ = nullptr;  // the open span's start; nullptr when none is open
  std::deque<std::pair<cudaEvent_t, cudaEvent_t>> pending_;  // recorded, not yet read
  std::vector<cudaEvent_t> pool_;
  double seconds_ = 0.0;
};

class CudaStream final : public Stream {
 public:
  // A non-blocking stream (no implicit synchronisation with the legacy default stream) on the
  // calling thread's current device.
  explicit CudaStream(StreamRole role);
  ~CudaStream() override;
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  StreamRole role() const override { return role_; }
  // cudaStreamSynchronize; an error (CUDA's, sticky or not) throws offgen::Error naming the role.
  void synchronize() override;
  cudaStream_t handle() const { return handle_; }

  // Host tasks (Device::enqueue_host) run on CUDA's callback thread, where an exception must not
  // escape: the first one is kept here, later tasks are skipped, and synchronize() rethrows it.
  void run_host_task(const std::function<void()>& task) noexcept;

  // The stream's busy time (CudaBusyClock). The device brackets the copies and host tasks it
  // enqueues, CudaEvent::wait_on its waits.
  CudaBusyClock& busy_clock() { return *busy_clock_; }
  double busy_seconds() const { return busy_clock_->seconds(); }

 private:
  void destroy() noexcept;

  StreamRole role_;
  cudaStream_t handle_ = nullptr;
  std::unique_ptr<CudaBusyClock> busy_clock_;  // a unique_ptr so the stream stays movable
  // Shared with host tasks in flight; a unique_ptr so the stream stays movable.
  struct HostError {
    std::mutex mutex;
    std::exception_ptr error;
  };
  std::unique_ptr<HostError> host_error_ = std::make_unique<HostError>();
};

class CudaEvent final : public Event {
 public:
  // An event without timing on the calling thread's current device.
  CudaEvent();
  ~CudaEvent() override;
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  // `stream` must be a CudaStream of the same device (offgen::Error otherwise).
  void record(Stream& stream) override;
  void wait_on(Stream& stream) override;
  void synchronize() override;
  bool query() override;
  cudaEvent_t handle() const { return handle_; }

 private:
  void destroy() noexcept;

  cudaEvent_t handle_ = nullptr;
};

// The CUDA stream behind `stream`; offgen::Error when it is not a CudaStream (a cpu device's).
cudaStream_t cuda_stream_handle(Stream& stream);
// `stream` as a CudaStream (with a live handle); offgen::Error otherwise.
CudaStream& as_cuda_stream(Stream& stream);

// Freed blocks of one tier (gpu: cudaMalloc, pinned: cudaHostAlloc), kept by size for reuse.
// Thread-safe. Not copyable or movable: it is a member of its device, which is neither.
class CudaBlockCache {
 public:
  CudaBlockCache(Tier tier, int gpu_index);
  ~CudaBlockCache();  // release()
  CudaBlockCache(const CudaBlockCache&) = delete;
  CudaBlockCache& operator=(const CudaBlockCache&) = delete;

  // A cached block of exactly `bytes`, else a fresh one; when CUDA refuses the fresh one, the
  // cache is released and the allocation retried once. Throws OutOfMemoryError naming the tier.
  void* take(std::size_t bytes);
  // Keeps `data` (of `bytes`, from take) for the next take of that size.
  void give_back(void* data, std::size_t bytes) noexcept;
  // Frees every cached block (cudaFree / cudaFreeHost). Failures are logged, never thrown.
  void release() noexcept;
  std::uint64_t cached_bytes() const;

 private:
  cudaError_t cuda_allocate(void** data, std::size_t bytes);
  void cuda_free(void* data) noexcept;

  Tier tier_;
  int gpu_index_;
  mutable std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_blocks_;  // size -> blocks
  std::uint64_t cached_bytes_ = 0;
};

class CudaDevice final : public Device {
 public:
  // Selects GPU `gpu_index` (offgen::Error when there is no such GPU). Zero budgets take defaults:
  // gpu = the device memory free now, less a reserve of max(1 GiB, 5% of the GPU's memory) for the
  // CUDA context and cuBLAS workspaces; pinned = a quarter of physical memory; host = half of it.
  CudaDevice(int gpu_index, const DeviceBudgets& budgets = {});
  ~CudaDevice() override;  // synchronises every stream, then releases the caches

  DeviceKind kind() const override { return DeviceKind::cuda; }
  // "NVIDIA H100 80GB HBM3 (sm_90)".
  std::string name() const override { return name_; }
  int gpu_index() const { return gpu_index_; }
  int multiprocessors() const override { return multiprocessors_; }
  // Makes this GPU the calling thread's current CUDA device (for kernel launches).
  void make_current() const;

  Stream& stream(StreamRole role) override;
  // The CUDA stream of `role`, for launching kernels and library calls on it. The stream's busy
  // time is measured in spans from then on (see busy_seconds).
  cudaStream_t cuda_stream(StreamRole role) const;
  std::unique_ptr<Event> create_event() override;
  // cudaMemcpyAsync with cudaMemcpyDefault when either side is gpu memory (unified addressing tells
  // the tiers apart); such a copy to or from the host tier (pageable memory) is synchronous with
  // the host, as CUDA makes it. A copy between two host-side buffers (pinned / host tiers) is a
  // memcpy that the stream runs as a host function, in the stream's order.
  void copy_async(void* dst, const void* src, std::size_t bytes, Stream& stream) override;
  void enqueue_host(Stream& stream, std::function<void()> task) override;
  // Measured with timing events on the stream (CudaBusyClock): on a stream whose handle was never
  // handed out (cuda_stream), the sum of the execution times of the copies and host tasks
  // enqueued through this device; on one whose handle was (the compute stream, once CudaOps
  // launches kernels on it), the sum of its spans — from the first operation enqueued through
  // the device after a synchronize(), or from the end of an event wait, to the next event wait
  // or synchronize() — which covers the kernels launched in between and excludes time blocked
  // in event waits, but includes time the stream sat idle inside a span waiting for the host to
  // launch more work. Work counts once it has completed; after a synchronize(), all of it has.
  double busy_seconds(StreamRole role) const override;

  // Bytes of freed gpu / pinned blocks kept for reuse (0 for the host tier).
  std::uint64_t cached_bytes(Tier tier) const;
  // Gives every cached block back to CUDA. cudaFree synchronises the device: not for mid-run.
  void release_cached_memory();

 protected:
  void* raw_allocate(Tier tier, std::size_t bytes) override;
  void raw_free(Tier tier, void* data, std::size_t bytes) noexcept override;

 private:
  int gpu_index_;
  std::string name_;
  int multiprocessors_ = 0;
  CudaBlockCache gpu_cache_;
  CudaBlockCache pinned_cache_;
  // Declared after the caches, so destroyed before them.
  std::unique_ptr<CudaStream> streams_[kNumStreamRoles];
};

}  // namespace offgen
