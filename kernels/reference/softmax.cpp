#include <cmath>

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

}  // namespace offgen::kernels::reference
