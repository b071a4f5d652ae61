// tova (Token Omission Via Attention; Oren et al. 2024, "Transformers are Multi-State RNNs"): the
// cache keeps the C tokens the current query attends to most, nothing else — no accumulated
// history and no protected window.
//
// Spec, as the paper and its reference cache (schwartz-lab-NLP/TOVA, TOVACache.reduce) do it:
//   - A token's score is the softmax probability the *current* query gives it, averaged over the
//     heads of the layer ("we average the attention scores across heads"), so every head of a
//     layer keeps the same tokens.
//   - Decode: the new token enters, attention runs over the cache plus itself, and once the cache
//     holds C + 1 tokens the one with the lowest head-averaged probability goes — which may be the
//     new token itself (the reference takes the top C of all C + 1 keys).
//   - Prefill: the reference reduces the prompt's cache with the same rule, using the last prompt
//     query's row: keep the C prompt tokens with the highest head-averaged probability from the
//     last query (all of them when P <= C).
//   - Ties (the reference's topk leaves them unspecified): the older token goes, as in h2o.
#include "policies/policy_factories.h"
#include "policies/score_ranking.h"

namespace offgen::policies {
namespace {

class TovaPolicy final : public KvPolicy {
 public:
  explicit TovaPolicy(int budget) : KvPolicy(PolicyKind::tova, budget) {}
  bool needs_attention_scores() const override { return true; }

  // The C highest-scoring prompt tokens by the last query's head-averaged row.
  std::vector<int> keep_after_prefill(int prompt_len,
                                      std::span<const float> scores) const override {
    return keep_recent_and_highest(prompt_len, budget(), 0, scores);
  }

  // The lowest head-averaged probability of this step's query, over every cached token and the
  // new one; ties: the older token.
  int victim(std::span<const std::int32_t> positions,
             std::span<const float> scores) const override {
    return lowest_outside_recent(positions, scores, 0);
  }

  int prefill_score_queries() const override { return 1; }
  HeadScores head_scores() const override { return HeadScores::layer_mean; }
  DecodeScores decode_scores() const override { return DecodeScores::replace; }
};

}  // namespace

std::unique_ptr<KvPolicy> make_tova(int budget) {
  return std::make_unique<TovaPolicy>(budget);
}

}  // namespace offgen::policies
