// The table is built the way GPT-2 builds it: printable Latin-1 bytes stand for themselves, the
// other 68 bytes (controls, space, DEL, NBSP, soft hyphen, ...) take U+0100 onwards in byte order.
#include "engine/tokenizer/byte_level.h"

#include "engine/tokenizer/utf8.h"

namespace offgen::byte_level {

namespace {

bool stands_for_itself(unsigned byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> table{};
  std::uint32_t next = 256;
  for (unsigned byte = 0; byte < 256; ++byte) {
    table[byte] = stands_for_itself(byte) ? byte : next++;
  }
  return table;
}

}  // namespace

const std::array<std::uint32_t, 256>& byte_to_code_point() {
  static const std::array<std::uint32_t, 256> table = make_table();
  return table;
}

const std::array<std::string, 256>& byte_to_utf8() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> strings;
    for (unsigned byte = 0; byte < 256; ++byte) {
      utf8::append_code_point(strings[byte], byte_to_code_point()[byte]);
    }
    return strings;
  }();
  return table;
}

std::optional<std::uint8_t> code_point_to_byte(std::uint32_t code_point) {
  // The map's image is U+0021..U+0143; a direct inverse table over that range.
  static const std::array<std::int16_t, 324> inverse = [] {
    std::array<std::int16_t, 324> table;
    table.fill(-1);
    for (unsigned byte = 0; byte < 256; ++byte) {
      table[byte_to_code_point()[byte]] = static_cast<std::int16_t>(byte);
    }
    return table;
  }();
  if (code_point >= inverse.size() || inverse[code_point] < 0) return std::nullopt;
  return static_cast<std::uint8_t>(inverse[code_point]);
}

}  // namespace offgen::byte_level
