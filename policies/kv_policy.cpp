#include "policies/kv_policy.h"

#include "engine/core/error.h"
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
  }
  return "?";
}

PolicyKind parse_policy(std::string_view text) {
  for (PolicyKind kind :
       {PolicyKind::full, PolicyKind::local, PolicyKind::h2o, PolicyKind::streaming}) {
    if (text == policy_name(kind)) return kind;
  }
  fail("unknown KV policy '{}' (expected full, local, h2o or streaming)", text);
}

std::unique_ptr<KvPolicy> make_policy(const PolicyOptions& options, int budget) {
  OFFGEN_CHECK(budget >= 1, "a KV budget must keep at least one token (got {})", budget);
  switch (options.kind) {
    case PolicyKind::full:
      return policies::make_full(budget);
    case PolicyKind::local:
      return policies::make_local(budget);
    case PolicyKind::h2o:
      OFFGEN_CHECK(options.recent_fraction >= 0.0 && options.recent_fraction <= 1.0,
                   "--recent-fraction must be in [0, 1] (got {})", options.recent_fraction);
      return policies::make_h2o(budget, options.recent_fraction);
    case PolicyKind::streaming:
      OFFGEN_CHECK(options.sinks >= 0, "--sinks must be >= 0 (got {})", options.sinks);
      OFFGEN_CHECK(budget > options.sinks,
                   "a streaming budget of {} tokens cannot hold its {} sink tokens plus a recent "
                   "one; raise --kv-budget or lower --sinks",
                   budget, options.sinks);
      return policies::make_streaming(budget, options.sinks);
  }
  fail("unknown KV policy");
}

}  // namespace offgen
