#include "engine/model/weight_blocks.h"

#include "engine/model/model_tensors.h"

namespace offgen {

std::size_t WeightBlock::add(std::string name, std::vector<std::int64_t> shape) {
  std::size_t numel = 1;
  for (std::int64_t d : shape) numel *= static_cast<std::size_t>(d);
  const std::size_t offset = elements;
  pieces.push_back({std::move(name), std::move(shape), offset});
  elements += (numel + 127) / 128 * 128;
  return offset;
}

void WeightBlock::add(std::string name, std::vector<std::int64_t> shape, const Half** slot,
                      kernels::Int8Matrix* int8_slot) {
  add(std::move(name), std::move(shape));
  binders.push_back({pieces.size() - 1, slot, int8_slot});
}

std::size_t WeightBlock::binder_end(std::size_t b) const {
  return b + 1 < binders.size() ? binders[b + 1].piece : pieces.size();
}

void WeightBlock::bind(const Half* base) const {
  for (const Binder& b : binders) *b.slot = base + pieces[b.piece].offset;
}

void WeightBlock::add_fused(const std::vector<Part>& parts, const Half** slot,
                            kernels::Int8Matrix* int8_slot) {
  binders.push_back({pieces.size(), slot, int8_slot});
  for (const Part& part : parts) {
    std::size_t numel = 1;
    for (std::int64_t d : part.shape) numel *= static_cast<std::size_t>(d);
    pieces.push_back({part.name, part.shape, elements});
    elements += numel;
  }
  elements = (elements + 127) / 128 * 128;
}

namespace {

// OPT's q, k, v: three [hidden, hidden] matrices (and [hidden] biases).
std::vector<WeightBlock::Part> opt_qkv(const std::string& prefix, const std::string& suffix,
                                       const std::vector<std::int64_t>& shape) {
  std::vector<WeightBlock::Part> parts;
  for (const char* part : {"q_proj", "k_proj", "v_proj"}) {
    parts.push_back({prefix + part + suffix, shape});
  }
  return parts;
}

WeightBlock llama_global_block(const ModelConfig& c, ModelWeights& w) {
  WeightBlock block;
  block.add("embed_tokens.weight", {c.vocab_size, c.hidden_size}, &w.embed_tokens);
  block.add("norm.weight", {c.hidden_size}, &w.final_ln_weight);
  if (!c.tie_word_embeddings) {
    block.add(std::string(kTiedLmHeadName), {c.vocab_size, c.hidden_size}, &w.lm_head);
  }
  return block;
}

WeightBlock llama_layer_block(const ModelConfig& c, int index, LayerWeights& l) {
  WeightBlock block;
  const std::string p = "layers." + std::to_string(index) + ".";
  const std::int64_t h = c.hidden_size;
  const std::int64_t f = c.ffn_dim;
  const std::int64_t kv = c.kv_dim();
  const std::string attn = p + "self_attn.";
  block.add(p + "input_layernorm.weight", {h}, &l.attn_ln_weight);
  block.add_fused({{attn + "q_proj.weight", {h, h}},
                   {attn + "k_proj.weight", {kv, h}},
                   {attn + "v_proj.weight", {kv, h}}},
                  &l.qkv_weight, &l.qkv_int8);
  if (c.qkv_bias) {
    block.add_fused(
        {{attn + "q_proj.bias", {h}}, {attn + "k_proj.bias", {kv}}, {attn + "v_proj.bias", {kv}}},
        &l.qkv_bias);
  }
  block.add(attn + "o_proj.weight", {h, h}, &l.out_weight, &l.out_int8);
  if (c.out_bias) block.add(attn + "o_proj.bias", {h}, &l.out_bias);
  block.add(p + "post_attention_layernorm.weight", {h}, &l.ffn_ln_weight);
  const std::string mlp = p + "mlp.";
  block.add_fused({{mlp + "gate_proj.weight", {f, h}}, {mlp + "up_proj.weight", {f, h}}},
                  &l.fc1_weight, &l.fc1_int8);
  if (c.out_bias) {
    block.add_fused({{mlp + "gate_proj.bias", {f}}, {mlp + "up_proj.bias", {f}}}, &l.fc1_bias);
  }
  block.add(mlp + "down_proj.weight", {h, f}, &l.fc2_weight, &l.fc2_int8);
  if (c.out_bias) block.add(mlp + "down_proj.bias", {h}, &l.fc2_bias);
  return block;
}

}  // namespace

WeightBlock global_weight_block(const ModelConfig& c, ModelWeights& w) {
  if (c.family == ModelFamily::llama) return llama_global_block(c, w);
  WeightBlock block;
  block.add("decoder.embed_tokens.weight", {c.vocab_size, c.word_embed_proj_dim}, &w.embed_tokens);
  block.add("decoder.embed_positions.weight",
            {c.max_position_embeddings + c.position_offset, c.hidden_size}, &w.embed_positions);
  if (c.has_projections()) {
    block.add("decoder.project_in.weight", {c.hidden_size, c.word_embed_proj_dim}, &w.project_in);
    block.add("decoder.project_out.weight", {c.word_embed_proj_dim, c.hidden_size}, &w.project_out);
  }
  if (c.has_final_layer_norm() && c.layer_norm_elementwise_affine) {
    block.add("decoder.final_layer_norm.weight", {c.hidden_size}, &w.final_ln_weight);
    block.add("decoder.final_layer_norm.bias", {c.hidden_size}, &w.final_ln_bias);
  }
  return block;
}

WeightBlock layer_weight_block(const ModelConfig& c, int index, LayerWeights& l) {
  if (c.family == ModelFamily::llama) return llama_layer_block(c, index, l);
  WeightBlock block;
  const std::string p = "decoder.layers." + std::to_string(index) + ".";
  const std::int64_t h = c.hidden_size;
  const std::int64_t f = c.ffn_dim;
  const bool affine = c.layer_norm_elementwise_affine;
  const bool bias = c.enable_bias;
  if (affine) {
    block.add(p + "self_attn_layer_norm.weight", {h}, &l.attn_ln_weight);
    block.add(p + "self_attn_layer_norm.bias", {h}, &l.attn_ln_bias);
  }
  block.add_fused(opt_qkv(p + "self_attn.", ".weight", {h, h}), &l.qkv_weight, &l.qkv_int8);
  if (bias) block.add_fused(opt_qkv(p + "self_attn.", ".bias", {h}), &l.qkv_bias);
  block.add(p + "self_attn.out_proj.weight", {h, h}, &l.out_weight, &l.out_int8);
  if (bias) block.add(p + "self_attn.out_proj.bias", {h}, &l.out_bias);
  if (affine) {
    block.add(p + "final_layer_norm.weight", {h}, &l.ffn_ln_weight);
    block.add(p + "final_layer_norm.bias", {h}, &l.ffn_ln_bias);
  }
  block.add(p + "fc1.weight", {f, h}, &l.fc1_weight, &l.fc1_int8);
  if (bias) block.add(p + "fc1.bias", {f}, &l.fc1_bias);
  block.add(p + "fc2.weight", {h, f}, &l.fc2_weight, &l.fc2_int8);
  if (bias) block.add(p + "fc2.bias", {h}, &l.fc2_bias);
  return block;
}

}  // namespace offgen
