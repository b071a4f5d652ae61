// Python's operators on interpreter values: arithmetic (+ - * / // % **), comparisons and `in`.
// A combination Python rejects (a TypeError) is a RenderError with Python's wording; using an
// Undefined in arithmetic fails with the reason it is undefined, as jinja2's Undefined does.
#pragma once

#include "engine/jinja/jinja_ast.h"
#include "engine/jinja/jinja_value.h"

namespace offgen::jinja {

// Throws the RenderError an operation on `value` (an Undefined) raises in jinja2.
[[noreturn]] void fail_undefined(const Value& value);

Value binary_operation(BinaryOp op, const Value& a, const Value& b);
Value negate(const Value& value);
Value unary_plus(const Value& value);
bool compare(CompareOp op, const Value& a, const Value& b);

// Python's `item in container`. Consumes a generator up to the match.
bool contains(const Value& container, const Value& item);

}  // namespace offgen::jinja
