#include "policies/kv_budget.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "engine/core/error.h"

namespace offgen {

double parse_kv_budget(std::string_view text) {
  double value = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  OFFGEN_CHECK(ec == std::errc() && end == text.data() + text.size() && std::isfinite(value),
               "--kv-budget '{}' is not a number (use a fraction like 0.2 or a token count like "
               "128)",
               text);
  OFFGEN_CHECK(value > 0.0, "--kv-budget must be positive (got {})", text);
  OFFGEN_CHECK(value < 1.0 || value == std::floor(value),
               "--kv-budget {} is neither a fraction below 1 nor a whole number of tokens", text);
  return value;
}

int resolve_kv_budget(double budget, int prompt_len, int gen_len) {
  const long long total = static_cast<long long>(prompt_len) + gen_len;
  OFFGEN_CHECK(total > 0, "a KV budget needs a positive sequence length");
  long long tokens = static_cast<long long>(budget);
  if (budget < 1.0) {
    // Round up, but not past a whole number that binary arithmetic overshot: 0.07 * 100 is
    // 7.000000000000001 in doubles and means 7 tokens, not 8.
    const double product = budget * static_cast<double>(total);
    const double nearest = std::round(product);
    tokens = static_cast<long long>(std::abs(product - nearest) <= 1e-9 * std::max(1.0, product)
                                        ? nearest
                                        : std::ceil(product));
  }
  tokens = std::clamp(tokens, 1LL, total);
  return static_cast<int>(tokens);
}

int policy_budget(PolicyKind kind, double budget, int max_prompt, int max_new, int total_len) {
  const int full = max_prompt + max_new;
  if (kind == PolicyKind::full || budget <= 0.0) return full;
  return std::min(full, resolve_kv_budget(budget, total_len > 0 ? total_len : full, 0));
}

void validate_policy_budget(const PolicyOptions& policy, double budget) {
  OFFGEN_CHECK(policy.recent_fraction >= 0.0 && policy.recent_fraction <= 1.0,
               "--recent-fraction must be in [0, 1] (got {})", policy.recent_fraction);
  OFFGEN_CHECK(policy.sinks >= 0, "--sinks must be >= 0 (got {})", policy.sinks);
  OFFGEN_CHECK(policy.kind == PolicyKind::full || budget > 0.0,
               "--policy {} needs --kv-budget (a fraction like 0.2 or a token count)",
               policy_name(policy.kind));
  // A fraction resolves per batch; effective_policy keeps it workable there.
  if (policy.kind == PolicyKind::streaming && budget >= 1.0) {
    OFFGEN_CHECK(budget > policy.sinks,
                 "--kv-budget {} cannot hold --policy streaming's {} attention sinks (--sinks {}) "
                 "plus one recent token: give --kv-budget {} or more, or lower --sinks",
                 budget, policy.sinks, policy.sinks, policy.sinks + 1);
  }
}

PolicyOptions effective_policy(const PolicyOptions& policy, int budget) {
  PolicyOptions out = policy;
  if (out.kind == PolicyKind::streaming && budget >= 1 && budget <= out.sinks) {
    out.sinks = budget - 1;
  }
  return out;
}

}  // namespace offgen
