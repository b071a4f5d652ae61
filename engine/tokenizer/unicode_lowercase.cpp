#include "engine/tokenizer/unicode_lowercase.h"

#include <algorithm>
#include <cstdint>

#include "engine/tokenizer/utf8.h"

namespace offgen::unicode {
namespace {

struct LowercasePair {
  std::uint32_t from;
  std::uint32_t to;
};
struct LowercaseExpansion {
  std::uint32_t from;
  const char* utf8;
};

#include "engine/tokenizer/unicode_lowercase_data.inc"

}  // namespace

std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto byte = static_cast<unsigned char>(text[pos]);
    if (byte < 0x80) {  // ASCII, most of any text
      out += static_cast<char>(byte >= 'A' && byte <= 'Z' ? byte + ('a' - 'A') : byte);
      ++pos;
      continue;
    }
    const std::uint32_t code_point = utf8::next_code_point(text, pos);
    const auto* pair =
        std::ranges::lower_bound(kLowercasePairs, code_point, {}, &LowercasePair::from);
    if (pair != std::end(kLowercasePairs) && pair->from == code_point) {
      utf8::append_code_point(out, pair->to);
      continue;
    }
    const auto* expansion =
        std::ranges::find(kLowercaseExpansions, code_point, &LowercaseExpansion::from);
    if (expansion != std::end(kLowercaseExpansions)) {
      out += expansion->utf8;
    } else {
      utf8::append_code_point(out, code_point);
    }
  }
  return out;
}

}  // namespace offgen::unicode
