// Parity of linear against the reference, over shapes that cover every CPU GEMM path and tail.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;
using kernels::Activation;

struct LinearShape {
  std::int64_t m;
  int n;
  int k;
};

// m covers the CPU's dot path (m < 32) and panel path (whole and partial panels, two m-blocks);
// n leaves a tail in every n-blocking; k is odd, crosses the 16-float padding and the k-chunks
// (512 for panels, 1024 for dots).
// (Panels are 32 rows with AVX-512, 16 with AVX2: 49 and 58 leave tails just over half a panel.)
const LinearShape kLinearShapes[] = {{1, 1, 1},      {1, 7, 13},    {3, 20, 64},    {17, 33, 100},
                                     {1, 50, 768},   {5, 13, 1100}, {32, 25, 64},   {40, 37, 13},
                                     {49, 30, 64},   {58, 11, 70},  {70, 100, 600}, {129, 19, 130},
                                     {33, 200, 1100}};

std::string describe(const LinearShape& s) {
  return "m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k);
}

// Inputs in [-r, r] (bias too): Σ|x·w| + |b| <= k·r² + r.
Tolerance linear_tolerance(int k, double r) {
  const double magnitude = k * r * r + r;
  return {(k + 2) * kFloatEps * magnitude + kHalfMin, kHalfUlp,
          "fp16 output rounding: 1 ulp (2^-10 relative) since the implementation rounds an fp32 "
          "sum, the reference the exact one; plus fp32 accumulation over k terms in any order, "
          "(k+2)·2^-24·(Σ|x·w|+|b|) (Higham's bound); plus 2^-24 for fp16 subnormals"};
}

class LinearParity : public ParityTest {};

TEST_P(LinearParity, MatchesReferenceWithAndWithoutBiasAndRelu) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& s : kLinearShapes) {
    for (const bool with_bias : {false, true}) {
      for (const auto act : {Activation::none, Activation::relu}) {
        SCOPED_TRACE(describe(s) + (with_bias ? " bias" : " no-bias") +
                     (act == Activation::relu ? " relu" : " none"));
        for (const bool prompt : {false, true}) {
          SCOPED_TRACE(prompt ? "prompt rows" : "decode rows");
          const auto x = rng.halves(s.m * s.k, -1, 1);
          const auto w = rng.halves(std::size_t(s.n) * s.k, -1, 1);
          const auto b = rng.halves(s.n, -1, 1);
          const Half* bias = with_bias ? b.data() : nullptr;
          Guarded<Half> y(s.m * s.n, half_nan());
          std::vector<Half> expected(s.m * s.n);
          kernels::LinearArgs args{.x = x.data(),
                                   .weight = w.data(),
                                   .bias = bias,
                                   .y = y.data(),
                                   .rows = s.m,
                                   .out_features = s.n,
                                   .in_features = s.k,
                                   .activation = act,
                                   .prompt_rows = prompt};
          impl().linear(args);
          args.y = expected.data();
          ref::linear(args);
          EXPECT_TRUE(y.guards_intact());
          EXPECT_TRUE(all_close(y.values(), expected, linear_tolerance(s.k, 1.0)));
        }
      }
    }
  }
}

// Wider inputs: outputs spread over many fp16 binades (|y| up to ~200).
TEST_P(LinearParity, MatchesReferenceWithWideInputs) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const LinearShape s : {LinearShape{3, 45, 100}, LinearShape{64, 40, 300}})
    for (const bool prompt : {false, true}) {
      SCOPED_TRACE(describe(s) + (prompt ? " prompt rows" : " decode rows"));
      const auto x = rng.halves(s.m * s.k, -4, 4);
      const auto w = rng.halves(std::size_t(s.n) * s.k, -4, 4);
      const auto b = rng.halves(s.n, -4, 4);
      Guarded<Half> y(s.m * s.n, half_nan());
      std::vector<Half> expected(s.m * s.n);
      kernels::LinearArgs args{.x = x.data(),
                               .weight = w.data(),
                               .bias = b.data(),
                               .y = y.data(),
                               .rows = s.m,
                               .out_features = s.n,
                               .in_features = s.k,
                               .prompt_rows = prompt};
      impl().linear(args);
      args.y = expected.data();
      ref::linear(args);
      EXPECT_TRUE(y.guards_intact());
      EXPECT_TRUE(all_close(y.values(), expected, linear_tolerance(s.k, 4.0)));
    }
}

// Same inputs, same bits: blocking and threading must not change the summation order run to run.
TEST_P(LinearParity, IsDeterministic) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const LinearShape s : {LinearShape{3, 70, 100}, LinearShape{70, 100, 600}})
    for (const bool prompt : {false, true}) {
      SCOPED_TRACE(describe(s) + (prompt ? " prompt rows" : " decode rows"));
      const auto x = rng.halves(s.m * s.k, -1, 1);
      const auto w = rng.halves(std::size_t(s.n) * s.k, -1, 1);
      std::vector<Half> first(s.m * s.n), second(s.m * s.n);
      kernels::LinearArgs args{.x = x.data(),
                               .weight = w.data(),
                               .y = first.data(),
                               .rows = s.m,
                               .out_features = s.n,
                               .in_features = s.k,
                               .prompt_rows = prompt};
      impl().linear(args);
      args.y = second.data();
      impl().linear(args);
      EXPECT_TRUE(bitwise_equal(second, first));
    }
}

// A row's output bits never depend on how many rows share the call: the same requests in a batch
// of 1, of 31 or of 70 must give the same tokens (their batch-mates never change a result), so
// the CPU GEMM sums every output in one order whatever the row count (k = 4100 splits the rows
// into blocks that fit L2), for decode rows and for prompt rows (each kind its own order; 600
// rows of 300 columns split prompt rows into several row blocks of several column groups).
TEST_P(LinearParity, ARowsBitsDoNotDependOnTheRowCount) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const LinearShape all : {LinearShape{70, 45, 100}, LinearShape{70, 45, 1100},
                                LinearShape{70, 45, 4100}, LinearShape{600, 300, 70}})
    for (const bool prompt : {false, true}) {
      SCOPED_TRACE(describe(all) + (prompt ? " prompt rows" : " decode rows"));
      const auto x = rng.halves(all.m * all.k, -1, 1);
      const auto w = rng.halves(std::size_t(all.n) * all.k, -1, 1);
      const auto b = rng.halves(all.n, -1, 1);
      std::vector<Half> together(all.m * all.n);
      kernels::LinearArgs args{.x = x.data(),
                               .weight = w.data(),
                               .bias = b.data(),
                               .y = together.data(),
                               .rows = all.m,
                               .out_features = all.n,
                               .in_features = all.k,
                               .prompt_rows = prompt};
      impl().linear(args);
      for (const std::int64_t m : {1, 2, 3, 5, 12, 13, 15, 16, 17, 31, 32, 33, 49}) {
        SCOPED_TRACE("m=" + std::to_string(m));
        std::vector<Half> fewer(m * all.n);
        args.rows = m;
        args.y = fewer.data();
        impl().linear(args);
        EXPECT_TRUE(bitwise_equal(
            fewer, std::vector<Half>(together.begin(), together.begin() + m * all.n)));
      }
    }
}

INSTANTIATE_TEST_SUITE_P(All, LinearParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
