// Bad tokenizer files: each is an offgen::Error whose message names the file (and merges.txt line)
// and says what is wrong.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "engine/core/error.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/message_assertions.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using test::Contains;

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

// A copy of the test tokenizer whose files the tests then spoil one at a time.
class TokenizerLoadErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    vocab_ = read(test::data_dir() / "tokenizer" / "vocab.json");
    merges_ = read(test::data_dir() / "tokenizer" / "merges.txt");
    test::write_file(vocab_path(), vocab_);
    test::write_file(merges_path(), merges_);
  }
  std::filesystem::path vocab_path() const { return dir_.path() / "vocab.json"; }
  std::filesystem::path merges_path() const { return dir_.path() / "merges.txt"; }

  // The message of the Error that loading throws ("" if it does not throw).
  std::string load_error() const {
    try {
      Tokenizer::load(dir_.path());
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "load did not throw";
    return "";
  }

  test::TempDir dir_;
  std::string vocab_;
  std::string merges_;
};

TEST_F(TokenizerLoadErrors, CopyLoads) {
  EXPECT_NO_THROW(Tokenizer::load(dir_.path()));
}

TEST_F(TokenizerLoadErrors, MissingVocab) {
  std::filesystem::remove(vocab_path());
  const std::string message = load_error();
  EXPECT_TRUE(Contains(message, vocab_path().string()));
  EXPECT_TRUE(Contains(message, "not found"));
}

TEST_F(TokenizerLoadErrors, MissingMerges) {
  std::filesystem::remove(merges_path());
  const std::string message = load_error();
  EXPECT_TRUE(Contains(message, merges_path().string()));
  EXPECT_TRUE(Contains(message, "not found"));
}

TEST_F(TokenizerLoadErrors, VocabIsADirectory) {
  std::filesystem::remove(vocab_path());
  std::filesystem::create_directory(vocab_path());
  EXPECT_TRUE(Contains(load_error(), "not a regular file"));
}

TEST_F(TokenizerLoadErrors, MalformedJson) {
  test::write_file(vocab_path(), vocab_.substr(0, vocab_.size() / 2));  // cut off mid-object
  const std::string message = load_error();
  EXPECT_TRUE(Contains(message, vocab_path().string()));
  EXPECT_TRUE(Contains(message, "invalid JSON"));
}

TEST_F(TokenizerLoadErrors, JsonThatIsNotAnObject) {
  test::write_file(vocab_path(), "[1, 2, 3]");
  const std::string message = load_error();
  EXPECT_TRUE(Contains(message, vocab_path().string()));
  EXPECT_TRUE(Contains(message, "expected a JSON object"));
}

TEST_F(TokenizerLoadErrors, NonIntegerId) {
  test::write_file(vocab_path(), R"({"a": "zero"})");
  EXPECT_TRUE(Contains(load_error(), "non-integer id"));
}

TEST_F(TokenizerLoadErrors, DuplicateId) {
  test::write_file(vocab_path(), vocab_.substr(0, vocab_.rfind('}')) + R"(,"zzz":7})");
  const std::string message = load_error();
  EXPECT_TRUE(Contains(message, vocab_path().string()));
  EXPECT_TRUE(Contains(message, "share id 7"));
}

TEST_F(TokenizerLoadErrors, MissingByteToken) {
  test::write_file(vocab_path(), R"({"a": 0, "b": 1})");
  const std::string message = load_error();
  EXPECT_TRUE(Contains(message, vocab_path().string()));
  EXPECT_TRUE(Contains(message, "no token for byte 0x00"));
}

TEST_F(TokenizerLoadErrors, MergeOfUnknownSymbol) {
  // Line 1 is "#version: 0.2"; the bad merge goes on line 3.
  const std::size_t line2_end = merges_.find('\n', merges_.find('\n') + 1);
  test::write_file(merges_path(),
                   merges_.substr(0, line2_end + 1) + "qqqq zz\n" + merges_.substr(line2_end + 1));
  const std::string message = load_error();
  EXPECT_TRUE(Contains(message, merges_path().string() + ":3:"));
  EXPECT_TRUE(Contains(message, "\"qqqq\" is not in the vocabulary"));
}

TEST_F(TokenizerLoadErrors, MergeResultNotInVocab) {
  test::write_file(merges_path(), merges_ + "q z\n");  // both letters exist, "qz" does not
  const std::string message = load_error();
  EXPECT_TRUE(Contains(message, merges_path().string() + ":"));
  EXPECT_TRUE(Contains(message, "the result \"qz\" is not in the vocabulary"));
}

TEST_F(TokenizerLoadErrors, MergeLineWithoutTwoParts) {
  test::write_file(merges_path(), "#version: 0.2\na b c\n");
  const std::string message = load_error();
  EXPECT_TRUE(Contains(message, merges_path().string() + ":2:"));
  EXPECT_TRUE(Contains(message, "expected two tokens"));
}

}  // namespace
}  // namespace offgen
