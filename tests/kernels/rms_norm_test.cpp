// Parity of rms_norm against the reference, bit for bit on every set: the header fixes the fp32
// sum's order, and every other step is one correctly rounded fp32 operation or an fp16 rounding.
// Shapes around the 32 partial sums (dim 1, 31, 32, 33, not a multiple of 8), in place, rows whose
// squares span many binades (where any other summation order changes the bits), and zero rows.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;

// Runs the set's rms_norm into a guarded, NaN-poisoned output (or in place) and checks it against
// the reference bit for bit.
void expect_matches_reference(const KernelSet& impl, const std::vector<Half>& x,
                              const std::vector<Half>& gamma, std::int64_t rows, int dim, float eps,
                              bool alias) {
  std::vector<Half> expected(x.size());
  ref::rms_norm({.x = x.data(),
                 .gamma = gamma.data(),
                 .y = expected.data(),
                 .rows = rows,
                 .dim = dim,
                 .eps = eps});
  Guarded<Half> y = alias ? Guarded<Half>(x) : Guarded<Half>(x.size(), half_nan());
  impl.rms_norm({.x = alias ? y.data() : x.data(),
                 .gamma = gamma.data(),
                 .y = y.data(),
                 .rows = rows,
                 .dim = dim,
                 .eps = eps});
  EXPECT_TRUE(y.guards_intact());
  // Tolerance: none. Every step is specified to the bit (kernels/rms_norm_args.h).
  EXPECT_TRUE(finite_and_bitwise_equal(y.values(), expected));
}

class RmsNormParity : public ParityTest {};

TEST_P(RmsNormParity, MatchesReferenceBitForBit) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const std::int64_t rows : {1, 3, 17}) {
    for (const int dim : {1, 7, 31, 32, 33, 100, 768, 4100}) {
      for (const float eps : {1e-5f, 1e-6f}) {
        for (const bool alias : {false, true}) {
          SCOPED_TRACE("rows=" + std::to_string(rows) + " dim=" + std::to_string(dim) +
                       " eps=" + std::to_string(eps) + (alias ? " x==y" : ""));
          const auto x = rng.halves(rows * dim, -2, 2);
          const auto gamma = rng.halves(dim, -1.5f, 1.5f);
          expect_matches_reference(impl(), x, gamma, rows, dim, eps, alias);
        }
      }
    }
  }
}

// Magnitudes 2^-12 .. 2^7 in one row: squares up to 38 binades apart, so the fp32 sum rounds at
// nearly every step, and another order (one accumulator, 8 or 16 lanes, another tree) changes the
// outputs of some of the 64 rows: even a sequential sum of the 32 partials instead of the pairwise
// halving fails this test almost every run.
TEST_P(RmsNormParity, WideRangeRowsMatchBitForBit) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const int dim : {33, 257, 4096}) {
    SCOPED_TRACE("dim=" + std::to_string(dim));
    const std::int64_t rows = 64;
    std::vector<Half> x(rows * dim);
    for (auto& h : x) {
      const float sign = rng.integer(0, 1) == 0 ? -1.0f : 1.0f;
      h = float_to_half(sign * std::ldexp(rng.uniform(1, 2), rng.integer(-12, 6)));
    }
    const auto gamma = rng.halves(dim, -1.5f, 1.5f);
    expect_matches_reference(impl(), x, gamma, rows, dim, 1e-6f, false);
  }
}

// Large values (|x| up to 60000: squares up to 3.6e9, sums far beyond fp16's range) stay finite.
TEST_P(RmsNormParity, LargeValuesMatchBitForBit) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int dim = 4096;
  const auto x = rng.halves(2 * dim, -60000, 60000);
  const auto gamma = rng.halves(dim, -1.5f, 1.5f);
  expect_matches_reference(impl(), x, gamma, 2, dim, 1e-5f, true);
}

// A zero row divides 0 by sqrt(eps): the output is 0 · gamma (signed zeros included).
TEST_P(RmsNormParity, ZeroRowIsZero) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int dim = 40;
  const std::vector<Half> x(2 * dim, Half{});
  const auto gamma = rng.halves(dim, -1.5f, 1.5f);
  Guarded<Half> y(x.size(), half_nan());
  impl().rms_norm(
      {.x = x.data(), .gamma = gamma.data(), .y = y.data(), .rows = 2, .dim = dim, .eps = 1e-5f});
  EXPECT_TRUE(y.guards_intact());
  std::vector<Half> expected(x.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    expected[i] = float_to_half(0.0f * half_to_float(gamma[i % dim]));
  }
  EXPECT_TRUE(finite_and_bitwise_equal(y.values(), expected));
}

INSTANTIATE_TEST_SUITE_P(All, RmsNormParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
