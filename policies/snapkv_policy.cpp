// snapkv (Li et al. 2024, "SnapKV: LLM Knows What You are Looking for Before Generation"): the
// prompt's last w queries (the observation window) vote, per head, for the prompt tokens the
// generation will need; the cache keeps the window plus the prefix tokens with the most votes.
//
// Spec, as the reference (FasterDecoding/SnapKV, SnapKVCluster.update_kv, defaults window_size 32,
// kernel_size 5, pooling 'avgpool') does it, per (layer, sequence, head):
//   - Prefill of P tokens: if P <= C every token stays. Otherwise score(t) = the sum, over the
//     last w queries of the prompt, of their softmax probability on t (each query attends
//     causally over the whole prompt). The prefix — tokens before the window, t < P - w — is
//     pooled: pooled(t) = (sum of score(u) over |u - t| <= k / 2, u in the prefix) / k, i.e.
//     avg_pool1d(k, stride 1, padding k / 2) with count_include_pad, zeros past both ends of the
//     prefix. The C - w prefix tokens with the highest pooled score stay (equal: the newer
//     stays), plus the whole window.
//   - Decode: SnapKV compresses only the prompt and lets the cache grow. With a fixed budget C
//     the choice here is to go on as h2o does: each kept token starts from its window score
//     (unpooled: the attention it actually received; pooling only ranks the prefix), every decode
//     query adds its probability, and when the cache holds C + 1 tokens the lowest-scoring token
//     outside the w most recent goes (ties: the older).
//   - Pooling is the reference's default 'avgpool'; 'maxpool' is not offered. k must be odd (an
//     even k would shift the pooled scores by half a token in the reference).
//   - A budget C <= w (which the reference refuses) keeps a window of R = C - 1 tokens instead,
//     so a fraction budget of a short sequence still runs; scores still sum over the last w
//     queries. The CLI refuses a token budget <= w outright.
#include <algorithm>

#include "policies/policy_factories.h"
#include "policies/score_ranking.h"

namespace offgen::policies {
namespace {

class SnapKvPolicy final : public KvPolicy {
 public:
  SnapKvPolicy(int budget, int observation_window, int pool_kernel)
      : KvPolicy(PolicyKind::snapkv, budget),
        observation_window_(observation_window),
        recent_(std::min(observation_window, budget - 1)),
        pool_kernel_(pool_kernel) {}
  bool needs_attention_scores() const override { return true; }

  std::vector<int> keep_after_prefill(int prompt_len,
                                      std::span<const float> scores) const override {
    if (prompt_len <= budget()) return keep_recent_and_highest(prompt_len, budget(), recent_, {});
    const std::vector<float> pooled =
        average_pool(scores.first(static_cast<std::size_t>(prompt_len - recent_)), pool_kernel_);
    return keep_recent_and_highest(prompt_len, budget(), recent_, pooled);
  }

  // h2o's rule with the observation window as the protected recent window.
  int victim(std::span<const std::int32_t> positions,
             std::span<const float> scores) const override {
    return lowest_outside_recent(positions, scores, recent_);
  }

  int recent_window() const override { return recent_; }
  int prefill_score_queries() const override { return observation_window_; }
  int pool_kernel() const override { return pool_kernel_; }

 private:
  int observation_window_;
  int recent_;
  int pool_kernel_;
};

}  // namespace

std::unique_ptr<KvPolicy> make_snapkv(int budget, int observation_window, int pool_kernel) {
  return std::make_unique<SnapKvPolicy>(budget, observation_window, pool_kernel);
}

}  // namespace offgen::policies
