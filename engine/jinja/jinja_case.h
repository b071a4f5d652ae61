// Python's Unicode case operations (str.upper, lower, capitalize, title, islower, isupper) for the
// scripts chat templates meet: ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic, plus every
// script without case (CJK, Arabic, Hebrew, Indic, emoji, ...), which passes through unchanged.
// A character of another cased script (Latin Extended-B and Additional, Armenian, Georgian,
// fullwidth Latin, ...) or one whose mapping depends on context (Greek capital sigma in lower())
// is a RenderError naming it rather than a result that could differ from Python's.
#pragma once

#include <string>
#include <string_view>

namespace offgen::jinja::text {

std::string upper(std::string_view s);
std::string lower(std::string_view s);
// First character in title case, the rest lower case (Python 3.8+).
std::string capitalize(std::string_view s);
// str.title(): a character after a cased one is lowered, any other is title-cased.
std::string title(std::string_view s);
bool is_lower(std::string_view s);
bool is_upper(std::string_view s);

}  // namespace offgen::jinja::text
