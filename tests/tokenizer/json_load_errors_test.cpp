// Bad or unsupported tokenizer.json files: each is an offgen::Error whose message names the file,
// the place in it and what is wrong (for an unsupported component: which one, and what offgen
// supports instead).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "engine/core/error.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/message_assertions.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using test::Contains;

using nlohmann::json;

// A copy of a fixture tokenizer.json that each test spoils in one place.
class TokenizerJsonLoadErrors : public ::testing::Test {
 protected:
  void SetUp() override { use("llama2-style"); }
  void use(const std::string& style) {
    file_ = json::parse(
        test::read_file(test::data_dir() / "tokenizer" / "json" / style / "tokenizer.json"));
  }
  std::filesystem::path path() const { return dir_.path() / "tokenizer.json"; }

  // The message of the Error that loading `file_` throws ("" if it does not throw).
  std::string load_error() const {
    test::write_file(path(), file_.dump());
    return raw_load_error();
  }
  std::string raw_load_error() const {
    const std::string message = test::error_of([&] { Tokenizer::load(dir_.path()); });
    if (message.empty()) ADD_FAILURE() << "load did not throw";
    return message;
  }
  // `message` names the file and the place in it.
  ::testing::AssertionResult Names(const std::string& message, const std::string& place) const {
    return Contains(message, path().string() + ": " + place);
  }

  test::TempDir dir_;
  json file_;
};

TEST_F(TokenizerJsonLoadErrors, CopyLoads) {
  test::write_file(path(), file_.dump());
  EXPECT_NO_THROW(Tokenizer::load(dir_.path()));
}

TEST_F(TokenizerJsonLoadErrors, MalformedJson) {
  const std::string text = file_.dump();
  test::write_file(path(), text.substr(0, text.size() / 2));
  const std::string message = raw_load_error();
  EXPECT_TRUE(Contains(message, path().string()));
  EXPECT_TRUE(Contains(message, "invalid JSON"));
}

TEST_F(TokenizerJsonLoadErrors, NotAnObject) {
  test::write_file(path(), "[1, 2]");
  EXPECT_TRUE(Contains(raw_load_error(), "expected a JSON object"));
}

TEST_F(TokenizerJsonLoadErrors, UnknownVersion) {
  file_["version"] = "2.0";
  EXPECT_TRUE(Names(load_error(), "version: unknown tokenizer.json version \"2.0\""));
}

TEST_F(TokenizerJsonLoadErrors, MissingModel) {
  file_.erase("model");
  EXPECT_TRUE(Contains(load_error(), "missing \"model\""));
}

TEST_F(TokenizerJsonLoadErrors, UnsupportedNormalizer) {
  file_["normalizer"]["normalizers"][1] = {{"type", "NFKC"}};
  const std::string message = load_error();
  EXPECT_TRUE(Names(message, "normalizer.normalizers[1]: unsupported normalizer \"NFKC\""));
  EXPECT_TRUE(Contains(message, "offgen supports Sequence, Prepend, Replace, NFC, NFD"));
}

TEST_F(TokenizerJsonLoadErrors, UnsupportedPreTokenizer) {
  file_["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  EXPECT_TRUE(Names(load_error(), "pre_tokenizer: unsupported pre_tokenizer \"BertPreTokenizer\""));
}

TEST_F(TokenizerJsonLoadErrors, UnsupportedDecoder) {
  file_["decoder"]["decoders"][2] = {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}};
  EXPECT_TRUE(Names(load_error(), "decoder.decoders[2]: unsupported decoder \"WordPiece\""));
}

TEST_F(TokenizerJsonLoadErrors, UnsupportedModel) {
  file_["model"]["type"] = "Unigram";
  EXPECT_TRUE(Names(load_error(), "model: unsupported model \"Unigram\" (offgen supports BPE)"));
}

TEST_F(TokenizerJsonLoadErrors, UnsupportedPostProcessor) {
  file_["post_processor"] = {{"type", "Mystery"}};
  EXPECT_TRUE(Names(load_error(), "post_processor: unsupported post_processor \"Mystery\""));
}

TEST_F(TokenizerJsonLoadErrors, MergeOfTokenNotInVocabulary) {
  file_["model"]["merges"][3] = "qqqq zz";
  const std::string message = load_error();
  EXPECT_TRUE(Names(message, "model.merges[3]: merge (\"qqqq\", \"zz\")"));
  EXPECT_TRUE(Contains(message, "\"qqqq\" is not in the vocabulary"));
}

TEST_F(TokenizerJsonLoadErrors, MergeResultNotInVocabulary) {
  file_["model"]["merges"].push_back("q z");  // both letters exist, "qz" does not
  EXPECT_TRUE(Contains(load_error(), "the result \"qz\" is not in the vocabulary"));
}

TEST_F(TokenizerJsonLoadErrors, MergeStringWithoutTwoParts) {
  file_["model"]["merges"][0] = "a b c";
  EXPECT_TRUE(Names(load_error(), "model.merges[0]: expected two tokens separated by one space"));
}

TEST_F(TokenizerJsonLoadErrors, PairMergeOfTokenNotInVocabulary) {
  use("llama3-style");  // merges as [left, right] pairs
  file_["model"]["merges"][5] = {"qqqq", "zz"};
  EXPECT_TRUE(Names(load_error(), "model.merges[5]: merge (\"qqqq\", \"zz\")"));
}

TEST_F(TokenizerJsonLoadErrors, MergesMixingPairsAndStrings) {
  use("llama3-style");
  file_["model"]["merges"][5] = "a b";
  EXPECT_TRUE(Names(load_error(), "model.merges[5]: expected a pair [left, right]"));
}

TEST_F(TokenizerJsonLoadErrors, DuplicateId) {
  file_["model"]["vocab"]["zzzz"] = 7;
  EXPECT_TRUE(Contains(load_error(), "share id 7"));
}

TEST_F(TokenizerJsonLoadErrors, UnkTokenNotInVocabulary) {
  file_["model"]["unk_token"] = "<nope>";
  EXPECT_TRUE(
      Names(load_error(), "model.unk_token: unk_token \"<nope>\" is not in the vocabulary"));
}

TEST_F(TokenizerJsonLoadErrors, ContinuingSubwordPrefix) {
  file_["model"]["continuing_subword_prefix"] = "##";
  EXPECT_TRUE(Contains(load_error(), "BPE continuing_subword_prefix \"##\" is not supported"));
}

TEST_F(TokenizerJsonLoadErrors, Dropout) {
  file_["model"]["dropout"] = 0.1;
  EXPECT_TRUE(Names(load_error(), "model.dropout: BPE dropout 0.1 is not supported"));
}

TEST_F(TokenizerJsonLoadErrors, RegexWithoutPcre2Equivalent) {
  file_["pre_tokenizer"] = {{"type", "Split"},
                            {"pattern", {{"Regex", "[^\\S\\n]+"}}},
                            {"behavior", "Isolated"},
                            {"invert", false}};
  const std::string message = load_error();
  EXPECT_TRUE(Names(message, "pre_tokenizer.pattern: Oniguruma pattern"));
  EXPECT_TRUE(Contains(message, "a negated class escape inside a character class"));
}

TEST_F(TokenizerJsonLoadErrors, RegexThatDoesNotCompile) {
  file_["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "(ab"}}}, {"content", "x"}};
  EXPECT_TRUE(Names(load_error(), "normalizer.pattern: PCRE2 cannot compile the pattern"));
}

TEST_F(TokenizerJsonLoadErrors, PatternOfNeitherKind) {
  file_["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Glob", "*"}}}, {"content", "x"}};
  EXPECT_TRUE(Names(load_error(), "normalizer.pattern: expected a pattern"));
}

TEST_F(TokenizerJsonLoadErrors, UnknownSplitBehavior) {
  file_["pre_tokenizer"] = {{"type", "Split"},
                            {"pattern", {{"String", " "}}},
                            {"behavior", "Sideways"},
                            {"invert", false}};
  EXPECT_TRUE(Names(load_error(), "pre_tokenizer.behavior: unknown Split behavior \"Sideways\""));
}

TEST_F(TokenizerJsonLoadErrors, MetaspaceReplacementOfTwoCharacters) {
  file_["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "__"}};
  EXPECT_TRUE(Names(load_error(), "pre_tokenizer.replacement: expected one character"));
}

TEST_F(TokenizerJsonLoadErrors, MetaspaceLegacyPrefixSpaceThatContradictsTheScheme) {
  // As `tokenizers` refuses it: add_prefix_space false with the default scheme "always".
  file_["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "_"}, {"add_prefix_space", false}};
  EXPECT_TRUE(Contains(load_error(), "add_prefix_space does not match declared prepend_scheme"));
}

TEST_F(TokenizerJsonLoadErrors, TemplateWithUnknownSpecialToken) {
  file_["post_processor"]["single"][0]["SpecialToken"]["id"] = "<nope>";
  EXPECT_TRUE(Names(load_error(),
                    "post_processor.single[0].SpecialToken: special token "
                    "\"<nope>\" is not in special_tokens"));
}

TEST_F(TokenizerJsonLoadErrors, WrongTypeOfField) {
  file_["added_tokens"][0]["lstrip"] = "yes";
  EXPECT_TRUE(Names(load_error(), "added_tokens[0].lstrip: expected true or false, got \"yes\""));
}

TEST_F(TokenizerJsonLoadErrors, TokenizerConfigWithBadJson) {
  test::write_file(dir_.path() / "tokenizer_config.json", "{\"add_bos_token\": tru");
  const std::string message = load_error();
  EXPECT_TRUE(Contains(message, (dir_.path() / "tokenizer_config.json").string()));
  EXPECT_TRUE(Contains(message, "invalid JSON"));
}

TEST_F(TokenizerJsonLoadErrors, TokenizerConfigBosThatIsNoToken) {
  test::write_file(dir_.path() / "tokenizer_config.json",
                   R"({"add_bos_token": true, "bos_token": "<nope>"})");
  EXPECT_TRUE(Contains(load_error(), (dir_.path() / "tokenizer_config.json").string() +
                                         ": bos_token: \"<nope>\" is not a token"));
}

TEST_F(TokenizerJsonLoadErrors, TokenizerConfigAddBosWithoutBos) {
  test::write_file(dir_.path() / "tokenizer_config.json", R"({"add_bos_token": true})");
  EXPECT_TRUE(Contains(load_error(), "add_bos_token: is true but bos_token is not set"));
}

TEST_F(TokenizerJsonLoadErrors, NeitherFormatInTheDirectory) {
  // The message names what the directory lacks, as before tokenizer.json existed.
  const std::string message = raw_load_error();
  EXPECT_TRUE(Contains(message, (dir_.path() / "vocab.json").string()));
  EXPECT_TRUE(Contains(message, "not found"));
}

}  // namespace
}  // namespace offgen
