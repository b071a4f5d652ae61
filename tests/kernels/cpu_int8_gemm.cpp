// int8 weights on the CPU (kernels/int8_matrix.h): the load-time packer and the int8 linear equal
// the reference byte for byte and bit for bit on every kernel path (AMX's tdpbusd from 16 rows,
// VNNI, and the portable tile that OFFGEN_CPU_ISA selects), a row's bits do not depend on the rows
// beside it, and the result is as close to the exact product as per-row int8 rounding of both
// operands allows. (Not a parity suite of the CUDA kernels: the cuda device refuses int8 weights.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_int8.h"
#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace cpu = kernels::cpu;
namespace ref = kernels::reference;
using kernels::Activation;
using kernels::Int8Shape;

struct Int8Case {
  std::int64_t m;
  int n;
  int k;
};

std::string describe_int8(const Int8Case& s) {
  return "m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k);
}

// m: one row (a decode step), every tile height (1 to 8 rows left in a panel), several panels and
// row blocks; n: tails of the 48-row panels and of AMX's 96-column groups; k: not a multiple of the
// 4-byte quads, across the 512-value chunks, and whole 64-byte tile steps (AMX reads the panels as
// they lie) or not (it reads a padded copy).
const Int8Case kInt8Cases[] = {{1, 1, 1},      {1, 7, 13},      {3, 20, 64},    {8, 48, 32},
                               {17, 33, 100},  {5, 13, 1100},   {40, 37, 33},   {64, 97, 255},
                               {70, 100, 600}, {129, 19, 2051}, {300, 300, 70}, {48, 200, 768},
                               {33, 96, 256},  {10, 49, 130},   {15, 50, 257}};

// The blob of a packed matrix, 64-byte aligned as the weight image keeps it.
struct Blob {
  explicit Blob(const Int8Shape& shape) : bytes((shape.bytes() + 64) / 8) {}
  std::byte* data() { return reinterpret_cast<std::byte*>(bytes.data()); }
  std::vector<std::uint64_t> bytes;
};

const std::vector<std::string> kIsaCaps = {"", "avx512", "avx2", "portable"};

TEST(Int8Weights, ThePackerEqualsTheReferenceByteForByte) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const Int8Case& s : kInt8Cases) {
    SCOPED_TRACE(describe_int8(s));
    auto w = rng.halves(std::size_t(s.n) * s.k, -3, 3);
    // A row of zeros (scale 0) and one with a lone large value (most codes round to 0).
    for (int c = 0; c < s.k; ++c) w[c] = float_to_half(0.0f);
    if (s.n > 1) w[std::size_t(s.k)] = float_to_half(100.0f);
    const Int8Shape shape{s.n, s.k};
    Blob packed(shape), expected(shape);
    cpu::pack_int8_matrix(w.data(), s.n, s.k, packed.data());
    ref::pack_int8_matrix(w.data(), s.n, s.k, expected.data());
    EXPECT_EQ(std::memcmp(packed.data(), expected.data(), shape.bytes()), 0);
  }
}

TEST(Int8Weights, TheReferenceRoundsEachRowToItsOwnScale) {
  // Row 0: amax 2 -> scale 2/127; 1.0 -> 63.5 -> 64 (half to even); -2 -> -127.
  const std::vector<Half> w = {float_to_half(1.0f), float_to_half(-2.0f), float_to_half(0.0f),
                               float_to_half(0.5f), float_to_half(0.0f),  float_to_half(0.0f),
                               float_to_half(0.0f), float_to_half(0.0f)};
  const Int8Shape shape{2, 4};
  Blob blob(shape);
  ref::pack_int8_matrix(w.data(), 2, 4, blob.data());
  const kernels::Int8Matrix m = shape.view(blob.data());
  EXPECT_EQ(m.scales[0], 2.0f / 127.0f);
  EXPECT_EQ(m.codes[shape.code_index(0, 0)], 64);
  EXPECT_EQ(m.codes[shape.code_index(0, 1)], -127);
  EXPECT_EQ(m.codes[shape.code_index(0, 3)], 32);  // 31.75 -> 32
  EXPECT_EQ(m.sums[0], 64 - 127 + 32);
  EXPECT_EQ(m.scales[1], 0.0f);
  EXPECT_EQ(m.sums[1], 0);
}

TEST(Int8Weights, TheCpuKernelEqualsTheReferenceBitForBitOnEveryPath) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const std::string& cap : kIsaCaps) {
    SCOPED_TRACE("OFFGEN_CPU_ISA=" + cap);
    for (const Int8Case& s : kInt8Cases) {
      for (const bool with_bias : {false, true}) {
        const auto act = with_bias ? Activation::relu : Activation::none;
        SCOPED_TRACE(describe_int8(s) + (with_bias ? " bias relu" : ""));
        const auto x = rng.halves(s.m * s.k, -4, 4);
        const auto w = rng.halves(std::size_t(s.n) * s.k, -4, 4);
        const auto b = rng.halves(s.n, -4, 4);
        const Int8Shape shape{s.n, s.k};
        Blob blob(shape);
        ref::pack_int8_matrix(w.data(), s.n, s.k, blob.data());
        Guarded<Half> y(s.m * s.n, half_nan());
        std::vector<Half> expected(s.m * s.n);
        const kernels::Int8Matrix matrix = shape.view(blob.data());
        kernels::LinearArgs args{.x = x.data(),
                                 .bias = with_bias ? b.data() : nullptr,
                                 .y = y.data(),
                                 .rows = s.m,
                                 .out_features = s.n,
                                 .in_features = s.k,
                                 .activation = act,
                                 .prompt_rows = s.m > 4,
                                 .weight_int8 = &matrix};
        {
          const IsaCap isa(cap);
          cpu::linear(args);
        }
        args.y = expected.data();
        ref::linear(args);
        EXPECT_TRUE(y.guards_intact());
        EXPECT_TRUE(finite_and_bitwise_equal(y.values(), expected));
      }
    }
  }
}

// A request's tokens never depend on its batch-mates: the first m rows alone give the bits they
// have among 300, prompt rows or decode rows alike.
TEST(Int8Weights, ARowsBitsDoNotDependOnTheRowCount) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const Int8Case all : {Int8Case{300, 300, 70}, Int8Case{70, 45, 1100}}) {
    SCOPED_TRACE(describe_int8(all));
    const auto x = rng.halves(all.m * all.k, -1, 1);
    const auto w = rng.halves(std::size_t(all.n) * all.k, -1, 1);
    const Int8Shape shape{all.n, all.k};
    Blob blob(shape);
    cpu::pack_int8_matrix(w.data(), all.n, all.k, blob.data());
    std::vector<Half> together(all.m * all.n);
    const kernels::Int8Matrix matrix = shape.view(blob.data());
    kernels::LinearArgs args{.x = x.data(),
                             .y = together.data(),
                             .rows = all.m,
                             .out_features = all.n,
                             .in_features = all.k,
                             .prompt_rows = true,
                             .weight_int8 = &matrix};
    cpu::linear(args);
    for (const std::int64_t m : {1, 3, 7, 8, 9, 33, 64}) {
      for (const bool prompt : {false, true}) {
        SCOPED_TRACE("m=" + std::to_string(m) + (prompt ? " prompt" : " decode"));
        std::vector<Half> fewer(m * all.n);
        args.rows = m;
        args.y = fewer.data();
        args.prompt_rows = prompt;
        cpu::linear(args);
        EXPECT_TRUE(bitwise_equal(
            fewer, std::vector<Half>(together.begin(), together.begin() + m * all.n)));
      }
    }
  }
}

// Against the exact product: x = sx·qx + ex with |ex| <= sx / 2 (sx = max|x| / 127), likewise w,
// so each product is off by at most max|x|·max|w|·(1/127 + 1/(4·127²)); plus the fp32 epilogue
// and the fp16 output's rounding.
TEST(Int8Weights, TheResultIsWithinInt8RoundingOfTheExactProduct) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const Int8Case s{6, 30, 257};
  const auto x = rng.halves(s.m * s.k, -1, 1);
  const auto w = rng.halves(std::size_t(s.n) * s.k, -1, 1);
  const Int8Shape shape{s.n, s.k};
  Blob blob(shape);
  cpu::pack_int8_matrix(w.data(), s.n, s.k, blob.data());
  std::vector<Half> y(s.m * s.n);
  const kernels::Int8Matrix matrix = shape.view(blob.data());
  cpu::linear({.x = x.data(),
               .y = y.data(),
               .rows = s.m,
               .out_features = s.n,
               .in_features = s.k,
               .weight_int8 = &matrix});
  double worst = 0;
  for (std::int64_t i = 0; i < s.m; ++i) {
    double xmax = 0;
    for (int kk = 0; kk < s.k; ++kk)
      xmax = std::max<double>(xmax, std::abs(half_to_float(x[i * s.k + kk])));
    for (int j = 0; j < s.n; ++j) {
      double exact = 0, wmax = 0;
      for (int kk = 0; kk < s.k; ++kk) {
        const double wv = half_to_float(w[std::size_t(j) * s.k + kk]);
        exact += double{half_to_float(x[i * s.k + kk])} * wv;
        wmax = std::max(wmax, std::abs(wv));
      }
      const double bound = s.k * xmax * wmax * (1.0 / 127 + 1.0 / (4.0 * 127 * 127)) +
                           std::abs(exact) * std::ldexp(1.0, -10) + std::ldexp(1.0, -20);
      const double error = std::abs(double{half_to_float(y[i * s.n + j])} - exact);
      EXPECT_LE(error, bound) << "row " << i << " column " << j;
      worst = std::max(worst, error / bound);
    }
  }
  EXPECT_GT(worst, 0.0) << "int8 rounding changed nothing: the operands were not quantized";
}

}  // namespace
}  // namespace offgen::test
