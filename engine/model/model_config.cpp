#include "engine/model/model_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>
#include <sstream>

#include "engine/core/error.h"
#include "engine/core/json_brief.h"
#include "engine/core/json_integer.h"
#include "engine/model/model_tensors.h"

namespace offgen {
namespace {

using Json = nlohmann::json;

// Printing a value for a message recurses once per level of nesting, so a file nested a million
// deep would overflow the stack; config.json is two levels deep.
constexpr int kMaxDepth = 64;

// A bound far above OPT-175B (1.75e11) that keeps every element and byte count within int64.
constexpr double kMaxParameters = 1e15;

// Reads config.json fields with transformers' defaults; every error names the file and the field.
// A null value counts as absent for optional fields (transformers writes null for "the default").
class FieldReader {
 public:
  FieldReader(const Json& json, std::string_view source) : json_(json), source_(source) {}

  int required_positive(const char* field) const {
    const auto it = json_.find(field);
    if (it == json_.end()) fail("{}: field '{}' is missing", source_, field);
    return positive(field, *it);
  }

  int positive_or(const char* field, int fallback) const {
    const Json* value = optional(field);
    return value ? positive(field, *value) : fallback;
  }

  int non_negative_or(const char* field, int fallback) const {
    const Json* value = optional(field);
    if (!value) return fallback;
    const auto number = json_integer<int>(*value);
    if (!number || *number < 0) {
      fail("{}: field '{}' must be a non-negative integer, got {}", source_, field,
           json_brief(*value));
    }
    return *number;
  }

  bool boolean_or(const char* field, bool fallback) const {
    const Json* value = optional(field);
    if (!value) return fallback;
    if (!value->is_boolean()) {
      fail("{}: field '{}' must be true or false, got {}", source_, field, json_brief(*value));
    }
    return value->get<bool>();
  }

  // Any integer (negative too), or nullopt when absent or null.
  std::optional<int> integer_or_none(const char* field) const {
    const Json* value = optional(field);
    if (!value) return std::nullopt;
    const auto number = json_integer<int>(*value);
    if (!number)
      fail("{}: field '{}' must be an integer, got {}", source_, field, json_brief(*value));
    return number;
  }

  float positive_float_or(const char* field, float fallback) const {
    const Json* value = optional(field);
    if (!value) return fallback;
    if (!value->is_number() || !(value->get<double>() > 0.0) ||
        !std::isfinite(static_cast<float>(value->get<double>()))) {
      fail("{}: field '{}' must be a positive number, got {}", source_, field, json_brief(*value));
    }
    return static_cast<float>(value->get<double>());
  }

  // A token id, or a list of them (LLaMA 3.1's eos_token_id); empty when absent.
  std::vector<int> token_ids(const char* field) const {
    const Json* value = optional(field);
    if (!value) return {};
    if (!value->is_array()) return {non_negative_or(field, 0)};
    std::vector<int> ids;
    for (const Json& item : *value) {
      const auto number = json_integer<int>(item);
      if (!number || *number < 0) {
        fail("{}: field '{}' must hold non-negative integers, got {}", source_, field,
             json_brief(*value));
      }
      ids.push_back(*number);
    }
    return ids;
  }

  // An object field (rope_scaling), or null when absent.
  const Json* object_or_none(const char* field) const {
    const Json* value = optional(field);
    if (value && !value->is_object()) {
      fail("{}: field '{}' must be an object, got {}", source_, field, json_brief(*value));
    }
    return value;
  }

  std::string_view source() const { return source_; }

  std::optional<std::string> string_or_none(const char* field) const {
    const Json* value = optional(field);
    if (!value) return std::nullopt;
    if (!value->is_string()) {
      fail("{}: field '{}' must be a string, got {}", source_, field, json_brief(*value));
    }
    return value->get<std::string>();
  }

 private:
  const Json* optional(const char* field) const {
    const auto it = json_.find(field);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }

  int positive(const char* field, const Json& value) const {
    const auto number = json_integer<int>(value);
    if (!number || *number <= 0) {
      fail("{}: field '{}' must be a positive integer, got {}", source_, field, json_brief(value));
    }
    return *number;
  }

  const Json& json_;
  std::string_view source_;
};

// The first inconsistency in the config, phrased with config.json's field names; nullopt if none.
std::optional<std::string> find_problem(const ModelConfig& c) {
  const std::pair<const char*, int> sizes[] = {
      {"hidden_size", c.hidden_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {c.gated_mlp() ? "intermediate_size" : "ffn_dim", c.ffn_dim},
      {"vocab_size", c.vocab_size},
      {"max_position_embeddings", c.max_position_embeddings},
      {"word_embed_proj_dim", c.word_embed_proj_dim},
  };
  for (const auto& [field, value] : sizes) {
    if (value <= 0) return fmt::format("{} must be a positive integer, got {}", field, value);
  }
  if (c.hidden_size % c.num_heads != 0) {
    return fmt::format("hidden_size {} is not divisible by num_attention_heads {}", c.hidden_size,
                       c.num_heads);
  }
  if (c.kv_heads() <= 0 || c.num_heads % c.kv_heads() != 0) {
    return fmt::format("num_attention_heads {} is not a multiple of num_key_value_heads {}",
                       c.num_heads, c.kv_heads());
  }
  if (c.rotary() && c.head_dim() % 2 != 0) {
    return fmt::format("head_dim {} is odd; rotary positions rotate pairs of dimensions",
                       c.head_dim());
  }
  if (c.family == ModelFamily::opt && c.activation_function != "relu") {
    return fmt::format("activation_function '{}' is not supported; only 'relu' is (as in OPT)",
                       c.activation_function);
  }
  if (c.family == ModelFamily::llama && c.activation_function != "silu") {
    return fmt::format("hidden_act '{}' is not supported; only 'silu' is (SwiGLU)",
                       c.activation_function);
  }
  if (c.family == ModelFamily::llama && c.has_projections()) {
    return "a LLaMA-family model has no word_embed_proj_dim";
  }
  if (c.rotary() && !(c.rope_theta > 1.0f && std::isfinite(c.rope_theta))) {
    return fmt::format("rope_theta must be a number above 1, got {}", c.rope_theta);
  }
  std::vector<std::pair<const char*, int>> tokens = {{"bos_token_id", c.bos_token_id},
                                                     {"eos_token_id", c.eos_token_id},
                                                     {"pad_token_id", c.pad_token_id}};
  for (const int id : c.more_eos_token_ids) tokens.emplace_back("eos_token_id", id);
  for (const auto& [field, value] : tokens) {
    if (value < 0 || value >= c.vocab_size) {
      return fmt::format("{} {} is outside the vocabulary (vocab_size {})", field, value,
                         c.vocab_size);
    }
  }
  if (!(c.layer_norm_eps > 0.0f) || !std::isfinite(c.layer_norm_eps)) {
    return fmt::format("{} must be a positive number, got {}",
                       c.rms_norm() ? "rms_norm_eps" : "layer_norm_eps", c.layer_norm_eps);
  }
  if (c.position_offset < 0 ||
      c.position_offset > std::numeric_limits<int>::max() - c.max_position_embeddings) {
    return fmt::format("position offset {} is out of range", c.position_offset);
  }
  // Counted in double so that absurd sizes cannot wrap (every byte count later is int64), and
  // from one and two layers so that a billion layers are not listed to count them.
  const auto count = [&c](int layers) {
    ModelConfig few = c;
    few.num_layers = layers;
    double total = 0.0;
    for (const TensorSpec& spec : model_tensor_specs(few)) {
      double numel = 1.0;
      for (const std::int64_t d : spec.shape) numel *= static_cast<double>(d);
      total += numel;
    }
    return total;
  };
  const double one_layer = count(1);
  const double parameters =
      one_layer + (count(2) - one_layer) * static_cast<double>(c.num_layers - 1);
  if (parameters > kMaxParameters) {
    return fmt::format(
        "the sizes make a model of {:.3g} parameters, beyond the {:.0e} any "
        "machine this runs on can hold",
        parameters, kMaxParameters);
  }
  return std::nullopt;
}

ModelConfig opt_from_fields(const FieldReader& fields) {
  ModelConfig config;
  config.hidden_size = fields.required_positive("hidden_size");
  config.num_layers = fields.required_positive("num_hidden_layers");
  config.num_heads = fields.required_positive("num_attention_heads");
  config.ffn_dim = fields.required_positive("ffn_dim");
  config.vocab_size = fields.required_positive("vocab_size");
  config.max_position_embeddings = fields.required_positive("max_position_embeddings");
  config.word_embed_proj_dim = fields.positive_or("word_embed_proj_dim", config.hidden_size);
  config.do_layer_norm_before = fields.boolean_or("do_layer_norm_before", true);
  config.remove_final_layer_norm = fields.boolean_or("_remove_final_layer_norm", false);
  config.enable_bias = fields.boolean_or("enable_bias", true);
  config.qkv_bias = config.out_bias = config.enable_bias;
  config.layer_norm_elementwise_affine = fields.boolean_or("layer_norm_elementwise_affine", true);
  config.activation_function = fields.string_or_none("activation_function").value_or("relu");
  config.bos_token_id = fields.non_negative_or("bos_token_id", 2);
  config.eos_token_id = fields.non_negative_or("eos_token_id", 2);
  config.pad_token_id = fields.non_negative_or("pad_token_id", 1);
  // OPT's layer norms always use eps 1e-5 (Hugging Face ignores a `layer_norm_eps` field).
  // The LM head is the token embedding; an untied head would be silently wrong, so refuse it.
  if (!fields.boolean_or("tie_word_embeddings", true)) {
    fail(
        "{}: tie_word_embeddings is false, but offgen runs OPT with the LM head tied to the token "
        "embedding",
        fields.source());
  }
  return config;
}

// The rotary fields a LLaMA-family config may hold: transformers 4 writes rope_theta at the top
// level and the scaling in a rope_scaling object; transformers 5 moves all of them (theta
// included) into one rope_parameters object. Any field offgen does not implement is refused by
// name rather than dropped, since a dropped field runs the model silently wrong.
struct RopeFields {
  float theta = 10000.0f;
  RopeScaling scaling;
};

constexpr std::string_view kRopeObjectFields[] = {"rope_type",
                                                  "type",
                                                  "rope_theta",
                                                  "factor",
                                                  "low_freq_factor",
                                                  "high_freq_factor",
                                                  "original_max_position_embeddings",
                                                  "partial_rotary_factor"};

// partial_rotary_factor: the share of each head's dimensions that rotate. offgen rotates them all.
void require_full_rotary(const FieldReader& fields, std::string_view where) {
  const float partial = fields.positive_float_or("partial_rotary_factor", 1.0f);
  if (partial != 1.0f) {
    fail(
        "{}: partial_rotary_factor {}{} is not supported; offgen rotates every dimension of a head",
        fields.source(), partial, where);
  }
}

// One rope object (rope_scaling, or rope_parameters); `name` is its field name for messages.
RopeScaling rope_scaling_from(const Json& json, std::string_view name, std::string_view source) {
  for (const auto& [key, value] : json.items()) {
    if (std::ranges::find(kRopeObjectFields, key) == std::end(kRopeObjectFields)) {
      fail(
          "{}: {} field '{}' is not supported by offgen (it implements rope_type, rope_theta, "
          "factor, low_freq_factor, high_freq_factor, original_max_position_embeddings)",
          source, name, key);
    }
  }
  const FieldReader fields(json, source);
  require_full_rotary(fields, fmt::format(" in {}", name));
  RopeScaling scaling;
  std::optional<std::string> type = fields.string_or_none("rope_type");
  if (!type) type = fields.string_or_none("type");
  if (!type || *type == "default") return scaling;
  if (*type == "linear") {
    scaling.kind = RopeScaling::Kind::linear;
  } else if (*type == "llama3") {
    scaling.kind = RopeScaling::Kind::llama3;
    scaling.low_freq_factor = fields.positive_float_or("low_freq_factor", 1.0f);
    scaling.high_freq_factor = fields.positive_float_or("high_freq_factor", 4.0f);
    scaling.original_max_position_embeddings =
        fields.positive_or("original_max_position_embeddings", 8192);
    if (!(scaling.high_freq_factor > scaling.low_freq_factor)) {
      fail("{}: {}'s high_freq_factor {} must exceed its low_freq_factor {}", source, name,
           scaling.high_freq_factor, scaling.low_freq_factor);
    }
  } else {
    fail(
        "{}: {} type '{}' is not supported; offgen implements 'default', 'linear' and "
        "'llama3'",
        source, name, *type);
  }
  scaling.factor = fields.positive_float_or("factor", 1.0f);
  return scaling;
}

RopeFields rope_fields_from(const FieldReader& fields) {
  RopeFields rope;
  rope.theta = fields.positive_float_or("rope_theta", 10000.0f);
  require_full_rotary(fields, "");
  const Json* scaling = fields.object_or_none("rope_scaling");
  const Json* parameters = fields.object_or_none("rope_parameters");
  if (parameters == nullptr) {
    if (scaling != nullptr)
      rope.scaling = rope_scaling_from(*scaling, "rope_scaling", fields.source());
    return rope;
  }
  // transformers 5: rope_parameters holds theta and the scaling. A file that also keeps the old
  // fields must agree with it, or it is ambiguous which one the model was trained with.
  const FieldReader inner(*parameters, fields.source());
  const float theta = inner.positive_float_or("rope_theta", rope.theta);
  if (fields.positive_float_or("rope_theta", theta) != theta) {
    fail("{}: rope_theta {} disagrees with rope_parameters' rope_theta {}", fields.source(),
         rope.theta, theta);
  }
  rope.theta = theta;
  rope.scaling = rope_scaling_from(*parameters, "rope_parameters", fields.source());
  if (scaling != nullptr && *scaling != *parameters) {
    const RopeScaling old = rope_scaling_from(*scaling, "rope_scaling", fields.source());
    if (old.kind != rope.scaling.kind || old.factor != rope.scaling.factor ||
        old.low_freq_factor != rope.scaling.low_freq_factor ||
        old.high_freq_factor != rope.scaling.high_freq_factor ||
        old.original_max_position_embeddings != rope.scaling.original_max_position_embeddings) {
      fail("{}: rope_scaling disagrees with rope_parameters; keep one of them", fields.source());
    }
  }
  return rope;
}

// LlamaConfig, MistralConfig and Qwen2Config: one decoder layer, their defaults where they differ.
ModelConfig llama_from_fields(const FieldReader& fields, const std::string& model_type) {
  ModelConfig config;
  config.family = ModelFamily::llama;
  config.model_type = model_type;
  config.hidden_size = fields.required_positive("hidden_size");
  config.num_layers = fields.required_positive("num_hidden_layers");
  config.num_heads = fields.required_positive("num_attention_heads");
  config.num_kv_heads = fields.positive_or("num_key_value_heads", config.num_heads);
  config.ffn_dim = fields.required_positive("intermediate_size");
  config.vocab_size = fields.required_positive("vocab_size");
  config.max_position_embeddings = fields.required_positive("max_position_embeddings");
  config.word_embed_proj_dim = config.hidden_size;
  config.position_offset = 0;
  config.enable_bias = false;
  // Qwen2's q / k / v always have biases; LlamaConfig's attention_bias covers all four
  // projections and mlp_bias the MLP (offgen takes both as one: the output-side biases).
  const bool attention_bias = fields.boolean_or("attention_bias", false);
  const bool mlp_bias = fields.boolean_or("mlp_bias", false);
  if (attention_bias != mlp_bias) {
    fail("{}: attention_bias {} with mlp_bias {} is not supported (only both or neither)",
         fields.source(), attention_bias, mlp_bias);
  }
  config.qkv_bias = model_type == "qwen2" || attention_bias;
  config.out_bias = attention_bias;
  config.activation_function = fields.string_or_none("hidden_act").value_or("silu");
  config.layer_norm_eps = fields.positive_float_or("rms_norm_eps", 1e-6f);
  const RopeFields rope = rope_fields_from(fields);
  config.rope_theta = rope.theta;
  config.rope_scaling = rope.scaling;
  config.tie_word_embeddings = fields.boolean_or("tie_word_embeddings", false);
  if (const int head_dim = fields.positive_or("head_dim", 0);
      head_dim != 0 && head_dim * config.num_heads != config.hidden_size) {
    fail("{}: head_dim {} is not hidden_size / num_attention_heads ({}); offgen needs them equal",
         fields.source(), head_dim, config.hidden_size / config.num_heads);
  }
  // MistralConfig's window defaults to 4096; Qwen2's applies only with use_sliding_window;
  // LlamaConfig has none (a stray field is ignored, as transformers does).
  if (model_type == "mistral") {
    config.sliding_window = fields.positive_or("sliding_window", 4096);
  } else if (model_type == "qwen2" && fields.boolean_or("use_sliding_window", false)) {
    config.sliding_window = fields.positive_or("sliding_window", 0);
  }
  // Token ids: LLaMA's configs often leave pad unset; any id works as padding (it is masked).
  const std::vector<int> bos = fields.token_ids("bos_token_id");
  const std::vector<int> eos = fields.token_ids("eos_token_id");
  config.bos_token_id = bos.empty() ? 1 : bos.front();
  config.eos_token_id = eos.empty() ? 2 : eos.front();
  if (eos.size() > 1) config.more_eos_token_ids.assign(eos.begin() + 1, eos.end());
  // A missing, null or negative pad (LLaMA 3, Qwen2, older conversions' -1) means none: padding
  // is masked, so it takes the EOS id, and no generated token is hidden as padding.
  const std::optional<int> pad = fields.integer_or_none("pad_token_id");
  config.has_pad_token = pad.has_value() && *pad >= 0;
  config.pad_token_id = config.has_pad_token ? *pad : config.eos_token_id;
  return config;
}

std::string lowercase(std::string_view text) {
  std::string out(text);
  std::ranges::transform(out, out.begin(),
                         [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return out;
}

// The released facebook/opt-* sizes. All have ffn = 4 * hidden, vocab 50272, 2048 positions.
struct KnownSize {
  const char* name;
  int layers;
  int hidden;
  int heads;
  int word_embed_proj_dim;
  bool do_layer_norm_before;
};
constexpr KnownSize kKnownSizes[] = {
    {"opt-125m", 12, 768, 12, 768, true},
    // The one post-LN release, with a 512-wide embedding projected in and out.
    {"opt-350m", 24, 1024, 16, 512, false},
    {"opt-1.3b", 24, 2048, 32, 2048, true},
    {"opt-2.7b", 32, 2560, 32, 2560, true},
    {"opt-6.7b", 32, 4096, 32, 4096, true},
    {"opt-13b", 40, 5120, 40, 5120, true},
    {"opt-30b", 48, 7168, 56, 7168, true},
    {"opt-66b", 64, 9216, 72, 9216, true},
    {"opt-175b", 96, 12288, 96, 12288, true},
};

// Released LLaMA-family sizes, as their config.json files state them.
struct KnownLlama {
  const char* name;
  const char* model_type;
  int layers;
  int hidden;
  int heads;
  int kv_heads;
  int ffn;
  int vocab;
  int positions;
  float rope_theta;
  float rms_norm_eps;
  int bos;
  int eos;
  bool tied;
  int sliding_window;
};
constexpr KnownLlama kKnownLlamas[] = {
    {"tinyllama-1.1b", "llama", 22, 2048, 32, 4, 5632, 32000, 2048, 10000.0f, 1e-5f, 1, 2, false,
     0},
    {"llama-2-7b", "llama", 32, 4096, 32, 32, 11008, 32000, 4096, 10000.0f, 1e-5f, 1, 2, false, 0},
    {"llama-2-13b", "llama", 40, 5120, 40, 40, 13824, 32000, 4096, 10000.0f, 1e-5f, 1, 2, false, 0},
    {"llama-2-70b", "llama", 80, 8192, 64, 8, 28672, 32000, 4096, 10000.0f, 1e-5f, 1, 2, false, 0},
    {"llama-3-8b", "llama", 32, 4096, 32, 8, 14336, 128256, 8192, 500000.0f, 1e-5f, 128000, 128001,
     false, 0},
    {"llama-3-70b", "llama", 80, 8192, 64, 8, 28672, 128256, 8192, 500000.0f, 1e-5f, 128000, 128001,
     false, 0},
    {"mistral-7b", "mistral", 32, 4096, 32, 8, 14336, 32000, 32768, 10000.0f, 1e-5f, 1, 2, false,
     4096},
    {"qwen2-7b", "qwen2", 28, 3584, 28, 4, 18944, 152064, 32768, 1000000.0f, 1e-6f, 151643, 151643,
     false, 0},
};

}  // namespace

std::int64_t ModelConfig::num_parameters() const {
  std::int64_t total = 0;
  for (const TensorSpec& spec : model_tensor_specs(*this)) total += spec.numel();
  return total;
}

void ModelConfig::validate() const {
  if (const auto problem = find_problem(*this)) {
    fail("OPT config{}: {}", name.empty() ? "" : " '" + name + "'", *problem);
  }
}

ModelConfig ModelConfig::from_json_text(std::string_view text, std::string_view source) {
  const auto limit_depth = [source](int depth, Json::parse_event_t event, const Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kMaxDepth) {
      fail("{}: malformed JSON: nested more than {} levels deep", source, kMaxDepth);
    }
    return true;
  };
  Json json;
  try {
    json = Json::parse(text.begin(), text.end(), limit_depth);
  } catch (const Json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    fail("{}: malformed JSON: {}", source, e.what());
  }
  if (!json.is_object()) fail("{}: expected a JSON object, got {}", source, json.type_name());

  const FieldReader fields(json, source);
  const std::string model_type = fields.string_or_none("model_type").value_or("opt");
  ModelConfig config;
  if (model_type == "opt") {
    config = opt_from_fields(fields);
  } else if (model_type == "llama" || model_type == "mistral" || model_type == "qwen2") {
    config = llama_from_fields(fields, model_type);
  } else {
    fail(
        "{}: model_type is '{}', but offgen runs OPT ('opt') and the LLaMA family ('llama', "
        "'mistral', 'qwen2')",
        source, model_type);
  }

  // "facebook/opt-125m" -> "opt-125m"; from_json_file replaces it with the directory's name.
  if (const auto origin = fields.string_or_none("_name_or_path")) {
    config.name = std::filesystem::path(*origin).filename().string();
  }

  if (const auto problem = find_problem(config)) fail("{}: {}", source, *problem);
  return config;
}

ModelConfig ModelConfig::from_json_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    fail("{}: {}", path.string(),
         std::filesystem::exists(path, ec) ? "is not a regular file" : "does not exist");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) fail("{}: could not be opened for reading", path.string());
  std::ostringstream text;
  text << in.rdbuf();  // an empty file leaves `text` empty, which the parser then reports
  ModelConfig config = from_json_text(text.str(), path.string());
  const std::filesystem::path dir =
      std::filesystem::absolute(path).lexically_normal().parent_path();
  if (!dir.filename().empty()) config.name = dir.filename().string();
  // A Hugging Face cache snapshot (models--org--name/snapshots/<revision>) is named after its
  // model, not its revision.
  const std::string repo = dir.parent_path().parent_path().filename().string();
  if (dir.parent_path().filename() == "snapshots" && repo.starts_with("models--")) {
    config.name = repo.substr(repo.rfind("--") + 2);
  }
  return config;
}

std::optional<ModelConfig> ModelConfig::from_name(std::string_view name) {
  const std::string key = lowercase(name);
  for (const KnownSize& size : kKnownSizes) {
    if (key != size.name) continue;
    ModelConfig config;
    config.name = size.name;
    config.hidden_size = size.hidden;
    config.num_layers = size.layers;
    config.num_heads = size.heads;
    config.ffn_dim = 4 * size.hidden;
    config.vocab_size = 50272;
    config.max_position_embeddings = 2048;
    config.word_embed_proj_dim = size.word_embed_proj_dim;
    config.do_layer_norm_before = size.do_layer_norm_before;
    return config;
  }
  for (const KnownLlama& size : kKnownLlamas) {
    if (key != size.name) continue;
    // The table's fields go through the reader config.json goes through, so both share one set
    // of LLaMA-family defaults.
    Json json = {{"hidden_size", size.hidden},
                 {"num_hidden_layers", size.layers},
                 {"num_attention_heads", size.heads},
                 {"num_key_value_heads", size.kv_heads},
                 {"intermediate_size", size.ffn},
                 {"vocab_size", size.vocab},
                 {"max_position_embeddings", size.positions},
                 {"rope_theta", size.rope_theta},
                 {"rms_norm_eps", size.rms_norm_eps},
                 {"bos_token_id", size.bos},
                 {"eos_token_id", size.eos},
                 {"tie_word_embeddings", size.tied}};
    if (size.sliding_window > 0) json["sliding_window"] = size.sliding_window;
    ModelConfig config = llama_from_fields(FieldReader(json, size.name), size.model_type);
    config.name = size.name;
    return config;
  }
  return std::nullopt;
}

std::vector<std::string> ModelConfig::known_names() {
  std::vector<std::string> names;
  for (const KnownSize& size : kKnownSizes) names.emplace_back(size.name);
  for (const KnownLlama& size : kKnownLlamas) names.emplace_back(size.name);
  return names;
}

namespace {

struct HubRepo {
  std::string_view name;
  std::string_view repo;
};

constexpr HubRepo kHubRepos[] = {
    {"tinyllama-1.1b", "TinyLlama/TinyLlama-1.1B-Chat-v1.0"},
    {"llama-2-7b", "meta-llama/Llama-2-7b-hf"},
    {"llama-2-13b", "meta-llama/Llama-2-13b-hf"},
    {"llama-2-70b", "meta-llama/Llama-2-70b-hf"},
    {"llama-3-8b", "meta-llama/Meta-Llama-3-8B"},
    {"llama-3-70b", "meta-llama/Meta-Llama-3-70B"},
    {"mistral-7b", "mistralai/Mistral-7B-v0.1"},
    {"qwen2-7b", "Qwen/Qwen2-7B"},
};

}  // namespace

std::string ModelConfig::hub_repo(std::string_view name) {
  for (const HubRepo& hub : kHubRepos) {
    if (hub.name == name) return std::string(hub.repo);
  }
  return "facebook/" + std::string(name);  // the OPT sizes
}

std::string ModelConfig::nearest_known_name(std::string_view repo_id) {
  const std::string repo = lowercase(repo_id);
  for (const HubRepo& hub : kHubRepos) {
    if (lowercase(hub.repo) == repo) return std::string(hub.name);
  }
  const std::string name = repo.substr(repo.find('/') + 1);
  if (from_name(name)) return from_name(name)->name;
  // The family, by the words its repositories use.
  const std::pair<std::string_view, std::string_view> families[] = {
      {"tinyllama", "tinyllama-1.1b"}, {"llama-3", "llama-3-8b"}, {"llama3", "llama-3-8b"},
      {"llama", "llama-2-7b"},         {"mistral", "mistral-7b"}, {"qwen", "qwen2-7b"}};
  for (const auto& [word, known] : families) {
    if (name.find(word) != std::string::npos) return std::string(known);
  }
  return "opt-125m";
}

std::vector<float> ModelConfig::rope_inv_freq() const {
  if (!rotary()) return {};
  const int dim = head_dim();
  std::vector<float> inv_freq(static_cast<std::size_t>(dim / 2));
  // transformers: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), in fp32.
  for (int i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    inv_freq[static_cast<std::size_t>(i)] = 1.0f / std::pow(rope_theta, exponent);
  }
  const RopeScaling& s = rope_scaling;
  if (s.kind == RopeScaling::Kind::linear) {
    for (float& f : inv_freq) f /= s.factor;
  } else if (s.kind == RopeScaling::Kind::llama3) {
    // _compute_llama3_parameters: long wavelengths divided by the factor, short ones kept, the
    // band between blended; "x / tensor" is PyTorch's reciprocal(tensor) * x.
    const auto old_context = static_cast<float>(s.original_max_position_embeddings);
    const float low_freq_wavelen = old_context / s.low_freq_factor;
    const float high_freq_wavelen = old_context / s.high_freq_factor;
    for (float& f : inv_freq) {
      const float wavelen = (1.0f / f) * static_cast<float>(2.0 * std::numbers::pi);
      const float scaled = wavelen > low_freq_wavelen ? f / s.factor : f;
      const float smooth = ((1.0f / wavelen) * old_context - s.low_freq_factor) /
                           (s.high_freq_factor - s.low_freq_factor);
      const float smoothed = (1.0f - smooth) * scaled / s.factor + smooth * scaled;
      const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
      f = medium ? smoothed : scaled;
    }
  }
  return inv_freq;
}

}  // namespace offgen
