// Binding call arguments to a builtin's parameters as Python binds them: positional first, then
// keywords by name. Every filter, test, method and global function goes through this, so too many
// arguments or an unknown keyword is the same clear RenderError everywhere.
#pragma once

#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "engine/jinja/jinja_value.h"

namespace offgen::jinja {

// One entry per parameter of `params`, nullopt where the call does not give it. `function`
// names the builtin in errors ("the filter 'join'").
std::vector<std::optional<Value>> bind_arguments(std::string_view function, const CallArgs& args,
                                                 std::initializer_list<std::string_view> params);

// The integer an argument must be (bool counts, as in Python): a RenderError otherwise.
std::int64_t integer_argument(std::string_view function, std::string_view param,
                              const Value& value);

// The string an argument must be: a RenderError otherwise.
const std::string& string_argument(std::string_view function, std::string_view param,
                                   const Value& value);

}  // namespace offgen::jinja
