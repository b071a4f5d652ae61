// Arguments of the row gather and the position-embedding add, shared by the reference, the CPU
// kernel and the CUDA kernel: how a batch's token ids become its first hidden states.
#pragma once

#include <cstdint>

#include "engine/core/half.h"

namespace offgen::kernels {

// out[i, :] = table[ids[i], :]: the token embedding lookup, and the head's pick of the rows it
// turns into logits. Precondition: 0 <= ids[i] < table_rows (the engine validates ids).
struct GatherRowsArgs {
  const Half* table = nullptr;        // [table_rows, dim]
  const std::int32_t* ids = nullptr;  // [rows]
  Half* out = nullptr;                // [rows, dim]
  std::int64_t table_rows = 0;
  std::int64_t rows = 0;
  int dim = 0;
};

// x[i, :] += table[positions[i] + offset, :] (fp32 add, one rounding). OPT's offset is 2; padding
// tokens carry position -1 as in Hugging Face, so they read row offset - 1.
struct PositionEmbeddingArgs {
  Half* x = nullptr;                        // [rows, dim], in place
  const Half* table = nullptr;              // [max position + offset + 1, dim]
  const std::int32_t* positions = nullptr;  // [rows]
  std::int64_t rows = 0;
  int dim = 0;
  int offset = 0;
};

}  // namespace offgen::kernels
