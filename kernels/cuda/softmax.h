// CUDA log-softmax, target log-probabilities and greedy picks over fp32 logits rows.
// Semantics of the first two: kernels/cpu/softmax.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace offgen::kernels::cuda {

void log_softmax(float* values, std::int64_t rows, int cols, cudaStream_t stream);

void token_logprobs(const float* logits, const std::int32_t* targets, float* out, std::int64_t rows,
                    int vocab, cudaStream_t stream);

// out[r] = argmax over logits[r, :] (ties: the lowest index, as engine/runtime/sampler.h argmax and
// torch.argmax do), so greedy decoding copies one int per sequence back, not the logits.
void argmax_rows(const float* logits, std::int64_t rows, int vocab, std::int32_t* out,
                 cudaStream_t stream);

}  // namespace offgen::kernels::cuda
