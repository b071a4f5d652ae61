// A KV cache buffer in int4 storage (engine/core/compression.h): `rows` rows of head_dim values
// (one per (sequence, head, slot)), each grouped along head_dim in FlexGen's format
// (kernels/quantize_args.h) — every row's codes first, then every row's [scale, min] pairs. The
// views below split one such buffer; the fp16 layout of the same cache is [rows, head_dim].
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/core/half.h"
#include "kernels/ops.h"
#include "kernels/quantize_args.h"

namespace offgen::kernels {

constexpr QuantShape packed_kv_shape(std::int64_t rows, int head_dim) {
  return {.outer = rows, .dim = head_dim, .inner = 1};
}

// Bytes of `rows` rows: 36 per 64 values of each row (a row's tail group padded).
constexpr std::uint64_t packed_kv_bytes(std::int64_t rows, int head_dim) {
  return static_cast<std::uint64_t>(quantized_bytes(packed_kv_shape(rows, head_dim)));
}

struct PackedKv {
  std::uint8_t* codes = nullptr;  // [rows, G * 32]
  Half* params = nullptr;         // [rows, G, 2]
};

// The two parts of a buffer of `rows` rows (codes are whole multiples of 32 bytes, so params
// stay aligned).
inline PackedKv packed_kv(void* buffer, std::int64_t rows, int head_dim) {
  auto* codes = static_cast<std::uint8_t*>(buffer);
  const std::int64_t code_bytes = packed_kv_shape(rows, head_dim).data_bytes();
  return {codes, reinterpret_cast<Half*>(codes + code_bytes)};
}

// Enqueue on `ops`' stream: every row of an fp16 block [rows, head_dim] packed into the buffer
// `packed`, and the reverse.
inline void pack_kv_rows(Ops& ops, const Half* fp16, void* packed, std::int64_t rows,
                         int head_dim) {
  const PackedKv out = packed_kv(packed, rows, head_dim);
  ops.quantize({.x = fp16,
                .data = out.codes,
                .params = out.params,
                .shape = packed_kv_shape(rows, head_dim)});
}

// The first `rows` rows of a packed buffer laid out for layout_rows rows (0: rows).
inline void expand_kv_rows(Ops& ops, void* packed, Half* fp16, std::int64_t rows, int head_dim,
                           std::int64_t layout_rows = 0) {
  const PackedKv in = packed_kv(packed, layout_rows > 0 ? layout_rows : rows, head_dim);
  ops.dequantize(
      {.data = in.codes, .params = in.params, .x = fp16, .shape = packed_kv_shape(rows, head_dim)});
}

}  // namespace offgen::kernels
