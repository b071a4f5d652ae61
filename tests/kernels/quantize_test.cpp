// Parity of FlexGen's 4-bit group-wise quantization (quantize, dequantize, quantize_kv_slots)
// against the reference: bit for bit, codes, params and expanded values alike. Inputs mix random
// groups with the ones where an implementation could slip: ties that land exactly on .5 after
// scaling, constant and all-zero groups (d == 0, the 0 · inf NaN), groups of ±0, ranges of one
// fp16 ulp or of subnormals (r or scale overflowing to inf), negative-only groups, and a range
// that overflows fp16 (scale 0, which expands to NaN).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;
using kernels::QuantShape;

// Odd dims (one value, one short of a group, exactly one, one over, a 16-value tail, two groups,
// a 8-value tail), inner 1 (KV rows) and wider (weights, inner tiles of 64 with a remainder),
// outer > 1.
const QuantShape kQuantShapes[] = {
    {1, 1, 1},   {1, 63, 1},   {1, 64, 1},   {1, 65, 1},   {3, 80, 1},  {2, 128, 1},
    {1, 200, 1}, {300, 64, 1}, {97, 80, 1},  {1, 1, 7},    {1, 63, 5},  {1, 64, 96},
    {2, 65, 33}, {1, 80, 130}, {3, 128, 17}, {1, 200, 96}, {4, 200, 2}, {2, 130, 200},
};

std::string describe(const QuantShape& s) {
  return "outer=" + std::to_string(s.outer) + " dim=" + std::to_string(s.dim) +
         " inner=" + std::to_string(s.inner);
}

// The values of one group, rows of them (the rest is padding).
std::vector<Half> group_values(Rng& rng, int rows, bool allow_overflow) {
  std::vector<Half> v(static_cast<std::size_t>(rows));
  const auto fill = [&](auto value) {
    for (int r = 0; r < rows; ++r) v[std::size_t(r)] = value(r);
  };
  int kind = rng.integer(0, 11);
  if (kind == 11 && !allow_overflow) kind = 0;
  switch (kind) {
    case 0:
    case 1:
    case 2: {  // random, anywhere, at any width
      const float center = rng.uniform(-4, 4);
      const float width = std::pow(10.0f, rng.uniform(-3, 1));
      fill([&](int) { return float_to_half(center + width * rng.uniform(-0.5f, 0.5f)); });
      break;
    }
    case 3: {  // constant
      const Half c = float_to_half(rng.uniform(-3, 3));
      fill([&](int) { return c; });
      break;
    }
    case 4:  // all zero
      fill([](int) { return Half{0}; });
      break;
    case 5:  // negative only
      fill([&](int) { return float_to_half(rng.uniform(-2.0f, -0.1f)); });
      break;
    case 6: {  // ties: mn = base, mx = base + 15 make scale exactly 1, so k + 0.5 hits a .5
      const int base = rng.integer(-8, 0);
      fill([&](int r) {
        if (r == 0) return float_to_half(float(base));
        if (r == 1) return float_to_half(float(base + 15));
        return float_to_half(float(base + rng.integer(0, 14)) + 0.5f * float(rng.integer(0, 1)));
      });
      break;
    }
    case 7: {  // zeros of both signs, alone or among other values
      const bool only_zeros = rng.integer(0, 1) == 0;
      fill([&](int) {
        const int pick = rng.integer(0, only_zeros ? 1 : 3);
        const float others[] = {0.0f, 0.0f, 0.25f, -0.5f};
        return pick == 1 ? Half{0x8000} : float_to_half(others[pick]);
      });
      break;
    }
    case 8: {  // a range of a few fp16 ulps: r and scale near or past fp16's max
      const Half base = float_to_half(rng.uniform(-1, 1));
      fill([&](int) { return Half{static_cast<std::uint16_t>(base.bits + rng.integer(0, 2))}; });
      break;
    }
    case 9:  // subnormals: d = 2^-24 gives r = inf
      fill([&](int) { return Half{static_cast<std::uint16_t>(rng.integer(0, 3))}; });
      break;
    case 10:  // a large range: 15 / d far below 1
      fill([&](int) { return float_to_half(rng.uniform(-30000, 30000)); });
      break;
    default:  // d overflows to inf: scale 0, and 0 / 0 on the way back
      fill([&](int r) { return float_to_half(r == 0 ? -60000.0f : rng.uniform(-60000, 60000)); });
      if (rows > 1) v[1] = float_to_half(60000.0f);
      break;
  }
  return v;
}

// x of shape s, each group (o, g, i) drawn by group_values.
std::vector<Half> quant_input(Rng& rng, const QuantShape& s, bool allow_overflow) {
  std::vector<Half> x(static_cast<std::size_t>(s.values()));
  for (std::int64_t o = 0; o < s.outer; ++o) {
    for (std::int64_t g = 0; g < s.groups(); ++g) {
      const int rows = static_cast<int>(std::min<std::int64_t>(64, s.dim - g * 64));
      for (std::int64_t i = 0; i < s.inner; ++i) {
        const auto v = group_values(rng, rows, allow_overflow);
        for (int r = 0; r < rows; ++r) {
          x[std::size_t((o * s.dim + g * 64 + r) * s.inner + i)] = v[std::size_t(r)];
        }
      }
    }
  }
  return x;
}

::testing::AssertionResult bytes_equal(const std::vector<std::uint8_t>& actual,
                                       const std::vector<std::uint8_t>& expected) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "size " << actual.size() << " != " << expected.size();
  }
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] != expected[i]) {
      std::ostringstream what;  // one stream: AssertionResult drops manipulators between <<s
      what << "byte " << i << ": 0x" << std::hex << int(actual[i]) << " != 0x" << int(expected[i]);
      return ::testing::AssertionFailure() << what.str();
    }
  }
  return ::testing::AssertionSuccess();
}

struct Packed {
  std::vector<std::uint8_t> data;
  std::vector<Half> params;
};

Packed reference_packed(const std::vector<Half>& x, const QuantShape& s,
                        kernels::QuantRecipe recipe = kernels::QuantRecipe::fp16_ops) {
  Packed p{std::vector<std::uint8_t>(std::size_t(s.data_bytes())),
           std::vector<Half>(std::size_t(s.param_count()))};
  ref::quantize({.x = x.data(),
                 .data = p.data.data(),
                 .params = p.params.data(),
                 .shape = s,
                 .recipe = recipe});
  return p;
}

// Both of FlexGen's op orders: fp16 ops (the KV cache) and fp32 ops (weights, at load).
constexpr kernels::QuantRecipe kRecipes[] = {kernels::QuantRecipe::fp16_ops,
                                             kernels::QuantRecipe::fp32_ops};

const char* recipe_name(kernels::QuantRecipe recipe) {
  return recipe == kernels::QuantRecipe::fp16_ops ? "fp16 ops" : "fp32 ops";
}

class QuantizeParity : public ParityTest {};

TEST_P(QuantizeParity, QuantizeMatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto recipe : kRecipes) {
    SCOPED_TRACE(recipe_name(recipe));
    for (const auto& s : kQuantShapes) {
      SCOPED_TRACE(describe(s));
      const auto x = quant_input(rng, s, /*allow_overflow=*/true);
      Guarded<std::uint8_t> data(std::size_t(s.data_bytes()), 0xEE);
      Guarded<Half> params(std::size_t(s.param_count()), half_nan());
      impl().quantize({.x = x.data(),
                       .data = data.data(),
                       .params = params.data(),
                       .shape = s,
                       .recipe = recipe});
      const Packed expected = reference_packed(x, s, recipe);
      EXPECT_TRUE(data.guards_intact());
      EXPECT_TRUE(params.guards_intact());
      EXPECT_TRUE(bytes_equal(data.values(), expected.data));
      EXPECT_TRUE(bitwise_equal(params.values(), expected.params));
    }
  }
}

// Packed tensors as quantize makes them, and with random bytes (every code at every position,
// padding included) under the same params.
TEST_P(QuantizeParity, DequantizeMatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& s : kQuantShapes) {
    SCOPED_TRACE(describe(s));
    Packed packed = reference_packed(quant_input(rng, s, /*allow_overflow=*/true), s);
    for (const bool random_bytes : {false, true}) {
      SCOPED_TRACE(random_bytes ? "random bytes" : "quantized bytes");
      if (random_bytes) {
        for (auto& b : packed.data) b = static_cast<std::uint8_t>(rng.integer(0, 255));
      }
      Guarded<Half> x(std::size_t(s.values()), half_nan());
      impl().dequantize(
          {.data = packed.data.data(), .params = packed.params.data(), .x = x.data(), .shape = s});
      std::vector<Half> expected(std::size_t(s.values()), half_nan());
      ref::dequantize({.data = packed.data.data(),
                       .params = packed.params.data(),
                       .x = expected.data(),
                       .shape = s});
      EXPECT_TRUE(x.guards_intact());
      EXPECT_TRUE(bitwise_equal(x.values(), expected));
    }
  }
}

// Dequantize writes only the tensor's real positions: each outer slice on its own, between
// guards, with nonzero codes in its padding, leaves the guards after its last row intact.
TEST_P(QuantizeParity, DequantizeNeverWritesPadding) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& s : kQuantShapes) {
    if (s.dim % 64 == 0) continue;
    SCOPED_TRACE(describe(s));
    const QuantShape slice{.outer = 1, .dim = s.dim, .inner = s.inner};
    std::vector<std::uint8_t> data(std::size_t(slice.data_bytes()));
    for (auto& b : data) b = static_cast<std::uint8_t>(rng.integer(1, 255));
    const auto params = rng.halves(std::size_t(slice.param_count()), 0.5f, 2.0f);
    Guarded<Half> x(std::size_t(slice.values()), half_nan());
    impl().dequantize(
        {.data = data.data(), .params = params.data(), .x = x.data(), .shape = slice});
    EXPECT_TRUE(x.guards_intact());
  }
}

// Quantize then dequantize gives the reference's round trip, and a constant group comes back
// exactly.
TEST_P(QuantizeParity, RoundTripMatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& s : kQuantShapes) {
    SCOPED_TRACE(describe(s));
    const auto x = quant_input(rng, s, /*allow_overflow=*/false);
    std::vector<std::uint8_t> data(std::size_t(s.data_bytes()));
    std::vector<Half> params(std::size_t(s.param_count()));
    impl().quantize({.x = x.data(), .data = data.data(), .params = params.data(), .shape = s});
    Guarded<Half> y(std::size_t(s.values()), half_nan());
    impl().dequantize({.data = data.data(), .params = params.data(), .x = y.data(), .shape = s});
    const Packed packed = reference_packed(x, s);
    std::vector<Half> expected(std::size_t(s.values()));
    ref::dequantize({.data = packed.data.data(),
                     .params = packed.params.data(),
                     .x = expected.data(),
                     .shape = s});
    EXPECT_TRUE(y.guards_intact());
    EXPECT_TRUE(bitwise_equal(y.values(), expected));
    // Finite inputs of a fp16-sized range never come back as NaN.
    for (const Half v : y.values()) ASSERT_FALSE(std::isnan(half_to_float(v)));
  }
}

struct KvCase {
  int batch, heads, capacity, head_dim;
};

// head_dim of OPT (64, 80, 128) and odd ones (1, 63, 130: a 2-value tail group).
const KvCase kKvCases[] = {{1, 1, 1, 64}, {2, 3, 5, 64}, {3, 2, 4, 80},  {2, 4, 7, 128},
                           {1, 2, 3, 63}, {4, 5, 9, 1},  {2, 2, 6, 130}, {8, 12, 17, 64}};

TEST_P(QuantizeParity, QuantizeKvSlotsMatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& c : kKvCases) {
    SCOPED_TRACE("batch=" + std::to_string(c.batch) + " heads=" + std::to_string(c.heads) +
                 " capacity=" + std::to_string(c.capacity) +
                 " head_dim=" + std::to_string(c.head_dim));
    const std::int64_t rows = std::int64_t{c.batch} * c.heads * c.capacity;
    const QuantShape row{.outer = 1, .dim = c.head_dim, .inner = 1};
    const auto cache = quant_input(rng, {rows, c.head_dim, 1}, /*allow_overflow=*/false);
    std::vector<std::int32_t> slots(std::size_t(c.batch) * c.heads);  // per (sequence, head)
    for (auto& s : slots) s = rng.integer(0, c.capacity - 1);
    slots.front() = 0;
    slots.back() = c.capacity - 1;
    // Rows not written must keep what they held.
    std::vector<std::uint8_t> data_init(std::size_t(rows * row.data_bytes()));
    for (auto& b : data_init) b = static_cast<std::uint8_t>(rng.integer(0, 255));
    const auto params_init = rng.halves(std::size_t(rows * row.param_count()), -1, 1);
    Guarded<std::uint8_t> data(data_init);
    Guarded<Half> params(params_init);
    kernels::QuantizeKvSlotsArgs args{.cache = cache.data(),
                                      .write_slot = slots.data(),
                                      .data = data.data(),
                                      .params = params.data(),
                                      .batch = c.batch,
                                      .heads = c.heads,
                                      .capacity = c.capacity,
                                      .head_dim = c.head_dim};
    impl().quantize_kv_slots(args);
    std::vector<std::uint8_t> data_expected = data_init;
    std::vector<Half> params_expected = params_init;
    args.data = data_expected.data();
    args.params = params_expected.data();
    ref::quantize_kv_slots(args);
    EXPECT_TRUE(data.guards_intact());
    EXPECT_TRUE(params.guards_intact());
    EXPECT_TRUE(bytes_equal(data.values(), data_expected));
    EXPECT_TRUE(bitwise_equal(params.values(), params_expected));
    // The written rows are exactly quantize's packing of those cache rows.
    for (int bh = 0; bh < c.batch * c.heads; ++bh) {
      const std::int64_t r = std::int64_t{bh} * c.capacity + slots[std::size_t(bh)];
      std::vector<std::uint8_t> d(std::size_t(row.data_bytes()));
      std::vector<Half> p(std::size_t(row.param_count()));
      ref::quantize(
          {.x = cache.data() + r * c.head_dim, .data = d.data(), .params = p.data(), .shape = row});
      const auto got = data.values();
      EXPECT_TRUE(bytes_equal(
          {got.begin() + r * row.data_bytes(), got.begin() + (r + 1) * row.data_bytes()}, d));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, QuantizeParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
