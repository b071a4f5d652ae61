// Reference sampler: the steps of kernels/sampling_args.h written out literally — a full sort for
// top-k and top-p, double sums — so the fast kernels have an obvious truth to match.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/vector_math.h"
#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {
namespace {

float rank_of(float logit) {
  return std::isnan(logit) ? -std::numeric_limits<float>::infinity() : logit;
}

std::int32_t greedy(const float* row, int vocab) {
  int best = 0;
  for (int i = 1; i < vocab; ++i) {
    if (rank_of(row[i]) > rank_of(row[best])) best = i;
  }
  return best;
}

std::int32_t sample_row(const float* row, int vocab, const SampleParams& p,
                        const std::uint8_t* sampleable) {
  if (p.temperature == 0.0f || p.top_k == 1) return greedy(row, vocab);
  // 1. The candidates.
  std::vector<int> kept;
  for (int i = 0; i < vocab; ++i) {
    const bool allowed = sampleable == nullptr || sampleable[i] != 0;
    if (allowed && rank_of(row[i]) > -std::numeric_limits<float>::infinity()) kept.push_back(i);
  }
  if (kept.empty()) return greedy(row, vocab);
  float m = -std::numeric_limits<float>::infinity();
  for (int i : kept) m = std::max(m, row[i]);
  // 2. top-k by a full sort of the candidates' logits.
  if (p.top_k > 0 && static_cast<std::size_t>(p.top_k) < kept.size()) {
    std::vector<float> sorted;
    for (int i : kept) sorted.push_back(row[i]);
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    const float kth = sorted[static_cast<std::size_t>(p.top_k - 1)];
    std::erase_if(kept, [&](int i) { return row[i] < kth; });
  }
  // 3. Weights.
  std::vector<float> w(static_cast<std::size_t>(vocab), 0.0f);
  for (int i : kept) {
    w[static_cast<std::size_t>(i)] =
        row[i] == m ? 1.0f : cpu::fast_exp((row[i] - m) / p.temperature);
  }
  // min-p: relative to the largest weight, which is 1.
  if (p.min_p > 0.0f) {
    std::erase_if(kept, [&](int i) {
      float& wi = w[static_cast<std::size_t>(i)];
      if (wi >= p.min_p) return false;
      wi = 0.0f;
      return true;
    });
  }
  // 4. top-p: walk the weights from the largest down until they hold top_p of the mass.
  if (p.top_p < 1.0f) {
    double z = 0.0;
    for (int i : kept) z += w[static_cast<std::size_t>(i)];
    std::vector<float> sorted;
    for (int i : kept) sorted.push_back(w[static_cast<std::size_t>(i)]);
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    const double target = static_cast<double>(p.top_p) * z;
    float tau = sorted.back();
    double mass = 0.0;
    for (float v : sorted) {
      mass += v;
      if (mass >= target) {
        tau = v;
        break;
      }
    }
    std::erase_if(kept, [&](int i) { return w[static_cast<std::size_t>(i)] < tau; });
  }
  // 5. The draw, in id order.
  double total = 0.0;
  for (int i : kept) total += w[static_cast<std::size_t>(i)];
  const double target = static_cast<double>(p.uniform) * total;
  double running = 0.0;
  for (int i : kept) {
    running += w[static_cast<std::size_t>(i)];
    if (running > target) return i;
  }
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
    if (w[static_cast<std::size_t>(*it)] > 0.0f) return *it;
  }
  return kept.back();
}

}  // namespace

void argmax_rows(const ArgmaxRowsArgs& args) {
  for (std::int64_t r = 0; r < args.rows; ++r) {
    args.out[r] = greedy(args.logits + r * args.vocab, args.vocab);
  }
}

void sample_rows(const SampleRowsArgs& args) {
  for (std::int64_t r = 0; r < args.rows; ++r) {
    args.out[r] =
        sample_row(args.logits + r * args.vocab, args.vocab, args.params[r], args.sampleable);
  }
}

}  // namespace offgen::kernels::reference
