// The tests (`value is name(args)`) of jinja2, with its semantics: defined, none, string,
// mapping, iterable, sameas, eq, in, ... A test offgen does not implement has no entry and the
// parser refuses templates that name one.
#pragma once

#include <string_view>

#include "engine/jinja/jinja_value.h"

namespace offgen::jinja {

using TestFunction = bool (*)(const Value& value, CallArgs& args);

// nullptr where offgen does not implement `name`.
TestFunction find_test(std::string_view name);

// Whether jinja2 has a test `name` (offgen may still not implement it).
bool jinja2_has_test(std::string_view name);

// Applies test `name` (select('odd') and the like name tests at render time): a RenderError
// where it is not implemented.
bool call_test(std::string_view name, const Value& value, CallArgs& args);

}  // namespace offgen::jinja
