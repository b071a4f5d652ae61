// See jinja_globals.h.
#include "engine/jinja/jinja_globals.h"

#include <ctime>

#include "engine/jinja/jinja_args.h"
#include "engine/jinja/jinja_error.h"

namespace offgen::jinja {

namespace {

// jinja2's sandbox refuses ranges longer than this (MAX_RANGE).
constexpr std::int64_t kMaxRange = 100000;

Value range(CallArgs& args) {
  if (!args.keyword.empty()) render_fail("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) render_fail("range expected 1 to 3 arguments, got {}", p.size());
  std::int64_t start = 0;
  std::int64_t stop = 0;
  std::int64_t step = 1;
  if (p.size() == 1) {
    stop = integer_argument("range", "stop", p[0]);
  } else {
    start = integer_argument("range", "start", p[0]);
    stop = integer_argument("range", "stop", p[1]);
    if (p.size() == 3) step = integer_argument("range", "step", p[2]);
  }
  if (step == 0) render_fail("range() arg 3 must not be zero");
  Sequence s{SequenceKind::kRange, {}, start, stop, step};
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<std::int64_t>(s.items.size()) >= kMaxRange) {
      render_fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).",
                  kMaxRange);
    }
    s.items.push_back(Value::integer(i));
  }
  return Value::sequence(std::move(s));
}

// dict(mapping or pairs, **kwargs) and namespace(...) build their attributes the same way.
Dict dict_from(std::string_view function, const CallArgs& args) {
  if (args.positional.size() > 1) {
    render_fail("{} expected at most 1 positional argument, got {}", function,
                args.positional.size());
  }
  Dict d;
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.kind() == Value::Kind::kDict) {
      d = source.as_dict();
    } else {
      for (const Value& pair : iterate(source)) {
        const std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2) {
          render_fail("dictionary update sequence element has length {}; 2 is required", kv.size());
        }
        if (!hashable(kv[0])) render_fail("unhashable type: '{}'", type_name(kv[0]));
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [key, value] : args.keyword) d.set(Value::string(key), value);
  return d;
}

Value raise_exception(CallArgs& args) {
  const auto a = bind_arguments("raise_exception", args, {"message"});
  throw TemplateRaised(a[0] ? to_str(*a[0]) : "");
}

// Python's datetime.strftime: %f, %z and %Z are its own (a naive local time has no zone); the
// rest is the C library's strftime.
std::string strftime_now(std::chrono::system_clock::time_point now, const std::string& format) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                          now - std::chrono::system_clock::from_time_t(seconds))
                          .count();
  std::tm local{};
  localtime_r(&seconds, &local);
  std::string prepared;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      prepared.push_back(format[i]);
      continue;
    }
    const char c = format[++i];
    if (c == 'f') {
      prepared += fmt::format("{:06d}", micros);
    } else if (c == 'z' || c == 'Z') {
      // empty for a naive datetime
    } else {
      prepared.push_back('%');
      prepared.push_back(c);
    }
  }
  if (prepared.empty()) return "";
  std::string out(256 + prepared.size() * 8, '\0');
  // 0 is also what strftime returns for an empty result, which is what Python gives then.
  out.resize(std::strftime(out.data(), out.size(), prepared.c_str(), &local));
  return out;
}

}  // namespace

Dict make_globals(std::chrono::system_clock::time_point now, std::vector<Value>* created) {
  Dict globals;
  const auto add = [&](std::string name, NativeFunction fn) {
    globals.entries.emplace_back(Value::string(name), Value::function(name, std::move(fn)));
  };
  add("range", range);
  add("dict", [](CallArgs& args) { return Value::dict(dict_from("dict", args)); });
  add("namespace", [created](CallArgs& args) {
    Value ns = Value::object(ObjectKind::kNamespace, dict_from("namespace", args));
    created->push_back(ns);
    return ns;
  });
  add("raise_exception", raise_exception);
  add("strftime_now", [now](CallArgs& args) {
    const auto a = bind_arguments("strftime_now", args, {"format"});
    if (!a[0]) render_fail("strftime_now() needs a format");
    return Value::string(strftime_now(now, string_argument("strftime_now", "format", *a[0])));
  });
  // jinja2's other globals, which chat templates do not use: refused by name when called.
  for (const char* name : {"lipsum", "cycler", "joiner"}) {
    globals.entries.emplace_back(
        Value::string(name),
        Value::undefined(fmt::format("the global function '{}' is not supported", name)));
  }
  return globals;
}

}  // namespace offgen::jinja
