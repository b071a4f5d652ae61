// full: C = prompt + generation length; nothing is ever evicted (nor by quest, which shares
// every_prompt_position and refuse_eviction).
#include "engine/core/error.h"
#include "policies/policy_factories.h"

namespace offgen::policies {
namespace {

class FullPolicy final : public KvPolicy {
 public:
  explicit FullPolicy(int budget) : KvPolicy(PolicyKind::full, budget) {}
  bool needs_attention_scores() const override { return false; }

  std::vector<int> keep_after_prefill(int prompt_len, std::span<const float>) const override {
    return every_prompt_position(*this, prompt_len);
  }

  int victim(std::span<const std::int32_t>, std::span<const float>) const override {
    refuse_eviction(*this);
  }
};

}  // namespace

std::vector<int> every_prompt_position(const KvPolicy& policy, int prompt_len) {
  OFFGEN_CHECK(prompt_len <= policy.budget(),
               "the {} policy was sized for {} tokens but the prompt has {}",
               policy_name(policy.kind()), policy.budget(), prompt_len);
  std::vector<int> keep(static_cast<std::size_t>(prompt_len));
  for (int i = 0; i < prompt_len; ++i) keep[static_cast<std::size_t>(i)] = i;
  return keep;
}

void refuse_eviction(const KvPolicy& policy) {
  fail("the {} policy never evicts: its cache was sized below the sequence length ({} tokens)",
       policy_name(policy.kind()), policy.budget());
}

std::unique_ptr<KvPolicy> make_full(int budget) {
  return std::make_unique<FullPolicy>(budget);
}

}  // namespace offgen::policies
