// CPU 4-bit group-wise quantization (kernels/quantize_args.h). Work is cut into blocks of groups
// laid side by side as columns: value r of group c at v[r * cols + c]. A weight's groups at one
// (outer, group) and consecutive inner indices already lie so in memory (rows of the tensor,
// copied row by row); groups along a contiguous dim (KV rows, inner 1) are gathered one by one.
// The per-group steps (min, max, scale, the 16-entry tables) are then vector loops across
// columns, and each of PyTorch's roundings to fp16 (fp16 ops, the KV recipe) is a bulk conversion
// there and back (F16C where the CPU has it, engine/core/half.h) over the whole block; the fp32
// recipe (weights) skips those roundings. Both are exact IEEE operations, so every ISA gives the
// reference's bits.
//
// Blocks of a weight are wide (256 groups to quantize, 512 to expand) so that every row a block
// reads or writes is a long contiguous run: with 64-wide blocks, fc1's expansion wrote 64 runs of
// 128 bytes 4 KiB apart per block and ran at half the speed.
#include "kernels/cpu/quantize.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engine/core/error.h"
#include "engine/core/int_math.h"
#include "kernels/cpu/vector_math.h"

namespace offgen::kernels::cpu {
namespace {

constexpr int kGroup = kQuantGroupSize;
constexpr int kBytes = kGroup / 2;  // packed bytes of a group
constexpr int kCodes = 1 << kQuantBits;
constexpr std::uint16_t kNaN = 0x7E00;
// Groups per block: a weight's (along inner) and contiguous groups' (gathered one at a time, so
// no long runs to gain).
constexpr int kQuantizeCols = 256;
constexpr int kExpandCols = 512;
constexpr int kGatherCols = 64;

int rows_of(const QuantShape& s, std::int64_t g) {
  return static_cast<int>(std::min<std::int64_t>(kGroup, s.dim - g * kGroup));
}

// Rounds n floats to fp16 in place (each is the output of one PyTorch fp16 op); scratch holds n.
void round_to_half(float* v, int n, Half* scratch) {
  const auto count = static_cast<std::size_t>(n);
  float_to_half(v, scratch, count);
  half_to_float(scratch, v, count);
}

// ---- quantize --------------------------------------------------------------------------------

// One block of up to N groups: values in (padding zeros included), params and packed bytes out.
// Blocks are thread_local (up to 120 KiB: kept off the caller's stack, made once per thread).
template <int N>
struct QuantBlock {
  int cols = 0;
  float v[kGroup * N];  // value r of group c at v[r * cols + c]
  float scale[N];
  float mn[N];
  std::uint8_t codes[kGroup * N];  // same layout as v
  std::uint8_t bytes[kBytes * N];  // byte j of group c at bytes[j * cols + c]
  Half scratch[kGroup * N];
};

// u's clamp to [0, 15] (NaN -> 0) and its rounding, half to even: v + 1.5 * 2^23 has a spacing of
// 1, so that addition rounds v to an integer as the default rounding mode (nearbyint) does, in a
// form every vector ISA has.
inline std::uint8_t to_code(float u) {
  const float v = pick(u > 15.0f, 15.0f, pick(u > 0.0f, u, 0.0f));
  return static_cast<std::uint8_t>(static_cast<int>((v + 12582912.0f) - 12582912.0f));
}

// mn and scale of n groups from their values v (layout of QuantBlock::v); fp16_ops: each op's
// result rounded to fp16 (the KV recipe), else fp32 throughout (the weights').
OFFGEN_SIMD_CLONES void group_params(const float* __restrict v, int n, float* __restrict mn,
                                     float* __restrict scale, Half* scratch, bool fp16_ops) {
  float* mx = scale;
  for (int c = 0; c < n; ++c) mn[c] = mx[c] = v[c];
  for (int r = 1; r < kGroup; ++r) {
    const float* row = v + r * n;
    for (int c = 0; c < n; ++c) {
      mn[c] = pick(row[c] < mn[c], row[c], mn[c]);
      mx[c] = vmax(mx[c], row[c]);
    }
  }
  for (int c = 0; c < n; ++c) {
    mn[c] += 0.0f;  // -0 + +0 = +0: a zero min or max is +0 whichever zero the group held
    scale[c] = (mx[c] + 0.0f) - mn[c];
  }
  if (fp16_ops) round_to_half(scale, n, scratch);  // d
  for (int c = 0; c < n; ++c) scale[c] = 1.0f / scale[c];
  if (fp16_ops) round_to_half(scale, n, scratch);  // r
  for (int c = 0; c < n; ++c) scale[c] *= 15.0f;
  if (fp16_ops) round_to_half(scale, n, scratch);  // scale
}

// Codes of n groups' values v (overwritten) and their packing.
OFFGEN_SIMD_CLONES void encode(float* __restrict v, int n, const float* __restrict mn,
                               const float* __restrict scale, std::uint8_t* __restrict codes,
                               std::uint8_t* __restrict bytes, Half* scratch, bool fp16_ops) {
  for (int r = 0; r < kGroup; ++r) {
    float* row = v + r * n;
    for (int c = 0; c < n; ++c) row[c] -= mn[c];
  }
  if (fp16_ops) round_to_half(v, kGroup * n, scratch);  // t
  for (int r = 0; r < kGroup; ++r) {
    float* row = v + r * n;
    for (int c = 0; c < n; ++c) row[c] *= scale[c];
  }
  if (fp16_ops) round_to_half(v, kGroup * n, scratch);  // u
  for (int i = 0; i < kGroup * n; ++i) codes[i] = to_code(v[i]);
  for (int j = 0; j < kBytes; ++j) {
    const std::uint8_t* even = codes + 2 * j * n;
    const std::uint8_t* odd = even + n;
    for (int c = 0; c < n; ++c) bytes[j * n + c] = static_cast<std::uint8_t>(even[c] << 4 | odd[c]);
  }
}

template <int N>
void quantize_block(QuantBlock<N>& b, QuantRecipe recipe) {
  const bool fp16_ops = recipe == QuantRecipe::fp16_ops;
  group_params(b.v, b.cols, b.mn, b.scale, b.scratch, fp16_ops);
  encode(b.v, b.cols, b.mn, b.scale, b.codes, b.bytes, b.scratch, fp16_ops);
}

// inner > 1: the groups of (o, g) at inner indices i0 .. i0 + cols - 1.
template <int N>
void quantize_columns(const QuantizeArgs& a, std::int64_t o, std::int64_t g, std::int64_t i0,
                      int cols, QuantBlock<N>& b) {
  const QuantShape& s = a.shape;
  const std::int64_t G = s.groups();
  const int rows = rows_of(s, g);
  const auto n = static_cast<std::size_t>(cols);
  b.cols = cols;
  for (int r = 0; r < rows; ++r) {
    half_to_float(a.x + (o * s.dim + g * kGroup + r) * s.inner + i0, b.v + r * cols, n);
  }
  std::fill(b.v + rows * cols, b.v + kGroup * cols, 0.0f);
  quantize_block(b, a.recipe);
  for (int j = 0; j < kBytes; ++j) {
    std::memcpy(a.data + ((o * G + g) * kBytes + j) * s.inner + i0, b.bytes + j * cols, n);
  }
  float_to_half(b.scale, a.params + ((o * G + g) * 2 + 0) * s.inner + i0, n);
  float_to_half(b.mn, a.params + ((o * G + g) * 2 + 1) * s.inner + i0, n);
}

// A group whose values lie contiguously (inner 1): its values, and where its bytes and its
// [scale, mn] go.
struct GroupRef {
  const Half* x;
  int rows;
  std::uint8_t* data;
  Half* params;
};

// Groups locate(0 .. count - 1), kGatherCols at a time.
template <typename Locate>
void quantize_groups(std::int64_t count, QuantRecipe recipe, const Locate& locate) {
  const std::int64_t blocks = ceil_div(count, kGatherCols);
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, blocks), [&](auto range) {
    thread_local QuantBlock<kGatherCols> b;
    float values[kGroup];
    for (std::int64_t block = range.begin(); block < range.end(); ++block) {
      const std::int64_t k0 = block * kGatherCols;
      const int n = static_cast<int>(std::min<std::int64_t>(kGatherCols, count - k0));
      b.cols = n;
      for (int c = 0; c < n; ++c) {
        const GroupRef group = locate(k0 + c);
        half_to_float(group.x, values, static_cast<std::size_t>(group.rows));
        std::fill(values + group.rows, values + kGroup, 0.0f);
        for (int r = 0; r < kGroup; ++r) b.v[r * n + c] = values[r];
      }
      quantize_block(b, recipe);
      for (int c = 0; c < n; ++c) {
        const GroupRef group = locate(k0 + c);
        for (int j = 0; j < kBytes; ++j) group.data[j] = b.bytes[j * n + c];
        group.params[0] = float_to_half(b.scale[c]);
        group.params[1] = float_to_half(b.mn[c]);
      }
    }
  });
}

// ---- dequantize ------------------------------------------------------------------------------

// One block of up to N groups' tables: entry q of group c, at table[q * cols + c], is what code
// q expands to, h(h(q / scale) + mn).
template <int N>
struct TableBlock {
  int cols = 0;
  float scale[N];
  float mn[N];
  float y[kCodes * N];
  Half table[kCodes * N];
};

// The tables of n groups from their params; y is scratch of 16 n floats.
OFFGEN_SIMD_CLONES void build_tables(const float* __restrict scale, const float* __restrict mn,
                                     int n, float* __restrict y, Half* __restrict table) {
  for (int q = 0; q < kCodes; ++q) {
    for (int c = 0; c < n; ++c) y[q * n + c] = static_cast<float>(q) / scale[c];
  }
  round_to_half(y, kCodes * n, table);
  for (int q = 0; q < kCodes; ++q) {
    for (int c = 0; c < n; ++c) y[q * n + c] += mn[c];
  }
  float_to_half(y, table, static_cast<std::size_t>(kCodes * n));
  for (int i = 0; i < kCodes * n; ++i) {  // 0 / 0 of an overflowed range: one NaN for all
    table[i].bits = (table[i].bits & 0x7fffu) > 0x7c00u ? kNaN : table[i].bits;
  }
}

template <int N>
void build_tables(TableBlock<N>& b) {
  build_tables(b.scale, b.mn, b.cols, b.y, b.table);
}

// bit of q set ? if1 : if0, through a mask, which every vector ISA has.
inline std::uint16_t pick_bits(unsigned q, unsigned bit, std::uint16_t if0, std::uint16_t if1) {
  const auto mask = static_cast<std::uint16_t>(0u - ((q & bit) != 0 ? 1u : 0u));
  return static_cast<std::uint16_t>((if1 & mask) | (if0 & ~mask));
}

// Entry q of column c of a [16][cols] table: a tree of 15 selects on the bits of q over the 16
// table rows rather than a gather (each lane has its own table), so a loop over columns
// vectorises on every ISA: a contiguous load per table row, then blends.
inline std::uint16_t select16(const Half* __restrict t, int n, int c, unsigned q) {
  const auto at = [&](int k) { return t[k * n + c].bits; };
  const std::uint16_t a0 = pick_bits(q, 1, at(0), at(1)), a1 = pick_bits(q, 1, at(2), at(3));
  const std::uint16_t a2 = pick_bits(q, 1, at(4), at(5)), a3 = pick_bits(q, 1, at(6), at(7));
  const std::uint16_t a4 = pick_bits(q, 1, at(8), at(9)), a5 = pick_bits(q, 1, at(10), at(11));
  const std::uint16_t a6 = pick_bits(q, 1, at(12), at(13)), a7 = pick_bits(q, 1, at(14), at(15));
  const std::uint16_t b0 = pick_bits(q, 2, a0, a1), b1 = pick_bits(q, 2, a2, a3);
  const std::uint16_t b2 = pick_bits(q, 2, a4, a5), b3 = pick_bits(q, 2, a6, a7);
  return pick_bits(q, 8, pick_bits(q, 4, b0, b1), pick_bits(q, 4, b2, b3));
}

// One packed byte row of a block: the even value of column c to even[c] and, when the group has
// that row, the odd one to odd[c].
OFFGEN_SIMD_CLONES void lookup_row(const Half* __restrict table, int cols,
                                   const std::uint8_t* __restrict bytes, Half* __restrict even,
                                   Half* __restrict odd) {
  for (int c = 0; c < cols; ++c) even[c].bits = select16(table, cols, c, bytes[c] >> 4u);
  if (odd == nullptr) return;
  for (int c = 0; c < cols; ++c) odd[c].bits = select16(table, cols, c, bytes[c] & 15u);
}

// inner > 1: the groups of (o, g) at inner indices i0 .. i0 + cols - 1.
template <int N>
void dequantize_columns(const DequantizeArgs& a, std::int64_t o, std::int64_t g, std::int64_t i0,
                        int cols, TableBlock<N>& b) {
  const QuantShape& s = a.shape;
  const std::int64_t G = s.groups();
  const auto n = static_cast<std::size_t>(cols);
  b.cols = cols;
  half_to_float(a.params + ((o * G + g) * 2 + 0) * s.inner + i0, b.scale, n);
  half_to_float(a.params + ((o * G + g) * 2 + 1) * s.inner + i0, b.mn, n);
  build_tables(b);
  const int rows = rows_of(s, g);
  for (int j = 0; 2 * j < rows; ++j) {
    Half* even = a.x + (o * s.dim + g * kGroup + 2 * j) * s.inner + i0;
    lookup_row(b.table, cols, a.data + ((o * G + g) * kBytes + j) * s.inner + i0, even,
               2 * j + 1 < rows ? even + s.inner : nullptr);
  }
}

// inner == 1: groups k0 .. k0 + cols - 1 of the [outer * G] contiguous ones, each value a scalar
// lookup in its group's table.
template <int N>
void dequantize_groups(const DequantizeArgs& a, std::int64_t k0, int cols, TableBlock<N>& b) {
  const QuantShape& s = a.shape;
  const std::int64_t G = s.groups();
  b.cols = cols;
  for (int c = 0; c < cols; ++c) {
    b.scale[c] = half_to_float(a.params[(k0 + c) * 2]);
    b.mn[c] = half_to_float(a.params[(k0 + c) * 2 + 1]);
  }
  build_tables(b);
  for (int c = 0; c < cols; ++c) {
    const std::int64_t k = k0 + c;
    const std::uint8_t* bytes = a.data + k * kBytes;
    Half* out = a.x + (k / G) * s.dim + (k % G) * kGroup;
    const int rows = rows_of(s, k % G);
    const Half* table = b.table + c;
    for (int j = 0; 2 * j + 1 < rows; ++j) {
      out[2 * j] = table[(bytes[j] >> 4) * cols];
      out[2 * j + 1] = table[(bytes[j] & 15) * cols];
    }
    if (rows % 2 == 1) out[rows - 1] = table[(bytes[rows / 2] >> 4) * cols];
  }
}

}  // namespace

void quantize(const QuantizeArgs& a) {
  const QuantShape& s = a.shape;
  const std::int64_t G = s.groups();
  if (s.outer <= 0 || G <= 0 || s.inner <= 0) return;
  if (s.inner == 1) {
    quantize_groups(s.outer * G, a.recipe, [&](std::int64_t k) {
      const std::int64_t g = k % G;
      return GroupRef{a.x + (k / G) * s.dim + g * kGroup, rows_of(s, g), a.data + k * kBytes,
                      a.params + k * 2};
    });
    return;
  }
  const std::int64_t tiles = ceil_div(s.inner, kQuantizeCols);
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, s.outer * G * tiles), [&](auto range) {
    thread_local QuantBlock<kQuantizeCols> b;
    for (std::int64_t block = range.begin(); block < range.end(); ++block) {
      const std::int64_t i0 = block % tiles * kQuantizeCols;
      const std::int64_t og = block / tiles;
      quantize_columns(a, og / G, og % G, i0,
                       static_cast<int>(std::min<std::int64_t>(kQuantizeCols, s.inner - i0)), b);
    }
  });
}

void dequantize(const DequantizeArgs& a) {
  const QuantShape& s = a.shape;
  const std::int64_t G = s.groups();
  if (s.outer <= 0 || G <= 0 || s.inner <= 0) return;
  if (s.inner == 1) {
    const std::int64_t count = s.outer * G;
    const std::int64_t blocks = ceil_div(count, kGatherCols);
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, blocks), [&](auto range) {
      thread_local TableBlock<kGatherCols> b;
      for (std::int64_t block = range.begin(); block < range.end(); ++block) {
        const std::int64_t k0 = block * kGatherCols;
        dequantize_groups(a, k0, static_cast<int>(std::min<std::int64_t>(kGatherCols, count - k0)),
                          b);
      }
    });
    return;
  }
  const std::int64_t tiles = ceil_div(s.inner, kExpandCols);
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, s.outer * G * tiles), [&](auto range) {
    thread_local TableBlock<kExpandCols> b;
    for (std::int64_t block = range.begin(); block < range.end(); ++block) {
      const std::int64_t i0 = block % tiles * kExpandCols;
      const std::int64_t og = block / tiles;
      dequantize_columns(a, og / G, og % G, i0,
                         static_cast<int>(std::min<std::int64_t>(kExpandCols, s.inner - i0)), b);
    }
  });
}

void quantize_kv_slots(const QuantizeKvSlotsArgs& a) {
  for (int bh = 0; bh < a.batch * a.heads; ++bh) {
    const std::int32_t slot = a.write_slot[bh];
    OFFGEN_CHECK(slot >= 0 && slot < a.capacity,
                 "quantize_kv_slots: slot {} of sequence {} head {} is outside the capacity {}",
                 slot, bh / a.heads, bh % a.heads, a.capacity);
  }
  const QuantShape row{.outer = 1, .dim = a.head_dim, .inner = 1};
  const std::int64_t G = row.groups();
  if (a.batch <= 0 || a.heads <= 0 || G <= 0) return;
  quantize_groups(std::int64_t{a.batch} * a.heads * G, QuantRecipe::fp16_ops, [&](std::int64_t k) {
    const std::int64_t bh = k / G;
    const std::int64_t g = k % G;
    const std::int64_t r = bh * a.capacity + a.write_slot[bh];  // the cache row written
    return GroupRef{a.cache + r * a.head_dim + g * kGroup, rows_of(row, g),
                    a.data + (r * G + g) * kBytes, a.params + (r * G + g) * 2};
  });
}

}  // namespace offgen::kernels::cpu
