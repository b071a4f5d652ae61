// bf16 prefill GEMMs (PrefillMath::bf16, kernels/linear_args.h) on the CPU: the AVX512-BF16
// kernel equals the reference bit for bit (the reference spells out vdpbf16ps's order, and every
// product is exact in fp32); the AMX kernel, whose tile multiply sums in an order of its own, is
// within fp32's error bound of the exact product of the same bf16 operands; on either a row's
// bits do not depend on the rows beside it; decode rows stay exact; and the reference itself is
// as close to the exact product as bf16 operands allow.
// (Not a parity suite of the CUDA kernels: the cuda device refuses bf16 prefill.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_amx.h"
#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace cpu = kernels::cpu;
namespace ref = kernels::reference;
using kernels::Activation;
using kernels::PrefillMath;

struct Bf16Shape {
  std::int64_t m;
  int n;
  int k;
};

std::string describe_bf16(const Bf16Shape& s) {
  return "m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k);
}

// m: one row, part of an 8-row panel, several panels and row blocks; n: tails of the 48-column
// groups and of their 16-column blocks; k: odd (a zero pads the last pair), across the 32-value
// loads and the 256-value chunks.
const Bf16Shape kBf16Shapes[] = {{1, 1, 1},      {1, 7, 13},     {3, 20, 64},   {8, 48, 32},
                                 {17, 33, 100},  {5, 13, 1100},  {40, 37, 33},  {64, 97, 255},
                                 {70, 100, 600}, {129, 19, 513}, {300, 300, 70}};

kernels::LinearArgs bf16_args(const std::vector<Half>& x, const std::vector<Half>& w,
                              const Half* bias, Half* y, const Bf16Shape& s) {
  return {.x = x.data(),
          .weight = w.data(),
          .bias = bias,
          .y = y,
          .rows = s.m,
          .out_features = s.n,
          .in_features = s.k,
          .prompt_rows = true,
          .prefill_math = PrefillMath::bf16};
}

TEST(Bf16Prefill, TheCpuKernelEqualsTheReferenceBitForBit) {
  if (!kernels::cpu::cpu_features().bf16_gemm()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const IsaCap isa("avx512");  // the vdpbf16ps tile, not AMX's
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const Bf16Shape& s : kBf16Shapes) {
    for (const bool with_bias : {false, true}) {
      for (const auto act : {Activation::none, Activation::relu}) {
        SCOPED_TRACE(describe_bf16(s) + (with_bias ? " bias" : "") +
                     (act == Activation::relu ? " relu" : ""));
        // Wide inputs: products over many binades, so a wrong order or rounding shows.
        const auto x = rng.halves(s.m * s.k, -4, 4);
        const auto w = rng.halves(std::size_t(s.n) * s.k, -4, 4);
        const auto b = rng.halves(s.n, -4, 4);
        Guarded<Half> y(s.m * s.n, half_nan());
        std::vector<Half> expected(s.m * s.n);
        kernels::LinearArgs args = bf16_args(x, w, with_bias ? b.data() : nullptr, y.data(), s);
        args.activation = act;
        cpu::linear(args);
        args.y = expected.data();
        ref::linear(args);
        EXPECT_TRUE(y.guards_intact());
        EXPECT_TRUE(finite_and_bitwise_equal(y.values(), expected));
      }
    }
  }
}

// A request's prefill never depends on its batch-mates: the first m rows alone give the bits they
// have among 300.
TEST(Bf16Prefill, ARowsBitsDoNotDependOnTheRowCount) {
  if (!kernels::cpu::cpu_features().bf16_gemm()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const std::string cap : {"", "avx512"}) {  // AMX where the CPU has it; vdpbf16ps
    for (const Bf16Shape all : {Bf16Shape{300, 300, 70}, Bf16Shape{70, 45, 1100}}) {
      const IsaCap isa(cap);
      SCOPED_TRACE(describe_bf16(all) + " OFFGEN_CPU_ISA=" + cap);
      const auto x = rng.halves(all.m * all.k, -1, 1);
      const auto w = rng.halves(std::size_t(all.n) * all.k, -1, 1);
      std::vector<Half> together(all.m * all.n);
      kernels::LinearArgs args = bf16_args(x, w, nullptr, together.data(), all);
      cpu::linear(args);
      for (const std::int64_t m : {1, 3, 7, 8, 9, 33, 64}) {
        SCOPED_TRACE("m=" + std::to_string(m));
        std::vector<Half> fewer(m * all.n);
        args.rows = m;
        args.y = fewer.data();
        cpu::linear(args);
        EXPECT_TRUE(bitwise_equal(
            fewer, std::vector<Half>(together.begin(), together.begin() + m * all.n)));
      }
    }
  }
}

// AMX's tile multiply (kernels/cpu/linear_amx.h) against the exact sum of the products of the
// same bf16 operands: products of bf16 values are exact in fp32, so what is left is fp32's
// summation error, at most (k + 2)·2^-24 of Σ|products| in any order, and the fp16 output's
// rounding (half an ulp of the result, at most 2^-11 of it; 2^-25 below fp16's normal range),
// with room for the bias's fp32 add: 2^-10 of the result.
TEST(Bf16Prefill, TheAmxKernelIsWithinFp32sBoundOfTheExactProduct) {
  if (!kernels::cpu::use_amx_bf16()) GTEST_SKIP() << "this CPU (or process) has no AMX-BF16";
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const auto bf16 = [](Half h) { return double{bf16_to_float(float_to_bf16(half_to_float(h)))}; };
  for (const Bf16Shape& s : kBf16Shapes) {
    for (const bool with_bias : {false, true}) {
      SCOPED_TRACE(describe_bf16(s) + (with_bias ? " bias relu" : ""));
      const auto x = rng.halves(s.m * s.k, -4, 4);
      const auto w = rng.halves(std::size_t(s.n) * s.k, -4, 4);
      const auto b = rng.halves(s.n, -4, 4);
      Guarded<Half> y(s.m * s.n, half_nan());
      kernels::LinearArgs args = bf16_args(x, w, with_bias ? b.data() : nullptr, y.data(), s);
      args.activation = with_bias ? Activation::relu : Activation::none;
      cpu::linear(args);
      EXPECT_TRUE(y.guards_intact());
      const std::vector<Half> got_y = y.values();
      for (std::int64_t i = 0; i < s.m; ++i) {
        for (int j = 0; j < s.n; ++j) {
          double exact = 0, magnitude = 0;
          for (int kk = 0; kk < s.k; ++kk) {
            const double p = bf16(x[i * s.k + kk]) * bf16(w[std::size_t(j) * s.k + kk]);
            exact += p;
            magnitude += std::abs(p);
          }
          if (with_bias) exact = std::max(0.0, exact + half_to_float(b[j]));
          const double bound = magnitude * (s.k + 2) * std::ldexp(1.0, -24) +
                               std::abs(exact) * std::ldexp(1.0, -10) + std::ldexp(1.0, -25);
          const double got = half_to_float(got_y[std::size_t(i * s.n + j)]);
          ASSERT_LE(std::abs(got - exact), bound) << "row " << i << " column " << j;
        }
      }
    }
  }
}

// Decode rows ignore the prefill's math: the same bits as the exact (fp32) GEMM, on the kernel and
// on the reference.
TEST(Bf16Prefill, DecodeRowsStayExact) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const Bf16Shape s{5, 40, 300};
  const auto x = rng.halves(s.m * s.k, -1, 1);
  const auto w = rng.halves(std::size_t(s.n) * s.k, -1, 1);
  std::vector<Half> bf16(s.m * s.n), fp32(s.m * s.n);
  for (const bool reference : {false, true}) {
    SCOPED_TRACE(reference ? "reference" : "cpu kernel");
    kernels::LinearArgs args = bf16_args(x, w, nullptr, bf16.data(), s);
    args.prompt_rows = false;
    (reference ? ref::linear : cpu::linear)(args);
    args.prefill_math = PrefillMath::fp32;
    args.y = fp32.data();
    (reference ? ref::linear : cpu::linear)(args);
    EXPECT_TRUE(bitwise_equal(bf16, fp32));
  }
}

// The reference against the exact sum: each operand rounded to bf16 is within 2^-9 of itself, so
// a product is within about 2^-8 of the exact one; plus fp32 sums over k terms and the fp16
// output's rounding.
TEST(Bf16Prefill, TheReferenceIsWithinBf16RoundingOfTheExactProduct) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const Bf16Shape s{6, 30, 257};
  const auto x = rng.halves(s.m * s.k, -1, 1);
  const auto w = rng.halves(std::size_t(s.n) * s.k, -1, 1);
  std::vector<Half> y(s.m * s.n);
  ref::linear(bf16_args(x, w, nullptr, y.data(), s));
  double worst = 0;
  for (std::int64_t i = 0; i < s.m; ++i) {
    for (int j = 0; j < s.n; ++j) {
      double exact = 0, magnitude = 0;
      for (int kk = 0; kk < s.k; ++kk) {
        const double p =
            double{half_to_float(x[i * s.k + kk])} * half_to_float(w[std::size_t(j) * s.k + kk]);
        exact += p;
        magnitude += std::abs(p);
      }
      const double bound = magnitude * (std::ldexp(1.0, -8) + (s.k + 2) * std::ldexp(1.0, -24)) +
                           std::abs(exact) * std::ldexp(1.0, -10) + std::ldexp(1.0, -24);
      const double error = std::abs(double{half_to_float(y[i * s.n + j])} - exact);
      EXPECT_LE(error, bound) << "row " << i << " column " << j;
      worst = std::max(worst, error / bound);
    }
  }
  EXPECT_GT(worst, 0.0) << "bf16 rounding changed nothing: the operands were not rounded";
}

}  // namespace
}  // namespace offgen::test
