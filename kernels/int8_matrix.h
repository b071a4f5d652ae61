// int8 weights (Storage::int8, `--int8-weights`): each matrix W[out, in] quantized per
// output channel (a row of HF's layout), symmetric, at load; the cpu device multiplies them in
// int8 against activations quantized per group of k (vpdpbusd, or AMX tdpbusd). This header is the
// spec; the reference, the CPU kernels and the packer are bit-exact to it.
//
// Quantizing a row v[0..len) of fp16 values (a weight row whole; an activation row in groups of
// kGroup consecutive k, each group one such v):
//   amax = max |float(v_i)|;   scale = amax / 127.0f;   inv = 127.0f / amax (fp32 divisions)
//   q_i = amax == 0 ? 0 : clamp(nearbyint(float(v_i) · inv), -127, 127)   (half to even)
// Weights per output channel are plain symmetric int8; activations get a scale per 128 values of
// k, so one outlier channel (the LLaMA family's residual stream has some ~100x the rest) costs
// precision in its own group only. A linear output over int8 weights, per row i of x and output
// column j, over the groups g of k in order:
//   acc_g = Σ_{k in g} qx[i, k] · qw[j, k]      exact, in int32
//   S = Σ_g float(acc_g) · sx[i, g]            (fp32: each product rounded, then each add)
//   y[i, j] = fp16(act(S · sw[j] + bias[j]))   (fp32, one rounding per op)
// An integer sum has no order and the group sums have a fixed one, so a row's result is the same
// whatever rows are beside it, and the same on every kernel path: batch invariance and parity are
// exact here.
//
// vpdpbusd multiplies unsigned bytes by signed ones, so the kernels feed qx + 128 (1..255) and
// subtract 128 · Σ_{k in g} qw[j, k], which the packed matrix keeps per row and group (`sums`).
//
// Storage of one matrix, a blob (Int8Shape gives the offsets; its parts are 64-byte aligned
// within it, and the kernels read any alignment):
//   scales fp32 [rows_padded]          sw per row, 0 for padding rows
//   sums   int32 [groups][rows_padded]  Σ_{k in g} qw per group of k and row
//   codes  int8, column panels of kPanelRows rows, k in quads:
//          byte (p · kPanelRows · cols_padded) + (c / 4) · 4 · kPanelRows + (r % kPanelRows) · 4 +
//          c % 4 holds qw[p · kPanelRows + r % kPanelRows, c] (0 past the matrix),
//          p = r / kPanelRows
// — the layout the outer-product kernel reads as it is (one 4-byte word per row and quad of k,
// a panel's quad is three zmm), so weights are never packed again after load.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/core/int_math.h"

namespace offgen::kernels {

// A packed int8 matrix where the kernels read it (a view into a weight image). null: none.
struct Int8Matrix {
  const std::int8_t* codes = nullptr;
  const float* scales = nullptr;
  const std::int32_t* sums = nullptr;  // [groups][rows_padded]
  explicit operator bool() const { return codes != nullptr; }
};

struct Int8Shape {
  static constexpr std::int64_t kPanelRows = 48;
  static constexpr std::int64_t kGroup = 128;  // values of k per activation scale
  static constexpr std::int64_t kQuad = 4;
  static constexpr std::uint64_t kAlign = 64;

  std::int64_t rows = 0;  // out_features
  std::int64_t cols = 0;  // in_features

  constexpr std::int64_t rows_padded() const { return round_up(rows, kPanelRows); }
  constexpr std::int64_t cols_padded() const { return round_up(cols, kQuad); }
  constexpr std::int64_t groups() const { return ceil_div(cols, kGroup); }
  constexpr std::uint64_t sums_offset() const {
    return round_up(static_cast<std::uint64_t>(rows_padded()) * 4, kAlign);
  }
  constexpr std::uint64_t codes_offset() const {
    return sums_offset() +
           round_up(static_cast<std::uint64_t>(rows_padded() * groups()) * 4, kAlign);
  }
  constexpr std::uint64_t code_bytes() const {
    return static_cast<std::uint64_t>(rows_padded()) * static_cast<std::uint64_t>(cols_padded());
  }
  constexpr std::uint64_t bytes() const { return codes_offset() + round_up(code_bytes(), kAlign); }
  // Where qw[r, c] lies among the codes.
  constexpr std::int64_t code_index(std::int64_t r, std::int64_t c) const {
    return (r / kPanelRows) * kPanelRows * cols_padded() + (c / kQuad) * kQuad * kPanelRows +
           (r % kPanelRows) * kQuad + c % kQuad;
  }

  Int8Matrix view(const std::byte* blob) const {
    return {reinterpret_cast<const std::int8_t*>(blob + codes_offset()),
            reinterpret_cast<const float*>(blob),
            reinterpret_cast<const std::int32_t*>(blob + sums_offset())};
  }
};

}  // namespace offgen::kernels
