#include "kernels/cpu/linear_int8_amx.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine/core/int_math.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/int8_matrix.h"

namespace offgen::kernels::cpu {

bool use_amx_int8() {
  const CpuFeatures& f = cpu_features();
  return cpu_isa_cap() == IsaCap::none && f.amx_int8 && f.avx512f && f.avx512bw_vl;
}

#if defined(__x86_64__)
namespace {

constexpr std::int64_t kPanel = Int8Shape::kPanelRows;       // columns per weight panel
constexpr std::int64_t kGroupWords = Int8Shape::kGroup / 4;  // quads per activation group
constexpr std::int64_t kGroupColumns = 2 * kPanel;           // a task's column group
constexpr std::int64_t kRowPair = 2 * amx::kRows;            // rows per pass
constexpr std::int64_t kPanelBytes = kPanel * 4;             // a B tile's row stride

// sums[r · 96 + j] += float(c[r · 32 + jj] − 128 · wsum[j]) · sx[r · ng] for the `rows` rows of
// a pass and its `blocks` (1 or 2) 16-column blocks from column j0c of the group (jj = j − j0c):
// the group's zero point taken back out and its scale applied, as tile_vnni does (same ops,
// same order: kernels/int8_matrix.h).
__attribute__((target("avx512f"))) void add_group(const std::int32_t* c, const std::int32_t* wsum,
                                                  const float* sx, std::int64_t ng,
                                                  std::int64_t rows, int blocks, float* sums) {
  __m512i zero_point[2];
  for (int v = 0; v < blocks; ++v) {
    zero_point[v] = _mm512_maskz_slli_epi32(0xFFFF, _mm512_loadu_si512(wsum + 16 * v), 7);
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const __m512 scale = _mm512_set1_ps(sx[r * ng]);
    for (int v = 0; v < blocks; ++v) {
      float* const out = sums + r * kGroupColumns + 16 * v;
      const __m512i acc = _mm512_loadu_si512(c + r * kRowPair + 16 * v);
      const __m512 group = _mm512_mul_ps(
          _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_sub_epi32(acc, zero_point[v])), scale);
      _mm512_storeu_ps(out, _mm512_add_ps(_mm512_loadu_ps(out), group));
    }
  }
}

}  // namespace

void linear_int8_amx(const LinearArgs& args, const Epilogue& store) {
  const std::int64_t m = args.rows, n = args.out_features, k = args.in_features;
  const Int8Shape shape{n, k};
  const Int8Matrix& w = *args.weight_int8;
  const std::int64_t kw = shape.cols_padded() / Int8Shape::kQuad;  // quads of k
  const std::int64_t ng = shape.groups();
  const std::int64_t rows_padded = shape.rows_padded();
  // x rows and (where k is not a whole number of tile steps) weight panels in whole 64-byte steps.
  const std::int64_t words = round_up(kw, amx::kStepWords);
  const std::int64_t blocks = ceil_div(m, amx::kRows);
  const std::int64_t pairs = ceil_div(blocks, std::int64_t{2});
  thread_local AlignedBuffer<std::uint32_t> x_buffer;
  thread_local AlignedFloats scale_buffer;
  std::uint32_t* const xa = x_buffer.get(static_cast<std::size_t>(blocks * amx::kRows * words));
  float* const sx = scale_buffer.get(static_cast<std::size_t>(blocks * amx::kRows * ng));
  const auto* codes = reinterpret_cast<const std::uint32_t*>(w.codes);
  const bool whole_steps = kw == words;  // the panels are B tiles as they lie

  const std::int64_t groups = ceil_div(n, kGroupColumns);
  const amx::GroupTasks split(groups, pairs, task_target());
  const TileConfig config = full_tiles();

  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, blocks * amx::kRows), [&](const auto& r) {
      for (std::int64_t i = r.begin(); i != r.end(); ++i) {
        std::uint32_t* const row = xa + i * words;
        auto* const bytes = reinterpret_cast<std::uint8_t*>(row);
        std::fill(row, row + words, 0x80808080u);  // q = 0 past k and in the rows past m
        for (std::int64_t g = 0; g < ng; ++g) {
          const std::int64_t len = std::min(Int8Shape::kGroup, k - g * Int8Shape::kGroup);
          sx[i * ng + g] = i < m ? x_group_avx512(args.x + i * k + g * Int8Shape::kGroup, len,
                                                  bytes + g * Int8Shape::kGroup)
                                 : 0.0f;
        }
      }
    });
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, split.count(groups)), [&](const auto& r) {
      thread_local AlignedBuffer<std::uint32_t> panel_buffer;
      thread_local AlignedBuffer<std::int32_t> c_buffer;
      thread_local AlignedFloats sum_buffer;
      std::int32_t* const c = c_buffer.get(static_cast<std::size_t>(kRowPair * kRowPair));
      float* const sums = sum_buffer.get(static_cast<std::size_t>(kRowPair * kGroupColumns));
      std::uint32_t* const padded =
          whole_steps ? nullptr : panel_buffer.get(static_cast<std::size_t>(2 * words * kPanel));
      amx::load_tiles(config);
      for (std::int64_t t = r.begin(); t != r.end(); ++t) {
        const auto [g, p0, p1] = split.task(t);
        const std::int64_t j0 = g * kGroupColumns;
        const std::int64_t count = std::min(kGroupColumns, n - j0);
        const std::int64_t column_blocks = ceil_div(count, std::int64_t{16});
        const std::int64_t group_panels = ceil_div(count, kPanel);
        // The group's panels, panel q at base(q), rows of 48 words: the image's, or a copy with
        // zero quads up to whole tile steps.
        const std::uint32_t* panel0 = codes + j0 * kw;
        std::int64_t panel_words = kPanel * kw;
        if (!whole_steps) {
          if (t == r.begin() || p0 == 0) {
            for (std::int64_t q = 0; q < group_panels; ++q) {
              std::uint32_t* const copy = padded + q * words * kPanel;
              std::memcpy(copy, panel0 + q * kPanel * kw,
                          static_cast<std::size_t>(kw * kPanelBytes));
              std::fill(copy + kw * kPanel, copy + words * kPanel, 0u);
            }
          }
          panel0 = padded;
          panel_words = kPanel * words;
        }
        auto column_block = [&](std::int64_t cb) {
          return panel0 + (cb / 3) * panel_words + (cb % 3) * 16;
        };
        for (std::int64_t p = p0; p < p1; ++p) {
          const std::int64_t i0 = p * kRowPair;
          const std::int64_t rows = std::min(kRowPair, m - i0);
          const int tiles = rows > amx::kRows ? 2 : 1;
          std::fill(sums, sums + kRowPair * kGroupColumns, 0.0f);
          for (std::int64_t a = 0; a < ng; ++a) {
            const std::int64_t w0 = a * kGroupWords;  // the group's first quad
            const std::int64_t steps = ceil_div(std::min(kGroupWords, kw - w0), amx::kStepWords);
            const std::uint32_t* a_rows[2] = {xa + i0 * words + w0,
                                              xa + (i0 + amx::kRows) * words + w0};
            for (std::int64_t cb = 0; cb < column_blocks; cb += 2) {
              const int two = cb + 1 < column_blocks ? 2 : 1;
              const std::uint32_t* b_tiles[2] = {column_block(cb) + w0 * kPanel,
                                                 column_block(cb + two - 1) + w0 * kPanel};
              std::int32_t* const c_tiles[4] = {c, c + 16, c + amx::kRows * kRowPair,
                                                c + amx::kRows * kRowPair + 16};
              amx::tile_pass<std::int32_t>(tiles, two, a_rows, words * 4, b_tiles, kPanelBytes,
                                           steps, c_tiles, kRowPair * 4);
              add_group(c, w.sums + a * rows_padded + j0 + 16 * cb, sx + i0 * ng + a, ng, rows, two,
                        sums + 16 * cb);
            }
          }
          for (std::int64_t i = 0; i < rows; ++i) {
            store(i0 + i, j0, count, sums + i * kGroupColumns, w.scales + j0);
          }
        }
      }
      amx::release_tiles();
    });
  });
}
#endif

}  // namespace offgen::kernels::cpu
