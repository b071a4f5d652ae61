// Logit edits on the cuda device: one thread per edited (row, token). Semantics:
// kernels/logit_edit_args.h.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/logit_edit_args.h"

namespace offgen::kernels::cuda {

void edit_logits(const EditLogitsArgs& args, cudaStream_t stream);
void restore_logits(const EditLogitsArgs& args, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
