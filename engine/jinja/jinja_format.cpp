// See jinja_format.h.
#include "engine/jinja/jinja_format.h"

#include <cctype>
#include <cmath>

#include "engine/jinja/jinja_error.h"

namespace offgen::jinja {

namespace {

// %d of a number: Python truncates floats toward zero.
std::string format_integer(const Value& v) {
  if (v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool) {
    return std::to_string(v.as_integral());
  }
  if (v.kind() == Value::Kind::kFloat) {
    const double t = std::trunc(v.as_float());
    if (!std::isfinite(t) || std::fabs(t) >= 9.2e18) {
      render_fail("%d of {} is not supported", to_str(v));
    }
    return std::to_string(static_cast<std::int64_t>(t));
  }
  render_fail("%d format: a real number is required, not {}", type_name(v));
}

}  // namespace

std::string percent_format(std::string_view format, const Value& args) {
  std::vector<Value> values;
  const bool is_tuple =
      args.kind() == Value::Kind::kSequence && args.as_sequence().kind == SequenceKind::kTuple;
  if (is_tuple) {
    values = args.as_sequence().items;
  } else {
    values.push_back(args);
  }
  std::string out;
  std::size_t next = 0;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    if (++i >= format.size()) render_fail("incomplete format");
    const char conversion = format[i];
    if (conversion == '%') {
      out.push_back('%');
      continue;
    }
    if (conversion != 's' && conversion != 'r' && conversion != 'd' && conversion != 'i') {
      render_fail("the format '%{}' is not supported (only %s, %r, %d, %i and %%)", conversion);
    }
    if (next >= values.size()) render_fail("not enough arguments for format string");
    const Value& v = values[next++];
    if (v.is_undefined() && conversion != 's') render_fail("%{} of an undefined value", conversion);
    out += conversion == 's' ? to_str(v) : conversion == 'r' ? repr(v) : format_integer(v);
  }
  // An argument Python sees as a mapping (it has __getitem__: a dict, a list, a range) may go
  // unused, for %(name)s formats.
  const bool mapping = !is_tuple && (args.kind() == Value::Kind::kDict ||
                                     (args.kind() == Value::Kind::kSequence &&
                                      (args.as_sequence().kind == SequenceKind::kList ||
                                       args.as_sequence().kind == SequenceKind::kRange)));
  if (next < values.size() && !mapping) {
    render_fail("not all arguments converted during string formatting");
  }
  return out;
}

std::string brace_format(std::string_view format, const CallArgs& args) {
  std::string out;
  std::size_t auto_index = 0;
  bool used_auto = false;
  bool used_manual = false;
  for (std::size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      render_fail("Single '}}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const std::size_t close = format.find('}', i);
    if (close == std::string_view::npos) render_fail("Single '{{' encountered in format string");
    std::string_view field = format.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 's';
    if (const std::size_t bang = field.find('!'); bang != std::string_view::npos) {
      if (bang + 2 != field.size() || (field[bang + 1] != 's' && field[bang + 1] != 'r')) {
        render_fail("the format field '{{{}}}' is not supported", field);
      }
      conversion = field[bang + 1];
      field = field.substr(0, bang);
    }
    if (field.find_first_of(":.[{") != std::string_view::npos) {
      render_fail(
          "the format field '{{{}}}' is not supported (no format specs, attributes or indices)",
          field);
    }
    const Value* value = nullptr;
    if (field.empty()) {
      if (used_manual) {
        render_fail("cannot switch from manual field specification to automatic field numbering");
      }
      used_auto = true;
      if (auto_index >= args.positional.size()) {
        render_fail("Replacement index {} out of range for positional args tuple", auto_index);
      }
      value = &args.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(),
                           [](char d) { return std::isdigit(static_cast<unsigned char>(d)); })) {
      if (used_auto) {
        render_fail("cannot switch from automatic field numbering to manual field specification");
      }
      used_manual = true;
      const std::size_t index = std::stoul(std::string(field));
      if (index >= args.positional.size()) {
        render_fail("Replacement index {} out of range for positional args tuple", index);
      }
      value = &args.positional[index];
    } else {
      for (const auto& [key, v] : args.keyword) {
        if (key == field) value = &v;
      }
      if (value == nullptr) render_fail("KeyError: '{}'", field);
    }
    out += conversion == 's' ? to_str(*value) : repr(*value);
  }
  return out;
}

}  // namespace offgen::jinja
