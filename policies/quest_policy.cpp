// quest (Tang et al., ICML 2024): the cache keeps every token, cut into pages of P slots; each
// decode step attends to the pages kernels/page_selection_args.h chooses, S = ceil(C / P) of them
// (at least the sink page and the newest). Nothing is evicted, so a page one step skips can be
// chosen at the next: what the policy saves is KV read (and moved) per step, not KV stored.
#include <algorithm>

#include "engine/core/error.h"
#include "policies/policy_factories.h"

namespace offgen::policies {
namespace {

class QuestPolicy final : public KvPolicy {
 public:
  QuestPolicy(int budget, int page_size, int attended, int dense_layers)
      : KvPolicy(PolicyKind::quest, budget),
        page_size_(page_size),
        dense_layers_(dense_layers),
        // C rounded up to whole pages, so a budget as long as the sequence attends to all of it.
        pages_per_step_(std::max(2, (attended + page_size - 1) / page_size)) {}
  bool needs_attention_scores() const override { return false; }
  int page_size() const override { return page_size_; }
  int pages_per_step() const override { return pages_per_step_; }
  int dense_layers() const override { return dense_layers_; }

  std::vector<int> keep_after_prefill(int prompt_len, std::span<const float>) const override {
    return every_prompt_position(*this, prompt_len);
  }

  int victim(std::span<const std::int32_t>, std::span<const float>) const override {
    refuse_eviction(*this);
  }

 private:
  int page_size_;
  int dense_layers_;
  int pages_per_step_;
};

}  // namespace

std::unique_ptr<KvPolicy> make_quest(int budget, int page_size, int attended, int dense_layers) {
  OFFGEN_CHECK(page_size >= 1 && attended >= 1 && dense_layers >= 0,
               "quest needs pages of at least one slot, a budget of at least one token and no "
               "negative count of dense layers (got {}, {} and {})",
               page_size, attended, dense_layers);
  return std::make_unique<QuestPolicy>(budget, page_size, attended, dense_layers);
}

}  // namespace offgen::policies
