// pyramidkv (Cai et al. 2024, "PyramidKV: Dynamic KV Cache Compression based on Pyramidal
// Information Funneling"): snapkv's selection in every layer, but with a budget that shrinks
// linearly with depth — lower layers, whose attention is spread wide, keep more; upper layers,
// whose attention funnels onto a few tokens, keep less — for the same total as C in every layer.
//
// Spec, after the reference (Zefan-Cai/PyramidKV, PyramidKVCluster.update_kv, beta = 20), with
// C the budget --kv-budget gives, w the observation window and L the layers:
//   - Prefix budgets (the tokens kept beside the window): the top layer keeps
//     lo = max(1, floor((C - w) / beta)), the bottom one hi = 2 (C - w) - lo, and layer l the
//     linear hi - l (hi - lo) / (L - 1) in between, so their mean is C - w. The reference steps by
//     the integer floor((hi - lo) / (L - 1)), which loses up to L - 1 tokens per layer; here each
//     layer gets the floor of its exact share and the tokens left over go one each to the layers
//     with the largest fractional parts (the lower layer first on equal parts): the budgets sum to
//     exactly L x C and never grow with depth. The reference's lo can be 0; here every layer keeps
//     at least one prefix token, so C_l = w + prefix >= w + 1.
//   - Layer l then runs snapkv at budget C_l (snapkv_policy.cpp): prefill keeps the window and the
//     C_l - w best pooled prefix tokens, decode goes on as h2o with the window protected.
//   - The reference also derives the budgets from the prompt length (a prompt shorter than
//     2 (C - w) falls back to uniform snapkv); here they depend on C alone: the caches are sized
//     before any prompt is seen, and a layer whose prompt fits its C_l keeps it whole anyway.
//   - C <= w (a fraction budget of a short sequence), or one layer: every layer runs snapkv at C.
//   - Memory: the caches are uniform, each with the largest C_l + 1 slots (cache_slots), about
//     2C - w; the KV footprint and the planner count those slots, so pyramidkv costs more memory
//     than snapkv at the same C while it keeps the same number of tokens in all.
// keep_after_prefill and victim answer for a model of one layer, i.e. as snapkv at C.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "policies/policy_factories.h"

namespace offgen::policies {
namespace {

class PyramidKvPolicy final : public KvPolicy {
 public:
  PyramidKvPolicy(int budget, int observation_window, int pool_kernel, int beta)
      : KvPolicy(PolicyKind::pyramidkv, budget),
        uniform_(make_snapkv(budget, observation_window, pool_kernel)),
        observation_window_(observation_window),
        pool_kernel_(pool_kernel),
        beta_(beta) {}
  bool needs_attention_scores() const override { return true; }

  std::vector<int> keep_after_prefill(int prompt_len,
                                      std::span<const float> scores) const override {
    return uniform_->keep_after_prefill(prompt_len, scores);
  }
  int victim(std::span<const std::int32_t> positions,
             std::span<const float> scores) const override {
    return uniform_->victim(positions, scores);
  }
  int recent_window() const override { return uniform_->recent_window(); }
  int prefill_score_queries() const override { return uniform_->prefill_score_queries(); }
  int pool_kernel() const override { return uniform_->pool_kernel(); }

  std::unique_ptr<KvPolicy> layer_policy(int layer, int layers) const override {
    return make_snapkv(layer_budgets(layers)[static_cast<std::size_t>(layer)], observation_window_,
                       pool_kernel_);
  }

 private:
  std::vector<int> layer_budgets(int layers) const {
    const int w = observation_window_;
    std::vector<int> out(static_cast<std::size_t>(layers), budget());
    if (layers <= 1 || budget() <= w) return out;
    const std::int64_t prefix = budget() - w;
    const std::int64_t lo = std::max<std::int64_t>(1, prefix / beta_);
    const std::int64_t hi = 2 * prefix - lo;
    const std::int64_t steps = layers - 1;
    // Layer l's share is share[l] / steps tokens; the shares sum to layers * prefix * steps.
    std::vector<std::int64_t> share(out.size());
    std::int64_t given = 0;
    for (std::size_t l = 0; l < out.size(); ++l) {
      share[l] = hi * steps - static_cast<std::int64_t>(l) * (hi - lo);
      out[l] = static_cast<int>(share[l] / steps);
      given += out[l];
    }
    std::vector<std::size_t> order(out.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return share[a] % steps > share[b] % steps;
    });
    for (std::int64_t k = 0; k < layers * prefix - given; ++k) {
      ++out[order[static_cast<std::size_t>(k)]];
    }
    for (int& b : out) b += w;
    return out;
  }

  std::unique_ptr<KvPolicy> uniform_;
  int observation_window_;
  int pool_kernel_;
  int beta_;
};

}  // namespace

std::unique_ptr<KvPolicy> make_pyramidkv(int budget, int observation_window, int pool_kernel,
                                         int beta) {
  return std::make_unique<PyramidKvPolicy>(budget, observation_window, pool_kernel, beta);
}

}  // namespace offgen::policies
