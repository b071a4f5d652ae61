#include "engine/cli/request_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <limits>

namespace offgen::cli {

std::string read_token_ids(const nlohmann::ordered_json& line, const std::string& key,
                           const ModelConfig& config, std::vector<std::int32_t>& out) {
  const auto& ids = line[key];
  const std::string type_error = fmt::format("'{}' must be an array of integers", key);
  if (!ids.is_array()) return type_error;
  std::vector<std::int32_t> parsed;
  for (const auto& id : ids) {
    if (!id.is_number_integer()) return type_error;
    // The engine checks ids against the vocabulary; here only that they are int32 at all.
    const auto value = id.get<std::int64_t>();
    if (value < 0 || value > std::numeric_limits<std::int32_t>::max()) {
      return fmt::format("token id {} is outside the vocabulary [0, {})", value, config.vocab_size);
    }
    parsed.push_back(static_cast<std::int32_t>(value));
  }
  out.insert(out.end(), parsed.begin(), parsed.end());  // nothing appended on error
  return {};
}

std::string read_text(const nlohmann::ordered_json& line, const std::string& key,
                      std::string_view ids_key, const ModelConfig& config,
                      const Tokenizer* tokenizer, std::string_view model,
                      std::vector<std::int32_t>& out, bool with_prefix) {
  if (!line[key].is_string()) return fmt::format("'{}' must be a string", key);
  if (tokenizer == nullptr) {
    return fmt::format("model {} has no tokenizer: pass --tokenizer DIR or give '{}'", model,
                       ids_key);
  }
  if (with_prefix) {
    const std::vector<std::int32_t> prefix = prompt_prefix(config, *tokenizer);
    out.insert(out.end(), prefix.begin(), prefix.end());
  }
  const auto ids = tokenizer->encode(line[key].get_ref<const std::string&>());
  out.insert(out.end(), ids.begin(), ids.end());
  return {};
}

std::vector<std::int32_t> prompt_prefix(const ModelConfig& config, const Tokenizer& tokenizer) {
  // tokenizer.json says what goes first (LLaMA: its BOS; Qwen2: nothing); OPT's vocab.json does
  // not, and OPT prepends </s> as BOS.
  return tokenizer.prompt_prefix().value_or(std::vector<std::int32_t>{config.bos_token_id});
}

std::size_t truncate_tokens(std::vector<std::int32_t>& tokens, int limit) {
  const std::size_t before = tokens.size();
  if (limit < 0 || before <= static_cast<std::size_t>(limit)) return 0;
  tokens.resize(static_cast<std::size_t>(limit));
  return before;
}

std::unique_ptr<Tokenizer> load_tokenizer(const EngineOptions& options) {
  namespace fs = std::filesystem;
  fs::path dir = options.tokenizer;
  // As the engine finds it: --tokenizer, else a checkpoint directory with vocab.json or
  // tokenizer.json, or a GGUF file.
  if (dir.empty() && !options.model.empty() && Tokenizer::found_in(options.model)) {
    dir = options.model;
  }
  return dir.empty() ? nullptr : Tokenizer::load(dir);
}

nlohmann::ordered_json passthrough(const nlohmann::ordered_json& line,
                                   std::span<const std::string_view> consumed) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (!line.is_object()) return out;
  for (const auto& [key, value] : line.items()) {
    if (std::find(consumed.begin(), consumed.end(), key) == consumed.end()) out[key] = value;
  }
  return out;
}

}  // namespace offgen::cli
