// CUDA token and position embeddings. Semantics: kernels/embedding_args.h. Every function only
// enqueues on `stream` (and throws offgen::Error on a bad launch).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/embedding_args.h"

namespace offgen::kernels::cuda {

void gather_rows(const GatherRowsArgs& args, cudaStream_t stream);
void add_position_embeddings(const PositionEmbeddingArgs& args, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
