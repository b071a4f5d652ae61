// Pointers to one model's weights in device memory, in the layout the forward pass consumes.
// q, k and v projections are fused into one [(heads + 2·kv_heads)·head_dim, hidden] matrix (and one
// bias) at load time so attention's input is a single GEMM; a gated MLP's gate and up projections
// likewise into one [2·ffn, hidden] fc1. Names are OPT's; the LLaMA family's tensors map to them
// (input_layernorm -> attn_ln, post_attention_layernorm -> ffn_ln, o_proj -> out, down -> fc2).
#pragma once

#include <vector>

#include "engine/core/half.h"
#include "kernels/int8_matrix.h"

namespace offgen {

struct LayerWeights {
  const Half* attn_ln_weight = nullptr;  // [hidden]; null without elementwise affine
  const Half* attn_ln_bias = nullptr;
  const Half* qkv_weight = nullptr;  // [qkv_dim, hidden]: rows q, then k, then v
  const Half* qkv_bias = nullptr;    // [qkv_dim]; null without biases
  const Half* out_weight = nullptr;  // [hidden, hidden]
  const Half* out_bias = nullptr;
  const Half* ffn_ln_weight = nullptr;  // HF's per-layer final_layer_norm
  const Half* ffn_ln_bias = nullptr;
  const Half* fc1_weight = nullptr;  // [ffn, hidden], or gate then up: [2·ffn, hidden]
  const Half* fc1_bias = nullptr;
  const Half* fc2_weight = nullptr;  // [hidden, ffn]
  const Half* fc2_bias = nullptr;
  // With int8 weights on the cpu device (kernels/int8_matrix.h) the four matrices are bound here,
  // where the layer's image keeps them packed, and their fp16 slots above stay null.
  kernels::Int8Matrix qkv_int8;
  kernels::Int8Matrix out_int8;
  kernels::Int8Matrix fc1_int8;
  kernels::Int8Matrix fc2_int8;
};

struct ModelWeights {
  const Half* embed_tokens = nullptr;     // [vocab, word_embed_proj_dim]; also a tied LM head
  const Half* lm_head = nullptr;          // [vocab, hidden] when untied, else null
  const Half* embed_positions = nullptr;  // [max_positions + 2, hidden]; null with rotary
  // The LM head's rows: lm_head when the model has its own, else the token embedding.
  const Half* head() const { return lm_head != nullptr ? lm_head : embed_tokens; }
  const Half* project_in = nullptr;       // [hidden, word_embed_proj_dim] or null
  const Half* project_out = nullptr;      // [word_embed_proj_dim, hidden] or null
  const Half* final_ln_weight = nullptr;  // [hidden] or null (LLaMA: norm.weight)
  const Half* final_ln_bias = nullptr;
  std::vector<LayerWeights> layers;
};

}  // namespace offgen
