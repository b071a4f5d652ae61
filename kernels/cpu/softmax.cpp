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

void top_logprobs(const TopLogprobsArgs& args) {
  const std::int64_t rows = args.rows;
  const int vocab = args.vocab;
  const int k = args.k;
  if (k <= 0 || vocab <= 0) return;
  tbb::parallel_for(std::int64_t{0}, rows, [&](std::int64_t r) {
    const float* row = args.logits + r * vocab;
    // The k best (rank, id) pairs by one pass keeping a small sorted list: ranks below the
    // current k-th are skipped with one compare, so the pass costs about one read of the row.
    std::int32_t best[kMaxTopLogprobs];
    float rank_of[kMaxTopLogprobs];
    int held = 0;
    for (int i = 0; i < vocab; ++i) {
      const float x = std::isnan(row[i]) ? -std::numeric_limits<float>::infinity() : row[i];
      // Ids arrive in increasing order, so an equal rank never displaces a held one.
      if (held == k && !(x > rank_of[k - 1])) continue;
      int at = held < k ? held++ : k - 1;
      while (at > 0 && x > rank_of[at - 1]) {
        best[at] = best[at - 1];
        rank_of[at] = rank_of[at - 1];
        --at;
      }
      best[at] = i;
      rank_of[at] = x;
    }
    const double lse = log_sum_exp(row, vocab);
    for (int j = 0; j < k; ++j) {
      args.ids[r * k + j] = best[j];
      args.values[r * k + j] = static_cast<float>(double{row[best[j]]} - lse);
    }
  });
}

}  // namespace offgen::kernels::cpu
