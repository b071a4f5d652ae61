// See jinja_filters.h. The string filters take soft_str of their input (str(), with Undefined as
// ""), as jinja2's do; tojson is transformers' json.dumps override, not jinja2's HTML-safe one.
#include "engine/jinja/jinja_filters.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "engine/jinja/jinja_args.h"
#include "engine/jinja/jinja_case.h"
#include "engine/jinja/jinja_error.h"
#include "engine/jinja/jinja_format.h"
#include "engine/jinja/jinja_json.h"
#include "engine/jinja/jinja_number.h"
#include "engine/jinja/jinja_operators.h"
#include "engine/jinja/jinja_sequence_filters.h"
#include "engine/jinja/jinja_text.h"

namespace offgen::jinja {

namespace {

using Kind = Value::Kind;

// The result of a string filter on `input`: Markup stays Markup (its methods return Markup).
Value same_flavour(const Value& input, std::string s) {
  return input.is_markup() ? Value::markup(std::move(s)) : Value::string(std::move(s));
}

template <std::string (*kMap)(std::string_view)>
Value case_filter(const Value& input, CallArgs& args) {
  bind_arguments("a case filter", args, {});
  return same_flavour(input, kMap(to_str(input)));
}

bool is_title_separator(char32_t c) {
  return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || text::is_space(c);
}

// jinja2's title is not str.title: words start after - ( { [ < or whitespace, and the first
// character of each word is upper-cased (not title-cased), the rest lower-cased.
Value title(const Value& input, CallArgs& args) {
  bind_arguments("the filter 'title'", args, {});
  const std::string s = to_str(input);
  std::string out;
  bool word_start = true;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const std::size_t begin = pos;
    const char32_t c = text::next_code_point(s, pos);
    const std::string_view one = std::string_view(s).substr(begin, pos - begin);
    const bool separator = is_title_separator(c);
    out += (word_start || separator) ? text::upper(one) : text::lower(one);
    word_start = separator;
  }
  return same_flavour(input, std::move(out));
}

Value trim(const Value& input, CallArgs& args) {
  const auto a = bind_arguments("the filter 'trim'", args, {"chars"});
  std::optional<std::string> chars;
  if (a[0] && !a[0]->is_none()) chars = string_argument("the filter 'trim'", "chars", *a[0]);
  return same_flavour(input, text::strip(to_str(input), chars, text::StripSide::kBoth));
}

Value replace(const Value& input, CallArgs& args) {
  const auto a = bind_arguments("the filter 'replace'", args, {"old", "new", "count"});
  if (!a[0] || !a[1]) render_fail("the filter 'replace' needs the old and new strings");
  const std::int64_t count =
      a[2] && !a[2]->is_none() ? integer_argument("the filter 'replace'", "count", *a[2]) : -1;
  return Value::string(text::replace(to_str(input), to_str(*a[0]), to_str(*a[1]), count));
}

Value indent(const Value& input, CallArgs& args) {
  const auto a = bind_arguments("the filter 'indent'", args, {"width", "first", "blank"});
  if (input.is_undefined()) fail_undefined(input);
  if (!input.is_string()) {
    render_fail("the filter 'indent' needs a string, not '{}'", type_name(input));
  }
  if (input.is_markup()) render_fail("the filter 'indent' of a Markup string is not supported");
  std::string indention = "    ";
  if (a[0]) {
    indention = a[0]->is_string()
                    ? a[0]->as_string()
                    : std::string(static_cast<std::size_t>(std::max<std::int64_t>(
                                      0, integer_argument("the filter 'indent'", "width", *a[0]))),
                                  ' ');
  }
  const bool first = a[1] && truthy(*a[1]);
  const bool blank = a[2] && truthy(*a[2]);
  const std::vector<std::string> lines = text::splitlines(input.as_string() + "\n", false);
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += "\n";
      if (blank || !lines[i].empty()) out += indention;
    }
    out += lines[i];
  }
  if (first) out = indention + out;
  return Value::string(std::move(out));
}

Value escape(const Value& input, CallArgs& args) {
  bind_arguments("the filter 'escape'", args, {});
  if (input.is_markup()) return input;  // already escaped
  std::string out;
  for (const char c : to_str(input)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return Value::markup(std::move(out));
}

// soft_str: a string (Markup included) as it is, anything else str(x).
Value string(const Value& input, CallArgs& args) {
  bind_arguments("the filter 'string'", args, {});
  return input.is_string() ? input : Value::string(to_str(input));
}

Value safe(const Value& input, CallArgs& args) {
  bind_arguments("the filter 'safe'", args, {});
  return Value::markup(to_str(input));
}

Value format(const Value& input, CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    render_fail("can't handle positional and keyword arguments at the same time");
  }
  if (!args.keyword.empty()) {
    render_fail("the filter 'format' with keyword arguments is not supported");
  }
  if (input.is_markup()) render_fail("the filter 'format' of a Markup string is not supported");
  return Value::string(percent_format(to_str(input), Value::tuple(args.positional)));
}

Value tojson(const Value& input, CallArgs& args) {
  const auto a = bind_arguments("the filter 'tojson'", args,
                                {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions options;
  options.ensure_ascii = a[0] && truthy(*a[0]);
  if (a[1] && !a[1]->is_none()) {
    if (a[1]->is_string()) {
      options.indent = a[1]->as_string();
    } else {
      const std::int64_t n = integer_argument("the filter 'tojson'", "indent", *a[1]);
      options.indent = std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, n)), ' ');
    }
  }
  if (a[2] && !a[2]->is_none()) {
    const std::vector<Value> parts = iterate(*a[2]);
    if (parts.size() != 2) render_fail("tojson: separators must be a pair of strings");
    options.item_separator = string_argument("the filter 'tojson'", "separators", parts[0]);
    options.key_separator = string_argument("the filter 'tojson'", "separators", parts[1]);
  }
  options.sort_keys = a[3] && truthy(*a[3]);
  return Value::string(dump_json(input, options));
}

Value default_value(const Value& input, CallArgs& args) {
  const auto a = bind_arguments("the filter 'default'", args, {"default_value", "boolean"});
  const bool boolean = a[1] && truthy(*a[1]);
  if (input.is_undefined() || (boolean && !truthy(input))) return a[0] ? *a[0] : Value::string("");
  return input;
}

// int(float) for do_int's fallback: nullopt where Python raises (inf, nan, past 64 bits).
std::optional<std::int64_t> truncate(double d) {
  if (!std::isfinite(d)) return std::nullopt;
  const double t = std::trunc(d);
  if (std::fabs(t) >= 9.2e18) render_fail("int() of {} does not fit 64 bits", float_repr(d));
  return static_cast<std::int64_t>(t);
}

Value to_int(const Value& input, CallArgs& args) {
  const auto a = bind_arguments("the filter 'int'", args, {"default", "base"});
  const Value fallback = a[0] ? *a[0] : Value::integer(0);
  const std::int64_t base = a[1] ? integer_argument("the filter 'int'", "base", *a[1]) : 10;
  switch (input.kind()) {
    case Kind::kUndefined:
      fail_undefined(input);
    case Kind::kBool:
    case Kind::kInt:
      return Value::integer(input.as_integral());
    case Kind::kFloat: {
      const auto i = truncate(input.as_float());
      return i ? Value::integer(*i) : fallback;
    }
    case Kind::kString: {
      if (auto i = parse_int(input.as_string(), static_cast<int>(base))) return Value::integer(*i);
      // jinja2's quirk: "42.23" | int is 42, through float.
      if (auto d = parse_float(input.as_string())) {
        const auto i = truncate(*d);
        if (i) return Value::integer(*i);
      }
      return fallback;
    }
    case Kind::kNone:
    case Kind::kSequence:
    case Kind::kDict:
    case Kind::kObject:
    case Kind::kIterator:
    case Kind::kFunction:
      return fallback;
  }
  return fallback;
}

Value to_float(const Value& input, CallArgs& args) {
  const auto a = bind_arguments("the filter 'float'", args, {"default"});
  const Value fallback = a[0] ? *a[0] : Value::floating(0.0);
  switch (input.kind()) {
    case Kind::kUndefined:
      fail_undefined(input);
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
      return Value::floating(input.as_double());
    case Kind::kString: {
      const auto d = parse_float(input.as_string());
      return d ? Value::floating(*d) : fallback;
    }
    case Kind::kNone:
    case Kind::kSequence:
    case Kind::kDict:
    case Kind::kObject:
    case Kind::kIterator:
    case Kind::kFunction:
      return fallback;
  }
  return fallback;
}

Value absolute(const Value& input, CallArgs& args) {
  bind_arguments("the filter 'abs'", args, {});
  if (input.kind() == Kind::kInt || input.kind() == Kind::kBool) {
    const std::int64_t i = input.as_integral();
    return Value::integer(i < 0 ? checked_sub(0, i) : i);
  }
  if (input.kind() == Kind::kFloat) return Value::floating(std::fabs(input.as_float()));
  if (input.is_undefined()) fail_undefined(input);
  render_fail("bad operand type for abs(): '{}'", type_name(input));
}

Value round(const Value& input, CallArgs& args) {
  const auto a = bind_arguments("the filter 'round'", args, {"precision", "method"});
  const std::int64_t precision =
      a[0] ? integer_argument("the filter 'round'", "precision", *a[0]) : 0;
  const std::string method =
      a[1] ? string_argument("the filter 'round'", "method", *a[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    render_fail("method must be common, ceil or floor");
  }
  if (input.is_undefined()) fail_undefined(input);
  if (!input.is_number()) render_fail("type {} doesn't define __round__ method", type_name(input));
  if (method == "common") {
    // round() of an int is the int itself (for precision >= 0).
    if (input.kind() != Kind::kFloat) {
      if (precision < 0) render_fail("round() to a negative number of digits is not supported");
      return Value::integer(input.as_integral());
    }
    return Value::floating(round_float(input.as_float(), precision));
  }
  if (precision < 0 || precision > 22) render_fail("round() with that precision is not supported");
  const double scale = std::pow(10.0, static_cast<double>(precision));  // exact up to 10^22
  const double scaled = input.as_double() * scale;
  const double rounded = method == "ceil" ? std::ceil(scaled) : std::floor(scaled);
  return Value::floating(rounded / scale);
}

struct Entry {
  std::string_view name;
  FilterFunction filter;
};

constexpr std::array<Entry, 38> kFilters = {{
    {"abs", absolute},
    {"capitalize", case_filter<text::capitalize>},
    {"count", filters::length},
    {"d", default_value},
    {"default", default_value},
    {"dictsort", filters::dictsort},
    {"e", escape},
    {"escape", escape},
    {"first", filters::first},
    {"float", to_float},
    {"format", format},
    {"indent", indent},
    {"int", to_int},
    {"items", filters::items},
    {"join", filters::join},
    {"last", filters::last},
    {"length", filters::length},
    {"list", filters::list},
    {"lower", case_filter<text::lower>},
    {"map", filters::map},
    {"max", filters::max},
    {"min", filters::min},
    {"reject", filters::reject},
    {"rejectattr", filters::rejectattr},
    {"replace", replace},
    {"reverse", filters::reverse},
    {"round", round},
    {"safe", safe},
    {"select", filters::select},
    {"selectattr", filters::selectattr},
    {"sort", filters::sort},
    {"string", string},
    {"sum", filters::sum},
    {"title", title},
    {"tojson", tojson},
    {"trim", trim},
    {"unique", filters::unique},
    {"upper", case_filter<text::upper>},
}};

}  // namespace

FilterFunction find_filter(std::string_view name) {
  for (const Entry& entry : kFilters) {
    if (entry.name == name) return entry.filter;
  }
  return nullptr;
}

bool jinja2_has_filter(std::string_view name) {
  // jinja2's builtins that offgen does not implement.
  static constexpr std::string_view kOthers[] = {
      "attr",   "batch",     "center",   "filesizeformat", "forceescape", "groupby",
      "pprint", "random",    "slice",    "striptags",      "truncate",    "urlencode",
      "urlize", "wordcount", "wordwrap", "xmlattr"};
  return find_filter(name) != nullptr ||
         std::find(std::begin(kOthers), std::end(kOthers), name) != std::end(kOthers);
}

Value call_filter(std::string_view name, const Value& input, CallArgs& args) {
  const FilterFunction filter = find_filter(name);
  if (filter == nullptr) render_fail("the filter '{}' is not supported", name);
  return filter(input, args);
}

}  // namespace offgen::jinja
