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

}  // namespace offgen::kernels
