// See chat_template.h.
#include "engine/jinja/chat_template.h"

#include "engine/core/error.h"
#include "engine/jinja/jinja_ast.h"
#include "engine/jinja/jinja_error.h"
#include "engine/jinja/jinja_eval.h"
#include "engine/jinja/jinja_json.h"
#include "engine/jinja/jinja_parser.h"
#include "engine/jinja/jinja_text.h"

namespace offgen::jinja {

struct ParsedTemplate {
  Body body;
};

ChatTemplate::ChatTemplate(std::string source, std::string name) : name_(std::move(name)) {
  if (!text::valid_utf8(source)) fail("chat template {}: the template is not valid UTF-8", name_);
  parsed_ = std::make_unique<const ParsedTemplate>(ParsedTemplate{parse_template(source, name_)});
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  return render(context, std::chrono::system_clock::now());
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context,
                                 std::chrono::system_clock::time_point now) const {
  if (!context.is_object()) {
    fail("chat template {}: the render context must be a JSON object", name_);
  }
  Value variables;
  try {
    variables = from_json(context);
  } catch (const RenderError& e) {
    fail("chat template {}: {}", name_, e.what());
  }
  try {
    return Renderer(name_, now).render(parsed_->body, variables);
  } catch (const RenderError& e) {
    // Every statement locates its errors; this is only a safety net.
    fail("chat template {}: {}", name_, e.what());
  }
}

}  // namespace offgen::jinja
