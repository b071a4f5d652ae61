// h2o (Heavy-Hitter Oracle): a recent window of R = max(1, round(C * recent_fraction)) tokens plus
// the H = C - R "heavy hitters" with the largest accumulated attention. A token's score is the sum,
// over every query that attended while it was cached (itself included), of its softmax probability.
#include <algorithm>
#include <cmath>

#include "policies/policy_factories.h"
#include "policies/score_ranking.h"

namespace offgen::policies {
namespace {

class H2oPolicy final : public KvPolicy {
 public:
  H2oPolicy(int budget, double recent_fraction)
      : KvPolicy(PolicyKind::h2o, budget),
        recent_(std::clamp(static_cast<int>(std::lround(budget * recent_fraction)), 1, budget)) {}
  bool needs_attention_scores() const override { return true; }

  // Keeps the R most recent prompt tokens and the H highest-scoring of the rest (on equal scores
  // the newer token stays, so the older one goes, as at decode).
  std::vector<int> keep_after_prefill(int prompt_len,
                                      std::span<const float> scores) const override {
    return keep_recent_and_highest(prompt_len, budget(), recent_, scores);
  }

  // The lowest-scoring token outside the R most recent; ties: the older token.
  int victim(std::span<const std::int32_t> positions,
             std::span<const float> scores) const override {
    return lowest_outside_recent(positions, scores, recent_);
  }

  int recent_window() const override { return recent_; }

 private:
  int recent_;
};

}  // namespace

std::unique_ptr<KvPolicy> make_h2o(int budget, double recent_fraction) {
  return std::make_unique<H2oPolicy>(budget, recent_fraction);
}

}  // namespace offgen::policies
