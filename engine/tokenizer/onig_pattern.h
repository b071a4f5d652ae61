// Hugging Face tokenizers compiles its Split / Replace regexes with Oniguruma (Ruby syntax); this
// rewrites such a pattern in PCRE2 syntax with the same meaning, for the constructs that differ:
//  - \s, \S: Oniguruma's is the White_Space property, PCRE2's is not quite (unicode_classes.h);
//  - \p{L}, \p{N} (also \p{Letter}, \P{..}, \p{^..}): plus the code points PCRE2's older
//    Unicode tables lack; other properties pass through and use PCRE2's tables. "\pL" (no
//    braces) is the two letters "pL" in Ruby syntax;
//  - \w, \W: Oniguruma's word characters are Alphabetic, marks, decimal digits and connector
//    punctuation (PCRE2's \w under UCP is letters, numbers and "_");
//  - \h, \H: a hexadecimal digit in Oniguruma (horizontal space in PCRE2); \v: U+000B only;
//  - \uHHHH: a code point, written \x{HHHH} for PCRE2;
//  - (?m): Ruby's "dot matches newline", PCRE2's (?s); ^ and $ match at every line, as
//    PCRE2_MULTILINE (in onig_pcre2_options()) makes them.
// Constructs PCRE2 cannot express the same way are refused with offgen::Error: a negated class
// escape inside [...] (\S, \W, \H, \P{L}), nested sets and && intersections.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace offgen {

// Throws offgen::Error (without a file name: callers add where the pattern came from).
std::string onig_to_pcre2(std::string_view pattern);

// The PCRE2 compile options that go with onig_to_pcre2's output: UTF, UCP, MULTILINE.
std::uint32_t onig_pcre2_options();

}  // namespace offgen
