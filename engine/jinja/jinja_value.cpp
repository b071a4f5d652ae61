// See jinja_value.h. The Python semantics (truthiness, ==, <, str, repr, iter) live here so the
// evaluator, the filters and the methods agree on them.
#include "engine/jinja/jinja_value.h"

#include <algorithm>

#include "engine/jinja/jinja_error.h"
#include "engine/jinja/jinja_number.h"
#include "engine/jinja/jinja_text.h"

namespace offgen::jinja {

namespace {

// Python stops at about 1000 frames; a value this deep is a runaway or a cycle.
constexpr int kMaxNesting = 500;
thread_local int nesting = 0;

std::string join_repr(const std::vector<Value>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += repr(items[i]);
  }
  return out;
}

std::string dict_repr(const Dict& dict) {
  std::string out = "{";
  for (std::size_t i = 0; i < dict.entries.size(); ++i) {
    if (i > 0) out += ", ";
    out.append(repr(dict.entries[i].first)).append(": ").append(repr(dict.entries[i].second));
  }
  return out + "}";
}

std::string sequence_repr(const Sequence& s) {
  switch (s.kind) {
    case SequenceKind::kList:
      return fmt::format("[{}]", join_repr(s.items));
    case SequenceKind::kTuple:
      return fmt::format("({}{}", join_repr(s.items), s.items.size() == 1 ? ",)" : ")");
    case SequenceKind::kDictKeys:
      return fmt::format("dict_keys([{}])", join_repr(s.items));
    case SequenceKind::kDictValues:
      return fmt::format("dict_values([{}])", join_repr(s.items));
    case SequenceKind::kDictItems:
      return fmt::format("dict_items([{}])", join_repr(s.items));
    case SequenceKind::kRange:
      return s.range_step == 1
                 ? fmt::format("range({}, {})", s.range_start, s.range_stop)
                 : fmt::format("range({}, {}, {})", s.range_start, s.range_stop, s.range_step);
  }
  return {};
}

// Which sequences can be equal to each other: Python compares a list only with a list, a tuple
// only with a tuple, and so on.
bool comparable_sequences(SequenceKind a, SequenceKind b) {
  return a == b && a != SequenceKind::kDictValues;
}

bool items_equal(const std::vector<Value>& a, const std::vector<Value>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!equal(a[i], b[i])) return false;
  }
  return true;
}

bool contains_all(const std::vector<Value>& haystack, const std::vector<Value>& needles) {
  return std::all_of(needles.begin(), needles.end(), [&](const Value& n) {
    return std::any_of(haystack.begin(), haystack.end(),
                       [&](const Value& h) { return equal(h, n); });
  });
}

}  // namespace

NestingGuard::NestingGuard() {
  if (nesting >= kMaxNesting) {
    render_fail("a value is nested too deeply (or contains itself) for this operation");
  }
  ++nesting;
}

NestingGuard::~NestingGuard() {
  --nesting;
}

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : entries) {
    if (equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

Value::Value() : data_(Undefined{}) {}

Value Value::undefined(std::string hint) {
  return Value(Data(Undefined{std::move(hint)}));
}
Value Value::none() {
  return Value(Data(None{}));
}
Value Value::boolean(bool b) {
  return Value(Data(b));
}
Value Value::integer(std::int64_t i) {
  return Value(Data(i));
}
Value Value::floating(double d) {
  return Value(Data(d));
}
Value Value::string(std::string s) {
  return Value(Data(std::move(s)));
}

Value Value::markup(std::string s) {
  Value v = string(std::move(s));
  v.markup_ = true;
  return v;
}

Value Value::list(std::vector<Value> items) {
  return sequence(Sequence{SequenceKind::kList, std::move(items)});
}

Value Value::tuple(std::vector<Value> items) {
  return sequence(Sequence{SequenceKind::kTuple, std::move(items)});
}

Value Value::sequence(Sequence s) {
  return Value(Data(std::shared_ptr<const Sequence>(std::make_shared<Sequence>(std::move(s)))));
}

Value Value::dict(Dict d) {
  return Value(Data(std::shared_ptr<const Dict>(std::make_shared<Dict>(std::move(d)))));
}

Value Value::object(ObjectKind kind, Dict attributes) {
  return Value(Data(std::make_shared<Object>(Object{kind, std::move(attributes)})));
}

Value Value::iterator(std::string type_name, std::vector<Value> items) {
  return Value(
      Data(std::make_shared<Iterator>(Iterator{std::move(type_name), std::move(items), 0})));
}

Value Value::function(std::string name, NativeFunction call) {
  return Value(Data(std::shared_ptr<const Function>(
      std::make_shared<Function>(Function{std::move(name), std::move(call)}))));
}

bool Value::is_number() const {
  return kind() == Kind::kInt || kind() == Kind::kFloat || kind() == Kind::kBool;
}

const std::string& Value::undefined_hint() const {
  return std::get<Undefined>(data_).hint;
}

std::int64_t Value::as_integral() const {
  return kind() == Kind::kBool ? as_bool() : as_int();
}

double Value::as_double() const {
  return kind() == Kind::kFloat ? as_float() : static_cast<double>(as_integral());
}

bool Value::same_object(const Value& other) const {
  if (data_.index() != other.data_.index()) return false;
  return std::visit(
      [&](const auto& mine) -> bool {
        using T = std::decay_t<decltype(mine)>;
        if constexpr (std::is_same_v<T, std::shared_ptr<const Sequence>> ||
                      std::is_same_v<T, std::shared_ptr<const Dict>> ||
                      std::is_same_v<T, std::shared_ptr<Object>> ||
                      std::is_same_v<T, std::shared_ptr<Iterator>> ||
                      std::is_same_v<T, std::shared_ptr<const Function>>) {
          return mine == std::get<T>(other.data_);
        } else {
          return false;
        }
      },
      data_);
}

std::string type_name(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kSequence:
      switch (value.as_sequence().kind) {
        case SequenceKind::kList:
          return "list";
        case SequenceKind::kTuple:
          return "tuple";
        case SequenceKind::kDictKeys:
          return "dict_keys";
        case SequenceKind::kDictValues:
          return "dict_values";
        case SequenceKind::kDictItems:
          return "dict_items";
        case SequenceKind::kRange:
          return "range";
      }
      break;
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kObject:
      switch (value.as_object().kind) {
        case ObjectKind::kNamespace:
          return "Namespace";
        case ObjectKind::kLoop:
          return "LoopContext";
      }
      break;
    case Value::Kind::kIterator:
      return value.as_iterator().type_name;
    case Value::Kind::kFunction:
      return "function";
  }
  return "object";
}

bool truthy(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return value.as_bool();
    case Value::Kind::kInt:
      return value.as_int() != 0;
    case Value::Kind::kFloat:
      return value.as_float() != 0.0;
    case Value::Kind::kString:
      return !value.as_string().empty();
    case Value::Kind::kSequence:
      return !value.as_sequence().items.empty();
    case Value::Kind::kDict:
      return !value.as_dict().entries.empty();
    case Value::Kind::kObject:
    case Value::Kind::kIterator:
    case Value::Kind::kFunction:
      return true;
  }
  return true;
}

bool equal(const Value& a, const Value& b) {
  const NestingGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat) {
      return a.as_integral() == b.as_integral();
    }
    return a.as_double() == b.as_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kSequence: {
      const Sequence& x = a.as_sequence();
      const Sequence& y = b.as_sequence();
      if (a.same_object(b)) return true;
      if (!comparable_sequences(x.kind, y.kind)) return false;
      if (x.kind == SequenceKind::kDictKeys || x.kind == SequenceKind::kDictItems) {
        // Set-like views compare as sets.
        return x.items.size() == y.items.size() && contains_all(x.items, y.items);
      }
      return items_equal(x.items, y.items);
    }
    case Value::Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.entries.size() != y.entries.size()) return false;
      return std::all_of(x.entries.begin(), x.entries.end(), [&](const auto& entry) {
        const Value* other = y.find(entry.first);
        return other != nullptr && equal(entry.second, *other);
      });
    }
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kObject:
    case Value::Kind::kIterator:
    case Value::Kind::kFunction:
      return a.same_object(b);
  }
  return false;
}

bool less(const Value& a, const Value& b) {
  const NestingGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat) {
      return a.as_integral() < b.as_integral();
    }
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 keeps order
  if (a.kind() == Value::Kind::kSequence && b.kind() == Value::Kind::kSequence) {
    const Sequence& x = a.as_sequence();
    const Sequence& y = b.as_sequence();
    if (x.kind == y.kind && (x.kind == SequenceKind::kList || x.kind == SequenceKind::kTuple)) {
      for (std::size_t i = 0; i < x.items.size() && i < y.items.size(); ++i) {
        if (!equal(x.items[i], y.items[i])) return less(x.items[i], y.items[i]);
      }
      return x.items.size() < y.items.size();
    }
  }
  render_fail("'<' not supported between instances of '{}' and '{}'", type_name(a), type_name(b));
}

std::string to_str(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kString:
      return value.as_string();
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kSequence:
    case Value::Kind::kDict:
    case Value::Kind::kObject:
    case Value::Kind::kIterator:
    case Value::Kind::kFunction:
      return repr(value);
  }
  return {};
}

std::string repr(const Value& value) {
  const NestingGuard guard;
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return value.as_bool() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(value.as_int());
    case Value::Kind::kFloat:
      return float_repr(value.as_float());
    case Value::Kind::kString:
      return value.is_markup() ? fmt::format("Markup({})", text::repr(value.as_string()))
                               : text::repr(value.as_string());
    case Value::Kind::kSequence:
      return sequence_repr(value.as_sequence());
    case Value::Kind::kDict:
      return dict_repr(value.as_dict());
    case Value::Kind::kObject: {
      const Object& object = value.as_object();
      switch (object.kind) {
        case ObjectKind::kNamespace:
          return fmt::format("<Namespace {}>", dict_repr(object.attributes));
        case ObjectKind::kLoop:
          return fmt::format("<LoopContext {}/{}>", to_str(*object.attributes.find("index")),
                             to_str(*object.attributes.find("length")));
      }
      break;
    }
    case Value::Kind::kIterator:
    case Value::Kind::kFunction:
      // Python prints the object's memory address, which no other renderer can reproduce.
      render_fail("printing a {} is not supported (Python prints its memory address)",
                  type_name(value));
  }
  return {};
}

std::vector<Value> iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kSequence:
      return value.as_sequence().items;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& entry : value.as_dict().entries) keys.push_back(entry.first);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      const std::string& s = value.as_string();
      std::size_t pos = 0;
      while (pos < s.size()) {
        const std::size_t begin = pos;
        text::next_code_point(s, pos);
        chars.push_back(Value::string(s.substr(begin, pos - begin)));
      }
      return chars;
    }
    case Value::Kind::kIterator: {
      Iterator& it = value.as_iterator();
      std::vector<Value> rest(it.items.begin() + static_cast<std::ptrdiff_t>(it.next),
                              it.items.end());
      it.next = it.items.size();
      return rest;
    }
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kObject:
    case Value::Kind::kFunction:
      break;
  }
  render_fail("'{}' object is not iterable", type_name(value));
}

bool hashable(const Value& value) {
  const NestingGuard guard;
  switch (value.kind()) {
    case Value::Kind::kSequence: {
      const Sequence& s = value.as_sequence();
      switch (s.kind) {
        case SequenceKind::kTuple:
          return std::all_of(s.items.begin(), s.items.end(), hashable);
        case SequenceKind::kRange:
          return true;
        case SequenceKind::kList:
        case SequenceKind::kDictKeys:
        case SequenceKind::kDictValues:
        case SequenceKind::kDictItems:
          return false;
      }
      return false;
    }
    case Value::Kind::kDict:
      return false;
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kString:
    case Value::Kind::kObject:
    case Value::Kind::kIterator:
    case Value::Kind::kFunction:
      return true;
  }
  return true;
}

}  // namespace offgen::jinja
