#include "bench/micro/cpu_ceilings.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <latch>
#include <limits>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu/cpu_features.h"

namespace offgen::bench {
namespace {

// Independent accumulators per loop: enough to cover the instruction's latency on both of a
// core's 512-bit ports (4 cycles x 2), so the loop runs at the ports' throughput.
constexpr int kChains = 12;
constexpr std::int64_t kIterations = 20'000'000;
constexpr int kTrials = 3;

// Seconds for `threads` threads to each run `work` once, started together (best of kTrials).
double timed_on_all_cores(int threads, const std::function<void(int)>& work) {
  double best = std::numeric_limits<double>::infinity();
  for (int trial = 0; trial < kTrials; ++trial) {
    std::latch ready(threads + 1);
    std::latch go(1);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        ready.count_down();
        go.wait();
        work(t);
      });
    }
    ready.arrive_and_wait();
    const auto start = std::chrono::steady_clock::now();
    go.count_down();
    for (std::thread& thread : pool) thread.join();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// Each loop's result goes here so the compiler keeps the work.
volatile float g_sink = 0;

#if defined(__x86_64__)
// The lanes' sum, through memory: GCC 12's _mm512_reduce_add_* warns of uninitialised use.
__attribute__((target("avx512f"))) float lane_sum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float sum = 0;
  for (const float lane : lanes) sum += lane;
  return sum;
}

__attribute__((target("avx512f"))) float lane_sum(__m512i v) {
  alignas(64) std::int32_t lanes[16];
  _mm512_store_si512(lanes, v);
  float sum = 0;
  for (const std::int32_t lane : lanes) sum += static_cast<float>(lane);
  return sum;
}

__attribute__((target("avx512f"))) void fp32_fma_loop() {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(0.001f * static_cast<float>(c));
  const __m512 a = _mm512_set1_ps(0.999f);
  const __m512 b = _mm512_set1_ps(0.001f);
  for (std::int64_t i = 0; i < kIterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  g_sink = lane_sum(sum);
}

__attribute__((target("avx512f,avx512bf16"))) void bf16_dot_loop() {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(0.001f * static_cast<float>(c));
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.001f), _mm512_set1_ps(0.002f));
  for (std::int64_t i = 0; i < kIterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  g_sink = lane_sum(sum);
}

__attribute__((target("avx512f,avx512vnni"))) void int8_dot_loop() {
  __m512i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(c);
  const __m512i a = _mm512_set1_epi8(1);
  const __m512i b = _mm512_set1_epi8(-1);
  for (std::int64_t i = 0; i < kIterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
  }
  __m512i sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_epi32(sum, acc[c]);
  g_sink = lane_sum(sum);
}
#endif

// Sums floats [p, p + n) (n a multiple of 64) with four chains of 512-bit adds, so loads, not
// adds, are what limits it.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) float sum_avx512(const float* p, std::size_t n) {
  __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
  for (std::size_t i = 0; i < n; i += 64) {
    a = _mm512_add_ps(a, _mm512_loadu_ps(p + i));
    b = _mm512_add_ps(b, _mm512_loadu_ps(p + i + 16));
    c = _mm512_add_ps(c, _mm512_loadu_ps(p + i + 32));
    d = _mm512_add_ps(d, _mm512_loadu_ps(p + i + 48));
  }
  return lane_sum(_mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)));
}
#endif

float sum_portable(const float* p, std::size_t n) {
  float s[8] = {};
  for (std::size_t i = 0; i < n; i += 8) {
    for (std::size_t j = 0; j < 8; ++j) s[j] += p[i + j];
  }
  float sum = 0;
  for (const float v : s) sum += v;
  return sum;
}

#if defined(__x86_64__)
// AMX: one tile multiply per instruction on 16 x 64-byte tiles — 16 x 16 fp32 (or int32) outputs
// over 32 bf16 (or 64 int8) products each. Four accumulator tiles over two A and two B tiles
// loaded once, so the loop reads no memory.
constexpr std::int64_t kAmxIterations = kIterations / 8;

// Int8 = false: tdpbf16ps over bf16 operands; true: tdpbusd over uint8 x int8 operands.
template <bool Int8>
__attribute__((target("amx-tile,amx-bf16,amx-int8"))) void amx_loop() {
  const kernels::cpu::TileConfig config = kernels::cpu::full_tiles();
  _tile_loadconfig(&config);
  alignas(64) std::uint16_t operand[16 * 32];                   // one tile: 16 rows of 64 bytes
  for (std::uint16_t& x : operand) x = Int8 ? 0x0101 : 0x3c00;  // int8 1s, or bf16 0.0078125
  alignas(64) std::int32_t out[16 * 16];
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  for (std::int64_t i = 0; i < kAmxIterations; ++i) {
    if constexpr (Int8) {
      _tile_dpbusd(0, 4, 6);
      _tile_dpbusd(1, 4, 7);
      _tile_dpbusd(2, 5, 6);
      _tile_dpbusd(3, 5, 7);
    } else {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, out, 64);
  _tile_release();
  g_sink = static_cast<float>(out[0]);
}
#endif

// Bytes/s of every thread summing its share of a buffer of 1 GiB, past any cache's size.
double read_bandwidth(int threads) {
  constexpr std::size_t kBytes = std::size_t{1} << 30;
  std::vector<float> buffer(kBytes / sizeof(float), 1.0f);
  const std::size_t share = buffer.size() / static_cast<std::size_t>(threads) / 64 * 64;
  std::vector<float> sums(static_cast<std::size_t>(threads));
  const bool avx512 = kernels::cpu::cpu_features().avx512f;
  const double seconds = timed_on_all_cores(threads, [&](int t) {
    const float* p = buffer.data() + share * static_cast<std::size_t>(t);
#if defined(__x86_64__)
    if (avx512) {
      sums[static_cast<std::size_t>(t)] = sum_avx512(p, share);
      return;
    }
#endif
    sums[static_cast<std::size_t>(t)] = sum_portable(p, share);
  });
  for (const float s : sums) g_sink = g_sink + s;
  return static_cast<double>(share * static_cast<std::size_t>(threads) * sizeof(float)) / seconds;
}

CpuCeilings measure() {
  CpuCeilings c;
  c.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const double instructions =
      static_cast<double>(kIterations) * kChains * static_cast<double>(c.threads);
#if defined(__x86_64__)
  const kernels::cpu::CpuFeatures& features = kernels::cpu::cpu_features();
  if (features.avx512f) {
    c.fp32_fma_flops =
        32 * instructions / timed_on_all_cores(c.threads, [](int) { fp32_fma_loop(); });
    if (features.avx512_bf16) {
      c.bf16_dot_flops =
          64 * instructions / timed_on_all_cores(c.threads, [](int) { bf16_dot_loop(); });
    }
    if (features.avx512_vnni) {
      c.int8_dot_ops =
          128 * instructions / timed_on_all_cores(c.threads, [](int) { int8_dot_loop(); });
    }
  }
  {
    const double tile_products = static_cast<double>(kAmxIterations) * 4 * c.threads;
    if (features.amx_bf16) {
      c.amx_bf16_flops = 2.0 * 16 * 16 * 32 * tile_products /
                         timed_on_all_cores(c.threads, [](int) { amx_loop<false>(); });
    }
    if (features.amx_int8) {
      c.amx_int8_ops = 2.0 * 16 * 16 * 64 * tile_products /
                       timed_on_all_cores(c.threads, [](int) { amx_loop<true>(); });
    }
  }
#endif
  c.read_bytes = read_bandwidth(c.threads);
  return c;
}

}  // namespace

const CpuCeilings& cpu_ceilings() {
  static const CpuCeilings ceilings = measure();
  return ceilings;
}

}  // namespace offgen::bench
