// CPU KV-cache writes (semantics: kernels/kv_cache_args.h). A slot outside the capacity throws
// offgen::Error.
#pragma once

#include "kernels/kv_cache_args.h"

namespace offgen::kernels::cpu {

// TBB over (sequence, kv head).
void store_prefill_kv(const StorePrefillKvArgs& args);
// A few KiB per call, so on the calling thread.
void append_kv(const AppendKvArgs& args);

}  // namespace offgen::kernels::cpu
