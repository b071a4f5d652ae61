// bf16 prompt-row GEMMs on Intel's AMX tile unit (PrefillMath::bf16 where the CPU has AMX-BF16
// and the process was granted its tile state): y[m, n] = Σ_k x[m, k]·W[n, k] over bf16 operands,
// summed in fp32 by tdpbf16ps, then the epilogue.
//
// Not bit-equal to the reference's spelled-out vdpbf16ps order: tdpbf16ps's summation inside
// one tile multiply (32 products into each output) is the hardware's own (measured: it matches
// neither order of the pair nor one rounding per tile multiply), so the tests hold it to the
// exact product of the bf16 operands within fp32's error bound instead. Its order along k is
// fixed (tiles of 32 values of k, in order) and every output element is computed from its own
// row of x and column of W alone, so a row's bits are the same whatever rows are beside it.
#pragma once

#include <cstdint>

#include "engine/core/half.h"
#include "kernels/cpu/gemm_parts.h"

namespace offgen::kernels::cpu {

// Whether bf16 prompt rows run on AMX: the CPU has it, the tile state was granted, and
// OFFGEN_CPU_ISA (read per call: tests flip it) does not cap the kernels at avx512 or below.
bool use_amx_bf16();

#if defined(__x86_64__)
void gemm_amx_bf16(const Half* x, const Half* weight, std::int64_t m, std::int64_t n,
                   std::int64_t k, const Epilogue& store);
#endif

}  // namespace offgen::kernels::cpu
