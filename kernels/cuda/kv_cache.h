// CUDA KV-cache writes. Semantics: kernels/kv_cache_args.h (a slot outside the capacity is
// skipped). Both only enqueue on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/kv_cache_args.h"

namespace offgen::kernels::cuda {

void store_prefill_kv(const StorePrefillKvArgs& args, cudaStream_t stream);
void append_kv(const AppendKvArgs& args, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
