// CPU h2o eviction kernels (semantics: kernels/eviction_args.h), TBB over (sequence, head).
#pragma once

#include "kernels/eviction_args.h"

namespace offgen::kernels::cpu {

void h2o_prefill_keep(const H2oPrefillArgs& args);
void h2o_decode_update(const H2oDecodeArgs& args);

}  // namespace offgen::kernels::cpu
