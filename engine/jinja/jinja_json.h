// JSON in and out of the interpreter: the render context arrives as nlohmann JSON (converted the
// way Python's json.loads would build it), and the tojson filter writes what transformers'
// override writes, json.dumps(x, ensure_ascii, indent, separators, sort_keys).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "engine/jinja/jinja_value.h"

namespace offgen::jinja {

// What json.loads gives: objects become dicts in document order, integers ints (a RenderError
// past 64 bits), other numbers floats.
Value from_json(const nlohmann::ordered_json& json);

struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: one line
  // json.dumps' defaults: (", ", ": ") on one line, (",", ": ") with an indent.
  std::optional<std::string> item_separator;
  std::optional<std::string> key_separator;
  bool sort_keys = false;
};

// json.dumps(value, ...). Undefined, namespaces, generators and dict views are a RenderError, as
// the TypeError json.dumps raises for them.
std::string dump_json(const Value& value, const JsonOptions& options);

}  // namespace offgen::jinja
