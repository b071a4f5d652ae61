// Internal helpers for the CPU kernels' vectorised loops (not part of the kernel contract).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

// Compiles a function three times (AVX-512, AVX2+FMA, baseline) and picks one at load time. The
// build is plain -O3 (SSE2), so compute-heavy loops written in plain C++ (attention, softmax)
// get this instead of hand-written intrinsics. Not under ThreadSanitizer / AddressSanitizer: the
// clones' ifunc resolvers run before the sanitizer runtime is up and crash the program at load.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define OFFGEN_SIMD_CLONES
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OFFGEN_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define OFFGEN_SIMD_CLONES
#endif

namespace offgen::kernels::cpu {

// Asks for `bytes` bytes from p into the caches, one request per 64-byte line: for rows a kernel
// reads next that are too short, or too interleaved with others, for the hardware prefetcher to
// find in time.
inline void prefetch_bytes(const void* p, std::int64_t bytes) {
  const auto* b = static_cast<const char*>(p);
  for (std::int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(b + i);
}

// The start of a running maximum, and the score of a masked position.
inline constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// cond ? a : b through integer masks: GCC (with the default -ftrapping-math) will not if-convert a
// float ?: inside a loop, which would leave the loop scalar.
inline float pick(bool cond, float a, float b) {
  const std::uint32_t mask = 0u - static_cast<std::uint32_t>(cond);
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(a) & mask) |
                              (std::bit_cast<std::uint32_t>(b) & ~mask));
}

// max(a, b) that vectorises (std::max is a float ?:). A NaN b is skipped; callers feed every value
// through exp afterwards, which brings the NaN back.
inline float vmax(float a, float b) {
  return pick(b > a, b, a);
}

// 16 floats as one value: GCC lowers it to one zmm, two ymm or four xmm per target clone, and
// keeps a handful of them in registers where float arrays would round-trip through memory.
using Vec = float __attribute__((vector_size(64)));

// Vec helpers pass and return Vecs by value. GCC warns that the ABI of such calls differs with and
// without AVX-512; they are always inlined into the target clone that calls them, so no call
// crosses that boundary.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

// exp(x) = 2^n · exp(r) for a float or a Vec of them, n = round(x·log2 e) (as clamped by the
// caller), r = x − n·ln 2 with ln 2 split in two so n·ln2_hi is exact (Cody–Waite): |r| <= ln2 / 2
// when n is not clamped. Returns exp(r) by its Taylor series to r^7: truncation error < |r|^8 / 8!
// = 5e-9 relative for |r| <= 0.35.
template <typename T>
[[gnu::always_inline]] inline T exp_of_remainder(T x, T n) {
  const T r = (x - n * 0.693145751953125f) - n * 1.42860682030941723e-6f;
  T p = T{} + 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p;
}

// exp() for fp32 softmax loops: plain branch-free C++ so `#pragma omp simd` loops vectorise it
// (std::exp is a libm call that never vectorises without -ffast-math).
// Accuracy: within 2 ulp of std::exp on [-87.3, 88.7]; 0 below (including -inf), +inf above,
// NaN in -> NaN out.
inline float fast_exp(float x) {
  const float t = x * 1.44269504088896341f;
  const float clamped = pick(t < -126.0f, -126.0f, pick(t > 127.0f, 127.0f, t));
  const float n = (clamped + 12582912.0f) - 12582912.0f;  // round to nearest via 1.5·2^23
  const float p = exp_of_remainder(x, n);
  const float scale = std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
  float result = p * scale;
  result = pick(x < -87.3f, 0.0f, result);  // exp(-87.3) ≈ 1.2e-38: flush; exp(-inf) = 0
  result = pick(x > 88.7f, std::numeric_limits<float>::infinity(), result);
  return pick(x != x, x, result);  // NaN stays NaN
}

// Helpers over a vector of floats V of any width (Vec, or the target's own width: GCC lowers a
// vector wider than the target's registers through memory wherever a scalar meets it).
template <typename V>
inline constexpr int kLanes = static_cast<int>(sizeof(V) / sizeof(float));
template <typename V>
using LaneMask = decltype(V{} < V{});  // int32 lanes, each 0 or -1

template <typename V>
[[gnu::always_inline]] inline V splat(float x) {
  return V{} + x;
}

// Lane l holds l: {0, 1, ..., L - 1}, a constant.
template <typename M, int... I>
constexpr M lane_indices(std::integer_sequence<int, I...>) {
  return M{I...};
}

// Whether lane l < n, per lane.
template <typename V>
[[gnu::always_inline]] inline LaneMask<V> lanes_below(int n) {
  constexpr LaneMask<V> kIndex =
      lane_indices<LaneMask<V>>(std::make_integer_sequence<int, kLanes<V>>{});
  return kIndex < n;
}

// fast_exp lane by lane, with the same steps (so the same bits where both contract alike).
template <typename V>
[[gnu::always_inline]] inline V fast_exp_lanes(V x) {
  const V t = x * 1.44269504088896341f;
  const V clamped = t < -126.0f ? splat<V>(-126.0f) : (t > 127.0f ? splat<V>(127.0f) : t);
  const V n = (clamped + 12582912.0f) - 12582912.0f;
  const V p = exp_of_remainder(x, n);
  const LaneMask<V> bits = (__builtin_convertvector(n, LaneMask<V>) + 127) << 23;
  V result = p * std::bit_cast<V>(bits);
  result = x < -87.3f ? V{} : result;
  result = x > 88.7f ? splat<V>(std::numeric_limits<float>::infinity()) : result;
  return x != x ? x : result;
}
#pragma GCC diagnostic pop

// Σ p[0, n) in one fixed order: 16 running lanes over consecutive blocks of 16, then the lanes in
// order. The order depends on n alone, not on p's address (a compiler's simd reduction may peel
// for alignment) nor on where the keys start: a left-padded sequence's probabilities are summed
// from its first real key, so they come out the same bits whatever padding its batch-mates
// impose.
inline float ordered_sum(const float* p, int n) {
  Vec lanes = {};
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    Vec v;
    std::memcpy(&v, p + j, sizeof v);
    lanes += v;
  }
  if (j < n) {
    Vec v = {};
    std::memcpy(&v, p + j, sizeof(float) * static_cast<std::size_t>(n - j));
    lanes += v;
  }
  float sum = 0.0f;
  for (int l = 0; l < 16; ++l) sum += lanes[l];
  return sum;
}

}  // namespace offgen::kernels::cpu
