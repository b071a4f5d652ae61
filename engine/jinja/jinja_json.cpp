// See jinja_json.h. The writer follows CPython's json.encoder: floats as float.__repr__ (with
// Infinity / NaN), non-string keys converted to strings, and an indent that puts every item of a
// non-empty container on its own line.
#include "engine/jinja/jinja_json.h"

#include <algorithm>
#include <cmath>

#include "engine/jinja/jinja_error.h"
#include "engine/jinja/jinja_number.h"
#include "engine/jinja/jinja_text.h"

namespace offgen::jinja {

namespace {

void write_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  std::size_t pos = 0;
  while (pos < s.size()) {
    const std::size_t begin = pos;
    const char32_t c = text::next_code_point(s, pos);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else if (ensure_ascii && c > 0x7F) {
      if (c > 0xFFFF) {
        const char32_t v = c - 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", static_cast<unsigned>(0xD800 | (v >> 10)),
                           static_cast<unsigned>(0xDC00 | (v & 0x3FF)));
      } else {
        out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
      }
    } else {
      out += s.substr(begin, pos - begin);
    }
  }
  out.push_back('"');
}

std::string float_json(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  return float_repr(x);
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonOptions& options) : options_(options) {
    item_separator_ = options.item_separator.value_or(options.indent ? "," : ", ");
    key_separator_ = options.key_separator.value_or(": ");
  }

  void write(const Value& value, int level) {
    const NestingGuard guard;
    switch (value.kind()) {
      case Value::Kind::kNone:
        out_ += "null";
        return;
      case Value::Kind::kBool:
        out_ += value.as_bool() ? "true" : "false";
        return;
      case Value::Kind::kInt:
        out_ += std::to_string(value.as_int());
        return;
      case Value::Kind::kFloat:
        out_ += float_json(value.as_float());
        return;
      case Value::Kind::kString:
        write_string(out_, value.as_string(), options_.ensure_ascii);
        return;
      case Value::Kind::kSequence: {
        const Sequence& s = value.as_sequence();
        if (s.kind != SequenceKind::kList && s.kind != SequenceKind::kTuple) break;
        write_array(s.items, level);
        return;
      }
      case Value::Kind::kDict:
        write_object(value.as_dict(), level);
        return;
      case Value::Kind::kUndefined:
      case Value::Kind::kObject:
      case Value::Kind::kIterator:
      case Value::Kind::kFunction:
        break;
    }
    render_fail("Object of type {} is not JSON serializable", type_name(value));
  }

  std::string take() { return std::move(out_); }

 private:
  void newline(int level) {
    if (!options_.indent) return;
    out_.push_back('\n');
    for (int i = 0; i < level; ++i) out_ += *options_.indent;
  }

  void write_array(const std::vector<Value>& items, int level) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_.push_back('[');
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out_ += item_separator_;
      newline(level + 1);
      write(items[i], level + 1);
    }
    newline(level);
    out_.push_back(']');
  }

  void write_object(const Dict& dict, int level) {
    if (dict.entries.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& entry : dict.entries) entries.push_back(&entry);
    if (options_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return less(a->first, b->first); });
    }
    out_.push_back('{');
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out_ += item_separator_;
      newline(level + 1);
      write_string(out_, key_string(entries[i]->first), options_.ensure_ascii);
      out_ += key_separator_;
      write(entries[i]->second, level + 1);
    }
    newline(level);
    out_.push_back('}');
  }

  static std::string key_string(const Value& key) {
    switch (key.kind()) {
      case Value::Kind::kString:
        return key.as_string();
      case Value::Kind::kBool:
        return key.as_bool() ? "true" : "false";
      case Value::Kind::kNone:
        return "null";
      case Value::Kind::kInt:
        return std::to_string(key.as_int());
      case Value::Kind::kFloat:
        return float_json(key.as_float());
      case Value::Kind::kUndefined:
      case Value::Kind::kSequence:
      case Value::Kind::kDict:
      case Value::Kind::kObject:
      case Value::Kind::kIterator:
      case Value::Kind::kFunction:
        break;
    }
    render_fail("keys must be str, int, float, bool or None, not {}", type_name(key));
  }

  const JsonOptions& options_;
  std::string item_separator_;
  std::string key_separator_;
  std::string out_;
};

}  // namespace

Value from_json(const nlohmann::ordered_json& json) {
  const NestingGuard guard;
  using Type = nlohmann::ordered_json::value_t;
  switch (json.type()) {
    case Type::null:
      return Value::none();
    case Type::boolean:
      return Value::boolean(json.get<bool>());
    case Type::number_integer:
      return Value::integer(json.get<std::int64_t>());
    case Type::number_unsigned: {
      const auto u = json.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX)) {
        render_fail("the integer {} in the context does not fit 64 bits", u);
      }
      return Value::integer(static_cast<std::int64_t>(u));
    }
    case Type::number_float:
      return Value::floating(json.get<double>());
    case Type::string: {
      auto s = json.get<std::string>();
      if (!text::valid_utf8(s)) render_fail("the context holds a string that is not valid UTF-8");
      return Value::string(std::move(s));
    }
    case Type::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(from_json(item));
      return Value::list(std::move(items));
    }
    case Type::object: {
      Dict dict;
      dict.entries.reserve(json.size());
      for (const auto& [key, item] : json.items()) {
        dict.entries.emplace_back(Value::string(key), from_json(item));
      }
      return Value::dict(std::move(dict));
    }
    case Type::binary:
    case Type::discarded:
      break;
  }
  render_fail("the context holds a JSON value of an unsupported type");
}

std::string dump_json(const Value& value, const JsonOptions& options) {
  JsonWriter writer(options);
  writer.write(value, 0);
  return writer.take();
}

}  // namespace offgen::jinja
