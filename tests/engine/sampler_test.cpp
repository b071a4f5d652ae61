#include "engine/runtime/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "engine/core/error.h"

namespace offgen {
namespace {

TEST(Sampler, GreedyTakesTheLowestIdAmongEqualMaxima) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(argmax(logits), 1);
  std::mt19937_64 rng(1);
  EXPECT_EQ(sample_token(logits, {0.0f, 0, 1.0f}, rng), 1);
  EXPECT_EQ(sample_token(logits, {1.0f, 1, 1.0f}, rng), 1);  // top_k = 1 is greedy
}

TEST(Sampler, TinyTopPKeepsOnlyTheMostLikelyToken) {
  const std::vector<float> logits = {0.1f, 3.0f, 2.9f, 0.0f};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(sample_token(logits, {1.0f, 0, 1e-6f}, rng), 1);
}

TEST(Sampler, TopKNeverDrawsOutsideTheK) {
  const std::vector<float> logits = {1.0f, 0.9f, 0.8f, 5.0f, 0.7f};
  std::mt19937_64 rng(3);
  for (int i = 0; i < 500; ++i) {
    const int t = sample_token(logits, {2.0f, 2, 1.0f}, rng);
    EXPECT_TRUE(t == 3 || t == 0) << t;
  }
}

TEST(Sampler, DrawsFollowTheTemperedSoftmax) {
  // p = softmax(logits / T); with 40000 draws each frequency is within ~4 standard deviations.
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f};
  const float temperature = 0.7f;
  std::mt19937_64 rng(11);
  std::map<int, int> counts;
  const int draws = 40000;
  for (int i = 0; i < draws; ++i) ++counts[sample_token(logits, {temperature, 0, 1.0f}, rng)];
  double z = 0;
  for (float l : logits) z += std::exp(l / temperature);
  for (int t = 0; t < 3; ++t) {
    const double p = std::exp(logits[t] / temperature) / z;
    const double sigma = std::sqrt(p * (1 - p) / draws);
    EXPECT_NEAR(counts[t] / static_cast<double>(draws), p, 4 * sigma) << "token " << t;
  }
}

TEST(Sampler, TopPRenormalisesOverTheNucleus) {
  // probs 0.5, 0.3, 0.2 (logits are their logs); top_p 0.7 keeps {0, 1}: 0.625 / 0.375.
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  std::mt19937_64 rng(5);
  int first = 0;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) {
    const int t = sample_token(logits, {1.0f, 0, 0.7f}, rng);
    ASSERT_NE(t, 2);
    first += t == 0;
  }
  EXPECT_NEAR(first / static_cast<double>(draws), 0.625, 0.015);
}

TEST(Sampler, SameSeedSameDraws) {
  std::vector<float> logits(100);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
  std::mt19937_64 a(99), b(99);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(sample_token(logits, {0.9f, 20, 0.95f}, a),
              sample_token(logits, {0.9f, 20, 0.95f}, b));
  }
}

TEST(Sampler, RejectsBadParameters) {
  EXPECT_THROW(validate({-1.0f, 0, 1.0f}), Error);
  EXPECT_THROW(validate({1.0f, -2, 1.0f}), Error);
  EXPECT_THROW(validate({1.0f, 0, 0.0f}), Error);
  EXPECT_THROW(validate({1.0f, 0, 1.5f}), Error);
  EXPECT_NO_THROW(validate({0.0f, 0, 1.0f}));
}

}  // namespace
}  // namespace offgen

namespace offgen {
namespace {

TEST(Sampler, TopKKeepsTokensTiedWithTheKth) {
  // k = 2 but three tokens share the 2nd-largest logit: all three stay (Hugging Face semantics).
  const std::vector<float> logits = {3.0f, 1.0f, 1.0f, 1.0f, -5.0f};
  std::mt19937_64 rng(13);
  std::map<int, int> seen;
  for (int i = 0; i < 3000; ++i) ++seen[sample_token(logits, {1.0f, 2, 1.0f}, rng)];
  EXPECT_GT(seen[1], 0);
  EXPECT_GT(seen[2], 0);
  EXPECT_GT(seen[3], 0);
  EXPECT_EQ(seen.count(4), 0u);
}

TEST(Sampler, NanLogitsAreNeverPickedOverRealOnes) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {nan, 0.5f, nan, 2.0f};
  EXPECT_EQ(argmax(logits), 3);
  std::mt19937_64 rng(17);
  for (int i = 0; i < 200; ++i) {
    const int t = sample_token(logits, {1.0f, 0, 0.99f}, rng);
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
}

}  // namespace
}  // namespace offgen
