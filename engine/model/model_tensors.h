// The parameter tensors of a model, named and shaped as in Hugging Face's OPTModel or LlamaModel
// (no "model." prefix). OPT's lm_head is tied to decoder.embed_tokens and so is not listed; a
// LLaMA-family model lists lm_head.weight unless tie_word_embeddings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/model_config.h"

namespace offgen {

struct TensorSpec {
  std::string name;  // e.g. "decoder.layers.0.fc1.weight"
  std::vector<std::int64_t> shape;

  std::int64_t numel() const;
};

// Every tensor a valid model of this config has (LLaMA family: embedding, final norm, lm_head, then
// each layer). OPT: every tensor a valid OPT of this config has, in a fixed order: embeddings,
// projections, final layer norm, then each layer. Biases only when enable_bias; LN params only when
// elementwise_affine.
std::vector<TensorSpec> model_tensor_specs(const ModelConfig& config);

// Strips the "model." prefix OPTForCausalLM checkpoints carry: "model.decoder.x" -> "decoder.x".
std::string_view canonical_tensor_name(std::string_view name);

// The output projection: OPT's is tied to decoder.embed_tokens.weight (checkpoints may store it
// anyway, and the loader skips it); a LLaMA-family model's is its own unless tied.
inline constexpr std::string_view kTiedLmHeadName = "lm_head.weight";

}  // namespace offgen
