// Log-softmax and target log-probabilities over fp32 logits rows (semantics:
// kernels/softmax_args.h), fp32 throughout with the sums added up in double.
#pragma once

#include "kernels/softmax_args.h"

namespace offgen::kernels::cpu {

void log_softmax(const LogSoftmaxArgs& args);
void token_logprobs(const TokenLogprobsArgs& args);
// One pass per row keeping the k best in a sorted list of at most kMaxTopLogprobs.
void top_logprobs(const TopLogprobsArgs& args);

}  // namespace offgen::kernels::cpu
