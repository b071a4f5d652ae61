// The filters (`value | name(args)`) of jinja2 that chat templates use, with jinja2's semantics
// and transformers' tojson. A filter jinja2 has but offgen does not (wordwrap, urlize, groupby,
// ...) has no entry: the parser refuses templates that name one.
#pragma once

#include <string_view>

#include "engine/jinja/jinja_value.h"

namespace offgen::jinja {

using FilterFunction = Value (*)(const Value& input, CallArgs& args);

// nullptr where offgen does not implement `name`.
FilterFunction find_filter(std::string_view name);

// Whether jinja2 (with transformers' tojson) has a filter `name`; offgen may still not implement
// it (find_filter is null).
bool jinja2_has_filter(std::string_view name);

// Applies filter `name` (map('upper') and the like name filters at render time): a RenderError
// where it is not implemented.
Value call_filter(std::string_view name, const Value& input, CallArgs& args);

}  // namespace offgen::jinja
