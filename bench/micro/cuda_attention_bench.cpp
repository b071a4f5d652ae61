// Google Benchmark of the CUDA decode attention (kernels/cuda/attention.h) at opt-6.7b shapes — 32
// heads, head_dim 128, every cache slot attended — timed with CUDA events, beside the device's own
// device-to-device copy bandwidth. Decode attention is memory-bound (each cached k and v row is
// read once), so its "GB/s" (k and v bytes read per second) is to be read against the copy's.
//   build/release/bench/micro/offgen_cuda_attention_bench
// Without a CUDA GPU every benchmark is skipped with "no CUDA GPU" and the program exits 0.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <random>
#include <vector>

#include "engine/core/half.h"
#include "kernels/attention_args.h"
#include "kernels/cuda/attention.h"

namespace {

using offgen::Half;

constexpr int kHeads = 32;     // opt-6.7b
constexpr int kHeadDim = 128;  // opt-6.7b

bool have_gpu() {
  int count = 0;
  const bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();  // a failed query (no driver / device) must not linger as the last error
  return ok;
}

// A device allocation freed on scope exit; ok() is false when cudaMalloc failed.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) {
    if (bytes > 0 && cudaMalloc(&data_, bytes) != cudaSuccess) {
      data_ = nullptr;
      cudaGetLastError();
    }
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  bool ok() const { return data_ != nullptr; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
};

class Stream {
 public:
  Stream() { cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Times the work enqueued between start() and stop_seconds() on one stream.
class EventTimer {
 public:
  EventTimer() {
    cudaEventCreate(&start_);
    cudaEventCreate(&stop_);
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  void start(cudaStream_t stream) { cudaEventRecord(start_, stream); }
  double stop_seconds(cudaStream_t stream) {
    cudaEventRecord(stop_, stream);
    cudaEventSynchronize(stop_);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start_, stop_);
    return static_cast<double>(ms) * 1e-3;
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// n random fp16 values in [-1, 1]: a 16 MiB random block, replicated on the device (generating
// gigabytes on the host would dominate the run).
bool fill_random(Half* dst, std::size_t n) {
  const std::size_t block = std::min<std::size_t>(n, std::size_t{1} << 23);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<Half> host(block);
  for (auto& h : host) h = offgen::float_to_half(dist(rng));
  if (cudaMemcpy(dst, host.data(), block * sizeof(Half), cudaMemcpyHostToDevice) != cudaSuccess) {
    return false;
  }
  for (std::size_t done = block; done < n;) {
    const std::size_t count = std::min(done, n - done);
    if (cudaMemcpy(dst + done, dst, count * sizeof(Half), cudaMemcpyDeviceToDevice) !=
        cudaSuccess) {
      return false;
    }
    done += count;
  }
  return true;
}

// Args: batch, capacity (every slot attended), probs (1 = also write the softmax rows, as h2o
// does).
void DecodeAttention(benchmark::State& state) {
  if (!have_gpu()) {
    state.SkipWithError("no CUDA GPU");
    return;
  }
  const int batch = static_cast<int>(state.range(0));
  const int capacity = static_cast<int>(state.range(1));
  const bool with_probs = state.range(2) != 0;
  const std::size_t hidden = std::size_t{kHeads} * kHeadDim;
  const std::size_t cache = static_cast<std::size_t>(batch) * kHeads * capacity * kHeadDim;

  DeviceBuffer qkv(static_cast<std::size_t>(batch) * 3 * hidden * sizeof(Half));
  DeviceBuffer k(cache * sizeof(Half));
  DeviceBuffer v(cache * sizeof(Half));
  DeviceBuffer counts(static_cast<std::size_t>(batch) * sizeof(std::int32_t));
  DeviceBuffer out(static_cast<std::size_t>(batch) * hidden * sizeof(Half));
  DeviceBuffer probs(
      with_probs ? static_cast<std::size_t>(batch) * kHeads * capacity * sizeof(float) : 0);
  if (!qkv.ok() || !k.ok() || !v.ok() || !counts.ok() || !out.ok() || (with_probs && !probs.ok())) {
    state.SkipWithError("cudaMalloc failed");
    return;
  }
  const std::vector<std::int32_t> host_counts(static_cast<std::size_t>(batch), capacity);
  if (!fill_random(qkv.as<Half>(), static_cast<std::size_t>(batch) * 3 * hidden) ||
      !fill_random(k.as<Half>(), cache) || !fill_random(v.as<Half>(), cache) ||
      cudaMemcpy(counts.as<std::int32_t>(), host_counts.data(),
                 host_counts.size() * sizeof(std::int32_t),
                 cudaMemcpyHostToDevice) != cudaSuccess) {
    state.SkipWithError("filling the inputs failed");
    return;
  }

  offgen::kernels::DecodeAttentionArgs args;
  args.qkv = qkv.as<Half>();
  args.k_cache = k.as<Half>();
  args.v_cache = v.as<Half>();
  args.slot_count = counts.as<std::int32_t>();
  args.out = out.as<Half>();
  args.probs = with_probs ? probs.as<float>() : nullptr;
  args.batch = batch;
  args.heads = kHeads;
  args.head_dim = kHeadDim;
  args.capacity = capacity;
  args.scale = 0.08838834764831845f;  // 128^-0.5
  // The split a runner plans once for this cache, and its scratch.
  args.split = offgen::kernels::cuda::plan_decode_attention(batch, kHeads, capacity);
  DeviceBuffer scratch(
      offgen::kernels::decode_split_scratch_bytes(args.split, batch, kHeads, kHeadDim));
  if (args.split.splits > 1 && !scratch.ok()) {
    state.SkipWithError("cudaMalloc failed");
    return;
  }
  args.split_scratch = scratch.as<float>();

  Stream stream;
  EventTimer timer;
  double seconds = 0.0;
  try {
    offgen::kernels::cuda::decode_attention(args, stream.get());  // warm-up: first launch costs
    cudaStreamSynchronize(stream.get());
    for (auto _ : state) {
      timer.start(stream.get());
      offgen::kernels::cuda::decode_attention(args, stream.get());
      const double s = timer.stop_seconds(stream.get());
      state.SetIterationTime(s);
      seconds += s;
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  // The k and v bytes read; q, the output and the probabilities are noise beside them.
  const double bytes = 2.0 * static_cast<double>(cache) * sizeof(Half);
  const auto iterations = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes * iterations));
  if (seconds > 0.0) state.counters["GB/s"] = bytes * iterations / seconds * 1e-9;
}
BENCHMARK(DecodeAttention)
    ->ArgNames({"batch", "capacity", "probs"})
    ->ArgsProduct({{1, 8, 32, 64}, {512 + 32, 2048}, {0}})
    ->Args({32, 2048, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// Device-to-device cudaMemcpyAsync of a large buffer (arg: MiB). "GB/s" counts the bytes read
// plus the bytes written, i.e. the DRAM traffic, the same measure as decode's bytes read.
void DeviceCopy(benchmark::State& state) {
  if (!have_gpu()) {
    state.SkipWithError("no CUDA GPU");
    return;
  }
  const std::size_t bytes = static_cast<std::size_t>(state.range(0)) << 20;
  DeviceBuffer src(bytes);
  DeviceBuffer dst(bytes);
  if (!src.ok() || !dst.ok() || cudaMemset(src.as<void>(), 0, bytes) != cudaSuccess) {
    state.SkipWithError("cudaMalloc failed");
    return;
  }
  Stream stream;
  EventTimer timer;
  cudaMemcpyAsync(dst.as<void>(), src.as<void>(), bytes, cudaMemcpyDeviceToDevice, stream.get());
  cudaStreamSynchronize(stream.get());
  double seconds = 0.0;
  for (auto _ : state) {
    timer.start(stream.get());
    cudaMemcpyAsync(dst.as<void>(), src.as<void>(), bytes, cudaMemcpyDeviceToDevice, stream.get());
    const double s = timer.stop_seconds(stream.get());
    state.SetIterationTime(s);
    seconds += s;
  }
  const double traffic = 2.0 * static_cast<double>(bytes);
  const auto iterations = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(traffic * iterations));
  if (seconds > 0.0) state.counters["GB/s"] = traffic * iterations / seconds * 1e-9;
}
BENCHMARK(DeviceCopy)->ArgName("MiB")->Arg(1024)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
