// See prompt_template.h. A post-processor Sequence applies its processors in order, each wrapping
// what the previous ones produced, so later prefixes go in front and later suffixes at the end.
#include "engine/tokenizer/prompt_template.h"

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/tokenizer/text_file.h"

namespace offgen {

namespace {

using nlohmann::json;

std::int32_t read_id(const JsonNode& id) {
  const json& value = id.value();
  if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
      value.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max()) {
    id.error("expected a token id, got {}", value.dump());
  }
  return static_cast<std::int32_t>(value.get<std::int64_t>());
}

void append_ids(const JsonNode& ids, std::vector<std::int32_t>& out) {
  for (std::size_t i = 0; i < ids.size(); ++i) out.push_back(read_id(ids[i]));
}

// TemplateProcessing's "single": [{"SpecialToken": {"id": name}}, {"Sequence": {"id": "A"}}, ..].
PromptIds read_template(const JsonNode& processor) {
  const JsonNode single = processor.at("single");
  const JsonNode special_tokens = processor.at("special_tokens");
  PromptIds ids;
  bool seen_sequence = false;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const JsonNode piece = single[i];
    if (const auto sequence = piece.find("Sequence")) {
      const std::string name = sequence->at("id").string();
      if (name != "A" || seen_sequence) {
        sequence->error("a single-sequence template holds $A once, got ${}", name);
      }
      seen_sequence = true;
    } else if (const auto special = piece.find("SpecialToken")) {
      const std::string name = special->at("id").string();
      const auto entry = special_tokens.find(name);
      if (!entry) special->error("special token {:?} is not in special_tokens", name);
      append_ids(entry->at("ids"), seen_sequence ? ids.suffix : ids.prefix);
    } else {
      piece.error("expected {{\"SpecialToken\": ..}} or {{\"Sequence\": ..}}, got {}",
                  piece.value().dump());
    }
  }
  if (!seen_sequence) single.error("the single-sequence template has no $A");
  return ids;
}

// RobertaProcessing / BertProcessing: "cls": [token, id] before, "sep": [token, id] after.
PromptIds read_cls_sep(const JsonNode& processor) {
  PromptIds ids;
  for (const auto& [key, out] : {std::pair{"cls", &ids.prefix}, std::pair{"sep", &ids.suffix}}) {
    const JsonNode pair = processor.at(key);
    if (pair.size() != 2) pair.error("expected [token, id], got {}", pair.value().dump());
    out->push_back(read_id(pair[1]));
  }
  return ids;
}

void wrap(const JsonNode& processor, PromptIds& ids) {
  const std::string type = processor.type();
  if (type == "Sequence") {
    const JsonNode list = processor.at("processors");
    for (std::size_t i = 0; i < list.size(); ++i) wrap(list[i], ids);
    return;
  }
  PromptIds outer;
  if (type == "TemplateProcessing") {
    outer = read_template(processor);
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    outer = read_cls_sep(processor);
  } else if (type != "ByteLevel") {
    processor.unsupported("post_processor", type,
                          "Sequence, TemplateProcessing, ByteLevel, RobertaProcessing, "
                          "BertProcessing");
  }
  ids.prefix.insert(ids.prefix.begin(), outer.prefix.begin(), outer.prefix.end());
  ids.suffix.insert(ids.suffix.end(), outer.suffix.begin(), outer.suffix.end());
}

// A token in tokenizer_config.json: "<s>" or {"content": "<s>", ...} (an AddedToken).
std::optional<std::string> token_text(const JsonNode& config, std::string_view key) {
  const auto node = config.find(key);
  if (!node) return std::nullopt;
  if (node->value().is_object()) return node->at("content").string();
  return node->string();
}

void override_ids(const JsonNode& config, std::string_view flag, std::string_view token_key,
                  const std::function<std::optional<std::int32_t>(std::string_view)>& token_id,
                  std::vector<std::int32_t>& ids) {
  const auto add = config.find(flag);
  if (!add) return;
  ids.clear();
  if (!add->boolean()) return;
  const auto token = token_text(config, token_key);
  if (!token) add->error("is true but {} is not set", token_key);
  const auto id = token_id(*token);
  if (!id) config.at(token_key).error("{:?} is not a token of the tokenizer", *token);
  ids.push_back(*id);
}

}  // namespace

PromptIds read_post_processor(const std::optional<JsonNode>& post_processor) {
  PromptIds ids;
  if (post_processor) wrap(*post_processor, ids);
  return ids;
}

void apply_tokenizer_config(
    const std::filesystem::path& config,
    const std::function<std::optional<std::int32_t>(std::string_view)>& token_id, PromptIds& ids) {
  std::error_code ec;
  if (!std::filesystem::exists(config, ec)) return;
  const std::string text = read_text_file(config, "tokenizer config");
  json value;
  try {
    value = json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", config.string(), e.what());
  }
  const JsonNode root(value, config.string());
  if (!value.is_object()) root.error("expected a JSON object, got {}", value.type_name());
  override_ids(root, "add_bos_token", "bos_token", token_id, ids.prefix);
  override_ids(root, "add_eos_token", "eos_token", token_id, ids.suffix);
}

}  // namespace offgen
