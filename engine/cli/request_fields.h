// Reading the fields batch requests share: token-id arrays, text to tokenize (BOS prepended as
// OPT does), and the keys copied from an input line to its output line.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "engine/runtime/engine.h"

namespace offgen::cli {

// Appends line[key] (an array of ids inside the vocabulary) to `out`; returns the problem or "".
std::string read_token_ids(const nlohmann::ordered_json& line, const std::string& key,
                           const OptConfig& config, std::vector<std::int32_t>& out);

// Appends BOS and the tokens of line[key] (a string) to `out`; returns the problem or "". `ids_key`
// names the alternative a user without a tokenizer can give.
std::string read_text(const nlohmann::ordered_json& line, const std::string& key,
                      std::string_view ids_key, const Engine& engine,
                      std::vector<std::int32_t>& out);

// Every key of `line` except `consumed`, for the output record.
nlohmann::ordered_json passthrough(const nlohmann::ordered_json& line,
                                   std::initializer_list<std::string_view> consumed);

}  // namespace offgen::cli
