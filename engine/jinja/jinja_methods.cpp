// The Python methods templates call on values: str (strip, split, startswith, replace, ...), dict
// (items, keys, values, get) and list / tuple (index, count). Defines find_method of
// jinja_access.h. A method Python has but offgen does not is refused by name; a method that
// mutates is the sandbox's "unsafe" Undefined.
#include <algorithm>
#include <array>
#include <cctype>

#include "engine/jinja/jinja_access.h"
#include "engine/jinja/jinja_args.h"
#include "engine/jinja/jinja_case.h"
#include "engine/jinja/jinja_error.h"
#include "engine/jinja/jinja_format.h"
#include "engine/jinja/jinja_text.h"

namespace offgen::jinja {

namespace {

using StrMethod = Value (*)(const std::string& self, const CallArgs& args);

std::optional<std::string> optional_string(std::string_view fn, std::string_view param,
                                           const std::optional<Value>& v) {
  if (!v || v->is_none()) return std::nullopt;
  return string_argument(fn, param, *v);
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& p : parts) items.push_back(Value::string(std::move(p)));
  return Value::list(std::move(items));
}

template <text::StripSide kSide>
Value str_strip(const std::string& self, const CallArgs& args) {
  const auto a = bind_arguments("str.strip", args, {"chars"});
  return Value::string(text::strip(self, optional_string("str.strip", "chars", a[0]), kSide));
}

template <bool kFromRight>
Value str_split(const std::string& self, const CallArgs& args) {
  const auto a = bind_arguments("str.split", args, {"sep", "maxsplit"});
  const auto sep = optional_string("str.split", "sep", a[0]);
  const std::int64_t maxsplit = a[1] ? integer_argument("str.split", "maxsplit", *a[1]) : -1;
  return string_list(kFromRight ? text::rsplit(self, sep, maxsplit)
                                : text::split(self, sep, maxsplit));
}

Value str_splitlines(const std::string& self, const CallArgs& args) {
  const auto a = bind_arguments("str.splitlines", args, {"keepends"});
  return string_list(text::splitlines(self, a[0] && truthy(*a[0])));
}

template <std::string (*kMap)(std::string_view)>
Value str_case(const std::string& self, const CallArgs& args) {
  bind_arguments("str case method", args, {});
  return Value::string(kMap(self));
}

Value str_replace(const std::string& self, const CallArgs& args) {
  const auto a = bind_arguments("str.replace", args, {"old", "new", "count"});
  if (!a[0] || !a[1]) render_fail("str.replace expects at least 2 arguments");
  const std::int64_t count = a[2] ? integer_argument("str.replace", "count", *a[2]) : -1;
  return Value::string(text::replace(self, string_argument("str.replace", "old", *a[0]),
                                     string_argument("str.replace", "new", *a[1]), count));
}

// startswith / endswith: a prefix or a tuple of them.
template <bool kEnd>
Value str_affix(const std::string& self, const CallArgs& args) {
  const std::string_view fn = kEnd ? "str.endswith" : "str.startswith";
  const auto a = bind_arguments(fn, args, {"affix"});
  if (!a[0]) render_fail("{} takes at least 1 argument", fn);
  std::vector<Value> candidates;
  if (a[0]->kind() == Value::Kind::kSequence && a[0]->as_sequence().kind == SequenceKind::kTuple) {
    candidates = a[0]->as_sequence().items;
  } else {
    candidates.push_back(*a[0]);
  }
  for (const Value& c : candidates) {
    const std::string& affix = string_argument(fn, "affix", c);
    const bool match = affix.size() <= self.size() &&
                       (kEnd ? self.compare(self.size() - affix.size(), affix.size(), affix) == 0
                             : self.compare(0, affix.size(), affix) == 0);
    if (match) return Value::boolean(true);
  }
  return Value::boolean(false);
}

template <bool kReverse, bool kRaise>
Value str_find(const std::string& self, const CallArgs& args) {
  const auto a = bind_arguments("str.find", args, {"sub"});
  if (!a[0]) render_fail("str.find takes at least 1 argument");
  const std::string& sub = string_argument("str.find", "sub", *a[0]);
  const std::int64_t at = kReverse ? text::rfind(self, sub) : text::find(self, sub);
  if (kRaise && at < 0) render_fail("substring not found");
  return Value::integer(at);
}

Value str_count(const std::string& self, const CallArgs& args) {
  const auto a = bind_arguments("str.count", args, {"sub"});
  if (!a[0]) render_fail("str.count takes at least 1 argument");
  return Value::integer(text::count(self, string_argument("str.count", "sub", *a[0])));
}

Value str_join(const std::string& self, const CallArgs& args) {
  const auto a = bind_arguments("str.join", args, {"iterable"});
  if (!a[0]) render_fail("str.join takes exactly one argument");
  std::string out;
  const std::vector<Value> items = iterate(*a[0]);
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      render_fail("sequence item {}: expected str instance, {} found", i, type_name(items[i]));
    }
    if (i > 0) out += self;
    out += items[i].as_string();
  }
  return Value::string(std::move(out));
}

Value str_format(const std::string& self, const CallArgs& args) {
  return Value::string(brace_format(self, args));
}

template <bool kSuffix>
Value str_remove_affix(const std::string& self, const CallArgs& args) {
  const auto a = bind_arguments("str.removeprefix", args, {"affix"});
  if (!a[0]) render_fail("str.removeprefix takes exactly one argument");
  const std::string& affix = string_argument("str.removeprefix", "affix", *a[0]);
  if (affix.size() > self.size()) return Value::string(self);
  if (kSuffix) {
    if (self.compare(self.size() - affix.size(), affix.size(), affix) == 0) {
      return Value::string(self.substr(0, self.size() - affix.size()));
    }
  } else if (self.compare(0, affix.size(), affix) == 0) {
    return Value::string(self.substr(affix.size()));
  }
  return Value::string(self);
}

// isdigit / isalpha / isalnum for ASCII text (their Unicode classes are not modelled).
template <int (*kClass)(int)>
Value str_ascii_class(const std::string& self, const CallArgs& args) {
  bind_arguments("str.is...", args, {});
  if (!text::is_ascii(self)) {
    render_fail("str.isdigit / isalpha / isalnum of non-ASCII text is not supported");
  }
  return Value::boolean(!self.empty() && std::all_of(self.begin(), self.end(), [](char c) {
    return kClass(static_cast<unsigned char>(c)) != 0;
  }));
}

Value str_isspace(const std::string& self, const CallArgs& args) {
  bind_arguments("str.isspace", args, {});
  const std::u32string u = text::decode(self);
  return Value::boolean(!u.empty() && std::all_of(u.begin(), u.end(), text::is_space));
}

template <bool (*kTest)(std::string_view)>
Value str_case_test(const std::string& self, const CallArgs& args) {
  bind_arguments("str.islower / isupper", args, {});
  return Value::boolean(kTest(self));
}

int ascii_digit(int c) {
  return std::isdigit(c);
}
int ascii_alpha(int c) {
  return std::isalpha(c);
}
int ascii_alnum(int c) {
  return std::isalnum(c);
}

struct StrEntry {
  std::string_view name;
  StrMethod method;
};

constexpr std::array<StrEntry, 28> kStrMethods = {{
    {"strip", str_strip<text::StripSide::kBoth>},
    {"lstrip", str_strip<text::StripSide::kLeft>},
    {"rstrip", str_strip<text::StripSide::kRight>},
    {"split", str_split<false>},
    {"rsplit", str_split<true>},
    {"splitlines", str_splitlines},
    {"upper", str_case<text::upper>},
    {"lower", str_case<text::lower>},
    {"title", str_case<text::title>},
    {"capitalize", str_case<text::capitalize>},
    {"replace", str_replace},
    {"startswith", str_affix<false>},
    {"endswith", str_affix<true>},
    {"find", str_find<false, false>},
    {"rfind", str_find<true, false>},
    {"index", str_find<false, true>},
    {"rindex", str_find<true, true>},
    {"count", str_count},
    {"join", str_join},
    {"format", str_format},
    {"removeprefix", str_remove_affix<false>},
    {"removesuffix", str_remove_affix<true>},
    {"isdigit", str_ascii_class<ascii_digit>},
    {"isalpha", str_ascii_class<ascii_alpha>},
    {"isalnum", str_ascii_class<ascii_alnum>},
    {"isspace", str_isspace},
    {"islower", str_case_test<text::is_lower>},
    {"isupper", str_case_test<text::is_upper>},
}};

// Python str methods offgen does not implement: refused rather than treated as missing.
constexpr std::array<std::string_view, 19> kOtherStrMethods = {
    "casefold",   "center",    "encode",       "expandtabs", "format_map",
    "isascii",    "isdecimal", "isidentifier", "isnumeric",  "isprintable",
    "istitle",    "ljust",     "maketrans",    "partition",  "rjust",
    "rpartition", "swapcase",  "translate",    "zfill"};

Value unsafe(const Value& object, std::string_view name) {
  return Value::undefined(
      fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, type_name(object)));
}

template <std::size_t N>
bool one_of(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::optional<Value> dict_method(const Value& object, std::string_view name) {
  static constexpr std::array<std::string_view, 5> kMutating = {"clear", "pop", "popitem",
                                                                "setdefault", "update"};
  if (one_of(kMutating, name)) return unsafe(object, name);
  const auto view = [&](SequenceKind kind) {
    return Value::function("dict." + std::string(name), [object, kind](CallArgs& args) {
      bind_arguments("dict view", args, {});
      Sequence s{kind, {}};
      for (const auto& [k, v] : object.as_dict().entries) {
        s.items.push_back(kind == SequenceKind::kDictKeys     ? k
                          : kind == SequenceKind::kDictValues ? v
                                                              : Value::tuple({k, v}));
      }
      return Value::sequence(std::move(s));
    });
  };
  if (name == "items") return view(SequenceKind::kDictItems);
  if (name == "keys") return view(SequenceKind::kDictKeys);
  if (name == "values") return view(SequenceKind::kDictValues);
  if (name == "get") {
    return Value::function("dict.get", [object](CallArgs& args) {
      const auto a = bind_arguments("dict.get", args, {"key", "default"});
      if (!a[0]) render_fail("dict.get expected at least 1 argument, got 0");
      if (!hashable(*a[0])) render_fail("unhashable type: '{}'", type_name(*a[0]));
      if (const Value* v = object.as_dict().find(*a[0])) return *v;
      return a[1] ? *a[1] : Value::none();
    });
  }
  if (name == "copy") {
    return Value::function("dict.copy", [object](CallArgs& args) {
      bind_arguments("dict.copy", args, {});
      return Value::dict(object.as_dict());
    });
  }
  if (name == "fromkeys") render_fail("the dict method 'fromkeys' is not supported");
  return std::nullopt;
}

std::optional<Value> sequence_method(const Value& object, std::string_view name) {
  const Sequence& s = object.as_sequence();
  if (s.kind != SequenceKind::kList && s.kind != SequenceKind::kTuple &&
      s.kind != SequenceKind::kRange) {
    return std::nullopt;
  }
  static constexpr std::array<std::string_view, 8> kMutating = {
      "append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
  if (s.kind == SequenceKind::kList && one_of(kMutating, name)) return unsafe(object, name);
  if (name == "index" || name == "count") {
    const bool index = name == "index";
    return Value::function(std::string(name), [object, index](CallArgs& args) {
      const auto a = bind_arguments(index ? "list.index" : "list.count", args, {"value"});
      if (!a[0]) render_fail("list.index / count takes exactly one argument");
      const auto& items = object.as_sequence().items;
      std::int64_t n = 0;
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (!equal(items[i], *a[0])) continue;
        if (index) return Value::integer(static_cast<std::int64_t>(i));
        ++n;
      }
      if (index) render_fail("{} is not in list", repr(*a[0]));
      return Value::integer(n);
    });
  }
  if (name == "copy" && s.kind == SequenceKind::kList) {
    return Value::function("list.copy", [object](CallArgs& args) {
      bind_arguments("list.copy", args, {});
      return Value::list(object.as_sequence().items);
    });
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> find_method(const Value& object, std::string_view name) {
  switch (object.kind()) {
    case Value::Kind::kString:
      if (object.is_markup()) {
        // Markup's methods escape their arguments and return Markup.
        render_fail("the methods of a Markup string (from |safe or |escape) are not supported");
      }
      for (const StrEntry& entry : kStrMethods) {
        if (entry.name != name) continue;
        const StrMethod method = entry.method;
        return Value::function("str." + std::string(name), [object, method](CallArgs& args) {
          return method(object.as_string(), args);
        });
      }
      if (one_of(kOtherStrMethods, name)) render_fail("the str method '{}' is not supported", name);
      return std::nullopt;
    case Value::Kind::kDict:
      return dict_method(object, name);
    case Value::Kind::kSequence:
      return sequence_method(object, name);
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kObject:
    case Value::Kind::kIterator:
    case Value::Kind::kFunction:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace offgen::jinja
