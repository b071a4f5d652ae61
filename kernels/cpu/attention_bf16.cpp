#include "kernels/cpu/attention_bf16.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine/core/int_math.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/bf16_operands.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_parts.h"
#include "kernels/cpu/linear_amx.h"
#include "kernels/cpu/vector_math.h"

namespace offgen::kernels::cpu {

bool use_bf16_prefill_attention(const PrefillAttentionArgs& args) {
  const IsaCap cap = cpu_isa_cap();
  return args.prefill_math == PrefillMath::bf16 && cpu_features().bf16_gemm() &&
         (cap == IsaCap::none || cap == IsaCap::avx512);
}

#if defined(__x86_64__)
namespace {

constexpr int kTileRows = 2 * amx::kRows;  // queries per pass: two A tiles

// exp(x) for 16 lanes, x <= 0, -inf or NaN, to within 3e-6 relative: exponentials about to be
// rounded to bf16 (unit roundoff 2^-8) need no more than a degree-5 polynomial. exp(r) on |r| <=
// ln2 / 2 after Cody-Waite reduction, scaled by 2^n with vscalefps (underflow included); x is first
// raised to -88 (exp: 6e-39, which cvtne2ps2bf16 flushes to zero), and a NaN goes through max and
// stays. The masked forms with every lane set: GCC 12's unmasked ones warn of an uninitialised
// source.
__attribute__((target("avx512f"))) inline __m512 exp16(__m512 x) {
  x = _mm512_mask_max_ps(x, 0xFFFF, _mm512_set1_ps(-88.0f), x);
  const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
  const __m512 n =
      _mm512_mask_roundscale_ps(t, 0xFFFF, t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 120.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_mask_scalef_ps(p, 0xFFFF, p, n);
}

// Lanes [0, n) of 16 (n may be <= 0 or > 16).
__attribute__((target("avx512f"))) inline __mmask16 first_lanes(int n) {
  return n >= 16  ? __mmask16{0xFFFF}
         : n <= 0 ? __mmask16{0}
                  : static_cast<__mmask16>((1u << n) - 1u);
}

// 16 bf16 values as fp32 (exactly). The masked forms with every lane set, as in exp16.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) inline __m512 widen(__m256bh v) {
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(
      0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, reinterpret_cast<__m256i>(v)), 16));
}

// The largest of 16 lanes, by a tree of swaps (max is exact in any order; a NaN lane may or may
// not win, and the exponentials carry a NaN score either way). Masked forms, as in exp16. (Not
// attention.cpp's lane_max over GCC vectors: clang refuses to pass a 512-bit vector from an
// AVX-512 function to one without the target.)
__attribute__((target("avx512f"))) inline float largest_lane(__m512 v) {
  v = _mm512_mask_max_ps(v, 0xFFFF, v, _mm512_mask_shuffle_f32x4(v, 0xFFFF, v, v, 0x4E));
  v = _mm512_mask_max_ps(v, 0xFFFF, v, _mm512_mask_shuffle_f32x4(v, 0xFFFF, v, v, 0xB1));
  v = _mm512_mask_max_ps(v, 0xFFFF, v, _mm512_mask_permute_ps(v, 0xFFFF, v, 0x4E));
  v = _mm512_mask_max_ps(v, 0xFFFF, v, _mm512_mask_permute_ps(v, 0xFFFF, v, 0xB1));
  return _mm512_cvtss_f32(v);
}

// The probabilities of kSoftmaxRows score rows at once (their lane reductions and the exps'
// chains interleave, where one row alone waits on its own): for row r, p[r][j] = bf16(exp(
// scale·s[r][j] + mask[j] − the row's max)) for j < keys[r], zero up to `width`, stored as bf16
// (the pair words of p·v: an even key in a word's low half); inv[r] = 1 / the sum of those rounded
// values in one fixed order that depends on keys[r] alone (below). keys[r] = 0: a row of zeros, inv
// 0. holes: whether any mask entry is -inf (else it is not read). tops: the rows' running maxima
// of their raw scores, 16 lanes a row (RowTops), or null (then a pass finds them; with holes, or a
// scale that is not positive, it must: the tiles' maxima ignore the mask, and scale·max(s) is the
// max of scale·s only for scale > 0).
constexpr int kSoftmaxRows = 4;
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void softmax_rows(
    const float* s, std::int64_t lds, const float* mask, bool holes, float scale,
    const int (&keys)[kSoftmaxRows], int width, std::uint16_t* p, std::int64_t ldp,
    float (&inv)[kSoftmaxRows], const float* tops) {
  constexpr int R = kSoftmaxRows;
  const __m512 scales = _mm512_set1_ps(scale);
  const int most = *std::max_element(keys, keys + R);
  __m512 top[R];
  for (int r = 0; r < R; ++r) top[r] = _mm512_set1_ps(kMinusInf);
  // The rows' maxima: from the score tiles' lanes where they kept them (the max of scale·s is
  // scale · the max of s, rounding being monotonic), else by a pass over the rows.
  if (tops == nullptr) {
    for (int j = 0; j < most; j += 16) {
      const __m512 m = holes ? _mm512_loadu_ps(mask + j) : _mm512_setzero_ps();
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __mmask16 lanes = first_lanes(keys[r] - j);
        const __m512 v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, s + r * lds + j), scales, m);
        top[r] = _mm512_mask_max_ps(top[r], lanes, top[r], v);
      }
    }
  }
  // A live row's own key is real, so its max is finite (or NaN, which the exponentials carry).
  __m512 shift[R];
  for (int r = 0; r < R; ++r) {
    const float max = tops != nullptr ? largest_lane(_mm512_load_ps(tops + 16 * r)) * scale
                                      : largest_lane(top[r]);
    shift[r] = _mm512_set1_ps(keys[r] > 0 ? -max : 0.0f);
  }
  // Every row through every 32 keys up to the longest (a shorter row's extra keys store zeros):
  // two vectors' exponentials rounded by one vcvtne2ps2bf16 into 16 pair words, whose low halves
  // (the even keys) and high halves (the odd ones) are already the rounded values as fp32 once
  // shifted or masked, and go into two running sums: lane t of `even` adds key 32b + 2t, of `odd`
  // key 32b + 2t + 1.
  __m512 even[R], odd[R];
  for (int r = 0; r < R; ++r) even[r] = odd[r] = _mm512_setzero_ps();
  const __m512i high_halves = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  for (int j = 0; j < most; j += 32) {
    const __m512 m0 = holes ? _mm512_loadu_ps(mask + j) : _mm512_setzero_ps();
    const __m512 m1 = holes ? _mm512_loadu_ps(mask + j + 16) : _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __mmask16 lo = first_lanes(keys[r] - j), hi = first_lanes(keys[r] - j - 16);
      const float* const row = s + r * lds + j;
      const __m512 x0 =
          _mm512_add_ps(_mm512_fmadd_ps(_mm512_maskz_loadu_ps(lo, row), scales, shift[r]), m0);
      const __m512 x1 =
          _mm512_add_ps(_mm512_fmadd_ps(_mm512_maskz_loadu_ps(hi, row + 16), scales, shift[r]), m1);
      const __m512i words = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(
          _mm512_maskz_mov_ps(hi, exp16(x1)), _mm512_maskz_mov_ps(lo, exp16(x0))));
      _mm512_storeu_si512(p + r * ldp + j, words);
      even[r] =
          _mm512_add_ps(even[r], _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, words, 16)));
      odd[r] = _mm512_add_ps(odd[r], _mm512_castsi512_ps(_mm512_and_si512(words, high_halves)));
    }
  }
  alignas(64) float parts[R][2][16];
  for (int r = 0; r < R; ++r) {
    std::fill(p + r * ldp + round_up(most, 32), p + r * ldp + width, std::uint16_t{0});
    _mm512_store_ps(parts[r][0], even[r]);
    _mm512_store_ps(parts[r][1], odd[r]);
  }
  float sum[R] = {};
  for (int l = 0; l < 16; ++l) {  // lane after lane, even before odd
    for (int r = 0; r < R; ++r) sum[r] += parts[r][0][l] + parts[r][1][l];
  }
  for (int r = 0; r < R; ++r) inv[r] = keys[r] > 0 ? 1.0f / sum[r] : 0.0f;
}

// sums[j] += p[j] · inv for j < n (p: bf16 probabilities as softmax_rows stores them).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void add_probabilities(const std::uint16_t* p,
                                                                            int n, float inv,
                                                                            float* sums) {
  const __m512 scale = _mm512_set1_ps(inv);
  for (int j = 0; j < n; j += 16) {
    const __mmask16 lanes = first_lanes(n - j);
    const __m512 e = widen(reinterpret_cast<__m256bh>(_mm256_maskz_loadu_epi16(lanes, p + j)));
    _mm512_mask_storeu_ps(sums + j, lanes,
                          _mm512_fmadd_ps(e, scale, _mm512_maskz_loadu_ps(lanes, sums + j)));
  }
}

// Two V rows (fp16, `dim` values; null = zeros) as pair words of 16-dim blocks: for block c,
// out[c·block_stride + d] = (bf16 r0[16c + d], bf16 r1[16c + d]).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void pack_v_pair(
    const Half* r0, const Half* r1, int dim, std::int64_t block_stride, std::uint32_t* out) {
  // Interleaves the halves: word d = bf16 lane d (r0) | bf16 lane 16 + d (r1) << 16.
  alignas(64) static constexpr std::uint16_t kInterleave[32] = {
      0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i order = _mm512_load_si512(kInterleave);
  for (int d0 = 0, c = 0; d0 < dim; d0 += 16, ++c) {
    const __mmask16 mask = first_lanes(dim - d0);
    const __m512 a = r0 != nullptr
                         ? _mm512_maskz_cvtph_ps(0xFFFF, _mm256_maskz_loadu_epi16(mask, r0 + d0))
                         : _mm512_setzero_ps();
    const __m512 b = r1 != nullptr
                         ? _mm512_maskz_cvtph_ps(0xFFFF, _mm256_maskz_loadu_epi16(mask, r1 + d0))
                         : _mm512_setzero_ps();
    const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a));
    _mm512_store_si512(out + c * block_stride, _mm512_permutexvar_epi16(order, both));
  }
}

// out[d] = fp16(o[d] · inv) for d < dim.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void scale_to_half(const float* o, float inv,
                                                                        int dim, Half* out) {
  const __m512 s = _mm512_set1_ps(inv);
  for (int d0 = 0; d0 < dim; d0 += 16) {
    const __mmask16 mask = first_lanes(dim - d0);
    const __m512 v = _mm512_mask_mul_ps(s, 0xFFFF, _mm512_maskz_loadu_ps(mask, o + d0), s);
    const __m256i h =
        _mm512_mask_cvtps_ph(_mm256_setzero_si256(), 0xFFFF, v, _MM_FROUND_TO_NEAREST_INT);
    _mm256_mask_storeu_epi16(out + d0, mask, h);
  }
}

// The dot product's register tiles: scores 8 queries × 3 key blocks (a K panel), p·v 4 queries
// × 4 dim blocks (a 64-dim head), each accumulator 16 fp32 lanes.
constexpr int kScoreRows = 8;
constexpr int kScoreBlocks = 3;
constexpr int kPvRows = 4;
constexpr int kPvBlocks = 4;

// Where a score tile also keeps its rows' running maxima (the softmax then needs no pass of its
// own for them): row r's 16 lanes at tops[16r], over the keys it sees, j < seen0 + r, the tile's
// first key being key0.
struct RowTops {
  float* tops = nullptr;  // null: not kept
  int seen0 = 0;
  int key0 = 0;
};

// out[r·ldc + 16c + l] = Σ_t a[r·lda + t] ⊙ b[c·b_block + t·ldb + l] for r < R, c < C, l < 16:
// the bf16 pair words of A's rows against C blocks of 16 pair-word columns, by vdpbf16ps in
// order of t (each word of a row broadcast to the C blocks).
template <int R, int C>
__attribute__((target("avx512f,avx512bf16"))) inline void dot_tile(
    const std::uint32_t* a, std::int64_t lda, const std::uint32_t* b, std::int64_t b_block,
    std::int64_t ldb, std::int64_t words, float* out, std::int64_t ldc, RowTops tops) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  for (std::int64_t t = 0; t < words; ++t) {
    __m512bh bv[C];
    for (int c = 0; c < C; ++c) {
      bv[c] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + c * b_block + t * ldb));
    }
    for (int r = 0; r < R; ++r) {
      const auto av =
          reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(a[r * lda + t])));
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], av, bv[c]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(out + r * ldc + 16 * c, acc[r][c]);
  }
  if (tops.tops == nullptr) return;
  for (int r = 0; r < R; ++r) {
    __m512 top = _mm512_load_ps(tops.tops + 16 * r);
    for (int c = 0; c < C; ++c) {
      const __mmask16 lanes = first_lanes(tops.seen0 + r - tops.key0 - 16 * c);
      top = _mm512_mask_max_ps(top, lanes, top, acc[r][c]);
    }
    _mm512_store_ps(tops.tops + 16 * r, top);
  }
}

// dot_tile over `blocks` column blocks, R rows, up to C blocks per call.
template <int R, int C>
__attribute__((target("avx512f,avx512bf16"))) void dot_blocks(
    const std::uint32_t* a, std::int64_t lda, const std::uint32_t* b, std::int64_t b_block,
    std::int64_t ldb, std::int64_t words, std::int64_t blocks, float* out, std::int64_t ldc,
    RowTops tops = {}) {
  std::int64_t c = 0;
  const auto at = [&](std::int64_t block) {  // the tops of a call from `block` on
    RowTops t = tops;
    t.key0 += static_cast<int>(16 * block);
    return t;
  };
  for (; c + C <= blocks; c += C) {
    dot_tile<R, C>(a, lda, b + c * b_block, b_block, ldb, words, out + 16 * c, ldc, at(c));
  }
  const std::int64_t rest = blocks - c;
  const std::uint32_t* const bc = b + c * b_block;
  float* const oc = out + 16 * c;
  if constexpr (C > 3) {
    if (rest == 3) return dot_tile<R, 3>(a, lda, bc, b_block, ldb, words, oc, ldc, at(c));
  }
  if constexpr (C > 2) {
    if (rest == 2) return dot_tile<R, 2>(a, lda, bc, b_block, ldb, words, oc, ldc, at(c));
  }
  if (rest == 1) dot_tile<R, 1>(a, lda, bc, b_block, ldb, words, oc, ldc, at(c));
}

// One thread's scratch, reused across tasks.
struct Scratch {
  AlignedBuffer<Half> k_rows;           // [keys, dim] fp16, contiguous for the panel packer
  AlignedBuffer<std::uint32_t> panels;  // K: 48-key panels of padded_words pairs
  AlignedBuffer<std::uint32_t> v;       // V: [dim blocks][padded pairs of keys][16]
  AlignedBuffer<std::uint32_t> q;       // [the block's queries, whole passes][padded_words]
  AlignedBuffer<std::uint32_t> p;       // [32][padded pairs of keys]
  AlignedFloats s;                      // [32][score width]
  AlignedFloats o;                      // [32][dim blocks · 16]
  AlignedFloats mask;                   // [score width]: 0 for real keys, -inf for padding
};

}  // namespace

void prefill_block_bf16(const PrefillAttentionArgs& a, int b, int h, int q0, int q1,
                        float* key_sums) {
  const bool amx = use_amx_bf16();
  const int dim = a.head_dim;
  const int kv_heads = a.kv_head_count();
  const int kv_head = h / (a.heads / kv_heads);
  const std::int64_t hd = std::int64_t{a.heads} * dim;
  const std::int64_t kvd = std::int64_t{kv_heads} * dim;
  const std::int64_t stride = hd + 2 * kvd;
  const std::uint8_t* valid = a.valid + std::int64_t{b} * a.seq;
  const Half* tokens = a.qkv + std::int64_t{b} * a.seq * stride;
  Half* out = a.out + std::int64_t{b} * a.seq * hd + std::int64_t{h} * dim;

  int last = q1 - 1;  // last real query of the block: keys [first, last] are all it needs
  while (last >= q0 && valid[last] == 0) --last;
  int first = 0;  // first real key: keys and queries are counted from here
  while (first < q1 && valid[first] == 0) ++first;
  for (int i = q0; i < q1; ++i) {
    if (valid[i] == 0) std::fill(out + i * hd, out + i * hd + dim, Half{});
  }
  if (last < q0) return;

  const int keys = last + 1 - first;
  const std::int64_t words = ceil_div(dim, 2);
  const std::int64_t padded_words = round_up(words, amx::kStepWords);
  const std::int64_t panel_words = padded_words * kBf16PanelColumns;
  const int width = round_up(keys, kTileRows);  // score row length: whole 32-key steps
  const std::int64_t key_pairs = width / 2;     // p·v's pair rows
  const int dim_blocks = ceil_div(dim, 16);
  const std::int64_t ldo = std::int64_t{dim_blocks} * 16;

  thread_local Scratch scratch;
  Half* const k_rows = scratch.k_rows.get(static_cast<std::size_t>(std::int64_t{keys} * dim));
  const std::int64_t panel_count = ceil_div(keys, kBf16PanelColumns);
  std::uint32_t* const panels =
      scratch.panels.get(static_cast<std::size_t>(panel_count * panel_words));
  std::uint32_t* const vp = scratch.v.get(static_cast<std::size_t>(dim_blocks * key_pairs * 16));
  const int start = std::max(q0, first) - first;  // the block's queries, counted from first
  const int queries = keys - start;
  const std::int64_t q_rows = round_up(queries, kTileRows);  // whole passes; zero rows past
  std::uint32_t* const qa = scratch.q.get(static_cast<std::size_t>(q_rows * padded_words));
  std::uint32_t* const pa = scratch.p.get(static_cast<std::size_t>(kTileRows * key_pairs));
  float* const s = scratch.s.get(static_cast<std::size_t>(kTileRows) * width);
  float* const o = scratch.o.get(static_cast<std::size_t>(kTileRows * ldo));
  float* const mask = scratch.mask.get(static_cast<std::size_t>(width));

  // Keys and values from the first real token; a padding key inside (none today: padding is on
  // the left) is zeros under a -inf mask. One pass over the task's tokens: a token's q, k and v
  // sit in one row of qkv, a page or more apart (opt-125m: 4.6 KB), so each row is fetched once,
  // a few tokens ahead of its use, rather than once per operand (three passes took a sixth of
  // the kernel's time, mostly waiting on those rows).
  auto k_row = [&](int j) {
    return tokens + (first + j) * stride + hd + std::int64_t{kv_head} * dim;
  };
  auto v_row = [&](int j) -> const Half* {
    return j < keys && valid[first + j] != 0 ? k_row(j) + kvd : nullptr;
  };
  auto q_row = [&](int j) { return tokens + (first + j) * stride + std::int64_t{h} * dim; };
  constexpr int kAhead = 8;  // tokens
  const std::int64_t row_bytes = std::int64_t{dim} * static_cast<std::int64_t>(sizeof(Half));
  for (int j = 0; j < keys; ++j) {
    if (j + kAhead < keys) {
      prefetch_bytes(k_row(j + kAhead), row_bytes);
      prefetch_bytes(k_row(j + kAhead) + kvd, row_bytes);
      if (j + kAhead >= start) prefetch_bytes(q_row(j + kAhead), row_bytes);
    }
    const bool real = valid[first + j] != 0;
    Half* const row = k_rows + std::int64_t{j} * dim;
    if (real) {
      std::copy(k_row(j), k_row(j) + dim, row);
    } else {
      std::fill(row, row + dim, Half{});
    }
    mask[j] = real ? 0.0f : kMinusInf;
    if (j % 2 == 1) pack_v_pair(v_row(j - 1), v_row(j), dim, key_pairs * 16, vp + j / 2 * 16);
    if (j >= start) {
      std::uint32_t* const q = qa + (j - start) * padded_words;
      std::int64_t written = 0;
      if (real) {
        bf16_row(q_row(j), dim, q);
        written = words;
      }
      std::fill(q + written, q + padded_words, 0u);
    }
  }
  for (std::int64_t u = keys / 2; u < key_pairs; ++u) {  // an odd last key, then zero pairs
    pack_v_pair(v_row(static_cast<int>(2 * u)), v_row(static_cast<int>(2 * u + 1)), dim,
                key_pairs * 16, vp + u * 16);
  }
  std::fill(qa + queries * padded_words, qa + q_rows * padded_words, 0u);
  std::fill(mask + keys, mask + width, kMinusInf);
  const bool holes = std::any_of(mask, mask + keys, [](float m) { return m != 0.0f; });
  for (std::int64_t p = 0; p < panel_count; ++p) {
    std::uint32_t* const panel = panels + p * panel_words;
    pack_weight_panel_bf16(
        k_rows + p * kBf16PanelColumns * dim, dim,
        static_cast<int>(std::min<std::int64_t>(kBf16PanelColumns, keys - p * kBf16PanelColumns)),
        panel);
    std::fill(panel + words * kBf16PanelColumns, panel + panel_words, 0u);
  }
  // Key block c's first pair: panel c / 3, its (c % 3)-th 16 keys.
  auto key_block = [&](std::int64_t c) { return panels + (c / 3) * panel_words + (c % 3) * 16; };

  // The dot product's score rows' running maxima, per lane (RowTops), for the pass's softmax: not
  // with a mask of holes (the tiles do not apply it), nor a scale that is not positive.
  const bool tile_maxima = !amx && !holes && a.scale > 0;
  alignas(64) float tops[kTileRows][16];
  if (amx) amx::load_tiles(full_tiles());
  for (int t0 = start; t0 < keys; t0 += kTileRows) {
    const int rows = std::min(kTileRows, keys - t0);
    const int seen = t0 + rows;  // keys any query of the pass sees
    const int tiles = rows > amx::kRows ? 2 : 1;
    const std::uint32_t* const qp = qa + (t0 - start) * padded_words;  // the pass's 32 rows
    if (amx) {  // 2 × 2 tile passes over pairs of 16-key blocks
      const std::uint32_t* a_rows[2] = {qp, qp + amx::kRows * padded_words};
      const std::int64_t key_blocks = ceil_div(seen, 16);
      for (std::int64_t c = 0; c < key_blocks; c += 2) {
        const std::uint32_t* bt[2] = {key_block(c), key_block(std::min(c + 1, key_blocks - 1))};
        float* const tile_out[4] = {s + 16 * c, s + 16 * (c + 1), s + 16 * width + 16 * c,
                                    s + 16 * width + 16 * (c + 1)};
        amx::tile_pass(tiles, c + 1 < key_blocks ? 2 : 1, a_rows, padded_words * 4, bt,
                       kBf16PanelColumns * 4, padded_words / amx::kStepWords, tile_out, width * 4);
      }
    } else {  // 8 queries at a time, over the key blocks they see, a panel per tile
      std::fill(&tops[0][0], &tops[0][0] + kTileRows * 16, kMinusInf);
      for (int g = 0; g < rows; g += kScoreRows) {
        const std::int64_t blocks = ceil_div(t0 + std::min(rows, g + kScoreRows), 16);
        for (std::int64_t c = 0; c < blocks; c += kScoreBlocks) {
          dot_blocks<kScoreRows, kScoreBlocks>(
              qp + g * padded_words, padded_words, key_block(c), 16, kBf16PanelColumns, words,
              std::min<std::int64_t>(kScoreBlocks, blocks - c), s + g * width + 16 * c, width,
              tile_maxima ? RowTops{tops[g], t0 + g + 1, static_cast<int>(16 * c)} : RowTops{});
        }
      }
    }
    const int step_keys = round_up(seen, kTileRows);  // p·v runs over whole 32-key steps
    float inv[kTileRows] = {};
    auto* const p16 = reinterpret_cast<std::uint16_t*>(pa);  // key j of row r: r·2·key_pairs + j
    for (int r0 = 0; r0 < kTileRows; r0 += kSoftmaxRows) {
      int seen_by_row[kSoftmaxRows];
      for (int r = 0; r < kSoftmaxRows; ++r) {
        const bool live = r0 + r < rows && valid[first + t0 + r0 + r] != 0;
        seen_by_row[r] = live ? t0 + r0 + r + 1 : 0;
      }
      float group_inv[kSoftmaxRows];
      softmax_rows(s + std::int64_t{r0} * width, width, mask, holes, a.scale, seen_by_row,
                   step_keys, p16 + r0 * 2 * key_pairs, 2 * key_pairs, group_inv,
                   tile_maxima ? tops[r0] : nullptr);
      for (int r = 0; r < kSoftmaxRows; ++r) {
        const int i = first + t0 + r0 + r;  // the query's position
        inv[r0 + r] = group_inv[r];
        if (seen_by_row[r] > 0 && key_sums != nullptr &&
            (a.key_sum_queries == 0 || i >= a.seq - a.key_sum_queries)) {
          add_probabilities(p16 + (r0 + r) * 2 * key_pairs, seen_by_row[r], group_inv[r],
                            key_sums + first);
        }
      }
    }
    if (amx) {  // 2 × 2 tile passes over pairs of 16-dim blocks, 32 keys a step
      const std::uint32_t* p_rows[2] = {pa, pa + amx::kRows * key_pairs};
      for (int c = 0; c < dim_blocks; c += 2) {
        const std::uint32_t* bt[2] = {vp + c * key_pairs * 16,
                                      vp + std::min(c + 1, dim_blocks - 1) * key_pairs * 16};
        float* const tile_out[4] = {o + 16 * c, o + 16 * (c + 1), o + 16 * ldo + 16 * c,
                                    o + 16 * ldo + 16 * (c + 1)};
        amx::tile_pass(tiles, c + 1 < dim_blocks ? 2 : 1, p_rows, key_pairs * 4, bt, 64,
                       step_keys / kTileRows, tile_out, ldo * 4);
      }
    } else {  // 4 queries at a time, over the key pairs they see
      for (int g = 0; g < rows; g += kPvRows) {
        dot_blocks<kPvRows, kPvBlocks>(pa + g * key_pairs, key_pairs, vp, key_pairs * 16, 16,
                                       ceil_div(t0 + std::min(rows, g + kPvRows), 2), dim_blocks,
                                       o + g * ldo, ldo);
      }
    }
    for (int r = 0; r < rows; ++r) {
      const int i = first + t0 + r;
      if (valid[i] != 0) scale_to_half(o + r * ldo, inv[r], dim, out + i * hd);
    }
  }
  if (amx) amx::release_tiles();
}
#endif

}  // namespace offgen::kernels::cpu
