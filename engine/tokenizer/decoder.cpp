// See decoder.h. Each step is the decode_chain of the HF decoder it names. Where HF would panic
// (Strip asked to cut more than a token holds), the token is cut to nothing instead.
#include "engine/tokenizer/decoder.h"

#include <optional>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/overloaded.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace offgen {

namespace {

using Tokens = std::vector<std::string>;

constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// A token's bytes if every character is in GPT-2's byte map, else the token itself.
void append_byte_level(const std::string& token, std::string& out) {
  const std::size_t mark = out.size();
  std::size_t pos = 0;
  while (pos < token.size()) {
    const auto byte = byte_level::code_point_to_byte(utf8::next_code_point(token, pos));
    if (!byte) {
      out.resize(mark);
      out += token;
      return;
    }
    out.push_back(static_cast<char>(*byte));
  }
}

std::optional<int> hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return std::nullopt;
}

// "<0xNN>" -> the byte, as HF reads it: u8::from_str_radix(&token[3..5], 16), which also takes a
// "+" sign before one digit.
std::optional<unsigned char> byte_token(const std::string& token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return std::nullopt;
  if (token[3] == '+') {
    const auto low = hex_digit(token[4]);
    if (!low) return std::nullopt;
    return static_cast<unsigned char>(*low);
  }
  const auto high = hex_digit(token[3]);
  const auto low = hex_digit(token[4]);
  if (!high || !low) return std::nullopt;
  return static_cast<unsigned char>(*high * 16 + *low);
}

Tokens byte_fallback(Tokens tokens) {
  Tokens out;
  std::string bytes;
  const auto flush = [&] {
    if (bytes.empty()) return;
    if (utf8::valid_prefix_length(bytes) == bytes.size()) {
      out.push_back(bytes);
    } else {
      for (std::size_t i = 0; i < bytes.size(); ++i) out.emplace_back(kReplacementCharacter);
    }
    bytes.clear();
  };
  for (std::string& token : tokens) {
    if (const auto byte = byte_token(token)) {
      bytes.push_back(static_cast<char>(*byte));
      continue;
    }
    flush();
    out.push_back(std::move(token));
  }
  flush();
  return out;
}

std::vector<std::string_view> characters(std::string_view token) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (pos < token.size()) {
    const std::size_t start = pos;
    utf8::next_code_point(token, pos);
    out.push_back(token.substr(start, pos - start));
  }
  return out;
}

std::string strip(const std::string& token, const Decoder::Strip& s) {
  const std::vector<std::string_view> chars = characters(token);
  std::size_t start_cut = 0;
  for (std::size_t i = 0; i < chars.size() && i < s.start && chars[i] == s.content; ++i) {
    start_cut = i + 1;
  }
  std::size_t stop_cut = chars.size();
  for (std::size_t i = 0; i < s.stop && i < chars.size(); ++i) {
    const std::size_t index = chars.size() - i - 1;
    if (chars[index] != s.content) break;
    stop_cut = index;
  }
  std::string out;
  for (std::size_t i = start_cut; i < stop_cut; ++i) out += chars[i];
  return out;
}

std::string metaspace(const std::string& token, const Decoder::Metaspace& m, bool first) {
  std::string out;
  out.reserve(token.size());
  for (const std::string_view c : characters(token)) {
    if (c != m.replacement) {
      out += c;
    } else if (!(first && m.drop_in_first)) {
      out += ' ';
    }
  }
  return out;
}

}  // namespace

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (!present_) {
    std::string joined;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) joined += ' ';
      joined += tokens[i];
    }
    return joined;
  }
  for (const Step& step : steps_) {
    tokens = std::visit(Overloaded{
                            [&](const ByteLevel&) {
                              std::string bytes;
                              for (const std::string& token : tokens)
                                append_byte_level(token, bytes);
                              return Tokens{to_valid_utf8(bytes)};
                            },
                            [&](const Replace& r) {
                              Tokens out;
                              out.reserve(tokens.size());
                              for (const std::string& token : tokens) {
                                out.push_back(r.pattern->replace_all(token, r.content));
                              }
                              return out;
                            },
                            [&](const ByteFallback&) { return byte_fallback(std::move(tokens)); },
                            [&](const Fuse&) {
                              std::string joined;
                              for (const std::string& token : tokens) joined += token;
                              return Tokens{std::move(joined)};
                            },
                            [&](const Strip& s) {
                              Tokens out;
                              out.reserve(tokens.size());
                              for (const std::string& token : tokens)
                                out.push_back(strip(token, s));
                              return out;
                            },
                            [&](const Metaspace& m) {
                              Tokens out;
                              out.reserve(tokens.size());
                              for (std::size_t i = 0; i < tokens.size(); ++i) {
                                out.push_back(metaspace(tokens[i], m, i == 0));
                              }
                              return out;
                            },
                        },
                        step);
  }
  std::string text;
  for (const std::string& token : tokens) text += token;
  return text;
}

}  // namespace offgen
