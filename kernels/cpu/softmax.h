// Log-softmax over logits rows, fp32 throughout (max-subtracted, so no overflow).
#pragma once

#include <cstdint>

namespace offgen::kernels::cpu {

// values[r, :] = values[r, :] - logsumexp(values[r, :]), in place.
void log_softmax(float* values, std::int64_t rows, int cols);

// out[r] = logits[r, targets[r]] - logsumexp(logits[r, :]): log p(target) without storing the row.
void token_logprobs(const float* logits, const std::int32_t* targets, float* out, std::int64_t rows,
                    int vocab);

}  // namespace offgen::kernels::cpu
