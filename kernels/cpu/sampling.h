// The batched token sampler on the CPU: rows in parallel (TBB), no sort of the vocabulary — top-k
// by selection over the candidates' logits, top-p by a histogram of the weights' fp32 exponents
// and a sort of the one bucket that holds the threshold. Semantics: kernels/sampling_args.h.
#pragma once

#include <cstdint>

#include "kernels/sampling_args.h"

namespace offgen::kernels::cpu {

void sample_rows(const SampleRowsArgs& args);

// out[r] = the lowest id of the largest logit of row r (NaN ranks as -inf; torch.argmax's ties),
// rows in parallel: a greedy step's picks.
void argmax_rows(const float* logits, std::int64_t rows, int vocab, std::int32_t* out);

}  // namespace offgen::kernels::cpu
