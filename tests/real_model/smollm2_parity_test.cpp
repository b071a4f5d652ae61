// The real pretrained model, SmolLM2-135M-Instruct from its published GGUF (Q4_1 matrices, Q8_0
// embedding), against transformers 5 loading the same file (gguf_file=, fp32, eager attention;
// tools/make_smollm2_golden.py): the config from the metadata, the tokenizer's ids on real text,
// log-probabilities of real texts as one prefill and through the KV cache, and greedy
// continuations (plain and ChatML prompts) left-padded in one batch and one at a time; then the
// same from an F16 GGUF written from it, whose fp16 weights are the same values.
// Skipped with a message when the model has not been fetched (scripts/fetch-model).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/core/half.h"
#include "engine/model/gguf_checkpoint.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_tokenizer.h"
#include "engine/model/gguf_types.h"
#include "engine/runtime/engine.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/golden.h"
#include "tests/support/real_model.h"

namespace offgen {
namespace {

// The engine keeps activations in fp16 (fp32 accumulation); the reference is fp32 throughout,
// over 30 layers. Measured worst on these texts: see the README's real-model section.
constexpr float kLogprobTolerance = 0.05f;
constexpr float kRelativeTolerance = 0.01f;

nlohmann::json expected() {
  return test::golden_expected("smollm2-q4_1");
}

EngineOptions options_for(const std::filesystem::path& model, int batch) {
  EngineOptions options;
  options.model = model.string();
  options.device = DeviceChoice::cpu;
  options.placement.gpu_batch = batch;
  return options;
}

void expect_scores_match(Engine& engine, const nlohmann::json& fixture, int prefill_tokens) {
  const float worst = test::expect_scores_match(engine, fixture, prefill_tokens, kLogprobTolerance,
                                                kRelativeTolerance);
  std::printf("worst |log-prob - transformers| = %.4f (prefill_tokens %d)\n", worst,
              prefill_tokens);
}

void expect_generation_matches(Engine& engine, const nlohmann::json& fixture) {
  const auto results = engine.generate(test::greedy_requests(fixture));
  ASSERT_EQ(results.size(), fixture["outputs"].size());
  for (std::size_t r = 0; r < results.size(); ++r) {
    SCOPED_TRACE(testing::Message() << "prompt " << r);
    ASSERT_TRUE(results[r].error.empty()) << results[r].error;
    EXPECT_EQ(results[r].tokens, fixture["outputs"][r].get<std::vector<std::int32_t>>());
  }
}

class Smollm2 : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto found = test::smollm2_gguf();
    if (!found) GTEST_SKIP() << test::kNoSmollm2;
    path_ = *found;
  }
  std::filesystem::path path_;
};

TEST_F(Smollm2, ConfigFromTheMetadataIsTransformers) {
  const nlohmann::json want = expected()["config"];
  const ModelConfig c = GgufCheckpoint::read_config(path_);
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.num_layers, want["num_hidden_layers"].get<int>());
  EXPECT_EQ(c.hidden_size, want["hidden_size"].get<int>());
  EXPECT_EQ(c.num_heads, want["num_attention_heads"].get<int>());
  EXPECT_EQ(c.kv_heads(), want["num_key_value_heads"].get<int>());
  EXPECT_EQ(c.head_dim(), want["head_dim"].get<int>());
  EXPECT_EQ(c.ffn_dim, want["intermediate_size"].get<int>());
  EXPECT_EQ(c.vocab_size, want["vocab_size"].get<int>());
  EXPECT_EQ(c.rope_theta, want["rope_theta"].get<float>());
  EXPECT_EQ(c.layer_norm_eps, want["rms_norm_eps"].get<float>());
  EXPECT_EQ(c.max_position_embeddings, want["max_position_embeddings"].get<int>());
  EXPECT_EQ(c.bos_token_id, want["bos_token_id"].get<int>());
  EXPECT_EQ(c.eos_token_id, want["eos_token_id"].get<int>());
  EXPECT_EQ(c.pad_token_id, want["pad_token_id"].get<int>());
  EXPECT_EQ(c.tie_word_embeddings, want["tie_word_embeddings"].get<bool>());
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::Kind::none);
  const auto file = GgufFile::open(path_);
  EXPECT_EQ(gguf_chat_template(*file), expected()["chat_template"].get<std::string>());
}

TEST_F(Smollm2, TokenizerIdsAreTransformers) {
  const auto tokenizer = Tokenizer::load(path_);
  const nlohmann::json fixture = expected();
  int checked = 0;
  for (const nlohmann::json& item : fixture["tokenize"]) {
    const auto text = item["text"].get<std::string>();
    EXPECT_EQ(tokenizer->encode(text), item["ids"].get<std::vector<std::int32_t>>())
        << item["text"].dump();
    ++checked;
  }
  EXPECT_GE(checked, 20);
  EXPECT_EQ(tokenizer->prompt_prefix(), std::vector<std::int32_t>{});  // add_bos_token false
  const std::vector<std::int32_t> chat =
      tokenizer->encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(chat.front(), 1);  // <|im_start|> is one control token
  EXPECT_EQ(tokenizer->decode(chat), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST_F(Smollm2, LogprobsOfRealTextsAreTransformers) {
  Engine engine(options_for(path_, 4));
  expect_scores_match(engine, expected(), 0);
  expect_scores_match(engine, expected(), 8);
}

TEST_F(Smollm2, GreedyContinuationsAreTransformers) {
  const nlohmann::json fixture = expected()["generate"];
  Engine batched(options_for(path_, 4));  // all prompts in one left-padded batch
  expect_generation_matches(batched, fixture);
  Engine alone(options_for(path_, 1));
  expect_generation_matches(alone, fixture);
}

// An F16 GGUF of the same model (each matrix dequantized, stored as fp16; the rest copied) gives
// offgen the same fp16 weights, so the same results.
TEST_F(Smollm2, AnF16CopyGivesTheSameResults) {
  const auto source = GgufFile::open(path_);
  const test::TempDir tmp;
  const auto copy = tmp.path() / "smollm2-f16.gguf";
  test::write_f16_copy(*source, copy);
  const auto f16 = GgufFile::open(copy);
  int matrices = 0;
  for (const auto& [name, tensor] : f16->tensors()) {
    if (tensor.dims.size() == 2) {
      EXPECT_EQ(tensor.type, GgmlType::f16) << name;
      ++matrices;
    }
  }
  EXPECT_EQ(matrices, 1 + 30 * 7);
  Engine engine(options_for(copy, 4));
  expect_scores_match(engine, expected(), 0);
  expect_generation_matches(engine, expected()["generate"]);
}

}  // namespace
}  // namespace offgen
