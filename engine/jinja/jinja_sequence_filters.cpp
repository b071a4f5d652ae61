// See jinja_sequence_filters.h. Attribute paths ("function.name", "0") are looked up with
// get_item, as jinja2's make_attrgetter does with environment.getitem; case-insensitive keys
// (sort, unique, min, max, dictsort) lower-case strings first.
#include "engine/jinja/jinja_sequence_filters.h"

#include <algorithm>
#include <cctype>

#include "engine/jinja/jinja_access.h"
#include "engine/jinja/jinja_args.h"
#include "engine/jinja/jinja_case.h"
#include "engine/jinja/jinja_error.h"
#include "engine/jinja/jinja_filters.h"
#include "engine/jinja/jinja_operators.h"
#include "engine/jinja/jinja_tests.h"
#include "engine/jinja/jinja_text.h"

namespace offgen::jinja::filters {

namespace {

// make_attrgetter: the path split at dots, all-digit parts as integers.
std::vector<Value> attribute_parts(const std::optional<Value>& attribute) {
  if (!attribute || attribute->is_none()) return {};
  if (!attribute->is_string()) return {*attribute};
  std::vector<Value> parts;
  for (const std::string& part : text::split(attribute->as_string(), std::string("."), -1)) {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c)) != 0;
    });
    parts.push_back(digits ? Value::integer(std::stoll(part)) : Value::string(part));
  }
  return parts;
}

Value ignore_case(const Value& v) {
  return v.is_string() ? Value::string(text::lower(v.as_string())) : v;
}

struct Getter {
  std::vector<Value> parts;
  std::optional<Value> fallback;  // map(default=...): replaces an Undefined along the path
  bool lower = false;

  Value operator()(Value item) const {
    for (const Value& part : parts) {
      item = get_item(item, part);
      if (fallback && !fallback->is_none() && item.is_undefined()) item = *fallback;
    }
    return lower ? ignore_case(item) : item;
  }
};

// make_multi_attrgetter: "a,b" gives the key [a, b].
std::vector<Getter> multi_getter(const std::optional<Value>& attribute, bool lower) {
  std::vector<Getter> getters;
  if (attribute && attribute->is_string()) {
    for (const std::string& one : text::split(attribute->as_string(), std::string(","), -1)) {
      getters.push_back(Getter{attribute_parts(Value::string(one)), std::nullopt, lower});
    }
  } else {
    getters.push_back(Getter{attribute_parts(attribute), std::nullopt, lower});
  }
  return getters;
}

bool key_less(const std::vector<Value>& a, const std::vector<Value>& b) {
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!equal(a[i], b[i])) return less(a[i], b[i]);
  }
  return a.size() < b.size();
}

Value generator(std::vector<Value> items) {
  return Value::iterator("generator", std::move(items));
}

bool case_sensitive_argument(const std::optional<Value>& v) {
  return v && truthy(*v);
}

// select / reject / selectattr / rejectattr.
Value select_or_reject(const Value& input, CallArgs& args, bool keep_when, bool by_attribute,
                       std::string_view filter) {
  if (!truthy(input)) return generator({});
  std::size_t offset = 0;
  Getter getter;
  if (by_attribute) {
    if (args.positional.empty()) render_fail("the filter '{}' needs an attribute name", filter);
    getter.parts = attribute_parts(args.positional[0]);
    offset = 1;
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (args.positional.size() > offset) {
    test = string_argument(filter, "test", args.positional[offset]);
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(offset + 1),
                                args.positional.end());
    test_args.keyword = args.keyword;
    if (find_test(*test) == nullptr) render_fail("the test '{}' is not supported", *test);
  }
  std::vector<Value> kept;
  for (const Value& item : iterate(input)) {
    const Value subject = getter(item);
    CallArgs call = test_args;
    const bool passed = test ? call_test(*test, subject, call) : truthy(subject);
    if (passed == keep_when) kept.push_back(item);
  }
  return generator(std::move(kept));
}

Value min_or_max(const Value& input, CallArgs& args, bool max) {
  const auto a = bind_arguments(max ? "the filter 'max'" : "the filter 'min'", args,
                                {"case_sensitive", "attribute"});
  const std::vector<Value> items = iterate(input);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const Getter key{attribute_parts(a[1]), std::nullopt, !case_sensitive_argument(a[0])};
  std::size_t best = 0;
  Value best_key = key(items[0]);
  for (std::size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (max ? less(best_key, k) : less(k, best_key)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

}  // namespace

Value first(const Value& input, CallArgs& args) {
  bind_arguments("the filter 'first'", args, {});
  if (input.kind() == Value::Kind::kIterator) {
    Iterator& it = input.as_iterator();
    if (it.next < it.items.size()) return it.items[it.next++];
  } else {
    std::vector<Value> items = iterate(input);
    if (!items.empty()) return items.front();
  }
  return Value::undefined("No first item, sequence was empty.");
}

Value last(const Value& input, CallArgs& args) {
  bind_arguments("the filter 'last'", args, {});
  if (input.kind() == Value::Kind::kIterator) {
    render_fail("'{}' object is not reversible", type_name(input));
  }
  std::vector<Value> items = iterate(input);
  if (!items.empty()) return items.back();
  return Value::undefined("No last item, sequence was empty.");
}

Value length(const Value& input, CallArgs& args) {
  bind_arguments("the filter 'length'", args, {});
  switch (input.kind()) {
    case Value::Kind::kUndefined:
      return Value::integer(0);
    case Value::Kind::kString:
      return Value::integer(static_cast<std::int64_t>(text::length(input.as_string())));
    case Value::Kind::kSequence:
      return Value::integer(static_cast<std::int64_t>(input.as_sequence().items.size()));
    case Value::Kind::kDict:
      return Value::integer(static_cast<std::int64_t>(input.as_dict().entries.size()));
    case Value::Kind::kObject:
      if (input.as_object().kind == ObjectKind::kLoop) {
        return *input.as_object().attributes.find("length");
      }
      break;
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kIterator:
    case Value::Kind::kFunction:
      break;
  }
  render_fail("object of type '{}' has no len()", type_name(input));
}

Value list(const Value& input, CallArgs& args) {
  bind_arguments("the filter 'list'", args, {});
  return Value::list(iterate(input));
}

Value join(const Value& input, CallArgs& args) {
  const auto a = bind_arguments("the filter 'join'", args, {"d", "attribute"});
  const std::string separator = a[0] ? to_str(*a[0]) : "";
  std::vector<Value> items = iterate(input);
  if (a[1] && !a[1]->is_none()) {
    const Getter getter{attribute_parts(a[1]), std::nullopt, false};
    for (Value& item : items) item = getter(item);
  }
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    out += to_str(items[i]);
  }
  return Value::string(std::move(out));
}

Value items(const Value& input, CallArgs& args) {
  bind_arguments("the filter 'items'", args, {});
  if (input.is_undefined()) return generator({});
  if (input.kind() != Value::Kind::kDict) render_fail("Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  for (const auto& [k, v] : input.as_dict().entries) pairs.push_back(Value::tuple({k, v}));
  return generator(std::move(pairs));
}

Value reverse(const Value& input, CallArgs& args) {
  bind_arguments("the filter 'reverse'", args, {});
  if (input.is_string()) {
    std::u32string u = text::decode(input.as_string());
    std::reverse(u.begin(), u.end());
    return input.is_markup() ? Value::markup(text::encode(u)) : Value::string(text::encode(u));
  }
  std::vector<Value> items = iterate(input);
  std::reverse(items.begin(), items.end());
  switch (input.kind()) {
    case Value::Kind::kIterator:
      return Value::list(std::move(items));  // not reversible: jinja2 reverses list(value)
    case Value::Kind::kSequence:
      return Value::iterator(
          input.as_sequence().kind == SequenceKind::kList ? "list_reverseiterator" : "reversed",
          std::move(items));
    case Value::Kind::kDict:
      return Value::iterator("dict_reversekeyiterator", std::move(items));
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kString:
    case Value::Kind::kObject:
    case Value::Kind::kFunction:
      break;
  }
  return Value::iterator("reversed", std::move(items));
}

Value map(const Value& input, CallArgs& args) {
  if (!truthy(input)) return generator({});
  std::vector<Value> out;
  if (args.positional.empty()) {
    const auto a = bind_arguments("the filter 'map'", args, {"attribute", "default"});
    if (!a[0]) render_fail("map requires a filter argument");
    const Getter getter{attribute_parts(a[0]), a[1] ? *a[1] : Value::none()};
    for (const Value& item : iterate(input)) out.push_back(getter(item));
    return generator(std::move(out));
  }
  const std::string name = string_argument("the filter 'map'", "filter", args.positional[0]);
  if (find_filter(name) == nullptr) render_fail("the filter '{}' is not supported", name);
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : iterate(input)) {
    CallArgs call = rest;
    out.push_back(call_filter(name, item, call));
  }
  return generator(std::move(out));
}

Value select(const Value& input, CallArgs& args) {
  return select_or_reject(input, args, true, false, "select");
}

Value reject(const Value& input, CallArgs& args) {
  return select_or_reject(input, args, false, false, "reject");
}

Value selectattr(const Value& input, CallArgs& args) {
  return select_or_reject(input, args, true, true, "selectattr");
}

Value rejectattr(const Value& input, CallArgs& args) {
  return select_or_reject(input, args, false, true, "rejectattr");
}

Value unique(const Value& input, CallArgs& args) {
  const auto a = bind_arguments("the filter 'unique'", args, {"case_sensitive", "attribute"});
  const Getter key{attribute_parts(a[1]), std::nullopt, !case_sensitive_argument(a[0])};
  std::vector<Value> seen;
  std::vector<Value> out;
  for (const Value& item : iterate(input)) {
    Value k = key(item);
    if (!hashable(k)) render_fail("unhashable type: '{}'", type_name(k));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, k); })) {
      continue;
    }
    seen.push_back(std::move(k));
    out.push_back(item);
  }
  return generator(std::move(out));
}

Value sort(const Value& input, CallArgs& args) {
  const auto a =
      bind_arguments("the filter 'sort'", args, {"reverse", "case_sensitive", "attribute"});
  const bool descending = a[0] && truthy(*a[0]);
  const std::vector<Getter> getters = multi_getter(a[2], !case_sensitive_argument(a[1]));
  std::vector<std::pair<std::vector<Value>, Value>> keyed;
  for (Value& item : iterate(input)) {
    std::vector<Value> key;
    for (const Getter& g : getters) key.push_back(g(item));
    keyed.emplace_back(std::move(key), std::move(item));
  }
  // Python's sorted is stable, also with reverse=True (equal items keep their order).
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return descending ? key_less(y.first, x.first) : key_less(x.first, y.first);
  });
  std::vector<Value> out;
  for (auto& entry : keyed) out.push_back(std::move(entry.second));
  return Value::list(std::move(out));
}

Value dictsort(const Value& input, CallArgs& args) {
  const auto a = bind_arguments("the filter 'dictsort'", args, {"case_sensitive", "by", "reverse"});
  if (input.kind() != Value::Kind::kDict) {
    render_fail("dictsort needs a mapping, not '{}'", type_name(input));
  }
  std::size_t position = 0;
  if (a[1]) {
    const std::string& by = string_argument("the filter 'dictsort'", "by", *a[1]);
    if (by != "key" && by != "value") {
      render_fail("You can only sort by either \"key\" or \"value\"");
    }
    position = by == "value" ? 1 : 0;
  }
  const bool lower = !case_sensitive_argument(a[0]);
  const bool descending = a[2] && truthy(*a[2]);
  std::vector<std::pair<Value, Value>> entries = input.as_dict().entries;
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    Value kx = position == 0 ? x.first : x.second;
    Value ky = position == 0 ? y.first : y.second;
    if (lower) {
      kx = ignore_case(kx);
      ky = ignore_case(ky);
    }
    return descending ? less(ky, kx) : less(kx, ky);
  });
  std::vector<Value> out;
  for (auto& [k, v] : entries) out.push_back(Value::tuple({k, v}));
  return Value::list(std::move(out));
}

Value min(const Value& input, CallArgs& args) {
  return min_or_max(input, args, false);
}

Value max(const Value& input, CallArgs& args) {
  return min_or_max(input, args, true);
}

Value sum(const Value& input, CallArgs& args) {
  const auto a = bind_arguments("the filter 'sum'", args, {"attribute", "start"});
  Value total = a[1] ? *a[1] : Value::integer(0);
  const Getter getter{attribute_parts(a[0]), std::nullopt, false};
  for (const Value& item : iterate(input)) {
    const Value v = getter(item);
    if (total.is_string()) render_fail("sum() can't sum strings [use ''.join(seq) instead]");
    total = binary_operation(BinaryOp::kAdd, total, v);
  }
  return total;
}

}  // namespace offgen::jinja::filters
