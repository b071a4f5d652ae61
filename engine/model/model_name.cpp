#include "engine/model/model_name.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/core/error.h"
#include "engine/model/checkpoint.h"
#include "engine/model/hf_cache.h"

namespace offgen {
namespace {

namespace fs = std::filesystem;

ModelName dummy(std::string_view text, std::string_view name) {
  const std::optional<ModelConfig> config = ModelConfig::from_name(name);
  if (!config) {
    fail("--model {}: '{}' is not a config name; dummy weights come in the sizes {}", text, name,
         fmt::join(ModelConfig::known_names(), ", "));
  }
  return {ModelName::Kind::dummy, {}, config->name};
}

}  // namespace

ModelConfig ModelName::config() const {
  switch (kind) {
    case Kind::checkpoint:
      return Checkpoint::read_config(dir);
    case Kind::dummy:
      return ModelConfig::from_name(config_name).value();
  }
  fail("unknown model kind");
}

std::string ModelName::spec() const {
  switch (kind) {
    case Kind::checkpoint:
      return dir.string();
    case Kind::dummy:
      return std::string(kDummyPrefix) + config_name;
  }
  return {};
}

std::string ModelName::describe() const {
  switch (kind) {
    case Kind::checkpoint:
      return dir.string();
    case Kind::dummy:
      return config_name + " (dummy weights)";
  }
  return {};
}

ModelName resolve_model_name(std::string_view text, BareConfigName bare) {
  if (text.empty()) {
    fail(
        "no model given: pass --model with a checkpoint directory or GGUF file, a Hugging Face "
        "name such as facebook/opt-1.3b or meta-llama/Llama-2-7b-hf, or dummy:NAME for dummy "
        "weights (dummy:opt-125m, dummy:llama-2-7b, ...)");
  }
  if (text.starts_with(kDummyPrefix)) return dummy(text, text.substr(kDummyPrefix.size()));
  std::error_code ec;
  const fs::path path(text);
  if (fs::is_directory(path, ec)) return {ModelName::Kind::checkpoint, path, {}};
  if (const std::optional<ModelConfig> config = ModelConfig::from_name(text)) {
    if (bare == BareConfigName::dummy_weights) return {ModelName::Kind::dummy, {}, config->name};
    fail(
        "--model {} is a config name, which would mean random (dummy) weights; generate, score "
        "and compare report text and scores, so they run real weights unless dummy ones are asked "
        "for. Pass a checkpoint directory or GGUF file, a Hugging Face name such as {} (from the "
        "local cache), or --model dummy:{} (or --dummy) for dummy weights",
        text, ModelConfig::hub_repo(config->name), config->name);
  }
  if (is_hub_repo_id(text)) {
    const fs::path cache = hf_hub_cache_dir();
    if (const auto snapshot = find_hf_snapshot(cache, text)) {
      return {ModelName::Kind::checkpoint, *snapshot, {}};
    }
    fail("{}", missing_hf_model_message(text, cache));
  }
  if (fs::exists(path, ec) || text.find('/') != std::string_view::npos) {
    return {ModelName::Kind::checkpoint, path, {}};  // Checkpoint::open says what is wrong
  }
  fail(
      "--model {}: no such directory, and not a Hugging Face name (org/name) or a config name "
      "(dummy:{} for dummy weights)",
      text, fmt::join(ModelConfig::known_names(), ", dummy:"));
}

}  // namespace offgen
