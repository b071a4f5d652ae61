// KV eviction policies (design section 5): each (layer, sequence, head) keeps at most C cached
// tokens. A policy is told C and what the attention computed and answers which tokens to keep
// after the prefill and which slot to free when a decode step has filled the cache to C + 1.
//
// These are the semantics' single source of truth, on the host: the KV cache of a device either
// calls them or runs a kernel that the policy tests compare against them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace offgen {

enum class PolicyKind { full, local, h2o, streaming };

std::string_view policy_name(PolicyKind kind);
// "full", "local", "h2o", "streaming"; throws offgen::Error naming the choices otherwise.
PolicyKind parse_policy(std::string_view text);

struct PolicyOptions {
  PolicyKind kind = PolicyKind::full;
  double recent_fraction = 0.5;  // h2o: R = max(1, round(C * recent_fraction))
  int sinks = 4;                 // streaming: S attention-sink tokens kept from the start
};

class KvPolicy {
 public:
  virtual ~KvPolicy() = default;
  PolicyKind kind() const { return kind_; }
  // C: tokens kept per (layer, sequence, head); the cache has C + 1 slots.
  int budget() const { return budget_; }
  // Whether the policy reads attention probabilities (column sums at prefill, the row at decode).
  // Policies that do not (full, local, streaming) cost the attention kernels nothing.
  virtual bool needs_attention_scores() const = 0;

  // After a prefill of `prompt_len` real tokens (positions 0 .. prompt_len-1): the positions to
  // keep, ascending, at most C. `scores[i]` is token i's summed attention probability over the
  // prompt's queries (empty unless needs_attention_scores()).
  virtual std::vector<int> keep_after_prefill(int prompt_len,
                                              std::span<const float> scores) const = 0;

  // A decode step filled the cache to C + 1 tokens. `positions[s]` / `scores[s]` describe slot s
  // (scores already include this step's row). Returns the slot to free. Ties: the older token.
  virtual int victim(std::span<const std::int32_t> positions,
                     std::span<const float> scores) const = 0;

  // Attention-score policies: the R most recent tokens, never evicted (h2o's window); 0 otherwise.
  virtual int recent_window() const { return 0; }

 protected:
  KvPolicy(PolicyKind kind, int budget) : kind_(kind), budget_(budget) {}

 private:
  PolicyKind kind_;
  int budget_;
};

// Throws offgen::Error when the budget cannot hold what the policy always keeps (streaming: more
// than its sinks; any policy: at least one token).
std::unique_ptr<KvPolicy> make_policy(const PolicyOptions& options, int budget);

}  // namespace offgen
