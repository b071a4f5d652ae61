#include "engine/device/cuda_device.h"

#include <cstdint>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <utility>

#include "engine/core/cuda_check.h"
#include "engine/core/error.h"
#include "engine/core/units.h"
#include "engine/device/cpu_device.h"  // physical_memory_bytes
#include "engine/device/make_device.h"
#include "engine/device/mapped_copy.h"

namespace offgen {
namespace {

constexpr std::size_t kAlignment = 256;

// Runs `call` (which throws on failure) from a path that must not throw, a destructor or a free:
// a failure is logged as "cuda device: <what> <subject>: <error>".
template <typename Call>
void log_failure(std::string_view what, std::string_view subject, Call&& call) noexcept {
  try {
    call();
  } catch (const std::exception& e) {
    spdlog::warn("cuda device: {} {}: {}", what, subject, e.what());
  } catch (...) {
    spdlog::warn("cuda device: {} {}: unknown error", what, subject);
  }
}

cudaPointerAttributes pointer_attributes(const void* data) {
  cudaPointerAttributes attributes{};
  OFFGEN_CUDA_CHECK(cudaPointerGetAttributes(&attributes, data));
  return attributes;
}

// True for memory on the host side: pinned (cudaHostAlloc) or ordinary (unregistered) memory.
bool is_host_memory(const cudaPointerAttributes& attributes) {
  return attributes.type == cudaMemoryTypeHost || attributes.type == cudaMemoryTypeUnregistered;
}

// A host-to-host copy run by the stream as a host function, so that it keeps the stream's order.
struct HostCopy {
  void* dst;
  const void* src;
  std::size_t bytes;
};

void CUDART_CB run_host_copy(void* task) {
  const std::unique_ptr<HostCopy> copy(static_cast<HostCopy*>(task));
  std::memcpy(copy->dst, copy->src, copy->bytes);
}

// A host task run by the stream as a host function (Device::enqueue_host).
struct HostTask {
  CudaStream* stream;
  std::function<void()> run;
};

void CUDART_CB run_host_task(void* task) {
  const std::unique_ptr<HostTask> owned(static_cast<HostTask*>(task));
  owned->stream->run_host_task(owned->run);
}

DeviceBudgets resolve_budgets(int gpu_index, const DeviceBudgets& requested) {
  int count = 0;
  OFFGEN_CUDA_CHECK(cudaGetDeviceCount(&count));
  OFFGEN_CHECK(gpu_index >= 0 && gpu_index < count, "cuda device: there is no GPU {} ({} visible)",
               gpu_index, count);
  OFFGEN_CUDA_CHECK(cudaSetDevice(gpu_index));  // creates the context, so free memory counts it
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  OFFGEN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // cuBLAS workspaces, kernels' module memory and the allocator's rounding come out of this.
  const std::uint64_t reserve = std::max<std::uint64_t>(1ull << 30, total_bytes / 20);

  DeviceBudgets out = requested;
  if (out.gpu == 0) {
    OFFGEN_CHECK(free_bytes > reserve,
                 "cuda device: GPU {} has {} free of {}, not more than the {} kept in reserve; "
                 "free GPU memory or give a gpu budget",
                 gpu_index, format_bytes(free_bytes), format_bytes(total_bytes),
                 format_bytes(reserve));
    out.gpu = free_bytes - reserve;
  } else if (out.gpu > free_bytes) {
    spdlog::warn("cuda device: the gpu budget {} is more than the {} free on GPU {}",
                 format_bytes(out.gpu), format_bytes(free_bytes), gpu_index);
  }
  // Host memory is shared by the pinned and host tiers (the gpu tier is the GPU's own here).
  const std::uint64_t physical =
      physical_memory_bytes() / std::max<std::uint32_t>(1, requested.host_sharers);
  if (out.pinned == 0) out.pinned = physical / 4;
  if (out.host == 0) out.host = physical / 2;
  return out;
}

std::size_t round_up(std::size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

}  // namespace

// ---- busy time ----

namespace {
// Harvest completed brackets as they pile up, so a long run without busy_seconds() calls keeps
// few events in flight.
constexpr std::size_t kHarvestEvery = 64;
}  // namespace

CudaBusyClock::CudaBusyClock(int gpu_index) : gpu_index_(gpu_index) {}

CudaBusyClock::~CudaBusyClock() {
  const std::lock_guard lock(mutex_);
  if (span_start_ != nullptr) destroy(span_start_);
  for (const auto& [start, end] : pending_) {
    destroy(start);
    destroy(end);
  }
  for (cudaEvent_t event : pool_) destroy(event);
}

void CudaBusyClock::destroy(cudaEvent_t event) noexcept {
  log_failure("destroying", "a timing event", [&] { OFFGEN_CUDA_CHECK(cudaEventDestroy(event)); });
}

cudaEvent_t CudaBusyClock::take_event() {
  if (!pool_.empty()) {
    cudaEvent_t event = pool_.back();
    pool_.pop_back();
    return event;
  }
  // An event belongs to the device current at its creation: this stream's, restored afterwards.
  int current = 0;
  OFFGEN_CUDA_CHECK(cudaGetDevice(&current));
  if (current != gpu_index_) OFFGEN_CUDA_CHECK(cudaSetDevice(gpu_index_));
  cudaEvent_t event = nullptr;
  const cudaError_t status = cudaEventCreateWithFlags(&event, cudaEventDefault);
  if (current != gpu_index_) OFFGEN_CUDA_CHECK(cudaSetDevice(current));
  if (status != cudaSuccess) detail::cuda_failed(status, "cudaEventCreate", __FILE__, __LINE__);
  return event;
}

void CudaBusyClock::record(cudaEvent_t event, cudaStream_t stream) {
  const cudaError_t status = cudaEventRecord(event, stream);
  if (status != cudaSuccess) {
    pool_.push_back(event);
    detail::cuda_failed(status, "cudaEventRecord", __FILE__, __LINE__);
  }
}

void CudaBusyClock::bracket(cudaStream_t stream, const std::function<void()>& enqueue) {
  const std::lock_guard lock(mutex_);
  if (spans_) {
    if (span_start_ == nullptr) {
      cudaEvent_t start = take_event();
      record(start, stream);
      span_start_ = start;
    }
    enqueue();
    return;
  }
  cudaEvent_t start = take_event();
  record(start, stream);
  try {
    enqueue();
  } catch (...) {
    pool_.push_back(start);  // nothing was bracketed; re-recording the event later is fine
    throw;
  }
  cudaEvent_t end = take_event();
  try {
    record(end, stream);
  } catch (...) {
    pool_.push_back(start);
    throw;
  }
  pending_.emplace_back(start, end);
  if (pending_.size() % kHarvestEvery == 0) harvest();
}

void CudaBusyClock::close_span(cudaStream_t stream) {
  if (span_start_ == nullptr) return;
  cudaEvent_t end = take_event();
  record(end, stream);
  pending_.emplace_back(std::exchange(span_start_, nullptr), end);
  if (pending_.size() % kHarvestEvery == 0) harvest();
}

void CudaBusyClock::around_wait(cudaStream_t stream, const std::function<void()>& wait) {
  const std::lock_guard lock(mutex_);
  if (!spans_) {
    wait();
    return;
  }
  close_span(stream);
  wait();
  // Work is about to follow the wait: the next span starts when the stream is past it.
  cudaEvent_t start = take_event();
  record(start, stream);
  span_start_ = start;
}

void CudaBusyClock::before_synchronize(cudaStream_t stream) {
  const std::lock_guard lock(mutex_);
  close_span(stream);
}

void CudaBusyClock::use_spans() {
  const std::lock_guard lock(mutex_);
  spans_ = true;
}

double CudaBusyClock::seconds() {
  const std::lock_guard lock(mutex_);
  harvest();
  return seconds_;
}

void CudaBusyClock::harvest() {
  // Pairs complete in stream order: stop at the first whose end has not.
  while (!pending_.empty()) {
    const auto [start, end] = pending_.front();
    const cudaError_t status = cudaEventQuery(end);
    if (status == cudaErrorNotReady) {
      // Not an error; keep it out of the thread's last-error slot (see CudaEvent::query).
      (void)cudaGetLastError();
      return;
    }
    if (status != cudaSuccess) return;  // a stream error: synchronize() reports it
    float milliseconds = 0.0f;
    if (cudaEventElapsedTime(&milliseconds, start, end) == cudaSuccess) {
      seconds_ += static_cast<double>(milliseconds) * 1e-3;
    } else {
      (void)cudaGetLastError();
    }
    pending_.pop_front();
    pool_.push_back(start);
    pool_.push_back(end);
  }
}

// ---- streams ----

namespace {
int current_gpu() {
  int gpu = 0;
  OFFGEN_CUDA_CHECK(cudaGetDevice(&gpu));
  return gpu;
}
}  // namespace

CudaStream::CudaStream(StreamRole role)
    : role_(role), busy_clock_(std::make_unique<CudaBusyClock>(current_gpu())) {
  OFFGEN_CUDA_CHECK(cudaStreamCreateWithFlags(&handle_, cudaStreamNonBlocking));
}

CudaStream::~CudaStream() {
  destroy();
}

CudaStream::CudaStream(CudaStream&& other) noexcept
    : role_(other.role_),
      handle_(std::exchange(other.handle_, nullptr)),
      busy_clock_(std::move(other.busy_clock_)),
      host_error_(std::move(other.host_error_)) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    destroy();
    role_ = other.role_;
    handle_ = std::exchange(other.handle_, nullptr);
    busy_clock_ = std::move(other.busy_clock_);
    host_error_ = std::move(other.host_error_);
  }
  return *this;
}

void CudaStream::destroy() noexcept {
  if (handle_ == nullptr) return;
  // Work still queued finishes first: CUDA releases the stream when it is done.
  log_failure("destroying the stream", stream_role_name(role_),
              [&] { OFFGEN_CUDA_CHECK(cudaStreamDestroy(handle_)); });
  handle_ = nullptr;
}

void CudaStream::synchronize() {
  OFFGEN_CHECK(handle_ != nullptr, "cuda stream {}: used after a move", stream_role_name(role_));
  try {
    busy_clock_->before_synchronize(handle_);
    OFFGEN_CUDA_CHECK(cudaStreamSynchronize(handle_));
  } catch (const Error& e) {
    throw Error(fmt::format("cuda stream {}: {}", stream_role_name(role_), e.what()));
  }
  std::exception_ptr error;
  {
    const std::lock_guard lock(host_error_->mutex);
    error = host_error_->error;
  }
  if (error) std::rethrow_exception(error);
}

void CudaStream::run_host_task(const std::function<void()>& task) noexcept {
  {
    const std::lock_guard lock(host_error_->mutex);
    if (host_error_->error) return;  // sticky, as the CPU device's streams are
  }
  try {
    task();
  } catch (...) {
    const std::lock_guard lock(host_error_->mutex);
    host_error_->error = std::current_exception();
  }
}

CudaStream& as_cuda_stream(Stream& stream) {
  auto* cuda = dynamic_cast<CudaStream*>(&stream);
  OFFGEN_CHECK(cuda != nullptr, "cuda device: the {} stream given is not a CUDA stream",
               stream_role_name(stream.role()));
  OFFGEN_CHECK(cuda->handle() != nullptr, "cuda stream {}: used after a move",
               stream_role_name(stream.role()));
  return *cuda;
}

cudaStream_t cuda_stream_handle(Stream& stream) {
  return as_cuda_stream(stream).handle();
}

// ---- events ----

CudaEvent::CudaEvent() {
  OFFGEN_CUDA_CHECK(cudaEventCreateWithFlags(&handle_, cudaEventDisableTiming));
}

CudaEvent::~CudaEvent() {
  destroy();
}

CudaEvent::CudaEvent(CudaEvent&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    destroy();
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void CudaEvent::destroy() noexcept {
  if (handle_ == nullptr) return;
  // A pending record completes first: CUDA releases the event when it is done.
  log_failure("destroying", "an event", [&] { OFFGEN_CUDA_CHECK(cudaEventDestroy(handle_)); });
  handle_ = nullptr;
}

void CudaEvent::record(Stream& stream) {
  OFFGEN_CHECK(handle_ != nullptr, "cuda event: used after a move");
  OFFGEN_CUDA_CHECK(cudaEventRecord(handle_, cuda_stream_handle(stream)));
}

void CudaEvent::wait_on(Stream& stream) {
  OFFGEN_CHECK(handle_ != nullptr, "cuda event: used after a move");
  // An event never recorded counts as completed: the wait is then a no-op, as the contract says.
  CudaStream& cuda = as_cuda_stream(stream);
  cuda.busy_clock().around_wait(
      cuda.handle(), [&] { OFFGEN_CUDA_CHECK(cudaStreamWaitEvent(cuda.handle(), handle_, 0)); });
}

void CudaEvent::synchronize() {
  OFFGEN_CHECK(handle_ != nullptr, "cuda event: used after a move");
  OFFGEN_CUDA_CHECK(cudaEventSynchronize(handle_));
}

bool CudaEvent::query() {
  OFFGEN_CHECK(handle_ != nullptr, "cuda event: used after a move");
  const cudaError_t status = cudaEventQuery(handle_);
  if (status == cudaErrorNotReady) {
    // Not an error. Clear it from the thread's last-error slot so that the next launch check
    // (cudaGetLastError) does not report it.
    (void)cudaGetLastError();
    return false;
  }
  if (status != cudaSuccess) detail::cuda_failed(status, "cudaEventQuery", __FILE__, __LINE__);
  return true;
}

// ---- the block caches ----

CudaBlockCache::CudaBlockCache(Tier tier, int gpu_index) : tier_(tier), gpu_index_(gpu_index) {}

CudaBlockCache::~CudaBlockCache() {
  release();
}

cudaError_t CudaBlockCache::cuda_allocate(void** data, std::size_t bytes) {
  OFFGEN_CUDA_CHECK(cudaSetDevice(gpu_index_));  // cudaMalloc allocates on the current device
  if (tier_ == Tier::gpu) return cudaMalloc(data, bytes);
  // Portable: pinned for every CUDA context of the process, not only this GPU's.
  return cudaHostAlloc(data, bytes, cudaHostAllocPortable);
}

void* CudaBlockCache::take(std::size_t bytes) {
  {
    std::lock_guard lock(mutex_);
    auto it = free_blocks_.find(bytes);
    if (it != free_blocks_.end() && !it->second.empty()) {
      void* data = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= bytes;
      return data;
    }
  }
  const char* call = tier_ == Tier::gpu ? "cudaMalloc" : "cudaHostAlloc";
  void* data = nullptr;
  cudaError_t status = cuda_allocate(&data, bytes);
  if (status == cudaErrorMemoryAllocation) {
    // Not sticky. Clear it from the thread's last-error slot (a later launch check would report
    // it), give the cached blocks of other sizes back to CUDA and try once more.
    (void)cudaGetLastError();
    release();
    status = cuda_allocate(&data, bytes);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      throw OutOfMemoryError(fmt::format(
          "cuda device: {} refused {} for the {} tier on GPU {}, even after releasing the "
          "cached blocks",
          call, format_bytes(bytes), tier_name(tier_), gpu_index_));
    }
  }
  if (status != cudaSuccess) detail::cuda_failed(status, call, __FILE__, __LINE__);
  return data;
}

void CudaBlockCache::give_back(void* data, std::size_t bytes) noexcept {
  try {
    std::lock_guard lock(mutex_);
    free_blocks_[bytes].push_back(data);
    cached_bytes_ += bytes;
  } catch (...) {  // no memory for the bookkeeping: give the block straight back to CUDA
    cuda_free(data);
  }
}

void CudaBlockCache::cuda_free(void* data) noexcept {
  log_failure("freeing a cached block of the tier", tier_name(tier_), [&] {
    OFFGEN_CUDA_CHECK(cudaSetDevice(gpu_index_));
    if (tier_ == Tier::gpu) {
      OFFGEN_CUDA_CHECK(cudaFree(data));
    } else {
      OFFGEN_CUDA_CHECK(cudaFreeHost(data));
    }
  });
}

void CudaBlockCache::release() noexcept {
  std::unordered_map<std::size_t, std::vector<void*>> blocks;
  {
    std::lock_guard lock(mutex_);
    blocks.swap(free_blocks_);
    cached_bytes_ = 0;
  }
  for (auto& [bytes, list] : blocks) {
    for (void* data : list) cuda_free(data);
  }
}

std::uint64_t CudaBlockCache::cached_bytes() const {
  std::lock_guard lock(mutex_);
  return cached_bytes_;
}

// ---- the device ----

CudaDevice::CudaDevice(int gpu_index, const DeviceBudgets& budgets)
    : Device(resolve_budgets(gpu_index, budgets)),
      gpu_index_(gpu_index),
      gpu_cache_(Tier::gpu, gpu_index),
      pinned_cache_(Tier::pinned, gpu_index) {
  make_current();
  cudaDeviceProp prop{};
  OFFGEN_CUDA_CHECK(cudaGetDeviceProperties(&prop, gpu_index_));
  name_ = fmt::format("{} (sm_{}{})", prop.name, prop.major, prop.minor);
  multiprocessors_ = prop.multiProcessorCount;
  for (int role = 0; role < kNumStreamRoles; ++role) {
    streams_[role] = std::make_unique<CudaStream>(static_cast<StreamRole>(role));
  }
}

CudaDevice::~CudaDevice() {
  for (auto& stream : streams_) {
    if (!stream) continue;
    try {
      stream->synchronize();
    } catch (const std::exception& e) {
      spdlog::warn("cuda device: stream {} ended with an error: {}",
                   stream_role_name(stream->role()), e.what());
    }
  }
  // Every stream is idle now, so no queued work can still use a cached block.
  gpu_cache_.release();
  pinned_cache_.release();
}

void CudaDevice::make_current() const {
  OFFGEN_CUDA_CHECK(cudaSetDevice(gpu_index_));
}

Stream& CudaDevice::stream(StreamRole role) {
  return *streams_[static_cast<int>(role)];
}

cudaStream_t CudaDevice::cuda_stream(StreamRole role) const {
  CudaStream& stream = *streams_[static_cast<int>(role)];
  stream.busy_clock().use_spans();  // kernels may now be launched on it behind the device
  return stream.handle();
}

double CudaDevice::busy_seconds(StreamRole role) const {
  return streams_[static_cast<int>(role)]->busy_seconds();
}

std::unique_ptr<Event> CudaDevice::create_event() {
  make_current();  // an event belongs to the device current at its creation
  return std::make_unique<CudaEvent>();
}

void CudaDevice::copy_async(void* dst, const void* src, std::size_t bytes, Stream& stream) {
  CudaStream& cuda = as_cuda_stream(stream);
  const cudaStream_t handle = cuda.handle();
  if (bytes == 0) return;
  const cudaPointerAttributes to = pointer_attributes(dst);
  const cudaPointerAttributes from = pointer_attributes(src);
  if (is_host_memory(to) && is_host_memory(from)) {
    // cudaMemcpyAsync copies host to host synchronously, without waiting for the stream's earlier
    // work: a host function keeps the copy in the stream's order instead.
    auto task = std::make_unique<HostCopy>(HostCopy{dst, src, bytes});
    cuda.busy_clock().bracket(
        handle, [&] { OFFGEN_CUDA_CHECK(cudaLaunchHostFunc(handle, &run_host_copy, task.get())); });
    task.release();  // run_host_copy owns it now
    return;
  }
  if (to.type == cudaMemoryTypeDevice && from.type == cudaMemoryTypeHost &&
      from.devicePointer != nullptr && bytes <= kMappedCopyMaxBytes) {
    // Small uploads from pinned memory by a kernel, not queued behind a weight copy on the copy
    // engine (engine/device/mapped_copy.h).
    cuda.busy_clock().bracket(handle,
                              [&] { enqueue_mapped_copy(dst, from.devicePointer, bytes, handle); });
    return;
  }
  cuda.busy_clock().bracket(handle, [&] {
    OFFGEN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, handle));
  });
}

void CudaDevice::enqueue_host(Stream& stream, std::function<void()> task) {
  auto* cuda = dynamic_cast<CudaStream*>(&stream);
  OFFGEN_CHECK(cuda != nullptr, "cuda device: the {} stream given is not a CUDA stream",
               stream_role_name(stream.role()));
  auto owned = std::make_unique<HostTask>(HostTask{cuda, std::move(task)});
  cuda->busy_clock().bracket(cuda->handle(), [&] {
    OFFGEN_CUDA_CHECK(cudaLaunchHostFunc(cuda->handle(), &run_host_task, owned.get()));
  });
  owned.release();  // run_host_task owns it now
}

std::uint64_t CudaDevice::cached_bytes(Tier tier) const {
  switch (tier) {
    case Tier::gpu:
      return gpu_cache_.cached_bytes();
    case Tier::pinned:
      return pinned_cache_.cached_bytes();
    case Tier::host:
      return 0;
  }
  return 0;
}

void CudaDevice::release_cached_memory() {
  gpu_cache_.release();
  pinned_cache_.release();
}

void* CudaDevice::raw_allocate(Tier tier, std::size_t bytes) {
  if (bytes > std::numeric_limits<std::size_t>::max() - kAlignment) {
    throw OutOfMemoryError(fmt::format("cuda device: {} bytes cannot be allocated", bytes));
  }
  // Sizes are rounded so that blocks of nearly equal requests are shared through the caches.
  const std::size_t rounded = round_up(bytes);
  switch (tier) {
    case Tier::gpu:
      return gpu_cache_.take(rounded);
    case Tier::pinned:
      return pinned_cache_.take(rounded);
    case Tier::host:
      break;
  }
  void* data = std::aligned_alloc(kAlignment, rounded);
  if (data == nullptr) {
    throw OutOfMemoryError(fmt::format("cuda device: the system refused {} for the {} tier",
                                       format_bytes(bytes), tier_name(tier)));
  }
  return data;
}

void CudaDevice::raw_free(Tier tier, void* data, std::size_t bytes) noexcept {
  const std::size_t rounded = round_up(bytes);  // as raw_allocate rounded it: the cache's key
  switch (tier) {
    case Tier::gpu:
      gpu_cache_.give_back(data, rounded);
      return;
    case Tier::pinned:
      pinned_cache_.give_back(data, rounded);
      return;
    case Tier::host:
      std::free(data);
      return;
  }
}

std::unique_ptr<Device> make_cuda_device(int gpu_index, const DeviceBudgets& budgets) {
  return std::make_unique<CudaDevice>(gpu_index, budgets);
}

}  // namespace offgen
