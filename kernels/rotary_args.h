// Arguments of rotary position embedding (RoPE) applied in place to the q and k parts of the fused
// QKV projection output, shared by the reference, the CPU kernel and the CUDA kernel. Keys are
// rotated before they enter the KV cache, so an evicted slot never needs re-rotation.
#pragma once

#include <cstdint>

#include "engine/core/half.h"

namespace offgen::kernels {

// qkv is [rows, (heads + 2 * kv_heads) * head_dim] (kernels/attention_args.h): q heads first,
// then k heads, then v heads (v is not touched). For row r at position p = positions[r] and each
// q or k head's row x of head_dim D, with i in [0, D/2):
//   angle_i = float(p) * inv_freq[i]                        (fp32 product)
//   c_i = half(cosf(angle_i) * attention_scaling), s_i = half(sinf(angle_i) * attention_scaling)
//   x'[i]       = half(half(x[i] * c_i)       - half(x[i + D/2] * s_i))
//   x'[i + D/2] = half(half(x[i + D/2] * c_i) + half(x[i] * s_i))
// Hugging Face's LlamaRotaryEmbedding + apply_rotary_pos_emb (rotate_half pairs i with i + D/2)
// on fp16 tensors, each product and the sum rounded to fp16 as PyTorch does. inv_freq already
// carries the config's rope scaling (linear, llama3); the engine computes it on the host.
// A negative position (never produced for a real token) is treated as 0.
//
// cosf / sinf are the platform's: the host libm's on the CPU (the reference and the CPU kernel
// call the same functions, so they agree bit for bit) and CUDA's cosf / sinf (within 2 fp32 ulp;
// not the __cosf / __sinf intrinsics, which lose accuracy for large angles) on the GPU, where c_i
// or s_i can therefore land 1 fp16 ulp away from the host's when the fp32 value is near a rounding
// boundary. Each product and the sum are rounded as written (no fused multiply-add), so that is
// the only difference.
struct RotaryArgs {
  Half* qkv = nullptr;                      // [rows, (heads + 2 * kv_heads) * head_dim]
  const std::int32_t* positions = nullptr;  // [rows]
  const float* inv_freq = nullptr;          // [head_dim / 2], device memory
  float attention_scaling = 1.0f;
  std::int64_t rows = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;  // even (the kernels throw offgen::Error on an odd one)
};

}  // namespace offgen::kernels
