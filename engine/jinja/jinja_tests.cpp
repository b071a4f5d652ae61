// See jinja_tests.h. Each test is jinja2/tests.py's, including its Python corners: an Undefined
// is a sequence, iterable and callable (jinja2's Undefined defines __len__, __iter__ and __call__),
// a dict is a sequence, and bool is a number but not an integer.
#include "engine/jinja/jinja_tests.h"

#include <algorithm>
#include <array>

#include "engine/jinja/jinja_args.h"
#include "engine/jinja/jinja_case.h"
#include "engine/jinja/jinja_error.h"
#include "engine/jinja/jinja_number.h"
#include "engine/jinja/jinja_operators.h"

namespace offgen::jinja {

namespace {

using Kind = Value::Kind;

// The one argument of a test that takes one.
Value argument(std::string_view test, const CallArgs& args) {
  const auto a = bind_arguments(fmt::format("the test '{}'", test), args, {"other"});
  if (!a[0]) render_fail("the test '{}' needs an argument", test);
  return *a[0];
}

void no_arguments(std::string_view test, const CallArgs& args) {
  bind_arguments(fmt::format("the test '{}'", test), args, {});
}

// value % divisor as Python computes it, for odd / even / divisibleby.
Value modulo(const Value& value, const Value& divisor) {
  return binary_operation(BinaryOp::kMod, value, divisor);
}

bool test_odd(const Value& v, CallArgs& args) {
  no_arguments("odd", args);
  return equal(modulo(v, Value::integer(2)), Value::integer(1));
}

bool test_even(const Value& v, CallArgs& args) {
  no_arguments("even", args);
  return equal(modulo(v, Value::integer(2)), Value::integer(0));
}

bool test_divisibleby(const Value& v, CallArgs& args) {
  return equal(modulo(v, argument("divisibleby", args)), Value::integer(0));
}

bool test_defined(const Value& v, CallArgs& args) {
  no_arguments("defined", args);
  return !v.is_undefined();
}

bool test_undefined(const Value& v, CallArgs& args) {
  no_arguments("undefined", args);
  return v.is_undefined();
}

bool test_none(const Value& v, CallArgs& args) {
  no_arguments("none", args);
  return v.is_none();
}

bool test_boolean(const Value& v, CallArgs& args) {
  no_arguments("boolean", args);
  return v.kind() == Kind::kBool;
}

bool test_false(const Value& v, CallArgs& args) {
  no_arguments("false", args);
  return v.kind() == Kind::kBool && !v.as_bool();
}

bool test_true(const Value& v, CallArgs& args) {
  no_arguments("true", args);
  return v.kind() == Kind::kBool && v.as_bool();
}

bool test_integer(const Value& v, CallArgs& args) {
  no_arguments("integer", args);
  return v.kind() == Kind::kInt;
}

bool test_float(const Value& v, CallArgs& args) {
  no_arguments("float", args);
  return v.kind() == Kind::kFloat;
}

bool test_number(const Value& v, CallArgs& args) {
  no_arguments("number", args);
  return v.is_number();
}

bool test_string(const Value& v, CallArgs& args) {
  no_arguments("string", args);
  return v.is_string();
}

bool test_mapping(const Value& v, CallArgs& args) {
  no_arguments("mapping", args);
  return v.kind() == Kind::kDict;
}

// len(x) and x.__getitem__ both work.
bool test_sequence(const Value& v, CallArgs& args) {
  no_arguments("sequence", args);
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kString:
    case Kind::kDict:
      return true;
    case Kind::kSequence: {
      const SequenceKind k = v.as_sequence().kind;
      return k == SequenceKind::kList || k == SequenceKind::kTuple || k == SequenceKind::kRange;
    }
    case Kind::kNone:
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
    case Kind::kObject:
    case Kind::kIterator:
    case Kind::kFunction:
      return false;
  }
  return false;
}

// iter(x) works.
bool test_iterable(const Value& v, CallArgs& args) {
  no_arguments("iterable", args);
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kString:
    case Kind::kDict:
    case Kind::kSequence:
    case Kind::kIterator:
      return true;
    case Kind::kObject:
      return v.as_object().kind == ObjectKind::kLoop;
    case Kind::kNone:
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
    case Kind::kFunction:
      return false;
  }
  return false;
}

bool test_callable(const Value& v, CallArgs& args) {
  no_arguments("callable", args);
  return v.kind() == Kind::kFunction || v.is_undefined() ||
         (v.kind() == Kind::kObject && v.as_object().kind == ObjectKind::kLoop);
}

// `is`: decidable here for the singletons None, True and False and for shared containers; for
// numbers and strings Python's answer depends on its object caches.
bool test_sameas(const Value& v, CallArgs& args) {
  const Value other = argument("sameas", args);
  const auto singleton = [](const Value& x) { return x.is_none() || x.kind() == Kind::kBool; };
  if (singleton(v) || singleton(other)) return v.kind() == other.kind() && equal(v, other);
  const auto container = [](const Value& x) {
    return x.kind() == Kind::kSequence || x.kind() == Kind::kDict || x.kind() == Kind::kObject ||
           x.kind() == Kind::kIterator || x.kind() == Kind::kFunction;
  };
  if (container(v) || container(other)) return v.same_object(other);
  render_fail("'sameas' between a {} and a {} is not supported", type_name(v), type_name(other));
}

bool test_lower(const Value& v, CallArgs& args) {
  no_arguments("lower", args);
  return text::is_lower(to_str(v));
}

bool test_upper(const Value& v, CallArgs& args) {
  no_arguments("upper", args);
  return text::is_upper(to_str(v));
}

// hasattr(value, "__html__"): a Markup string.
bool test_escaped(const Value& v, CallArgs& args) {
  no_arguments("escaped", args);
  return v.is_markup();
}

bool test_in(const Value& v, CallArgs& args) {
  return contains(argument("in", args), v);
}

template <CompareOp kOp>
bool test_compare(const Value& v, CallArgs& args) {
  return compare(kOp, v, argument("comparison", args));
}

struct Entry {
  std::string_view name;
  TestFunction test;
};

// Not here, so refused: filter and test (they would answer for jinja2's builtins, which offgen
// does not all have).
constexpr std::array<Entry, 37> kTests = {{
    {"odd", test_odd},
    {"even", test_even},
    {"divisibleby", test_divisibleby},
    {"defined", test_defined},
    {"undefined", test_undefined},
    {"none", test_none},
    {"boolean", test_boolean},
    {"false", test_false},
    {"true", test_true},
    {"integer", test_integer},
    {"float", test_float},
    {"number", test_number},
    {"string", test_string},
    {"mapping", test_mapping},
    {"sequence", test_sequence},
    {"iterable", test_iterable},
    {"callable", test_callable},
    {"sameas", test_sameas},
    {"lower", test_lower},
    {"upper", test_upper},
    {"in", test_in},
    {"escaped", test_escaped},
    {"==", test_compare<CompareOp::kEq>},
    {"eq", test_compare<CompareOp::kEq>},
    {"equalto", test_compare<CompareOp::kEq>},
    {"!=", test_compare<CompareOp::kNe>},
    {"ne", test_compare<CompareOp::kNe>},
    {">", test_compare<CompareOp::kGt>},
    {"gt", test_compare<CompareOp::kGt>},
    {"greaterthan", test_compare<CompareOp::kGt>},
    {">=", test_compare<CompareOp::kGe>},
    {"ge", test_compare<CompareOp::kGe>},
    {"<", test_compare<CompareOp::kLt>},
    {"lt", test_compare<CompareOp::kLt>},
    {"lessthan", test_compare<CompareOp::kLt>},
    {"<=", test_compare<CompareOp::kLe>},
    {"le", test_compare<CompareOp::kLe>},
}};

}  // namespace

TestFunction find_test(std::string_view name) {
  for (const Entry& entry : kTests) {
    if (entry.name == name) return entry.test;
  }
  return nullptr;
}

bool jinja2_has_test(std::string_view name) {
  return find_test(name) != nullptr || name == "filter" || name == "test";
}

bool call_test(std::string_view name, const Value& value, CallArgs& args) {
  const TestFunction test = find_test(name);
  if (test == nullptr) render_fail("the test '{}' is not supported", name);
  return test(value, args);
}

}  // namespace offgen::jinja
