// A KV budget: how many tokens each (layer, sequence, head) caches — the whole sequence, a
// fraction of each sequence's own length (prompt + generation, rounded up; never of its
// batch-mates'), or a number of tokens. Resolved for a sequence, it gives C, the tokens the KV
// cache is sized for.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "policies/kv_policy.h"

namespace offgen {

class KvBudget {
 public:
  enum class Kind { whole_sequence, fraction, tokens };

  KvBudget() = default;  // the whole sequence: nothing is evicted
  // A share in (0, 1) of each sequence's length; throws offgen::Error otherwise.
  static KvBudget fraction(double share);
  // A token count >= 1; throws offgen::Error otherwise.
  static KvBudget tokens(int count);
  // The number a user writes: a fraction below 1, or a whole number >= 1 of tokens. Throws
  // offgen::Error (naming the kv_budget parameter) for anything else.
  static KvBudget of(double value);
  // Its text ("0.2", "128"). Throws as `of` does, and for text that is not a number (empty text
  // included: the whole sequence is the default-constructed budget).
  static KvBudget parse(std::string_view text);

  Kind kind() const { return kind_; }
  bool whole_sequence() const { return kind_ == Kind::whole_sequence; }
  // The number as given: the share, the token count, or 0 for the whole sequence.
  double value() const { return value_; }

  // C for a sequence of `length` tokens (> 0): ceil(share x length) for a fraction, the count
  // for tokens, the length for the whole sequence; never more than the length (a bigger budget
  // caches nothing extra) and never less than 1.
  int tokens_for(int length) const;

  bool operator==(const KvBudget&) const = default;

 private:
  KvBudget(Kind kind, double value) : kind_(kind), value_(value) {}
  Kind kind_ = Kind::whole_sequence;
  double value_ = 0.0;
};

// C for a batch of up to max_prompt prompt tokens and max_new fed-back decode tokens, whose
// sequences are total_len tokens long (0: max_prompt + max_new): `full`, or the whole sequence,
// caches every token that ever enters the cache (so does quest, which selects instead of
// evicting); otherwise the budget resolved for total_len, never more.
int policy_budget(PolicyKind kind, const KvBudget& budget, int max_prompt, int max_new,
                  int total_len = 0);

// The policy a sequence of these lengths runs (each sequence its own, never its batch-mates'):
// policy_budget's C and effective_policy's options, and for quest the budget resolved for the
// sequence as the tokens a step attends (PolicyOptions::attended_tokens).
std::unique_ptr<KvPolicy> sequence_policy(const PolicyOptions& policy, const KvBudget& budget,
                                          int max_prompt, int max_new, int total_len = 0);

// Checks the policy options and the budget together before any work: recent_fraction in [0, 1],
// sinks >= 0, a budget for every policy but full, and that a token budget holds what the policy
// always keeps — streaming: its sinks plus one recent token; snapkv: its observation window plus
// one token (and its options, validate_snapkv_options). Throws ParameterError naming them.
void validate_policy_budget(const PolicyOptions& policy, const KvBudget& budget);

// The policy a batch whose budget resolved to C runs: `policy` as given, except streaming with
// C <= its sinks (a fraction budget of short sequences, or a sequence shorter than the sinks)
// keeps C - 1 sinks, so C always holds the sinks and the newest token and no batch fails.
PolicyOptions effective_policy(const PolicyOptions& policy, int budget);

}  // namespace offgen
