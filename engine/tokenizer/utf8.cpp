// UTF-8 decoding that agrees byte for byte with CPython's decoder (Objects/stringlib/codecs.h):
// both the pre-tokenizer's split of invalid input and to_valid_utf8() depend on it.
#include "engine/tokenizer/utf8.h"

#include <cstring>

#include "engine/tokenizer/tokenizer.h"

namespace offgen::utf8 {

namespace {

bool is_continuation(unsigned char byte) {
  return (byte & 0xC0) == 0x80;
}

}  // namespace

Step decode_step(std::string_view text, std::size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  if (lead < 0x80) return {1, true};
  std::size_t need = 0;  // continuation bytes after the lead
  // The second byte's range is narrower than 80..BF for some leads: that is what rules out
  // overlongs, surrogates and code points past U+10FFFF.
  unsigned char second_min = 0x80;
  unsigned char second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    if (lead == 0xE0) second_min = 0xA0;
    if (lead == 0xED) second_max = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    if (lead == 0xF0) second_min = 0x90;
    if (lead == 0xF4) second_max = 0x8F;
  } else {
    return {1, false};  // a stray continuation byte, C0, C1 or F5..FF: never starts a character
  }
  std::size_t length = 1;
  for (std::size_t k = 0; k < need; ++k) {
    if (pos + length >= text.size()) return {length, false};  // truncated at the end
    const auto byte = static_cast<unsigned char>(text[pos + length]);
    const bool ok = k == 0 ? (byte >= second_min && byte <= second_max) : is_continuation(byte);
    if (!ok) return {length, false};  // the bad byte is not consumed: it starts the next step
    ++length;
  }
  return {length, true};
}

std::size_t valid_prefix_length(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    // ASCII fast path, eight bytes at a time: most text the engine sees is mostly ASCII.
    while (pos + 8 <= text.size()) {
      std::uint64_t word;
      std::memcpy(&word, text.data() + pos, sizeof word);
      if (word & 0x8080808080808080ULL) break;
      pos += 8;
    }
    if (pos >= text.size()) break;
    const Step step = decode_step(text, pos);
    if (!step.valid) return pos;
    pos += step.length;
  }
  return text.size();
}

void append_code_point(std::string& out, std::uint32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

std::uint32_t next_code_point(std::string_view text, std::size_t& pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  std::size_t extra = 0;
  std::uint32_t code_point = lead;
  if (lead >= 0xF0) {
    extra = 3;
    code_point = lead & 0x07u;
  } else if (lead >= 0xE0) {
    extra = 2;
    code_point = lead & 0x0Fu;
  } else if (lead >= 0xC0) {
    extra = 1;
    code_point = lead & 0x1Fu;
  }
  ++pos;
  for (std::size_t k = 0; k < extra; ++k, ++pos) {
    code_point = (code_point << 6) | (static_cast<unsigned char>(text[pos]) & 0x3Fu);
  }
  return code_point;
}

}  // namespace offgen::utf8

namespace offgen {

std::string to_valid_utf8(std::string_view bytes) {
  const std::size_t valid = utf8::valid_prefix_length(bytes);
  if (valid == bytes.size()) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 16);
  out.append(bytes.substr(0, valid));
  std::size_t pos = valid;
  while (pos < bytes.size()) {
    const utf8::Step step = utf8::decode_step(bytes, pos);
    if (step.valid) {
      out.append(bytes.substr(pos, step.length));
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER, one per maximal subpart
    }
    pos += step.length;
  }
  return out;
}

}  // namespace offgen
