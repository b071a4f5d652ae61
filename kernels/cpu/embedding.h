// Token and position embeddings. Threading: TBB inside; call from one thread at a time per output.
#pragma once

#include <cstdint>

#include "engine/core/half.h"

namespace offgen::kernels::cpu {

// out[i, :] = table[ids[i], :]. Precondition: 0 <= ids[i] < table_rows (the engine validates ids).
void gather_rows(const Half* table, std::int64_t table_rows, int dim, const std::int32_t* ids,
                 std::int64_t n, Half* out);

// x[i, :] += table[positions[i] + offset, :] (fp32 add, one rounding). OPT's offset is 2; padding
// tokens carry position -1 as in Hugging Face, so they read row offset - 1.
void add_position_embeddings(Half* x, const Half* table, int dim, const std::int32_t* positions,
                             std::int64_t n, int offset);

}  // namespace offgen::kernels::cpu
