#include "policies/kv_budget.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "engine/core/error.h"
#include "engine/core/parameter_error.h"

namespace offgen {
namespace {

// Checks a budget's number; `shown` is how messages quote it (the text as written).
void check_budget_number(double value, const std::string& shown) {
  OFFGEN_CHECK_NAMING(value > 0.0, [=](ParameterNamer name) {
    return fmt::format("{} must be positive (got {})", name(Parameter::kv_budget), shown);
  });
  OFFGEN_CHECK_NAMING(value < 1.0 || value == std::floor(value), [=](ParameterNamer name) {
    return fmt::format("{} {} is neither a fraction below 1 nor a whole number of tokens",
                       name(Parameter::kv_budget), shown);
  });
}

KvBudget checked_budget(double value, const std::string& shown) {
  check_budget_number(value, shown);
  return value < 1.0 ? KvBudget::fraction(value)
                     : KvBudget::tokens(static_cast<int>(std::min<double>(value, 1 << 30)));
}

}  // namespace

KvBudget KvBudget::fraction(double share) {
  OFFGEN_CHECK(share > 0.0 && share < 1.0, "a KV budget fraction must be in (0, 1) (got {})",
               share);
  return {Kind::fraction, share};
}

KvBudget KvBudget::tokens(int count) {
  OFFGEN_CHECK(count >= 1, "a KV budget must keep at least one token (got {})", count);
  return {Kind::tokens, static_cast<double>(count)};
}

KvBudget KvBudget::of(double value) {
  OFFGEN_CHECK_NAMING(std::isfinite(value), [=](ParameterNamer name) {
    return fmt::format("{} {} is not a number", name(Parameter::kv_budget), value);
  });
  return checked_budget(value, fmt::format("{}", value));
}

KvBudget KvBudget::parse(std::string_view text) {
  double value = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  OFFGEN_CHECK_NAMING(
      ec == std::errc() && end == text.data() + text.size() && std::isfinite(value),
      [=, text = std::string(text)](ParameterNamer name) {
        return fmt::format(
            "{} '{}' is not a number (use a fraction like 0.2 or a token count like 128)",
            name(Parameter::kv_budget), text);
      });
  return checked_budget(value, std::string(text));
}

int KvBudget::tokens_for(int length) const {
  OFFGEN_CHECK(length > 0, "a KV budget needs a positive sequence length");
  const long long total = length;
  long long tokens = total;
  switch (kind_) {
    case Kind::whole_sequence:
      break;
    case Kind::tokens:
      tokens = static_cast<long long>(value_);
      break;
    case Kind::fraction: {
      // Round up, but not past a whole number that binary arithmetic overshot: 0.07 * 100 is
      // 7.000000000000001 in doubles and means 7 tokens, not 8.
      const double product = value_ * static_cast<double>(total);
      const double nearest = std::round(product);
      tokens = static_cast<long long>(std::abs(product - nearest) <= 1e-9 * std::max(1.0, product)
                                          ? nearest
                                          : std::ceil(product));
      break;
    }
  }
  return static_cast<int>(std::clamp(tokens, 1LL, total));
}

int policy_budget(PolicyKind kind, const KvBudget& budget, int max_prompt, int max_new,
                  int total_len) {
  const int full = max_prompt + max_new;
  // quest caches every token; its budget is what a step attends (sequence_policy).
  if (kind == PolicyKind::full || kind == PolicyKind::quest || budget.whole_sequence()) {
    return full;
  }
  return std::min(full, budget.tokens_for(total_len > 0 ? total_len : full));
}

std::unique_ptr<KvPolicy> sequence_policy(const PolicyOptions& policy, const KvBudget& budget,
                                          int max_prompt, int max_new, int total_len) {
  const int cached = policy_budget(policy.kind, budget, max_prompt, max_new, total_len);
  PolicyOptions options = effective_policy(policy, cached);
  if (policy.kind == PolicyKind::quest) {
    const int full = max_prompt + max_new;
    options.attended_tokens = std::min(full, budget.tokens_for(total_len > 0 ? total_len : full));
  }
  return make_policy(options, cached);
}

void validate_policy_budget(const PolicyOptions& policy, const KvBudget& budget) {
  OFFGEN_CHECK_NAMING(
      policy.recent_fraction >= 0.0 && policy.recent_fraction <= 1.0, [=](ParameterNamer name) {
        return fmt::format("{} must be in [0, 1] (got {})", name(Parameter::recent_fraction),
                           policy.recent_fraction);
      });
  OFFGEN_CHECK_NAMING(policy.sinks >= 0, [=](ParameterNamer name) {
    return fmt::format("{} must be >= 0 (got {})", name(Parameter::sinks), policy.sinks);
  });
  OFFGEN_CHECK_NAMING(policy.kind == PolicyKind::full || !budget.whole_sequence(),
                      [=](ParameterNamer name) {
                        return fmt::format("{} {} needs {} (a fraction like 0.2 or a token count)",
                                           name(Parameter::policy), policy_name(policy.kind),
                                           name(Parameter::kv_budget));
                      });
  if (policy.kind == PolicyKind::quest) validate_quest_options(policy);
  if (policy.kind == PolicyKind::snapkv || policy.kind == PolicyKind::pyramidkv) {
    validate_snapkv_options(policy);
    // A fraction resolves per sequence; the policy then narrows its window below C.
    if (budget.kind() == KvBudget::Kind::tokens) {
      OFFGEN_CHECK_NAMING(budget.value() > policy.observation_window, [=](ParameterNamer name) {
        return fmt::format(
            "{} {} cannot hold {} {}'s observation window ({} {}) plus one prompt token: "
            "give {} {} or more, or lower {}",
            name(Parameter::kv_budget), budget.value(), name(Parameter::policy),
            policy_name(policy.kind), name(Parameter::observation_window),
            policy.observation_window, name(Parameter::kv_budget), policy.observation_window + 1,
            name(Parameter::observation_window));
      });
    }
  }
  // A fraction resolves per batch; effective_policy keeps it workable there.
  if (policy.kind == PolicyKind::streaming && budget.kind() == KvBudget::Kind::tokens) {
    OFFGEN_CHECK_NAMING(budget.value() > policy.sinks, [=](ParameterNamer name) {
      return fmt::format(
          "{} {} cannot hold {} streaming's {} attention sinks ({} {}) plus one recent token: "
          "give {} {} or more, or lower {}",
          name(Parameter::kv_budget), budget.value(), name(Parameter::policy), policy.sinks,
          name(Parameter::sinks), policy.sinks, name(Parameter::kv_budget), policy.sinks + 1,
          name(Parameter::sinks));
    });
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
