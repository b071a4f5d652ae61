// Google Benchmark microbenchmarks of the CPU kernels at OPT shapes.
//   build/release/bench/micro/offgen_kernels_bench --benchmark_filter=Linear
#include <benchmark/benchmark.h>

#include <chrono>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "bench/micro/cpu_ceilings.h"
#include "engine/core/half.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_bf16.h"
#include "kernels/cpu/gated_mlp.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_amx.h"
#include "kernels/cpu/linear_int8.h"
#include "kernels/cpu/linear_int8_amx.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rotary.h"
#include "kernels/cpu/sampling.h"

namespace {

using offgen::Half;

std::vector<Half> random_halves(std::size_t n, float scale) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<Half> out(n);
  for (auto& h : out) h = offgen::float_to_half(dist(rng));
  return out;
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A kernel's rate as a share of the ceiling that bounds it (cpu_ceilings.h); 0 when unknown.
void report_share(benchmark::State& state, const char* name, double work_per_iteration,
                  double seconds, double ceiling) {
  if (ceiling <= 0 || seconds <= 0) return;
  state.counters[name] =
      work_per_iteration * static_cast<double>(state.iterations()) / seconds / ceiling;
}

// The machine's ceilings themselves (one measurement, printed as counters).
void Ceilings(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(offgen::bench::cpu_ceilings());
  const offgen::bench::CpuCeilings& c = offgen::bench::cpu_ceilings();
  state.counters["threads"] = c.threads;
  state.counters["fp32 FMA GFLOP/s"] = c.fp32_fma_flops / 1e9;
  state.counters["bf16 dot GFLOP/s"] = c.bf16_dot_flops / 1e9;
  state.counters["int8 dot GOP/s"] = c.int8_dot_ops / 1e9;
  state.counters["AMX bf16 GFLOP/s"] = c.amx_bf16_flops / 1e9;
  state.counters["AMX int8 GOP/s"] = c.amx_int8_ops / 1e9;
  state.counters["read GB/s"] = c.read_bytes / 1e9;
}
BENCHMARK(Ceilings)->Iterations(1)->Unit(benchmark::kMillisecond);

// y[m, n] = x[m, k] · W[n, k]ᵀ + b + relu over random operands, as prompt or decode rows with
// `math` (or over W packed in int8: kernels/int8_matrix.h), reported against `ceiling` (FLOP/s)
// as `share`; with weight_bytes > 0 (what one call reads of W), its share of the read bandwidth
// too.
void run_linear(benchmark::State& state, bool prompt_rows, offgen::kernels::PrefillMath math,
                double ceiling, const char* share, bool int8 = false, double weight_bytes = 0) {
  const auto m = state.range(0);
  const auto n = static_cast<int>(state.range(1));
  const auto k = static_cast<int>(state.range(2));
  const auto x = random_halves(static_cast<std::size_t>(m * k), 1.0f);
  const auto w = random_halves(static_cast<std::size_t>(n) * static_cast<std::size_t>(k), 0.05f);
  const auto b = random_halves(static_cast<std::size_t>(n), 0.1f);
  std::vector<Half> y(static_cast<std::size_t>(m * n));
  const offgen::kernels::Int8Shape shape{n, k};
  std::vector<std::uint64_t> blob(int8 ? shape.bytes() / 8 + 1 : 0);
  offgen::kernels::Int8Matrix packed;
  if (int8) {
    offgen::kernels::cpu::pack_int8_matrix(w.data(), n, k,
                                           reinterpret_cast<std::byte*>(blob.data()));
    packed = shape.view(reinterpret_cast<const std::byte*>(blob.data()));
  }
  const auto start = Clock::now();
  for (auto _ : state) {
    offgen::kernels::cpu::linear({.x = x.data(),
                                  .weight = w.data(),
                                  .bias = b.data(),
                                  .y = y.data(),
                                  .rows = m,
                                  .out_features = n,
                                  .in_features = k,
                                  .activation = offgen::kernels::Activation::relu,
                                  .prompt_rows = prompt_rows,
                                  .prefill_math = math,
                                  .weight_int8 = int8 ? &packed : nullptr});
    benchmark::DoNotOptimize(y.data());
  }
  const double seconds = seconds_since(start);
  report_share(state, share, 2.0 * static_cast<double>(m) * n * k, seconds, ceiling);
  if (weight_bytes > 0) {
    report_share(state, "of read bandwidth", weight_bytes, seconds,
                 offgen::bench::cpu_ceilings().read_bytes);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m) * n * k,
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

// Args m, n, k, and 1 for prompt rows (a prefill's order and kernel; kernels/linear_args.h) or 0
// for decode rows; exact (fp32) math.
void Linear(benchmark::State& state) {
  run_linear(state, state.range(3) != 0, offgen::kernels::PrefillMath::fp32,
             offgen::bench::cpu_ceilings().fp32_fma_flops, "of fp32 FMA peak");
}
BENCHMARK(Linear)
    ->ArgNames({"m", "n", "k", "prompt"})
    ->Args({1, 768, 768, 0})
    ->Args({8, 3072, 768, 0})
    ->Args({64, 2304, 768, 0})
    ->Args({64, 2304, 768, 1})
    ->Args({512, 3072, 768, 0})
    ->Args({512, 3072, 768, 1})
    // The four GEMMs of an opt-125m layer (qkv, out, fc1, fc2) at a decode row and a prefill's
    // 512: the cost model times a layer's GEMMs by these shapes.
    ->Args({1, 2304, 768, 0})
    ->Args({1, 3072, 768, 0})
    ->Args({1, 768, 3072, 0})
    ->Args({512, 2304, 768, 1})
    ->Args({512, 768, 768, 1})
    ->Args({512, 768, 3072, 1})
    // The MLP's two at an 8 x 512 prefill's 4096 rows: x no longer fits the caches.
    ->Args({4096, 3072, 768, 1})
    ->Args({4096, 768, 3072, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Decode rows over fp16 weights too large for the caches (the LM heads of OPT and SmolLM2,
// 77 and 57 MB): a decode step at a small batch is bound by reading W from memory, so the share
// printed is of the read bandwidth (two bytes per weight); args m, n, k.
void LinearFromMemory(benchmark::State& state) {
  run_linear(state, false, offgen::kernels::PrefillMath::fp32,
             offgen::bench::cpu_ceilings().fp32_fma_flops, "of fp32 FMA peak", false,
             2.0 * static_cast<double>(state.range(1) * state.range(2)));
}
BENCHMARK(LinearFromMemory)
    ->ArgNames({"m", "n", "k"})
    ->Args({1, 50272, 768})
    ->Args({1, 49152, 576})
    ->Args({4, 49152, 576})
    ->Args({8, 49152, 576})
    ->Args({32, 49152, 576})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The same GEMMs as a bf16 prefill's (PrefillMath::bf16: operands rounded to bf16), against the
// ceiling of the unit that runs them: AMX's tile multiply where the CPU has it (OFFGEN_CPU_ISA=
// avx512 measures the vdpbf16ps tile instead), else the bf16 dot product; args m, n, k.
void LinearBf16(benchmark::State& state) {
  if (offgen::bench::cpu_ceilings().bf16_dot_flops <= 0) {
    state.SkipWithError("this CPU has no AVX512-BF16");
    return;
  }
  const bool amx = offgen::kernels::cpu::use_amx_bf16();
  run_linear(state, true, offgen::kernels::PrefillMath::bf16,
             amx ? offgen::bench::cpu_ceilings().amx_bf16_flops
                 : offgen::bench::cpu_ceilings().bf16_dot_flops,
             amx ? "of AMX bf16 peak" : "of bf16 dot peak");
}
BENCHMARK(LinearBf16)
    ->ArgNames({"m", "n", "k"})
    ->Args({64, 2304, 768})
    ->Args({128, 3072, 768})
    ->Args({512, 2304, 768})
    ->Args({512, 768, 768})
    ->Args({512, 3072, 768})
    ->Args({512, 768, 3072})
    ->Args({4096, 3072, 768})
    ->Args({4096, 768, 3072})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The same GEMMs over int8 weights (kernels/int8_matrix.h), against the int8 dot-product
// ceiling (vpdpbusd) and, where the shape runs on AMX's tdpbusd, AMX's too; args m, n, k. The
// one-row shapes are decode steps, bound by reading the weights: their share of the read
// bandwidth is printed too (one byte per weight).
void LinearInt8(benchmark::State& state) {
  const std::int64_t m = state.range(0);
  run_linear(state, m > 1, offgen::kernels::PrefillMath::fp32,
             offgen::bench::cpu_ceilings().int8_dot_ops, "of int8 dot peak", true,
             static_cast<double>(state.range(1) * state.range(2)));
  if (m >= offgen::kernels::cpu::kAmxInt8MinRows && offgen::kernels::cpu::use_amx_int8() &&
      offgen::bench::cpu_ceilings().int8_dot_ops > 0) {
    state.counters["of AMX int8 peak"] = state.counters["of int8 dot peak"] *
                                         offgen::bench::cpu_ceilings().int8_dot_ops /
                                         offgen::bench::cpu_ceilings().amx_int8_ops;
  }
}
BENCHMARK(LinearInt8)
    ->ArgNames({"m", "n", "k"})
    ->Args({1, 2304, 768})
    ->Args({1, 3072, 768})
    ->Args({1, 768, 3072})
    ->Args({64, 2304, 768})
    ->Args({128, 3072, 768})
    ->Args({512, 2304, 768})
    ->Args({512, 768, 768})
    ->Args({512, 3072, 768})
    ->Args({512, 768, 3072})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Causal prefill attention of one batch of prompts: args batch, prompt tokens, math (0 fp32,
// 1 bf16: AMX where the CPU has it, else the AVX512-BF16 dot product; OFFGEN_CPU_ISA=avx512
// measures the dot product on an AMX CPU) with opt-125m heads. FLOP/s counts q·k and p·v over the
// causal half, as the cost model does; the share is of the ceiling of the math's unit.
void PrefillAttention(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  const int seq = static_cast<int>(state.range(1));
  const bool bf16 = state.range(2) != 0;
  const int heads = 12;
  const int head_dim = 64;
  const auto rows = static_cast<std::size_t>(batch) * seq;
  const auto qkv = random_halves(rows * 3 * heads * head_dim, 1.0f);
  const std::vector<std::uint8_t> valid(rows, 1);
  std::vector<Half> out(rows * heads * head_dim);
  offgen::kernels::PrefillAttentionArgs args;
  args.qkv = qkv.data();
  args.valid = valid.data();
  args.out = out.data();
  args.batch = batch;
  args.seq = seq;
  args.heads = heads;
  args.head_dim = head_dim;
  args.scale = 0.125f;
  args.prefill_math =
      bf16 ? offgen::kernels::PrefillMath::bf16 : offgen::kernels::PrefillMath::fp32;
  const bool on_bf16 = offgen::kernels::cpu::use_bf16_prefill_attention(args);
  const bool amx = on_bf16 && offgen::kernels::cpu::use_amx_bf16();
  const double ceiling = amx       ? offgen::bench::cpu_ceilings().amx_bf16_flops
                         : on_bf16 ? offgen::bench::cpu_ceilings().bf16_dot_flops
                                   : offgen::bench::cpu_ceilings().fp32_fma_flops;
  const auto start = Clock::now();
  for (auto _ : state) {
    offgen::kernels::cpu::prefill_attention(args);
    benchmark::DoNotOptimize(out.data());
  }
  report_share(state,
               amx       ? "of AMX bf16 peak"
               : on_bf16 ? "of bf16 dot peak"
                         : "of fp32 FMA peak",
               2.0 * batch * heads * static_cast<double>(seq) * seq * head_dim,
               seconds_since(start), ceiling);
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * batch * heads * static_cast<double>(seq) * seq * head_dim,
      benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(PrefillAttention)
    ->ArgNames({"batch", "seq", "bf16"})
    ->ArgsProduct({{1}, {128, 512}, {0, 1}})
    ->ArgsProduct({{8}, {512}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Decode attention over a full cache: args batch, cached tokens (opt-125m heads).
void DecodeAttention(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  const int cached = static_cast<int>(state.range(1));
  const int heads = 12;
  const int head_dim = 64;
  const int hidden = heads * head_dim;
  const auto qkv = random_halves(static_cast<std::size_t>(batch * 3 * hidden), 1.0f);
  const auto cache_size = static_cast<std::size_t>(batch) * heads * cached * head_dim;
  const auto k = random_halves(cache_size, 1.0f);
  const auto v = random_halves(cache_size, 1.0f);
  std::vector<std::int32_t> counts(static_cast<std::size_t>(batch), cached);
  std::vector<Half> out(static_cast<std::size_t>(batch * hidden));
  offgen::kernels::DecodeAttentionArgs args;
  args.qkv = qkv.data();
  args.k_cache = k.data();
  args.v_cache = v.data();
  args.slot_count = counts.data();
  args.out = out.data();
  args.batch = batch;
  args.heads = heads;
  args.head_dim = head_dim;
  args.capacity = cached;
  args.scale = 0.125f;
  const double ceiling = offgen::bench::cpu_ceilings().read_bytes;
  const auto start = Clock::now();
  for (auto _ : state) {
    offgen::kernels::cpu::decode_attention(args);
    benchmark::DoNotOptimize(out.data());
  }
  report_share(state, "of read bandwidth", 2.0 * static_cast<double>(cache_size) * sizeof(Half),
               seconds_since(start), ceiling);
  state.counters["KV GB/s"] = benchmark::Counter(
      2.0 * static_cast<double>(cache_size) * sizeof(Half),
      benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(DecodeAttention)
    ->Args({8, 512})
    ->Args({32, 1024})
    ->Args({32, 2048})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Token picks over OPT's 50272-entry vocabulary for 64 rows. First arg: 0 greedy (argmax
// baseline), 1 temperature 1, 2 temperature 1 + top_p 0.9, 3 temperature 0.7 + top_k 50 +
// top_p 0.95. Second arg: 1 = logits like a trained model's (a few hundred likely tokens, a long
// tail), 0 = nearly flat logits like a random-weight model's (the nucleus is most of the vocab).
void SampleRows(benchmark::State& state) {
  const int vocab = 50272;
  const int rows = 64;
  std::mt19937 rng(7);
  const bool peaked = state.range(1) != 0;
  std::normal_distribution<float> tail(0.0f, peaked ? 2.0f : 0.15f);
  std::vector<float> logits(static_cast<std::size_t>(rows) * vocab);
  for (auto& x : logits) x = tail(rng);
  for (int r = 0; r < rows && peaked; ++r) {
    for (int j = 0; j < 300; ++j) logits[static_cast<std::size_t>(r * vocab + j * 157)] += 9.0f;
  }
  std::vector<offgen::kernels::SampleParams> params(static_cast<std::size_t>(rows));
  const offgen::kernels::SampleParams kinds[] = {
      {0.0f, 0, 1.0f, 0.0f}, {1.0f, 0, 1.0f, 0.0f}, {1.0f, 0, 0.9f, 0.0f}, {0.7f, 50, 0.95f, 0.0f}};
  std::uniform_real_distribution<float> unit(0.0f, 0.999f);
  for (auto& p : params) {
    p = kinds[state.range(0)];
    p.uniform = unit(rng);
  }
  std::vector<std::uint8_t> sampleable(vocab, 1);
  for (int i = 50265; i < vocab; ++i) sampleable[static_cast<std::size_t>(i)] = 0;
  std::vector<std::int32_t> out(static_cast<std::size_t>(rows));
  for (auto _ : state) {
    offgen::kernels::cpu::sample_rows(
        {logits.data(), params.data(), sampleable.data(), out.data(), rows, vocab});
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["rows/s"] =
      benchmark::Counter(rows, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(SampleRows)
    ->ArgsProduct({{0, 1, 2, 3}, {1, 0}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// FlexGen's 4-bit groups of `shape`, packed once (a tensor of random values of magnitude
// `range`), then expanded to fp16 or packed again per iteration.
enum class QuantDirection { expand, pack };

void quantize_case(benchmark::State& state, offgen::kernels::QuantShape shape, float range,
                   QuantDirection direction) {
  const auto x = random_halves(static_cast<std::size_t>(shape.values()), range);
  std::vector<std::uint8_t> data(static_cast<std::size_t>(shape.data_bytes()));
  std::vector<Half> params(static_cast<std::size_t>(shape.param_count()));
  const offgen::kernels::QuantizeArgs pack{
      .x = x.data(), .data = data.data(), .params = params.data(), .shape = shape};
  offgen::kernels::cpu::quantize(pack);
  std::vector<Half> out(x.size());
  for (auto _ : state) {
    switch (direction) {
      case QuantDirection::expand:
        offgen::kernels::cpu::dequantize(
            {.data = data.data(), .params = params.data(), .x = out.data(), .shape = shape});
        benchmark::DoNotOptimize(out.data());
        break;
      case QuantDirection::pack:
        offgen::kernels::cpu::quantize(pack);
        benchmark::DoNotOptimize(data.data());
        break;
    }
  }
  state.counters["values/s"] = benchmark::Counter(static_cast<double>(shape.values()),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  state.counters["out GB/s"] = benchmark::Counter(
      static_cast<double>(shape.values()) * sizeof(Half),
      benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// opt-1.3b's fc1 [8192, 2048] grouped along its 8192 rows: expanded as every forward pass does per
// decoder layer, and packed as loading a model with int4 weights does.
constexpr offgen::kernels::QuantShape kFc1{.outer = 1, .dim = 8192, .inner = 2048};
// A KV cache of batch 8, 32 heads of 64, 512 slots, each row one group (attention expands it).
constexpr offgen::kernels::QuantShape kKvCache{.outer = 8 * 32 * 512, .dim = 64, .inner = 1};

void Dequantize(benchmark::State& state) {
  quantize_case(state, kFc1, 0.05f, QuantDirection::expand);
}
BENCHMARK(Dequantize)->Unit(benchmark::kMillisecond)->UseRealTime();

void DequantizeKv(benchmark::State& state) {
  quantize_case(state, kKvCache, 1.0f, QuantDirection::expand);
}
BENCHMARK(DequantizeKv)->Unit(benchmark::kMillisecond)->UseRealTime();

void Quantize(benchmark::State& state) {
  quantize_case(state, kFc1, 0.05f, QuantDirection::pack);
}
BENCHMARK(Quantize)->Unit(benchmark::kMillisecond)->UseRealTime();

// A decode step's new k (or v) row of every (sequence, head) into a packed KV cache: args batch,
// heads, head_dim (opt-1.3b: 32 heads of 64; opt-30b: 56 of 128), capacity 512.
void QuantizeKvSlots(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  const int heads = static_cast<int>(state.range(1));
  const int head_dim = static_cast<int>(state.range(2));
  const int capacity = 512;
  const offgen::kernels::QuantShape row{.outer = 1, .dim = head_dim, .inner = 1};
  const auto rows = static_cast<std::size_t>(batch) * heads * capacity;
  const auto cache = random_halves(rows * static_cast<std::size_t>(head_dim), 1.0f);
  std::vector<std::uint8_t> data(rows * static_cast<std::size_t>(row.data_bytes()));
  std::vector<Half> params(rows * static_cast<std::size_t>(row.param_count()));
  std::vector<std::int32_t> slots(static_cast<std::size_t>(batch * heads));
  for (std::size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<std::int32_t>(i % capacity);
  for (auto _ : state) {
    offgen::kernels::cpu::quantize_kv_slots({.cache = cache.data(),
                                             .write_slot = slots.data(),
                                             .data = data.data(),
                                             .params = params.data(),
                                             .batch = batch,
                                             .heads = heads,
                                             .capacity = capacity,
                                             .head_dim = head_dim});
    benchmark::DoNotOptimize(data.data());
  }
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(batch * heads),
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(QuantizeKvSlots)
    ->Args({8, 32, 64})
    ->Args({64, 32, 64})
    ->Args({8, 56, 128})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace

// The LLaMA family's element-wise ops at Llama 3 8B's shapes (hidden 4096, 32 q heads over 8 kv
// heads of 128, ffn 14336); arg: rows (a decode step's batch, a prefill chunk). GB/s counts the
// fp16 bytes each op must read and write.
constexpr int kLlamaHidden = 4096;
constexpr int kLlamaHeads = 32;
constexpr int kLlamaKvHeads = 8;
constexpr int kLlamaHeadDim = 128;
constexpr int kLlamaFfn = 14336;

benchmark::Counter bytes_per_second(double bytes) {
  return benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate,
                            benchmark::Counter::kIs1000);
}

void RmsNorm(benchmark::State& state) {
  const auto rows = state.range(0);
  const auto n = static_cast<std::size_t>(rows * kLlamaHidden);
  const auto x = random_halves(n, 2.0f);
  const auto gamma = random_halves(kLlamaHidden, 1.0f);
  std::vector<Half> y(n);
  for (auto _ : state) {
    offgen::kernels::cpu::rms_norm({.x = x.data(),
                                    .gamma = gamma.data(),
                                    .y = y.data(),
                                    .rows = rows,
                                    .dim = kLlamaHidden,
                                    .eps = 1e-5f});
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = bytes_per_second(4.0 * static_cast<double>(n));
}
BENCHMARK(RmsNorm)->Arg(1)->Arg(64)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();

void Rotary(benchmark::State& state) {
  const auto rows = state.range(0);
  const std::int64_t width = std::int64_t{kLlamaHeads + 2 * kLlamaKvHeads} * kLlamaHeadDim;
  auto qkv = random_halves(static_cast<std::size_t>(rows * width), 2.0f);
  std::vector<std::int32_t> positions(static_cast<std::size_t>(rows));
  for (std::size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<std::int32_t>(i);
  std::vector<float> inv_freq(kLlamaHeadDim / 2);
  for (std::size_t i = 0; i < inv_freq.size(); ++i) {
    inv_freq[i] = static_cast<float>(1.0 / std::pow(500000.0, 2.0 * double(i) / kLlamaHeadDim));
  }
  for (auto _ : state) {
    offgen::kernels::cpu::rotary({.qkv = qkv.data(),
                                  .positions = positions.data(),
                                  .inv_freq = inv_freq.data(),
                                  .rows = rows,
                                  .heads = kLlamaHeads,
                                  .kv_heads = kLlamaKvHeads,
                                  .head_dim = kLlamaHeadDim});
    benchmark::DoNotOptimize(qkv.data());
  }
  state.counters["GB/s"] = bytes_per_second(4.0 * static_cast<double>(rows) *
                                            (kLlamaHeads + kLlamaKvHeads) * kLlamaHeadDim);
}
BENCHMARK(Rotary)->Arg(1)->Arg(64)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();

void SiluMul(benchmark::State& state) {
  const auto rows = state.range(0);
  const auto gate_up = random_halves(static_cast<std::size_t>(rows * 2 * kLlamaFfn), 4.0f);
  std::vector<Half> out(static_cast<std::size_t>(rows * kLlamaFfn));
  for (auto _ : state) {
    offgen::kernels::cpu::silu_mul(
        {.gate_up = gate_up.data(), .out = out.data(), .rows = rows, .ffn = kLlamaFfn});
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GB/s"] = bytes_per_second(6.0 * static_cast<double>(rows) * kLlamaFfn);
}
BENCHMARK(SiluMul)->Arg(1)->Arg(64)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();

BENCHMARK_MAIN();
