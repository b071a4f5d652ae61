// Pointers to one model's weights in device memory, in the layout the forward pass consumes.
// q, k and v projections are fused into one [3·hidden, hidden] matrix (and one bias) at load time
// so attention's input is a single GEMM.
#pragma once

#include <vector>

#include "engine/core/half.h"

namespace offgen {

struct LayerWeights {
  const Half* attn_ln_weight = nullptr;  // [hidden]; null without elementwise affine
  const Half* attn_ln_bias = nullptr;
  const Half* qkv_weight = nullptr;  // [3·hidden, hidden]: rows q, then k, then v
  const Half* qkv_bias = nullptr;    // [3·hidden]; null without biases
  const Half* out_weight = nullptr;  // [hidden, hidden]
  const Half* out_bias = nullptr;
  const Half* ffn_ln_weight = nullptr;  // HF's per-layer final_layer_norm
  const Half* ffn_ln_bias = nullptr;
  const Half* fc1_weight = nullptr;  // [ffn, hidden]
  const Half* fc1_bias = nullptr;
  const Half* fc2_weight = nullptr;  // [hidden, ffn]
  const Half* fc2_bias = nullptr;
};

struct ModelWeights {
  const Half* embed_tokens = nullptr;     // [vocab, word_embed_proj_dim]; also the tied LM head
  const Half* embed_positions = nullptr;  // [max_positions + 2, hidden]
  const Half* project_in = nullptr;       // [hidden, word_embed_proj_dim] or null
  const Half* project_out = nullptr;      // [word_embed_proj_dim, hidden] or null
  const Half* final_ln_weight = nullptr;  // [hidden] or null
  const Half* final_ln_bias = nullptr;
  std::vector<LayerWeights> layers;
};

}  // namespace offgen
