// The GEMM epilogue: a column scale (int8 weights), bias, ReLU and the fp16 store of a row
// segment of fp32 sums, each its own fp32 op (built with -ffp-contract=off: the int8 spec rounds
// the scale's product and the bias's sum separately).
//
// On AVX-512 the three are one pass over registers. Written as separate loops in the baseline
// build, the bias loop stored c in 16-byte pieces that the 64-byte loads of the conversion could
// not forward from, and the epilogue took a third of an AMX GEMM's time. Both paths round the
// same fp32 values to the nearest fp16 (even on ties), so their bits are equal.
#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu/gemm_parts.h"

namespace offgen::kernels::cpu {
namespace {

#if defined(__x86_64__)
bool has_avx512() {
  static const bool supported = __builtin_cpu_supports("avx512f") &&
                                __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vl");
  return supported;
}

// max(0, v) with v's NaN kept, as std::max(v, 0.0f) does: vmaxps returns its second operand
// when either is NaN. The masked forms with every lane set, because GCC 12's unmasked ones warn
// of an uninitialised source (as in engine/core/half.cpp).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void store_half_avx512(
    const float* c, const float* scale, const float* bias, bool relu, Half* y, std::int64_t count) {
  const __m512 zero = _mm512_setzero_ps();
  std::int64_t j = 0;
  for (; j < count; j += 16) {
    const auto left = static_cast<unsigned>(std::min<std::int64_t>(16, count - j));
    const __mmask16 lanes = static_cast<__mmask16>((1u << left) - 1u);
    __m512 v = _mm512_maskz_loadu_ps(lanes, c + j);
    if (scale != nullptr)
      v = _mm512_mask_mul_ps(v, 0xffff, v, _mm512_maskz_loadu_ps(lanes, scale + j));
    // + 0 without a bias, as the baseline path: -0 sums come out +0 on both.
    v = _mm512_mask_add_ps(v, 0xffff, v,
                           bias != nullptr ? _mm512_maskz_loadu_ps(lanes, bias + j) : zero);
    if (relu) v = _mm512_mask_max_ps(v, 0xffff, zero, v);
    const __m256i h =
        _mm512_mask_cvtps_ph(_mm256_setzero_si256(), 0xffff, v, _MM_FROUND_TO_NEAREST_INT);
    _mm256_mask_storeu_epi16(y + j, lanes, h);
  }
}
#endif

}  // namespace

void Epilogue::operator()(std::int64_t row, std::int64_t n0, std::int64_t count,
                          const float* c) const {
  (*this)(row, n0, count, c, nullptr);
}

void Epilogue::operator()(std::int64_t row, std::int64_t n0, std::int64_t count, const float* c,
                          const float* column_scale) const {
  if (out != nullptr) {
    float* const dst = out + row * n + n0;
    for (std::int64_t j = 0; j < count; ++j) {
      dst[j] = column_scale != nullptr ? c[j] * column_scale[j] : c[j];
    }
    return;
  }
  const float* b = bias != nullptr ? bias + n0 : nullptr;
  Half* const dst = y + row * n + n0;
#if defined(__x86_64__)
  if (has_avx512()) return store_half_avx512(c, column_scale, b, relu, dst, count);
#endif
  constexpr std::int64_t kChunk = 64;
  float v[kChunk];
  for (std::int64_t j0 = 0; j0 < count; j0 += kChunk) {
    const std::int64_t len = std::min(kChunk, count - j0);
    for (std::int64_t j = 0; j < len; ++j) {
      float s = c[j0 + j];
      if (column_scale != nullptr) s *= column_scale[j0 + j];
      s += b != nullptr ? b[j0 + j] : 0.0f;
      v[j] = relu ? std::max(s, 0.0f) : s;
    }
    float_to_half(v, dst + j0, static_cast<std::size_t>(len));
  }
}

}  // namespace offgen::kernels::cpu
