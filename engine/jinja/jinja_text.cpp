// See jinja_text.h. Byte-level search is safe on valid UTF-8 (no code point's encoding occurs
// inside another's), so only the operations that count or classify code points decode.
#include "engine/jinja/jinja_text.h"

#include <algorithm>
#include <array>
#include <utility>

#include "engine/jinja/jinja_error.h"

namespace offgen::jinja::text {

namespace {

// Assigned code points that Python's str.isprintable() rejects (Unicode 14, as Python 3.11):
// categories Cc, Cf, Co, Cs, Zl, Zp and Zs other than the space. repr() escapes these.
// Unassigned code points (Cn), which Python escapes too, are taken as printable.
constexpr std::array<std::pair<char32_t, char32_t>, 28> kUnprintable = {{
    {0x0, 0x1F},        {0x7F, 0xA0},       {0xAD, 0xAD},       {0x600, 0x605},
    {0x61C, 0x61C},     {0x6DD, 0x6DD},     {0x70F, 0x70F},     {0x890, 0x891},
    {0x8E2, 0x8E2},     {0x1680, 0x1680},   {0x180E, 0x180E},   {0x2000, 0x200F},
    {0x2028, 0x202F},   {0x205F, 0x2064},   {0x2066, 0x206F},   {0x3000, 0x3000},
    {0xD800, 0xF8FF},   {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},   {0x110BD, 0x110BD},
    {0x110CD, 0x110CD}, {0x13430, 0x13438}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A},
    {0xE0001, 0xE0001}, {0xE0020, 0xE007F}, {0xF0000, 0xFFFFD}, {0x100000, 0x10FFFD},
}};

bool printable(char32_t c) {
  for (const auto& [first, last] : kUnprintable) {
    if (c < first) return true;
    if (c <= last) return false;
  }
  return true;
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

// Code point index of byte offset `byte` in `s`.
std::int64_t code_point_index(std::string_view s, std::size_t byte) {
  return static_cast<std::int64_t>(length(s.substr(0, byte)));
}

std::vector<std::string> split_whitespace(std::string_view s, std::int64_t maxsplit) {
  const std::u32string u = decode(s);
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (true) {
    while (i < u.size() && is_space(u[i])) ++i;
    if (i == u.size()) break;
    if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) == maxsplit) {
      parts.push_back(encode(std::u32string_view(u).substr(i)));
      break;
    }
    std::size_t j = i;
    while (j < u.size() && !is_space(u[j])) ++j;
    parts.push_back(encode(std::u32string_view(u).substr(i, j - i)));
    i = j;
  }
  return parts;
}

std::vector<std::string> rsplit_whitespace(std::string_view s, std::int64_t maxsplit) {
  const std::u32string u = decode(s);
  std::vector<std::string> parts;
  std::size_t end = u.size();
  while (true) {
    while (end > 0 && is_space(u[end - 1])) --end;
    if (end == 0) break;
    if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) == maxsplit) {
      parts.push_back(encode(std::u32string_view(u).substr(0, end)));
      break;
    }
    std::size_t begin = end;
    while (begin > 0 && !is_space(u[begin - 1])) --begin;
    parts.push_back(encode(std::u32string_view(u).substr(begin, end - begin)));
    end = begin;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

}  // namespace

char32_t next_code_point(std::string_view utf8, std::size_t& pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(utf8[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) {
    ++pos;
    return lead;
  }
  std::size_t extra = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : 1;
  char32_t c = lead & (0x3F >> extra);
  for (std::size_t i = 1; i <= extra && pos + i < utf8.size(); ++i) {
    c = (c << 6) | (byte(pos + i) & 0x3F);
  }
  pos += extra + 1;
  return c;
}

std::u32string decode(std::string_view utf8) {
  std::u32string out;
  out.reserve(utf8.size());
  std::size_t pos = 0;
  while (pos < utf8.size()) out.push_back(next_code_point(utf8, pos));
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string encode(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (const char32_t c : code_points) append_utf8(out, c);
  return out;
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    std::size_t extra = 0;
    char32_t min = 0;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      extra = 1;
      min = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      extra = 2;
      min = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      extra = 3;
      min = 0x10000;
    } else {
      return false;
    }
    if (i + extra >= s.size()) return false;
    char32_t c = lead & (0x3F >> extra);
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      c = (c << 6) | (b & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::size_t length(std::string_view s) {
  return static_cast<std::size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, StripSide side) {
  const std::u32string u = decode(s);
  const std::u32string set = chars ? decode(*chars) : std::u32string();
  const auto strippable = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : is_space(c);
  };
  std::size_t begin = 0;
  std::size_t end = u.size();
  if (side != StripSide::kRight) {
    while (begin < end && strippable(u[begin])) ++begin;
  }
  if (side != StripSide::kLeft) {
    while (end > begin && strippable(u[end - 1])) --end;
  }
  return encode(std::u32string_view(u).substr(begin, end - begin));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               std::int64_t maxsplit) {
  if (!sep) return split_whitespace(s, maxsplit);
  if (sep->empty()) render_fail("empty separator");
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (maxsplit < 0 || static_cast<std::int64_t>(parts.size()) < maxsplit) {
    const std::size_t at = s.find(*sep, begin);
    if (at == std::string_view::npos) break;
    parts.emplace_back(s.substr(begin, at - begin));
    begin = at + sep->size();
  }
  parts.emplace_back(s.substr(begin));
  return parts;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                std::int64_t maxsplit) {
  if (!sep) return rsplit_whitespace(s, maxsplit);
  if (sep->empty()) render_fail("empty separator");
  std::vector<std::string> parts;
  std::size_t end = s.size();
  while (maxsplit < 0 || static_cast<std::int64_t>(parts.size()) < maxsplit) {
    if (end < sep->size()) break;
    const std::size_t at = s.rfind(*sep, end - sep->size());
    if (at == std::string_view::npos) break;
    parts.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
    end = at;
  }
  parts.emplace_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  const std::u32string u = decode(s);
  std::vector<std::string> lines;
  std::size_t begin = 0;
  std::size_t i = 0;
  while (i < u.size()) {
    if (!is_line_break(u[i])) {
      ++i;
      continue;
    }
    std::size_t end = i + 1;
    if (u[i] == '\r' && end < u.size() && u[end] == '\n') ++end;
    lines.push_back(encode(std::u32string_view(u).substr(begin, (keepends ? end : i) - begin)));
    begin = i = end;
  }
  if (begin < u.size()) lines.push_back(encode(std::u32string_view(u).substr(begin)));
  return lines;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    std::int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `with` before every character and at the end.
    const std::u32string u = decode(s);
    std::int64_t done = 0;
    for (const char32_t c : u) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      append_utf8(out, c);
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  std::size_t begin = 0;
  std::int64_t done = 0;
  while (count < 0 || done < count) {
    const std::size_t at = s.find(old, begin);
    if (at == std::string_view::npos) break;
    out += s.substr(begin, at - begin);
    out += with;
    begin = at + old.size();
    ++done;
  }
  out += s.substr(begin);
  return out;
}

std::int64_t find(std::string_view s, std::string_view sub) {
  const std::size_t at = s.find(sub);
  return at == std::string_view::npos ? -1 : code_point_index(s, at);
}

std::int64_t rfind(std::string_view s, std::string_view sub) {
  const std::size_t at = s.rfind(sub);
  return at == std::string_view::npos ? -1 : code_point_index(s, at);
}

std::int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<std::int64_t>(length(s)) + 1;
  std::int64_t n = 0;
  for (std::size_t at = s.find(sub); at != std::string_view::npos;
       at = s.find(sub, at + sub.size())) {
    ++n;
  }
  return n;
}

std::string repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  std::size_t pos = 0;
  while (pos < s.size()) {
    const char32_t c = next_code_point(s, pos);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (printable(c)) {
      append_utf8(out, c);
    } else if (c <= 0xFF) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
    } else if (c <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<unsigned>(c));
    }
  }
  out.push_back(quote);
  return out;
}

}  // namespace offgen::jinja::text
