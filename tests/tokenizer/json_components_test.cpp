// Each normalizer, pre-tokenizer and decoder on its own against `tokenizers`: components.json
// (tools/make_tokenizer_json_fixtures.py) holds single components, configured every way the
// parity fixtures do not reach (each Split behaviour, inverted; Metaspace schemes; Oniguruma
// escapes that PCRE2 spells differently; Strip and ByteFallback edge cases; NFC / NFD on mark
// sequences), with `tokenizers`' output for each input. components-pretok.json
// (tools/make_tokenizer_pretok_fixtures.py) does the same for Digits, Punctuation (every
// behaviour), Whitespace, WhitespaceSplit, Strip and Lowercase.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/tokenizer/pre_tokenizer_chain.h"
#include "engine/tokenizer/tokenizer_json.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

nlohmann::json read_components(const std::string& file) {
  std::ifstream in(test::data_dir() / "tokenizer" / "json" / file, std::ios::binary);
  EXPECT_TRUE(in);
  return nlohmann::json::parse(in);
}

std::vector<std::string> pieces_of(const PreTokenizerChain& chain, const std::string& text) {
  std::vector<PreTokenPiece> pieces;
  chain.split(text, /*at_start=*/true, pieces);
  std::vector<std::string> out;
  for (const PreTokenPiece& p : pieces) out.push_back(p.text);
  return out;
}

// Checks every case of `file`; returns how many.
std::size_t check_components(const std::string& file) {
  const nlohmann::json components = read_components(file);
  EXPECT_TRUE(components.is_array());
  std::size_t checked = 0;
  for (std::size_t i = 0; i < components.size(); ++i) {
    const nlohmann::json& c = components[i];
    const std::string kind = c.at("kind").get<std::string>();
    const nlohmann::json& config = c.at("config");
    const std::string where = fmt::format("[{}]", i);
    SCOPED_TRACE(::testing::Message() << file << where << " " << config.dump());
    for (const nlohmann::json& pair : c.at("cases")) {
      const nlohmann::json& input = pair[0];
      const nlohmann::json& expected = pair[1];
      if (kind == "normalizer") {
        EXPECT_EQ(tokenizer_json::parse_normalizer(config, file, where)
                      .normalize(input.get<std::string>()),
                  expected.get<std::string>())
            << "input " << input.dump();
      } else if (kind == "pre_tokenizer") {
        EXPECT_EQ(pieces_of(tokenizer_json::parse_pre_tokenizer(config, file, where),
                            input.get<std::string>()),
                  expected.get<std::vector<std::string>>())
            << "input " << input.dump();
      } else {
        EXPECT_EQ(kind, "decoder");
        EXPECT_EQ(tokenizer_json::parse_decoder(config, file, where)
                      .decode(input.get<std::vector<std::string>>()),
                  expected.get<std::string>())
            << "input " << input.dump();
      }
      ++checked;
    }
  }
  return checked;
}

TEST(TokenizerJsonComponents, MatchHuggingFace) {
  EXPECT_GE(check_components("components.json"), 2000u);
}

TEST(TokenizerJsonComponents, DigitsPunctuationWhitespaceStripLowercaseMatchHuggingFace) {
  EXPECT_GE(check_components("components-pretok.json"), 1000u);
}

}  // namespace
}  // namespace offgen
