// CPU 4-bit group-wise quantization (semantics: kernels/quantize_args.h), bit-identical to the
// reference. All three run TBB over blocks of up to 64 groups laid side by side, so the per-group
// steps are vector loops across groups.
#pragma once

#include "kernels/quantize_args.h"

namespace offgen::kernels::cpu {

void quantize(const QuantizeArgs& args);
// Each value is a lookup in its group's table of the 16 possible outputs.
void dequantize(const DequantizeArgs& args);
// A slot outside the capacity throws offgen::Error before anything is written.
void quantize_kv_slots(const QuantizeKvSlotsArgs& args);

}  // namespace offgen::kernels::cpu
