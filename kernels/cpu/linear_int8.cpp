// Linear over int8 weights (kernels/int8_matrix.h): x quantized per row into unsigned bytes
// (q + 128), packed into k-major panels of 8 rows of 4-byte words; the weights' column panels
// are read where the image keeps them, already in the layout the tile wants. An R × 48 tile
// (R <= 8 rows, a whole x panel: a decode step of a few rows pays for no more) broadcasts a row's
// word and multiplies it into three zmm of a panel's quad with vpdpbusd, int32 accumulators kept in
// registers across an activation group of k, then takes the zero point back out and adds the
// group's scaled sum to the row's fp32 sums while they are still in registers. Without
// AVX512-VNNI (or under OFFGEN_CPU_ISA) an AVX2 tile (vpmaddubsw on x's signed values) or a
// portable one computes the same values. Every path sums
// integers exactly and the groups in one order, so results are bit-identical to the reference
// and independent of the rows beside them.
#include "kernels/cpu/linear_int8.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine/core/error.h"
#include "engine/core/half.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_parts.h"
#include "kernels/cpu/linear_int8_amx.h"
#include "kernels/cpu/transpose_avx512.h"
#include "kernels/cpu/vector_math.h"

namespace offgen::kernels::cpu {
namespace {

constexpr std::int64_t kMr = 8;  // rows per x panel
static_assert(kMr == 8, "x panels are packed by pack_words_panel8");
constexpr std::int64_t kNr = Int8Shape::kPanelRows;         // columns per weight panel
constexpr std::int64_t kGroup = Int8Shape::kGroup;          // values of k per activation scale
constexpr std::int64_t kChunk = kGroup / Int8Shape::kQuad;  // words per tile call: one group

// The spec's row quantization (kernels/int8_matrix.h): scale, and q through `put(c, q)`.
template <typename Put>
float quantize_row(const Half* v, std::int64_t len, Put put) {
  float amax = 0.0f;
  for (std::int64_t c = 0; c < len; ++c) amax = std::max(amax, std::fabs(half_to_float(v[c])));
  if (amax == 0.0f) {
    for (std::int64_t c = 0; c < len; ++c) put(c, 0);
    return 0.0f;
  }
  const float inv = 127.0f / amax;
  for (std::int64_t c = 0; c < len; ++c) {
    const float q = std::nearbyint(half_to_float(v[c]) * inv);
    put(c, static_cast<int>(std::clamp(q, -127.0f, 127.0f)));
  }
  return amax / 127.0f;
}

// One activation group: len (<= kGroup) values of x as q + 128 bytes; returns its scale.
float x_group_portable(const Half* x, std::int64_t len, std::uint8_t* out) {
  return quantize_row(x, len,
                      [&](std::int64_t c, int q) { out[c] = static_cast<std::uint8_t>(q + 128); });
}

// One activation group of k for the rows i < R of an x panel: acc = Σ_t Σ_b xbyte(i, t, b) ·
// wbyte(j, t, b) over the group's len words, then s[i·48 + j] += float(acc - 128 · wsum[j]) ·
// sx[i · ng] (the zero point taken back out, the group's scale applied: kernels/int8_matrix.h).
template <int R>
void tile_portable(const std::uint32_t* x, const std::uint32_t* panel, std::int64_t len,
                   const std::int32_t* wsum, const float* sx, std::int64_t ng, float* s) {
  std::int32_t acc[R][kNr] = {};
  for (std::int64_t t = 0; t < len; ++t) {
    const auto* w = reinterpret_cast<const std::int8_t*>(panel + t * kNr);
    for (int i = 0; i < R; ++i) {
      const auto* a = reinterpret_cast<const std::uint8_t*>(x + t * kMr + i);
      for (std::int64_t j = 0; j < kNr; ++j) {
        acc[i][j] +=
            a[0] * w[4 * j] + a[1] * w[4 * j + 1] + a[2] * w[4 * j + 2] + a[3] * w[4 * j + 3];
      }
    }
  }
  for (int i = 0; i < R; ++i) {
    for (std::int64_t j = 0; j < kNr; ++j) {
      s[i * kNr + j] += static_cast<float>(acc[i][j] - 128 * wsum[j]) * sx[i * ng];
    }
  }
}

// An x panel from its 8 rows of words (rows[i·kw + t], zero-point words past m): panel[t·8 + i].
void x_panel_portable(const std::uint32_t* rows, std::int64_t kw, std::uint32_t* panel) {
  for (std::int64_t i = 0; i < kMr; ++i) {
    for (std::int64_t t = 0; t < kw; ++t) panel[t * kMr + i] = rows[i * kw + t];
  }
}

#if defined(__x86_64__)
}  // namespace

__attribute__((target("avx512f,avx512bw,avx512vl"))) float x_group_avx512(const Half* x,
                                                                          std::int64_t len,
                                                                          std::uint8_t* out) {
  __m512 v[kGroup / 16];
  __m512 vmax = _mm512_setzero_ps();
  const auto vectors = static_cast<int>(ceil_div(len, std::int64_t{16}));
  for (int b = 0; b < vectors; ++b) {
    const std::int64_t left = len - 16 * b;
    const auto mask = static_cast<__mmask16>(left >= 16 ? 0xFFFFu : (1u << left) - 1u);
    v[b] = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_maskz_loadu_epi16(mask, x + 16 * b));
    vmax = _mm512_maskz_max_ps(0xFFFF, vmax,
                               _mm512_castsi512_ps(_mm512_and_si512(
                                   _mm512_castps_si512(v[b]), _mm512_set1_epi32(0x7FFFFFFF))));
  }
  // (Plain stores and the maskz forms: GCC 12's abs / reduce / narrowing intrinsics trip
  // -Wuninitialized on their internal undefined operands.)
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, vmax);
  float amax = 0.0f;
  for (const float lane : lanes) amax = std::max(amax, lane);
  if (amax == 0.0f) {
    std::memset(out, 128, static_cast<std::size_t>(len));
    return 0.0f;
  }
  const __m512 inv = _mm512_set1_ps(127.0f / amax);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  const __m512i shift = _mm512_set1_epi32(128);
  for (int b = 0; b < vectors; ++b) {
    const std::int64_t left = len - 16 * b;
    const auto mask = static_cast<__mmask16>(left >= 16 ? 0xFFFFu : (1u << left) - 1u);
    // cvtps rounds half to even under the default MXCSR, as nearbyint does.
    __m512i q = _mm512_maskz_cvtps_epi32(0xFFFF, _mm512_mul_ps(v[b], inv));
    q = _mm512_add_epi32(_mm512_maskz_min_epi32(0xFFFF, _mm512_maskz_max_epi32(0xFFFF, q, lo), hi),
                         shift);
    _mm_mask_storeu_epi8(out + 16 * b, mask, _mm512_maskz_cvtepi32_epi8(0xFFFF, q));
  }
  return amax / 127.0f;
}

namespace {

// acc[v] += Σ over each lane's quad of a's unsigned bytes times b[v]'s signed ones (vpdpbusd), for
// a row's three vectors of columns. Written out because GCC 12 gives the intrinsic's accumulator
// a register apart from the loop's and copies it in and out around the product: the 4-row tile
// ran 24 register moves beside its 12 products (0.58 of the int8 peak). One asm statement per
// row, not per product: with twelve or more single-product statements GCC still copied some.
[[gnu::always_inline]] inline __attribute__((target("avx512f,avx512vnni"))) void dot_row(
    __m512i* acc, __m512i a, const __m512i* b) {
  // Early-clobber: acc[0] is written before b[1] and b[2] are read.
  asm("vpdpbusd %4, %3, %0\n\tvpdpbusd %5, %3, %1\n\tvpdpbusd %6, %3, %2"
      : "+&v"(acc[0]), "+&v"(acc[1]), "+&v"(acc[2])
      : "v"(a), "v"(b[0]), "v"(b[1]), "v"(b[2]));
}

// out[0..16) += float(sum) · scale.
[[gnu::always_inline]] inline __attribute__((target("avx512f"))) void add_scaled(__m512i sum,
                                                                                 float scale,
                                                                                 float* out) {
  const __m512 group = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, sum), _mm512_set1_ps(scale));
  _mm512_storeu_ps(out, _mm512_add_ps(_mm512_loadu_ps(out), group));
}

// tile_portable's group with vpdpbusd: R · 3 int32 accumulators in registers across the group,
// acc[3i + v] for row i and columns 16v..16v+15 (spelled as packs over I < 3R, since GCC keeps
// an array indexed in a loop in memory once asm touches it), the fix-up folded in while they are
// live. (maskz forms: GCC 12's plain shift and convert trip -Wuninitialized, as above.)
template <int R, std::size_t... I>
[[gnu::always_inline]] inline __attribute__((target("avx512f,avx512vnni"))) void tile_vnni_packs(
    const std::uint32_t* x, const std::uint32_t* panel, std::int64_t len, const std::int32_t* wsum,
    const float* sx, std::int64_t ng, float* s, std::index_sequence<I...>) {
  // The sums start at minus the zero point, 128 · Σ qw (integers: the same result as taking it
  // off at the end, and one subtraction fewer per accumulator).
  __m512i start[3];
  for (int v = 0; v < 3; ++v) {
    start[v] =
        _mm512_sub_epi32(_mm512_setzero_si512(),
                         _mm512_maskz_slli_epi32(0xFFFF, _mm512_loadu_si512(wsum + 16 * v), 7));
  }
  __m512i acc[3 * R];
  ((acc[I] = start[I % 3]), ...);
  for (std::int64_t t = 0; t < len; ++t) {
    const std::uint32_t* p = panel + t * kNr;
    const __m512i b[3] = {_mm512_loadu_si512(p), _mm512_loadu_si512(p + 16),
                          _mm512_loadu_si512(p + 32)};
    const std::uint32_t* a = x + t * kMr;
    ((I % 3 == 0 ? dot_row(acc + I, _mm512_set1_epi32(static_cast<int>(a[I / 3])), b) : void()),
     ...);
  }
  (add_scaled(acc[I], sx[std::int64_t{I / 3} * ng], s + std::int64_t{I / 3} * kNr + 16 * (I % 3)),
   ...);
}

template <int R>
__attribute__((target("avx512f,avx512vnni"))) void tile_vnni(
    const std::uint32_t* x, const std::uint32_t* panel, std::int64_t len, const std::int32_t* wsum,
    const float* sx, std::int64_t ng, float* s) {
  tile_vnni_packs<R>(x, panel, len, wsum, sx, ng, s, std::make_index_sequence<3 * R>());
}
// x_group_portable's steps on AVX2, the row converted by the bulk converter first (F16C where
// the CPU has it): the scalar loop, with a libm call per value to round, took a quarter of an
// int8 prefill under the AVX2 tile.
__attribute__((target("avx2"))) float x_group_avx2(const Half* x, std::int64_t len,
                                                   std::uint8_t* out) {
  alignas(32) float v[kGroup];
  half_to_float(x, v, static_cast<std::size_t>(len));
  const auto vectors = static_cast<int>(ceil_div(len, std::int64_t{8}));
  std::fill(v + len, v + 8 * vectors, 0.0f);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 vmax = _mm256_setzero_ps();
  for (int b = 0; b < vectors; ++b) {
    vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_load_ps(v + 8 * b), abs_mask));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float amax = 0.0f;
  for (const float lane : lanes) amax = std::max(amax, lane);
  if (amax == 0.0f) {
    std::memset(out, 128, static_cast<std::size_t>(len));
    return 0.0f;
  }
  const __m256 inv = _mm256_set1_ps(127.0f / amax);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  const __m256i shift = _mm256_set1_epi32(128);
  for (int b = 0; b < vectors; ++b) {
    // cvtps rounds half to even under the default MXCSR, as nearbyint does.
    __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(v + 8 * b), inv));
    q = _mm256_add_epi32(_mm256_min_epi32(_mm256_max_epi32(q, lo), hi), shift);  // 1..255
    // Eight int32 lanes to bytes: each 128-bit half packs its four into its low dword.
    const __m256i bytes = _mm256_packus_epi16(_mm256_packus_epi32(q, q), _mm256_setzero_si256());
    const std::uint64_t word =
        static_cast<std::uint32_t>(_mm256_extract_epi32(bytes, 0)) |
        std::uint64_t{static_cast<std::uint32_t>(_mm256_extract_epi32(bytes, 4))} << 32;
    std::memcpy(out + 8 * b, &word,
                static_cast<std::size_t>(std::min<std::int64_t>(8, len - 8 * b)));
  }
  return amax / 127.0f;
}

// tile_portable's group on AVX2 without VNNI, one row at a time (6 ymm accumulators of 8 columns).
// vpmaddubsw multiplies unsigned bytes by signed ones and adds pairs into int16 with saturation,
// so x goes in as its signed q (the stored q + 128 with its top bit flipped): |q| as the unsigned
// operand, w with q's sign moved onto it (vpsignb) as the signed one. Each product is q·w, a
// pair's sum at most 2 · 127 · 127 < 2^15, and vpmaddwd by ones adds pairs into int32: Σ q·w
// over the group exactly, the same integer as the zero-point path, so the same bits. (Codes are
// in [-127, 127] by the packer's clamp; vpsignb would wrap a -128.)
template <int R>
__attribute__((target("avx2"))) void tile_avx2(const std::uint32_t* x, const std::uint32_t* panel,
                                               std::int64_t len, const std::int32_t*,
                                               const float* sx, std::int64_t ng, float* s) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);
  for (int i = 0; i < R; ++i) {
    __m256i acc[6] = {};
    for (std::int64_t t = 0; t < len; ++t) {
      const __m256i q = _mm256_xor_si256(_mm256_set1_epi32(static_cast<int>(x[t * kMr + i])), flip);
      const __m256i magnitude = _mm256_abs_epi8(q);
      const std::uint32_t* p = panel + t * kNr;
      for (int v = 0; v < 6; ++v) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8 * v));
        const __m256i pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(w, q));
        acc[v] = _mm256_add_epi32(acc[v], _mm256_madd_epi16(pairs, ones));
      }
    }
    const __m256 scale = _mm256_set1_ps(sx[i * ng]);
    for (int v = 0; v < 6; ++v) {
      float* const out = s + i * kNr + 8 * v;
      const __m256 group = _mm256_mul_ps(_mm256_cvtepi32_ps(acc[v]), scale);
      _mm256_storeu_ps(out, _mm256_add_ps(_mm256_loadu_ps(out), group));
    }
  }
}

#endif

using Tile = void (*)(const std::uint32_t*, const std::uint32_t*, std::int64_t, const std::int32_t*,
                      const float*, std::int64_t, float*);
using XGroup = float (*)(const Half*, std::int64_t, std::uint8_t*);
using XPanel = void (*)(const std::uint32_t*, std::int64_t, std::uint32_t*);

constexpr std::int64_t kMaxPanels = 8;  // x panels per row block

struct Kernels {
  Tile tile[kMr + 1] = {};  // tile[r]: r rows of a panel
  XGroup x_group = x_group_portable;
  XPanel x_panel = x_panel_portable;
};

template <template <int> class Make>
constexpr Kernels table() {
  return {{nullptr, Make<1>::f, Make<2>::f, Make<3>::f, Make<4>::f, Make<5>::f, Make<6>::f,
           Make<7>::f, Make<8>::f}};
}
template <int R>
struct PortableTile {
  static constexpr Tile f = tile_portable<R>;
};
#if defined(__x86_64__)
template <int R>
struct VnniTile {
  static constexpr Tile f = tile_vnni<R>;
};
template <int R>
struct Avx2Tile {
  static constexpr Tile f = tile_avx2<R>;
};
#endif

// The best this CPU runs, capped by OFFGEN_CPU_ISA: AVX-512 with VNNI, AVX2, or the portable tile
// (the AVX-512 quantizer and panel transpose only with AVX-512).
Kernels select() {
  const IsaCap cap = cpu_isa_cap();
  Kernels k = table<PortableTile>();
  if (cap == IsaCap::portable) return k;
#if defined(__x86_64__)
  const CpuFeatures& f = cpu_features();
  if (f.avx2_fma) {
    k = table<Avx2Tile>();
    k.x_group = x_group_avx2;
  }
  if (cap != IsaCap::avx2 && f.avx512f && f.avx512bw_vl) {
    if (f.avx512_vnni) k = table<VnniTile>();
    k.x_group = x_group_avx512;
    k.x_panel = pack_words_panel8;
  }
#endif
  return k;
}

}  // namespace

void pack_int8_matrix(const Half* w, std::int64_t rows, std::int64_t cols, std::byte* blob) {
  const Int8Shape shape{rows, cols};
  auto* scales = reinterpret_cast<float*>(blob);
  auto* sums = reinterpret_cast<std::int32_t*>(blob + shape.sums_offset());
  auto* codes = reinterpret_cast<std::int8_t*>(blob + shape.codes_offset());
  const std::int64_t cp = shape.cols_padded();
  std::memset(blob, 0, shape.codes_offset());
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, shape.rows_padded(), kNr),
                    [&](const auto& range) {
                      for (std::int64_t r = range.begin(); r != range.end(); ++r) {
                        // Every code of the row is written once: zeros past the matrix.
                        for (std::int64_t c = 0; c < cp; ++c) codes[shape.code_index(r, c)] = 0;
                        if (r >= rows) continue;
                        scales[r] = quantize_row(w + r * cols, cols, [&](std::int64_t c, int q) {
                          codes[shape.code_index(r, c)] = static_cast<std::int8_t>(q);
                          sums[(c / kGroup) * shape.rows_padded() + r] += q;
                        });
                      }
                    });
  // Bytes between the parts and past the codes are zeros too: images are copied and written
  // to disk whole.
  std::memset(blob + shape.codes_offset() + shape.code_bytes(), 0,
              shape.bytes() - shape.codes_offset() - shape.code_bytes());
}

void linear_int8(const LinearArgs& args, const Epilogue& store) {
  const std::int64_t m = args.rows, n = args.out_features, k = args.in_features;
  if (m <= 0 || n <= 0) return;
  OFFGEN_CHECK(k > 0, "int8 linear: in_features must be positive (got {})", k);
  const Int8Shape shape{n, k};
  const Int8Matrix& w = *args.weight_int8;
#if defined(__x86_64__)
  if (m >= kAmxInt8MinRows && use_amx_int8()) return linear_int8_amx(args, store);
#endif
  const Kernels kernels = select();

  const std::int64_t kw = shape.cols_padded() / Int8Shape::kQuad;
  const std::int64_t ng = shape.groups();
  const std::int64_t rows_padded = shape.rows_padded();
  const std::int64_t panels = ceil_div(m, kMr);
  thread_local AlignedBuffer<std::uint32_t> x_buffer;
  thread_local std::vector<float> x_scales;
  std::uint32_t* const xp = x_buffer.get(static_cast<std::size_t>(panels * kw * kMr));
  x_scales.assign(static_cast<std::size_t>(m * ng), 0.0f);
  float* const sx = x_scales.data();  // [m][ng]
  // Tasks of (row block × column groups of 48); a row block's x panels (~1 MiB at most) stay in
  // L2 while its groups' panels stream past, one activation group of k per tile call.
  const std::int64_t groups = ceil_div(n, kNr);
  const std::int64_t gb =
      std::max<std::int64_t>(1, std::min<std::int64_t>(2, groups / task_target()));
  const std::int64_t n_blocks = ceil_div(groups, gb);
  const std::int64_t panel_bytes = kw * kMr * 4;
  // At most kMaxPanels panels per row block: their fp32 sums (1.5 KiB a panel), added to after
  // every group, stay in L1.
  std::int64_t pb = std::max<std::int64_t>(4, (std::int64_t{1} << 20) / panel_bytes);
  pb = std::min({pb, kMaxPanels,
                 std::max<std::int64_t>(4, ceil_div(panels, ceil_div(task_target(), n_blocks)))});
  pb = std::min(pb, panels);
  const std::int64_t row_blocks = ceil_div(panels, pb);
  const auto* codes = reinterpret_cast<const std::uint32_t*>(w.codes);

  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, panels), [&](const auto& r) {
      thread_local AlignedBuffer<std::uint32_t> row_buffer;
      std::uint32_t* const rows = row_buffer.get(static_cast<std::size_t>(kMr * kw));
      for (std::int64_t p = r.begin(); p != r.end(); ++p) {
        for (std::int64_t i = 0; i < kMr; ++i) {
          std::uint32_t* const row = rows + i * kw;
          auto* const bytes = reinterpret_cast<std::uint8_t*>(row);
          const std::int64_t xi = p * kMr + i;
          // x was just written by the op before, and is read from memory at 32 × 512 rows:
          // without asking two rows ahead, quantizing it took 9% of an int8 prefill.
          if (xi + 2 < m) prefetch_bytes(args.x + (xi + 2) * k, k * std::int64_t{sizeof(Half)});
          // Zero-point bytes (q = 0) past k and in the rows past m.
          std::fill(row, row + kw, 0x80808080u);
          for (std::int64_t g = 0; xi < m && g < ng; ++g) {
            const std::int64_t len = std::min(kGroup, k - g * kGroup);
            sx[xi * ng + g] =
                kernels.x_group(args.x + xi * k + g * kGroup, len, bytes + g * kGroup);
          }
        }
        kernels.x_panel(rows, kw, xp + p * kw * kMr);
      }
    });
    tbb::parallel_for(
        tbb::blocked_range<std::int64_t>(0, n_blocks * row_blocks), [&](const auto& r) {
          thread_local AlignedFloats sum_buffer;
          constexpr std::int64_t kTile = kMr * kNr;
          for (std::int64_t t = r.begin(); t != r.end(); ++t) {
            const std::int64_t g0 = (t % n_blocks) * gb;
            const std::int64_t g1 = std::min(groups, g0 + gb);
            const std::int64_t p0 = (t / n_blocks) * pb;
            const std::int64_t p1 = std::min(panels, p0 + pb);
            float* const sums = sum_buffer.get(static_cast<std::size_t>((p1 - p0) * kTile));
            for (std::int64_t g = g0; g < g1; ++g) {
              const std::int64_t j0 = g * kNr;
              const std::int64_t count = std::min<std::int64_t>(kNr, n - j0);
              const std::uint32_t* const panel = codes + g * kNr * kw;
              std::fill(sums, sums + (p1 - p0) * kTile, 0.0f);
              for (std::int64_t a = 0; a < ng; ++a) {
                const std::int64_t k0 = a * kChunk;
                const std::int64_t len = std::min<std::int64_t>(kChunk, kw - k0);
                const std::int32_t* const wsum = w.sums + a * rows_padded + j0;
                for (std::int64_t p = p0; p < p1; ++p) {
                  const std::int64_t rows = std::min<std::int64_t>(kMr, m - p * kMr);
                  // A whole panel per call: 24 int32 accumulators, a panel's quad and the
                  // broadcast row fit the 32 zmm.
                  kernels.tile[rows](xp + (p * kw + k0) * kMr, panel + k0 * kNr, len, wsum,
                                     sx + p * kMr * ng + a, ng, sums + (p - p0) * kTile);
                }
              }
              for (std::int64_t p = p0; p < p1; ++p) {
                const std::int64_t rows = std::min<std::int64_t>(kMr, m - p * kMr);
                for (std::int64_t i = 0; i < rows; ++i) {
                  store(p * kMr + i, j0, count, sums + (p - p0) * kTile + i * kNr, w.scales + j0);
                }
              }
            }
          }
        });
  });
}

}  // namespace offgen::kernels::cpu
