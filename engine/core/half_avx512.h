// Bulk fp16 <-> fp32 conversions with AVX-512, inline: half_to_float / float_to_half (half.h) call
// them after checking the CPU once, and kernels already on an AVX-512 path call them directly, so
// a kernel converting one short row at a time neither checks the CPU nor calls out of line for
// each (the AVX-512 prefill attention kernel measured 4-5% slower calling them out of line).
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstddef>

#include "engine/core/half.h"

namespace offgen {

// AVX-512: 16 values per instruction, two at a time (the conversions are exact, or round to
// nearest even as F16C does, so every path gives the same bits). The masked forms with every lane
// set, because GCC 12's unmasked ones warn of an uninitialised source. The GEMMs convert each
// weight tile and decode attention each cache chunk through these, so their speed is the kernels'.
__attribute__((target("avx512f"))) inline void half_to_float_avx512(const Half* in, float* out,
                                                                    std::size_t n) {
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i h0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    const __m256i h1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i + 16));
    _mm512_storeu_ps(out + i, _mm512_mask_cvtph_ps(_mm512_setzero_ps(), 0xffff, h0));
    _mm512_storeu_ps(out + i + 16, _mm512_mask_cvtph_ps(_mm512_setzero_ps(), 0xffff, h1));
  }
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    _mm512_storeu_ps(out + i, _mm512_mask_cvtph_ps(_mm512_setzero_ps(), 0xffff, h));
  }
  for (; i < n; ++i) out[i] = half_to_float(in[i]);
}

__attribute__((target("avx512f"))) inline void float_to_half_avx512(const float* in, Half* out,
                                                                    std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_mask_cvtps_ph(_mm256_setzero_si256(), 0xffff, _mm512_loadu_ps(in + i),
                                           _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = float_to_half(in[i]);
}

}  // namespace offgen
#endif
