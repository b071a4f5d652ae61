// decode(encode(s)) == s for any bytes, valid UTF-8 or not, and how invalid bytes are cut.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

class TokenizerRoundTrip : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tokenizer_ = Tokenizer::load(test::data_dir() / "tokenizer"); }
  static void TearDownTestSuite() { tokenizer_.reset(); }
  static std::unique_ptr<Tokenizer> tokenizer_;
};
std::unique_ptr<Tokenizer> TokenizerRoundTrip::tokenizer_;

TEST_F(TokenizerRoundTrip, RandomBytes) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> length(0, 64);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int i = 0; i < 5000; ++i) {
    std::string text(static_cast<std::size_t>(length(rng)), '\0');
    for (char& c : text) c = static_cast<char>(byte(rng));
    ASSERT_EQ(tokenizer_->decode(tokenizer_->encode(text)), text) << "case " << i;
  }
}

TEST_F(TokenizerRoundTrip, TextCutAtEveryByte) {
  // A UTF-8 text cut anywhere, as a streaming caller would cut it: both halves round-trip.
  const std::string text =
      "Grüße, \u4e16\u754c! \U0001F469\U0001F3FE\u200D\U0001F4BB "
      "\u0928\u092e\u0938\u094d\u0924\u0947 "
      "it's 12345 \u00a0\u3000end";
  for (std::size_t cut = 0; cut <= text.size(); ++cut) {
    for (const std::string& part : {text.substr(0, cut), text.substr(cut)}) {
      ASSERT_EQ(tokenizer_->decode(tokenizer_->encode(part)), part) << "cut at " << cut;
    }
  }
}

TEST_F(TokenizerRoundTrip, InvalidRunIsOnePieceThatStillMerges) {
  // "\xF0\x9F" (an emoji cut after two bytes) is one piece; the vocabulary merges that byte pair
  // ("ðŁ" in byte-level characters), so it encodes as one token, not two.
  const auto merged = tokenizer_->token_to_id("\xC3\xB0\xC5\x81");  // "ðŁ"
  ASSERT_TRUE(merged.has_value());
  EXPECT_EQ(tokenizer_->encode("\xF0\x9F"), std::vector<std::int32_t>{*merged});
  // Invalid bytes never join the valid text around them.
  const auto with_gap = tokenizer_->encode(
      "self\xFF"
      "self");
  const auto alone = tokenizer_->encode("self");
  std::vector<std::int32_t> expected = alone;
  expected.push_back(*tokenizer_->token_to_id("\xC3\xBF"));  // 0xFF is written "ÿ"
  expected.insert(expected.end(), alone.begin(), alone.end());
  EXPECT_EQ(with_gap, expected);
}

TEST_F(TokenizerRoundTrip, EncodesAMegabyteQuickly) {
  // 1 MB made of the parity strings (prose, code, many scripts, random mixtures) joined by
  // newlines and repeated. Reported, and checked against a bound loose enough for debug and
  // sanitizer builds; release builds take a few tens of milliseconds.
  std::ifstream in(test::data_dir() / "tokenizer" / "parity.jsonl", std::ios::binary);
  ASSERT_TRUE(in);
  std::string corpus;
  for (std::string line; std::getline(in, line);) {
    corpus += nlohmann::json::parse(line).at("text").get<std::string>() + "\n";
  }
  std::string text;
  while (text.size() < (std::size_t{1} << 20)) text += corpus;
  text.resize(std::size_t{1} << 20);
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tokenizer_->encode(text);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("encode: %zu bytes -> %zu ids in %.1f ms (%.1f MB/s)\n", text.size(), ids.size(),
              seconds * 1e3, static_cast<double>(text.size()) / seconds / 1e6);
  EXPECT_EQ(tokenizer_->decode(ids), text);
  EXPECT_LT(seconds, 5.0);
}

}  // namespace
}  // namespace offgen
