// prompt_prefix() / prompt_suffix(): the ids the post-processor's single-sequence template puts
// around a prompt, tokenizer_config.json's override of them, and which file Tokenizer::load(dir)
// picks when a directory holds both formats.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using nlohmann::json;
using Ids = std::vector<std::int32_t>;

std::filesystem::path fixture(const std::string& style) {
  return test::data_dir() / "tokenizer" / "json" / style;
}

json fixture_json(const std::string& style) {
  return json::parse(test::read_file(fixture(style) / "tokenizer.json"));
}

TEST(TokenizerPromptIds, VocabMergesLeavesThePrefixToTheEngine) {
  const auto t = Tokenizer::load(test::data_dir() / "tokenizer");
  EXPECT_EQ(t->prompt_prefix(), std::nullopt);
  EXPECT_EQ(t->prompt_suffix(), std::nullopt);
}

TEST(TokenizerPromptIds, TemplatesOfTheFixtures) {
  const auto llama3 = Tokenizer::load(fixture("llama3-style"));
  const auto bos = llama3->token_to_id("<|begin_of_text|>");
  ASSERT_TRUE(bos.has_value());
  // The first added token not in the model's vocabulary takes the id after it.
  EXPECT_EQ(*bos, static_cast<std::int32_t>(fixture_json("llama3-style")["model"]["vocab"].size()));
  EXPECT_EQ(llama3->prompt_prefix(), Ids{*bos});
  EXPECT_EQ(llama3->prompt_suffix(), Ids{});

  const auto llama2 = Tokenizer::load(fixture("llama2-style"));
  EXPECT_EQ(llama2->prompt_prefix(), Ids{1});  // "<s>"
  EXPECT_EQ(llama2->prompt_suffix(), Ids{});

  EXPECT_EQ(Tokenizer::load(fixture("qwen2-style"))->prompt_prefix(), Ids{});
  EXPECT_EQ(Tokenizer::load(fixture("metaspace-style"))->prompt_prefix(), Ids{1});
}

class TokenizerPromptOverride : public ::testing::Test {
 protected:
  void SetUp() override { write(fixture_json("llama3-style")); }
  void write(const json& file) const {
    test::write_file(dir_.path() / "tokenizer.json", file.dump());
  }
  void config(const std::string& text) const {
    test::write_file(dir_.path() / "tokenizer_config.json", text);
  }
  std::unique_ptr<Tokenizer> load() const {
    return Tokenizer::load_json(dir_.path() / "tokenizer.json");
  }
  std::int32_t id(const std::string& token) const { return *load()->token_to_id(token); }

  test::TempDir dir_;
};

TEST_F(TokenizerPromptOverride, AddBosTokenFalseEmptiesThePrefix) {
  config(R"({"add_bos_token": false, "bos_token": "<|begin_of_text|>"})");
  EXPECT_EQ(load()->prompt_prefix(), Ids{});
}

TEST_F(TokenizerPromptOverride, AddBosTokenTrueUsesItsBosToken) {
  config(R"({"add_bos_token": true, "bos_token": "<|end_of_text|>"})");
  EXPECT_EQ(load()->prompt_prefix(), Ids{id("<|end_of_text|>")});
  // transformers also writes tokens as AddedToken objects.
  config(R"({"add_bos_token": true, "bos_token": {"__type": "AddedToken", "content": "<|eot_id|>",
             "lstrip": false, "normalized": false, "rstrip": false, "single_word": false}})");
  EXPECT_EQ(load()->prompt_prefix(), Ids{id("<|eot_id|>")});
}

TEST_F(TokenizerPromptOverride, AddEosTokenSetsTheSuffix) {
  config(R"({"add_eos_token": true, "eos_token": "<|eot_id|>"})");
  const auto t = load();
  EXPECT_EQ(t->prompt_prefix(), Ids{id("<|begin_of_text|>")});  // untouched
  EXPECT_EQ(t->prompt_suffix(), Ids{id("<|eot_id|>")});
}

TEST_F(TokenizerPromptOverride, UnsetOrNullFlagsChangeNothing) {
  config(R"({"add_bos_token": null, "bos_token": "<|end_of_text|>", "model_max_length": 8192})");
  EXPECT_EQ(load()->prompt_prefix(), Ids{id("<|begin_of_text|>")});
}

TEST_F(TokenizerPromptOverride, LoadOfTheDirectoryReadsTheConfigToo) {
  config(R"({"add_bos_token": false})");
  EXPECT_EQ(Tokenizer::load(dir_.path())->prompt_prefix(), Ids{});
}

TEST_F(TokenizerPromptOverride, TemplateWithSuffixAndNestedSequence) {
  json file = fixture_json("llama3-style");
  const std::int32_t bos = id("<|begin_of_text|>");
  const std::int32_t eot = id("<|eot_id|>");
  const json eot_template = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<|eot_id|>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
        {{"SpecialToken", {{"id", "<|eot_id|>"}, {"type_id", 0}}}}}},
      {"pair", json::array()},
      {"special_tokens",
       {{"<|eot_id|>", {{"id", "<|eot_id|>"}, {"ids", {eot}}, {"tokens", {"<|eot_id|>"}}}}}}};
  // A later processor wraps what the earlier ones made.
  file["post_processor"]["processors"].push_back(eot_template);
  write(file);
  EXPECT_EQ(load()->prompt_prefix(), (Ids{eot, bos}));
  EXPECT_EQ(load()->prompt_suffix(), (Ids{eot}));
}

TEST_F(TokenizerPromptOverride, RobertaProcessingGivesClsAndSep) {
  json file = fixture_json("llama3-style");
  file["post_processor"] = {{"type", "RobertaProcessing"},
                            {"sep", {"<|end_of_text|>", 3022}},
                            {"cls", {"<|begin_of_text|>", 3021}},
                            {"trim_offsets", true},
                            {"add_prefix_space", false}};
  write(file);
  EXPECT_EQ(load()->prompt_prefix(), Ids{3021});
  EXPECT_EQ(load()->prompt_suffix(), Ids{3022});
}

TEST_F(TokenizerPromptOverride, NoPostProcessorAddsNothing) {
  json file = fixture_json("llama3-style");
  file["post_processor"] = nullptr;
  write(file);
  EXPECT_EQ(load()->prompt_prefix(), Ids{});
  EXPECT_EQ(load()->prompt_suffix(), Ids{});
}

// A tokenizer.json of the test's vocab.json + merges.txt, as OPT's checkpoints ship one: ByteLevel
// with GPT-2's regex, and OPT's four special tokens as added tokens.
json gpt2_tokenizer_json() {
  const auto vocab = json::parse(test::read_file(test::data_dir() / "tokenizer" / "vocab.json"));
  json merges = json::array();
  std::istringstream lines(test::read_file(test::data_dir() / "tokenizer" / "merges.txt"));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && !line.starts_with("#version")) merges.push_back(line);
  }
  json added = json::array();
  for (const char* token : {"<s>", "<pad>", "</s>", "<unk>"}) {
    added.push_back({{"id", vocab.at(token)},
                     {"content", token},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", true},
                     {"special", true}});
  }
  const json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", true},
                           {"use_regex", true}};
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", byte_level},
          {"post_processor", byte_level},
          {"decoder", byte_level},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"dropout", nullptr}}}};
}

void copy_vocab_merges(const std::filesystem::path& dir) {
  for (const char* name : {"vocab.json", "merges.txt"}) {
    test::write_file(dir / name, test::read_file(test::data_dir() / "tokenizer" / name));
  }
}

TEST(TokenizerLoadChoice, OptDirectoryWithAllThreeKeepsVocabMerges) {
  test::TempDir dir;
  copy_vocab_merges(dir.path());
  test::write_file(dir.path() / "tokenizer.json", gpt2_tokenizer_json().dump());
  const auto t = Tokenizer::load(dir.path());
  EXPECT_EQ(t->prompt_prefix(), std::nullopt);
  const auto ids = t->encode("</s>");  // plain text, as before tokenizer.json was read
  EXPECT_NE(ids, Ids{2});
  EXPECT_EQ(t->decode(ids), "</s>");
  // The same file loaded as tokenizer.json finds the added token.
  EXPECT_EQ(Tokenizer::load_json(dir.path() / "tokenizer.json")->encode("</s>"), Ids{2});
}

TEST(TokenizerLoadChoice, OtherPipelineBesideVocabMergesWins) {
  // Qwen2 ships vocab.json + merges.txt too, but its tokenizer.json normalizes and splits
  // differently: that file is the tokenizer.
  test::TempDir dir;
  copy_vocab_merges(dir.path());
  test::write_file(dir.path() / "tokenizer.json",
                   test::read_file(fixture("qwen2-style") / "tokenizer.json"));
  const auto t = Tokenizer::load(dir.path());
  EXPECT_EQ(t->prompt_prefix(), Ids{});
  EXPECT_EQ(t->encode("<|im_start|>"), Ids{*t->token_to_id("<|im_start|>")});
}

TEST(TokenizerLoadChoice, Gpt2TokenizerJsonEncodesAsVocabMerges) {
  // The ByteLevel pre-tokenizer and BPE model of the tokenizer.json path against the
  // vocab.json + merges.txt path (itself checked against `tokenizers`) on every parity string
  // without special-token text (which only the tokenizer.json path matches as added tokens).
  test::TempDir dir;
  test::write_file(dir.path() / "tokenizer.json", gpt2_tokenizer_json().dump());
  const auto from_json = Tokenizer::load_json(dir.path() / "tokenizer.json");
  std::istringstream lines(test::read_file(test::data_dir() / "tokenizer" / "parity.jsonl"));
  int checked = 0;
  for (std::string line; std::getline(lines, line);) {
    const json c = json::parse(line);
    const auto text = c.at("text").get<std::string>();
    if (text.find('<') != std::string::npos) continue;
    EXPECT_EQ(from_json->encode(text), c.at("ids").get<Ids>()) << json(text).dump();
    EXPECT_EQ(from_json->decode(c.at("ids").get<Ids>()), text);
    ++checked;
  }
  EXPECT_GE(checked, 2900);
}

}  // namespace
}  // namespace offgen
