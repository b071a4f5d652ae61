// The cpu device's int8 weights (semantics and layout: kernels/int8_matrix.h): the packer that
// quantizes a matrix at load, and the GEMM over a packed one that cpu::linear runs for
// LinearArgs::weight_int8, both bit-identical to the reference.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/core/half.h"
#include "kernels/cpu/gemm_parts.h"
#include "kernels/linear_args.h"

namespace offgen::kernels::cpu {

// Quantizes w [rows, cols] (fp16, row-major) into the blob at `blob` (Int8Shape{rows, cols}.bytes()
// bytes, 64-byte aligned), padding included.
void pack_int8_matrix(const Half* w, std::int64_t rows, std::int64_t cols, std::byte* blob);

// y = act(x · Wᵀ + bias) over args.weight_int8, every row as the header says, each output row
// through `store` (linear()'s epilogue: bias, activation, fp16).
void linear_int8(const LinearArgs& args, const Epilogue& store);

}  // namespace offgen::kernels::cpu
