// The BPE model's unknown-character handling on a hand-written tokenizer.json: unk_token with and
// without fuse_unk, and byte_fallback when some <0xNN> tokens are missing (where `tokenizers`
// puts the pending unk after the byte tokens). Expected ids are what `tokenizers` 0.23.3 gives
// for the same file; the LLaMA fixtures never reach these paths (their byte fallback is complete).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using Ids = std::vector<std::int32_t>;

std::unique_ptr<Tokenizer> tiny(const test::TempDir& dir, bool fuse_unk, bool byte_fallback) {
  const nlohmann::json file = {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", nullptr},
      {"post_processor", nullptr},
      {"decoder", nullptr},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", "<unk>"},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", fuse_unk},
        {"byte_fallback", byte_fallback},
        {"vocab", {{"<unk>", 0}, {"a", 1}, {"b", 2}, {"ab", 3}, {"<0x78>", 4}}},
        {"merges", {"a b"}}}}};
  test::write_file(dir.path() / "tokenizer.json", file.dump());
  return Tokenizer::load(dir.path());
}

TEST(TokenizerJsonModel, UnknownCharactersFuseIntoOneUnk) {
  const test::TempDir dir;
  const auto t = tiny(dir, /*fuse_unk=*/true, /*byte_fallback=*/false);
  EXPECT_EQ(t->encode("abxyab"), (Ids{3, 0, 3}));
  EXPECT_EQ(t->encode("xxab"), (Ids{0, 3}));
  EXPECT_EQ(t->encode("aby"), (Ids{3, 0}));
  // No decoder: tokens joined by spaces.
  EXPECT_EQ(t->decode(Ids{3, 0, 1, 2, 4, 99}), "ab <unk> a b <0x78>");
}

TEST(TokenizerJsonModel, UnknownCharactersEachAnUnkWithoutFusing) {
  const test::TempDir dir;
  const auto t = tiny(dir, /*fuse_unk=*/false, /*byte_fallback=*/false);
  EXPECT_EQ(t->encode("abxyab"), (Ids{3, 0, 0, 3}));
  EXPECT_EQ(t->encode("yx"), (Ids{0, 0}));
}

TEST(TokenizerJsonModel, ByteFallbackWithMissingByteTokens) {
  for (const bool fuse : {true, false}) {
    const test::TempDir dir;
    const auto t = tiny(dir, fuse, /*byte_fallback=*/true);
    EXPECT_EQ(t->encode("xxab"), (Ids{4, 4, 3}));
    // "y" has no <0x79>: it becomes an unk, which is written only after the byte token of "x".
    EXPECT_EQ(t->encode("yx"), (Ids{4, 0}));
    EXPECT_EQ(t->encode("abxyab"), (Ids{3, 4, 0, 3}));
  }
}

}  // namespace
}  // namespace offgen
