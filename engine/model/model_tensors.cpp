#include "engine/model/model_tensors.h"

#include <fmt/format.h>

#include "engine/model/tensor_shape.h"

namespace offgen {

std::int64_t TensorSpec::numel() const {
  return shape_numel(shape).value_or(0);
}

namespace {

// LlamaForCausalLM's tensors without the "model." prefix: the embedding, each layer, the final
// norm, and lm_head unless it is tied.
std::vector<TensorSpec> llama_tensor_specs(const ModelConfig& config) {
  const std::int64_t hidden = config.hidden_size;
  const std::int64_t ffn = config.ffn_dim;
  const std::int64_t kv = config.kv_dim();
  std::vector<TensorSpec> specs;
  const auto add = [&specs](std::string name, std::vector<std::int64_t> shape) {
    specs.push_back(TensorSpec{std::move(name), std::move(shape)});
  };
  add("embed_tokens.weight", {config.vocab_size, hidden});
  add("norm.weight", {hidden});
  if (!config.tie_word_embeddings) add(std::string(kTiedLmHeadName), {config.vocab_size, hidden});
  for (int layer = 0; layer < config.num_layers; ++layer) {
    const std::string prefix = fmt::format("layers.{}.", layer);
    add(prefix + "input_layernorm.weight", {hidden});
    const std::pair<const char*, std::int64_t> projections[] = {
        {"q_proj", hidden}, {"k_proj", kv}, {"v_proj", kv}};
    for (const auto& [name, rows] : projections) {
      add(prefix + "self_attn." + name + ".weight", {rows, hidden});
      if (config.qkv_bias) add(prefix + "self_attn." + name + ".bias", {rows});
    }
    add(prefix + "self_attn.o_proj.weight", {hidden, hidden});
    if (config.out_bias) add(prefix + "self_attn.o_proj.bias", {hidden});
    add(prefix + "post_attention_layernorm.weight", {hidden});
    for (const char* name : {"gate_proj", "up_proj"}) {
      add(prefix + "mlp." + name + ".weight", {ffn, hidden});
      if (config.out_bias) add(prefix + "mlp." + name + ".bias", {ffn});
    }
    add(prefix + "mlp.down_proj.weight", {hidden, ffn});
    if (config.out_bias) add(prefix + "mlp.down_proj.bias", {hidden});
  }
  return specs;
}

}  // namespace

std::vector<TensorSpec> model_tensor_specs(const ModelConfig& config) {
  if (config.family == ModelFamily::llama) return llama_tensor_specs(config);
  const std::int64_t hidden = config.hidden_size;
  const std::int64_t ffn = config.ffn_dim;
  const std::int64_t proj = config.word_embed_proj_dim;
  std::vector<TensorSpec> specs;
  const auto add = [&specs](std::string name, std::vector<std::int64_t> shape) {
    specs.push_back(TensorSpec{std::move(name), std::move(shape)});
  };
  const auto add_linear = [&](const std::string& prefix, std::int64_t out, std::int64_t in) {
    add(prefix + ".weight", {out, in});
    if (config.enable_bias) add(prefix + ".bias", {out});
  };
  const auto add_layer_norm = [&](const std::string& prefix) {
    if (!config.layer_norm_elementwise_affine) return;
    add(prefix + ".weight", {hidden});
    add(prefix + ".bias", {hidden});
  };

  add("decoder.embed_tokens.weight", {config.vocab_size, proj});
  // Learned positions are looked up at position + offset (2), so the table has two extra rows.
  add("decoder.embed_positions.weight",
      {config.max_position_embeddings + config.position_offset, hidden});
  if (config.has_projections()) {
    // HF builds both projections with bias=False regardless of enable_bias.
    add("decoder.project_out.weight", {proj, hidden});
    add("decoder.project_in.weight", {hidden, proj});
  }
  if (config.has_final_layer_norm()) add_layer_norm("decoder.final_layer_norm");

  for (int layer = 0; layer < config.num_layers; ++layer) {
    const std::string prefix = fmt::format("decoder.layers.{}.", layer);
    for (const char* name : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      add_linear(prefix + "self_attn." + name, hidden, hidden);
    }
    add_layer_norm(prefix + "self_attn_layer_norm");
    add_linear(prefix + "fc1", ffn, hidden);
    add_linear(prefix + "fc2", hidden, ffn);
    add_layer_norm(prefix + "final_layer_norm");
  }
  return specs;
}

std::string_view canonical_tensor_name(std::string_view name) {
  constexpr std::string_view kPrefix = "model.";
  if (name.starts_with(kPrefix)) name.remove_prefix(kPrefix.size());
  return name;
}

}  // namespace offgen
