// Reading the fields batch requests share: token-id arrays, text to tokenize (BOS prepended as
// OPT does), and the keys copied from an input line to its output line.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/runtime/engine.h"
#include "engine/tokenizer/tokenizer.h"

namespace offgen::cli {

// Appends line[key] (an array of ids inside the vocabulary) to `out`; returns the problem or "".
std::string read_token_ids(const nlohmann::ordered_json& line, const std::string& key,
                           const ModelConfig& config, std::vector<std::int32_t>& out);

// Appends BOS (unless `with_prefix` is off: a batch line's add_special_tokens false) and the
// tokens of line[key] (a string) to `out`; returns the problem or "". `ids_key` names the
// alternative a user without a tokenizer (null) of `model` can give.
std::string read_text(const nlohmann::ordered_json& line, const std::string& key,
                      std::string_view ids_key, const ModelConfig& config,
                      const Tokenizer* tokenizer, std::string_view model,
                      std::vector<std::int32_t>& out, bool with_prefix = true);

// Cuts `tokens` to their first `limit` (BOS included) when there are more; returns how many there
// were before, or 0 when nothing was cut. `score --truncate` and compare's --eval texts (at the
// model's positions) cut by this one rule.
// The ids every text prompt starts with: the tokenizer.json template's (or tokenizer_config.json's
// add_bos_token), else the model's BOS, as OPT prepends it.
std::vector<std::int32_t> prompt_prefix(const ModelConfig& config, const Tokenizer& tokenizer);

std::size_t truncate_tokens(std::vector<std::int32_t>& tokens, int limit);

// The tokenizer a run of these options uses (--tokenizer, else the checkpoint directory's
// vocab.json + merges.txt), loaded without the model; null when there is none.
std::unique_ptr<Tokenizer> load_tokenizer(const EngineOptions& options);

// Every key of `line` except `consumed`, for the output record.
nlohmann::ordered_json passthrough(const nlohmann::ordered_json& line,
                                   std::span<const std::string_view> consumed);
inline nlohmann::ordered_json passthrough(const nlohmann::ordered_json& line,
                                          std::initializer_list<std::string_view> consumed) {
  return passthrough(line, std::span<const std::string_view>(consumed.begin(), consumed.size()));
}

}  // namespace offgen::cli
