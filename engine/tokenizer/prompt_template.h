// What the post-processor of a tokenizer.json puts around a single sequence (the ids before and
// after "$A" in TemplateProcessing's "single"), and the override of tokenizer_config.json's
// add_bos_token / add_eos_token. Only these ids are read: offgen's encode() adds no special
// tokens itself, and the engine prepends prompt_prefix().
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "engine/tokenizer/json_node.h"

namespace offgen {

struct PromptIds {
  std::vector<std::int32_t> prefix;
  std::vector<std::int32_t> suffix;
};

// `post_processor`: the member of tokenizer.json (nullopt: null or absent, which adds nothing).
PromptIds read_post_processor(const std::optional<JsonNode>& post_processor);

// If `config` exists and sets add_bos_token (add_eos_token) to true, the prefix (suffix) becomes
// the id of its bos_token (eos_token); false makes it empty; absent or null changes nothing.
// `token_id` looks a token up as encode() would. Throws offgen::Error naming `config` for bad
// JSON or a bos / eos token that is not a token.
void apply_tokenizer_config(
    const std::filesystem::path& config,
    const std::function<std::optional<std::int32_t>(std::string_view)>& token_id, PromptIds& ids);

}  // namespace offgen
