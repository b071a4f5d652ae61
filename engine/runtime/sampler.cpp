#include "engine/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/core/error.h"

namespace offgen {

void validate(const SamplingParams& params) {
  OFFGEN_CHECK(std::isfinite(params.temperature) && params.temperature >= 0.0f,
               "temperature must be >= 0 (got {})", params.temperature);
  OFFGEN_CHECK(params.top_k >= 0, "top_k must be >= 0 (got {})", params.top_k);
  OFFGEN_CHECK(params.top_p > 0.0f && params.top_p <= 1.0f, "top_p must be in (0, 1] (got {})",
               params.top_p);
}

std::int32_t argmax(std::span<const float> logits) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<std::int32_t>(best);
}

std::int32_t sample_token(std::span<const float> logits, const SamplingParams& params,
                          std::mt19937_64& rng) {
  if (params.temperature == 0.0f || params.top_k == 1) return argmax(logits);
  const std::size_t vocab = logits.size();
  std::vector<std::int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  auto by_logit = [&](std::int32_t a, std::int32_t b) {
    return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)] ||
           (logits[static_cast<std::size_t>(a)] == logits[static_cast<std::size_t>(b)] && a < b);
  };
  std::size_t keep = vocab;
  if (params.top_k > 0 && static_cast<std::size_t>(params.top_k) < vocab) {
    keep = static_cast<std::size_t>(params.top_k);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                      by_logit);
  } else {
    std::sort(order.begin(), order.end(), by_logit);
  }
  // Softmax over the kept tokens at this temperature (max subtracted: no overflow).
  const float max_logit = logits[static_cast<std::size_t>(order[0])];
  std::vector<double> probs(keep);
  double total = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp(static_cast<double>(
        (logits[static_cast<std::size_t>(order[i])] - max_logit) / params.temperature));
    total += probs[i];
  }
  // Top-p: the smallest prefix whose mass reaches top_p (the first token always stays).
  if (params.top_p < 1.0f) {
    double cumulative = 0.0;
    std::size_t cut = 0;
    while (cut < keep) {
      cumulative += probs[cut] / total;
      ++cut;
      if (cumulative >= static_cast<double>(params.top_p)) break;
    }
    keep = cut;
    total = std::accumulate(probs.begin(), probs.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  }
  std::uniform_real_distribution<double> uniform(0.0, total);
  const double draw = uniform(rng);
  double cumulative = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    cumulative += probs[i];
    if (draw < cumulative) return order[i];
  }
  return order[keep - 1];
}

}  // namespace offgen
