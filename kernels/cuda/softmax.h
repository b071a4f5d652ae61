// CUDA log-softmax, target log-probabilities and greedy picks over fp32 logits rows. Semantics:
// kernels/softmax_args.h and, for argmax_rows, kernels/sampling_args.h.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/sampling_args.h"
#include "kernels/softmax_args.h"

namespace offgen::kernels::cuda {

void log_softmax(const LogSoftmaxArgs& args, cudaStream_t stream);
void token_logprobs(const TokenLogprobsArgs& args, cudaStream_t stream);
void top_logprobs(const TopLogprobsArgs& args, cudaStream_t stream);
void argmax_rows(const ArgmaxRowsArgs& args, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
