// Arguments of the gated MLP's activation (SwiGLU: the LLaMA family's MLP), shared by the
// reference, the CPU kernel and the CUDA kernel. The gate and up projections are one fused GEMM
// whose output this op combines; the down projection follows as an ordinary linear.
#pragma once

#include <cstdint>

#include "engine/core/half.h"

namespace offgen::kernels {

// out[r, i] = half(half(silu(g)) * u) with g = gate_up[r, i], u = gate_up[r, ffn + i] and
// silu(g) = g / (1 + exp(-g)) in fp32: Hugging Face's act_fn(gate_proj(x)) * up_proj(x) on fp16.
// exp is fast_exp (kernels/cpu/vector_math.h: within 2 ulp of expf, plain fp32 operations that
// vectorise) in every implementation, the CUDA kernel's a copy of it with uncontracted operations,
// so all of them agree bit for bit. (With glibc's expf instead, half(silu(g)) comes out the same
// for every finite fp16 g: the choice costs nothing against Hugging Face's fp16 result.)
// half(silu(g)) * u is exact in fp32 (a product of two fp16 values), so the output is rounded
// once more, and only once.
struct SiluMulArgs {
  const Half* gate_up = nullptr;  // [rows, 2 * ffn]: gate in columns [0, ffn), up in [ffn, 2 ffn)
  Half* out = nullptr;            // [rows, ffn]; must not alias gate_up
  std::int64_t rows = 0;
  int ffn = 0;
};

}  // namespace offgen::kernels
