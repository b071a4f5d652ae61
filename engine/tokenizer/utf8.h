// UTF-8 scanning with exactly the rules of Python's strict decoder, so that "valid" here means
// "a str HF tokenizers could have been given" and invalid sequences are cut where Python cuts them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace offgen::utf8 {

// One step of decoding at `text[pos]` (pos < text.size()).
struct Step {
  std::size_t length;  // bytes consumed: the character, or the maximal invalid subpart (>= 1)
  bool valid;
};

// Decodes the character at `pos`. An invalid step covers the "maximal subpart of an ill-formed
// subsequence" (Unicode 15, section 3.9, U+FFFD substitution), the unit Python's errors="replace"
// turns into one U+FFFD: a lead byte plus the continuation bytes that could still have completed
// it. Overlongs (C0, C1, E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and code points above
// U+10FFFF (F4 90.., F5..FF) are invalid, as in Python.
Step decode_step(std::string_view text, std::size_t pos);

// Length of the longest prefix of `text` that is valid UTF-8.
std::size_t valid_prefix_length(std::string_view text);

// Appends the UTF-8 encoding of `code_point` (< 0x110000, not a surrogate) to `out`.
void append_code_point(std::string& out, std::uint32_t code_point);

// Decodes the valid character at `pos` (callers have checked it with decode_step) and advances pos.
std::uint32_t next_code_point(std::string_view text, std::size_t& pos);

}  // namespace offgen::utf8
