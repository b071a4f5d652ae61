#include "scheduler/calibrate.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/half.h"
#include "engine/core/parameter_error.h"
#include "engine/core/units.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/linear_int8.h"
#include "kernels/cpu/quantize.h"
#include "kernels/quantize_args.h"
#include "scheduler/machine_load.h"

namespace offgen {
namespace {

// The decode attention measurement's shape: `batch` sequences over a full cache of `capacity`.
constexpr int kAttentionBatch = 8;
constexpr int kAttentionCapacity = 1024;

using Clock = std::chrono::steady_clock;

// A measurement shorter than this is repeated until its timed runs add up to it (at most
// kMostRuns runs): one run of a millisecond (a one-row GEMM, a decode attention over 25 MiB) is
// at the mercy of a scheduler tick or a page fault, and a quick calibration (one repeat) measured
// such rates 2-3x apart from one run to the next on a quiet 2-core VM.
constexpr double kLeastTimedSeconds = 0.1;
constexpr int kMostRuns = 200;

// Best of `repeats` runs (more for a short one, above) after one untimed warm-up; `run` must wait
// for its own work.
double best_seconds(int repeats, const std::function<void()>& run) {
  run();
  double best = std::numeric_limits<double>::infinity();
  double timed = 0;
  for (int r = 0; r < kMostRuns && (r < std::max(1, repeats) || timed < kLeastTimedSeconds); ++r) {
    const auto start = Clock::now();
    run();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::min(best, seconds);
    timed += seconds;
  }
  return best;
}

double gb_per_s(double bytes, double seconds) {
  return bytes / seconds / 1e9;
}

// Device memory filled with a small constant (uninitialised memory may hold NaNs or denormals,
// which slow some CPUs down and would measure the wrong thing).
Buffer filled(Device& device, Tier tier, std::size_t halves, Stream& stream) {
  Buffer buffer = device.allocate(tier, std::max<std::size_t>(halves, 1) * sizeof(Half));
  const std::vector<Half> values(std::max<std::size_t>(halves, 1), float_to_half(0.01f));
  Buffer staging = device.allocate(Tier::pinned, values.size() * sizeof(Half));
  std::memcpy(staging.data(), values.data(), values.size() * sizeof(Half));
  device.copy_async(buffer.data(), staging.data(), values.size() * sizeof(Half), stream);
  stream.synchronize();
  return buffer;
}

void measure_copies(Device& device, const CalibrationOptions& o, std::vector<Measurement>& out) {
  const std::size_t bytes = o.copy_bytes;
  const auto size_f = static_cast<double>(bytes);
  Buffer gpu = device.allocate(Tier::gpu, bytes);
  Buffer gpu2 = device.allocate(Tier::gpu, bytes);
  Buffer pinned = device.allocate(Tier::pinned, bytes);
  Buffer pinned2 = device.allocate(Tier::pinned, bytes);
  Buffer host = device.allocate(Tier::host, bytes);
  for (Buffer* b : {&pinned, &pinned2, &host}) std::memset(b->data(), 1, bytes);
  Stream& h2d = device.stream(StreamRole::h2d_kv);
  Stream& d2h = device.stream(StreamRole::d2h_kv);
  auto copy = [&](void* dst, const void* src, Stream& stream) {
    return best_seconds(o.repeats, [&] {
      device.copy_async(dst, src, bytes, stream);
      stream.synchronize();
    });
  };
  const std::string size = format_bytes(bytes);
  out.push_back({"h2d_pinned", gb_per_s(size_f, copy(gpu.data(), pinned.data(), h2d)), "GB/s",
                 "pinned host -> gpu tier, one " + size + " copy"});
  out.push_back({"d2h_pinned", gb_per_s(size_f, copy(pinned.data(), gpu.data(), d2h)), "GB/s",
                 "gpu tier -> pinned host, one " + size + " copy"});
  out.push_back({"h2d_pageable", gb_per_s(size_f, copy(gpu.data(), host.data(), h2d)), "GB/s",
                 "pageable host -> gpu tier, one " + size + " copy"});
  out.push_back({"d2h_pageable", gb_per_s(size_f, copy(host.data(), gpu.data(), d2h)), "GB/s",
                 "gpu tier -> pageable host, one " + size + " copy"});
  const double duplex = best_seconds(o.repeats, [&] {
    device.copy_async(gpu.data(), pinned.data(), bytes, h2d);
    device.copy_async(pinned2.data(), gpu2.data(), bytes, d2h);
    h2d.synchronize();
    d2h.synchronize();
  });
  out.push_back({"duplex_pinned", gb_per_s(2.0 * size_f, duplex), "GB/s",
                 "both directions at once (pinned), total bytes / time"});
}

// fc1 of a model (bias + ReLU) on the gpu tier: its weights, and inputs and outputs of some rows.
class Fc1 {
 public:
  Fc1(Device& device, const ModelConfig& m)
      : device_(device),
        compute_(device.stream(StreamRole::compute)),
        in_(m.hidden_size),
        out_(m.ffn_dim),
        weight_(filled(device, Tier::gpu, static_cast<std::size_t>(out_) * in_, compute_)),
        bias_(filled(device, Tier::gpu, static_cast<std::size_t>(out_), compute_)) {}

  // Inputs and outputs of `rows` rows, replacing (and first freeing) the last ones.
  void set_rows(int rows) {
    x_.reset();
    y_.reset();
    rows_ = rows;
    x_ = filled(device_, Tier::gpu, static_cast<std::size_t>(rows) * in_, compute_);
    y_ = device_.allocate(Tier::gpu, static_cast<std::size_t>(rows) * out_ * sizeof(Half));
  }
  // Issues one GEMM on the compute stream.
  void run(Ops& ops) const {
    ops.linear({.x = x_.as<Half>(),
                .weight = weight_.as<Half>(),
                .bias = bias_.as<Half>(),
                .y = y_.as<Half>(),
                .rows = rows_,
                .out_features = out_,
                .in_features = in_,
                .activation = kernels::Activation::relu});
  }
  double flops() const { return 2.0 * rows_ * static_cast<double>(out_) * in_; }
  std::string shape() const { return fmt::format("[{}, {}] x [{}, {}]", rows_, in_, in_, out_); }

 private:
  Device& device_;
  Stream& compute_;
  int in_, out_, rows_ = 0;
  Buffer weight_, bias_, x_, y_;
};

// How many copies of a layer's weights the GEMM measurement cycles through: as many as the model
// has layers, as a decode step reads them one after another, each once (so a cache holds them
// only as well as it holds the model's), up to `target_bytes` of weights and kLayerCopiesMax.
constexpr std::uint64_t kLayerCopiesMax = 32;

// Copies of a layer of `layer_bytes` within the rule above.
std::uint64_t copies_within(const ModelConfig& m, std::uint64_t target_bytes,
                            std::uint64_t layer_bytes) {
  const auto layers = static_cast<std::uint64_t>(std::max(m.num_layers, 1));
  return std::clamp<std::uint64_t>(
      std::min(layers, target_bytes / std::max<std::uint64_t>(layer_bytes, 1)), 1, kLayerCopiesMax);
}

std::uint64_t layer_copies(const ModelConfig& m, std::uint64_t target_bytes) {
  return copies_within(m, target_bytes,
                       static_cast<std::uint64_t>(m.layer_gemm_params()) * sizeof(Half));
}

// Bytes of one layer's GEMM weights in int8 (kernels/int8_matrix.h), and how many copies the int8
// measurement cycles through: as many as the model has layers within `target_bytes`, as for fp16,
// so a cache holds them as well as it holds the model's int8 layers (not 0.52 of fp16's copies).
std::uint64_t int8_layer_bytes(const ModelConfig& m) {
  std::uint64_t bytes = 0;
  for (const auto& [rows, cols] : m.layer_gemm_shapes())
    bytes += kernels::Int8Shape{rows, cols}.bytes();
  return bytes;
}

std::uint64_t int8_layer_copies(const ModelConfig& m, std::uint64_t target_bytes) {
  return copies_within(m, target_bytes, int8_layer_bytes(m));
}

// Row counts from which the GEMM measurement runs rows as a prefill's prompt rows (the CPU's
// prompt order and kernel; kernels/linear_args.h): 128 and 512 stand for prefills, 1 and 32 for
// decode steps.
constexpr int kPromptRows = 128;

// A decoder layer's GEMMs on the gpu tier, in `copies` weight sets: one pass runs every set's
// four GEMMs over the same rows, as a decode step runs the layers' one after another.
class LayerGemms {
 public:
  LayerGemms(Device& device, const ModelConfig& m, std::uint64_t target_bytes)
      : device_(device),
        compute_(device.stream(StreamRole::compute)),
        shapes_(m.layer_gemm_shapes()) {
    const std::uint64_t copies = layer_copies(m, target_bytes);
    for (std::uint64_t c = 0; c < copies; ++c) {
      for (const auto& [rows, cols] : shapes_) {
        weights_.push_back(filled(device, Tier::gpu,
                                  static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols),
                                  compute_));
      }
    }
    for (const auto& [rows, cols] : shapes_) width_ = std::max({width_, rows, cols});
  }

  int copies() const { return static_cast<int>(weights_.size() / shapes_.size()); }

  // Packs `copies` int8 weight sets as the weight store does, from the fp16 sets in turn (the cpu
  // device only: its gpu tier is host memory).
  void pack_int8(std::uint64_t copies) {
    compute_.synchronize();  // the fills
    for (std::size_t i = 0; i < copies * shapes_.size(); ++i) {
      const auto& [rows, cols] = shapes_[i % shapes_.size()];
      const kernels::Int8Shape shape{rows, cols};
      int8_blobs_.push_back(device_.allocate(Tier::gpu, shape.bytes()));
      kernels::cpu::pack_int8_matrix(weights_[i % weights_.size()].as<Half>(), rows, cols,
                                     int8_blobs_.back().as<std::byte>());
      int8_.push_back(shape.view(int8_blobs_.back().as<std::byte>()));
    }
  }
  int int8_copies() const { return static_cast<int>(int8_.size() / shapes_.size()); }

  // Inputs and outputs of `rows` rows, replacing (and first freeing) the last ones.
  void set_rows(int rows) {
    x_.reset();
    y_.reset();
    rows_ = rows;
    x_ = filled(device_, Tier::gpu, static_cast<std::size_t>(rows) * width_, compute_);
    y_ = device_.allocate(Tier::gpu, static_cast<std::size_t>(rows) * width_ * sizeof(Half));
  }

  // Issues one pass: every copy's four GEMMs, on the compute stream (over the int8 sets when
  // `int8`, after pack_int8).
  void run(Ops& ops, kernels::PrefillMath math = kernels::PrefillMath::fp32,
           bool int8 = false) const {
    for (std::size_t i = 0; i < (int8 ? int8_.size() : weights_.size()); ++i) {
      const auto& [out_features, in_features] = shapes_[i % shapes_.size()];
      ops.linear({.x = x_.as<Half>(),
                  .weight = int8 ? nullptr : weights_[i].as<Half>(),
                  .y = y_.as<Half>(),
                  .rows = rows_,
                  .out_features = out_features,
                  .in_features = in_features,
                  .prompt_rows = rows_ >= kPromptRows,
                  .prefill_math = math,
                  .weight_int8 = int8 ? &int8_[i] : nullptr});
    }
  }

  // FLOPs of one layer's GEMMs (one copy).
  double layer_flops() const {
    double flops = 0;
    for (const auto& [rows, cols] : shapes_) flops += 2.0 * rows_ * double(rows) * cols;
    return flops;
  }

  std::string describe() const {
    std::string out;
    for (const auto& [rows, cols] : shapes_) {
      out += fmt::format("{}[{}, {}] x [{}, {}]", out.empty() ? "" : ", ", rows_, cols, cols, rows);
    }
    return out;
  }

 private:
  Device& device_;
  Stream& compute_;
  std::array<std::array<int, 2>, 4> shapes_;
  int width_ = 0, rows_ = 0;
  std::vector<Buffer> weights_;
  std::vector<Buffer> int8_blobs_;
  std::vector<kernels::Int8Matrix> int8_;
  Buffer x_, y_;
};

void measure_gemm(Device& device, Ops& ops, const ModelConfig& m, const CalibrationOptions& o,
                  std::vector<Measurement>& out) {
  Stream& compute = device.stream(StreamRole::compute);
  LayerGemms layer(device, m, o.copy_bytes);
  const std::string weights = fmt::format(
      "weights cycled through {} copies ({}), one after another as a step reads the "
      "layers",
      layer.copies(),
      format_bytes(static_cast<std::uint64_t>(m.layer_gemm_params()) * sizeof(Half) *
                   static_cast<std::uint64_t>(layer.copies())));
  const auto measure = [&](int rows, kernels::PrefillMath math, bool int8 = false) {
    layer.set_rows(rows);
    return layer.layer_flops() / 1e12 /
           (best_seconds(o.repeats,
                         [&] {
                           layer.run(ops, math, int8);
                           compute.synchronize();
                         }) /
            (int8 ? layer.int8_copies() : layer.copies()));
  };
  for (const int rows : {1, 32, 128, 512}) {
    const double rate = measure(rows, kernels::PrefillMath::fp32);
    out.push_back(
        {"gemm_layer_m" + std::to_string(rows), rate, "TFLOP/s",
         fmt::format("a decoder layer's GEMMs, {}, fp16, as {} rows, {}", layer.describe(),
                     rows >= kPromptRows ? "prompt" : "decode", weights)});
  }
  if (measures_int8(device)) {
    layer.pack_int8(int8_layer_copies(m, o.copy_bytes));
    const std::string int8_weights = fmt::format(
        "weights cycled through {} copies ({})", layer.int8_copies(),
        format_bytes(int8_layer_bytes(m) * static_cast<std::uint64_t>(layer.int8_copies())));
    for (const int rows : {1, 32, 128, 512}) {
      const double rate = measure(rows, kernels::PrefillMath::fp32, true);
      out.push_back(
          {"gemm_layer_int8_m" + std::to_string(rows), rate, "TOP/s",
           fmt::format("a decoder layer's GEMMs, {}, int8 weights (--int8-weights), "
                       "as {} rows, {}",
                       layer.describe(), rows >= kPromptRows ? "prompt" : "decode", int8_weights)});
    }
  }
  if (!measures_bf16(device)) return;
  for (const int rows : {128, 512}) {
    const double rate = measure(rows, kernels::PrefillMath::bf16);
    out.push_back({"gemm_layer_bf16_m" + std::to_string(rows), rate, "TFLOP/s",
                   fmt::format("a decoder layer's GEMMs, {}, fp16 weights, as prompt rows in bf16 "
                               "(--prefill-math bf16), {}",
                               layer.describe(), weights)});
  }
}

// Causal prefill attention of one prompt of kPrefillAttentionTokens (or the model's longest),
// every head: q·k and p·v over the causal half of the scores, FLOPs / time.
constexpr int kPrefillAttentionTokens = 512;

int prefill_attention_tokens(const ModelConfig& m) {
  return m.max_position_embeddings > 0
             ? std::min(kPrefillAttentionTokens, m.max_position_embeddings)
             : kPrefillAttentionTokens;
}

void measure_prefill_attention(Device& device, Ops& ops, const ModelConfig& m,
                               const CalibrationOptions& o, std::vector<Measurement>& out) {
  Stream& compute = device.stream(StreamRole::compute);
  const int seq = prefill_attention_tokens(m);
  Buffer qkv = filled(device, Tier::gpu, static_cast<std::size_t>(seq) * m.qkv_dim(), compute);
  Buffer valid = device.allocate(Tier::gpu, static_cast<std::size_t>(seq));
  {
    Buffer ones = device.allocate(Tier::pinned, static_cast<std::size_t>(seq));
    std::memset(ones.data(), 1, static_cast<std::size_t>(seq));
    device.copy_async(valid.data(), ones.data(), static_cast<std::size_t>(seq), compute);
    compute.synchronize();
  }
  Buffer attended = device.allocate(
      Tier::gpu, static_cast<std::size_t>(seq) * m.num_heads * m.head_dim() * sizeof(Half));
  kernels::PrefillAttentionArgs args;
  args.qkv = qkv.as<Half>();
  args.valid = valid.as<std::uint8_t>();
  args.out = attended.as<Half>();
  args.batch = 1;
  args.seq = seq;
  args.heads = m.num_heads;
  args.head_dim = m.head_dim();
  args.kv_heads = m.kv_heads();
  args.scale = 1.0f / std::sqrt(static_cast<float>(m.head_dim()));
  const double flops = 2.0 * m.num_heads * double(seq) * seq * m.head_dim();
  const auto rate = [&] {
    return flops /
           best_seconds(o.repeats,
                        [&] {
                          ops.prefill_attention(args);
                          compute.synchronize();
                        }) /
           1e12;
  };
  out.push_back({"prefill_attention", rate(), "TFLOP/s",
                 fmt::format("causal attention of one {}-token prompt, {} heads x {} (q.k and p.v "
                             "over half the scores)",
                             seq, m.num_heads, m.head_dim())});
  if (!measures_bf16(device)) return;
  args.prefill_math = kernels::PrefillMath::bf16;
  out.push_back(
      {"prefill_attention_bf16", rate(), "TFLOP/s", "the same in bf16 (--prefill-math bf16)"});
}

// A pinned -> gpu copy and `run` (one piece of other work, repeated to about the copy's length)
// alone and then at once. `wait` waits for what `run` enqueued (nothing, for host work).
struct CopyBeside {
  double copy = 0;  // seconds of the copy alone
  double work = 0;  // of the repeated work alone
  double both = 0;  // of the two at once
  int repeats = 0;
  // The share of the shorter one hidden by the longer (1: together they take the longer's time;
  // 0: the sum).
  double overlap() const {
    return std::clamp((copy + work - both) / std::min(copy, work), 0.0, 1.0);
  }
  std::string describe(const CalibrationOptions& o, const std::string& what) const {
    return fmt::format(
        "one {} copy ({:.2f} ms) and {} {} ({:.2f} ms) at once took {:.2f} ms: the share of the "
        "shorter hidden",
        format_bytes(o.copy_bytes), 1e3 * copy, repeats, what, 1e3 * work, 1e3 * both);
  }
};

CopyBeside measure_copy_beside(Device& device, const CalibrationOptions& o,
                               const std::function<void()>& run,
                               const std::function<void()>& wait) {
  Stream& h2d = device.stream(StreamRole::h2d_weights);
  Buffer dst = device.allocate(Tier::gpu, o.copy_bytes);
  Buffer src = device.allocate(Tier::pinned, o.copy_bytes);
  std::memset(src.data(), 1, o.copy_bytes);
  CopyBeside r;
  r.copy = best_seconds(o.repeats, [&] {
    device.copy_async(dst.data(), src.data(), o.copy_bytes, h2d);
    h2d.synchronize();
  });
  const double one = best_seconds(o.repeats, [&] {
    run();
    wait();
  });
  r.repeats = static_cast<int>(std::clamp(std::round(r.copy / one), 1.0, 1000.0));
  const auto repeated = [&] {
    for (int i = 0; i < r.repeats; ++i) run();
    wait();
  };
  r.work = best_seconds(o.repeats, repeated);
  r.both = best_seconds(o.repeats, [&] {
    device.copy_async(dst.data(), src.data(), o.copy_bytes, h2d);
    repeated();
    h2d.synchronize();
  });
  return r;
}

// A GPU's copy engines overlap its kernels; the cpu device's copies and kernels share its cores.
void measure_overlap(Device& device, Ops& ops, const ModelConfig& m, const CalibrationOptions& o,
                     std::vector<Measurement>& out) {
  Stream& compute = device.stream(StreamRole::compute);
  const int rows = 128;
  Fc1 fc1(device, m);
  fc1.set_rows(rows);
  const CopyBeside r = measure_copy_beside(
      device, o, [&] { fc1.run(ops); }, [&] { compute.synchronize(); });
  out.push_back({"copy_compute_overlap", r.overlap(), "fraction",
                 r.describe(o, fmt::format("GEMMs of {} rows", rows))});
}

// The shape the decode attention measurements run (kAttentionBatch sequences over full caches of
// kAttentionCapacity slots, the model's heads), without buffers.
kernels::DecodeAttentionArgs measured_attention_shape(const ModelConfig& m) {
  kernels::DecodeAttentionArgs args;
  args.batch = kAttentionBatch;
  args.heads = m.num_heads;
  args.kv_heads = m.kv_heads();
  args.head_dim = m.head_dim();
  args.capacity = kAttentionCapacity;
  args.scale = 0.125f;
  return args;
}

// Decode attention on the host with the cpu kernels over the measured shape: --cpu-attention's
// work.
class CpuAttention {
 public:
  explicit CpuAttention(const ModelConfig& m)
      : cache_(static_cast<std::size_t>(kAttentionBatch) * m.kv_heads() * kAttentionCapacity *
               m.head_dim()),
        k_(cache_, float_to_half(0.01f)),
        v_(cache_, float_to_half(0.01f)),
        qkv_(static_cast<std::size_t>(kAttentionBatch) * m.qkv_dim(), float_to_half(0.01f)),
        result_(static_cast<std::size_t>(kAttentionBatch) * m.num_heads * m.head_dim()),
        counts_(kAttentionBatch, kAttentionCapacity),
        args_(measured_attention_shape(m)) {
    args_.qkv = qkv_.data();
    args_.k_cache = k_.data();
    args_.v_cache = v_.data();
    args_.slot_count = counts_.data();
    args_.out = result_.data();
  }
  void run() const { kernels::cpu::decode_attention(args_); }

 private:
  std::size_t cache_;
  std::vector<Half> k_, v_, qkv_, result_;
  std::vector<std::int32_t> counts_;
  kernels::DecodeAttentionArgs args_;
};

// One decode step's attention over a full cache: every K and V byte read once. The cache has the
// model's KV heads (grouped-query attention: fewer than its query heads), so the rate is of the
// bytes the cost model charges, however the kernel shares them across a group.
void measure_attention(Device& device, Ops& ops, const ModelConfig& m, const CalibrationOptions& o,
                       std::vector<Measurement>& out) {
  Stream& compute = device.stream(StreamRole::compute);
  const int batch = kAttentionBatch;
  const int capacity = kAttentionCapacity;
  const int heads = m.num_heads;
  const int kv_heads = m.kv_heads();
  const int dim = m.head_dim();
  const std::size_t cache = static_cast<std::size_t>(batch) * kv_heads * capacity * dim;
  const std::size_t qkv_halves = static_cast<std::size_t>(batch) * m.qkv_dim();
  const std::size_t out_halves = static_cast<std::size_t>(batch) * heads * dim;
  const double kv_bytes = 2.0 * static_cast<double>(cache) * sizeof(Half);
  const std::string what = "decode over " + std::to_string(batch) + " x " +
                           std::to_string(kv_heads) + " KV heads x " + std::to_string(capacity) +
                           " slots x " + std::to_string(dim) + ", K and V bytes / time";
  {
    Buffer k = filled(device, Tier::gpu, cache, compute);
    Buffer v = filled(device, Tier::gpu, cache, compute);
    Buffer qkv = filled(device, Tier::gpu, qkv_halves, compute);
    Buffer out_buf = device.allocate(Tier::gpu, out_halves * sizeof(Half));
    Buffer counts = device.allocate(Tier::gpu, batch * sizeof(std::int32_t));
    Buffer staging = device.allocate(Tier::pinned, batch * sizeof(std::int32_t));
    std::fill_n(staging.as<std::int32_t>(), batch, capacity);
    device.copy_async(counts.data(), staging.data(), batch * sizeof(std::int32_t), compute);
    // The split a runner would plan for this cache, and its scratch.
    const kernels::DecodeSplit split =
        kernels::plan_decode_split(batch, heads, capacity, device.multiprocessors());
    Buffer scratch = device.allocate(
        Tier::gpu, kernels::decode_split_scratch_bytes(split, batch, heads, dim, kv_heads));
    kernels::DecodeAttentionArgs args = measured_attention_shape(m);
    args.split = split;
    args.split_scratch = scratch.as<float>();
    args.qkv = qkv.as<Half>();
    args.k_cache = k.as<Half>();
    args.v_cache = v.as<Half>();
    args.slot_count = counts.as<std::int32_t>();
    args.out = out_buf.as<Half>();
    const double seconds = best_seconds(o.repeats, [&] {
      ops.decode_attention(args);
      compute.synchronize();
    });
    out.push_back({"decode_attention_device", gb_per_s(kv_bytes, seconds), "GB/s", what});
  }
  // The same on the host with the cpu kernels: what --cpu-attention would get.
  CpuAttention cpu(m);
  const double seconds = best_seconds(o.repeats, [&] { cpu.run(); });
  out.push_back({"decode_attention_cpu", gb_per_s(kv_bytes, seconds), "GB/s", what});
}

// The copy engines read pinned memory while the CPU reads the host KV cache, and the two share
// the host's memory bandwidth: an offloaded run's decode step (streamed weights beside cpu
// attention) costs between the longer and the sum by this share. Only where copies are DMA (a
// GPU); on the cpu device both are the same cores, which copy_compute_overlap already says.
void measure_host_overlap(Device& device, const ModelConfig& m, const CalibrationOptions& o,
                          std::vector<Measurement>& out) {
  CpuAttention cpu(m);
  const CopyBeside r = measure_copy_beside(
      device, o, [&] { cpu.run(); }, [] {});
  out.push_back({"copy_cpu_attention_overlap", r.overlap(), "fraction",
                 r.describe(o, "cpu decode attentions")});
}

// Expanding int4 to fp16 (--compress-weights, --compress-kv), on the device and on the CPU, fp16
// bytes written / time: fc1's weights (groups down columns, wide rows) and a decode attention
// cache (one group per head row), whose kernels take different paths.
void measure_dequantize(Device& device, Ops& ops, const ModelConfig& m, const CalibrationOptions& o,
                        std::vector<Measurement>& out) {
  Stream& compute = device.stream(StreamRole::compute);
  struct Shape {
    const char* suffix;
    kernels::QuantShape shape;
    std::string what;
  };
  const std::int64_t kv_rows =
      std::int64_t{kAttentionBatch} * m.num_heads * std::int64_t{kAttentionCapacity};
  const Shape shapes[] = {
      {"",
       {.outer = 1, .dim = m.ffn_dim, .inner = m.hidden_size},
       fmt::format("fc1's {} x {} weights from int4, fp16 bytes / time", m.ffn_dim, m.hidden_size)},
      {"_kv",
       {.outer = kv_rows, .dim = m.head_dim(), .inner = 1},
       fmt::format("a decode cache of {} rows x {} from int4, fp16 bytes / time", kv_rows,
                   m.head_dim())}};
  for (const Shape& s : shapes) {
    const auto codes_bytes = static_cast<std::size_t>(s.shape.data_bytes());
    const double fp16_bytes = static_cast<double>(s.shape.values()) * sizeof(Half);
    {
      Buffer codes = device.allocate(Tier::gpu, codes_bytes);
      Buffer staging = device.allocate(Tier::pinned, codes_bytes);
      std::memset(staging.data(), 0x5A, codes_bytes);
      device.copy_async(codes.data(), staging.data(), codes_bytes, compute);
      Buffer params =
          filled(device, Tier::gpu, static_cast<std::size_t>(s.shape.param_count()), compute);
      Buffer values = device.allocate(Tier::gpu, static_cast<std::size_t>(fp16_bytes));
      const double seconds = best_seconds(o.repeats, [&] {
        ops.dequantize({.data = codes.as<std::uint8_t>(),
                        .params = params.as<Half>(),
                        .x = values.as<Half>(),
                        .shape = s.shape});
        compute.synchronize();
      });
      out.push_back({fmt::format("dequantize{}_device", s.suffix), gb_per_s(fp16_bytes, seconds),
                     "GB/s", s.what});
    }
    std::vector<std::uint8_t> codes(codes_bytes, 0x5A);
    std::vector<Half> params(static_cast<std::size_t>(s.shape.param_count()), float_to_half(0.01f));
    std::vector<Half> values(static_cast<std::size_t>(s.shape.values()));
    const double seconds = best_seconds(o.repeats, [&] {
      kernels::cpu::dequantize(
          {.data = codes.data(), .params = params.data(), .x = values.data(), .shape = s.shape});
    });
    out.push_back(
        {fmt::format("dequantize{}_cpu", s.suffix), gb_per_s(fp16_bytes, seconds), "GB/s", s.what});
  }
}

// Throws a ParameterError naming the disk folder: "<disk>: <what>: <errno's text>".
[[noreturn]] void disk_failure(const std::string& what) {
  fail_naming([what, reason = std::string(std::strerror(errno))](ParameterNamer name) {
    return fmt::format("{}: {}: {}", name(Parameter::disk_folder), what, reason);
  });
}

void measure_disk(const CalibrationOptions& o, std::vector<Measurement>& out) {
  namespace fs = std::filesystem;
  OFFGEN_CHECK_NAMING(fs::is_directory(o.disk), [folder = o.disk](ParameterNamer name) {
    return fmt::format("{} {}: not a directory", name(Parameter::disk_folder), folder.string());
  });
  const fs::path file = o.disk / ("offgen-calibrate-" + std::to_string(::getpid()) + ".bin");
  std::vector<char> data(o.copy_bytes, 1);
  struct Remove {
    fs::path path;
    ~Remove() {
      std::error_code ignored;
      fs::remove(path, ignored);
    }
  } remove{file};
  const double write_seconds = best_seconds(o.repeats, [&] {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) disk_failure("cannot write " + file.string());
    std::size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
      if (n <= 0) {
        ::close(fd);
        disk_failure("write to " + file.string() + " failed");
      }
      done += static_cast<std::size_t>(n);
    }
    ::fsync(fd);
    ::close(fd);
  });
  const double read_seconds = best_seconds(o.repeats, [&] {
    const int fd = ::open(file.c_str(), O_RDONLY);
    if (fd < 0) disk_failure("cannot read " + file.string());
    // Drop the file's cached pages so the read comes from the device, not the page cache.
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    std::size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::read(fd, data.data() + done, data.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
  });
  const auto bytes = static_cast<double>(o.copy_bytes);
  out.push_back({"disk_write", gb_per_s(bytes, write_seconds), "GB/s",
                 "sequential write + fsync in " + o.disk.string()});
  out.push_back({"disk_read", gb_per_s(bytes, read_seconds), "GB/s",
                 "sequential read after dropping cached pages, in " + o.disk.string()});
}

}  // namespace

CalibrationFootprint calibration_footprint(const ModelConfig& model,
                                           const CalibrationOptions& options, int multiprocessors,
                                           bool int8_weights) {
  // Each allocation rounds up to the device's 256-byte alignment.
  const auto halves = [](std::uint64_t n) {
    return (std::max<std::uint64_t>(n, 1) * 2 + 255) / 256 * 256;
  };
  const std::uint64_t copy = (options.copy_bytes + 255) / 256 * 256;
  const auto h = static_cast<std::uint64_t>(model.hidden_size);
  const auto f = static_cast<std::uint64_t>(model.ffn_dim);
  // measure_gemm: every copy of a layer's GEMM weights, and its widest rows at 512 rows.
  std::uint64_t width = 0, gemm = 0;
  for (const auto& [rows, cols] : model.layer_gemm_shapes()) {
    gemm += halves(static_cast<std::uint64_t>(rows) * static_cast<std::uint64_t>(cols));
    width = std::max<std::uint64_t>(
        {width, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols)});
  }
  gemm = gemm * layer_copies(model, options.copy_bytes) + 2 * halves(512 * width);
  // The int8 sets beside the fp16 ones (measures_int8).
  if (int8_weights) gemm += int8_layer_bytes(model) * int8_layer_copies(model, options.copy_bytes);
  // measure_prefill_attention: q, k and v, the valid flags and the output of one prompt.
  const auto seq = static_cast<std::uint64_t>(prefill_attention_tokens(model));
  const std::uint64_t prefill_attention =
      halves(seq * static_cast<std::uint64_t>(model.qkv_dim())) + (seq + 255) / 256 * 256 +
      halves(seq * static_cast<std::uint64_t>(model.num_heads * model.head_dim()));
  const std::uint64_t cache = static_cast<std::uint64_t>(kAttentionBatch) *
                              static_cast<std::uint64_t>(model.kv_heads()) * kAttentionCapacity *
                              static_cast<std::uint64_t>(model.head_dim());
  // Halves of q, k and v, and of the output (every query head).
  const std::uint64_t qkv =
      static_cast<std::uint64_t>(kAttentionBatch) * static_cast<std::uint64_t>(model.qkv_dim());
  const std::uint64_t attention_out = static_cast<std::uint64_t>(kAttentionBatch) * h;
  const kernels::DecodeSplit split = kernels::plan_decode_split(
      kAttentionBatch, model.num_heads, kAttentionCapacity, multiprocessors);
  const std::uint64_t scratch = kernels::decode_split_scratch_bytes(
      split, kAttentionBatch, model.num_heads, model.head_dim(), model.kv_heads());
  const std::uint64_t attention =
      2 * halves(cache) + halves(qkv) + halves(attention_out) + 256 + (scratch + 255) / 256 * 256;
  // measure_overlap: a 128-row GEMM and one copy's gpu side.
  const std::uint64_t overlap =
      halves(f * h) + halves(f) + halves(128 * h) + halves(128 * f) + copy;
  // measure_dequantize: fc1's codes, params and fp16 values.
  const kernels::QuantShape fc1{.outer = 1, .dim = model.ffn_dim, .inner = model.hidden_size};
  const auto codes = static_cast<std::uint64_t>(fc1.data_bytes());
  const std::uint64_t dequantize = (codes + 255) / 256 * 256 +
                                   halves(static_cast<std::uint64_t>(fc1.param_count())) +
                                   halves(f * h);
  CalibrationFootprint footprint;
  footprint.gpu = std::max({2 * copy, gemm, prefill_attention, attention, overlap, dequantize});
  // Pinned: the copies' buffers, or the one staging buffer `filled` holds while it fills each.
  footprint.pinned =
      std::max({2 * copy, halves(f * h), halves(cache),
                (codes + 255) / 256 * 256 + halves(static_cast<std::uint64_t>(fc1.param_count()))});
  footprint.host = copy;
  return footprint;
}

std::vector<Measurement> calibrate(OpenedDevice& opened, const ModelConfig& model,
                                   const CalibrationOptions& options) {
  OFFGEN_CHECK(options.copy_bytes >= 4096, "calibrate: copies of at least 4 KiB (got {} bytes)",
               options.copy_bytes);
  std::vector<Measurement> out;
  const CpuTimes before = read_cpu_times();
  measure_copies(*opened.device, options, out);
  measure_gemm(*opened.device, *opened.ops, model, options, out);
  measure_prefill_attention(*opened.device, *opened.ops, model, options, out);
  measure_overlap(*opened.device, *opened.ops, model, options, out);
  measure_attention(*opened.device, *opened.ops, model, options, out);
  if (opened.device->kind() == DeviceKind::cuda) {
    measure_host_overlap(*opened.device, model, options, out);
  }
  measure_dequantize(*opened.device, *opened.ops, model, options, out);
  if (!options.disk.empty()) measure_disk(options, out);
  // Other processes' load while measuring: recorded in the profile, and said when it is enough to
  // make the rates low (every plan and prediction made from them would inherit it).
  const double others = other_busy_cores(before, read_cpu_times());
  out.push_back({"other_processes_load", others, "cores",
                 "CPU time other processes used per second while calibrating"});
  if (others > kBusyCores) {
    spdlog::warn(
        "the machine was busy while calibrating: other processes used {:.2f} cores' worth of CPU "
        "time per second, so the measured rates are likely low and predictions from them "
        "pessimistic; run `offgen calibrate` again on a quiet machine",
        others);
  }
  return out;
}

bool measures_int8(const Device& device) {
  return device.kind() == DeviceKind::cpu;
}

bool measures_bf16(const Device& device) {
  return device.kind() == DeviceKind::cpu && kernels::cpu::cpu_features().bf16_gemm();
}

nlohmann::json profile_json(const std::string& device_name, const std::string& model_name,
                            int hidden_size, const std::vector<Measurement>& measurements) {
  nlohmann::json profile;
  profile["device"] = device_name;
  profile["model"] = model_name;
  profile["hidden_size"] = hidden_size;
  nlohmann::json& values = profile["measurements"];
  for (const Measurement& m : measurements) {
    values[m.name] = {{"value", m.value}, {"unit", m.unit}, {"detail", m.detail}};
  }
  return profile;
}

}  // namespace offgen
