// Linear / logits: fp32 GEMM over fp16 operands, y[m, n] = Σ_k x[m, k]·W[n, k] (+ epilogue).
//
// Two summation orders, each the same whatever m is, so a row's result is bit for bit the same
// alone or among thousands: a request's tokens never depend on its batch-mates.
//
// Decode rows (and logits) take the dot-product path: TBB-parallel over an (n-block × m-block)
// task grid; x rows are converted to fp32 and zero-padded to a multiple of 16; each task converts
// NR-row groups of W right before use (they stay in L1) and runs an MR × NR micro-kernel of dot
// products vectorised over k, reduced horizontally once per tile and k chunk. It reads W in the
// checkpoint's [out, in] layout as it is, which is what a step of few rows needs. An m-block of
// at most kDirectRows rows (decode at a small batch, where a step is bound by reading W from
// memory) skips the scratch: its tiles convert W's fp16 in registers, with the same lanes and
// order, and prefetch the groups ahead, so the read stream never stops for the FMAs.
//
// Prompt rows (LinearArgs::prompt_rows, AVX-512) take the outer-product path: x is packed into
// k-major panels of 8 rows, each task transposes its 48-column groups of W into k-major panels
// (16 × 16 blocks in registers), and an 8 × 48 micro-kernel broadcasts x and multiplies whole
// panel rows, summing each output sequentially along k. It streams from L2 at 0.8 of the FMA
// peak where the dot tile manages about half (docs/architecture.md); the transpose, paid once
// per task, is what keeps it off decode steps. A prompt row's kind is its own, so choosing by it
// keeps results batch-invariant.
//
// Outputs go through the epilogue: bias, activation, one rounding to fp16 — or plain fp32 for
// logits. Micro-kernels are picked at run time (AVX-512, AVX2+FMA, portable); OFFGEN_CPU_ISA=avx2
// or =portable caps the choice so tests can cover the fallbacks on any x86 machine (both caps
// use the dot path for prompt rows too). bf16 prompt rows (PrefillMath::bf16) take AMX's tiles
// where the CPU has them (kernels/cpu/linear_amx.h), else the vdpbf16ps outer-product tile;
// OFFGEN_CPU_ISA=avx512 keeps AMX out.
#include "kernels/cpu/linear.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine/core/error.h"
#include "engine/core/int_math.h"
#include "kernels/cpu/bf16_operands.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_parts.h"
#include "kernels/cpu/linear_amx.h"
#include "kernels/cpu/linear_int8.h"
#include "kernels/cpu/transpose_avx512.h"
#include "kernels/cpu/vector_math.h"

namespace offgen::kernels::cpu {
namespace {

// ---- micro-kernels ----------------------------------------------------------------------------

constexpr int kDotAlign = 16;    // x / W rows padded to a multiple of one zmm of floats
constexpr int kDotChunk = 1024;  // k per pass
constexpr int kMaxMr = 4;
constexpr int kDirectRows = 8;  // m-blocks of up to this many rows read W as fp16 (DotTileF16)

// c[i·ldc + j] += dot(x_i, w_j) over len (a multiple of 16) for i < MR, j < NR.
using DotTile = void (*)(const float* x, std::int64_t ldx, const float* w, std::int64_t ldw,
                         int len, float* c, std::int64_t ldc);

// The same tile reading W's fp16 rows where they lie: w points at row 0 of the group, rows
// [0, rows) are real (the others repeat row 0; their sums are discarded), and values of k at or
// past `valid` read as zero, as the converted scratch's padding does.
using DotTileF16 = void (*)(const float* x, std::int64_t ldx, const Half* w, std::int64_t ldw,
                            int rows, int len, std::int64_t valid, float* c, std::int64_t ldc);

struct DotIsa {
  int mr = 0;
  int nr = 0;
  DotTile tile[kMaxMr + 1] = {};  // tile[r] handles r rows of x (1 <= r <= mr)
  bool outer = false;             // the AVX-512 outer-product path for prompt rows
  // tile's twin over fp16 W (null where the ISA has none): used for m-blocks of at most
  // kDirectRows rows (decode at a small batch, bound by reading W), where converting each group
  // into scratch first would only stall the stream of W from memory.
  DotTileF16 tile_f16[kMaxMr + 1] = {};
};

// ---- portable ------------------------------------------------------------------------------
template <int MR>
void dot_portable(const float* x, std::int64_t ldx, const float* w, std::int64_t ldw, int len,
                  float* c, std::int64_t ldc) {
  constexpr int kNr = 4;
  constexpr int kLanes = 8;
  float acc[MR][kNr][kLanes] = {};
  for (int kk = 0; kk < len; kk += kLanes) {
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < kNr; ++j) {
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) acc[i][j][l] += x[i * ldx + kk + l] * w[j * ldw + kk + l];
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < kNr; ++j) {
      float s = 0.0f;
      for (int l = 0; l < kLanes; ++l) s += acc[i][j][l];
      c[i * ldc + j] += s;
    }
  }
}

#if defined(__x86_64__)
// ---- AVX2 + FMA: 3 x-rows × 4 W-rows = 12 ymm accumulators + 3 x + 1 w = 16 registers -------
template <int MR>
__attribute__((target("avx2,fma"))) void dot_avx2(const float* x, std::int64_t ldx, const float* w,
                                                  std::int64_t ldw, int len, float* c,
                                                  std::int64_t ldc) {
  constexpr int kNr = 4;
  __m256 acc[MR][kNr];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  for (int kk = 0; kk < len; kk += 8) {
    __m256 xv[MR];
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) xv[i] = _mm256_loadu_ps(x + i * ldx + kk);
#pragma GCC unroll 4
    for (int j = 0; j < kNr; ++j) {
      const __m256 wv = _mm256_loadu_ps(w + j * ldw + kk);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    // [a0 a1 a2 a3] -> four sums: hadd pairs, then fold the two 128-bit halves.
    const __m256 h01 = _mm256_hadd_ps(acc[i][0], acc[i][1]);
    const __m256 h23 = _mm256_hadd_ps(acc[i][2], acc[i][3]);
    const __m256 h = _mm256_hadd_ps(h01, h23);
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    _mm_storeu_ps(c + i * ldc, _mm_add_ps(_mm_loadu_ps(c + i * ldc), s));
  }
}

// ---- AVX-512: 4 x-rows × 6 W-rows = 24 zmm accumulators + 4 x + 1 w = 29 of 32 registers ----
__attribute__((target("avx512f"))) inline __m256 fold512(__m512 v) {
  // The maskz forms: GCC 12's plain extract / cast intrinsics trip -Wuninitialized on their
  // internal _mm256_undefined_pd(); an all-ones mask compiles to the same instruction.
  const __m512d d = _mm512_castps_pd(v);
  return _mm256_add_ps(_mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, d, 0)),
                       _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, d, 1)));
}

constexpr int kAvx512Nr = 6;

// c[i·ldc + j] += the sum of acc[i][j]'s lanes: six zmm fold to 256 bits each, then an 8-wide hadd
// tree (two zero slots). Every AVX-512 dot tile ends here, so their orders are one.
template <int MR>
__attribute__((target("avx512f"))) inline void add_tile_sums(const __m512 (&acc)[MR][kAvx512Nr],
                                                             float* c, std::int64_t ldc) {
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    const __m256 zero = _mm256_setzero_ps();
    const __m256 h01 = _mm256_hadd_ps(fold512(acc[i][0]), fold512(acc[i][1]));
    const __m256 h23 = _mm256_hadd_ps(fold512(acc[i][2]), fold512(acc[i][3]));
    const __m256 h45 = _mm256_hadd_ps(fold512(acc[i][4]), fold512(acc[i][5]));
    const __m256 h0123 = _mm256_hadd_ps(h01, h23);
    const __m256 h45zz = _mm256_hadd_ps(h45, zero);
    const __m256 s = _mm256_add_ps(_mm256_permute2f128_ps(h0123, h45zz, 0x20),
                                   _mm256_permute2f128_ps(h0123, h45zz, 0x31));
    alignas(32) float sums[8];
    _mm256_store_ps(sums, s);
    for (int j = 0; j < kAvx512Nr; ++j) c[i * ldc + j] += sums[j];
  }
}

template <int MR>
__attribute__((target("avx512f"))) void dot_avx512(const float* x, std::int64_t ldx, const float* w,
                                                   std::int64_t ldw, int len, float* c,
                                                   std::int64_t ldc) {
  constexpr int kNr = kAvx512Nr;
  __m512 acc[MR][kNr];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 6
    for (int j = 0; j < kNr; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int kk = 0; kk < len; kk += 16) {
    __m512 xv[MR];
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) xv[i] = _mm512_loadu_ps(x + i * ldx + kk);
#pragma GCC unroll 6
    for (int j = 0; j < kNr; ++j) {
      const __m512 wv = _mm512_loadu_ps(w + j * ldw + kk);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  add_tile_sums<MR>(acc, c, ldc);
}

// dot_avx512 with W converted in registers: the same lanes, order and fold, so the same bits.
template <int MR>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void dot_avx512_f16(
    const float* x, std::int64_t ldx, const Half* w, std::int64_t ldw, int rows, int len,
    std::int64_t valid, float* c, std::int64_t ldc) {
  constexpr int kNr = kAvx512Nr;
  const Half* row[kNr];
  for (int j = 0; j < kNr; ++j) row[j] = w + (j < rows ? j : 0) * ldw;
  __m512 acc[MR][kNr];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 6
    for (int j = 0; j < kNr; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int kk = 0; kk < len; kk += 16) {
    const std::int64_t left = valid - kk;
    const __mmask16 mask =
        left >= 16 ? __mmask16{0xFFFF}
                   : static_cast<__mmask16>(left > 0 ? (1u << static_cast<unsigned>(left)) - 1 : 0);
    __m512 xv[MR];
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) xv[i] = _mm512_loadu_ps(x + i * ldx + kk);
    if ((kk & 31) == 0) {
      // The rows two groups on, a line each per line read here: the stream from memory stays
      // ahead of the FMAs (2 groups measured best on the development VM, against 1 and 4; a
      // hint: past W's end it fetches nothing and cannot fault).
#pragma GCC unroll 6
      for (int j = 0; j < kNr; ++j) {
        _mm_prefetch(reinterpret_cast<const char*>(row[j] + 2 * kNr * ldw + kk), _MM_HINT_T0);
      }
    }
#pragma GCC unroll 6
    for (int j = 0; j < kNr; ++j) {
      const __m256i h = _mm256_maskz_loadu_epi16(mask, row[j] + kk);
      const __m512 wv = _mm512_maskz_cvtph_ps(0xFFFF, h);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  add_tile_sums<MR>(acc, c, ldc);
}

// ---- AVX-512 outer products: 8 rows × 48 columns = 24 zmm accumulators + 3 panel + 1 x -------
constexpr int kOuterMr = 8;
static_assert(kOuterMr == 8, "x panels are packed by store_panel8 / pack_words_panel8");
constexpr int kOuterNr = 48;
constexpr std::int64_t kOuterKc = 128;  // words of k per chunk: 24 KiB of panel rows, held in L1

constexpr std::int64_t kPackAhead = 256;  // values of k a panel's packer prefetches ahead

// The line at column `at` of each of the `rows` rows of W at w (row stride k), ahead of the
// packer's need: a panel's 48 rows, a row apart, are more streams than the hardware prefetcher
// follows (the fp32 packer waited on them at k = 3072).
inline void prefetch_panel_rows(const Half* w, std::int64_t k, int rows, std::int64_t at) {
  if (at >= k) return;
  for (int row = 0; row < rows; ++row) __builtin_prefetch(w + row * k + at);
}

// panel[kk·48 + j] = W[j, kk] in fp32 for the `rows` (<= 48) rows of W at w (row stride k), zero
// past them; kk < k.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void pack_weight_panel(const Half* w,
                                                                            std::int64_t k,
                                                                            int rows,
                                                                            float* panel) {
  for (std::int64_t k0 = 0; k0 < k; k0 += 16) {
    const auto len = static_cast<int>(std::min<std::int64_t>(16, k - k0));
    const auto mask = static_cast<__mmask16>((1u << len) - 1u);
    if (k0 % 32 == 0) prefetch_panel_rows(w, k, rows, k0 + kPackAhead);
    for (int b = 0; b < kOuterNr / 16; ++b) {
      __m512 r[16];
      for (int i = 0; i < 16; ++i) {
        const int row = b * 16 + i;
        r[i] = row < rows
                   ? _mm512_maskz_cvtph_ps(0xFFFF, _mm256_maskz_loadu_epi16(mask, w + row * k + k0))
                   : _mm512_setzero_ps();
      }
      transpose16(r);
      for (int t = 0; t < len; ++t) _mm512_store_ps(panel + (k0 + t) * kOuterNr + b * 16, r[t]);
    }
  }
}

// panel[t·8 + i] = x[i, t] in fp32 for the `rows` (<= 8) rows of x at x (row stride k), zero
// past them; t < k. Sixteen values of k at a time through one 16 × 16 transpose (its other eight
// rows zero), where converting each row and storing its values one by one took a twelfth of a
// 512-row GEMM's time.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void pack_row_panel(const Half* x,
                                                                         std::int64_t k, int rows,
                                                                         float* panel) {
  for (std::int64_t k0 = 0; k0 < k; k0 += 16) {
    const auto len = static_cast<int>(std::min<std::int64_t>(16, k - k0));
    const auto mask = static_cast<__mmask16>((1u << len) - 1u);
    __m512 r[16];
    for (int i = 0; i < 16; ++i) {
      r[i] = i < rows
                 ? _mm512_maskz_cvtph_ps(0xFFFF, _mm256_maskz_loadu_epi16(mask, x + i * k + k0))
                 : _mm512_setzero_ps();
    }
    store_panel8(r, len, panel + k0 * kOuterMr);
  }
}

// c[i·48 + j] += Σ_kk x[kk·8 + i] · panel[kk·48 + j] for kk < len in kk order, from zero when
// !accumulate. A sum split into k chunks this way is the same sum: the running values are stored
// and reloaded exactly.
__attribute__((target("avx512f"))) void outer_avx512(const float* x, const float* panel,
                                                     std::int64_t len, bool accumulate, float* c) {
  __m512 acc[kOuterMr][3];
#pragma GCC unroll 8
  for (int i = 0; i < kOuterMr; ++i) {
    for (int v = 0; v < 3; ++v) {
      acc[i][v] = accumulate ? _mm512_load_ps(c + i * kOuterNr + 16 * v) : _mm512_setzero_ps();
    }
  }
  for (std::int64_t kk = 0; kk < len; ++kk) {
    const float* p = panel + kk * kOuterNr;
    const __m512 b0 = _mm512_load_ps(p);
    const __m512 b1 = _mm512_load_ps(p + 16);
    const __m512 b2 = _mm512_load_ps(p + 32);
#pragma GCC unroll 8
    for (int i = 0; i < kOuterMr; ++i) {
      const __m512 a = _mm512_set1_ps(x[kk * kOuterMr + i]);
      acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
      acc[i][2] = _mm512_fmadd_ps(a, b2, acc[i][2]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kOuterMr; ++i) {
    _mm512_store_ps(c + i * kOuterNr, acc[i][0]);
    _mm512_store_ps(c + i * kOuterNr + 16, acc[i][1]);
    _mm512_store_ps(c + i * kOuterNr + 32, acc[i][2]);
  }
}

// ---- AVX512-BF16 outer products: the same tile over pairs of k -------------------------------
// A word holds two bf16 operands, k = 2t (low half) and 2t + 1 (high half): panel rows and x
// panels are indexed by the pair t, so the 8 × 48 tile takes two k per vdpbf16ps.

// Sixteen pairs (32 values of k from k0, zero past len) of one fp16 row, rounded to bf16.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) inline __m512 bf16_pairs(
    const Half* row, int len) {
  const auto lo_mask = static_cast<__mmask16>(len >= 16 ? 0xFFFFu : (1u << len) - 1u);
  const auto hi_mask = static_cast<__mmask16>(len >= 32   ? 0xFFFFu
                                              : len <= 16 ? 0u
                                                          : (1u << (len - 16)) - 1u);
  const __m512 lo = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_maskz_loadu_epi16(lo_mask, row));
  const __m512 hi = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_maskz_loadu_epi16(hi_mask, row + 16));
  // cvtne2ps2bf16 puts its second operand in the low 16 bf16: k0..k0+15, then k0+16..k0+31, so
  // word t is (k0 + 2t, k0 + 2t + 1).
  return reinterpret_cast<__m512>(_mm512_cvtne2ps_pbh(hi, lo));
}

}  // namespace

// bf16_operands.h's packers (the AMX tile reads them too).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void pack_weight_panel_bf16(
    const Half* w, std::int64_t k, int rows, std::uint32_t* panel) {
  for (std::int64_t k0 = 0; k0 < k; k0 += 32) {
    const auto len = static_cast<int>(std::min<std::int64_t>(32, k - k0));
    const int pairs = (len + 1) / 2;
    for (int b = 0; b < kOuterNr / 16; ++b) {
      __m512 r[16];
      for (int i = 0; i < 16; ++i) {
        const int row = b * 16 + i;
        r[i] = row < rows ? bf16_pairs(w + row * k + k0, len) : _mm512_setzero_ps();
      }
      transpose16(r);
      for (int t = 0; t < pairs; ++t) {
        _mm512_store_ps(reinterpret_cast<float*>(panel + (k0 / 2 + t) * kOuterNr + b * 16), r[t]);
      }
    }
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void bf16_row(const Half* x,
                                                                              std::int64_t k,
                                                                              std::uint32_t* out) {
  for (std::int64_t k0 = 0; k0 < k; k0 += 32) {
    const auto len = static_cast<int>(std::min<std::int64_t>(32, k - k0));
    const auto mask = static_cast<__mmask16>(len >= 32 ? 0xFFFFu : (1u << ((len + 1) / 2)) - 1u);
    _mm512_mask_storeu_epi32(out + k0 / 2, mask, _mm512_castps_si512(bf16_pairs(x + k0, len)));
  }
}

namespace {

// c[i·48 + j] += Σ_t (x pair t of row i) · (panel pair t of column j) for t < len in t order,
// from zero when !accumulate; as outer_avx512, a sum split into chunks is the same sum.
__attribute__((target("avx512f,avx512bf16"))) void outer_bf16(const std::uint32_t* x,
                                                              const std::uint32_t* panel,
                                                              std::int64_t len, bool accumulate,
                                                              float* c) {
  __m512 acc[kOuterMr][3];
#pragma GCC unroll 8
  for (int i = 0; i < kOuterMr; ++i) {
    for (int v = 0; v < 3; ++v) {
      acc[i][v] = accumulate ? _mm512_load_ps(c + i * kOuterNr + 16 * v) : _mm512_setzero_ps();
    }
  }
  for (std::int64_t t = 0; t < len; ++t) {
    const std::uint32_t* p = panel + t * kOuterNr;
    const auto b0 = reinterpret_cast<__m512bh>(_mm512_load_si512(p));
    const auto b1 = reinterpret_cast<__m512bh>(_mm512_load_si512(p + 16));
    const auto b2 = reinterpret_cast<__m512bh>(_mm512_load_si512(p + 32));
#pragma GCC unroll 8
    for (int i = 0; i < kOuterMr; ++i) {
      const auto a =
          reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(x[t * kOuterMr + i])));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], a, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], a, b1);
      acc[i][2] = _mm512_dpbf16_ps(acc[i][2], a, b2);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kOuterMr; ++i) {
    _mm512_store_ps(c + i * kOuterNr, acc[i][0]);
    _mm512_store_ps(c + i * kOuterNr + 16, acc[i][1]);
    _mm512_store_ps(c + i * kOuterNr + 32, acc[i][2]);
  }
}

// The two operand formats of the outer-product driver: a word of one fp32 value of k, or of a
// bf16 pair of k.
struct Fp32Words {
  using Word = float;
  static constexpr std::int64_t kPerWord = 1;
  static void row_panel(const Half* x, std::int64_t k, int rows, Word* panel) {
    pack_row_panel(x, k, rows, panel);
  }
  static void panel(const Half* w, std::int64_t k, int rows, Word* out) {
    pack_weight_panel(w, k, rows, out);
  }
  static void tile(const Word* x, const Word* panel, std::int64_t len, bool accumulate, float* c) {
    outer_avx512(x, panel, len, accumulate, c);
  }
};

struct Bf16Words {
  using Word = std::uint32_t;
  static constexpr std::int64_t kPerWord = 2;
  // panel[t·8 + i] = pair t of row i (rows < 8; zero past them).
  static void row_panel(const Half* x, std::int64_t k, int rows, Word* panel) {
    const std::int64_t kw = ceil_div(k, kPerWord);
    thread_local AlignedBuffer<Word> row_buffer;
    Word* const row_words = row_buffer.get(static_cast<std::size_t>(kOuterMr * kw));
    for (int i = 0; i < kOuterMr; ++i) {
      Word* const row = row_words + i * kw;
      if (i < rows) {
        bf16_row(x + i * k, k, row);
      } else {
        std::fill(row, row + kw, Word{});
      }
    }
    pack_words_panel8(row_words, kw, panel);
  }
  static void panel(const Half* w, std::int64_t k, int rows, Word* out) {
    pack_weight_panel_bf16(w, k, rows, out);
  }
  static void tile(const Word* x, const Word* panel, std::int64_t len, bool accumulate, float* c) {
    outer_bf16(x, panel, len, accumulate, c);
  }
};
#endif

// ---- selection -------------------------------------------------------------------------------

// Best kernels this CPU runs, capped by OFFGEN_CPU_ISA (read per call: tests flip it).
DotIsa select_kernels() {
  const IsaCap cap = cpu_isa_cap();
  const DotIsa portable = {2, 4, {nullptr, dot_portable<1>, dot_portable<2>}};
  if (cap == IsaCap::portable) return portable;
#if defined(__x86_64__)
  const CpuFeatures& features = cpu_features();
  if (features.avx512f && cap != IsaCap::avx2) {
    DotIsa isa = {4,
                  6,
                  {nullptr, dot_avx512<1>, dot_avx512<2>, dot_avx512<3>, dot_avx512<4>},
                  features.avx512bw_vl};
    if (features.avx512bw_vl) {  // the masked 16-bit loads
      isa.tile_f16[1] = dot_avx512_f16<1>;
      isa.tile_f16[2] = dot_avx512_f16<2>;
      isa.tile_f16[3] = dot_avx512_f16<3>;
      isa.tile_f16[4] = dot_avx512_f16<4>;
    }
    return isa;
  }
  if (features.avx2_fma) return {3, 4, {nullptr, dot_avx2<1>, dot_avx2<2>, dot_avx2<3>}};
#endif
  return portable;
}

// ---- driver ----------------------------------------------------------------------------------

void gemm(const Half* x, const Half* weight, std::int64_t m, std::int64_t n, std::int64_t k,
          const Epilogue& store) {
  if (m <= 0 || n <= 0) return;
  const DotIsa isa = select_kernels();
  const std::int64_t kp = round_up(std::max<std::int64_t>(k, 1), kDotAlign);
  // x in fp32, rows zero-padded to kp. Kept per calling thread (the stream's worker) so the
  // hot path does not allocate and fault in fresh pages on every call.
  thread_local AlignedFloats x_buffer;
  float* const xf = x_buffer.get(static_cast<std::size_t>(m * kp));
  // k chunks: the order of a sum depends only on k, never on m.
  const std::int64_t chunk = round_up(ceil_div(kp, ceil_div(kp, kDotChunk)), kDotAlign);
  // Row blocks of <= ~512 KiB of x, so a block stays in L2 while a task's W groups pass over it
  // (one block for decode and short prompts); each block re-converts its W rows, 1/mb extra work.
  const std::int64_t mb =
      std::min(m, std::max<std::int64_t>(isa.mr, (512 << 10) / (kp * 4) / isa.mr * isa.mr));
  const std::int64_t m_blocks = ceil_div(m, mb);
  // Blocks of W rows per task; fewer when the tasks must outnumber the workers.
  std::int64_t nb = 16 * isa.nr;
  while (nb > isa.nr && ceil_div(n, nb) * m_blocks < task_target()) nb -= isa.nr;
  const std::int64_t n_blocks = ceil_div(n, nb);

  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, m, 64), [&](const auto& r) {
      for (std::int64_t i = r.begin(); i != r.end(); ++i) {
        half_to_float(x + i * k, xf + i * kp, static_cast<std::size_t>(k));
        std::fill(xf + i * kp + k, xf + (i + 1) * kp, 0.0f);
      }
    });
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, n_blocks * m_blocks), [&](const auto& r) {
      thread_local AlignedFloats w_buffer;
      thread_local AlignedFloats c_buffer;
      float* const wf = w_buffer.get(static_cast<std::size_t>(isa.nr * kp));
      for (std::int64_t t = r.begin(); t != r.end(); ++t) {
        const std::int64_t n0 = (t / m_blocks) * nb;
        const std::int64_t ncount = std::min(nb, n - n0);
        const std::int64_t nbp = round_up(ncount, isa.nr);
        const std::int64_t m0 = (t % m_blocks) * mb;
        const std::int64_t mcount = std::min(mb, m - m0);
        float* const c = c_buffer.get(static_cast<std::size_t>(mcount * nbp));
        std::fill(c, c + mcount * nbp, 0.0f);
        // A short m-block reads W's fp16 in its tiles; a taller one converts each group once
        // into L1-sized scratch (zero rows past n) right before its tiles use it.
        const bool direct = mcount <= kDirectRows && isa.tile_f16[1] != nullptr;
        for (std::int64_t j0 = 0; j0 < nbp; j0 += isa.nr) {
          const std::int64_t rows = std::min<std::int64_t>(isa.nr, ncount - j0);
          const Half* const w = weight + (n0 + j0) * k;
          if (!direct) {
            for (std::int64_t j = 0; j < rows; ++j) {
              half_to_float(w + j * k, wf + j * kp, static_cast<std::size_t>(k));
              std::fill(wf + j * kp + k, wf + (j + 1) * kp, 0.0f);
            }
            std::fill(wf + rows * kp, wf + isa.nr * kp, 0.0f);
          }
          for (std::int64_t k0 = 0; k0 < kp; k0 += chunk) {
            const int len = static_cast<int>(std::min(chunk, kp - k0));
            for (std::int64_t i0 = 0; i0 < mcount; i0 += isa.mr) {
              const auto mr = std::min<std::int64_t>(isa.mr, mcount - i0);
              const float* const xr = xf + (m0 + i0) * kp + k0;
              float* const cr = c + i0 * nbp + j0;
              if (direct) {
                isa.tile_f16[mr](xr, kp, w + k0, k, static_cast<int>(rows), len, k - k0, cr, nbp);
              } else {
                isa.tile[mr](xr, kp, wf + k0, kp, len, cr, nbp);
              }
            }
          }
        }
        for (std::int64_t i = 0; i < mcount; ++i) store(m0 + i, n0, ncount, c + i * nbp);
      }
    });
  });
}

#if defined(__x86_64__)
// The outer-product path (prompt rows, AVX-512): see the top of the file. Words::Word holds
// Words::kPerWord values of k (one fp32, or a bf16 pair).
template <typename Words>
void gemm_outer(const Half* x, const Half* weight, std::int64_t m, std::int64_t n, std::int64_t k,
                const Epilogue& store) {
  using Word = typename Words::Word;
  const std::int64_t kw = ceil_div(k, Words::kPerWord);  // words per row of k
  const std::int64_t panels = ceil_div(m, std::int64_t{kOuterMr});
  // x as k-major panels of 8 rows, zero past m: xp[p·kw·8 + t·8 + i] = word t of x[p·8 + i].
  thread_local AlignedBuffer<Word> x_buffer;
  Word* const xp = x_buffer.get(static_cast<std::size_t>(panels * kw * kOuterMr));
  // Tasks of (row block × column group of 48), row-block-major: consecutive tasks share a row
  // block, so a thread's run of tasks reads its x panels from memory once, and each task packs
  // its group's panel of W (up to 576 KiB at k = 3072) and passes the block's panels over it in
  // L1-sized chunks of k. Row blocks hold up to 4 MiB of x panels (at least 4 panels; fewer only
  // while the tasks are fewer than wanted), read from L2 and L3 at a few GB/s: the packing is
  // paid once per block, and at 1 MiB (a block in L2) it was a sixth of the GEMM's time at
  // k = 3072. (Group-major tasks, packing each group once, stream the whole of x once per group:
  // from memory at 32 × 512 rows: a prefill 15–20% slower.)
  const std::int64_t groups = ceil_div(n, std::int64_t{kOuterNr});
  const std::int64_t panel_bytes = kw * kOuterMr * static_cast<std::int64_t>(sizeof(Word));
  std::int64_t pb = std::max<std::int64_t>(4, (std::int64_t{4} << 20) / panel_bytes);
  pb = std::min(pb, std::max<std::int64_t>(4, ceil_div(panels, ceil_div(task_target(), groups))));
  pb = std::min(pb, panels);  // panels per row block
  const std::int64_t row_blocks = ceil_div(panels, pb);
  // Words of k per chunk: panel rows of 24 KiB, which stay in L1 (128 values of k in fp32, 256
  // in bf16 pairs).
  const std::int64_t chunk = kOuterKc;

  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, panels), [&](const auto& r) {
      for (std::int64_t p = r.begin(); p != r.end(); ++p) {
        const auto rows = static_cast<int>(std::min<std::int64_t>(kOuterMr, m - p * kOuterMr));
        if (p + 1 < panels) {  // x comes from memory at 32 × 512 rows (as in linear_int8.cpp)
          prefetch_bytes(x + (p + 1) * kOuterMr * k,
                         std::min<std::int64_t>(kOuterMr, m - (p + 1) * kOuterMr) * k *
                             std::int64_t{sizeof(Half)});
        }
        Words::row_panel(x + p * kOuterMr * k, k, rows, xp + p * kw * kOuterMr);
      }
    });
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, groups * row_blocks), [&](const auto& r) {
      thread_local AlignedBuffer<Word> w_buffer;
      thread_local AlignedFloats c_buffer;
      constexpr std::int64_t kTile = kOuterMr * kOuterNr;
      Word* const panel = w_buffer.get(static_cast<std::size_t>(kw * kOuterNr));
      for (std::int64_t t = r.begin(); t != r.end(); ++t) {
        const std::int64_t g = t % groups;
        const std::int64_t j0 = g * kOuterNr;
        const std::int64_t count = std::min<std::int64_t>(kOuterNr, n - j0);
        Words::panel(weight + j0 * k, k, static_cast<int>(count), panel);
        const std::int64_t p0 = (t / groups) * pb;
        const std::int64_t p1 = std::min(panels, p0 + pb);
        float* const c = c_buffer.get(static_cast<std::size_t>((p1 - p0) * kTile));
        // k in chunks whose panel rows stay in L1 while every row panel passes over them.
        for (std::int64_t k0 = 0; k0 < kw; k0 += chunk) {
          const std::int64_t len = std::min<std::int64_t>(chunk, kw - k0);
          for (std::int64_t p = p0; p < p1; ++p) {
            Words::tile(xp + (p * kw + k0) * kOuterMr, panel + k0 * kOuterNr, len, k0 > 0,
                        c + (p - p0) * kTile);
          }
        }
        for (std::int64_t p = p0; p < p1; ++p) {
          const std::int64_t rows = std::min<std::int64_t>(kOuterMr, m - p * kOuterMr);
          for (std::int64_t i = 0; i < rows; ++i) {
            store(p * kOuterMr + i, j0, count, c + (p - p0) * kTile + i * kOuterNr);
          }
        }
      }
    });
  });
}
#endif

}  // namespace

void linear(const LinearArgs& args) {
  std::vector<float> bias_f;
  if (args.bias != nullptr) {
    bias_f.resize(static_cast<std::size_t>(std::max(args.out_features, 0)));
    half_to_float(args.bias, bias_f.data(), bias_f.size());
  }
  Epilogue e;
  e.bias = args.bias != nullptr ? bias_f.data() : nullptr;
  e.relu = args.activation == Activation::relu;
  e.y = args.y;
  e.n = args.out_features;
  const bool any = args.rows > 0 && args.out_features > 0 && args.in_features > 0;
  if (args.weight_int8 != nullptr) {
    linear_int8(args, e);
    return;
  }
  if (args.prompt_rows && args.prefill_math == PrefillMath::bf16) {
#if defined(__x86_64__)
    OFFGEN_CHECK(cpu_features().bf16_gemm(),
                 "bf16 prefill needs a CPU with AVX512-BF16 (vdpbf16ps); this one has none");
    if (!any) return;
    if (use_amx_bf16()) {
      gemm_amx_bf16(args.x, args.weight, args.rows, args.out_features, args.in_features, e);
    } else {
      gemm_outer<Bf16Words>(args.x, args.weight, args.rows, args.out_features, args.in_features, e);
    }
    return;
#else
    fail("bf16 prefill needs an x86-64 CPU with AVX512-BF16");
#endif
  }
#if defined(__x86_64__)
  if (args.prompt_rows && any && select_kernels().outer) {
    gemm_outer<Fp32Words>(args.x, args.weight, args.rows, args.out_features, args.in_features, e);
    return;
  }
#endif
  gemm(args.x, args.weight, args.rows, args.out_features, args.in_features, e);
}

void logits(const LogitsArgs& args) {
  Epilogue e;
  e.out = args.out;
  e.n = args.vocab;
  gemm(args.x, args.embed, args.rows, args.vocab, args.dim, e);
}

}  // namespace offgen::kernels::cpu
