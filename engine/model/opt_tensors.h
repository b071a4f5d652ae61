// The parameter tensors of an OPT model, named and shaped as in Hugging Face's OPTModel (no
// "model." prefix; lm_head is tied to decoder.embed_tokens and so is not listed).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/opt_config.h"

namespace offgen {

struct TensorSpec {
  std::string name;  // e.g. "decoder.layers.0.fc1.weight"
  std::vector<std::int64_t> shape;

  std::int64_t numel() const;
};

// Every tensor a valid OPT of this config has, in a fixed order: embeddings, projections, final
// layer norm, then each layer. Biases only when enable_bias; LN params only when
// elementwise_affine.
std::vector<TensorSpec> opt_tensor_specs(const OptConfig& config);

// Strips the "model." prefix OPTForCausalLM checkpoints carry: "model.decoder.x" -> "decoder.x".
std::string_view canonical_tensor_name(std::string_view name);

// The output projection tied to decoder.embed_tokens.weight; checkpoints may store it anyway.
inline constexpr std::string_view kTiedLmHeadName = "lm_head.weight";

}  // namespace offgen
