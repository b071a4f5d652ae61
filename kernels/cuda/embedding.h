// CUDA token and position embeddings. Semantics: kernels/cpu/embedding.h. Every function only
// enqueues on `stream` (and throws offgen::Error on a bad launch).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/core/half.h"

namespace offgen::kernels::cuda {

void gather_rows(const Half* table, std::int64_t table_rows, int dim, const std::int32_t* ids,
                 std::int64_t n, Half* out, cudaStream_t stream);

void add_position_embeddings(Half* x, const Half* table, int dim, const std::int32_t* positions,
                             std::int64_t n, int offset, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
