// See jinja_args.h.
#include "engine/jinja/jinja_args.h"

#include <algorithm>
#include <string>

#include "engine/jinja/jinja_error.h"

namespace offgen::jinja {

std::vector<std::optional<Value>> bind_arguments(std::string_view function, const CallArgs& args,
                                                 std::initializer_list<std::string_view> params) {
  const std::vector<std::string_view> names(params);
  if (args.positional.size() > names.size()) {
    render_fail("{} takes at most {} argument(s), {} given", function, names.size(),
                args.positional.size());
  }
  std::vector<std::optional<Value>> bound(names.size());
  for (std::size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    const auto it = std::find(names.begin(), names.end(), key);
    if (it == names.end()) render_fail("{} got an unexpected keyword argument '{}'", function, key);
    auto& slot = bound[static_cast<std::size_t>(it - names.begin())];
    if (slot) render_fail("{} got multiple values for argument '{}'", function, key);
    slot = value;
  }
  return bound;
}

std::int64_t integer_argument(std::string_view function, std::string_view param,
                              const Value& value) {
  if (value.kind() == Value::Kind::kInt || value.kind() == Value::Kind::kBool) {
    return value.as_integral();
  }
  render_fail("{}: '{}' must be an integer, not '{}'", function, param, type_name(value));
}

const std::string& string_argument(std::string_view function, std::string_view param,
                                   const Value& value) {
  if (value.is_string()) return value.as_string();
  render_fail("{}: '{}' must be a string, not '{}'", function, param, type_name(value));
}

}  // namespace offgen::jinja
