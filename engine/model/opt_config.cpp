#include "engine/model/opt_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/core/error.h"
#include "engine/core/json_integer.h"
#include "engine/model/opt_tensors.h"

namespace offgen {
namespace {

using Json = nlohmann::json;

// Printing a value for a message recurses once per level of nesting, so a file nested a million
// deep would overflow the stack; config.json is two levels deep.
constexpr int kMaxDepth = 64;

// A bound far above OPT-175B (1.75e11) that keeps every element and byte count within int64.
constexpr double kMaxParameters = 1e15;

// A JSON value, shortened so a huge malformed field cannot flood the error message.
std::string brief(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

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
      fail("{}: field '{}' must be a non-negative integer, got {}", source_, field, brief(*value));
    }
    return *number;
  }

  bool boolean_or(const char* field, bool fallback) const {
    const Json* value = optional(field);
    if (!value) return fallback;
    if (!value->is_boolean()) {
      fail("{}: field '{}' must be true or false, got {}", source_, field, brief(*value));
    }
    return value->get<bool>();
  }

  std::optional<std::string> string_or_none(const char* field) const {
    const Json* value = optional(field);
    if (!value) return std::nullopt;
    if (!value->is_string()) {
      fail("{}: field '{}' must be a string, got {}", source_, field, brief(*value));
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
      fail("{}: field '{}' must be a positive integer, got {}", source_, field, brief(value));
    }
    return *number;
  }

  const Json& json_;
  std::string_view source_;
};

// The first inconsistency in the config, phrased with config.json's field names; nullopt if none.
std::optional<std::string> find_problem(const OptConfig& c) {
  const std::pair<const char*, int> sizes[] = {
      {"hidden_size", c.hidden_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"ffn_dim", c.ffn_dim},
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
  if (c.activation_function != "relu") {
    return fmt::format("activation_function '{}' is not supported; only 'relu' is (as in OPT)",
                       c.activation_function);
  }
  const std::pair<const char*, int> tokens[] = {{"bos_token_id", c.bos_token_id},
                                                {"eos_token_id", c.eos_token_id},
                                                {"pad_token_id", c.pad_token_id}};
  for (const auto& [field, value] : tokens) {
    if (value < 0 || value >= c.vocab_size) {
      return fmt::format("{} {} is outside the vocabulary (vocab_size {})", field, value,
                         c.vocab_size);
    }
  }
  if (!(c.layer_norm_eps > 0.0f) || !std::isfinite(c.layer_norm_eps)) {
    return fmt::format("layer_norm_eps must be a positive number, got {}", c.layer_norm_eps);
  }
  if (c.position_offset < 0 ||
      c.position_offset > std::numeric_limits<int>::max() - c.max_position_embeddings) {
    return fmt::format("position offset {} is out of range", c.position_offset);
  }
  // Counted in double so that absurd sizes cannot wrap (every byte count later is int64), and
  // from one and two layers so that a billion layers are not listed to count them.
  const auto count = [&c](int layers) {
    OptConfig few = c;
    few.num_layers = layers;
    double total = 0.0;
    for (const TensorSpec& spec : opt_tensor_specs(few)) {
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

}  // namespace

std::int64_t OptConfig::num_parameters() const {
  std::int64_t total = 0;
  for (const TensorSpec& spec : opt_tensor_specs(*this)) total += spec.numel();
  return total;
}

void OptConfig::validate() const {
  if (const auto problem = find_problem(*this)) {
    fail("OPT config{}: {}", name.empty() ? "" : " '" + name + "'", *problem);
  }
}

OptConfig OptConfig::from_json_text(std::string_view text, std::string_view source) {
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
  if (const auto model_type = fields.string_or_none("model_type");
      model_type && *model_type != "opt") {
    fail("{}: model_type is '{}', but offgen runs only OPT models (model_type 'opt')", source,
         *model_type);
  }

  OptConfig config;
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
        source);
  }

  // "facebook/opt-125m" -> "opt-125m"; from_json_file replaces it with the directory's name.
  if (const auto origin = fields.string_or_none("_name_or_path")) {
    config.name = std::filesystem::path(*origin).filename().string();
  }

  if (const auto problem = find_problem(config)) fail("{}: {}", source, *problem);
  return config;
}

OptConfig OptConfig::from_json_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    fail("{}: {}", path.string(),
         std::filesystem::exists(path, ec) ? "is not a regular file" : "does not exist");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) fail("{}: could not be opened for reading", path.string());
  std::ostringstream text;
  text << in.rdbuf();  // an empty file leaves `text` empty, which the parser then reports
  OptConfig config = from_json_text(text.str(), path.string());
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

std::optional<OptConfig> OptConfig::from_name(std::string_view name) {
  const std::string key = lowercase(name);
  for (const KnownSize& size : kKnownSizes) {
    if (key != size.name) continue;
    OptConfig config;
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
  return std::nullopt;
}

std::vector<std::string> OptConfig::known_names() {
  std::vector<std::string> names;
  for (const KnownSize& size : kKnownSizes) names.emplace_back(size.name);
  return names;
}

}  // namespace offgen
