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
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/bf16_operands.h"
#include "kernels/cpu/cpu_features.h"

namespace offgen::kernels::cpu {

bool use_amx_bf16() {
  return cpu_isa_cap() == IsaCap::none && cpu_features().amx_bf16 && cpu_features().bf16_gemm();
}

#if defined(__x86_64__)
namespace {

// A task's weight panels and row pairs: two 16-row blocks of x against six 16-column blocks of
// two panels, in 2 × 2 tile passes (kernels/cpu/amx_tiles.h).
constexpr std::int64_t kBlockRows = amx::kRows;
constexpr std::int64_t kStepWords = amx::kStepWords;
constexpr std::int64_t kPanelBytes = kBf16PanelColumns * 4;
constexpr std::int64_t kGroupPanels = 2;  // panels per task's column group: six column blocks
constexpr std::int64_t kGroupColumns = kGroupPanels * kBf16PanelColumns;
constexpr std::int64_t kRowPair = 2 * kBlockRows;

}  // namespace

void gemm_amx_bf16(const Half* x, const Half* weight, std::int64_t m, std::int64_t n,
                   std::int64_t k, const Epilogue& store) {
  const std::int64_t words = ceil_div(k, std::int64_t{2});
  const std::int64_t padded_words = round_up(words, kStepWords);  // zero pairs past k
  const std::int64_t blocks = ceil_div(m, kBlockRows);
  const std::int64_t pairs = ceil_div(blocks, std::int64_t{2});  // row pairs of 32 rows
  // x as bf16 pair rows, zero past k and past m: one A tile is 16 consecutive rows.
  thread_local AlignedBuffer<std::uint32_t> x_buffer;
  std::uint32_t* const xa =
      x_buffer.get(static_cast<std::size_t>(blocks * kBlockRows * padded_words));
  const std::int64_t groups = ceil_div(n, kGroupColumns);
  // A group's two panels: up to 576 KiB at k = 3072, held in L2 while its row pairs pass.
  const amx::GroupTasks split(groups, pairs, task_target());
  const TileConfig config = full_tiles();  // all 16 x 64 bytes
  const std::int64_t panel_words = padded_words * kBf16PanelColumns;

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
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, split.count(groups)), [&](const auto& r) {
      thread_local AlignedBuffer<std::uint32_t> w_buffer;
      thread_local AlignedFloats c_buffer;
      std::uint32_t* const panels =
          w_buffer.get(static_cast<std::size_t>(kGroupPanels * panel_words));
      // Two C blocks of 32 × 96: a row pair's epilogue runs after the next pair's tile
      // multiplies, because loading what TILESTORED has just written waits for the store.
      constexpr std::int64_t kCWords = kRowPair * kGroupColumns;
      float* const c_blocks = c_buffer.get(static_cast<std::size_t>(2 * kCWords));
      amx::load_tiles(config);
      for (std::int64_t t = r.begin(); t != r.end(); ++t) {
        const auto [g, p0, p1] = split.task(t);
        const std::int64_t j0 = g * kGroupColumns;
        const std::int64_t count = std::min(kGroupColumns, n - j0);
        const std::int64_t column_blocks = ceil_div(count, std::int64_t{16});
        if (t == r.begin() || p0 == 0) {  // a new group: pack its panels
          for (std::int64_t q = 0; q * kBf16PanelColumns < count; ++q) {
            std::uint32_t* const panel = panels + q * panel_words;
            const std::int64_t cols =
                std::min<std::int64_t>(kBf16PanelColumns, count - q * kBf16PanelColumns);
            pack_weight_panel_bf16(weight + (j0 + q * kBf16PanelColumns) * k, k,
                                   static_cast<int>(cols), panel);
            std::memset(panel + words * kBf16PanelColumns, 0,
                        static_cast<std::size_t>((padded_words - words) * kPanelBytes));
          }
        }
        // Column block cb's first pair: panel cb / 3, its (cb % 3)-th 16 columns.
        auto column_block = [&](std::int64_t cb) {
          return panels + (cb / 3) * panel_words + (cb % 3) * 16;
        };
        auto multiply = [&](std::int64_t p) {
          float* const c = c_blocks + (p & 1) * kCWords;
          const std::int64_t b = 2 * p;
          const bool two_rows = b + 1 < blocks;
          const std::uint32_t* a[2] = {xa + b * kBlockRows * padded_words,
                                       xa + (b + 1) * kBlockRows * padded_words};
          for (std::int64_t cb = 0; cb < column_blocks; cb += 2) {
            const std::uint32_t* bt[2] = {column_block(cb), column_block(cb + 1)};
            float* out[4] = {c + 16 * cb, c + 16 * (cb + 1),
                             c + kBlockRows * kGroupColumns + 16 * cb,
                             c + kBlockRows * kGroupColumns + 16 * (cb + 1)};
            amx::tile_pass(two_rows ? 2 : 1, cb + 1 < column_blocks ? 2 : 1, a, padded_words * 4,
                           bt, kPanelBytes, padded_words / kStepWords, out, kGroupColumns * 4);
          }
        };
        auto finish = [&](std::int64_t p) {
          const float* c = c_blocks + (p & 1) * kCWords;
          const std::int64_t rows = std::min(kRowPair, m - p * kRowPair);
          for (std::int64_t i = 0; i < rows; ++i) {
            store(p * kRowPair + i, j0, count, c + i * kGroupColumns);
          }
        };
        for (std::int64_t p = p0; p < p1; ++p) {
          multiply(p);
          if (p > p0) finish(p - 1);
        }
        finish(p1 - 1);
      }
      amx::release_tiles();
    });
  });
}
#endif

}  // namespace offgen::kernels::cpu
