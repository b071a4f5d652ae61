// Python's str methods on UTF-8 strings. Python indexes, counts and slices strings by code point
// and its whitespace is Unicode's (str.isspace), so these decode where the text is not ASCII.
// Strings are assumed valid UTF-8 (the template and the JSON context are checked on the way in).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace offgen::jinja::text {

std::u32string decode(std::string_view utf8);
std::string encode(std::u32string_view code_points);
void append_utf8(std::string& out, char32_t code_point);
// Decodes the code point at `pos`, advancing `pos` past it.
char32_t next_code_point(std::string_view utf8, std::size_t& pos);
bool valid_utf8(std::string_view bytes);
bool is_ascii(std::string_view s);

// len(s).
std::size_t length(std::string_view s);

// str.isspace() of one character: Unicode whitespace plus \x1c-\x1f, as Python and its `re`
// module's \s have it.
bool is_space(char32_t c);

// str.strip / lstrip / rstrip; `chars` nullopt strips whitespace.
enum class StripSide { kLeft, kRight, kBoth };
std::string strip(std::string_view s, const std::optional<std::string>& chars, StripSide side);

// str.split / str.rsplit (`sep` nullopt: runs of whitespace; maxsplit < 0: no limit). An empty
// `sep` is a RenderError, as Python's ValueError.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               std::int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                std::int64_t maxsplit);

// str.splitlines(keepends): Python's line boundaries, not just \n.
std::vector<std::string> splitlines(std::string_view s, bool keepends);

// str.replace(old, new, count) (count < 0: all).
std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    std::int64_t count);

// str.find / str.rfind: the code point index of `sub`, or -1.
std::int64_t find(std::string_view s, std::string_view sub);
std::int64_t rfind(std::string_view s, std::string_view sub);

// str.count(sub).
std::int64_t count(std::string_view s, std::string_view sub);

// repr(s): quoted the way Python picks, with its escapes for unprintable characters.
std::string repr(std::string_view s);

}  // namespace offgen::jinja::text
