// Character classes as Hugging Face tokenizers' Oniguruma sees them, spelled for PCRE2 (inside a
// character class: no brackets). Oniguruma's \s is the White_Space property, while PCRE2's \s
// under PCRE2_UCP lacks U+0085 and has U+180E; and the Oniguruma in tokenizers 0.23 has Unicode
// 16.0 tables where PCRE2 10.42 (Debian 12) has 14.0, so letters and numbers assigned in
// 15.0..16.0 are listed explicitly (with a newer PCRE2 the lists are redundant and harmless).
// tests/data/tokenizer/unicode_classes.txt holds HF's class of every code point.
#pragma once

#include <cstdint>
#include <string_view>

namespace offgen::unicode_classes {

// Letters (Lo/Lm/Lu/Ll) and numbers (Nd/Nl/No) new in Unicode 15.0, 15.1 and 16.0: HF's
// classification of every code point (tools/make_tokenizer_fixtures.py) minus Unicode 14.0's.
inline constexpr std::string_view kNewLetters =
    R"(\x{1C89}-\x{1C8A}\x{A7CB}-\x{A7CD}\x{A7DA}-\x{A7DC}\x{105C0}-\x{105F3}\x{10D4A}-\x{10D65})"
    R"(\x{10D6F}-\x{10D85}\x{10EC2}-\x{10EC4}\x{1123F}-\x{11240}\x{11380}-\x{11389}\x{1138B})"
    R"(\x{1138E}\x{11390}-\x{113B5}\x{113B7}\x{113D1}\x{113D3}\x{11BC0}-\x{11BE0}\x{11F02})"
    R"(\x{11F04}-\x{11F10}\x{11F12}-\x{11F33}\x{1342F}\x{13441}-\x{13446}\x{13460}-\x{143FA})"
    R"(\x{16100}-\x{1611D}\x{16D40}-\x{16D6C}\x{18CFF}\x{1B132}\x{1B155}\x{1DF25}-\x{1DF2A})"
    R"(\x{1E030}-\x{1E06D}\x{1E4D0}-\x{1E4EB}\x{1E5D0}-\x{1E5ED}\x{1E5F0}\x{2B739})"
    R"(\x{2EBF0}-\x{2EE5D}\x{31350}-\x{323AF})";
inline constexpr std::string_view kNewNumbers =
    R"(\x{10D40}-\x{10D49}\x{116D0}-\x{116E3}\x{11BF0}-\x{11BF9}\x{11F50}-\x{11F59})"
    R"(\x{16130}-\x{16139}\x{16D70}-\x{16D79}\x{1CCF0}-\x{1CCF9}\x{1D2C0}-\x{1D2D3})"
    R"(\x{1E4F0}-\x{1E4F9}\x{1E5F1}-\x{1E5FA})";

// The White_Space property (PropList.txt), which is what Oniguruma's \s matches.
inline constexpr std::string_view kWhiteSpace =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F})"
    R"(\x{3000})";

// Whether `code_point` has the White_Space property (the set kWhiteSpace spells), which is also
// what Rust's regex crate means by \s.
constexpr bool is_white_space(std::uint32_t code_point) {
  return (code_point >= 0x09 && code_point <= 0x0D) || code_point == 0x20 || code_point == 0x85 ||
         code_point == 0xA0 || code_point == 0x1680 ||
         (code_point >= 0x2000 && code_point <= 0x200A) || code_point == 0x2028 ||
         code_point == 0x2029 || code_point == 0x202F || code_point == 0x205F ||
         code_point == 0x3000;
}

}  // namespace offgen::unicode_classes
