// Arguments of the log-probability ops over fp32 logits rows, shared by the reference, the CPU
// kernel and the CUDA kernel. Both are max-subtracted (no overflow) and fp32 or better throughout.
#pragma once

#include <cstdint>

namespace offgen::kernels {

// values[r, :] = values[r, :] - logsumexp(values[r, :]), in place.
struct LogSoftmaxArgs {
  float* values = nullptr;  // [rows, cols]
  std::int64_t rows = 0;
  int cols = 0;
};

// out[r] = logits[r, targets[r]] - logsumexp(logits[r, :]): log p(target) without storing the
// row. Precondition: 0 <= targets[r] < vocab.
struct TokenLogprobsArgs {
  const float* logits = nullptr;          // [rows, vocab]
  const std::int32_t* targets = nullptr;  // [rows]
  float* out = nullptr;                   // [rows]
  std::int64_t rows = 0;
  int vocab = 0;
};

// The most k asked for (OpenAI's and vLLM's limit on top_logprobs).
constexpr int kMaxTopLogprobs = 20;

// The k most likely ids of each row with their log-probabilities: ids[r * k + j] is the row's
// j-th id in the order logit descending (a NaN ranks as -inf), equal logits the lower id first;
// values[r * k + j] = its logit - logsumexp(row), computed as token_logprobs computes it, so the
// picked token's log-prob and its entry here agree. 1 <= k <= min(vocab, kMaxTopLogprobs).
struct TopLogprobsArgs {
  const float* logits = nullptr;  // [rows, vocab]
  std::int32_t* ids = nullptr;    // [rows, k]
  float* values = nullptr;        // [rows, k]
  std::int64_t rows = 0;
  int vocab = 0;
  int k = 0;
};

}  // namespace offgen::kernels
