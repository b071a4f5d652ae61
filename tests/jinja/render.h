// Helpers for the Jinja tests: render a template given inline, or get the error it raises.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "engine/jinja/chat_template.h"
#include "tests/support/test_support.h"

namespace offgen::jinja::test {

// `context` is JSON text ("" for no variables).
inline std::string render(std::string_view source, std::string_view context = "") {
  const auto variables =
      context.empty() ? nlohmann::ordered_json::object() : nlohmann::ordered_json::parse(context);
  return ChatTemplate(std::string(source), "test").render(variables);
}

// The message of the offgen::Error that loading or rendering throws ("" when none).
inline std::string error_of(std::string_view source, std::string_view context = "") {
  return offgen::test::error_of([&] { render(source, context); });
}

// One inline case: a template, its context (JSON text) and what jinja2 renders.
struct Case {
  const char* source;
  const char* context;
  const char* expected;
};

}  // namespace offgen::jinja::test
