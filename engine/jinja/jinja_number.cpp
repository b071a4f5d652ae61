// See jinja_number.h. float_repr follows CPython's float_repr_style "short": the shortest
// round-trip digits, printed fixed when the decimal point falls within -4 < decpt <= 16.
#include "engine/jinja/jinja_number.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "engine/jinja/jinja_error.h"
#include "engine/jinja/jinja_text.h"

namespace offgen::jinja {

namespace {

// The first code point of each run of ten decimal digits (Unicode 14 category Nd: every one is
// such a run), for int() and float(), which read any script's digits.
constexpr char32_t kDigitZeros[] = {
    0x30,    0x660,   0x6F0,   0x7C0,   0x966,   0x9E6,   0xA66,   0xAE6,   0xB66,   0xBE6,
    0xC66,   0xCE6,   0xD66,   0xDE6,   0xE50,   0xED0,   0xF20,   0x1040,  0x1090,  0x17E0,
    0x1810,  0x1946,  0x19D0,  0x1A80,  0x1A90,  0x1B50,  0x1BB0,  0x1C40,  0x1C50,  0xA620,
    0xA8D0,  0xA900,  0xA9D0,  0xA9F0,  0xAA50,  0xABF0,  0xFF10,  0x104A0, 0x10D30, 0x11066,
    0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650, 0x116C0, 0x11730, 0x118E0,
    0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0, 0x16B50, 0x1D7CE, 0x1D7D8, 0x1D7E2,
    0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
};

// CPython's _PyUnicode_TransformDecimalAndSpaceToASCII, which int() and float() apply first:
// Unicode whitespace becomes ' ', a decimal digit of any script its ASCII digit, and any other
// non-ASCII character '?' (which then fails to parse).
std::string to_ascii_number(std::string_view s) {
  if (text::is_ascii(s)) return std::string(s);
  std::string out;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const char32_t c = text::next_code_point(s, pos);
    char ascii = '?';
    if (c < 0x80) {
      ascii = static_cast<char>(c);
    } else if (text::is_space(c)) {
      ascii = ' ';
    } else {
      for (const char32_t zero : kDigitZeros) {
        if (c >= zero && c < zero + 10) ascii = static_cast<char>('0' + (c - zero));
      }
    }
    out.push_back(ascii);
  }
  return out;
}

std::string_view strip_python_space(std::string_view s) {
  std::size_t begin = 0;
  std::size_t end = s.size();
  while (begin < end && text::is_space(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && text::is_space(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return 99;
}

// Removes the underscores of a digit run ("1_000"), nullopt where one is not between digits.
std::optional<std::string> remove_underscores(std::string_view s, bool leading_allowed) {
  std::string out;
  bool previous_digit = leading_allowed;
  for (const char c : s) {
    if (c == '_') {
      if (!previous_digit) return std::nullopt;
      previous_digit = false;
      continue;
    }
    previous_digit = std::isalnum(static_cast<unsigned char>(c)) != 0;
    out.push_back(c);
  }
  if (!s.empty() && s.back() == '_') return std::nullopt;
  return out;
}

}  // namespace

std::string float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), x, std::chars_format::scientific);
  const std::string_view sci(buffer, static_cast<std::size_t>(result.ptr - buffer));
  const bool negative = sci.front() == '-';
  const std::size_t e = sci.find('e');
  std::string digits;
  for (const char c : sci.substr(negative ? 1 : 0, e - (negative ? 1 : 0))) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = 0;
  const std::string_view exp_text = sci.substr(e + 1);
  std::from_chars(exp_text.data() + (exp_text.front() == '+' ? 1 : 0),
                  exp_text.data() + exp_text.size(), exponent);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int decpt = exponent + 1;
  const int n = static_cast<int>(digits.size());
  std::string out = negative ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits.substr(0, 1);
    if (n > 1) out.append(".").append(digits, 1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (decpt <= 0) {
    out.append("0.").append(static_cast<std::size_t>(-decpt), '0').append(digits);
  } else if (decpt >= n) {
    out.append(digits).append(static_cast<std::size_t>(decpt - n), '0').append(".0");
  } else {
    out.append(digits, 0, static_cast<std::size_t>(decpt))
        .append(".")
        .append(digits, static_cast<std::size_t>(decpt));
  }
  return out;
}

std::optional<std::int64_t> parse_int(std::string_view text, int base) {
  const std::string ascii = to_ascii_number(text);
  std::string_view s = strip_python_space(ascii);
  bool negative = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  bool prefixed = false;
  if (s.size() >= 2 && s[0] == '0') {
    const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(s[1])));
    const int prefix_base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefix_base != 0 && (base == 0 || base == prefix_base)) {
      base = prefix_base;
      prefixed = true;
      s.remove_prefix(2);
    }
  }
  if (base == 0) {
    base = 10;
    // Base 0 reads decimals without leading zeros, as Python source does.
    if (s.size() > 1 && s[0] == '0' && s.find_first_not_of("0_") != std::string_view::npos) {
      return std::nullopt;
    }
  }
  if (base < 2 || base > 36) render_fail("int() base must be >= 2 and <= 36, or 0");
  const auto digits = remove_underscores(s, prefixed);
  if (!digits || digits->empty()) return std::nullopt;
  std::int64_t value = 0;
  for (const char c : *digits) {
    const int d = digit_value(c);
    if (d >= base) return std::nullopt;
    value = checked_add(checked_mul(value, base), negative ? -d : d);
  }
  return value;
}

std::optional<double> parse_float(std::string_view text) {
  const std::string ascii = to_ascii_number(text);
  const std::string_view s = strip_python_space(ascii);
  std::string lowered;
  for (const char c : s) {
    lowered.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  std::string_view body = lowered;
  double sign = 1.0;
  if (!body.empty() && (body.front() == '+' || body.front() == '-')) {
    sign = body.front() == '-' ? -1.0 : 1.0;
    body.remove_prefix(1);
  }
  if (body == "inf" || body == "infinity") return sign * std::numeric_limits<double>::infinity();
  if (body == "nan") return std::numeric_limits<double>::quiet_NaN();
  // Digits, at most one '.', and an exponent: checked here because strtod also takes hex.
  std::size_t i = 0;
  std::size_t mantissa_digits = 0;
  while (i < body.size() && (std::isdigit(static_cast<unsigned char>(body[i])) || body[i] == '_')) {
    mantissa_digits += body[i] != '_';
    ++i;
  }
  if (i < body.size() && body[i] == '.') {
    ++i;
    while (i < body.size() &&
           (std::isdigit(static_cast<unsigned char>(body[i])) || body[i] == '_')) {
      mantissa_digits += body[i] != '_';
      ++i;
    }
  }
  if (mantissa_digits == 0) return std::nullopt;
  if (i < body.size() && body[i] == 'e') {
    ++i;
    if (i < body.size() && (body[i] == '+' || body[i] == '-')) ++i;
    const std::size_t exponent_start = i;
    while (i < body.size() &&
           (std::isdigit(static_cast<unsigned char>(body[i])) || body[i] == '_')) {
      ++i;
    }
    if (i == exponent_start) return std::nullopt;
  }
  if (i != body.size()) return std::nullopt;
  // Underscores only between digits: strip them around the '.' / 'e' pieces one by one.
  std::string clean;
  std::size_t piece = 0;
  for (std::size_t k = 0; k <= body.size(); ++k) {
    if (k == body.size() || body[k] == '.' || body[k] == 'e' || body[k] == '+' || body[k] == '-') {
      const auto digits = remove_underscores(body.substr(piece, k - piece), false);
      if (!digits) return std::nullopt;
      clean += *digits;
      if (k < body.size()) clean.push_back(body[k]);
      piece = k + 1;
    }
  }
  return sign * std::strtod(clean.c_str(), nullptr);
}

double round_float(double x, std::int64_t digits) {
  if (digits < 0) render_fail("round() to a negative number of digits is not supported");
  if (!std::isfinite(x) || digits > 340) return x;
  const int precision = static_cast<int>(digits);
  const int size = std::snprintf(nullptr, 0, "%.*f", precision, x);
  std::string buffer(static_cast<std::size_t>(size) + 1, '\0');
  std::snprintf(buffer.data(), buffer.size(), "%.*f", precision, x);
  return std::strtod(buffer.c_str(), nullptr);
}

std::int64_t checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    render_fail("integer result too large (offgen's ints are 64-bit)");
  }
  return r;
}

std::int64_t checked_sub(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) {
    render_fail("integer result too large (offgen's ints are 64-bit)");
  }
  return r;
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) {
    render_fail("integer result too large (offgen's ints are 64-bit)");
  }
  return r;
}

std::int64_t checked_pow(std::int64_t base, std::int64_t exponent) {
  std::int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = checked_mul(result, base);
    exponent >>= 1;
    if (exponent > 0) base = checked_mul(base, base);
  }
  return result;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  if (b == 0) render_fail("integer division or modulo by zero");
  if (a == std::numeric_limits<std::int64_t>::min() && b == -1) {
    render_fail("integer result too large (offgen's ints are 64-bit)");
  }
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::int64_t floor_mod(std::int64_t a, std::int64_t b) {
  if (b == 0) render_fail("integer division or modulo by zero");
  if (b == -1) return 0;
  std::int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double floor_div(double a, double b) {
  if (b == 0.0) render_fail("float floor division by zero");
  // CPython's float_divmod.
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) div -= 1.0;
  }
  if (div != 0.0) {
    double floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
    return floordiv;
  }
  return std::copysign(0.0, a / b);
}

double floor_mod(double a, double b) {
  if (b == 0.0) render_fail("float modulo by zero");
  double mod = std::fmod(a, b);
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}

}  // namespace offgen::jinja
