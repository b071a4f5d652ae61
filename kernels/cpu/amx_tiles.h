// The AMX tile multiply the tile kernels use (bf16: kernels/cpu/linear_amx.cpp,
// kernels/cpu/attention_bf16.cpp; int8: kernels/cpu/linear_int8_amx.cpp), with every tile at 16
// rows of 64 bytes (full_tiles()).
//
// Tiles: C 0-3 (16 × 16 fp32 or int32 each), A 4-5 (16 rows × 16 words: bf16 pairs, or quads of
// unsigned bytes), B 6-7 (16 words × 16 columns: pairs, or quads of signed bytes). A pass
// multiplies up to two 16-row A blocks by up to two 16-column B blocks: 2 × 2 C tiles from two A
// and two B loads per step, one tile load per tile multiply (three C tiles per A tile took four
// loads per three multiplies and left the unit waiting on L2).
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/cpu_features.h"

namespace offgen::kernels::cpu::amx {

constexpr std::int64_t kRows = 16;       // rows of an A or C tile, columns of a B or C tile
constexpr std::int64_t kStepWords = 16;  // words per tile multiply (64 bytes of an A row)

// One tile multiply: tdpbf16ps into fp32 C, or tdpbusd (unsigned A bytes by signed B bytes) into
// int32 C. A macro: the intrinsics paste their tile numbers into the instruction's text, so they
// must be literal.
#define OFFGEN_TILE_DOT(T, dst, a, b)         \
  do {                                        \
    if constexpr (std::is_same_v<T, float>) { \
      _tile_dpbf16ps(dst, a, b);              \
    } else {                                  \
      _tile_dpbusd(dst, a, b);                \
    }                                         \
  } while (false)

// C(r, c) = Σ_s A_r(s) · B_c(s) over steps s < steps, r < R, c < C (T: C's element): A_r(s) is 16
// rows at a[r] + 16·s words, `lda` bytes apart; B_c(s) is 16 pair rows at b[c] + 16·s·ldb / 4
// words, `ldb` bytes apart; C(r, c) is stored at out[2·r + c], rows `ldc` bytes apart. Tile numbers
// are immediates, hence the template.
template <int R, int C, typename T = float>
__attribute__((target("amx-tile,amx-bf16,amx-int8"))) inline void tile_pass(
    const std::uint32_t* const* a, std::int64_t lda, const std::uint32_t* const* b,
    std::int64_t ldb, std::int64_t steps, T* const* out, std::int64_t ldc) {
  static_assert(R >= 1 && R <= 2 && C >= 1 && C <= 2);
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, std::int32_t>);
  const std::int64_t b_step = kStepWords * ldb / 4;
  _tile_zero(0);
  if constexpr (C > 1) _tile_zero(1);
  if constexpr (R > 1) _tile_zero(2);
  if constexpr (R > 1 && C > 1) _tile_zero(3);
  for (std::int64_t s = 0; s < steps; ++s) {
    _tile_loadd(4, a[0] + s * kStepWords, lda);
    _tile_loadd(6, b[0] + s * b_step, ldb);
    OFFGEN_TILE_DOT(T, 0, 4, 6);
    if constexpr (C > 1) {
      _tile_loadd(7, b[1] + s * b_step, ldb);
      OFFGEN_TILE_DOT(T, 1, 4, 7);
    }
    if constexpr (R > 1) {
      _tile_loadd(5, a[1] + s * kStepWords, lda);
      OFFGEN_TILE_DOT(T, 2, 5, 6);
      if constexpr (C > 1) OFFGEN_TILE_DOT(T, 3, 5, 7);
    }
  }
  _tile_stored(0, out[0], ldc);
  if constexpr (C > 1) _tile_stored(1, out[1], ldc);
  if constexpr (R > 1) _tile_stored(2, out[2], ldc);
  if constexpr (R > 1 && C > 1) _tile_stored(3, out[3], ldc);
}

// tile_pass for `rows` (1 or 2) A blocks and `columns` (1 or 2) B blocks.
template <typename T>
inline void tile_pass(int rows, int columns, const std::uint32_t* const* a, std::int64_t lda,
                      const std::uint32_t* const* b, std::int64_t ldb, std::int64_t steps,
                      T* const* out, std::int64_t ldc) {
  if (rows > 1 && columns > 1) return tile_pass<2, 2, T>(a, lda, b, ldb, steps, out, ldc);
  if (rows > 1) return tile_pass<2, 1, T>(a, lda, b, ldb, steps, out, ldc);
  if (columns > 1) return tile_pass<1, 2, T>(a, lda, b, ldb, steps, out, ldc);
  tile_pass<1, 1, T>(a, lda, b, ldb, steps, out, ldc);
}

// How a tile GEMM splits into tasks of (column group × a run of row pairs): each task packs or
// reads its group's panels once and passes its row pairs over them, so a task takes every row
// pair unless the tasks would be fewer than the workers want (target).
struct GroupTasks {
  std::int64_t pairs = 0, per_task = 0, row_tasks = 0;

  GroupTasks(std::int64_t groups, std::int64_t row_pairs, std::int64_t target)
      : pairs(row_pairs), per_task(row_pairs) {
    while (per_task > 1 && groups * ((pairs + per_task - 1) / per_task) < target) {
      per_task = (per_task + 1) / 2;
    }
    row_tasks = (pairs + per_task - 1) / per_task;
  }
  std::int64_t count(std::int64_t groups) const { return groups * row_tasks; }

  struct Task {
    std::int64_t group, first_pair, end_pair;
  };
  Task task(std::int64_t t) const {
    const std::int64_t p0 = (t % row_tasks) * per_task;
    return {t / row_tasks, p0, std::min(pairs, p0 + per_task)};
  }
};

// Configures this thread's tiles (full_tiles()) and releases them: a task body's first and last
// calls.
__attribute__((target("amx-tile"))) inline void load_tiles(const TileConfig& config) {
  _tile_loadconfig(&config);
}
__attribute__((target("amx-tile"))) inline void release_tiles() {
  _tile_release();
}

}  // namespace offgen::kernels::cpu::amx

#undef OFFGEN_TILE_DOT
#endif
