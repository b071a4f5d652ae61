// Parity of layer_norm against the reference: with and without affine parameters, in place,
// near-constant rows (eps matters) and constant rows (exactly beta).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;

constexpr float kEps = 1e-5f;

// Smallest row standard deviation of x [rows, dim] (with eps, as the kernel divides by it).
double min_sigma(const std::vector<Half>& x, std::int64_t rows, int dim) {
  double result = INFINITY;
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int d = 0; d < dim; ++d) mean += half_to_float(x[r * dim + d]);
    mean /= dim;
    for (int d = 0; d < dim; ++d) var += std::pow(half_to_float(x[r * dim + d]) - mean, 2);
    result = std::min(result, std::sqrt(var / dim + kEps));
  }
  return result;
}

// x in [-2, 2], gamma in [-1.5, 1.5], beta in [-1, 1].
Tolerance layer_norm_tolerance(int dim, double sigma) {
  const double z_max = std::sqrt(double(dim));  // |x - mean| / sigma <= sqrt(dim)
  const double z_err = 4 * dim * kFloatEps * (2.0 / sigma + z_max);
  return {z_err * 1.5 + 4 * kFloatEps * (z_max * 1.5 + 1) + kHalfMin, kHalfUlp,
          "fp16 output rounding: 1 ulp (2^-10 relative); fp32 statistics: mean and variance "
          "sums over dim terms err by <= dim·2^-24 relative, so z = (x-mean)/sigma errs by "
          "<= 4·dim·2^-24·(max|x|/sigma + max|z|), times |gamma| <= 1.5; plus the affine "
          "step's own fp32 rounding"};
}

class LayerNormParity : public ParityTest {};

TEST_P(LayerNormParity, MatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const std::int64_t rows : {1, 3, 17}) {
    for (const int dim : {1, 8, 13, 64, 100, 768}) {
      for (const bool affine : {true, false}) {
        for (const bool alias : {false, true}) {
          SCOPED_TRACE("rows=" + std::to_string(rows) + " dim=" + std::to_string(dim) +
                       (affine ? " affine" : " no-affine") + (alias ? " x==y" : ""));
          const auto x = rng.halves(rows * dim, -2, 2);
          const auto gamma = rng.halves(dim, -1.5f, 1.5f);
          const auto beta = rng.halves(dim, -1, 1);
          const Half* g = affine ? gamma.data() : nullptr;
          const Half* b = affine ? beta.data() : nullptr;
          std::vector<Half> expected(rows * dim);
          ref::layer_norm({.x = x.data(),
                           .gamma = g,
                           .beta = b,
                           .y = expected.data(),
                           .rows = rows,
                           .dim = dim,
                           .eps = kEps});
          Guarded<Half> y = alias ? Guarded<Half>(x) : Guarded<Half>(x.size(), half_nan());
          impl().layer_norm({.x = alias ? y.data() : x.data(),
                             .gamma = g,
                             .beta = b,
                             .y = y.data(),
                             .rows = rows,
                             .dim = dim,
                             .eps = kEps});
          EXPECT_TRUE(y.guards_intact());
          EXPECT_TRUE(
              all_close(y.values(), expected, layer_norm_tolerance(dim, min_sigma(x, rows, dim))));
        }
      }
    }
  }
}

// Rows whose variance is comparable to eps (x = 1 + j·2^-10, |j| <= 2): eps must enter the sqrt.
TEST_P(LayerNormParity, NearConstantRowsUseEps) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const int dim : {8, 100, 768}) {
    SCOPED_TRACE("dim=" + std::to_string(dim));
    std::vector<Half> x(3 * dim);
    for (auto& h : x) h = float_to_half(1.0f + float(rng.integer(-2, 2)) / 1024);
    std::vector<Half> expected(x.size());
    kernels::LayerNormArgs args{
        .x = x.data(), .y = expected.data(), .rows = 3, .dim = dim, .eps = kEps};
    ref::layer_norm(args);
    Guarded<Half> y(x.size(), half_nan());
    args.y = y.data();
    impl().layer_norm(args);
    EXPECT_TRUE(y.guards_intact());
    EXPECT_TRUE(all_close(y.values(), expected, layer_norm_tolerance(dim, min_sigma(x, 3, dim))));
  }
}

// A constant row has mean = x exactly and x - mean = 0 exactly, so the output is beta, bit for bit.
TEST_P(LayerNormParity, ConstantRowIsBeta) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const int dim : {1, 13, 768}) {
    SCOPED_TRACE("dim=" + std::to_string(dim));
    const std::vector<Half> x(2 * dim, float_to_half(rng.uniform(-3, 3)));
    const auto gamma = rng.halves(dim, -1.5f, 1.5f);
    const auto beta = rng.halves(dim, -1, 1);
    Guarded<Half> y(x.size(), half_nan());
    impl().layer_norm({.x = x.data(),
                       .gamma = gamma.data(),
                       .beta = beta.data(),
                       .y = y.data(),
                       .rows = 2,
                       .dim = dim,
                       .eps = kEps});
    EXPECT_TRUE(y.guards_intact());
    std::vector<Half> expected = beta;
    expected.insert(expected.end(), beta.begin(), beta.end());
    EXPECT_TRUE(bitwise_equal(y.values(), expected));
  }
}

INSTANTIATE_TEST_SUITE_P(All, LayerNormParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
