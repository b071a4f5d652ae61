// Reference 4-bit group-wise quantization: kernels/quantize_args.h written out one group and one
// value at a time, every rounding of PyTorch's op sequence spelled out: h() for fp16 ops, none
// for fp32 ops (each float operation is already one fp32 op's rounding).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "engine/core/error.h"
#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {
namespace {

constexpr std::uint16_t kNaN = 0x7E00;

// One PyTorch fp16 op's rounding of its float result.
float h(float x) {
  return half_to_float(float_to_half(x));
}

struct GroupParams {
  float scale = 0.0f;
  float mn = 0.0f;
};

// The recipe's rounding of one op's float result.
float op(float x, QuantRecipe recipe) {
  return recipe == QuantRecipe::fp16_ops ? h(x) : x;
}

// x(r) is value r of the group for r < rows; the rest is the zero padding.
template <typename Value>
GroupParams group_params(Value x, std::int64_t rows, QuantRecipe recipe) {
  float mn = rows < kQuantGroupSize ? 0.0f : x(0);
  float mx = mn;
  for (std::int64_t r = 0; r < rows; ++r) {
    mn = std::fmin(mn, x(r));
    mx = std::fmax(mx, x(r));
  }
  // -0 + +0 is +0: a zero min / max is stored as +0 whichever zero the group held.
  mn += 0.0f;
  mx += 0.0f;
  const float d = op(mx - mn, recipe);
  const float r = op(1.0f / d, recipe);
  return {op(r * 15.0f, recipe), mn};
}

int code(float x, const GroupParams& p, QuantRecipe recipe) {
  const float t = op(x - p.mn, recipe);
  const float u = op(t * p.scale, recipe);
  const float v = u > 15.0f ? 15.0f : (u > 0.0f ? u : 0.0f);  // NaN (0 · inf) -> 0
  return static_cast<int>(std::nearbyint(v));  // the default rounding mode: half to even
}

// Quantizes the group x(0..rows-1) (+ padding) into bytes data(0..31) and its two params.
template <typename Value, typename Byte>
void quantize_group(Value x, std::int64_t rows, QuantRecipe recipe, Byte data, Half* scale,
                    Half* mn) {
  const GroupParams p = group_params(x, rows, recipe);
  for (int j = 0; j < kQuantGroupSize / 2; ++j) {
    const float even = 2 * j < rows ? x(2 * j) : 0.0f;
    const float odd = 2 * j + 1 < rows ? x(2 * j + 1) : 0.0f;
    data(j) = static_cast<std::uint8_t>(code(even, p, recipe) << 4 | code(odd, p, recipe));
  }
  *scale = float_to_half(p.scale);
  *mn = float_to_half(p.mn);
}

}  // namespace

void quantize(const QuantizeArgs& a) {
  const QuantShape& s = a.shape;
  const std::int64_t G = s.groups();
  for (std::int64_t o = 0; o < s.outer; ++o) {
    for (std::int64_t g = 0; g < G; ++g) {
      for (std::int64_t i = 0; i < s.inner; ++i) {
        const std::int64_t first = g * kQuantGroupSize;
        const auto x = [&](std::int64_t r) {
          return half_to_float(a.x[(o * s.dim + first + r) * s.inner + i]);
        };
        const auto data = [&](std::int64_t j) -> std::uint8_t& {
          return a.data[((o * G + g) * 32 + j) * s.inner + i];
        };
        quantize_group(x, std::min<std::int64_t>(kQuantGroupSize, s.dim - first), a.recipe, data,
                       &a.params[((o * G + g) * 2 + 0) * s.inner + i],
                       &a.params[((o * G + g) * 2 + 1) * s.inner + i]);
      }
    }
  }
}

void dequantize(const DequantizeArgs& a) {
  const QuantShape& s = a.shape;
  const std::int64_t G = s.groups();
  for (std::int64_t o = 0; o < s.outer; ++o) {
    for (std::int64_t g = 0; g < G; ++g) {
      for (std::int64_t i = 0; i < s.inner; ++i) {
        const float scale = half_to_float(a.params[((o * G + g) * 2 + 0) * s.inner + i]);
        const float mn = half_to_float(a.params[((o * G + g) * 2 + 1) * s.inner + i]);
        for (std::int64_t r = 0; r < kQuantGroupSize && g * kQuantGroupSize + r < s.dim; ++r) {
          const std::uint8_t byte = a.data[((o * G + g) * 32 + r / 2) * s.inner + i];
          const int q = r % 2 == 0 ? byte >> 4 : byte & 15;
          Half y = float_to_half(h(static_cast<float>(q) / scale) + mn);
          if (std::isnan(half_to_float(y))) y = Half{kNaN};
          a.x[(o * s.dim + g * kQuantGroupSize + r) * s.inner + i] = y;
        }
      }
    }
  }
}

void quantize_kv_slots(const QuantizeKvSlotsArgs& a) {
  for (int bh = 0; bh < a.batch * a.heads; ++bh) {
    const std::int32_t slot = a.write_slot[bh];
    OFFGEN_CHECK(slot >= 0 && slot < a.capacity,
                 "quantize_kv_slots: slot {} of sequence {} head {} is outside the capacity {}",
                 slot, bh / a.heads, bh % a.heads, a.capacity);
  }
  const QuantShape row{.outer = 1, .dim = a.head_dim, .inner = 1};
  for (int bh = 0; bh < a.batch * a.heads; ++bh) {
    const std::int64_t r = std::int64_t{bh} * a.capacity + a.write_slot[bh];
    quantize({.x = a.cache + r * a.head_dim,
              .data = a.data + r * row.data_bytes(),
              .params = a.params + r * row.param_count(),
              .shape = row});
  }
}

}  // namespace offgen::kernels::reference
