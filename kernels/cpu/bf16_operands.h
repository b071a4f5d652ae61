// The bf16 operands of prompt-row GEMMs (PrefillMath::bf16), as the AVX512-BF16 outer-product
// tile (kernels/cpu/linear.cpp, which defines these) and the AMX tile (kernels/cpu/linear_amx.cpp)
// both read them: a 32-bit word holds the bf16 pair (k = 2t low half, 2t + 1 high half) of
// values of k, each fp16 value rounded to the nearest bf16.
#pragma once

#if defined(__x86_64__)
#include <cstdint>

#include "engine/core/half.h"

namespace offgen::kernels::cpu {

// Columns of a packed weight panel: three 16-column zmm (or AMX tile) blocks.
constexpr int kBf16PanelColumns = 48;

// panel[t·48 + j] = the pair t of W[j, :] for the `rows` (<= 48) rows of W at w (row stride k),
// zero past them; t < ceil(k / 2).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void pack_weight_panel_bf16(
    const Half* w, std::int64_t k, int rows, std::uint32_t* panel);

// One fp16 row of x as its ceil(k / 2) pairs (a zero pads an odd k's last pair).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void bf16_row(const Half* x,
                                                                              std::int64_t k,
                                                                              std::uint32_t* out);

}  // namespace offgen::kernels::cpu
#endif
