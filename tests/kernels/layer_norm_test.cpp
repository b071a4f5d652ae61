// Parity of layer_norm, the embeddings and the residual add against the reference.
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

class NormParity : public ParityTest {};

TEST_P(NormParity, LayerNormMatchesReference) {
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
TEST_P(NormParity, LayerNormOfNearConstantRowsUsesEps) {
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
TEST_P(NormParity, LayerNormOfConstantRowIsBeta) {
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

const Tolerance kSumOfTwoHalves{
    kHalfMin, kHalfUlp,
    "fp16 + fp16 in fp32 is exact unless the exponents differ by more than 13; only then can "
    "rounding twice (to fp32, then fp16) land 1 fp16 ulp (2^-10 relative) from the reference's "
    "single rounding"};

TEST_P(NormParity, GatherRowsCopiesRows) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  constexpr std::int64_t kTableRows = 50;
  for (const int dim : {8, 13, 768}) {
    for (const std::int64_t n : {1, 3, 17}) {
      SCOPED_TRACE("dim=" + std::to_string(dim) + " n=" + std::to_string(n));
      const auto table = rng.halves(kTableRows * dim, -1, 1);
      std::vector<std::int32_t> ids(n);
      for (auto& id : ids) id = rng.integer(0, kTableRows - 1);
      ids.front() = kTableRows - 1;  // the last row, and the first
      ids.back() = 0;
      Guarded<Half> out(n * dim, half_nan());
      std::vector<Half> expected(n * dim);
      kernels::GatherRowsArgs args{.table = table.data(),
                                   .ids = ids.data(),
                                   .out = out.data(),
                                   .table_rows = kTableRows,
                                   .rows = n,
                                   .dim = dim};
      impl().gather_rows(args);
      args.out = expected.data();
      ref::gather_rows(args);
      EXPECT_TRUE(out.guards_intact());
      EXPECT_TRUE(bitwise_equal(out.values(), expected));
    }
  }
}

TEST_P(NormParity, AddPositionEmbeddingsMatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  constexpr int kOffset = 2;  // OPT
  constexpr int kPositions = 40;
  for (const int dim : {8, 13, 768}) {
    for (const std::int64_t n : {1, 3, 17}) {
      SCOPED_TRACE("dim=" + std::to_string(dim) + " n=" + std::to_string(n));
      const auto table = rng.halves((kPositions + kOffset) * dim, -1, 1);
      const auto x = rng.halves(n * dim, -2, 2);
      std::vector<std::int32_t> positions(n);
      for (auto& p : positions) p = rng.integer(-1, kPositions - 1);
      positions.front() = -1;  // padding reads row offset - 1
      Guarded<Half> actual(x);
      std::vector<Half> expected = x;
      kernels::PositionEmbeddingArgs args{.x = actual.data(),
                                          .table = table.data(),
                                          .positions = positions.data(),
                                          .rows = n,
                                          .dim = dim,
                                          .offset = kOffset};
      impl().add_position_embeddings(args);
      args.x = expected.data();
      ref::add_position_embeddings(args);
      EXPECT_TRUE(actual.guards_intact());
      EXPECT_TRUE(all_close(actual.values(), expected, kSumOfTwoHalves));
    }
  }
}

TEST_P(NormParity, AddInplaceMatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const std::int64_t n : {1, 7, 4095, 4096, 4097, 100003}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const auto y = rng.halves(n, -8, 8);
    const auto x = rng.halves(n, -0.01f, 0.01f);  // small residual updates: exponents differ
    Guarded<Half> actual(y);
    std::vector<Half> expected = y;
    impl().add_inplace(actual.data(), x.data(), n);
    ref::add_inplace(expected.data(), x.data(), n);
    EXPECT_TRUE(actual.guards_intact());
    EXPECT_TRUE(all_close(actual.values(), expected, kSumOfTwoHalves));
  }
}

INSTANTIATE_TEST_SUITE_P(All, NormParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
