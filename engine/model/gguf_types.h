// The tensor types of GGUF files (ggml's ggml_type ids), their block layouts, and dequantization
// to fp32 of the ones offgen reads. Layouts follow ggml-common.h; every value is computed in
// fp32 in the order ggml's reference dequantize_row_* and the `gguf` Python package compute it
// (products, then sums; no fused multiply-add), so a value equals theirs bit for bit.
//   F32, F16, BF16      one element per "block"
//   Q8_0  32 elements   fp16 d, int8 q[32]                         x = d * q
//   Q4_0  32 elements   fp16 d, 16 bytes of nibbles                x = d * (q - 8)
//   Q4_1  32 elements   fp16 d, fp16 m, 16 bytes of nibbles        x = d * q + m
//   Q5_0  32 elements   fp16 d, u32 fifth bits, 16 bytes           x = d * (q - 16)
//   Q5_1  32 elements   fp16 d, fp16 m, u32 fifth bits, 16 bytes   x = d * q + m
//   Q4_K 256 elements   fp16 d, fp16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles
//   Q5_K 256 elements   as Q4_K plus 32 bytes of fifth bits
//   Q6_K 256 elements   128 bytes low nibbles, 64 bytes high 2-bit pairs, int8 scales[16], fp16 d
// (the nibbles of a 32-block: low nibbles are elements 0..15, high nibbles 16..31.)
// Other ggml types are known by size, so a file holding them opens, and are refused by name when
// a tensor of that type is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace offgen {

enum class GgmlType : std::uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  iq2_xxs = 16,
  iq2_xs = 17,
  iq3_xxs = 18,
  iq1_s = 19,
  iq4_nl = 20,
  iq3_s = 21,
  iq2_s = 22,
  iq4_xs = 23,
  i8 = 24,
  i16 = 25,
  i32 = 26,
  i64 = 27,
  f64 = 28,
  iq1_m = 29,
  bf16 = 30,
  tq1_0 = 34,
  tq2_0 = 35,
};

struct GgmlTypeInfo {
  const char* name;         // ggml's: "Q4_K", "F16"
  std::int64_t block;       // elements per block
  std::size_t block_bytes;  // bytes per block
  bool dequantizable;       // offgen reads it
};

// The layout of a type id, or nullopt for an id ggml does not define (or a retired one).
std::optional<GgmlTypeInfo> ggml_type_info(std::uint32_t type);
std::string ggml_type_name(GgmlType type);

// Dequantizes `count` elements (a multiple of the type's block) from `src` into `dst`. The type
// must be dequantizable. Not parallel: callers split the work by rows.
void dequantize_gguf(GgmlType type, const std::byte* src, float* dst, std::int64_t count);

}  // namespace offgen
