// The keys an OpenAI Batch API line and its body may hold, per endpoint, and what offgen does with
// each: a key offgen implements is read; a key vLLM's OpenAI server accepts that offgen does not
// implement is refused by name unless its value is the one that changes nothing (null, or e.g.
// presence_penalty 0); any other key is unknown, an error that suggests the nearest known key
// ("max_token" -> "max_tokens") or, with --allow-unknown-fields, a warning. Nothing a user writes
// is accepted and then ignored.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace offgen::cli {

enum class Endpoint { completions, chat };

// The endpoint a batch line's "url" names, or the problem with it.
struct EndpointOf {
  Endpoint endpoint = Endpoint::completions;
  std::string problem;
};
EndpointOf endpoint_of(const nlohmann::ordered_json& url);

// What checking a body's keys found: the first refused or unknown key (problem), and the unknown
// keys let through by --allow-unknown-fields (warnings, one sentence each).
struct KeyCheck {
  std::string problem;
  std::vector<std::string> warnings;
};

// Checks every key of `body` (an object) against the endpoint's table.
KeyCheck check_body_keys(const nlohmann::ordered_json& body, Endpoint endpoint, bool allow_unknown);

// The same for the line around the body: custom_id, method, url and body.
KeyCheck check_line_keys(const nlohmann::ordered_json& line, bool allow_unknown);

// The per-request parameters both line formats read: plain lines and batch bodies of either
// endpoint (sampling, stopping, penalties, bias).
const std::vector<std::string_view>& request_parameter_keys();

// Every key a body of `endpoint` may hold, read or refused (plain lines, which copy unknown keys
// to their output, refuse these instead when they do not read them).
std::vector<std::string_view> body_keys(Endpoint endpoint);

// The known key nearest to `key` in spelling (edit distance at most a third of its length, at
// least 1), or "" when none is that close.
std::string nearest_key(std::string_view key, const std::vector<std::string_view>& known);

}  // namespace offgen::cli
