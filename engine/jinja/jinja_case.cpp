// See jinja_case.h. The mappings are Unicode 14's (Python 3.11), written as the regular pattern
// each block follows: a fixed offset between the cases, or upper / lower pairs on adjacent code
// points. tests/jinja checks them against Python for every code point of the supported blocks.
#include "engine/jinja/jinja_case.h"

#include <array>
#include <cstdint>

#include "engine/jinja/jinja_error.h"
#include "engine/jinja/jinja_text.h"

namespace offgen::jinja::text {

namespace {

enum class Case { kNone, kUpper, kLower };

struct CaseInfo {
  Case kind = Case::kNone;  // kNone: no case (a digit, CJK, punctuation, ...)
  char32_t upper = 0;       // the other case, or the character itself where it has none
  char32_t lower = 0;
};

// Blocks with cased letters this file does not map.
constexpr std::array<std::pair<char32_t, char32_t>, 38> kUnsupported = {{
    {0x0180, 0x02AF},   {0x02B0, 0x02B8},   {0x02C0, 0x02C1},   {0x02E0, 0x02E4},
    {0x0345, 0x0345},   {0x0370, 0x0373},   {0x0376, 0x0377},   {0x037A, 0x037D},
    {0x037F, 0x037F},   {0x0390, 0x0390},   {0x03B0, 0x03B0},   {0x03CF, 0x03FF},
    {0x0530, 0x058F},   {0x10A0, 0x10FF},   {0x13A0, 0x13FF},   {0x1C80, 0x1CBF},
    {0x1D00, 0x1DBF},   {0x1E00, 0x1FFF},   {0x2071, 0x209C},   {0x2100, 0x218F},
    {0x24B6, 0x24E9},   {0x2C00, 0x2D2F},   {0xA640, 0xA69F},   {0xA720, 0xA7FF},
    {0xAB30, 0xABBF},   {0xFB00, 0xFB17},   {0xFF21, 0xFF5A},   {0x10400, 0x104FF},
    {0x10570, 0x105BF}, {0x10780, 0x107BF}, {0x10C80, 0x10CFF}, {0x118A0, 0x118FF},
    {0x16E40, 0x16E9F}, {0x1D400, 0x1D7FF}, {0x1DF00, 0x1DFFF}, {0x1E030, 0x1E08F},
    {0x1E900, 0x1E95F}, {0x1F130, 0x1F189},
}};

// Upper / lower pairs on adjacent code points: the upper case is the even (or odd) one.
struct PairRange {
  char32_t first;
  char32_t last;
  bool upper_even;
};
constexpr std::array<PairRange, 10> kPairs = {{
    {0x0100, 0x012F, true},
    {0x0132, 0x0137, true},
    {0x0139, 0x0148, false},
    {0x014A, 0x0177, true},
    {0x0179, 0x017E, false},
    {0x0460, 0x0481, true},
    {0x048A, 0x04BF, true},
    {0x04C1, 0x04CE, false},
    {0x04D0, 0x04FF, true},
    {0x0500, 0x052F, true},
}};

// Upper case [first, last] maps to lower case [first + offset, last + offset].
struct OffsetRange {
  char32_t first;
  char32_t last;
  char32_t offset;
};
constexpr std::array<OffsetRange, 11> kOffsets = {{
    {'A', 'Z', 32},
    {0x00C0, 0x00D6, 32},
    {0x00D8, 0x00DE, 32},
    {0x0386, 0x0386, 38},
    {0x0388, 0x038A, 37},
    {0x038C, 0x038C, 64},
    {0x038E, 0x038F, 63},
    {0x0391, 0x03A1, 32},
    {0x03A3, 0x03AB, 32},
    {0x0400, 0x040F, 80},
    {0x0410, 0x042F, 32},
}};

CaseInfo upper_case(char32_t c, char32_t lower) {
  return {Case::kUpper, c, lower};
}
CaseInfo lower_case(char32_t c, char32_t upper) {
  return {Case::kLower, upper, c};
}

CaseInfo case_of(char32_t c) {
  for (const auto& [first, last] : kUnsupported) {
    if (c >= first && c <= last) {
      render_fail("changing the case of U+{:04X} is not supported", static_cast<unsigned>(c));
    }
  }
  for (const OffsetRange& r : kOffsets) {
    if (c >= r.first && c <= r.last) return upper_case(c, c + r.offset);
    if (c >= r.first + r.offset && c <= r.last + r.offset) return lower_case(c, c - r.offset);
  }
  for (const PairRange& r : kPairs) {
    if (c < r.first || c > r.last) continue;
    const bool even = c % 2 == 0;
    return even == r.upper_even ? upper_case(c, c + 1) : lower_case(c, c - 1);
  }
  switch (c) {
    case 0x00B5:  // micro sign
      return lower_case(c, 0x039C);
    case 0x00AA:  // ordinal indicators: lowercase without an upper case
    case 0x00BA:
    case 0x00DF:  // sharp s: its upper case is "SS", see upper_into
    case 0x0138:  // kra
      return lower_case(c, c);
    case 0x00FF:
      return lower_case(c, 0x0178);
    case 0x0178:
      return upper_case(c, 0x00FF);
    case 0x0130:  // I with dot: lower case "i̇", see lower_into
      return upper_case(c, c);
    case 0x0131:  // dotless i
      return lower_case(c, 'I');
    case 0x0149:  // n preceded by apostrophe: upper case is two characters
      render_fail("changing the case of U+0149 is not supported");
    case 0x017F:  // long s
      return lower_case(c, 'S');
    case 0x03C2:  // final sigma
      return lower_case(c, 0x03A3);
    case 0x04C0:
      return upper_case(c, 0x04CF);
    case 0x04CF:
      return lower_case(c, 0x04C0);
    default:
      return {Case::kNone, c, c};
  }
}

void upper_into(std::string& out, char32_t c) {
  if (c == 0x00DF) {
    out += "SS";
    return;
  }
  append_utf8(out, case_of(c).upper);
}

void lower_into(std::string& out, char32_t c) {
  if (c == 0x03A3) {
    // Python lowers it to σ or, at the end of a word, ς.
    render_fail("lower-casing U+03A3 (Greek capital sigma) is not supported");
  }
  if (c == 0x0130) {
    out += "i\u0307";
    return;
  }
  append_utf8(out, case_of(c).lower);
}

void title_into(std::string& out, char32_t c) {
  if (c == 0x00DF) {
    out += "Ss";
    return;
  }
  upper_into(out, c);
}

}  // namespace

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t pos = 0;
  while (pos < s.size()) upper_into(out, next_code_point(s, pos));
  return out;
}

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t pos = 0;
  while (pos < s.size()) lower_into(out, next_code_point(s, pos));
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t pos = 0;
  if (pos < s.size()) title_into(out, next_code_point(s, pos));
  while (pos < s.size()) lower_into(out, next_code_point(s, pos));
  return out;
}

std::string title(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool previous_cased = false;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const char32_t c = next_code_point(s, pos);
    if (previous_cased) {
      lower_into(out, c);
    } else {
      title_into(out, c);
    }
    previous_cased = case_of(c).kind != Case::kNone;
  }
  return out;
}

bool is_lower(std::string_view s) {
  bool cased = false;
  std::size_t pos = 0;
  while (pos < s.size()) {
    switch (case_of(next_code_point(s, pos)).kind) {
      case Case::kUpper:
        return false;
      case Case::kLower:
        cased = true;
        break;
      case Case::kNone:
        break;
    }
  }
  return cased;
}

bool is_upper(std::string_view s) {
  bool cased = false;
  std::size_t pos = 0;
  while (pos < s.size()) {
    switch (case_of(next_code_point(s, pos)).kind) {
      case Case::kLower:
        return false;
      case Case::kUpper:
        cased = true;
        break;
      case Case::kNone:
        break;
    }
  }
  return cased;
}

}  // namespace offgen::jinja::text
