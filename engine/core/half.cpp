#include "engine/core/half.h"

#include "engine/core/half_avx512.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace offgen {
namespace {

#if defined(__x86_64__)
__attribute__((target("f16c,avx"))) void half_to_float_f16c(const Half* in, float* out,
                                                            std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = half_to_float(in[i]);
}

__attribute__((target("f16c,avx"))) void float_to_half_f16c(const float* in, Half* out,
                                                            std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = float_to_half(in[i]);
}

bool has_avx512() {
  static const bool supported = __builtin_cpu_supports("avx512f");
  return supported;
}

// F16C from CPUID leaf 1 directly: clang before 18 does not take "f16c" in __builtin_cpu_supports.
bool has_f16c() {
  static const bool supported = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
           (ecx & bit_F16C) != 0;
  }();
  return supported;
}
#endif

}  // namespace

void half_to_float(const Half* in, float* out, std::size_t n) {
#if defined(__x86_64__)
  if (has_avx512()) return half_to_float_avx512(in, out, n);
  if (has_f16c()) return half_to_float_f16c(in, out, n);
#endif
  for (std::size_t i = 0; i < n; ++i) out[i] = half_to_float(in[i]);
}

void float_to_half(const float* in, Half* out, std::size_t n) {
#if defined(__x86_64__)
  if (has_avx512()) return float_to_half_avx512(in, out, n);
  if (has_f16c()) return float_to_half_f16c(in, out, n);
#endif
  for (std::size_t i = 0; i < n; ++i) out[i] = float_to_half(in[i]);
}

}  // namespace offgen
