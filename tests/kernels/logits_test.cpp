// Parity of logits (the tied LM head, fp32 out) against the reference.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;

struct LogitsShape {
  std::int64_t m;
  int n;
  int k;
};

std::string describe(const LogitsShape& s) {
  return "m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k);
}

Tolerance logits_tolerance(int k, double r) {
  return {(k + 1) * kFloatEps * k * r * r, kFloatEps,
          "fp32 output: fp32 accumulation over k terms in any order, (k+1)·2^-24·Σ|x·w| "
          "(Higham's bound); plus the reference's own rounding of its exact sum, 2^-24 relative"};
}

class LogitsParity : public ParityTest {};

TEST_P(LogitsParity, MatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const LogitsShape s : {LogitsShape{1, 50, 13}, LogitsShape{5, 333, 64},
                              LogitsShape{40, 1000, 100}, LogitsShape{33, 97, 768}}) {
    SCOPED_TRACE(describe(s));
    const auto x = rng.halves(s.m * s.k, -1, 1);
    const auto embed = rng.halves(std::size_t(s.n) * s.k, -1, 1);
    Guarded<float> out(s.m * s.n, float_nan());
    std::vector<float> expected(s.m * s.n);
    kernels::LogitsArgs args{.x = x.data(),
                             .embed = embed.data(),
                             .out = out.data(),
                             .rows = s.m,
                             .vocab = s.n,
                             .dim = s.k};
    impl().logits(args);
    args.out = expected.data();
    ref::logits(args);
    EXPECT_TRUE(out.guards_intact());
    EXPECT_TRUE(all_close(out.values(), expected, logits_tolerance(s.k, 1.0)));
  }
}

// A row's logits are the same bits whatever the number of rows beside it (linear_test.cpp says
// why): a sampled token must not move with the batch.
TEST_P(LogitsParity, ARowsLogitsDoNotDependOnTheRowCount) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const LogitsShape all{40, 333, 768};
  const auto x = rng.halves(all.m * all.k, -1, 1);
  const auto embed = rng.halves(std::size_t(all.n) * all.k, -1, 1);
  std::vector<float> together(all.m * all.n);
  kernels::LogitsArgs args{.x = x.data(),
                           .embed = embed.data(),
                           .out = together.data(),
                           .rows = all.m,
                           .vocab = all.n,
                           .dim = all.k};
  impl().logits(args);
  for (const std::int64_t m : {1, 4, 20, 33}) {
    SCOPED_TRACE("m=" + std::to_string(m));
    std::vector<float> fewer(m * all.n);
    args.rows = m;
    args.out = fewer.data();
    impl().logits(args);
    EXPECT_EQ(std::memcmp(fewer.data(), together.data(), fewer.size() * sizeof(float)), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(All, LogitsParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
