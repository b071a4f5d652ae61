// h2o (Heavy-Hitter Oracle): a recent window of R = max(1, round(C * recent_fraction)) tokens plus
// the H = C - R "heavy hitters" with the largest accumulated attention. A token's score is the sum,
// over every query that attended while it was cached (itself included), of its softmax probability.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "policies/policy_factories.h"

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
    std::vector<int> keep;
    if (prompt_len <= budget()) {
      keep.resize(static_cast<std::size_t>(prompt_len));
      std::iota(keep.begin(), keep.end(), 0);
      return keep;
    }
    const int window_start = prompt_len - recent_;
    std::vector<int> older(static_cast<std::size_t>(window_start));
    std::iota(older.begin(), older.end(), 0);
    const auto heavy = static_cast<std::ptrdiff_t>(budget() - recent_);
    std::partial_sort(older.begin(), older.begin() + heavy, older.end(), [&](int a, int b) {
      const float sa = scores[static_cast<std::size_t>(a)];
      const float sb = scores[static_cast<std::size_t>(b)];
      return sa > sb || (sa == sb && a > b);
    });
    keep.assign(older.begin(), older.begin() + heavy);
    for (int i = window_start; i < prompt_len; ++i) keep.push_back(i);
    std::sort(keep.begin(), keep.end());
    return keep;
  }

  // The lowest-scoring token outside the R most recent; ties: the older token.
  int victim(std::span<const std::int32_t> positions,
             std::span<const float> scores) const override {
    std::vector<std::int32_t> sorted(positions.begin(), positions.end());
    std::nth_element(sorted.begin(), sorted.begin() + (recent_ - 1), sorted.end(),
                     std::greater<std::int32_t>());
    const std::int32_t oldest_recent = sorted[static_cast<std::size_t>(recent_ - 1)];
    int best = -1;
    for (std::size_t s = 0; s < positions.size(); ++s) {
      if (positions[s] >= oldest_recent) continue;  // inside the recent window
      if (best < 0) {
        best = static_cast<int>(s);
        continue;
      }
      const auto b = static_cast<std::size_t>(best);
      if (scores[s] < scores[b] || (scores[s] == scores[b] && positions[s] < positions[b])) {
        best = static_cast<int>(s);
      }
    }
    return best;
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
