// Arguments of FlexGen's 4-bit group-wise quantization (its TorchCompressedDevice with
// num_bits 4, group_size 64, asymmetric), shared by the reference, the CPU kernels and the CUDA
// kernels. This header is the spec; every implementation is bit-exact to it, and it is bit-exact
// to FlexGen, which has two op orders for the same formulas (QuantRecipe):
//  - fp16 ops, the KV cache: FlexGen compresses the cache on the GPU as it is written, with
//    PyTorch fp16 tensor ops, each rounding its result to fp16;
//  - fp32 ops, the weights: FlexGen compresses weights once, at load, on the CPU
//    (TorchTensor.load_from_np -> the CPU compressed device's compress), which casts the fp16
//    tensor to fp32 first; every op runs in fp32 and only scale and mn are rounded to fp16, when
//    they are copied into the fp16 params tensor.
//
// A tensor of fp16 values viewed as [outer, dim, inner] is quantized in groups of 64 consecutive
// indices along `dim` (for one outer and one inner index). G = ceil(dim / 64) groups; the tail
// group is padded with zeros, which take part in its min and max. Per group, with r(.) = the
// recipe's rounding of an op's float result (fp16 ops: h(.), round a float to fp16, nearest even;
// fp32 ops: none, the float itself) and all arithmetic on floats:
//   mn = min over the 64 values, padding included; mx = max            (a zero is stored as +0)
//   d = r(mx - mn); q1 = r(1.0f / d); scale = r(q1 * 15.0f)
//       (PyTorch evaluates FlexGen's `15 / (mx - mn)` as `t.reciprocal() * 15`; d == 0 makes
//       q1 = scale = +inf)
//   per value: t = r(x - mn); u = r(t * scale); v = u > 15 ? 15 : (u > 0 ? u : 0);
//       q = v rounded half to even, an integer 0..15
//   stored: h(scale) and mn (an fp16 value already)
// v is written so that a NaN u (0 · inf when d == 0) gives 0: a group of equal values (constant,
// all zero) has q = 0 everywhere, FlexGen's intent (PyTorch would cast NaN), and dequantizes to
// exactly mn. With fp16 ops a group whose range overflows fp16 (d = +inf) gets scale 0; with
// fp32 ops d is finite, and a scale beyond fp16's range (d below 15 / 65504) is stored as +inf.
//   dequantize, one recipe for both (FlexGen expands on the GPU, in fp16):
//     y = h(h(float(q) / scale) + mn)     (PyTorch: data.div_(scale); data.add_(mn))
// With scale = +inf this is exactly mn. scale 0 (the overflowed range) makes 0 / 0 a NaN, which
// every implementation stores as 0x7E00. Padding positions are never written back.
//
// Storage (FlexGen's tensor shapes):
//   data   bytes [outer, G * 32, inner]: byte (o, g * 32 + j, i) =
//          q(o, g * 64 + 2j, i) << 4 | q(o, g * 64 + 2j + 1, i) — the even index in the high
//          nibble; a padding position holds the code of its zero
//   params fp16 [outer, G, 2, inner]: (o, g, 0, i) = scale, (o, g, 1, i) = mn
// 36 bytes per 64 values. A weight W[out, in] grouped along dim 0 (FlexGen's group_dim 0) is
// outer 1, dim out, inner in; KV rows grouped along head_dim are outer rows, dim head_dim,
// inner 1.
//
// Inputs are finite (a NaN or Inf makes its group's outputs unspecified, never its writes).
#pragma once

#include <cstdint>

#include "engine/core/half.h"

namespace offgen::kernels {

inline constexpr int kQuantGroupSize = 64;
inline constexpr int kQuantBits = 4;

struct QuantShape {
  std::int64_t outer = 1;
  std::int64_t dim = 0;  // grouped
  std::int64_t inner = 1;

  constexpr std::int64_t groups() const { return (dim + kQuantGroupSize - 1) / kQuantGroupSize; }
  constexpr std::int64_t values() const { return outer * dim * inner; }
  constexpr std::int64_t data_bytes() const {
    return outer * groups() * (kQuantGroupSize * kQuantBits / 8) * inner;
  }
  // fp16 elements of params: a [scale, mn] pair per group.
  constexpr std::int64_t param_count() const { return outer * groups() * 2 * inner; }
};

// Bytes of a packed tensor: its data and its params.
constexpr std::int64_t quantized_bytes(const QuantShape& shape) {
  return shape.data_bytes() + shape.param_count() * static_cast<std::int64_t>(sizeof(Half));
}

// FlexGen's two op orders (above): fp16 ops for the KV cache, fp32 ops for weights.
enum class QuantRecipe { fp16_ops, fp32_ops };

struct QuantizeArgs {
  const Half* x = nullptr;       // [outer, dim, inner]
  std::uint8_t* data = nullptr;  // [outer, G * 32, inner]
  Half* params = nullptr;        // [outer, G, 2, inner]
  QuantShape shape;
  QuantRecipe recipe = QuantRecipe::fp16_ops;
};

// Writes every real position of x (padding is never written).
struct DequantizeArgs {
  const std::uint8_t* data = nullptr;  // [outer, G * 32, inner]
  const Half* params = nullptr;        // [outer, G, 2, inner]
  Half* x = nullptr;                   // [outer, dim, inner]
  QuantShape shape;
};

// A decode step's appended token into a packed KV cache (fp16 ops, as all KV): the fp16 cache and
// its packed twin, each row grouped along head_dim (outer = rows, inner 1). For every (b, h) only
// the row at slot write_slot[b * heads + h] is quantized; every other row of data and params is
// left as it was. A slot outside [0, capacity) is a caller bug: the CPU kernels throw offgen::Error
// on it (before writing anything), a CUDA kernel skips that row. Only the cache is read (never the
// fused qkv), so `heads` is the cache's head count: the kv heads under grouped-query attention
// (kernels/attention_args.h), the same as AppendKvArgs's kv_heads, and write_slot is that append's
// [batch, kv_heads] table.
struct QuantizeKvSlotsArgs {
  const Half* cache = nullptr;               // [batch, heads, capacity, head_dim]
  const std::int32_t* write_slot = nullptr;  // [batch, heads]
  std::uint8_t* data = nullptr;              // [batch, heads, capacity, G * 32]
  Half* params = nullptr;                    // [batch, heads, capacity, G, 2]
  int batch = 0;
  int heads = 0;  // cache (kv) heads
  int capacity = 0;
  int head_dim = 0;
};

}  // namespace offgen::kernels
