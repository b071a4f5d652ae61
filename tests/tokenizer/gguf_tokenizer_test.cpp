// A GGUF file's tokenizer (tokenizer.ggml.*): the test tokenizer's vocab.json + merges.txt
// stored as llama.cpp stores a gpt2-model vocabulary gives Hugging Face's ids on every string of
// parity.jsonl; CONTROL tokens encode from their text; add_bos_token sets the prompt prefix;
// tokenizer.ggml.pre picks the splitting (smollm's digits one by one); and the refusals.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using test::GgufWriter;
using Json = nlohmann::json;

std::unique_ptr<Tokenizer> load(const GgufWriter& w, const test::TempDir& tmp) {
  w.write(tmp.path() / "t.gguf");
  return Tokenizer::load(tmp.path() / "t.gguf");
}

GgufWriter gpt2_tokenizer(const std::string& pre = "default") {
  GgufWriter w;
  test::add_gpt2_tokenizer(w, test::data_dir() / "tokenizer", pre);
  return w;
}

TEST(GgufTokenizer, Gpt2VocabularyMatchesHuggingFaceOnEveryParityString) {
  const test::TempDir tmp;
  const auto tokenizer = load(gpt2_tokenizer(), tmp);
  std::ifstream in(test::data_dir() / "tokenizer" / "parity.jsonl", std::ios::binary);
  int cases = 0;
  int failures = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const Json json = Json::parse(line);
    const auto text = json.at("text").get<std::string>();
    const auto want = json.at("ids").get<std::vector<std::int32_t>>();
    ++cases;
    if (tokenizer->encode(text) != want) {
      ADD_FAILURE() << "ids differ for " << json.at("text").dump();
      if (++failures >= 10) break;
    }
  }
  EXPECT_GE(cases, 3000);
  EXPECT_EQ(tokenizer->prompt_prefix(), std::vector<std::int32_t>{});  // gpt2: no BOS by default
  EXPECT_TRUE(Tokenizer::found_in(tmp.path() / "t.gguf"));
  EXPECT_TRUE(Tokenizer::found_in(tmp.path()));
}

TEST(GgufTokenizer, MergesAreCheckedAsTokenizerJsonChecksThem) {
  GgufWriter w;
  // A byte-level alphabet of the printable ASCII letters plus two control tokens.
  std::vector<std::string> tokens;
  for (char c = 'a'; c <= 'z'; ++c) tokens.emplace_back(1, c);
  tokens.push_back("<|im_start|>");
  tokens.push_back("<s>");
  std::vector<int> types(tokens.size(), 1);
  types[26] = 3;
  types[27] = 3;
  using Type = GgufWriter::Type;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add("tokenizer.ggml.tokens", Type::array, tokens, Type::string);
  w.add("tokenizer.ggml.token_type", Type::array, types, Type::i32);
  w.add("tokenizer.ggml.merges", Type::array, Json::array({"a b"}), Type::string);
  w.add_u32("tokenizer.ggml.bos_token_id", 27);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  const test::TempDir tmp;
  // "ab" is not a token, so the merge is refused: the file is checked as tokenizer.json is.
  EXPECT_NE(
      test::error_of([&] { load(w, tmp); }).find("the result \"ab\" is not in the vocabulary"),
      std::string::npos);
}

TEST(GgufTokenizer, ControlTokensAndBos) {
  // The test vocabulary with two CONTROL tokens after it.
  const test::TempDir plain_dir;
  const auto plain = load(gpt2_tokenizer(), plain_dir);
  const std::int32_t size = plain->vocab_size();
  GgufWriter v;
  test::add_gpt2_tokenizer(v, test::data_dir() / "tokenizer", "default",
                           {"<|im_start|>", "<|im_end|>"});
  v.add_u32("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(size));
  v.add_bool("tokenizer.ggml.add_bos_token", true);
  const test::TempDir tmp;
  const auto tokenizer = load(v, tmp);
  const std::vector<std::int32_t> ids = tokenizer->encode("<|im_start|>user\nhi<|im_end|>");
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), size);
  EXPECT_EQ(ids.back(), size + 1);
  const std::vector<std::int32_t> middle = plain->encode("user\nhi");
  EXPECT_EQ(std::vector<std::int32_t>(ids.begin() + 1, ids.end() - 1), middle);
  EXPECT_EQ(tokenizer->decode(ids), "<|im_start|>user\nhi<|im_end|>");
  EXPECT_EQ(tokenizer->prompt_prefix(), std::vector<std::int32_t>{size});
}

TEST(GgufTokenizer, SmollmSplitsDigitsOneByOne) {
  const test::TempDir a;
  const test::TempDir b;
  const auto gpt2 = load(gpt2_tokenizer("default"), a);
  const auto smollm = load(gpt2_tokenizer("smollm"), b);
  // GPT-2's regex keeps " 2024" together; the Digits step first cuts every digit apart.
  std::vector<std::int32_t> digits;
  for (const char* piece : {" ", "2", "0", "2", "4"}) {
    const auto ids = gpt2->encode(piece);
    digits.insert(digits.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(smollm->encode(" 2024"), digits);
  EXPECT_NE(gpt2->encode(" 2024"), digits);
  EXPECT_EQ(smollm->encode("hello world"), gpt2->encode("hello world"));
}

// A SentencePiece ("llama") vocabulary as llama.cpp stores a LLaMA 2-style model, against
// transformers 5 loading the same file (tools/make_gguf_spm_golden.py): ids without and with
// the BOS prefix and the decode, on ~300 strings (leading and repeated spaces, byte fallback,
// control and user-defined token texts in the text).
TEST(GgufTokenizer, SentencePieceVocabularyMatchesTransformers) {
  const auto dir = test::data_dir() / "golden" / "gguf";
  const auto tokenizer = Tokenizer::load(dir / "spm-tokenizer.gguf");
  ASSERT_TRUE(tokenizer->prompt_prefix().has_value());
  const std::vector<std::int32_t> prefix = *tokenizer->prompt_prefix();
  EXPECT_EQ(prefix, std::vector<std::int32_t>{1});
  std::ifstream in(dir / "spm-parity.jsonl", std::ios::binary);
  int cases = 0;
  int failures = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const Json json = Json::parse(line);
    const auto text = json.at("text").get<std::string>();
    const auto want = json.at("ids").get<std::vector<std::int32_t>>();
    const std::vector<std::int32_t> ids = tokenizer->encode(text);
    std::vector<std::int32_t> with_special = prefix;
    with_special.insert(with_special.end(), ids.begin(), ids.end());
    ++cases;
    if (ids != want || with_special != json.at("with_special").get<std::vector<std::int32_t>>() ||
        tokenizer->decode(ids) != json.at("decoded").get<std::string>()) {
      ADD_FAILURE() << "differs for " << json.at("text").dump() << ": ids " << Json(ids).dump()
                    << ", transformers " << Json(want).dump() << "; decode "
                    << Json(tokenizer->decode(ids)).dump();
      if (++failures >= 10) break;
    }
  }
  EXPECT_GE(cases, 300);
}

TEST(GgufTokenizer, Refusals) {
  {
    GgufWriter w = gpt2_tokenizer("some-new-model");
    const test::TempDir tmp;
    EXPECT_NE(test::error_of([&] {
                load(w, tmp);
              }).find("tokenizer.ggml.pre 'some-new-model' is not a pre-tokenizer offgen knows"),
              std::string::npos);
  }
  {
    GgufWriter w;
    w.add_string("tokenizer.ggml.model", "bert");
    const test::TempDir tmp;
    EXPECT_NE(test::error_of([&] { load(w, tmp); }).find("tokenizer.ggml.model is 'bert'"),
              std::string::npos);
  }
  {
    GgufWriter w = gpt2_tokenizer();
    w.add_u32("tokenizer.ggml.bos_token_id", 999999);
    w.add_bool("tokenizer.ggml.add_bos_token", true);
    const test::TempDir tmp;
    EXPECT_NE(test::error_of([&] {
                load(w, tmp);
              }).find("tokenizer.ggml.bos_token_id' = 999999 is not one of the"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace offgen
