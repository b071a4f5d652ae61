#include "engine/runtime/sampler.h"

#include <cmath>

#include "engine/core/error.h"

namespace offgen {

void validate(const SamplingParams& params) {
  OFFGEN_CHECK(std::isfinite(params.temperature) && params.temperature >= 0.0f,
               "temperature must be >= 0 (got {})", params.temperature);
  OFFGEN_CHECK(params.top_k >= 0, "top_k must be >= 0 (got {})", params.top_k);
  OFFGEN_CHECK(params.top_p > 0.0f && params.top_p <= 1.0f, "top_p must be in (0, 1] (got {})",
               params.top_p);
  OFFGEN_CHECK(params.min_p >= 0.0f && params.min_p <= 1.0f, "min_p must be in [0, 1] (got {})",
               params.min_p);
}

bool is_greedy(const SamplingParams& params) {
  return params.temperature == 0.0f || params.top_k == 1;
}

float uniform_draw(std::mt19937_64& rng) {
  return static_cast<float>(rng() >> 40) * 0x1p-24f;
}

kernels::SampleParams next_sample(const SamplingParams& params, std::mt19937_64& rng) {
  if (is_greedy(params)) return {};
  return {params.temperature, params.top_k, params.top_p, uniform_draw(rng), params.min_p};
}

}  // namespace offgen
