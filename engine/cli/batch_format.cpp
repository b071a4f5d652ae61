#include "engine/cli/batch_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "engine/cli/request_fields.h"
#include "engine/core/error.h"

namespace offgen::cli {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kBatchIdPrefix = "batch_req_";

// A JSON number as a float; one beyond float's range becomes +-inf (which validation refuses)
// rather than an undefined conversion.
float to_float(const Json& v) {
  const double d = v.get<double>();
  if (std::abs(d) > std::numeric_limits<float>::max()) {
    return d > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(d);
}

// Reads the optional per-request fields shared by both formats from `fields` into `out`.
std::string read_parameters(const Json& fields, const GenerateDefaults& defaults, std::size_t index,
                            ParsedLine& out) {
  GenerationRequest& r = out.request;
  r.max_tokens = defaults.max_tokens;
  r.sampling = defaults.sampling;
  r.seed = defaults.seed + index;
  if (fields.contains("max_tokens")) {
    const Json& v = fields["max_tokens"];
    if (!v.is_number_integer()) return "'max_tokens' must be an integer";
    constexpr auto kMost = static_cast<std::uint64_t>(std::numeric_limits<int>::max());
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > kMost) {
      return fmt::format("'max_tokens' {} is more than any model's positions", v.dump());
    }
    const auto n = v.get<std::int64_t>();
    if (n < 1) return fmt::format("'max_tokens' must be >= 1 (got {})", n);
    r.max_tokens = static_cast<int>(n);
  }
  if (fields.contains("temperature")) {
    if (!fields["temperature"].is_number()) return "'temperature' must be a number";
    r.sampling.temperature = to_float(fields["temperature"]);
  }
  if (fields.contains("top_p")) {
    if (!fields["top_p"].is_number()) return "'top_p' must be a number";
    r.sampling.top_p = to_float(fields["top_p"]);
  }
  if (fields.contains("top_k")) {
    const Json& v = fields["top_k"];
    if (!v.is_number_integer()) return "'top_k' must be an integer";
    // OpenAI-style servers use -1 for "off"; offgen uses 0.
    const auto k = v.get<std::int64_t>();
    if (k < -1 || k > std::numeric_limits<int>::max()) return "'top_k' must be >= -1";
    r.sampling.top_k = k < 0 ? 0 : static_cast<int>(k);
  }
  if (fields.contains("seed") && !fields["seed"].is_null()) {
    if (!fields["seed"].is_number_integer()) return "'seed' must be an integer";
    r.seed = static_cast<std::uint64_t>(fields["seed"].get<std::int64_t>());
  }
  if (fields.contains("ignore_eos")) {
    if (!fields["ignore_eos"].is_boolean()) return "'ignore_eos' must be true or false";
    r.ignore_eos = fields["ignore_eos"].get<bool>();
  }
  if (fields.contains("stop") && !fields["stop"].is_null()) {
    const Json& v = fields["stop"];
    if (v.is_string()) {
      out.stop.push_back(v.get<std::string>());
    } else if (v.is_array()) {
      for (const Json& s : v) {
        if (!s.is_string()) return "'stop' must be a string or an array of strings";
        out.stop.push_back(s.get<std::string>());
      }
    } else {
      return "'stop' must be a string or an array of strings";
    }
    if (std::any_of(out.stop.begin(), out.stop.end(),
                    [](const std::string& s) { return s.empty(); })) {
      return "'stop' strings must not be empty";
    }
  }
  try {
    validate(r.sampling);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

std::string read_plain(const Json& line, const ModelConfig& config, const Tokenizer* tokenizer,
                       const std::string& model, ParsedLine& out) {
  if (line.contains("prompt_token_ids")) {
    return read_token_ids(line, "prompt_token_ids", config, out.request.prompt);
  }
  if (line.contains("prompt")) {
    return read_text(line, "prompt", "prompt_token_ids", config, tokenizer, model,
                     out.request.prompt);
  }
  return "the line has neither 'prompt' nor 'prompt_token_ids'";
}

std::string read_batch(const Json& line, const ModelConfig& config, const Tokenizer* tokenizer,
                       const std::string& model, ParsedLine& out) {
  // (operator[] on a const object must not be asked for a missing key)
  if (!line.contains("custom_id") || !line["custom_id"].is_string()) {
    return "'custom_id' must be a string";
  }
  out.custom_id = line["custom_id"].get<std::string>();
  if (line.contains("method") && line["method"] != "POST") {
    return "'method' must be \"POST\"";
  }
  if (line.contains("url") && line["url"] != "/v1/completions") {
    return fmt::format("url {} is not supported: offgen serves /v1/completions",
                       line["url"].dump());
  }
  if (!line.contains("body") || !line["body"].is_object()) return "'body' must be an object";
  const Json& body = line["body"];
  if (body.contains("n") && body["n"] != 1) return "'n' must be 1";
  if (body.contains("stream") && body["stream"] != false) return "'stream' is not supported";
  if (body.contains("echo") && body["echo"] != false) return "'echo' is not supported";
  if (!body.contains("prompt")) return "'body' has no 'prompt'";
  const Json& prompt = body["prompt"];
  // A string, token ids, or a one-element list of either (OpenAI's batched prompt form).
  Json single = Json::object();
  if (prompt.is_array() && prompt.size() == 1 && (prompt[0].is_string() || prompt[0].is_array())) {
    single["prompt"] = prompt[0];
  } else if (prompt.is_array() && !prompt.empty() && !prompt[0].is_number_integer()) {
    return "'prompt' lists more than one prompt: give one request line per prompt";
  } else {
    single["prompt"] = prompt;
  }
  if (single["prompt"].is_string()) {
    return read_text(single, "prompt", "prompt (as token ids)", config, tokenizer, model,
                     out.request.prompt);
  }
  return read_token_ids(single, "prompt", config, out.request.prompt);
}

std::string visible_text(const Tokenizer& tokenizer, const ModelConfig& c,
                         const std::vector<std::int32_t>& tokens) {
  std::vector<std::int32_t> visible;
  for (std::int32_t t : tokens) {
    const bool pad = c.has_pad_token && t == c.pad_token_id;
    if (!c.is_eos(t) && t != c.bos_token_id && !pad) visible.push_back(t);
  }
  return tokenizer.decode(visible);
}

}  // namespace

ParsedLine parse_generate_line(const JsonlLine& line, const ModelConfig& config,
                               const Tokenizer* tokenizer, const std::string& model,
                               const GenerateDefaults& defaults) {
  ParsedLine out;
  if (!line.error.empty()) {
    out.problem = line.error;
    return out;
  }
  const Json& value = line.value;
  // A plain line may carry a custom_id of its own (copied to the output); a body makes it a batch
  // request.
  const bool batch = value.contains("body");
  out.format = batch ? LineFormat::openai_batch : LineFormat::plain;
  out.problem = batch ? read_batch(value, config, tokenizer, model, out)
                      : read_plain(value, config, tokenizer, model, out);
  if (out.problem.empty()) {
    out.problem = read_parameters(batch ? value["body"] : value, defaults, line.index, out);
  }
  if (out.problem.empty() && !out.stop.empty()) {
    if (tokenizer == nullptr) {
      out.problem = "'stop' strings need a tokenizer (pass --tokenizer DIR)";
    } else {
      // Stop as soon as the decoded text holds a stop string.
      out.request.stop = [tokenizer, config, stop = out.stop](std::span<const std::int32_t> g) {
        const std::string text =
            visible_text(*tokenizer, config, std::vector<std::int32_t>(g.begin(), g.end()));
        return std::any_of(stop.begin(), stop.end(),
                           [&](const std::string& s) { return text.find(s) != std::string::npos; });
      };
    }
  }
  if (!out.problem.empty()) out.request.prompt.clear();
  return out;
}

std::string completion_text(const Tokenizer& tokenizer, const ModelConfig& config,
                            const std::vector<std::int32_t>& tokens,
                            const std::vector<std::string>& stop, bool* stopped_by_string) {
  std::string text = visible_text(tokenizer, config, tokens);
  std::size_t cut = std::string::npos;
  for (const std::string& s : stop) cut = std::min(cut, text.find(s));
  if (stopped_by_string != nullptr) *stopped_by_string = cut != std::string::npos;
  if (cut != std::string::npos) text.resize(cut);
  return to_valid_utf8(text);
}

nlohmann::ordered_json result_record(const JsonlLine& line, const ParsedLine& parsed,
                                     const GenerationResult& result, const std::string& problem,
                                     const Tokenizer* tokenizer, const ModelConfig& config,
                                     const std::string& model, std::int64_t created) {
  // A line that is not JSON already names its file and line.
  const std::string where =
      line.error.empty() ? fmt::format("line {}: {}", line.line_number, problem) : problem;
  const bool has_text = tokenizer != nullptr && problem.empty();
  const std::string text =
      has_text ? completion_text(*tokenizer, config, result.tokens, parsed.stop) : std::string();
  if (parsed.format == LineFormat::plain) {
    // The line's own "index" and "error" keys are not copied: they would hide which request
    // the record answers and whether it failed.
    Json record = {{"index", line.index}};
    record.update(
        passthrough(line.value, {"index", "error", "prompt", "prompt_token_ids", "max_tokens",
                                 "temperature", "top_k", "top_p", "seed", "stop", "ignore_eos"}));
    if (!problem.empty()) {
      record["error"] = where;
      return record;
    }
    record["prompt_token_ids"] = parsed.request.prompt;
    record["token_ids"] = result.tokens;
    record["text"] = has_text ? Json(text) : Json(nullptr);
    record["finish_reason"] = finish_reason_name(result.finish);
    return record;
  }
  Json record = {{"id", fmt::format("{}{}", kBatchIdPrefix, line.index)},
                 {"custom_id", parsed.custom_id.empty() ? Json(nullptr) : Json(parsed.custom_id)}};
  if (!problem.empty()) {
    record["response"] = nullptr;
    record["error"] = {{"code", "invalid_request"}, {"message", where}};
    return record;
  }
  const auto prompt_tokens = static_cast<std::int64_t>(parsed.request.prompt.size());
  const auto completion_tokens = static_cast<std::int64_t>(result.tokens.size());
  Json choice = {{"index", 0},
                 {"text", has_text ? Json(text) : Json(nullptr)},
                 {"token_ids", result.tokens},
                 {"logprobs", nullptr},
                 {"finish_reason", finish_reason_name(result.finish)}};
  Json body = {{"id", fmt::format("cmpl-{}", line.index)},
               {"object", "text_completion"},
               {"created", created},
               {"model", model},
               {"choices", Json::array({choice})},
               {"usage",
                {{"prompt_tokens", prompt_tokens},
                 {"completion_tokens", completion_tokens},
                 {"total_tokens", prompt_tokens + completion_tokens}}}};
  record["response"] = {
      {"status_code", 200}, {"request_id", fmt::format("req-{}", line.index)}, {"body", body}};
  record["error"] = nullptr;
  return record;
}

std::int64_t record_index(const nlohmann::ordered_json& record) {
  if (!record.is_object()) return -1;
  if (record.contains("index") && record["index"].is_number_unsigned()) {
    return record["index"].get<std::int64_t>();
  }
  if (record.contains("id") && record["id"].is_string()) {
    const std::string& id = record["id"].get_ref<const std::string&>();
    const std::string prefix = kBatchIdPrefix;
    if (id.rfind(prefix, 0) != 0) return -1;
    std::int64_t index = -1;
    const char* begin = id.data() + prefix.size();
    const auto [end, ec] = std::from_chars(begin, id.data() + id.size(), index);
    if (ec != std::errc() || end != id.data() + id.size() || index < 0) return -1;
    return index;
  }
  return -1;
}

}  // namespace offgen::cli
