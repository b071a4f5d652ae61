// A 16 × 16 transpose of fp32 (or any 32-bit) lanes in AVX-512 registers, for the GEMMs' packers.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

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

}  // namespace offgen::kernels::cpu
#endif
