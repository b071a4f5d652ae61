// What a text prompt starts with: the tokenizer.json template's ids (LLaMA 2 / 3: their BOS;
// Qwen2: nothing), else the model's BOS as OPT prepends it.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/cli/request_fields.h"
#include "engine/model/model_config.h"
#include "engine/runtime/engine.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using cli::prompt_prefix;

std::vector<std::int32_t> prefix_of(const ModelConfig& config, const char* tokenizer_json) {
  const auto tokenizer = Tokenizer::load_json(test::data_dir() / "tokenizer" / "json" /
                                              tokenizer_json / "tokenizer.json");
  return prompt_prefix(config, *tokenizer);
}

TEST(PromptPrefix, TokenizerJsonTemplatesDecide) {
  const ModelConfig llama = *ModelConfig::from_name("llama-2-7b");
  EXPECT_EQ(prefix_of(llama, "llama2-style"), (std::vector<std::int32_t>{1}));
  const auto llama3 = Tokenizer::load_json(test::data_dir() / "tokenizer" / "json" /
                                           "llama3-style" / "tokenizer.json");
  EXPECT_EQ(prompt_prefix(llama, *llama3),
            (std::vector<std::int32_t>{*llama3->token_to_id("<|begin_of_text|>")}));
  EXPECT_TRUE(prefix_of(llama, "qwen2-style").empty());
}

TEST(PromptPrefix, VocabAndMergesUseTheModelsBos) {
  const auto tokenizer = Tokenizer::load(test::data_dir() / "tokenizer");
  ModelConfig opt = *ModelConfig::from_name("opt-125m");
  EXPECT_EQ(prompt_prefix(opt, *tokenizer), (std::vector<std::int32_t>{2}));
  opt.bos_token_id = 7;
  EXPECT_EQ(prompt_prefix(opt, *tokenizer), (std::vector<std::int32_t>{7}));
}

// A LLaMA checkpoint ships tokenizer.json and no vocab.json: the engine finds it as the CLI does,
// so results carry text and the ids without an entry are never sampled.
TEST(PromptPrefix, TheEngineFindsACheckpointsTokenizerJson) {
  namespace fs = std::filesystem;
  const test::TempDir dir;
  const fs::path golden = test::data_dir() / "golden" / "tiny-llama-gqa";
  for (const char* name : {"config.json", "model.safetensors"}) {
    fs::copy_file(golden / name, dir.path() / name);
  }
  fs::copy_file(test::data_dir() / "tokenizer" / "json" / "llama2-style" / "tokenizer.json",
                dir.path() / "tokenizer.json");
  EngineOptions options;
  options.model = dir.path().string();
  options.device = DeviceChoice::cpu;
  Engine engine(options);
  ASSERT_NE(engine.tokenizer(), nullptr);
  EXPECT_EQ(engine.tokenizer()->prompt_prefix(), (std::vector<std::int32_t>{1}));
}

}  // namespace
}  // namespace offgen
