// local: keep the C most recent tokens (a sliding window).
#include <algorithm>

#include "policies/policy_factories.h"

namespace offgen::policies {
namespace {

class LocalPolicy final : public KvPolicy {
 public:
  explicit LocalPolicy(int budget) : KvPolicy(PolicyKind::local, budget) {}
  bool needs_attention_scores() const override { return false; }

  std::vector<int> keep_after_prefill(int prompt_len, std::span<const float>) const override {
    std::vector<int> keep;
    for (int i = std::max(0, prompt_len - budget()); i < prompt_len; ++i) keep.push_back(i);
    return keep;
  }

  int victim(std::span<const std::int32_t> positions, std::span<const float>) const override {
    return static_cast<int>(std::min_element(positions.begin(), positions.end()) -
                            positions.begin());
  }
};

}  // namespace

std::unique_ptr<KvPolicy> make_local(int budget) {
  return std::make_unique<LocalPolicy>(budget);
}

}  // namespace offgen::policies
