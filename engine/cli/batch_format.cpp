#include "engine/cli/batch_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "engine/cli/request_fields.h"
#include "engine/core/error.h"
#include "engine/core/json_integer.h"

namespace offgen::cli {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kBatchIdPrefix = "batch_req_";
// More choices than this in one line is a mistake, not a workload (vLLM has no cap; a line's
// choices all live in one record).
constexpr int kMostChoices = 1024;

// The keys a plain line reads; every other key is copied to its output line, unless it is a key
// only batch bodies read (then the line says so rather than copying it unread).
const std::vector<std::string_view> kPlainKeys = [] {
  std::vector<std::string_view> keys = {"prompt", "prompt_token_ids"};
  const auto& parameters = request_parameter_keys();
  keys.insert(keys.end(), parameters.begin(), parameters.end());
  return keys;
}();

// A JSON number as a float; one beyond float's range becomes +-inf (which validation refuses)
// rather than an undefined conversion.
float to_float(const Json& v) {
  const double d = v.get<double>();
  if (std::abs(d) > std::numeric_limits<float>::max()) {
    return d > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(d);
}

bool given(const Json& fields, const char* key) {
  return fields.contains(key) && !fields[key].is_null();
}

std::string read_flag(const Json& fields, const char* key, bool& out) {
  if (!given(fields, key)) return {};
  if (!fields[key].is_boolean()) return fmt::format("'{}' must be true or false", key);
  out = fields[key].get<bool>();
  return {};
}

// min_p, min_tokens, the penalties and logit_bias, checked as vLLM checks them (its messages'
// ranges; a bias beyond +-100 is clamped, as vLLM's server clamps it).
std::string read_shaping(const Json& fields, const ModelConfig& config, ParsedLine& out) {
  GenerationRequest& r = out.request;
  LogitShaping& s = r.shaping;
  const std::pair<const char*, float*> numbers[] = {{"presence_penalty", &s.presence_penalty},
                                                    {"frequency_penalty", &s.frequency_penalty},
                                                    {"repetition_penalty", &s.repetition_penalty},
                                                    {"min_p", &r.sampling.min_p}};
  for (const auto& [key, value] : numbers) {
    if (!given(fields, key)) continue;
    if (!fields[key].is_number()) return fmt::format("'{}' must be a number", key);
    *value = to_float(fields[key]);
  }
  for (const auto& [key, value] : {std::pair{"presence_penalty", s.presence_penalty},
                                   std::pair{"frequency_penalty", s.frequency_penalty}}) {
    if (!(value >= -2.0f && value <= 2.0f)) {
      return fmt::format("'{}' must be in [-2, 2], got {}", key, value);
    }
  }
  if (!(s.repetition_penalty > 0.0f) || !std::isfinite(s.repetition_penalty)) {
    return fmt::format("'repetition_penalty' must be greater than zero, got {}",
                       s.repetition_penalty);
  }
  if (!(r.sampling.min_p >= 0.0f && r.sampling.min_p <= 1.0f)) {
    return fmt::format("'min_p' must be in [0, 1], got {}", r.sampling.min_p);
  }
  if (given(fields, "min_tokens")) {
    const std::optional<int> n = json_integer<int>(fields["min_tokens"]);
    if (!n || *n < 0) return "'min_tokens' must be an integer >= 0";
    if (*n > r.max_tokens) {
      return fmt::format("'min_tokens' must be at most 'max_tokens' ({}), got {}", r.max_tokens,
                         *n);
    }
    s.min_tokens = *n;
  }
  if (given(fields, "logit_bias")) {
    const Json& bias = fields["logit_bias"];
    if (!bias.is_object()) return "'logit_bias' must be an object of token ids and biases";
    for (const auto& [key, value] : bias.items()) {
      std::int64_t id = -1;
      const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (error != std::errc{} || end != key.data() + key.size() || key.empty()) {
        return fmt::format("'logit_bias': key {:?} is not a token id", key);
      }
      if (id < 0 || id >= config.vocab_size) {
        return fmt::format("'logit_bias': token {} is outside the vocabulary [0, {})", id,
                           config.vocab_size);
      }
      if (!value.is_number()) {
        return fmt::format("'logit_bias': the bias of token {} must be a number", id);
      }
      s.logit_bias.emplace_back(static_cast<std::int32_t>(id),
                                std::clamp(to_float(value), -100.0f, 100.0f));
    }
  }
  s.stop_ids = out.text.stop_token_ids;
  out.text.min_tokens = s.min_tokens;
  return {};
}

std::string read_max_tokens(const Json& v, const char* key, int& out) {
  if (!v.is_number_integer()) return fmt::format("'{}' must be an integer", key);
  constexpr auto kMost = static_cast<std::uint64_t>(std::numeric_limits<int>::max());
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > kMost) {
    return fmt::format("'{}' {} is more than any model's positions", key, v.dump());
  }
  const auto n = v.get<std::int64_t>();
  if (n < 1) return fmt::format("'{}' must be >= 1 (got {})", key, n);
  out = static_cast<int>(n);
  return {};
}

// Each generated token's own log-probability: completions' `logprobs: 0`, chat's `logprobs: true`.
// The k most likely alternatives (logprobs / top_logprobs k > 0) are refused: offgen reads back
// only the picked token's log-probability from the device.
std::string read_logprobs(const Json& fields, ParsedLine& out) {
  if (out.endpoint == Endpoint::chat && given(fields, "top_logprobs") &&
      !(given(fields, "logprobs") && fields["logprobs"] == true)) {
    return "'top_logprobs' needs 'logprobs': true";
  }
  if (!given(fields, "logprobs")) return {};
  const Json& v = fields["logprobs"];
  // How many alternatives: an integer in [0, kMaxTopLogprobs].
  const auto read_k = [&](const Json& k, const char* key) -> std::string {
    const std::optional<int> n = json_integer<int>(k);
    if (!n || *n < 0 || *n > kernels::kMaxTopLogprobs) {
      return fmt::format("'{}' must be an integer from 0 to {}", key, kernels::kMaxTopLogprobs);
    }
    out.request.top_logprobs = *n;
    return {};
  };
  if (out.endpoint == Endpoint::chat) {
    if (!v.is_boolean()) return "'logprobs' must be true or false";
    out.request.logprobs = v.get<bool>();
    if (given(fields, "top_logprobs")) {
      if (std::string problem = read_k(fields["top_logprobs"], "top_logprobs"); !problem.empty()) {
        return problem;
      }
    }
  } else {
    if (std::string problem = read_k(v, "logprobs"); !problem.empty()) return problem;
    out.request.logprobs = true;
    if (out.text.echo) {
      return "'echo' with 'logprobs' asks for the prompt's log-probabilities, which generate does "
             "not compute (offgen score does)";
    }
  }
  return {};
}

// Reads the optional per-request fields shared by both formats from `fields` into `out`.
std::string read_parameters(const Json& fields, const ModelConfig& config,
                            const GenerateDefaults& defaults, std::size_t index, ParsedLine& out) {
  GenerationRequest& r = out.request;
  r.max_tokens = defaults.max_tokens;
  r.sampling = defaults.sampling;
  r.seed = defaults.seed + index;
  // Chat's newer name wins over the older one, as in vLLM.
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!given(fields, key)) continue;
    if (std::string problem = read_max_tokens(fields[key], key, r.max_tokens); !problem.empty()) {
      return problem;
    }
  }
  if (given(fields, "temperature")) {
    if (!fields["temperature"].is_number()) return "'temperature' must be a number";
    r.sampling.temperature = to_float(fields["temperature"]);
  }
  if (given(fields, "top_p")) {
    if (!fields["top_p"].is_number()) return "'top_p' must be a number";
    r.sampling.top_p = to_float(fields["top_p"]);
  }
  if (given(fields, "top_k")) {
    const Json& v = fields["top_k"];
    if (!v.is_number_integer()) return "'top_k' must be an integer";
    // OpenAI-style servers use -1 for "off"; offgen uses 0.
    const auto k = v.get<std::int64_t>();
    if (k < -1 || k > std::numeric_limits<int>::max()) return "'top_k' must be >= -1";
    r.sampling.top_k = k < 0 ? 0 : static_cast<int>(k);
  }
  if (given(fields, "seed")) {
    if (!fields["seed"].is_number_integer()) return "'seed' must be an integer";
    r.seed = static_cast<std::uint64_t>(fields["seed"].get<std::int64_t>());
  }
  for (const auto& [key, flag] :
       {std::pair{"ignore_eos", &r.ignore_eos},
        std::pair{"skip_special_tokens", &out.text.skip_special_tokens},
        std::pair{"include_stop_str_in_output", &out.text.include_stop_str_in_output}}) {
    if (std::string problem = read_flag(fields, key, *flag); !problem.empty()) return problem;
  }
  for (const char* key : {"user", "model"}) {
    // Who asked, and which model the caller meant: recorded by OpenAI, no effect on the output.
    if (given(fields, key) && !fields[key].is_string()) {
      return fmt::format("'{}' must be a string", key);
    }
  }
  if (given(fields, "stop")) {
    const Json& v = fields["stop"];
    if (v.is_string()) {
      out.text.stop.push_back(v.get<std::string>());
    } else if (v.is_array()) {
      for (const Json& s : v) {
        if (!s.is_string()) return "'stop' must be a string or an array of strings";
        out.text.stop.push_back(s.get<std::string>());
      }
    } else {
      return "'stop' must be a string or an array of strings";
    }
    if (std::any_of(out.text.stop.begin(), out.text.stop.end(),
                    [](const std::string& s) { return s.empty(); })) {
      return "'stop' strings must not be empty";
    }
  }
  if (given(fields, "stop_token_ids")) {
    if (std::string problem =
            read_token_ids(fields, "stop_token_ids", config, out.text.stop_token_ids);
        !problem.empty()) {
      return problem;
    }
    for (const std::int32_t id : out.text.stop_token_ids) {
      if (id >= config.vocab_size) {
        return fmt::format("'stop_token_ids': {} is outside the vocabulary [0, {})", id,
                           config.vocab_size);
      }
    }
  }
  if (std::string problem = read_shaping(fields, config, out); !problem.empty()) return problem;
  if (std::string problem = read_logprobs(fields, out); !problem.empty()) return problem;
  if (given(fields, "truncate_prompt_tokens")) {
    // vLLM's: keep each prompt's last k tokens (left truncation, BOS included in what is cut);
    // -1 means the model's positions.
    const Json& v = fields["truncate_prompt_tokens"];
    if (!v.is_number_integer() || (v.get<std::int64_t>() < 1 && v.get<std::int64_t>() != -1)) {
      return "'truncate_prompt_tokens' must be an integer >= 1, or -1 for the model's positions";
    }
    const std::int64_t k =
        v.get<std::int64_t>() == -1 ? config.max_positions() : v.get<std::int64_t>();
    for (std::size_t i = 0; i < out.prompts.size(); ++i) {
      std::vector<std::int32_t>& prompt = out.prompts[i];
      if (static_cast<std::int64_t>(prompt.size()) > k) {
        prompt.erase(prompt.begin(), prompt.end() - k);
        out.prompt_texts[i].clear();  // echo decodes the tokens kept
      }
    }
  }
  if (given(fields, "n")) {
    const Json& v = fields["n"];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 ||
        v.get<std::int64_t>() > kMostChoices) {
      return fmt::format("'n' must be an integer from 1 to {}", kMostChoices);
    }
    out.n = static_cast<int>(v.get<std::int64_t>());
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
  for (const std::string_view key : body_keys(Endpoint::completions)) {
    const std::string name(key);
    if (line.contains(name) &&
        std::find(kPlainKeys.begin(), kPlainKeys.end(), key) == kPlainKeys.end()) {
      return fmt::format(
          "'{}' is read in OpenAI Batch API lines only ({{\"custom_id\": ..., \"url\": "
          "\"/v1/completions\", \"body\": {{...}}}}); a plain line would copy it to its output "
          "unread",
          name);
    }
  }
  std::vector<std::int32_t> prompt;
  std::string text;
  std::string problem;
  if (line.contains("prompt_token_ids")) {
    problem = read_token_ids(line, "prompt_token_ids", config, prompt);
  } else if (line.contains("prompt")) {
    problem = read_text(line, "prompt", "prompt_token_ids", config, tokenizer, model, prompt);
    if (problem.empty()) text = line["prompt"].get<std::string>();
  } else {
    problem = "the line has neither 'prompt' nor 'prompt_token_ids'";
  }
  out.prompts = {prompt};
  out.prompt_texts = {text};
  return problem;
}

// A completions body's prompt: a string, token ids, or a list of either (one choice set each).
std::string read_completion_prompts(const Json& body, const ModelConfig& config,
                                    const Tokenizer* tokenizer, const std::string& model,
                                    ParsedLine& out) {
  if (!body.contains("prompt")) return "'body' has no 'prompt'";
  bool add_special_tokens = true;
  if (std::string problem = read_flag(body, "add_special_tokens", add_special_tokens);
      !problem.empty()) {
    return problem;
  }
  const Json& prompt = body["prompt"];
  std::vector<Json> each;
  if (prompt.is_array() && !prompt.empty() && (prompt[0].is_string() || prompt[0].is_array())) {
    each.assign(prompt.begin(), prompt.end());
  } else {
    each.push_back(prompt);
  }
  for (std::size_t i = 0; i < each.size(); ++i) {
    Json holder = {{"prompt", each[i]}};
    std::vector<std::int32_t> ids;
    std::string text;
    std::string problem;
    if (each[i].is_string()) {
      problem = read_text(holder, "prompt", "prompt (as token ids)", config, tokenizer, model, ids,
                          add_special_tokens);
      text = each[i].get<std::string>();
    } else {
      problem = read_token_ids(holder, "prompt", config, ids);  // empty: the engine says so
    }
    if (!problem.empty()) {
      return each.size() == 1 ? problem : fmt::format("prompt {} of the list: {}", i, problem);
    }
    out.prompts.push_back(std::move(ids));
    out.prompt_texts.push_back(std::move(text));
  }
  return read_flag(body, "echo", out.text.echo);
}

std::string read_chat_prompt(const Json& body, const ModelConfig& config,
                             const Tokenizer* tokenizer, const std::string& model,
                             const GenerateDefaults& defaults, ParsedLine& out) {
  if (tokenizer == nullptr) {
    return fmt::format("model {} has no tokenizer: chat requests need one (pass --tokenizer DIR)",
                       model);
  }
  bool add_special_tokens = false;  // the template writes BOS itself (vLLM's chat default)
  if (std::string problem = read_flag(body, "add_special_tokens", add_special_tokens);
      !problem.empty()) {
    return problem;
  }
  std::string text;
  try {
    if (defaults.chat == nullptr) {
      return "chat requests need the model's chat template, which was not loaded";
    }
    text = defaults.chat->render(body);
  } catch (const Error& e) {
    return e.what();
  }
  std::vector<std::int32_t> ids;
  if (add_special_tokens) ids = prompt_prefix(config, *tokenizer);
  const std::vector<std::int32_t> encoded = tokenizer->encode(text);
  ids.insert(ids.end(), encoded.begin(), encoded.end());
  out.prompts = {ids};
  out.prompt_texts = {text};
  return {};
}

std::string read_batch(const Json& line, const ModelConfig& config, const Tokenizer* tokenizer,
                       const std::string& model, const GenerateDefaults& defaults,
                       ParsedLine& out) {
  KeyCheck keys = check_line_keys(line, defaults.allow_unknown_fields);
  out.warnings = keys.warnings;
  if (!keys.problem.empty()) return keys.problem;
  // (operator[] on a const object must not be asked for a missing key)
  if (!line.contains("custom_id") || !line["custom_id"].is_string()) {
    return "'custom_id' must be a string";
  }
  out.custom_id = line["custom_id"].get<std::string>();
  if (line.contains("method") && line["method"] != "POST") {
    return "'method' must be \"POST\"";
  }
  if (line.contains("url")) {
    const EndpointOf endpoint = endpoint_of(line["url"]);
    if (!endpoint.problem.empty()) return endpoint.problem;
    out.endpoint = endpoint.endpoint;
  }
  if (!line.contains("body") || !line["body"].is_object()) return "'body' must be an object";
  const Json& body = line["body"];
  keys = check_body_keys(body, out.endpoint, defaults.allow_unknown_fields);
  out.warnings.insert(out.warnings.end(), keys.warnings.begin(), keys.warnings.end());
  if (!keys.problem.empty()) return keys.problem;
  if (given(body, "stream") && body["stream"] != false) {
    return "'stream' must be false: a batch file is answered in whole records";
  }
  return out.endpoint == Endpoint::chat
             ? read_chat_prompt(body, config, tokenizer, model, defaults, out)
             : read_completion_prompts(body, config, tokenizer, model, out);
}

// The generated tokens as text: BOS, EOS and pad left out unless skip_special_tokens is off.
std::string decoded_text(const Tokenizer& tokenizer, const ModelConfig& c,
                         std::span<const std::int32_t> tokens, bool skip_special_tokens) {
  std::vector<std::int32_t> visible;
  for (std::int32_t t : tokens) {
    const bool pad = c.has_pad_token && t == c.pad_token_id;
    if (!skip_special_tokens || (!c.is_eos(t) && t != c.bos_token_id && !pad)) {
      visible.push_back(t);
    }
  }
  return tokenizer.decode(visible);
}

bool is_stop_token(const TextOptions& options, std::int32_t token) {
  return std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), token) !=
         options.stop_token_ids.end();
}

// Where stop strings are looked for in the decoded text of `tokens`: after the text of the first
// min_tokens tokens (vLLM's: a stop string the model wrote before min_tokens neither stops nor
// cuts the completion); npos while there are no more tokens than that.
std::size_t stop_search_start(const Tokenizer& tokenizer, const ModelConfig& config,
                              std::span<const std::int32_t> tokens, const TextOptions& options) {
  if (options.min_tokens <= 0) return 0;
  const auto first = static_cast<std::size_t>(options.min_tokens);
  if (tokens.size() <= first) return std::string::npos;
  return decoded_text(tokenizer, config, tokens.first(first), options.skip_special_tokens).size();
}

// splitmix64's finalizer: a seed for sample s of a line that no other line's default seed
// (defaults.seed + index) is likely to equal.
std::uint64_t sample_seed(std::uint64_t seed, int sample) {
  if (sample == 0) return seed;
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(sample);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Why a choice stopped, as vLLM's stop_reason: the stop string found, the stop token generated,
// or null (EOS or length).
Json stop_reason(const GenerationResult& result, const ParsedLine& parsed,
                 const std::string& found) {
  if (result.finish != FinishReason::stop) return nullptr;
  if (!found.empty()) return found;
  if (!result.tokens.empty() && is_stop_token(parsed.text, result.tokens.back())) {
    return result.tokens.back();
  }
  return nullptr;
}

std::size_t code_points(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

// A token as its own text (each id decoded alone) and that text's UTF-8 bytes.
std::string piece_of(const Tokenizer& tokenizer, std::int32_t token) {
  return to_valid_utf8(tokenizer.decode(std::vector<std::int32_t>{token}));
}

Json utf8_bytes(const std::string& piece) {
  Json bytes = Json::array();
  for (const char c : piece) bytes.push_back(static_cast<unsigned char>(c));
  return bytes;
}

// A choice's log-probs in OpenAI's shapes: completions' {tokens, token_logprobs, top_logprobs,
// text_offset} (each position's top entry is the token itself then the k most likely, as vLLM
// gives them), chat's {content: [{token, logprob, bytes, top_logprobs: the k most likely}]}.
// Text offsets count characters of the decoded text before the token.
Json logprobs_json(const Tokenizer& tokenizer, const GenerationResult& result, bool chat) {
  Json tokens = Json::array(), values = Json::array(), tops = Json::array(),
       offsets = Json::array(), content = Json::array();
  for (std::size_t i = 0; i < result.tokens.size() && i < result.token_logprobs.size(); ++i) {
    const std::string piece = piece_of(tokenizer, result.tokens[i]);
    const float logprob = result.token_logprobs[i];
    const std::vector<std::pair<std::int32_t, float>> no_alternatives;
    const auto& alternatives =
        i < result.top_logprobs.size() ? result.top_logprobs[i] : no_alternatives;
    if (chat) {
      Json top = Json::array();
      for (const auto& [id, value] : alternatives) {
        const std::string text = piece_of(tokenizer, id);
        top.push_back({{"token", text}, {"logprob", value}, {"bytes", utf8_bytes(text)}});
      }
      content.push_back({{"token", piece},
                         {"logprob", logprob},
                         {"bytes", utf8_bytes(piece)},
                         {"top_logprobs", std::move(top)}});
      continue;
    }
    const std::span<const std::int32_t> before(result.tokens.data(), i);
    offsets.push_back(code_points(to_valid_utf8(tokenizer.decode(before))));
    tokens.push_back(piece);
    values.push_back(logprob);
    Json top = Json{{piece, logprob}};
    for (const auto& [id, value] : alternatives) top[piece_of(tokenizer, id)] = value;
    tops.push_back(std::move(top));
  }
  if (chat) return {{"content", std::move(content)}};
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(values)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
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
  out.problem = batch ? read_batch(value, config, tokenizer, model, defaults, out)
                      : read_plain(value, config, tokenizer, model, out);
  if (out.problem.empty()) {
    out.problem = read_parameters(batch ? value["body"] : value, config, defaults, line.index, out);
  }
  if (out.problem.empty() && !out.text.stop.empty() && tokenizer == nullptr) {
    out.problem = "'stop' strings need a tokenizer (pass --tokenizer DIR)";
  }
  if (out.problem.empty() && (!out.text.stop.empty() || !out.text.stop_token_ids.empty())) {
    // Stop as soon as a stop token is generated or the decoded text holds a stop string. The
    // closure keeps the tokenizer's address: the caller keeps it alive while requests run.
    out.request.stop = [tokenizer, config, options = out.text](std::span<const std::int32_t> g) {
      if (!g.empty() && is_stop_token(options, g.back())) return true;
      if (options.stop.empty()) return false;
      const std::size_t start = stop_search_start(*tokenizer, config, g, options);
      if (start == std::string::npos) return false;
      const std::string text = decoded_text(*tokenizer, config, g, options.skip_special_tokens);
      return std::any_of(options.stop.begin(), options.stop.end(), [&](const std::string& s) {
        return text.find(s, start) != std::string::npos;
      });
    };
  }
  if (!out.problem.empty()) {
    out.prompts.clear();
    out.prompt_texts.clear();
  }
  out.request.prompt = out.prompts.empty() ? std::vector<std::int32_t>{} : out.prompts.front();
  return out;
}

std::vector<GenerationRequest> line_requests(const ParsedLine& parsed) {
  if (!parsed.problem.empty() || parsed.prompts.empty()) return {parsed.request};
  std::vector<GenerationRequest> requests;
  requests.reserve(parsed.prompts.size() * static_cast<std::size_t>(parsed.n));
  for (const std::vector<std::int32_t>& prompt : parsed.prompts) {
    for (int sample = 0; sample < parsed.n; ++sample) {
      GenerationRequest r = parsed.request;
      r.prompt = prompt;
      r.seed = sample_seed(parsed.request.seed, sample);
      requests.push_back(std::move(r));
    }
  }
  return requests;
}

std::string completion_text(const Tokenizer& tokenizer, const ModelConfig& config,
                            const std::vector<std::int32_t>& tokens, const TextOptions& options,
                            std::string* stop_found) {
  std::span<const std::int32_t> kept(tokens);
  // A stop token's text is not the completion's unless asked for (vLLM's rule).
  if (!kept.empty() && is_stop_token(options, kept.back()) && !options.include_stop_str_in_output) {
    kept = kept.first(kept.size() - 1);
  }
  std::string text = decoded_text(tokenizer, config, kept, options.skip_special_tokens);
  std::size_t cut = std::string::npos;
  const std::string* first = nullptr;
  const std::size_t start = stop_search_start(tokenizer, config, kept, options);
  for (const std::string& s : options.stop) {
    const std::size_t at = start == std::string::npos ? start : text.find(s, start);
    if (at < cut) {
      cut = at;
      first = &s;
    }
  }
  if (stop_found != nullptr) *stop_found = first == nullptr ? std::string() : *first;
  if (first != nullptr) {
    text.resize(options.include_stop_str_in_output ? cut + first->size() : cut);
  }
  return to_valid_utf8(text);
}

nlohmann::ordered_json result_record(const JsonlLine& line, const ParsedLine& parsed,
                                     const std::vector<GenerationResult>& results,
                                     const std::string& problem, const Tokenizer* tokenizer,
                                     const ModelConfig& config, const std::string& model,
                                     std::int64_t created) {
  // A line that is not JSON already names its file and line.
  const std::string where =
      line.error.empty() ? fmt::format("line {}: {}", line.line_number, problem) : problem;
  const bool has_text = tokenizer != nullptr && problem.empty();
  // Each choice's text, and the stop string that ended it.
  std::vector<std::string> texts(results.size());
  std::vector<std::string> found(results.size());
  if (has_text) {
    for (std::size_t i = 0; i < results.size(); ++i) {
      texts[i] = completion_text(*tokenizer, config, results[i].tokens, parsed.text, &found[i]);
    }
  }
  if (parsed.format == LineFormat::plain) {
    // The line's own "index" and "error" keys are not copied: they would hide which request
    // the record answers and whether it failed.
    Json record = {{"index", line.index}};
    std::vector<std::string_view> consumed = {"index", "error"};
    consumed.insert(consumed.end(), kPlainKeys.begin(), kPlainKeys.end());
    record.update(passthrough(line.value, consumed));
    if (!problem.empty() || results.empty()) {
      record["error"] = where;
      return record;
    }
    record["prompt_token_ids"] = parsed.request.prompt;
    record["token_ids"] = results[0].tokens;
    record["text"] = has_text ? Json(texts[0]) : Json(nullptr);
    record["finish_reason"] = finish_reason_name(results[0].finish);
    return record;
  }
  Json record = {{"id", fmt::format("{}{}", kBatchIdPrefix, line.index)},
                 {"custom_id", parsed.custom_id.empty() ? Json(nullptr) : Json(parsed.custom_id)}};
  if (!problem.empty()) {
    record["response"] = nullptr;
    record["error"] = {{"code", "invalid_request"}, {"message", where}};
    return record;
  }
  std::int64_t prompt_tokens = 0;
  for (const auto& prompt : parsed.prompts)
    prompt_tokens += static_cast<std::int64_t>(prompt.size());
  std::int64_t completion_tokens = 0;
  const bool chat = parsed.endpoint == Endpoint::chat;
  Json choices = Json::array();
  for (std::size_t i = 0; i < results.size(); ++i) {
    completion_tokens += static_cast<std::int64_t>(results[i].tokens.size());
    Json text = has_text ? Json(texts[i]) : Json(nullptr);
    if (has_text && parsed.text.echo) {
      const std::size_t p = i / static_cast<std::size_t>(parsed.n);
      const std::string prompt_text =
          !parsed.prompt_texts[p].empty()
              ? parsed.prompt_texts[p]
              : to_valid_utf8(decoded_text(*tokenizer, config, parsed.prompts[p],
                                           parsed.text.skip_special_tokens));
      text = prompt_text + texts[i];
    }
    Json choice = {{"index", i}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", text}};
    } else {
      choice["text"] = text;
    }
    choice["token_ids"] = results[i].tokens;
    choice["logprobs"] = parsed.request.logprobs && tokenizer != nullptr
                             ? logprobs_json(*tokenizer, results[i], chat)
                             : Json(nullptr);
    choice["finish_reason"] = finish_reason_name(results[i].finish);
    choice["stop_reason"] = stop_reason(results[i], parsed, found[i]);
    choices.push_back(std::move(choice));
  }
  Json body = {{"id", fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", line.index)},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"created", created},
               {"model", model},
               {"choices", std::move(choices)},
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
