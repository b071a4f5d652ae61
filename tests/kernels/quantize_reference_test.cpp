// Hand-worked checks of the reference 4-bit quantization (the parity suite's truth), its golden
// check against PyTorch running FlexGen's own compress / decompress (tests/data/golden/quantize,
// made by tools/make_quant_golden.py), and the CPU kernels' precondition error. CPU only: the gpu
// binary leaves *reference_test.cpp out.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "kernels/cpu/quantize.h"
#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"
#include "tests/support/test_support.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;
using kernels::QuantShape;

std::vector<Half> halves(const std::vector<float>& values) {
  std::vector<Half> out;
  for (float v : values) out.push_back(float_to_half(v));
  return out;
}

struct ReferencePacked {
  std::vector<std::uint8_t> data;
  std::vector<Half> params;
};

ReferencePacked quantized(const std::vector<Half>& x, const QuantShape& s,
                          kernels::QuantRecipe recipe = kernels::QuantRecipe::fp16_ops) {
  ReferencePacked p{std::vector<std::uint8_t>(std::size_t(s.data_bytes())),
                    std::vector<Half>(std::size_t(s.param_count()))};
  ref::quantize({.x = x.data(),
                 .data = p.data.data(),
                 .params = p.params.data(),
                 .shape = s,
                 .recipe = recipe});
  return p;
}

std::vector<Half> dequantized(const ReferencePacked& p, const QuantShape& s) {
  std::vector<Half> y(std::size_t(s.values()), half_nan());
  ref::dequantize({.data = p.data.data(), .params = p.params.data(), .x = y.data(), .shape = s});
  return y;
}

static_assert(kernels::quantized_bytes({.outer = 1, .dim = 64, .inner = 1}) == 36);

TEST(QuantizeReference, ThirtySixBytesPerSixtyFourValues) {
  const QuantShape group{.outer = 1, .dim = 64, .inner = 1};
  EXPECT_EQ(group.groups(), 1);
  EXPECT_EQ(group.data_bytes(), 32);
  EXPECT_EQ(group.param_count(), 2);
  // opt-1.3b's fc1 weight [8192, 2048] grouped along its 8192 rows: 128 groups per column.
  const QuantShape fc1{.outer = 1, .dim = 8192, .inner = 2048};
  EXPECT_EQ(fc1.groups(), 128);
  EXPECT_EQ(kernels::quantized_bytes(fc1), 8192 * 2048 / 64 * 36);
  // A tail group costs a whole group: 65 values take two.
  const QuantShape tail{.outer = 3, .dim = 65, .inner = 5};
  EXPECT_EQ(tail.groups(), 2);
  EXPECT_EQ(tail.data_bytes(), 3 * 2 * 32 * 5);
  EXPECT_EQ(tail.param_count(), 3 * 2 * 2 * 5);
  EXPECT_EQ(kernels::quantized_bytes(tail), 3 * 2 * 36 * 5);
}

// 0..15 (with 48 zeros of padding): mn 0, mx 15, so scale = h(h(1 / 15) * 15) = 1 exactly, the
// codes are the values, packed even index high: 0x01, 0x23, ..., 0xEF, then the padding's code 0.
TEST(QuantizeReference, ZeroToFifteenAreTheirOwnCodes) {
  std::vector<float> values;
  for (int v = 0; v < 16; ++v) values.push_back(float(v));
  const QuantShape s{.outer = 1, .dim = 16, .inner = 1};
  const auto x = halves(values);
  const ReferencePacked p = quantized(x, s);
  std::vector<std::uint8_t> expected(32, 0);
  for (int j = 0; j < 8; ++j) expected[std::size_t(j)] = std::uint8_t(0x10 * (2 * j) + 2 * j + 1);
  EXPECT_EQ(p.data, expected);
  EXPECT_EQ(p.data[0], 0x01);
  EXPECT_EQ(p.data[7], 0xEF);
  EXPECT_EQ(half_to_float(p.params[0]), 1.0f);  // scale
  EXPECT_EQ(p.params[1].bits, 0);               // mn = +0
  EXPECT_TRUE(bitwise_equal(dequantized(p, s), x));
}

// The same values across a wide tensor's inner dimension: byte (g * 32 + j, i) packs rows 2j and
// 2j + 1 of column i.
TEST(QuantizeReference, PackingFollowsInner) {
  const QuantShape s{.outer = 1, .dim = 16, .inner = 2};
  std::vector<float> values;
  for (int v = 0; v < 16; ++v) {
    values.push_back(float(v));       // column 0: 0..15
    values.push_back(float(15 - v));  // column 1: 15..0
  }
  const ReferencePacked p = quantized(halves(values), s);
  EXPECT_EQ(p.data[0], 0x01);                   // (j 0, i 0)
  EXPECT_EQ(p.data[1], 0xFE);                   // (j 0, i 1)
  EXPECT_EQ(p.data[2 * 7], 0xEF);               // (j 7, i 0)
  EXPECT_EQ(p.data[2 * 8 + 1], 0);              // padding of column 1
  EXPECT_EQ(half_to_float(p.params[0]), 1.0f);  // (g 0, scale, i 0)
  EXPECT_EQ(half_to_float(p.params[1]), 1.0f);  // (g 0, scale, i 1)
  EXPECT_EQ(half_to_float(p.params[2]), 0.0f);  // (g 0, mn, i 0)
}

// Ties land on .5 when scale is 1 and round half to even; the padding's zero takes part in the
// min and max and gets a code of its own.
TEST(QuantizeReference, TiesRoundHalfToEvenAndPaddingCounts) {
  const QuantShape s{.outer = 1, .dim = 4, .inner = 1};
  // Values 0.5, 1.5, 2.5, 15: with the padding 0, mn 0, mx 15, scale 1.
  const ReferencePacked p = quantized(halves({0.5f, 1.5f, 2.5f, 15.0f}), s);
  EXPECT_EQ(p.data[0], 0x02);  // 0.5 -> 0, 1.5 -> 2
  EXPECT_EQ(p.data[1], 0x2F);  // 2.5 -> 2, 15 -> 15
  // Negative values only: [-1, -2] + padding 0: mn -2, mx 0 (the padding), d 2, r 0.5, scale 7.5;
  // -1 -> t 1 -> u 7.5 -> 8 (even), -2 -> 0, the padding -> t 2 -> u 15.
  const QuantShape two{.outer = 1, .dim = 2, .inner = 1};
  const ReferencePacked n = quantized(halves({-1.0f, -2.0f}), two);
  EXPECT_EQ(n.data[0], 0x80);
  EXPECT_EQ(n.data[1], 0xFF);
  EXPECT_EQ(half_to_float(n.params[0]), 7.5f);
  EXPECT_EQ(half_to_float(n.params[1]), -2.0f);
  // Back: h(h(8 / 7.5) + -2) = h(1.06640625 - 2) = -0.93359375; the padding is not written.
  const auto y = dequantized(n, two);
  EXPECT_EQ(to_floats(y), (std::vector<float>{-0.93359375f, -2.0f}));
}

// A group of equal values: d = 0, so r = scale = +inf and every t · scale is 0 · inf; the codes
// are 0 and dequantization gives the constant back exactly. All zeros likewise.
TEST(QuantizeReference, ConstantGroupsAreCodeZeroAndComeBackExactly) {
  const QuantShape s{.outer = 2, .dim = 64, .inner = 1};
  std::vector<float> values(64, 2.5f);
  values.resize(128, 0.0f);
  const auto x = halves(values);
  const ReferencePacked p = quantized(x, s);
  EXPECT_EQ(p.data, std::vector<std::uint8_t>(64, 0));
  EXPECT_EQ(p.params[0].bits, 0x7C00);  // +inf
  EXPECT_EQ(half_to_float(p.params[1]), 2.5f);
  EXPECT_EQ(p.params[2].bits, 0x7C00);
  EXPECT_EQ(p.params[3].bits, 0);
  EXPECT_TRUE(bitwise_equal(dequantized(p, s), x));
}

// -0 and +0 in one group: the min and max are stored as +0, so every implementation agrees.
TEST(QuantizeReference, ZeroMinIsPositiveZero) {
  const QuantShape s{.outer = 1, .dim = 64, .inner = 1};
  std::vector<Half> x(64, Half{0x8000});
  x[5] = Half{0};
  const ReferencePacked p = quantized(x, s);
  EXPECT_EQ(p.params[0].bits, 0x7C00);
  EXPECT_EQ(p.params[1].bits, 0);
  EXPECT_EQ(p.data, std::vector<std::uint8_t>(32, 0));
}

// A range past fp16's max: d = inf, r = 0, scale = 0; back, 0 / 0 is NaN, stored as 0x7E00.
TEST(QuantizeReference, OverflowedRangeComesBackAsOneNaN) {
  const QuantShape s{.outer = 1, .dim = 2, .inner = 1};
  const ReferencePacked p = quantized(halves({-60000.0f, 60000.0f}), s);
  EXPECT_EQ(p.params[0].bits, 0);
  const auto y = dequantized(p, s);
  EXPECT_EQ(y[0].bits, 0x7E00);
  EXPECT_EQ(y[1].bits, 0x7E00);
}

TEST(QuantizeReference, KvSlotsPackOnlyTheWrittenRows) {
  // batch 1, heads 2, capacity 3, head_dim 16: head 0 writes slot 2, head 1 slot 0.
  std::vector<float> values(2 * 3 * 16);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = float(i % 16);
  const auto cache = halves(values);
  const std::vector<std::int32_t> slots{2, 0};
  std::vector<std::uint8_t> data(6 * 32, 0xAA);
  std::vector<Half> params(6 * 2, Half{0x1234});
  ref::quantize_kv_slots({.cache = cache.data(),
                          .write_slot = slots.data(),
                          .data = data.data(),
                          .params = params.data(),
                          .batch = 1,
                          .heads = 2,
                          .capacity = 3,
                          .head_dim = 16});
  for (int row = 0; row < 6; ++row) {
    const bool written = row == 2 || row == 3;  // (h 0, slot 2) and (h 1, slot 0)
    EXPECT_EQ(data[std::size_t(row) * 32], written ? 0x01 : 0xAA) << "row " << row;
    EXPECT_EQ(params[std::size_t(row) * 2].bits, written ? 0x3C00 : 0x1234) << "row " << row;
  }
}

TEST(QuantizeCpu, KvSlotsRejectSlotsOutsideCapacity) {
  const std::vector<Half> cache(2 * 2 * 64);
  std::vector<std::uint8_t> data(2 * 2 * 32, 0xAA);
  std::vector<Half> params(2 * 2 * 2);
  for (const std::int32_t bad : {-1, 2}) {
    const std::vector<std::int32_t> slots{0, bad};
    const kernels::QuantizeKvSlotsArgs args{.cache = cache.data(),
                                            .write_slot = slots.data(),
                                            .data = data.data(),
                                            .params = params.data(),
                                            .batch = 1,
                                            .heads = 2,
                                            .capacity = 2,
                                            .head_dim = 64};
    EXPECT_THROW(kernels::cpu::quantize_kv_slots(args), Error);
    EXPECT_THROW(ref::quantize_kv_slots(args), Error);
    // Checked before anything is written: head 0's good slot is untouched too.
    EXPECT_EQ(data, std::vector<std::uint8_t>(2 * 2 * 32, 0xAA));
  }
}

// ---- golden: PyTorch running FlexGen's compress / decompress ----------------------------------

struct GoldenCase {
  std::string name;
  kernels::QuantRecipe recipe;
  QuantShape shape;
  std::vector<Half> x;
  std::vector<std::uint8_t> data;
  std::vector<Half> params;
  std::vector<Half> y;
};

template <typename T>
std::vector<T> slice(const std::string& blob, const nlohmann::json& where) {
  const auto offset = where["offset"].get<std::size_t>();
  const auto bytes = where["bytes"].get<std::size_t>();
  std::vector<T> out(bytes / sizeof(T));
  if (offset + bytes <= blob.size()) std::memcpy(out.data(), blob.data() + offset, bytes);
  return out;
}

std::vector<GoldenCase> golden_cases() {
  const auto dir = data_dir() / "golden" / "quantize";
  std::ifstream in(dir / "cases.json");
  const auto manifest = nlohmann::json::parse(in);
  std::vector<GoldenCase> cases;
  for (const auto& c : manifest["cases"]) {
    const std::string blob = read_file(dir / c["file"].get<std::string>());
    const std::string recipe = c["recipe"].get<std::string>();
    EXPECT_TRUE(recipe == "fp16" || recipe == "fp32") << recipe;
    cases.push_back(
        {c["name"].get<std::string>(),
         recipe == "fp32" ? kernels::QuantRecipe::fp32_ops : kernels::QuantRecipe::fp16_ops,
         {c["outer"].get<std::int64_t>(), c["dim"].get<std::int64_t>(),
          c["inner"].get<std::int64_t>()},
         slice<Half>(blob, c["x"]),
         slice<std::uint8_t>(blob, c["data"]),
         slice<Half>(blob, c["params"]),
         slice<Half>(blob, c["y"])});
  }
  return cases;
}

// The reference and the CPU kernels give PyTorch's bytes, params and values bit for bit, by the
// fp16 recipe (the KV cache, FlexGen's GPU path) and the fp32 one (weights, its load-time CPU
// path).
TEST(QuantizeGolden, MatchesFlexGenOnPyTorch) {
  const auto cases = golden_cases();
  ASSERT_EQ(cases.size(), 5u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const QuantShape& s = c.shape;
    ASSERT_EQ(c.x.size(), std::size_t(s.values()));
    ASSERT_EQ(c.data.size(), std::size_t(s.data_bytes()));
    ASSERT_EQ(c.params.size(), std::size_t(s.param_count()));
    ASSERT_EQ(c.y.size(), std::size_t(s.values()));
    const ReferencePacked p = quantized(c.x, s, c.recipe);
    EXPECT_EQ(p.data, c.data);
    EXPECT_TRUE(bitwise_equal(p.params, c.params));
    EXPECT_TRUE(bitwise_equal(dequantized({c.data, c.params}, s), c.y));

    std::vector<std::uint8_t> data(c.data.size());
    std::vector<Half> params(c.params.size());
    std::vector<Half> y(c.y.size());
    kernels::cpu::quantize({.x = c.x.data(),
                            .data = data.data(),
                            .params = params.data(),
                            .shape = s,
                            .recipe = c.recipe});
    kernels::cpu::dequantize(
        {.data = c.data.data(), .params = c.params.data(), .x = y.data(), .shape = s});
    EXPECT_EQ(data, c.data);
    EXPECT_TRUE(bitwise_equal(params, c.params));
    EXPECT_TRUE(bitwise_equal(y, c.y));
  }
}

}  // namespace
}  // namespace offgen::test
