// full: C = prompt + generation length; nothing is ever evicted.
#include "engine/core/error.h"
#include "policies/policy_factories.h"

namespace offgen::policies {
namespace {

class FullPolicy final : public KvPolicy {
 public:
  explicit FullPolicy(int budget) : KvPolicy(PolicyKind::full, budget) {}
  bool needs_attention_scores() const override { return false; }

  std::vector<int> keep_after_prefill(int prompt_len, std::span<const float>) const override {
    OFFGEN_CHECK(prompt_len <= budget(),
                 "the full policy was sized for {} tokens but the prompt has {}", budget(),
                 prompt_len);
    std::vector<int> keep(static_cast<std::size_t>(prompt_len));
    for (int i = 0; i < prompt_len; ++i) keep[static_cast<std::size_t>(i)] = i;
    return keep;
  }

  int victim(std::span<const std::int32_t>, std::span<const float>) const override {
    fail("the full policy never evicts: its cache was sized below the sequence length ({} tokens)",
         budget());
  }
};

}  // namespace

std::unique_ptr<KvPolicy> make_full(int budget) {
  return std::make_unique<FullPolicy>(budget);
}

}  // namespace offgen::policies
