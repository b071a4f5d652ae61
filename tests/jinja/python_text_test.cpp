// The Python building blocks under the interpreter: float repr, int() / float() parsing, round(),
// str methods on code points and Unicode whitespace, repr() quoting, case mapping. Expected values
// are CPython 3.11's. (The case tables and float_repr were also checked against Python on every
// code point and on 200,000 random doubles when they were written.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/jinja/jinja_case.h"
#include "engine/jinja/jinja_error.h"
#include "engine/jinja/jinja_number.h"
#include "engine/jinja/jinja_text.h"

namespace offgen::jinja {
namespace {

TEST(PythonText, FloatReprIsShortestRoundTripWithPythonsLayout) {
  EXPECT_EQ(float_repr(1.0), "1.0");
  EXPECT_EQ(float_repr(-0.0), "-0.0");
  EXPECT_EQ(float_repr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(float_repr(1e16), "1e+16");
  EXPECT_EQ(float_repr(9999999999999998.0), "9999999999999998.0");
  EXPECT_EQ(float_repr(1e-4), "0.0001");
  EXPECT_EQ(float_repr(1e-5), "1e-05");
  EXPECT_EQ(float_repr(1.5e300), "1.5e+300");
  EXPECT_EQ(float_repr(5e-324), "5e-324");
  EXPECT_EQ(float_repr(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(float_repr(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(float_repr(std::nan("")), "nan");
}

TEST(PythonText, IntAndFloatParsingFollowPython) {
  EXPECT_EQ(parse_int(" 42 ", 10), 42);
  EXPECT_EQ(parse_int("-1_000", 10), -1000);
  EXPECT_EQ(parse_int("0x1f", 16), 31);
  EXPECT_EQ(parse_int("0b101", 0), 5);
  EXPECT_EQ(parse_int("ff", 16), 255);
  EXPECT_EQ(parse_int("-9223372036854775808", 10), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(parse_int("1__0", 10), std::nullopt);
  EXPECT_EQ(parse_int("_1", 10), std::nullopt);
  EXPECT_EQ(parse_int("4.5", 10), std::nullopt);
  EXPECT_EQ(parse_int("010", 0), std::nullopt);
  EXPECT_EQ(parse_int("", 10), std::nullopt);
  EXPECT_THROW(parse_int("9223372036854775808", 10), RenderError);
  // Any script's decimal digits and Unicode whitespace, as CPython reads them.
  EXPECT_EQ(parse_int("\u00a0\u0663\uff14", 10), 34);
  EXPECT_EQ(parse_int("3 个", 10), std::nullopt);
  EXPECT_EQ(parse_float("\u0661.\u0665"), 1.5);
  EXPECT_EQ(parse_float(" 1.5 "), 1.5);
  EXPECT_EQ(parse_float("1e3"), 1000.0);
  EXPECT_EQ(parse_float(".5"), 0.5);
  EXPECT_EQ(parse_float("5."), 5.0);
  EXPECT_EQ(parse_float("-1_0.5"), -10.5);
  EXPECT_EQ(parse_float("-Infinity"), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(*parse_float("nan")));
  EXPECT_EQ(parse_float("0x10"), std::nullopt);  // strtod would take it; Python does not
  EXPECT_EQ(parse_float("1e"), std::nullopt);
  EXPECT_EQ(parse_float("."), std::nullopt);
}

TEST(PythonText, RoundIsCorrectlyRoundedHalfEven) {
  EXPECT_EQ(round_float(2.5, 0), 2.0);
  EXPECT_EQ(round_float(3.5, 0), 4.0);
  EXPECT_EQ(round_float(2.675, 2), 2.67);  // 2.675 is 2.67499999... in binary
  EXPECT_EQ(round_float(0.125, 2), 0.12);
  EXPECT_EQ(round_float(-0.4, 0), 0.0);
  EXPECT_TRUE(std::signbit(round_float(-0.4, 0)));
  EXPECT_THROW(round_float(1234.5, -2), RenderError);
}

TEST(PythonText, IntegerArithmeticIsPythonsOrFails) {
  EXPECT_EQ(floor_div(std::int64_t{-7}, std::int64_t{2}), -4);
  EXPECT_EQ(floor_mod(std::int64_t{-7}, std::int64_t{3}), 2);
  EXPECT_EQ(floor_mod(std::int64_t{7}, std::int64_t{-3}), -2);
  EXPECT_EQ(floor_div(-7.5, 2.0), -4.0);
  EXPECT_EQ(floor_mod(-7.5, 2.0), 0.5);
  EXPECT_EQ(checked_pow(3, 4), 81);
  EXPECT_THROW(checked_pow(10, 19), RenderError);
  EXPECT_THROW(checked_mul(std::numeric_limits<std::int64_t>::max(), 2), RenderError);
  EXPECT_THROW(floor_div(std::int64_t{1}, std::int64_t{0}), RenderError);
}

TEST(PythonText, StringMethodsCountCodePointsAndUnicodeWhitespace) {
  EXPECT_EQ(text::length("héllo😀"), 6u);
  EXPECT_EQ(text::find("héllo", "l"), 2);
  EXPECT_EQ(text::rfind("héllo", "l"), 3);
  EXPECT_EQ(text::find("abc", ""), 0);
  EXPECT_EQ(text::count("aaaa", "aa"), 2);
  EXPECT_EQ(text::count("ab", ""), 3);
  EXPECT_EQ(text::strip("\u00a0\u3000 x \x1f\u2028", std::nullopt, text::StripSide::kBoth), "x");
  EXPECT_EQ(text::strip("éxé", std::string("é"), text::StripSide::kLeft), "xé");
  EXPECT_EQ(text::split("  a\u3000b  ", std::nullopt, -1), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(text::split("a,b,c", std::string(","), 1), (std::vector<std::string>{"a", "b,c"}));
  EXPECT_EQ(text::rsplit("a,b,c", std::string(","), 1), (std::vector<std::string>{"a,b", "c"}));
  EXPECT_EQ(text::split("", std::string(","), -1), (std::vector<std::string>{""}));
  EXPECT_EQ(text::split("", std::nullopt, -1), (std::vector<std::string>{}));
  EXPECT_THROW(text::split("a", std::string(""), -1), RenderError);
  EXPECT_EQ(text::splitlines("a\r\nb\u2028c\n", false), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(text::splitlines("a\r\nb", true), (std::vector<std::string>{"a\r\n", "b"}));
  EXPECT_EQ(text::replace("aaa", "a", "b", 2), "bba");
  EXPECT_EQ(text::replace("ab", "", "-", -1), "-a-b-");
}

TEST(PythonText, ReprQuotesAndEscapesAsPython) {
  EXPECT_EQ(text::repr("plain"), "'plain'");
  EXPECT_EQ(text::repr("it's"), "\"it's\"");
  EXPECT_EQ(text::repr("both ' \""), "'both \\' \"'");
  EXPECT_EQ(text::repr("a\nb\t\\"), "'a\\nb\\t\\\\'");
  EXPECT_EQ(text::repr("\x01\x7f\u00a0\u00ad\u200b\u2028"), "'\\x01\\x7f\\xa0\\xad\\u200b\\u2028'");
  EXPECT_EQ(text::repr("é中😀"), "'é中😀'");
}

TEST(PythonText, CaseMappingOfTheSupportedScripts) {
  EXPECT_EQ(text::upper("straße ÿ µ ı ſ"), "STRASSE Ÿ Μ I S");
  EXPECT_EQ(text::lower("ÀÉÎ İ ΆΩ ЖЁ Ӂ"), "àéî i̇ άω жё ӂ");
  EXPECT_EQ(text::capitalize("ßIG DEAL"), "Ssig deal");
  EXPECT_EQ(text::title("they're 2nd-best"), "They'Re 2Nd-Best");
  EXPECT_EQ(text::upper("日本語 😀 مرحبا"), "日本語 😀 مرحبا");
  EXPECT_TRUE(text::is_lower("abc 1"));
  EXPECT_FALSE(text::is_lower("123"));
  EXPECT_TRUE(text::is_upper("ÀB"));
  EXPECT_TRUE(text::is_lower("ª"));  // Other_Lowercase
  EXPECT_THROW(text::lower("Σ"), RenderError);
  EXPECT_THROW(text::upper("ǆ"), RenderError);
  EXPECT_THROW(text::upper("ｆｕｌｌ"), RenderError);
}

}  // namespace
}  // namespace offgen::jinja
