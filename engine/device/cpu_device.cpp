#include "engine/device/cpu_device.h"

#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <tbb/global_control.h>
#include <tbb/info.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "engine/core/error.h"
#include "engine/core/units.h"

namespace offgen {
namespace {

constexpr std::size_t kAlignment = 256;

// An event's completion state, shared with the tasks that signal and wait on it so the Event
// object itself may be destroyed while they are still queued.
struct EventState {
  std::mutex mutex;
  std::condition_variable completed_cv;
  std::uint64_t recorded = 0;   // generation of the last record()
  std::uint64_t completed = 0;  // highest generation whose record task has run
};

class CpuEvent final : public Event {
 public:
  void record(Stream& stream) override {
    auto& cpu = dynamic_cast<CpuStream&>(stream);
    std::uint64_t generation;
    {
      std::lock_guard lock(state_->mutex);
      generation = ++state_->recorded;
    }
    cpu.enqueue_signal([state = state_, generation] {
      {
        std::lock_guard lock(state->mutex);
        state->completed = std::max(state->completed, generation);
      }
      state->completed_cv.notify_all();
    });
  }

  void wait_on(Stream& stream) override {
    auto& cpu = dynamic_cast<CpuStream&>(stream);
    std::uint64_t generation;
    {
      std::lock_guard lock(state_->mutex);
      generation = state_->recorded;
    }
    if (generation == 0) return;
    cpu.enqueue_wait([state = state_, generation] { wait_for(*state, generation); });
  }

  void synchronize() override {
    std::uint64_t generation;
    {
      std::lock_guard lock(state_->mutex);
      generation = state_->recorded;
    }
    wait_for(*state_, generation);
  }

  bool query() override {
    std::lock_guard lock(state_->mutex);
    return state_->completed >= state_->recorded;
  }

 private:
  static void wait_for(EventState& state, std::uint64_t generation) {
    std::unique_lock lock(state.mutex);
    state.completed_cv.wait(lock, [&] { return state.completed >= generation; });
  }

  std::shared_ptr<EventState> state_ = std::make_shared<EventState>();
};

}  // namespace

std::uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 8ull << 30;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
}

CpuStream::CpuStream(StreamRole role) : role_(role), worker_([this] { run(); }) {}

CpuStream::~CpuStream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  worker_.join();
}

void CpuStream::enqueue(std::function<void()> task) {
  push(std::move(task), false);
}

void CpuStream::enqueue_signal(std::function<void()> task) {
  push(std::move(task), true, false);
}

void CpuStream::enqueue_wait(std::function<void()> task) {
  push(std::move(task), false, false);
}

double CpuStream::busy_seconds() const {
  return static_cast<double>(busy_nanoseconds_.load(std::memory_order_relaxed)) * 1e-9;
}

void CpuStream::push(std::function<void()> task, bool always_runs, bool counts_as_busy) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({std::move(task), always_runs, counts_as_busy});
  }
  work_ready_.notify_one();
}

void CpuStream::synchronize() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
  if (error_) std::rethrow_exception(error_);
}

void CpuStream::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping and drained
    Task task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    const bool skip = error_ != nullptr && !task.always_runs;
    lock.unlock();
    std::exception_ptr error;
    if (!skip) {
      const auto start = std::chrono::steady_clock::now();
      try {
        task.run();
      } catch (...) {
        error = std::current_exception();
      }
      if (task.counts_as_busy) {
        const auto spent = std::chrono::steady_clock::now() - start;
        busy_nanoseconds_.fetch_add(
            std::chrono::duration_cast<std::chrono::nanoseconds>(spent).count(),
            std::memory_order_relaxed);
      }
    }
    task.run = nullptr;  // destroy captures outside the lock
    lock.lock();
    if (error && !error_) error_ = error;
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

namespace {
DeviceBudgets resolve_budgets(const DeviceBudgets& requested) {
  // Every tier of the cpu device is host memory.
  const std::uint64_t total =
      physical_memory_bytes() / std::max<std::uint32_t>(1, requested.host_sharers);
  DeviceBudgets out = requested;
  if (out.gpu == 0) out.gpu = total / 2;
  if (out.pinned == 0) out.pinned = total / 4;
  if (out.host == 0) out.host = total / 4;
  return out;
}
}  // namespace

CpuDevice::CpuDevice(const DeviceBudgets& budgets) : Device(resolve_budgets(budgets)) {
#if defined(__SANITIZE_THREAD__)
  // The system's oneTBB is not built with ThreadSanitizer, so its work stealing reads as races.
  // Under TSan every kernel runs on its stream's own worker thread instead: what TSan then checks
  // is exactly the device contract — ordering between streams, events and the host.
  static tbb::global_control one_thread(tbb::global_control::max_allowed_parallelism, 1);
#endif
  for (int role = 0; role < kNumStreamRoles; ++role) {
    streams_[role] = std::make_unique<CpuStream>(static_cast<StreamRole>(role));
  }
}

CpuDevice::~CpuDevice() {
  for (auto& stream : streams_) {
    try {
      stream->synchronize();
    } catch (const std::exception& e) {
      spdlog::warn("cpu device: stream {} ended with an error: {}",
                   stream_role_name(stream->role()), e.what());
    }
  }
}

std::string CpuDevice::name() const {
  return fmt::format("cpu ({} threads)", tbb::info::default_concurrency());
}

Stream& CpuDevice::stream(StreamRole role) {
  return *streams_[static_cast<int>(role)];
}
double CpuDevice::busy_seconds(StreamRole role) const {
  return streams_[static_cast<std::size_t>(role)]->busy_seconds();
}

CpuStream& CpuDevice::cpu_stream(StreamRole role) {
  return *streams_[static_cast<int>(role)];
}

std::unique_ptr<Event> CpuDevice::create_event() {
  return std::make_unique<CpuEvent>();
}

void CpuDevice::copy_async(void* dst, const void* src, std::size_t bytes, Stream& stream) {
  dynamic_cast<CpuStream&>(stream).enqueue([dst, src, bytes] { std::memcpy(dst, src, bytes); });
}

void CpuDevice::enqueue_host(Stream& stream, std::function<void()> task) {
  dynamic_cast<CpuStream&>(stream).enqueue(std::move(task));
}

void* CpuDevice::raw_allocate(Tier tier, std::size_t bytes) {
  if (bytes > std::numeric_limits<std::size_t>::max() - kAlignment) {
    throw OutOfMemoryError(fmt::format("cpu device: {} bytes cannot be allocated", bytes));
  }
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* data = std::aligned_alloc(kAlignment, rounded);
  if (data == nullptr) {
    throw OutOfMemoryError(fmt::format("cpu device: the system refused {} for the {} tier",
                                       format_bytes(bytes), tier_name(tier)));
  }
  return data;
}

void CpuDevice::raw_free(Tier, void* data, std::size_t) noexcept {
  std::free(data);
}

}  // namespace offgen
