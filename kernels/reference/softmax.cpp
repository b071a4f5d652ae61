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

void log_softmax(float* values, std::int64_t rows, int cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = values + r * cols;
    const double lse = log_sum_exp(row, cols);
    for (int c = 0; c < cols; ++c) row[c] = static_cast<float>(row[c] - lse);
  }
}

void token_logprobs(const float* logits, const std::int32_t* targets, float* out, std::int64_t rows,
                    int vocab) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * vocab;
    out[r] = static_cast<float>(row[targets[r]] - log_sum_exp(row, vocab));
  }
}

}  // namespace offgen::kernels::reference
