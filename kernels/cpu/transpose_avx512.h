// A 16 × 16 transpose of fp32 (or any 32-bit) lanes in AVX-512 registers, and the 8-row panel
// store built on it, for the GEMMs' packers.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

namespace offgen::kernels::cpu {

// r[t] becomes column t of the 16 × 16 block whose rows were r[0..15]. (The maskz forms with
// all-ones masks: GCC 12's plain ones trip -Wmaybe-uninitialized on their undefined operand.)
__attribute__((target("avx512f"))) inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {  // pairs of rows interleaved by element
    t[2 * i] = _mm512_maskz_unpacklo_ps(0xFFFF, r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_maskz_unpackhi_ps(0xFFFF, r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // quads of rows, by pairs of elements
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xFF, a, b));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xFF, a, b));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xFF, c, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xFF, c, d));
  }
  for (int q = 0; q < 4; ++q) {  // 128-bit lanes across the four quads
    const __m512 ab0 = _mm512_maskz_shuffle_f32x4(0xFFFF, r[q], r[4 + q], 0x88);
    const __m512 ab1 = _mm512_maskz_shuffle_f32x4(0xFFFF, r[q], r[4 + q], 0xdd);
    const __m512 cd0 = _mm512_maskz_shuffle_f32x4(0xFFFF, r[8 + q], r[12 + q], 0x88);
    const __m512 cd1 = _mm512_maskz_shuffle_f32x4(0xFFFF, r[8 + q], r[12 + q], 0xdd);
    t[q] = _mm512_maskz_shuffle_f32x4(0xFFFF, ab0, cd0, 0x88);
    t[q + 8] = _mm512_maskz_shuffle_f32x4(0xFFFF, ab0, cd0, 0xdd);
    t[q + 4] = _mm512_maskz_shuffle_f32x4(0xFFFF, ab1, cd1, 0x88);
    t[q + 12] = _mm512_maskz_shuffle_f32x4(0xFFFF, ab1, cd1, 0xdd);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// The 8 × 16 block of 32-bit values in r[0..7] (r[8..15] zero) stored as columns of 8 — an
// 8-row panel's layout, out[t·8 + i] = r[i][t] for t < len — through one transpose16.
__attribute__((target("avx512f"))) inline void store_panel8(__m512 r[16], int len, void* out) {
  transpose16(r);
  auto* const columns = static_cast<double*>(out);  // a column of 8 values is 4 doubles wide
  for (int t = 0; t < len; ++t) {
    _mm256_storeu_pd(columns + 4 * t,
                     _mm512_maskz_extractf64x4_pd(0xFF, _mm512_castps_pd(r[t]), 0));
  }
}

// An 8-row panel from its rows of 32-bit words (rows[i·kw + t], i < 8): panel[t·8 + i], sixteen
// words of the 8 rows at a time (a word-by-word scatter took 3% of an int8 prefill).
__attribute__((target("avx512f"))) inline void pack_words_panel8(const std::uint32_t* rows,
                                                                 std::int64_t kw,
                                                                 std::uint32_t* panel) {
  for (std::int64_t t0 = 0; t0 < kw; t0 += 16) {
    const std::int64_t left = kw - t0;
    const int len = left < 16 ? static_cast<int>(left) : 16;
    const auto mask = static_cast<__mmask16>(len == 16 ? 0xFFFFu : (1u << len) - 1u);
    __m512 r[16];
    for (int i = 0; i < 16; ++i) {
      r[i] = i < 8 ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(mask, rows + i * kw + t0))
                   : _mm512_setzero_ps();
    }
    store_panel8(r, len, panel + t0 * 8);
  }
}

}  // namespace offgen::kernels::cpu
#endif
