// streaming (StreamingLLM): the first S tokens (attention sinks) plus the C - S most recent.
#include <limits>

#include "policies/policy_factories.h"

namespace offgen::policies {
namespace {

class StreamingPolicy final : public KvPolicy {
 public:
  StreamingPolicy(int budget, int sinks) : KvPolicy(PolicyKind::streaming, budget), sinks_(sinks) {}
  bool needs_attention_scores() const override { return false; }

  std::vector<int> keep_after_prefill(int prompt_len, std::span<const float>) const override {
    std::vector<int> keep;
    if (prompt_len <= budget()) {
      for (int i = 0; i < prompt_len; ++i) keep.push_back(i);
      return keep;
    }
    for (int i = 0; i < sinks_; ++i) keep.push_back(i);
    for (int i = prompt_len - (budget() - sinks_); i < prompt_len; ++i) keep.push_back(i);
    return keep;
  }

  // The oldest token that is not a sink.
  int victim(std::span<const std::int32_t> positions, std::span<const float>) const override {
    int best = -1;
    for (std::size_t s = 0; s < positions.size(); ++s) {
      if (positions[s] < sinks_) continue;
      if (best < 0 || positions[s] < positions[static_cast<std::size_t>(best)]) {
        best = static_cast<int>(s);
      }
    }
    return best;
  }

 private:
  int sinks_;
};

}  // namespace

std::unique_ptr<KvPolicy> make_streaming(int budget, int sinks) {
  return std::make_unique<StreamingPolicy>(budget, sinks);
}

}  // namespace offgen::policies
