// Python's number formatting and parsing: repr(float), int(str, base), float(str), round(x, n).
// Python's ints are unbounded; offgen's are 64-bit, and a result that does not fit is a
// RenderError rather than a wrapped value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace offgen::jinja {

// repr(x) == str(x) of a float: the shortest digits that round-trip, "1.0", "1e+16", "inf".
std::string float_repr(double x);

// int(s, base): surrounding whitespace, a sign, single underscores between digits and (for
// base 2 / 8 / 16, or base 0 which reads the prefix) a 0b / 0o / 0x prefix. Digits of any script
// count, as in Python. nullopt where Python raises ValueError; a RenderError where the value
// does not fit 64 bits.
std::optional<std::int64_t> parse_int(std::string_view s, int base);

// float(s): decimal or exponent notation, inf / infinity / nan in any case, surrounding
// whitespace. nullopt where Python raises ValueError.
std::optional<double> parse_float(std::string_view s);

// round(x, digits) of a float: to the nearest, ties to even on the exact binary value, as
// Python's correctly rounded round(). digits < 0 is a RenderError (not supported).
double round_float(double x, std::int64_t digits);

// 64-bit arithmetic that fails (RenderError) where Python's result would not fit.
std::int64_t checked_add(std::int64_t a, std::int64_t b);
std::int64_t checked_sub(std::int64_t a, std::int64_t b);
std::int64_t checked_mul(std::int64_t a, std::int64_t b);
std::int64_t checked_pow(std::int64_t base, std::int64_t exponent);  // exponent >= 0
// Python's // and % on ints (floor division; the remainder takes the divisor's sign).
std::int64_t floor_div(std::int64_t a, std::int64_t b);
std::int64_t floor_mod(std::int64_t a, std::int64_t b);
// Python's // and % on floats.
double floor_div(double a, double b);
double floor_mod(double a, double b);

}  // namespace offgen::jinja
