// The lines `offgen generate` reads and writes, in two formats:
//  - plain: {"prompt": "..."} or {"prompt_token_ids": [...]}, optionally with per-request
//    "max_tokens", "temperature", "top_k", "top_p", "seed", "stop" and "ignore_eos"; other keys
//    are copied to the output line, which adds "index", "token_ids", "text", "finish_reason".
//  - the OpenAI Batch API request format that `vllm run-batch` reads: {"custom_id": ...,
//    "method": "POST", "url": "/v1/completions", "body": {"prompt", "max_tokens", "temperature",
//    "top_p", "seed", "stop", ...}}, answered with {"id", "custom_id", "response": {"status_code",
//    "request_id", "body": <a completions response with "choices" and "usage">}, "error"}.
// Each line is parsed on its own: a bad line gets an error record, the others still run.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/cli/jsonl.h"
#include "engine/runtime/engine.h"
#include "engine/tokenizer/tokenizer.h"

namespace offgen::cli {

enum class LineFormat { plain, openai_batch };

// What the command line sets for lines that do not say.
struct GenerateDefaults {
  int max_tokens = 16;
  SamplingParams sampling;
  std::uint64_t seed = 0;  // a request without its own seed uses seed + its index
};

struct ParsedLine {
  LineFormat format = LineFormat::plain;
  std::string custom_id;  // openai_batch: the caller's id
  GenerationRequest request;
  std::vector<std::string> stop;  // stop strings: the text ends before the first one found
  std::string problem;            // non-empty: the line is answered with this error
};

// Parses line `line.index` of the input (a JsonlLine with a read error becomes a problem).
// tokenizer may be null (then only token-id prompts work); model names it in messages.
ParsedLine parse_generate_line(const JsonlLine& line, const ModelConfig& config,
                               const Tokenizer* tokenizer, const std::string& model,
                               const GenerateDefaults& defaults);

// The completion text: generated tokens without special ones, decoded, cut before the first stop
// string; `stopped_by_string` says whether one was found.
std::string completion_text(const Tokenizer& tokenizer, const ModelConfig& config,
                            const std::vector<std::int32_t>& tokens,
                            const std::vector<std::string>& stop,
                            bool* stopped_by_string = nullptr);

// The output record of a line: its result, or its error when `problem` is non-empty. model: the
// name the completions body reports; created: its Unix time.
nlohmann::ordered_json result_record(const JsonlLine& line, const ParsedLine& parsed,
                                     const GenerationResult& result, const std::string& problem,
                                     const Tokenizer* tokenizer, const ModelConfig& config,
                                     const std::string& model, std::int64_t created);

// The input index a record answers ("index" of a plain record, "batch_req_<index>" as the id of
// a batch record), or -1 when it is not a record of ours. `--resume` and the final ordering use
// it.
std::int64_t record_index(const nlohmann::ordered_json& record);

}  // namespace offgen::cli
