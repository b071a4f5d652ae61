// A model's architecture hyper-parameters, from a Hugging Face config.json or the built-in table of
// released sizes, with the semantics of transformers' configs. Two families share one runtime:
//   opt    OPTConfig (opt-125m ... opt-175b): learned positions offset by 2, LayerNorm, ReLU MLP
//          with biases, pre- or post-LN, optional project_in / project_out, head tied.
//   llama  LlamaConfig and the configs that share its layer (model_type llama, mistral, qwen2):
//          rotary positions, RMSNorm, SwiGLU MLP, grouped-query attention, head tied or not,
//          no biases except Qwen2's q / k / v.
// The runner asks the predicates below (rotary(), gated_mlp(), ...) rather than the family.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace offgen {

enum class ModelFamily { opt, llama };

// How rotary inverse frequencies are scaled (config.json's rope_scaling; transformers'
// ROPE_INIT_FUNCTIONS): none ("default"), linear (positions / factor) or llama3 (LLaMA 3.1's
// wavelength-banded factor).
struct RopeScaling {
  enum class Kind { none, linear, llama3 };
  Kind kind = Kind::none;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;                 // llama3
  float high_freq_factor = 4.0f;                // llama3
  int original_max_position_embeddings = 8192;  // llama3
};

struct ModelConfig {
  std::string name;  // "opt-125m", or the checkpoint directory's name
  ModelFamily family = ModelFamily::opt;
  std::string model_type = "opt";  // config.json's: opt, llama, mistral, qwen2
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;  // grouped-query attention's K/V heads (llama); 0 = num_heads
  int ffn_dim = 0;       // OPT's ffn_dim, LLaMA's intermediate_size
  int vocab_size = 0;
  int max_position_embeddings = 0;
  int word_embed_proj_dim = 0;  // == hidden_size unless project_in / project_out exist (opt-350m)
  bool do_layer_norm_before = true;      // pre-LN; false for opt-350m (post-LN)
  bool remove_final_layer_norm = false;  // HF's `_remove_final_layer_norm`
  bool enable_bias = true;
  bool layer_norm_elementwise_affine = true;
  std::string activation_function = "relu";  // opt: only "relu"; llama: hidden_act, only "silu"
  int bos_token_id = 2;
  int eos_token_id = 2;
  std::vector<int> more_eos_token_ids;  // LLaMA 3.1 lists several; generation stops at any
  int pad_token_id = 1;  // what fills padding (masked); the EOS where the config names none
  // Whether pad_token_id is the config's own (OPT's <pad>): only then is it hidden from text.
  // LLaMA 3 and Qwen2 name none, and their id 0 is an ordinary token ("!").
  bool has_pad_token = true;
  float layer_norm_eps = 1e-5f;     // LayerNorm's eps, or llama's rms_norm_eps
  int position_offset = 2;          // OPT's learned positions are offset by 2 (llama: 0)
  bool tie_word_embeddings = true;  // the LM head is the token embedding (else lm_head.weight)
  bool qkv_bias = true;  // q / k / v projections have biases (opt: enable_bias; qwen2: always)
  bool out_bias = true;  // o_proj / out_proj and the MLP have biases (opt: enable_bias)
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  int sliding_window = 0;  // Mistral's attention window; 0 = none. Longer sequences are refused.

  int head_dim() const { return hidden_size / num_heads; }
  // Positions a sequence may use: max_position_embeddings, or a sliding window's width (within it,
  // windowed attention is full attention).
  int max_positions() const {
    return sliding_window > 0 ? std::min(sliding_window, max_position_embeddings)
                              : max_position_embeddings;
  }
  bool is_eos(int token) const {
    return token == eos_token_id || std::find(more_eos_token_ids.begin(), more_eos_token_ids.end(),
                                              token) != more_eos_token_ids.end();
  }
  int kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
  // Width of the fused q / k / v projection's output: q heads, then k heads, then v heads.
  int qkv_dim() const { return (num_heads + 2 * kv_heads()) * head_dim(); }
  // Width of one token's K (or V) row in the cache, all KV heads.
  int kv_dim() const { return kv_heads() * head_dim(); }
  bool rotary() const { return family == ModelFamily::llama; }
  bool rms_norm() const { return family == ModelFamily::llama; }
  // SwiGLU: a fused gate / up projection of 2 * ffn_dim rows, silu(gate) * up, then down.
  bool gated_mlp() const { return family == ModelFamily::llama; }
  bool learned_positions() const { return family == ModelFamily::opt; }
  // Rows of the first MLP projection (fc1, or gate and up fused).
  int ffn_in_rows() const { return gated_mlp() ? 2 * ffn_dim : ffn_dim; }
  // The four GEMMs of a decoder layer (q / k / v fused, out, fc1 or gate + up, fc2 or down):
  // each weight's [out_features, in_features].
  std::array<std::array<int, 2>, 4> layer_gemm_shapes() const {
    return {{{qkv_dim(), hidden_size},
             {hidden_size, num_heads * head_dim()},
             {ffn_in_rows(), hidden_size},
             {hidden_size, ffn_dim}}};
  }
  // Their weights: a decoder layer's GEMM parameters.
  std::int64_t layer_gemm_params() const {
    std::int64_t params = 0;
    for (const auto& [out, in] : layer_gemm_shapes()) params += std::int64_t{out} * in;
    return params;
  }
  // The rotary inverse frequencies [head_dim / 2], in fp32 as transformers computes them
  // (scaling included); empty without rotary positions.
  std::vector<float> rope_inv_freq() const;
  bool has_projections() const { return word_embed_proj_dim != hidden_size; }
  // Final layer norm exists only for pre-LN models (HF: do_layer_norm_before and not removed).
  bool has_final_layer_norm() const { return do_layer_norm_before && !remove_final_layer_norm; }
  std::int64_t num_parameters() const;

  // Throws offgen::Error if fields are missing, non-positive or inconsistent (hidden % heads, ...).
  void validate() const;

  // Reads config.json (model_type opt, llama, mistral or qwen2); throws offgen::Error naming the
  // file and the field on any problem.
  static ModelConfig from_json_file(const std::filesystem::path& path);
  // Parses config.json text; `source` names it in error messages.
  static ModelConfig from_json_text(std::string_view text, std::string_view source);
  // "opt-125m", "OPT-30B", "llama-2-7b": the built-in table; nullopt for an unknown name.
  // "facebook/opt-1.3b"
  // is not a config name but a Hugging Face model (model_name.h finds it in the local cache).
  static std::optional<ModelConfig> from_name(std::string_view name);
  static std::vector<std::string> known_names();
  // The Hugging Face repository a known config name stands for ("opt-1.3b" ->
  // "facebook/opt-1.3b", "llama-2-7b" -> "meta-llama/Llama-2-7b-hf"), for messages.
  static std::string hub_repo(std::string_view name);
  // The known config name of a Hugging Face repository's family and size, for the dummy weights a
  // message suggests: its own where the table has it, else the family's first (a LLaMA 3 name ->
  // llama-3-8b, Mistral -> mistral-7b, ...), else opt-125m.
  static std::string nearest_known_name(std::string_view repo_id);
};

}  // namespace offgen
