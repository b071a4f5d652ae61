// Failures while rendering a chat template. The helpers (values, filters, methods) do not know
// where in the template they run, so they throw RenderError with the bare reason; the evaluator
// catches it at the innermost node and rethrows an offgen::Error that names the template and the
// line. raise_exception() in a template throws TemplateRaised, whose message is the template's own.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace offgen::jinja {

class RenderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// raise_exception(message) called by the template.
class TemplateRaised : public RenderError {
 public:
  using RenderError::RenderError;
};

template <typename... Args>
[[noreturn]] void render_fail(fmt::format_string<Args...> format, Args&&... args) {
  throw RenderError(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace offgen::jinja
