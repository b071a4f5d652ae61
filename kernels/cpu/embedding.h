// Token and position embeddings (semantics: kernels/embedding_args.h). Threading: TBB inside; call
// from one thread at a time per output.
#pragma once

#include "kernels/embedding_args.h"

namespace offgen::kernels::cpu {

void gather_rows(const GatherRowsArgs& args);
void add_position_embeddings(const PositionEmbeddingArgs& args);

}  // namespace offgen::kernels::cpu
