// CUDA 4-bit group-wise quantization. Semantics: kernels/quantize_args.h (bit-exact to the
// reference; quantize_kv_slots skips a slot outside the capacity). All three only enqueue on
// `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/quantize_args.h"

namespace offgen::kernels::cuda {

void quantize(const QuantizeArgs& args, cudaStream_t stream);
void dequantize(const DequantizeArgs& args, cudaStream_t stream);
void quantize_kv_slots(const QuantizeKvSlotsArgs& args, cudaStream_t stream);

}  // namespace offgen::kernels::cuda
