// The batched token sampler on the CPU: rows in parallel (TBB), no sort of the vocabulary — top-k
// by selection over the candidates' logits, top-p by a histogram of the weights' fp32 exponents
// and a sort of the one bucket that holds the threshold. Semantics: kernels/sampling_args.h.
#pragma once

#include "kernels/sampling_args.h"

namespace offgen::kernels::cpu {

void sample_rows(const SampleRowsArgs& args);

// Rows in parallel, each a vectorised scan.
void argmax_rows(const ArgmaxRowsArgs& args);

}  // namespace offgen::kernels::cpu
