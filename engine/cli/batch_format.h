// The lines `offgen generate` reads and writes, in two formats:
//  - plain: {"prompt": "..."} or {"prompt_token_ids": [...]}, optionally with per-request
//    "max_tokens", "temperature", "top_k", "top_p", "seed", "stop", "stop_token_ids" and
//    "ignore_eos"; other keys are copied to the output line, which adds "index", "token_ids",
//    "text", "finish_reason".
//  - the OpenAI Batch API request format that `vllm run-batch` reads: {"custom_id": ...,
//    "method": "POST", "url": "/v1/completions" or "/v1/chat/completions", "body": {...}},
//    answered with {"id", "custom_id", "response": {"status_code", "request_id", "body": <a
//    completion or chat completion object>}, "error"}. request_keys.h says which body keys are
//    read, which are refused and what an unknown one does.
// Each line is parsed on its own: a bad line gets an error record, the others still run. A batch
// line may ask for several choices (n samples of each of a list of prompts); each choice is one
// engine request, and the line's record holds them all.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/cli/chat_prompt.h"
#include "engine/cli/jsonl.h"
#include "engine/cli/request_keys.h"
#include "engine/runtime/engine.h"
#include "engine/tokenizer/tokenizer.h"

namespace offgen::cli {

enum class LineFormat { plain, openai_batch };

// What the command line sets for lines that do not say, and how lines are read.
struct GenerateDefaults {
  int max_tokens = 16;
  SamplingParams sampling;
  std::uint64_t seed = 0;  // a request without its own seed uses seed + its index
  // An unknown body key is a warning (the line runs) instead of the line's error.
  bool allow_unknown_fields = false;
  // The model's chat template (null: chat lines are refused unless they bring their own).
  const ChatPrompt* chat = nullptr;
};

// How a choice's generated tokens become its text.
struct TextOptions {
  std::vector<std::string> stop;             // the text ends before the first one found
  std::vector<std::int32_t> stop_token_ids;  // generating one ends the choice (finish "stop")
  bool skip_special_tokens = true;           // BOS, EOS and pad are left out of the text
  bool include_stop_str_in_output = false;   // the text ends after the stop string / token
  bool echo = false;                         // completions: the prompt's text comes first
  // Stop strings are looked for only in the text after the first min_tokens tokens (vLLM's).
  int min_tokens = 0;
};

struct ParsedLine {
  LineFormat format = LineFormat::plain;
  Endpoint endpoint = Endpoint::completions;
  std::string custom_id;  // openai_batch: the caller's id
  // The first choice's request: the first prompt, with the line's parameters and seed.
  GenerationRequest request;
  // Every prompt of the line (a list of prompts gives several; request.prompt is the first) and
  // their texts as given (echo), "" for token ids.
  std::vector<std::vector<std::int32_t>> prompts;
  std::vector<std::string> prompt_texts;
  int n = 1;  // samples per prompt
  TextOptions text;
  std::vector<std::string> warnings;  // unknown keys let through (--allow-unknown-fields)
  std::string problem;                // non-empty: the line is answered with this error
};

// Parses line `line.index` of the input (a JsonlLine with a read error becomes a problem).
// tokenizer may be null (then only token-id prompts work); model names it in messages.
ParsedLine parse_generate_line(const JsonlLine& line, const ModelConfig& config,
                               const Tokenizer* tokenizer, const std::string& model,
                               const GenerateDefaults& defaults);

// The engine requests of a parsed line, one per choice in OpenAI's order: choice i is sample
// i % n of prompt i / n. Sample 0 of every prompt has the line's seed; sample s > 0 a seed
// derived from it and s (its own stream, never another line's default seed + s). A line with a
// problem has one request with an empty prompt (the engine rejects it without work).
std::vector<GenerationRequest> line_requests(const ParsedLine& parsed);

// The completion text: generated tokens decoded (without BOS / EOS / pad unless
// skip_special_tokens is off), cut at the first stop string or stop token; `stop_found` gets the
// stop string found first in the text ("" when none was).
std::string completion_text(const Tokenizer& tokenizer, const ModelConfig& config,
                            const std::vector<std::int32_t>& tokens, const TextOptions& options,
                            std::string* stop_found = nullptr);

// The output record of a line: its choices' results, or its error when `problem` is non-empty.
// model: the name the response body reports; created: its Unix time.
nlohmann::ordered_json result_record(const JsonlLine& line, const ParsedLine& parsed,
                                     const std::vector<GenerationResult>& results,
                                     const std::string& problem, const Tokenizer* tokenizer,
                                     const ModelConfig& config, const std::string& model,
                                     std::int64_t created);

// The input index a record answers ("index" of a plain record, "batch_req_<index>" as the id of
// a batch record), or -1 when it is not a record of ours. `--resume` and the final ordering use
// it.
std::int64_t record_index(const nlohmann::ordered_json& record);

}  // namespace offgen::cli
