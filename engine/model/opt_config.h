// The OPT architecture hyper-parameters, from a Hugging Face config.json or the built-in table of
// released sizes (opt-125m ... opt-175b), with the semantics of transformers' OPTConfig.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace offgen {

struct OptConfig {
  std::string name;  // "opt-125m", or the checkpoint directory's name
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int ffn_dim = 0;
  int vocab_size = 0;
  int max_position_embeddings = 0;
  int word_embed_proj_dim = 0;  // == hidden_size unless project_in / project_out exist (opt-350m)
  bool do_layer_norm_before = true;      // pre-LN; false for opt-350m (post-LN)
  bool remove_final_layer_norm = false;  // HF's `_remove_final_layer_norm`
  bool enable_bias = true;
  bool layer_norm_elementwise_affine = true;
  std::string activation_function = "relu";  // only "relu" is accepted
  int bos_token_id = 2;
  int eos_token_id = 2;
  int pad_token_id = 1;
  float layer_norm_eps = 1e-5f;
  int position_offset = 2;  // OPT's learned positions are offset by 2

  int head_dim() const { return hidden_size / num_heads; }
  bool has_projections() const { return word_embed_proj_dim != hidden_size; }
  // Final layer norm exists only for pre-LN models (HF: do_layer_norm_before and not removed).
  bool has_final_layer_norm() const { return do_layer_norm_before && !remove_final_layer_norm; }
  std::int64_t num_parameters() const;

  // Throws offgen::Error if fields are missing, non-positive or inconsistent (hidden % heads, ...).
  void validate() const;

  // Reads config.json; throws offgen::Error naming the file and the field on any problem.
  static OptConfig from_json_file(const std::filesystem::path& path);
  // Parses config.json text; `source` names it in error messages.
  static OptConfig from_json_text(std::string_view text, std::string_view source);
  // "opt-125m", "OPT-30B": the built-in table; nullopt for an unknown name. "facebook/opt-1.3b"
  // is not a config name but a Hugging Face model (model_name.h finds it in the local cache).
  static std::optional<OptConfig> from_name(std::string_view name);
  static std::vector<std::string> known_names();
};

}  // namespace offgen
