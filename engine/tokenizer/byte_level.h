// GPT-2's reversible byte <-> unicode map ("bytes_to_unicode" in openai/gpt-2 encoder.py). BPE
// vocabularies are written in these characters so that every byte, including spaces and control
// bytes, is a printable character in vocab.json and merges.txt (a space becomes "Ġ", "\n" "Ċ").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace offgen::byte_level {

// The code point each byte is written as.
const std::array<std::uint32_t, 256>& byte_to_code_point();

// The UTF-8 text of the character each byte is written as.
const std::array<std::string, 256>& byte_to_utf8();

// The byte a code point stands for, or nullopt for characters outside the map (special tokens
// may contain those).
std::optional<std::uint8_t> code_point_to_byte(std::uint32_t code_point);

}  // namespace offgen::byte_level
