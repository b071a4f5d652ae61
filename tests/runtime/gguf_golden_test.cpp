// Golden parity through a GGUF file: the LLaMA-family golden checkpoints converted as llama.cpp
// converts them (q / k permuted, F16 matrices) run in the engine exactly as from their
// safetensors: Hugging Face's log-probabilities as one prefill and through the KV cache, greedy
// continuations left-padded in one batch, and the tokenizer found in the file.
#include <gtest/gtest.h>

#include "engine/runtime/engine.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/golden.h"

namespace offgen {
namespace {

class GgufGolden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    test::convert_gguf_from_checkpoint(test::data_dir() / "golden" / GetParam(), path(),
                                       test::GgufStorage::f16);
  }
  std::filesystem::path path() const { return tmp_.path() / (GetParam() + ".gguf"); }
  EngineOptions options(int batch) const {
    EngineOptions o;
    o.model = path().string();
    o.device = DeviceChoice::cpu;
    o.placement.gpu_batch = batch;
    return o;
  }
  test::TempDir tmp_;
};

TEST_P(GgufGolden, ScoresMatchHuggingFace) {
  const nlohmann::json expected = test::golden_expected(GetParam());
  Engine engine(options(4));
  for (const int prefill_tokens : {0, 3}) {
    test::expect_scores_match(engine, expected, prefill_tokens, test::kGoldenLogprobTolerance,
                              test::kGoldenLlamaRelativeTolerance);
  }
}

TEST_P(GgufGolden, GreedyGenerationMatchesHuggingFace) {
  const nlohmann::json fixture = test::golden_expected(GetParam())["generate"];
  Engine engine(options(4));
  const auto results = engine.generate(test::greedy_requests(fixture));
  for (std::size_t r = 0; r < results.size(); ++r) {
    ASSERT_TRUE(results[r].error.empty()) << results[r].error;
    EXPECT_EQ(results[r].tokens, fixture["outputs"][r].get<std::vector<std::int32_t>>())
        << "prompt " << r;
  }
}

TEST_P(GgufGolden, TheTokenizerComesFromTheFile) {
  Engine engine(options(1));
  ASSERT_NE(engine.tokenizer(), nullptr);
  const auto reference = Tokenizer::load(test::data_dir() / "golden" / GetParam());
  for (const char* text : {"Hello, world!", " 2024 tokens\n\tand more", "naïve café"}) {
    EXPECT_EQ(engine.tokenizer()->encode(text), reference->encode(text)) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, GgufGolden,
                         ::testing::Values("tiny-llama-gqa", "tiny-qwen2-mqa", "tiny-mistral-bin"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace offgen
