// The host side of sampling (engine/runtime/sampler.h): parameter checks and each request's own
// stream of draws. The picks themselves (greedy and sampled): tests/kernels/sample_rows_test.cpp
// and tests/kernels/argmax_rows_test.cpp.
#include "engine/runtime/sampler.h"

#include <gtest/gtest.h>

#include <vector>

#include "engine/core/error.h"

namespace offgen {
namespace {

TEST(Sampler, RejectsBadParameters) {
  EXPECT_THROW(validate({-1.0f, 0, 1.0f}), Error);
  EXPECT_THROW(validate({1.0f, -2, 1.0f}), Error);
  EXPECT_THROW(validate({1.0f, 0, 0.0f}), Error);
  EXPECT_THROW(validate({1.0f, 0, 1.5f}), Error);
  EXPECT_NO_THROW(validate({0.0f, 0, 1.0f}));
}

TEST(Sampler, DrawsAreInTheUnitIntervalAndReproducible) {
  std::mt19937_64 a(99), b(99);
  for (int i = 0; i < 10000; ++i) {
    const float u = uniform_draw(a);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ASSERT_EQ(u, uniform_draw(b));
  }
  // The all-ones word is the largest draw and still below 1.
  EXPECT_LT(static_cast<float>(0xFFFFFFFFFFFFFFFFull >> 40) * 0x1p-24f, 1.0f);
}

TEST(Sampler, GreedyRequestsTakeNoDraw) {
  // A greedy token leaves the stream where it was, so a request's sampled tokens depend only on
  // its own seed and its own greedy / sampled steps.
  std::mt19937_64 rng(5), untouched(5);
  const kernels::SampleParams greedy = next_sample({0.0f, 0, 1.0f}, rng);
  EXPECT_EQ(greedy.temperature, 0.0f);
  EXPECT_EQ(next_sample({0.8f, 1, 1.0f}, rng).temperature, 0.0f);  // top_k 1 is greedy
  EXPECT_EQ(rng(), untouched());

  std::mt19937_64 s(7), t(7);
  const kernels::SampleParams sampled = next_sample({0.8f, 20, 0.9f}, s);
  EXPECT_EQ(sampled.temperature, 0.8f);
  EXPECT_EQ(sampled.top_k, 20);
  EXPECT_EQ(sampled.top_p, 0.9f);
  EXPECT_EQ(sampled.uniform, uniform_draw(t));
}

}  // namespace
}  // namespace offgen
