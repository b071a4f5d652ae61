#include "engine/cli/request_keys.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <numeric>

namespace offgen::cli {
namespace {

using Json = nlohmann::ordered_json;

// A key vLLM accepts that offgen does not implement: refused unless its value is one of
// `neutral` (the values that ask for nothing: the default, or an empty list).
struct RefusedKey {
  std::string_view name;
  std::vector<Json> neutral;
  std::string_view why;
};

constexpr std::string_view kNotYet = "offgen does not implement it";

// Read by batch_format.cpp for both endpoints: the request parameters, and the keys only batch
// bodies have.
const std::vector<std::string_view> kSharedKeys = [] {
  std::vector<std::string_view> keys = {
      "model", "n", "user", "stream", "add_special_tokens", "truncate_prompt_tokens"};
  const auto& parameters = request_parameter_keys();
  keys.insert(keys.end(), parameters.begin(), parameters.end());
  return keys;
}();

const std::vector<std::string_view> kCompletionKeys = {"prompt", "echo", "logprobs"};

const std::vector<std::string_view> kChatKeys = {"messages",
                                                 "max_completion_tokens",
                                                 "add_generation_prompt",
                                                 "continue_final_message",
                                                 "chat_template",
                                                 "chat_template_kwargs",
                                                 "logprobs",
                                                 "top_logprobs"};

const std::vector<RefusedKey>& shared_refused() {
  static const std::vector<RefusedKey> keys = {
      {"best_of", {nullptr, 1}, "offgen returns n samples, not the best of several"},
      {"stream_options", {nullptr}, "a batch file is answered in whole records"},
      {"response_format", {nullptr, Json{{"type", "text"}}}, kNotYet},
      {"guided_json", {nullptr}, kNotYet},
      {"guided_regex", {nullptr}, kNotYet},
      {"guided_choice", {nullptr}, kNotYet},
      {"guided_grammar", {nullptr}, kNotYet},
      {"guided_decoding_backend", {nullptr}, kNotYet},
      {"guided_whitespace_pattern", {nullptr}, kNotYet},
      {"structured_outputs", {nullptr}, kNotYet},
      {"use_beam_search", {nullptr, false}, kNotYet},
      {"length_penalty", {nullptr, 1}, kNotYet},
      {"prompt_logprobs", {nullptr}, kNotYet},
      {"allowed_token_ids", {nullptr}, kNotYet},
      {"bad_words", {nullptr, Json::array()}, kNotYet},
      {"spaces_between_special_tokens", {nullptr, true}, kNotYet},
      {"priority", {nullptr, 0}, "offgen runs a file's requests in its own order"},
      {"logits_processors", {nullptr}, kNotYet},
      {"return_tokens_as_token_ids", {nullptr, false}, kNotYet},
      {"prompt_embeds", {nullptr}, kNotYet},
      {"request_id", {nullptr}, "offgen names each response after its line"},
  };
  return keys;
}

const std::vector<RefusedKey>& completion_refused() {
  static const std::vector<RefusedKey> keys = {
      {"suffix", {nullptr, ""}, kNotYet},
  };
  return keys;
}

const std::vector<RefusedKey>& chat_refused() {
  static const std::vector<RefusedKey> keys = {
      {"tools", {nullptr, Json::array()}, kNotYet},
      {"tool_choice", {nullptr, "none", "auto"}, kNotYet},
      {"parallel_tool_calls", {nullptr, true, false}, kNotYet},
      {"functions", {nullptr}, kNotYet},
      {"function_call", {nullptr}, kNotYet},
      {"echo", {nullptr, false}, kNotYet},
      {"documents", {nullptr}, kNotYet},
      {"mm_processor_kwargs", {nullptr}, kNotYet},
      {"reasoning_effort", {nullptr}, kNotYet},
  };
  return keys;
}

const std::vector<std::string_view> kLineKeys = {"custom_id", "method", "url", "body"};

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string unknown_key(std::string_view where, std::string_view key,
                        const std::vector<std::string_view>& known) {
  const std::string nearest = nearest_key(key, known);
  return fmt::format(
      "unknown key '{}' in {}{}", key, where,
      nearest.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", nearest));
}

KeyCheck check_keys(const Json& object, std::string_view where,
                    const std::vector<std::string_view>& supported,
                    const std::vector<const std::vector<RefusedKey>*>& refused, bool allow_unknown,
                    const std::vector<std::string_view>* other_endpoint_keys = nullptr,
                    std::string_view other_endpoint_hint = {}) {
  KeyCheck check;
  std::vector<std::string_view> known = supported;
  for (const auto* list : refused) {
    for (const RefusedKey& key : *list) known.push_back(key.name);
  }
  for (const auto& [key, value] : object.items()) {
    if (std::find(supported.begin(), supported.end(), key) != supported.end()) continue;
    const RefusedKey* refusal = nullptr;
    const std::string& name = key;  // (clang's C++20 cannot capture a structured binding)
    for (const auto* list : refused) {
      const auto it = std::find_if(list->begin(), list->end(),
                                   [&](const RefusedKey& r) { return r.name == name; });
      if (it != list->end()) refusal = &*it;
    }
    if (refusal != nullptr) {
      if (std::find(refusal->neutral.begin(), refusal->neutral.end(), value) !=
          refusal->neutral.end()) {
        continue;
      }
      if (check.problem.empty()) {
        check.problem = fmt::format("'{}' is not supported ({}): remove it, or set it to {}", key,
                                    refusal->why, refusal->neutral.back().dump());
      }
      continue;
    }
    if (other_endpoint_keys != nullptr &&
        std::find(other_endpoint_keys->begin(), other_endpoint_keys->end(), key) !=
            other_endpoint_keys->end()) {
      // A completions key in a chat body (or the reverse): say which one this endpoint reads.
      if (check.problem.empty()) check.problem = fmt::format("'{}' {}", key, other_endpoint_hint);
      continue;
    }
    std::string message = unknown_key(where, key, known);
    if (allow_unknown) {
      check.warnings.push_back(message + ", ignored (--allow-unknown-fields)");
    } else if (check.problem.empty()) {
      check.problem = message + " (--allow-unknown-fields lets it through with a warning)";
    }
  }
  return check;
}

}  // namespace

const std::vector<std::string_view>& request_parameter_keys() {
  static const std::vector<std::string_view> keys = {"max_tokens",
                                                     "temperature",
                                                     "top_p",
                                                     "top_k",
                                                     "seed",
                                                     "stop",
                                                     "stop_token_ids",
                                                     "ignore_eos",
                                                     "skip_special_tokens",
                                                     "include_stop_str_in_output",
                                                     "min_p",
                                                     "min_tokens",
                                                     "presence_penalty",
                                                     "frequency_penalty",
                                                     "repetition_penalty",
                                                     "logit_bias"};
  return keys;
}

EndpointOf endpoint_of(const Json& url) {
  if (url == "/v1/completions") return {Endpoint::completions, {}};
  if (url == "/v1/chat/completions") return {Endpoint::chat, {}};
  return {Endpoint::completions,
          fmt::format("url {} is not supported: offgen serves /v1/completions and "
                      "/v1/chat/completions",
                      url.dump())};
}

KeyCheck check_body_keys(const Json& body, Endpoint endpoint, bool allow_unknown) {
  std::vector<std::string_view> supported = kSharedKeys;
  const auto& own = endpoint == Endpoint::chat ? kChatKeys : kCompletionKeys;
  supported.insert(supported.end(), own.begin(), own.end());
  const bool chat = endpoint == Endpoint::chat;
  return check_keys(body, "'body'", supported,
                    {&shared_refused(), chat ? &chat_refused() : &completion_refused()},
                    allow_unknown, chat ? &kCompletionKeys : &kChatKeys,
                    chat ? "is read in /v1/completions bodies: a /v1/chat/completions body gives "
                           "'messages'"
                         : "is read in /v1/chat/completions bodies: give the line \"url\": "
                           "\"/v1/chat/completions\", or a 'prompt' for /v1/completions");
}

std::vector<std::string_view> body_keys(Endpoint endpoint) {
  std::vector<std::string_view> keys = kSharedKeys;
  const auto& own = endpoint == Endpoint::chat ? kChatKeys : kCompletionKeys;
  keys.insert(keys.end(), own.begin(), own.end());
  for (const auto* list :
       {&shared_refused(), endpoint == Endpoint::chat ? &chat_refused() : &completion_refused()}) {
    for (const RefusedKey& key : *list) keys.push_back(key.name);
  }
  return keys;
}

KeyCheck check_line_keys(const Json& line, bool allow_unknown) {
  return check_keys(line, "the request line", kLineKeys, {}, allow_unknown);
}

std::string nearest_key(std::string_view key, const std::vector<std::string_view>& known) {
  const std::size_t most = std::max<std::size_t>(1, key.size() / 3);
  std::string best;
  std::size_t best_distance = most + 1;
  for (const std::string_view candidate : known) {
    const std::size_t d = edit_distance(key, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

}  // namespace offgen::cli
