// The cpu device: the Device contract on the host, so every schedule, budget and ordering rule
// runs (and is tested) without a GPU. Its "gpu" tier is host memory with a hard byte budget; each
// stream is a worker thread with a FIFO queue, so work on different streams really overlaps, and a
// missing event wait is a real data race that ThreadSanitizer reports.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/device/device.h"

namespace offgen {

class CpuStream final : public Stream {
 public:
  explicit CpuStream(StreamRole role);
  ~CpuStream() override;  // drains the queue, then joins the worker
  CpuStream(const CpuStream&) = delete;
  CpuStream& operator=(const CpuStream&) = delete;

  StreamRole role() const override { return role_; }
  void synchronize() override;
  // Runs `task` on this stream's worker after everything enqueued before it. An exception thrown by
  // a task is kept and rethrown by synchronize(); later tasks are skipped (sticky error).
  void enqueue(std::function<void()> task);
  // Like enqueue, but runs even after an error: event signals, so that streams and host threads
  // waiting on this stream's events are released instead of hanging (they see the error when they
  // synchronize this stream).
  void enqueue_signal(std::function<void()> task);
  // Like enqueue, for a task that only waits (an event wait): its time is not counted as busy.
  void enqueue_wait(std::function<void()> task);

  // Seconds this stream's worker has spent running tasks (waits excluded) since it started.
  double busy_seconds() const;

 private:
  void push(std::function<void()> task, bool always_runs, bool counts_as_busy = true);
  void run();

  struct Task {
    std::function<void()> run;
    bool always_runs = false;
    bool counts_as_busy = true;
  };

  StreamRole role_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable idle_;
  std::deque<Task> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::atomic<std::int64_t> busy_nanoseconds_{0};
  std::thread worker_;
};

class CpuDevice final : public Device {
 public:
  // Zero budgets take defaults: the gpu tier gets half of physical memory, pinned and host a
  // quarter each (all three are ordinary host memory here).
  explicit CpuDevice(const DeviceBudgets& budgets = {});
  ~CpuDevice() override;

  DeviceKind kind() const override { return DeviceKind::cpu; }
  std::string name() const override;
  Stream& stream(StreamRole role) override;
  CpuStream& cpu_stream(StreamRole role);
  double busy_seconds(StreamRole role) const override;
  std::unique_ptr<Event> create_event() override;
  void copy_async(void* dst, const void* src, std::size_t bytes, Stream& stream) override;
  void enqueue_host(Stream& stream, std::function<void()> task) override;

 protected:
  void* raw_allocate(Tier tier, std::size_t bytes) override;
  void raw_free(Tier tier, void* data, std::size_t bytes) noexcept override;

 private:
  std::unique_ptr<CpuStream> streams_[kNumStreamRoles];
};

// Physical memory of this machine in bytes.
std::uint64_t physical_memory_bytes();

}  // namespace offgen
