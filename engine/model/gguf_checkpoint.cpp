#include "engine/model/gguf_checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/half.h"
#include "engine/model/model_tensors.h"
#include "engine/model/tensor_shape.h"

namespace offgen {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// llama.cpp's tensor names (its LLM_TENSOR_NAMES for LLM_ARCH_LLAMA / QWEN2) and transformers'.
struct NamePair {
  const char* gguf;
  const char* hf;
};
constexpr NamePair kGlobalNames[] = {
    {"token_embd.weight", "embed_tokens.weight"},
    {"output_norm.weight", "norm.weight"},
    {"output.weight", "lm_head.weight"},
};
constexpr NamePair kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"ffn_gate.bias", "mlp.gate_proj.bias"},
    {"ffn_up.bias", "mlp.up_proj.bias"},
    {"ffn_down.bias", "mlp.down_proj.bias"},
};

// "blk.3.attn_q.weight" -> "layers.3.self_attn.q_proj.weight"; nullopt for an unknown name.
std::optional<std::string> hf_name(const std::string& gguf) {
  for (const NamePair& pair : kGlobalNames) {
    if (gguf == pair.gguf) return pair.hf;
  }
  if (!gguf.starts_with("blk.")) return std::nullopt;
  const std::size_t dot = gguf.find('.', 4);
  if (dot == std::string::npos || dot == 4) return std::nullopt;
  const std::string layer = gguf.substr(4, dot - 4);
  if (!std::ranges::all_of(layer, [](char c) { return c >= '0' && c <= '9'; }) ||
      layer.size() > 6) {
    return std::nullopt;
  }
  const std::string rest = gguf.substr(dot + 1);
  for (const NamePair& pair : kLayerNames) {
    if (rest == pair.gguf) return fmt::format("layers.{}.{}", std::stoi(layer), pair.hf);
  }
  return std::nullopt;
}

// Token ids of the tokenizer metadata, with a message naming the key when one is not an id.
std::optional<std::int64_t> token_id(const GgufFile& file, const std::string& key) {
  const auto id = file.integer(key);
  if (id && *id < 0)
    fail("{}: metadata '{}' = {} is not a token id", file.path().string(), key, *id);
  return id;
}

}  // namespace

ModelConfig GgufCheckpoint::config_of(const GgufFile& file) {
  const std::string path = file.path().string();
  const std::string arch = file.required_string("general.architecture");
  if (arch != "llama" && arch != "mistral" && arch != "qwen2") {
    fail(
        "{}: general.architecture is '{}'; offgen reads GGUF files of the LLaMA family "
        "('llama', 'mistral', 'qwen2')",
        path, arch);
  }
  const auto key = [&arch](std::string_view name) { return fmt::format("{}.{}", arch, name); };
  Json config = Json::object();
  config["model_type"] = arch;
  config["hidden_size"] = file.required_integer(key("embedding_length"));
  config["num_hidden_layers"] = file.required_integer(key("block_count"));
  config["num_attention_heads"] = file.required_integer(key("attention.head_count"));
  if (const auto kv = file.integer(key("attention.head_count_kv"))) {
    config["num_key_value_heads"] = *kv;
  }
  config["intermediate_size"] = file.required_integer(key("feed_forward_length"));
  config["max_position_embeddings"] = file.required_integer(key("context_length"));
  if (const auto eps = file.number(key("attention.layer_norm_rms_epsilon"))) {
    config["rms_norm_eps"] = *eps;
  }
  if (const auto theta = file.number(key("rope.freq_base"))) config["rope_theta"] = *theta;
  // key_length is each head's width; rope.dimension_count how many of its dimensions rotate.
  if (const auto head_dim = file.integer(key("attention.key_length"))) {
    config["head_dim"] = *head_dim;
  }
  if (const auto value_dim = file.integer(key("attention.value_length"));
      value_dim && value_dim != file.integer(key("attention.key_length")).value_or(*value_dim)) {
    fail("{}: {} differs from {}; offgen needs keys and values of one width", path,
         key("attention.value_length"), key("attention.key_length"));
  }
  if (const auto rotary = file.integer(key("rope.dimension_count"))) {
    const std::int64_t heads = config["num_attention_heads"].get<std::int64_t>();
    const std::int64_t head_dim =
        config.contains("head_dim")
            ? config["head_dim"].get<std::int64_t>()
            : config["hidden_size"].get<std::int64_t>() / std::max<std::int64_t>(heads, 1);
    if (*rotary != head_dim) {
      fail(
          "{}: {} is {} but a head has {} dimensions; offgen rotates every dimension of a head "
          "(partial rotary is not supported)",
          path, key("rope.dimension_count"), *rotary, head_dim);
    }
  }
  const std::string scaling = file.string(key("rope.scaling.type")).value_or("none");
  if (scaling == "linear") {
    config["rope_scaling"] = {{"rope_type", "linear"},
                              {"factor", file.number(key("rope.scaling.factor")).value_or(1.0)}};
  } else if (const auto old_linear = file.number(key("rope.scale_linear"));
             scaling == "none" && old_linear && *old_linear != 1.0) {
    config["rope_scaling"] = {{"rope_type", "linear"}, {"factor", *old_linear}};
  } else if (scaling != "none") {
    fail("{}: {} '{}' is not supported; offgen implements none and linear in GGUF files", path,
         key("rope.scaling.type"), scaling);
  }
  if (arch == "mistral") {
    if (const auto window = file.integer(key("attention.sliding_window"))) {
      config["sliding_window"] = *window;
    }
  }
  const GgufTensor* embedding = file.tensor("token_embd.weight");
  if (embedding == nullptr || embedding->dims.size() != 2) {
    fail("{}: the token embedding 'token_embd.weight' is missing (or not a matrix)", path);
  }
  config["vocab_size"] = embedding->dims[1];
  config["tie_word_embeddings"] = file.tensor("output.weight") == nullptr;
  config["attention_bias"] = file.tensor("blk.0.attn_output.bias") != nullptr;
  config["mlp_bias"] = file.tensor("blk.0.ffn_down.bias") != nullptr;
  if (const auto bos = token_id(file, "tokenizer.ggml.bos_token_id")) config["bos_token_id"] = *bos;
  // Generation ends at any end-of-generation token llama.cpp knows: EOS, end of turn, end of
  // message (instruct models mark a turn's end with one of the latter).
  Json eos = Json::array();
  for (const char* name : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                           "tokenizer.ggml.eom_token_id"}) {
    const auto id = token_id(file, name);
    if (id && std::ranges::find(eos, Json(*id)) == eos.end()) eos.push_back(*id);
  }
  if (!eos.empty()) config["eos_token_id"] = eos.size() == 1 ? eos[0] : eos;
  if (const auto pad = token_id(file, "tokenizer.ggml.padding_token_id")) {
    config["pad_token_id"] = *pad;
  }
  ModelConfig parsed = ModelConfig::from_json_text(config.dump(), path + " (GGUF metadata)");
  parsed.name = file.string("general.name").value_or(file.path().stem().string());
  if (parsed.name.empty()) parsed.name = file.path().stem().string();
  return parsed;
}

std::unique_ptr<GgufCheckpoint> GgufCheckpoint::open(const fs::path& path) {
  std::unique_ptr<GgufCheckpoint> checkpoint(new GgufCheckpoint());
  checkpoint->file_ = GgufFile::open(path);
  const GgufFile& file = *checkpoint->file_;
  checkpoint->config_ = config_of(file);
  const ModelConfig& config = checkpoint->config_;
  // llama.cpp's convert_hf_to_gguf.py permutes q / k for LlamaModel (llama and mistral), not
  // for Qwen2Model.
  checkpoint->permuted_qk_ = config.model_type != "qwen2";
  std::set<std::string> wanted;
  for (const TensorSpec& spec : model_tensor_specs(config)) wanted.insert(spec.name);
  for (const auto& [name, tensor] : file.tensors()) {
    const std::optional<std::string> hf = hf_name(name);
    if (!hf || !wanted.contains(*hf)) {
      fail("{}: tensor '{}' is not part of the {} model offgen builds from this file's metadata{}",
           path.string(), name, config.model_type,
           name == "rope_freqs.weight"
               ? " (rope_freqs holds LLaMA 3.1's per-frequency rope scaling, which offgen does "
                 "not read from GGUF files yet; use the Hugging Face checkpoint)"
               : "");
    }
    const auto info = ggml_type_info(static_cast<std::uint32_t>(tensor.type));
    if (!info->dequantizable) {
      fail(
          "{}: tensor '{}' is stored as {}, which offgen does not read; it reads F32, F16, BF16, "
          "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K",
          path.string(), name, info->name);
    }
    checkpoint->tensors_.emplace(*hf, &tensor);
  }
  return checkpoint;
}

ModelConfig GgufCheckpoint::read_config(const fs::path& path) {
  return config_of(*GgufFile::open(path));
}

bool GgufCheckpoint::contains(const std::string& name) const {
  return tensors_.contains(std::string(canonical_tensor_name(name)));
}

void GgufCheckpoint::read_f16(const std::string& name, std::span<const std::int64_t> shape,
                              Half* dst) const {
  const auto it = tensors_.find(std::string(canonical_tensor_name(name)));
  if (it == tensors_.end()) fail("{} has no tensor for '{}'", describe(), name);
  const GgufTensor& tensor = *it->second;
  check_tensor_shape(name, describe(), tensor.shape(), shape);
  const std::int64_t columns = tensor.dims[0];
  const std::int64_t rows = tensor.rows();
  // Undo llama.cpp's rotary permutation: within each head of D rows, its row 2i + t holds
  // transformers' row t * D/2 + i.
  int head_rows = 0;
  if (permuted_qk_ && tensor.dims.size() == 2) {
    if (name.ends_with("q_proj.weight")) head_rows = config_.head_dim();
    if (name.ends_with("k_proj.weight")) head_rows = config_.head_dim();
  }
  const auto destination_row = [head_rows](std::int64_t row) {
    if (head_rows == 0) return row;
    const std::int64_t head = row / head_rows;
    const std::int64_t within = row % head_rows;
    return head * head_rows + (within % 2) * (head_rows / 2) + within / 2;
  };
  const std::size_t row_bytes = tensor.bytes / static_cast<std::size_t>(rows);
  // Rows of a small tensor (a norm) are not worth waking the thread pool for.
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{1} << 16) / columns);
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, grain),
                    [&](const tbb::blocked_range<std::int64_t>& range) {
                      std::vector<float> buffer(static_cast<std::size_t>(columns));
                      for (std::int64_t row = range.begin(); row < range.end(); ++row) {
                        dequantize_gguf(tensor.type,
                                        tensor.data + static_cast<std::size_t>(row) * row_bytes,
                                        buffer.data(), columns);
                        float_to_half(buffer.data(), dst + destination_row(row) * columns,
                                      static_cast<std::size_t>(columns));
                      }
                    });
}

std::optional<fs::path> find_gguf_file(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    if (path.extension() == ".gguf") return path;
    return std::nullopt;
  }
  if (!fs::is_directory(path, ec) || fs::exists(path / "config.json", ec)) return std::nullopt;
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    if (entry.path().extension() == ".gguf" && entry.is_regular_file(ec)) {
      found.push_back(entry.path());
    }
  }
  if (found.empty()) return std::nullopt;
  if (found.size() > 1) {
    std::ranges::sort(found);
    std::vector<std::string> names;
    for (const fs::path& p : found) names.push_back(p.filename().string());
    fail("{} holds several GGUF files ({}); pass the one to run as --model", path.string(),
         fmt::join(names, ", "));
  }
  return found.front();
}

}  // namespace offgen
