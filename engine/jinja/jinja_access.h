// Attribute, item and slice access with the rules of jinja2's sandboxed environment:
//   x.name  tries the Python attribute (a str / dict / list method, a namespace attribute) and
//           then the item x['name'];
//   x[key]  tries the item and then, for a string key, the attribute;
// and a miss gives an Undefined that remembers what was missing. Methods that would mutate a list
// or dict are "unsafe" in the immutable sandbox: they come back as an Undefined whose use raises.
#pragma once

#include <optional>
#include <string_view>

#include "engine/jinja/jinja_value.h"

namespace offgen::jinja {

Value get_attribute(const Value& object, std::string_view name);
Value get_item(const Value& object, const Value& key);
// object[start:stop:step] of a str, list or tuple, a bound None where the template omits it.
// Unlike x[key], jinja2 compiles a slice to Python's own subscript, so a bad object or bound is an
// error (a RenderError), not an Undefined.
Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step);

// The bound method `name` of a str, dict, list or tuple, or nullopt where Python has none. A
// method offgen does not implement is a RenderError naming it.
std::optional<Value> find_method(const Value& object, std::string_view name);

}  // namespace offgen::jinja
