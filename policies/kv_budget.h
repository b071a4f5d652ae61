// The `--kv-budget X` flag: X < 1 is a fraction of (prompt + generation) length, rounded up; an
// integer X >= 1 is an absolute token count. The result, C, is the cached tokens per
// (layer, sequence, head) that the KV cache is sized for.
#pragma once

#include <string_view>

#include "policies/kv_policy.h"

namespace offgen {

// Parses the flag's text ("0.2", "128"); throws offgen::Error for anything else (negative, zero,
// a non-integer >= 1, not a number).
double parse_kv_budget(std::string_view text);

// C for sequences of prompt_len + gen_len tokens: ceil(X * (prompt_len + gen_len)) when X < 1,
// else X; never more than prompt_len + gen_len (a bigger budget than the sequence caches nothing
// extra) and never less than 1.
int resolve_kv_budget(double budget, int prompt_len, int gen_len);

// C for a batch of up to max_prompt prompt tokens and max_new fed-back decode tokens, whose
// sequences are total_len tokens long (0: max_prompt + max_new): `full`, or no budget given,
// caches every token that ever enters the cache; otherwise the resolved budget, never more.
int policy_budget(PolicyKind kind, double budget, int max_prompt, int max_new, int total_len = 0);

// Checks the KV flags before any work: --recent-fraction in [0, 1], --sinks >= 0, and that a
// token budget (an integer --kv-budget) holds what the policy always keeps — streaming: its sinks
// plus one recent token. Throws offgen::Error naming the flags.
void validate_policy_budget(const PolicyOptions& policy, double budget);

// The policy a batch whose budget resolved to C runs: `policy` as given, except streaming with
// C <= its sinks (a fraction budget of short sequences, or a sequence shorter than the sinks)
// keeps C - 1 sinks, so C always holds the sinks and the newest token and no batch fails.
PolicyOptions effective_policy(const PolicyOptions& policy, int budget);

}  // namespace offgen
