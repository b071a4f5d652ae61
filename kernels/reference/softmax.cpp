#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/reference/reference.h"

namespace offgen::kernels::reference {
namespace {

double log_sum_exp(const float* row, int cols) {
  double max = row[0];
  for (int c = 1; c < cols; ++c) max = row[c] > max ? row[c] : max;
  double sum = 0.0;
  for (int c = 0; c < cols; ++c) sum += std::exp(double{row[c]} - max);
  return max + std::log(sum);
}

}  // namespace

void log_softmax(const LogSoftmaxArgs& a) {
  for (std::int64_t r = 0; r < a.rows; ++r) {
    float* row = a.values + r * a.cols;
    const double lse = log_sum_exp(row, a.cols);
    for (int c = 0; c < a.cols; ++c) row[c] = static_cast<float>(row[c] - lse);
  }
}

void token_logprobs(const TokenLogprobsArgs& a) {
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const float* row = a.logits + r * a.vocab;
    a.out[r] = static_cast<float>(row[a.targets[r]] - log_sum_exp(row, a.vocab));
  }
}

void top_logprobs(const TopLogprobsArgs& a) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(a.vocab));
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const float* row = a.logits + r * a.vocab;
    const auto rank = [&](std::int32_t i) {
      return std::isnan(row[i]) ? -std::numeric_limits<float>::infinity() : row[i];
    };
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + a.k, ids.end(),
                      [&](std::int32_t x, std::int32_t y) {
                        return rank(x) > rank(y) || (rank(x) == rank(y) && x < y);
                      });
    const double lse = log_sum_exp(row, a.vocab);
    for (int j = 0; j < a.k; ++j) {
      const std::int32_t id = ids[static_cast<std::size_t>(j)];
      a.ids[r * a.k + j] = id;
      a.values[r * a.k + j] = static_cast<float>(row[id] - lse);
    }
  }
}

}  // namespace offgen::kernels::reference
