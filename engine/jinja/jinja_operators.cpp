// See jinja_operators.h. Python's bool is an int in arithmetic (True + 1 == 2), ints stay ints
// except under / and negative **, and a str or list times an int repeats it.
#include "engine/jinja/jinja_operators.h"

#include <cmath>

#include "engine/jinja/jinja_error.h"
#include "engine/jinja/jinja_format.h"
#include "engine/jinja/jinja_number.h"

namespace offgen::jinja {

namespace {

bool is_int_like(const Value& v) {
  return v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool;
}

std::string_view symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kFloorDiv:
      return "//";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kPow:
      return "** or pow()";
  }
  return "?";
}

[[noreturn]] void unsupported_operands(BinaryOp op, const Value& a, const Value& b) {
  render_fail("unsupported operand type(s) for {}: '{}' and '{}'", symbol(op), type_name(a),
              type_name(b));
}

bool is_list_or_tuple(const Value& v) {
  return v.kind() == Value::Kind::kSequence && (v.as_sequence().kind == SequenceKind::kList ||
                                                v.as_sequence().kind == SequenceKind::kTuple);
}

// seq * n for a str, list or tuple.
Value repeat(const Value& seq, std::int64_t n) {
  if (seq.is_string()) {
    std::string out;
    for (std::int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value::string(std::move(out));
  }
  Sequence s{seq.as_sequence().kind, {}};
  for (std::int64_t i = 0; i < n; ++i) {
    s.items.insert(s.items.end(), seq.as_sequence().items.begin(), seq.as_sequence().items.end());
  }
  return Value::sequence(std::move(s));
}

Value numeric(BinaryOp op, const Value& a, const Value& b) {
  const bool ints = is_int_like(a) && is_int_like(b);
  switch (op) {
    case BinaryOp::kAdd:
      return ints ? Value::integer(checked_add(a.as_integral(), b.as_integral()))
                  : Value::floating(a.as_double() + b.as_double());
    case BinaryOp::kSub:
      return ints ? Value::integer(checked_sub(a.as_integral(), b.as_integral()))
                  : Value::floating(a.as_double() - b.as_double());
    case BinaryOp::kMul:
      return ints ? Value::integer(checked_mul(a.as_integral(), b.as_integral()))
                  : Value::floating(a.as_double() * b.as_double());
    case BinaryOp::kDiv:
      if (b.as_double() == 0.0) render_fail("division by zero");
      if (ints) {
        // Python divides ints exactly then rounds once; doubles are exact up to 2^53.
        return Value::floating(static_cast<double>(a.as_integral()) /
                               static_cast<double>(b.as_integral()));
      }
      return Value::floating(a.as_double() / b.as_double());
    case BinaryOp::kFloorDiv:
      return ints ? Value::integer(floor_div(a.as_integral(), b.as_integral()))
                  : Value::floating(floor_div(a.as_double(), b.as_double()));
    case BinaryOp::kMod:
      return ints ? Value::integer(floor_mod(a.as_integral(), b.as_integral()))
                  : Value::floating(floor_mod(a.as_double(), b.as_double()));
    case BinaryOp::kPow:
      if (ints && b.as_integral() >= 0) {
        return Value::integer(checked_pow(a.as_integral(), b.as_integral()));
      }
      if (a.as_double() == 0.0 && b.as_double() < 0) {
        render_fail("0.0 cannot be raised to a negative power");
      }
      if (a.as_double() < 0 && std::floor(b.as_double()) != b.as_double()) {
        render_fail("a negative number to a fractional power (a complex number) is not supported");
      }
      return Value::floating(std::pow(a.as_double(), b.as_double()));
  }
  unsupported_operands(op, a, b);
}

// The result of a < b style comparisons between two values Python orders.
int three_way(const Value& a, const Value& b, std::string_view op) {
  if (a.is_number() && b.is_number()) {
    if (is_int_like(a) && is_int_like(b)) {
      return a.as_integral() < b.as_integral() ? -1 : a.as_integral() > b.as_integral() ? 1 : 0;
    }
    const double x = a.as_double();
    const double y = b.as_double();
    if (std::isnan(x) || std::isnan(y)) return 2;  // unordered: every comparison is false
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (is_list_or_tuple(a) && is_list_or_tuple(b) && a.as_sequence().kind == b.as_sequence().kind) {
    const auto& x = a.as_sequence().items;
    const auto& y = b.as_sequence().items;
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal(x[i], y[i])) return three_way(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  render_fail("'{}' not supported between instances of '{}' and '{}'", op, type_name(a),
              type_name(b));
}

}  // namespace

void fail_undefined(const Value& value) {
  const std::string& hint = value.undefined_hint();
  render_fail("{}", hint.empty() ? "the value is undefined" : hint);
}

Value binary_operation(BinaryOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) return numeric(op, a, b);
  if ((a.is_markup() || b.is_markup()) &&
      (op == BinaryOp::kAdd || op == BinaryOp::kMod || op == BinaryOp::kMul)) {
    // Markup escapes the other operand (or the arguments) here.
    render_fail("the operator {} on a Markup string (from |safe or |escape) is not supported",
                symbol(op));
  }
  switch (op) {
    case BinaryOp::kAdd:
      if (a.is_string() && b.is_string()) return Value::string(a.as_string() + b.as_string());
      if (is_list_or_tuple(a) && is_list_or_tuple(b) &&
          a.as_sequence().kind == b.as_sequence().kind) {
        Sequence s{a.as_sequence().kind, a.as_sequence().items};
        s.items.insert(s.items.end(), b.as_sequence().items.begin(), b.as_sequence().items.end());
        return Value::sequence(std::move(s));
      }
      break;
    case BinaryOp::kMul:
      if ((a.is_string() || is_list_or_tuple(a)) && is_int_like(b)) {
        return repeat(a, b.as_integral());
      }
      if (is_int_like(a) && (b.is_string() || is_list_or_tuple(b))) {
        return repeat(b, a.as_integral());
      }
      break;
    case BinaryOp::kMod:
      if (a.is_string()) return Value::string(percent_format(a.as_string(), b));
      break;
    case BinaryOp::kSub:
    case BinaryOp::kDiv:
    case BinaryOp::kFloorDiv:
    case BinaryOp::kPow:
      break;
  }
  unsupported_operands(op, a, b);
}

Value negate(const Value& value) {
  if (value.is_undefined()) fail_undefined(value);
  if (is_int_like(value)) return Value::integer(checked_sub(0, value.as_integral()));
  if (value.kind() == Value::Kind::kFloat) return Value::floating(-value.as_float());
  render_fail("bad operand type for unary -: '{}'", type_name(value));
}

Value unary_plus(const Value& value) {
  if (value.is_undefined()) fail_undefined(value);
  if (is_int_like(value)) return Value::integer(value.as_integral());
  if (value.kind() == Value::Kind::kFloat) return value;
  render_fail("bad operand type for unary +: '{}'", type_name(value));
}

bool compare(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::kEq:
      return equal(a, b);
    case CompareOp::kNe:
      return !equal(a, b);
    case CompareOp::kLt:
      return three_way(a, b, "<") == -1;
    case CompareOp::kLe: {
      const int c = three_way(a, b, "<=");
      return c == -1 || c == 0;
    }
    case CompareOp::kGt:
      return three_way(a, b, ">") == 1;
    case CompareOp::kGe: {
      const int c = three_way(a, b, ">=");
      return c == 1 || c == 0;
    }
    case CompareOp::kIn:
      return contains(b, a);
    case CompareOp::kNotIn:
      return !contains(b, a);
  }
  return false;
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        render_fail("'in <string>' requires string as left operand, not {}", type_name(item));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kSequence:
      for (const Value& v : container.as_sequence().items) {
        if (equal(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (!hashable(item)) render_fail("unhashable type: '{}'", type_name(item));
      return container.as_dict().find(item) != nullptr;
    case Value::Kind::kIterator: {
      Iterator& it = container.as_iterator();
      while (it.next < it.items.size()) {
        if (equal(it.items[it.next++], item)) return true;
      }
      return false;
    }
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kObject:
    case Value::Kind::kFunction:
      break;
  }
  render_fail("argument of type '{}' is not iterable", type_name(container));
}

}  // namespace offgen::jinja
