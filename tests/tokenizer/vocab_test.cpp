// Vocabulary lookups and decode of single tokens, including special tokens and bad ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

class TokenizerVocab : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tokenizer_ = Tokenizer::load(test::data_dir() / "tokenizer"); }
  static void TearDownTestSuite() { tokenizer_.reset(); }
  static std::unique_ptr<Tokenizer> tokenizer_;
};
std::unique_ptr<Tokenizer> TokenizerVocab::tokenizer_;

TEST_F(TokenizerVocab, SizeAndSpecialTokens) {
  EXPECT_EQ(tokenizer_->vocab_size(), 1000);
  EXPECT_EQ(tokenizer_->token_to_id("<s>"), 0);
  EXPECT_EQ(tokenizer_->token_to_id("<pad>"), 1);
  EXPECT_EQ(tokenizer_->token_to_id("</s>"), 2);
  EXPECT_EQ(tokenizer_->token_to_id("<unk>"), 3);
}

TEST_F(TokenizerVocab, TokenToIdUsesByteLevelSpelling) {
  EXPECT_EQ(tokenizer_->token_to_id("!"), 4);  // the first byte token after the specials
  EXPECT_TRUE(tokenizer_->token_to_id("\xC4\xA0").has_value());  // "Ġ", a space
  EXPECT_TRUE(tokenizer_->token_to_id("\xC4\x8A").has_value());  // "Ċ", a newline
  EXPECT_EQ(tokenizer_->token_to_id(" "), std::nullopt);  // raw bytes are not token spellings
  EXPECT_EQ(tokenizer_->token_to_id(""), std::nullopt);
  EXPECT_EQ(tokenizer_->token_to_id("no such token"), std::nullopt);
  const auto self = tokenizer_->token_to_id("\xC4\xA0self");  // "Ġself", merged in training
  ASSERT_TRUE(self.has_value());
  EXPECT_EQ(tokenizer_->encode(" self"), std::vector<std::int32_t>{*self});
  EXPECT_EQ(tokenizer_->decode(std::vector<std::int32_t>{*self}), " self");
}

TEST_F(TokenizerVocab, SpecialTokensDecodeAsTheirText) {
  EXPECT_EQ(tokenizer_->decode(std::vector<std::int32_t>{0, 1, 2, 3}), "<s><pad></s><unk>");
  // encode() treats special-token text as plain text: no id 2 in "</s>" (the engine adds
  // BOS / EOS ids itself).
  const auto ids = tokenizer_->encode("</s>");
  EXPECT_EQ(std::find(ids.begin(), ids.end(), 2), ids.end());
  EXPECT_EQ(tokenizer_->decode(ids), "</s>");
}

TEST_F(TokenizerVocab, EmptyInput) {
  EXPECT_TRUE(tokenizer_->encode("").empty());
  EXPECT_EQ(tokenizer_->decode(std::vector<std::int32_t>{}), "");
}

TEST_F(TokenizerVocab, UnknownIdsDecodeToNothing) {
  // A model's head has more rows than the tokenizer has entries (OPT: 50272 vs 50265): an id
  // without an entry must never fail a request, so it decodes to nothing.
  const auto five = tokenizer_->decode(std::vector<std::int32_t>{5});
  ASSERT_FALSE(five.empty());
  for (const std::int32_t id : {-1, tokenizer_->vocab_size(), 1 << 30}) {
    EXPECT_FALSE(tokenizer_->has_id(id)) << id;
    EXPECT_EQ(tokenizer_->decode(std::vector<std::int32_t>{5, id, 5}), five + five) << id;
  }
  EXPECT_TRUE(tokenizer_->has_id(5));
  EXPECT_TRUE(tokenizer_->has_id(tokenizer_->vocab_size() - 1));
}

TEST_F(TokenizerVocab, TokensOutsideTheByteMapDecodeAsUtf8) {
  // Added tokens spelled in plain Unicode (like GPT-2's "<|endoftext|>" but with non-ASCII): HF's
  // ByteLevel decoder emits a token with any character outside the byte map as its UTF-8, whole.
  test::TempDir dir;
  auto vocab = nlohmann::json::parse(read(test::data_dir() / "tokenizer" / "vocab.json"));
  vocab["\u2713ok"] = 1000;      // "✓ok"
  vocab["\u0120\u2192"] = 1001;  // "Ġ→": the Ġ is in the map, the arrow is not
  test::write_file(dir.path() / "vocab.json", vocab.dump());
  test::write_file(dir.path() / "merges.txt", read(test::data_dir() / "tokenizer" / "merges.txt"));
  const auto tokenizer = Tokenizer::load(dir.path());
  EXPECT_EQ(tokenizer->vocab_size(), 1002);
  EXPECT_EQ(tokenizer->decode(std::vector<std::int32_t>{1000, 1001, 1000}),
            "\u2713ok\u0120\u2192\u2713ok");
  // encode() never produces them: they are reachable by no merge.
  const auto ids = tokenizer->encode("\u2713ok");
  EXPECT_EQ(std::find(ids.begin(), ids.end(), 1000), ids.end());
}

}  // namespace
}  // namespace offgen
