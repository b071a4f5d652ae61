#include "kernels/cpu/softmax.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/vector_math.h"

namespace offgen::kernels::cpu {
namespace {

// log Σ exp(row): max-subtracted; the sum is taken in fp32 blocks added up in double, so a
// 50k-entry vocabulary row loses nothing to fp32 summation.
OFFGEN_SIMD_CLONES double log_sum_exp(const float* row, int cols) {
  float max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max)
  for (int c = 0; c < cols; ++c) max = vmax(max, row[c]);
  double total = 0.0;
  constexpr int kBlock = 64;  // fp32 partial sums of <= 64 terms: error <= 63·2^-24 relative
  for (int c0 = 0; c0 < cols; c0 += kBlock) {
    const int c1 = std::min(cols, c0 + kBlock);
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int c = c0; c < c1; ++c) sum += fast_exp(row[c] - max);
    total += sum;
  }
  return double{max} + std::log(total);
}

// Rows per task: ~32K elements each.
std::int64_t row_grain(int cols) {
  return std::max<std::int64_t>(1, 32768 / std::max(cols, 1));
}

}  // namespace

void log_softmax(const LogSoftmaxArgs& args) {
  float* const values = args.values;
  const std::int64_t rows = args.rows;
  const int cols = args.cols;
  if (cols <= 0) return;
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, row_grain(cols)), [&](const auto& r) {
    for (std::int64_t i = r.begin(); i != r.end(); ++i) {
      float* row = values + i * cols;
      const auto lse = static_cast<float>(log_sum_exp(row, cols));
#pragma omp simd
      for (int c = 0; c < cols; ++c) row[c] -= lse;
    }
  });
}

void token_logprobs(const TokenLogprobsArgs& args) {
  const float* const logits = args.logits;
  const std::int32_t* const targets = args.targets;
  float* const out = args.out;
  const std::int64_t rows = args.rows;
  const int vocab = args.vocab;
  tbb::parallel_for(
      tbb::blocked_range<std::int64_t>(0, rows, row_grain(vocab)), [&](const auto& r) {
        for (std::int64_t i = r.begin(); i != r.end(); ++i) {
          const float* row = logits + i * vocab;
          out[i] = static_cast<float>(double{row[targets[i]]} - log_sum_exp(row, vocab));
        }
      });
}

}  // namespace offgen::kernels::cpu
