// Linear over int8 weights on Intel's AMX tile unit (tdpbusd), where the CPU has AMX-INT8 and the
// process was granted its tile state: the same integers as the vpdpbusd tile (kernels/cpu/
// linear_int8.cpp), so the same bits as the reference (kernels/int8_matrix.h).
//
// x is quantized per row into unsigned bytes (q + 128) in rows of whole 64-byte tile steps; the
// weights' 48-row column panels are B tiles as they lie (a quad of k per row and column: 16
// quads × 16 columns, rows 192 bytes apart). A task takes a column group of two panels and passes
// its row pairs over it: per activation group of k (two tile steps) and pair of 16-column blocks,
// a 2 × 2 tile pass sums the group in int32, exactly; then the zero point comes back out and the
// group's scaled sum is added to the rows' fp32 sums, group by group in order, as every int8
// path does. Integer sums have no order, so the bits are the reference's and a row's do not
// depend on the rows beside it.
#pragma once

#include <cstdint>

#include "engine/core/half.h"
#include "kernels/cpu/gemm_parts.h"
#include "kernels/linear_args.h"

namespace offgen::kernels::cpu {

// Rows from which linear_int8 takes the tile unit (a full A tile; fewer rows are decode steps,
// which read the weights once and gain nothing from it).
constexpr std::int64_t kAmxInt8MinRows = 16;

// Whether int8 GEMMs may run on AMX: the CPU has AMX-INT8 and AVX-512 BW / VL, the tile state
// was granted, and OFFGEN_CPU_ISA (read per call: tests flip it) does not cap the kernels.
bool use_amx_int8();

#if defined(__x86_64__)
// One activation group (len <= 128 values of x) as q + 128 bytes, its scale returned: the
// AVX-512 quantizer of kernels/cpu/linear_int8.cpp.
__attribute__((target("avx512f,avx512bw,avx512vl"))) float x_group_avx512(const Half* x,
                                                                          std::int64_t len,
                                                                          std::uint8_t* out);

// linear_int8 on the tile unit: args.weight_int8, each output row through `store`.
void linear_int8_amx(const LinearArgs& args, const Epilogue& store);
#endif

}  // namespace offgen::kernels::cpu
