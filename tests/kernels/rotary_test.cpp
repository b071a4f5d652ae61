// Parity of rotary against the reference on the fused QKV: grouped-query layouts (8 q heads over
// 2 kv heads) and heads == kv_heads, head_dim 2 .. 128 (including half a head not a multiple of
// 8), positions up to 100000 with LLaMA's inv_freq tables (theta 10000 and 500000), attention
// scaling, guards around the buffer, and the v heads checked untouched. Bit for bit on the CPU
// sets; on CUDA (whose cosf / sinf differ from the host's) every output must be the header's
// formula with each cos / sin at most 1 fp16 ulp from the host's, every other step exact.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;

struct Shape {
  int heads;
  int kv_heads;
  int head_dim;
};

std::string describe(const Shape& s) {
  return "heads=" + std::to_string(s.heads) + " kv_heads=" + std::to_string(s.kv_heads) +
         " head_dim=" + std::to_string(s.head_dim);
}

std::int64_t row_width(const Shape& s) {
  return std::int64_t{s.heads + 2 * s.kv_heads} * s.head_dim;
}

// LLaMA's default rope: inv_freq[i] = 1 / theta^(2i / D).
std::vector<float> inv_freq_table(double theta, int head_dim) {
  std::vector<float> out(static_cast<std::size_t>(head_dim / 2));
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<float>(1.0 / std::pow(theta, 2.0 * double(i) / head_dim));
  }
  return out;
}

// The fp16 values next to h on either side, and h.
std::array<float, 3> with_neighbours(Half h) {
  // fp16 bits in sign-magnitude order mapped onto the integers (+0 and -0 both to 0).
  const int magnitude = h.bits & 0x7fff;
  const int ordered = (h.bits & 0x8000) != 0 ? -magnitude : magnitude;
  const auto value = [](int o) {
    return half_to_float(Half{static_cast<std::uint16_t>(o < 0 ? 0x8000 | -o : o)});
  };
  return {value(ordered - 1), value(ordered), value(ordered + 1)};
}

float round_to_half(float v) {
  return half_to_float(float_to_half(v));
}

// Every output of the set equals the header's formula with c_i and s_i each within 1 fp16 ulp of
// the host's (CUDA's cosf / sinf are within 2 fp32 ulp, which moves an fp16 value by at most one
// step); products and sums are rounded exactly as the header says. `before` is the input.
::testing::AssertionResult within_one_trig_ulp(const std::vector<Half>& actual,
                                               const std::vector<Half>& before,
                                               const kernels::RotaryArgs& a) {
  const int half_dim = a.head_dim / 2;
  const std::int64_t width = std::int64_t{a.heads + 2 * a.kv_heads} * a.head_dim;
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const auto position = static_cast<float>(std::max(a.positions[r], std::int32_t{0}));
    for (int i = 0; i < half_dim; ++i) {
      const float angle = position * a.inv_freq[i];
      const auto cs = with_neighbours(float_to_half(std::cos(angle) * a.attention_scaling));
      const auto ss = with_neighbours(float_to_half(std::sin(angle) * a.attention_scaling));
      for (int head = 0; head < a.heads + a.kv_heads; ++head) {
        const std::int64_t j = r * width + std::int64_t{head} * a.head_dim + i;
        const float x1 = half_to_float(before[j]);
        const float x2 = half_to_float(before[j + half_dim]);
        bool first_ok = false;
        bool second_ok = false;
        for (const float c : cs) {
          for (const float s : ss) {
            const Half first = float_to_half(round_to_half(x1 * c) - round_to_half(x2 * s));
            const Half second = float_to_half(round_to_half(x2 * c) + round_to_half(x1 * s));
            first_ok = first_ok || first.bits == actual[j].bits;
            second_ok = second_ok || second.bits == actual[j + half_dim].bits;
          }
        }
        if (!first_ok || !second_ok || !std::isfinite(half_to_float(actual[j])) ||
            !std::isfinite(half_to_float(actual[j + half_dim]))) {
          return ::testing::AssertionFailure()
                 << "row " << r << " head " << head << " i " << i << ": got ("
                 << half_to_float(actual[j]) << ", " << half_to_float(actual[j + half_dim])
                 << ") from (" << x1 << ", " << x2 << "), not the rotation by any cos / sin "
                 << "within 1 fp16 ulp of (" << cs[1] << ", " << ss[1] << ")";
        }
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// Rotates a copy of qkv with the set and with the reference; compares them (exact or within one
// trig ulp, by the set) and checks the guards and that every v head is untouched.
void expect_matches_reference(const KernelSet& impl, const std::vector<Half>& qkv,
                              kernels::RotaryArgs args) {
  std::vector<Half> expected = qkv;
  args.qkv = expected.data();
  ref::rotary(args);
  Guarded<Half> actual(qkv);
  args.qkv = actual.data();
  impl.rotary(args);
  const std::vector<Half> got = actual.values();
  EXPECT_TRUE(actual.guards_intact());
  if (impl.exact_trig) {
    // Tolerance: none. The same libm cosf / sinf, and every rounding is specified.
    EXPECT_TRUE(finite_and_bitwise_equal(got, expected));
  } else {
    EXPECT_TRUE(within_one_trig_ulp(got, qkv, args));
  }
  // v heads: bit for bit the input, in every row.
  const std::int64_t width = std::int64_t{args.heads + 2 * args.kv_heads} * args.head_dim;
  const std::int64_t v_start = std::int64_t{args.heads + args.kv_heads} * args.head_dim;
  std::vector<Half> v_before, v_after;
  for (std::int64_t r = 0; r < args.rows; ++r) {
    v_before.insert(v_before.end(), qkv.begin() + r * width + v_start,
                    qkv.begin() + (r + 1) * width);
    v_after.insert(v_after.end(), got.begin() + r * width + v_start, got.begin() + (r + 1) * width);
  }
  EXPECT_TRUE(bitwise_equal(v_after, v_before)) << "rotary wrote into the v heads";
}

class RotaryParity : public ParityTest {};

TEST_P(RotaryParity, MatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const Shape shapes[] = {{8, 2, 64}, {8, 2, 128}, {4, 4, 128}, {8, 8, 64},
                          {8, 2, 2},  {3, 3, 6},   {5, 1, 10},  {1, 1, 2}};
  for (const Shape& shape : shapes) {
    for (const std::int64_t rows : {1, 7, 33}) {
      for (const double theta : {10000.0, 500000.0}) {
        for (const float scaling : {1.0f, 1.2f}) {
          SCOPED_TRACE(describe(shape) + " rows=" + std::to_string(rows) +
                       " theta=" + std::to_string(theta) + " scaling=" + std::to_string(scaling));
          const auto qkv = rng.halves(rows * row_width(shape), -2, 2);
          std::vector<std::int32_t> positions(rows);
          for (auto& p : positions) p = rng.integer(0, 100000);
          // The ends of the range, always: position 0 and the largest angles.
          positions.back() = 100000;
          if (rows > 1) positions.front() = 0;
          const auto inv_freq = inv_freq_table(theta, shape.head_dim);
          expect_matches_reference(impl(), qkv,
                                   {.positions = positions.data(),
                                    .inv_freq = inv_freq.data(),
                                    .attention_scaling = scaling,
                                    .rows = rows,
                                    .heads = shape.heads,
                                    .kv_heads = shape.kv_heads,
                                    .head_dim = shape.head_dim});
        }
      }
    }
  }
}

// At position 0 (and at a negative one, which the header treats as 0) cos = 1 and sin = 0, so
// the rotation returns its input, scaled by the attention scaling: exact on every set.
TEST_P(RotaryParity, PositionZeroIsScaledIdentity) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const Shape shape{8, 2, 64};
  const std::int64_t rows = 4;
  // Integers times 2^-4 in [-2, 2]: x · 2 is exact in fp16, and no input is zero, so no signed
  // zero can come out of x - 0.
  std::vector<Half> qkv(rows * row_width(shape));
  for (auto& h : qkv) {
    const int k = rng.integer(1, 32);
    h = float_to_half(float(rng.integer(0, 1) == 0 ? -k : k) / 16);
  }
  const std::vector<std::int32_t> positions = {0, -1, 0, -100};
  const auto inv_freq = inv_freq_table(10000.0, shape.head_dim);
  for (const float scaling : {1.0f, 2.0f}) {
    SCOPED_TRACE("scaling=" + std::to_string(scaling));
    Guarded<Half> actual(qkv);
    impl().rotary({.qkv = actual.data(),
                   .positions = positions.data(),
                   .inv_freq = inv_freq.data(),
                   .attention_scaling = scaling,
                   .rows = rows,
                   .heads = shape.heads,
                   .kv_heads = shape.kv_heads,
                   .head_dim = shape.head_dim});
    EXPECT_TRUE(actual.guards_intact());
    std::vector<Half> expected = qkv;
    const std::int64_t width = row_width(shape);
    const std::int64_t rotated = std::int64_t{shape.heads + shape.kv_heads} * shape.head_dim;
    for (std::int64_t j = 0; j < rows * width; ++j) {
      if (j % width < rotated) expected[j] = float_to_half(half_to_float(qkv[j]) * scaling);
    }
    EXPECT_TRUE(finite_and_bitwise_equal(actual.values(), expected));
  }
}

TEST_P(RotaryParity, RejectsOddHeadDim) {
  std::vector<Half> qkv(9);
  const std::vector<std::int32_t> positions = {3};
  const std::vector<float> inv_freq = {1.0f};
  EXPECT_THROW(impl().rotary({.qkv = qkv.data(),
                              .positions = positions.data(),
                              .inv_freq = inv_freq.data(),
                              .rows = 1,
                              .heads = 1,
                              .kv_heads = 1,
                              .head_dim = 3}),
               Error);
}

INSTANTIATE_TEST_SUITE_P(All, RotaryParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
