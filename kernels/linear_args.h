// Arguments of the forward pass's GEMMs, shared by the reference, the CPU kernel and the CUDA
// (cuBLASLt) one: fp16 operands, fp32 accumulation.
#pragma once

#include <cstdint>

#include "engine/core/half.h"
#include "kernels/activation.h"
#include "kernels/int8_matrix.h"
#include "kernels/prefill_math.h"

namespace offgen::kernels {

// y = act(x · weightᵀ + bias) with Hugging Face's weight layout (out × in); bias and activation
// are applied in fp32, then one rounding to fp16. y must not alias x.
struct LinearArgs {
  const Half* x = nullptr;       // [rows, in_features]
  const Half* weight = nullptr;  // [out_features, in_features]
  const Half* bias = nullptr;    // [out_features], or null
  Half* y = nullptr;             // [rows, out_features]
  std::int64_t rows = 0;
  int out_features = 0;
  int in_features = 0;
  Activation activation = Activation::none;
  // The rows are a prefill pass's prompt tokens, never mixed with generated ones. The CPU sums
  // prompt rows in another fixed order than decode rows (sequentially along k, the order of its
  // fast many-row kernel; decode rows in 16 lanes of k), so a row's bits depend on its own kind
  // only, never on how many rows are beside it. The reference and the CUDA device ignore it.
  bool prompt_rows = false;
  // For prompt rows on the CPU (the reference and the CPU kernels); ignored for decode rows. The
  // CUDA device refuses bf16 before any op is issued.
  PrefillMath prefill_math = PrefillMath::fp32;
  // int8 weights (kernels/int8_matrix.h): when set, the product is the int8 one of that header
  // for every row, prompt or decode, and `weight` and `prefill_math` are not read. The cpu device
  // and the reference only; the CUDA device is never given int8 weights. (A pointer: a struct
  // member left out of a designated initializer would warn at every call.)
  const Int8Matrix* weight_int8 = nullptr;
};

// The tied LM head, kept in fp32: out = x · embedᵀ.
struct LogitsArgs {
  const Half* x = nullptr;      // [rows, dim]
  const Half* embed = nullptr;  // [vocab, dim]: the token embedding table
  float* out = nullptr;         // [rows, vocab]
  std::int64_t rows = 0;
  int vocab = 0;
  int dim = 0;
};

}  // namespace offgen::kernels
