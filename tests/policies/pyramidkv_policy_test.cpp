// pyramidkv's per-layer budgets by hand: linear in depth from 2 (C - w) - lo down to
// lo = max(1, (C - w) / beta) prefix tokens, rounded so that the layers sum to exactly L x C,
// never growing with depth, each layer snapkv at its own budget.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "policies/kv_policy.h"

namespace offgen {
namespace {

std::unique_ptr<KvPolicy> pyramid(int budget, int window, int beta = 20) {
  PolicyOptions options;
  options.kind = PolicyKind::pyramidkv;
  options.observation_window = window;
  options.pool_kernel = 3;
  options.pyramid_beta = beta;
  return make_policy(options, budget);
}

std::vector<int> layer_budgets(const KvPolicy& policy, int layers) {
  std::vector<int> out;
  for (int l = 0; l < layers; ++l) {
    const auto layer = policy.layer_policy(l, layers);
    EXPECT_NE(layer, nullptr);
    EXPECT_EQ(layer->kind(), PolicyKind::snapkv);
    out.push_back(layer->budget());
  }
  return out;
}

// C = 10, w = 2, L = 4: prefix 8, lo = max(1, 8 / 20) = 1, hi = 16 - 1 = 15; exact shares
// 15, 10 1/3, 5 2/3, 1 -> floors 15, 10, 5, 1 (31 of 32); the one left goes to the largest
// fraction, layer 2 -> 15, 10, 6, 1; plus the window: 17, 12, 8, 3 (sum 40 = 4 x 10).
TEST(PyramidKvPolicy, LayerBudgetsFallLinearlyAndSumToLayersTimesC) {
  const auto policy = pyramid(10, 2);
  EXPECT_EQ(layer_budgets(*policy, 4), (std::vector<int>{17, 12, 8, 3}));
  EXPECT_EQ(policy->cache_slots(4), 18);
  EXPECT_EQ(policy->budget(), 10);
}

// beta sets the top layer: C = 42, w = 2, beta = 4 -> lo = 10, hi = 70; L = 3 -> 70, 40, 10.
TEST(PyramidKvPolicy, BetaSetsTheTopLayersShare) {
  EXPECT_EQ(layer_budgets(*pyramid(42, 2, 4), 3), (std::vector<int>{72, 42, 12}));
}

TEST(PyramidKvPolicy, EveryShapeSumsExactlyNeverGrowsWithDepthAndKeepsTheWindowPlusOne) {
  for (int layers : {2, 3, 12, 24, 32, 40, 96}) {
    for (int budget : {3, 5, 33, 100, 205, 1000}) {
      for (int window : {1, 2, 32}) {
        if (budget <= window) continue;
        SCOPED_TRACE("L " + std::to_string(layers) + " C " + std::to_string(budget) + " w " +
                     std::to_string(window));
        const auto policy = pyramid(budget, window);
        const std::vector<int> b = layer_budgets(*policy, layers);
        EXPECT_EQ(std::accumulate(b.begin(), b.end(), 0), layers * budget);
        for (std::size_t l = 0; l < b.size(); ++l) {
          EXPECT_GE(b[l], window + 1);
          if (l > 0) {
            EXPECT_LE(b[l], b[l - 1]) << "layer " << l;
          }
        }
        EXPECT_EQ(policy->cache_slots(layers), b.front() + 1);
      }
    }
  }
}

TEST(PyramidKvPolicy, OneLayerOrABudgetWithinTheWindowIsUniformSnapKv) {
  EXPECT_EQ(layer_budgets(*pyramid(10, 2), 1), (std::vector<int>{10}));
  EXPECT_EQ(layer_budgets(*pyramid(8, 32), 3), (std::vector<int>{8, 8, 8}));
  EXPECT_EQ(pyramid(8, 32)->cache_slots(3), 9);
}

// A layer is snapkv at its own budget: its window and prefill choice follow that budget.
TEST(PyramidKvPolicy, ALayerRunsSnapKvAtItsBudget) {
  const auto policy = pyramid(10, 2);
  const auto top = policy->layer_policy(3, 4);  // budget 3
  EXPECT_EQ(top->recent_window(), 2);
  EXPECT_EQ(top->prefill_score_queries(), 2);
  EXPECT_EQ(top->pool_kernel(), 3);
  const std::vector<float> scores = {0, 0, 0, 0.5f, 0.5f, 0.5f, 1.0f, 1.0f};
  EXPECT_EQ(top->keep_after_prefill(8, scores), (std::vector<int>{4, 6, 7}));
}

TEST(PyramidKvPolicy, RejectsABetaBelowOne) {
  EXPECT_THROW(pyramid(10, 2, 0), Error);
}

}  // namespace
}  // namespace offgen
