#include "kernels/cpu/linear_amx.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine/core/int_math.h"
#include "kernels/cpu/bf16_operands.h"
#include "kernels/cpu/cpu_features.h"

namespace offgen::kernels::cpu {

bool use_amx_bf16() {
  return cpu_isa_cap() == IsaCap::none && cpu_features().amx_bf16 && cpu_features().bf16_gemm();
}

#if defined(__x86_64__)
namespace {

// A 16-row block of x against one 48-column weight panel: three C tiles (16 × 16 fp32, tiles
// 0-2), one A tile (16 rows × 16 pairs of k, tile 3) and three B tiles (16 pairs × 16 columns,
// tiles 4-6) per step of 32 values of k.
constexpr std::int64_t kBlockRows = 16;
constexpr std::int64_t kStepWords = 16;  // pairs of k per tile multiply (64 bytes of a row)
constexpr std::int64_t kPanelBytes = kBf16PanelColumns * 4;

// c[i·48 + j] = Σ_t a pair t of row i · panel pair t of column j, t < words (a multiple of 16),
// in steps of 16 pairs; a: the block's first row, rows `lda` bytes apart.
__attribute__((target("amx-tile,amx-bf16"))) void block_product(const std::uint32_t* a,
                                                                std::int64_t lda,
                                                                const std::uint32_t* panel,
                                                                std::int64_t words, float* c) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  for (std::int64_t t = 0; t < words; t += kStepWords) {
    const std::uint32_t* b = panel + t * kBf16PanelColumns;
    _tile_loadd(3, a + t, lda);
    _tile_loadd(4, b, kPanelBytes);
    _tile_loadd(5, b + 16, kPanelBytes);
    _tile_loadd(6, b + 32, kPanelBytes);
    _tile_dpbf16ps(0, 3, 4);
    _tile_dpbf16ps(1, 3, 5);
    _tile_dpbf16ps(2, 3, 6);
  }
  _tile_stored(0, c, kPanelBytes);
  _tile_stored(1, c + 16, kPanelBytes);
  _tile_stored(2, c + 32, kPanelBytes);
}

__attribute__((target("amx-tile"))) void load_tiles(const TileConfig& config) {
  _tile_loadconfig(&config);
}

__attribute__((target("amx-tile"))) void release_tiles() {
  _tile_release();
}

}  // namespace

void gemm_amx_bf16(const Half* x, const Half* weight, std::int64_t m, std::int64_t n,
                   std::int64_t k, const Epilogue& store) {
  const std::int64_t words = ceil_div(k, std::int64_t{2});
  const std::int64_t padded_words = round_up(words, kStepWords);  // zero pairs past k
  const std::int64_t blocks = ceil_div(m, kBlockRows);
  // x as bf16 pair rows, zero past k and past m: one A tile is 16 consecutive rows.
  thread_local AlignedBuffer<std::uint32_t> x_buffer;
  std::uint32_t* const xa =
      x_buffer.get(static_cast<std::size_t>(blocks * kBlockRows * padded_words));
  const std::int64_t groups = ceil_div(n, std::int64_t{kBf16PanelColumns});
  // Tasks of (column group × row blocks): each packs its group's panel once (up to 288 KiB at
  // k = 3072, held in L2 while its row blocks pass), so a task takes every row block unless the
  // tasks would be fewer than the workers want.
  std::int64_t per_task = blocks;
  while (per_task > 1 && groups * ceil_div(blocks, per_task) < task_target()) {
    per_task = ceil_div(per_task, std::int64_t{2});
  }
  const std::int64_t row_tasks = ceil_div(blocks, per_task);
  const TileConfig config = full_tiles();  // seven of the eight used, all 16 x 64 bytes

  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, blocks * kBlockRows), [&](const auto& r) {
      for (std::int64_t i = r.begin(); i != r.end(); ++i) {
        std::uint32_t* row = xa + i * padded_words;
        std::int64_t written = 0;
        if (i < m) {
          bf16_row(x + i * k, k, row);
          written = words;
        }
        std::fill(row + written, row + padded_words, 0u);
      }
    });
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, groups * row_tasks), [&](const auto& r) {
      thread_local AlignedBuffer<std::uint32_t> w_buffer;
      thread_local AlignedFloats c_buffer;
      std::uint32_t* const panel =
          w_buffer.get(static_cast<std::size_t>(padded_words * kBf16PanelColumns));
      float* const c = c_buffer.get(static_cast<std::size_t>(kBlockRows * kBf16PanelColumns));
      load_tiles(config);
      for (std::int64_t t = r.begin(); t != r.end(); ++t) {
        const std::int64_t g = t / row_tasks;
        const std::int64_t b0 = (t % row_tasks) * per_task;
        const std::int64_t b1 = std::min(blocks, b0 + per_task);
        const std::int64_t j0 = g * kBf16PanelColumns;
        const std::int64_t count = std::min<std::int64_t>(kBf16PanelColumns, n - j0);
        if (t == r.begin() || b0 == 0) {  // a new group: pack its panel
          pack_weight_panel_bf16(weight + j0 * k, k, static_cast<int>(count), panel);
          std::memset(panel + words * kBf16PanelColumns, 0,
                      static_cast<std::size_t>((padded_words - words) * kPanelBytes));
        }
        for (std::int64_t b = b0; b < b1; ++b) {
          block_product(xa + b * kBlockRows * padded_words, padded_words * 4, panel, padded_words,
                        c);
          const std::int64_t rows = std::min(kBlockRows, m - b * kBlockRows);
          for (std::int64_t i = 0; i < rows; ++i) {
            store(b * kBlockRows + i, j0, count, c + i * kBf16PanelColumns);
          }
        }
      }
      release_tiles();
    });
  });
}
#endif

}  // namespace offgen::kernels::cpu
