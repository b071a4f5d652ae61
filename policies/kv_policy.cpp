#include "policies/kv_policy.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/core/parameter_error.h"
#include "policies/policy_factories.h"

namespace offgen {

std::string_view policy_name(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::full:
      return "full";
    case PolicyKind::local:
      return "local";
    case PolicyKind::h2o:
      return "h2o";
    case PolicyKind::streaming:
      return "streaming";
    case PolicyKind::tova:
      return "tova";
    case PolicyKind::snapkv:
      return "snapkv";
    case PolicyKind::pyramidkv:
      return "pyramidkv";
    case PolicyKind::quest:
      return "quest";
  }
  return "?";
}

namespace {

constexpr PolicyKind kPolicies[] = {PolicyKind::full,      PolicyKind::local, PolicyKind::h2o,
                                    PolicyKind::streaming, PolicyKind::tova,  PolicyKind::snapkv,
                                    PolicyKind::pyramidkv, PolicyKind::quest};

}  // namespace

std::vector<std::string> policy_names() {
  std::vector<std::string> names;
  for (PolicyKind kind : kPolicies) names.emplace_back(policy_name(kind));
  return names;
}

PolicyKind parse_policy(std::string_view text) {
  for (PolicyKind kind : kPolicies) {
    if (text == policy_name(kind)) return kind;
  }
  fail(
      "unknown KV policy '{}' (expected full, local, h2o, streaming, tova, snapkv, pyramidkv or "
      "quest)",
      text);
}

std::unique_ptr<KvPolicy> KvPolicy::layer_policy(int, int) const {
  return nullptr;
}

int KvPolicy::cache_slots(int layers) const {
  int largest = budget();
  for (int l = 0; l < layers; ++l) {
    if (const auto layer = layer_policy(l, layers)) largest = std::max(largest, layer->budget());
  }
  return largest + 1;
}

void validate_snapkv_options(const PolicyOptions& options) {
  OFFGEN_CHECK_NAMING(options.observation_window >= 1, [=](ParameterNamer name) {
    return fmt::format("{} must be >= 1 (got {})", name(Parameter::observation_window),
                       options.observation_window);
  });
  OFFGEN_CHECK_NAMING(options.pyramid_beta >= 1, [=](ParameterNamer name) {
    return fmt::format("{} must be >= 1 (got {})", name(Parameter::pyramid_beta),
                       options.pyramid_beta);
  });
  OFFGEN_CHECK_NAMING(options.pool_kernel >= 1 && options.pool_kernel % 2 == 1,
                      [=](ParameterNamer name) {
                        return fmt::format("{} must be an odd number >= 1 (got {})",
                                           name(Parameter::pool_kernel), options.pool_kernel);
                      });
}

void validate_quest_options(const PolicyOptions& options) {
  OFFGEN_CHECK_NAMING(options.page_size >= 1, [=](ParameterNamer name) {
    return fmt::format("{} must be >= 1 (got {})", name(Parameter::page_size), options.page_size);
  });
  OFFGEN_CHECK_NAMING(options.dense_layers >= 0, [=](ParameterNamer name) {
    return fmt::format("{} must be >= 0 (got {})", name(Parameter::dense_layers),
                       options.dense_layers);
  });
}

std::unique_ptr<KvPolicy> make_policy(const PolicyOptions& options, int budget) {
  OFFGEN_CHECK(budget >= 1, "a KV budget must keep at least one token (got {})", budget);
  switch (options.kind) {
    case PolicyKind::full:
      return policies::make_full(budget);
    case PolicyKind::local:
      return policies::make_local(budget);
    case PolicyKind::h2o:
      OFFGEN_CHECK_NAMING(options.recent_fraction >= 0.0 && options.recent_fraction <= 1.0,
                          [=](ParameterNamer name) {
                            return fmt::format("{} must be in [0, 1] (got {})",
                                               name(Parameter::recent_fraction),
                                               options.recent_fraction);
                          });
      return policies::make_h2o(budget, options.recent_fraction);
    case PolicyKind::streaming:
      OFFGEN_CHECK_NAMING(options.sinks >= 0, [=](ParameterNamer name) {
        return fmt::format("{} must be >= 0 (got {})", name(Parameter::sinks), options.sinks);
      });
      OFFGEN_CHECK_NAMING(budget > options.sinks, [=](ParameterNamer name) {
        return fmt::format(
            "a streaming budget of {} tokens cannot hold its {} sink tokens plus a recent one; "
            "raise {} or lower {}",
            budget, options.sinks, name(Parameter::kv_budget), name(Parameter::sinks));
      });
      return policies::make_streaming(budget, options.sinks);
    case PolicyKind::tova:
      return policies::make_tova(budget);
    case PolicyKind::snapkv:
      validate_snapkv_options(options);
      return policies::make_snapkv(budget, options.observation_window, options.pool_kernel);
    case PolicyKind::pyramidkv:
      validate_snapkv_options(options);
      return policies::make_pyramidkv(budget, options.observation_window, options.pool_kernel,
                                      options.pyramid_beta);
    case PolicyKind::quest:
      validate_quest_options(options);
      return policies::make_quest(budget, options.page_size, options.attended_tokens,
                                  options.dense_layers);
  }
  fail("unknown KV policy");
}

}  // namespace offgen
