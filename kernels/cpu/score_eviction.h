// CPU attention-score eviction kernels (semantics: kernels/eviction_args.h), TBB over (sequence,
// head), or over sequences where the heads of a layer rank together.
#pragma once

#include "kernels/eviction_args.h"

namespace offgen::kernels::cpu {

void score_prefill_keep(const ScorePrefillArgs& args);
void score_decode_update(const ScoreDecodeArgs& args);

}  // namespace offgen::kernels::cpu
