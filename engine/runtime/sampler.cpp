#include "engine/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
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

namespace {
// NaN (an fp16 overflow upstream) ranks below every number, so sorting stays a strict weak
// ordering and a NaN is never picked while a real logit exists.
float rank_of(float logit) {
  return std::isnan(logit) ? -std::numeric_limits<float>::infinity() : logit;
}
}  // namespace

std::int32_t argmax(std::span<const float> logits) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i) {
    if (rank_of(logits[i]) > rank_of(logits[best])) best = i;
  }
  return static_cast<std::int32_t>(best);
}

std::int32_t sample_token(std::span<const float> logits, const SamplingParams& params,
                          std::mt19937_64& rng) {
  if (params.temperature == 0.0f || params.top_k == 1) return argmax(logits);
  const std::size_t vocab = logits.size();
  auto by_logit = [&](std::int32_t a, std::int32_t b) {
    const float la = rank_of(logits[static_cast<std::size_t>(a)]);
    const float lb = rank_of(logits[static_cast<std::size_t>(b)]);
    return la > lb || (la == lb && a < b);
  };
  // Candidates: every token, or with top-k every token whose logit is at least the k-th largest
  // (ties with the k-th stay in, as Hugging Face's TopKLogitsWarper keeps them).
  std::vector<std::int32_t> order;
  if (params.top_k > 0 && static_cast<std::size_t>(params.top_k) < vocab) {
    std::vector<float> ranks(vocab);
    for (std::size_t i = 0; i < vocab; ++i) ranks[i] = rank_of(logits[i]);
    std::nth_element(ranks.begin(), ranks.begin() + (params.top_k - 1), ranks.end(),
                     std::greater<float>());
    const float kth = ranks[static_cast<std::size_t>(params.top_k - 1)];
    for (std::size_t i = 0; i < vocab; ++i) {
      if (rank_of(logits[i]) >= kth) order.push_back(static_cast<std::int32_t>(i));
    }
  } else {
    order.resize(vocab);
    std::iota(order.begin(), order.end(), 0);
  }
  std::sort(order.begin(), order.end(), by_logit);
  std::size_t keep = order.size();
  // All NaN (or an infinite logit): nothing to weigh, take the top one.
  if (std::isinf(rank_of(logits[static_cast<std::size_t>(order[0])]))) return order[0];
  // Softmax over the kept tokens at this temperature (max subtracted: no overflow).
  const float max_logit = rank_of(logits[static_cast<std::size_t>(order[0])]);
  std::vector<double> probs(keep);
  double total = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp(static_cast<double>(
        (rank_of(logits[static_cast<std::size_t>(order[i])]) - max_logit) / params.temperature));
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
