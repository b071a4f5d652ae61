// Errors a user meets when loading: each names the file and the problem, none crashes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "bench/throughput.h"
#include "engine/core/error.h"
#include "engine/core/units.h"
#include "engine/runtime/batch_runner.h"
#include "engine/runtime/engine.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

namespace fs = std::filesystem;

// A copy of the tiny pre-LN checkpoint that a test may damage.
fs::path copy_checkpoint(const test::TempDir& dir) {
  const fs::path target = dir.path() / "model";
  fs::copy(test::data_dir() / "golden" / "tiny-preln", target, fs::copy_options::recursive);
  return target;
}

std::string load_error(const fs::path& model) {
  EngineOptions options;
  options.model = model.string();
  options.device = DeviceChoice::cpu;
  try {
    Engine engine(options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(EngineLoad, TruncatedWeightsNameTheFile) {
  test::TempDir dir;
  const fs::path model = copy_checkpoint(dir);
  fs::resize_file(model / "model.safetensors", fs::file_size(model / "model.safetensors") / 2);
  const std::string error = load_error(model);
  EXPECT_NE(error.find("model.safetensors"), std::string::npos) << error;
}

TEST(EngineLoad, MissingConfigNamesTheFile) {
  test::TempDir dir;
  const fs::path model = copy_checkpoint(dir);
  fs::remove(model / "config.json");
  const std::string error = load_error(model);
  EXPECT_NE(error.find("config.json"), std::string::npos) << error;
}

TEST(EngineLoad, ConfigThatDisagreesWithTheWeightsNamesTheTensor) {
  test::TempDir dir;
  const fs::path model = copy_checkpoint(dir);
  std::ifstream in(model / "config.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const std::string from = "\"ffn_dim\": 256";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), "\"ffn_dim\": 128");
  test::write_file(model / "config.json", text);
  const std::string error = load_error(model);
  EXPECT_NE(error.find("fc1.weight"), std::string::npos) << error;
  EXPECT_NE(error.find("[256, 64]"), std::string::npos) << error;
}

TEST(EngineLoad, PytorchBinIsRefusedWithAConversionHint) {
  test::TempDir dir;
  const fs::path model = dir.path() / "old";
  fs::create_directories(model);
  fs::copy(test::data_dir() / "golden" / "tiny-preln" / "config.json", model / "config.json");
  test::write_file(model / "pytorch_model.bin", "not really a pickle");
  const std::string error = load_error(model);
  EXPECT_NE(error.find("safetensors"), std::string::npos) << error;
  EXPECT_NE(error.find("save_pretrained"), std::string::npos) << error;
}

TEST(EngineLoad, UnknownModelNameListsTheKnownOnes) {
  const std::string error = load_error("opt-7b");
  EXPECT_NE(error.find("opt-125m"), std::string::npos) << error;
}

TEST(EngineLoad, WeightsLargerThanTheGpuBudgetSayWhatDidNotFit) {
  EngineOptions options;
  options.model = "opt-125m";  // 250 MB of fp16 weights
  options.device = DeviceChoice::cpu;
  options.budgets.gpu = parse_bytes("64MiB");
  try {
    Engine engine(options);
    FAIL() << "expected an out-of-memory error";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("gpu tier"), std::string::npos) << e.what();
  }
}

TEST(Bench, ACaseThatDoesNotFitIsReportedAndTheSweepGoesOn) {
  EngineOptions options;
  options.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.device = DeviceChoice::cpu;
  options.budgets.gpu = parse_bytes("4MiB");  // weights fit (~0.4 MB); a big batch's cache does not
  Engine engine(options);
  const bench::BenchRow fits = bench::run_case(engine, {2, 16, 4}, 0);
  EXPECT_TRUE(fits.error.empty()) << fits.error;
  EXPECT_GT(fits.generated_tokens_per_second(), 0.0);
  EXPECT_GT(fits.kv_bytes, 0u);
  const bench::BenchRow too_big = bench::run_case(engine, {512, 48, 16}, 0);
  EXPECT_NE(too_big.error.find("does not fit"), std::string::npos) << too_big.error;
  const bench::BenchRow after = bench::run_case(engine, {1, 8, 2}, 0);
  EXPECT_TRUE(after.error.empty()) << after.error;
}

}  // namespace
}  // namespace offgen

namespace offgen {
namespace {

TEST(EngineBatches, ABatchThatDoesNotFitIsSplitAndGivesTheSameTokens) {
  std::vector<GenerationRequest> requests(8);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    for (int t = 0; t < 60; ++t)
      requests[i].prompt.push_back(static_cast<std::int32_t>(4 + (i * 31 + t * 7) % 990));
    requests[i].max_tokens = 4;
    requests[i].sampling.temperature = 0.0f;
  }
  EngineOptions roomy;
  roomy.model = (test::data_dir() / "golden" / "tiny-preln").string();
  roomy.device = DeviceChoice::cpu;
  roomy.max_batch = 8;
  Engine reference(roomy);
  const auto expected = reference.generate(requests);

  EngineOptions tight = roomy;
  tight.budgets.gpu = parse_bytes("1.2MiB");
  Engine engine(tight);
  EXPECT_THROW(engine.make_runner(8, 60, 3), OutOfMemoryError);  // the full batch cannot fit
  EXPECT_NO_THROW(engine.make_runner(1, 60, 3));                 // one sequence can
  const auto results = engine.generate(requests);
  for (std::size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].error.empty()) << results[i].error;
    EXPECT_EQ(results[i].tokens, expected[i].tokens) << "request " << i;
  }
}

TEST(EngineBatches, ARequestThatCannotFitAloneFailsAloneWithTheReason) {
  EngineOptions options;
  options.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.device = DeviceChoice::cpu;
  // Measure what a 2-token and a 60-token request need, then give the gpu tier room for the
  // first only.
  std::uint64_t weights = 0, small = 0, large = 0;
  {
    Engine probe(options);
    weights = probe.device().usage(Tier::gpu).used;
    probe.device().reset_peaks();
    probe.make_runner(1, 2, 1);
    small = probe.device().usage(Tier::gpu).peak - weights;
    probe.device().reset_peaks();
    probe.make_runner(1, 60, 1);
    large = probe.device().usage(Tier::gpu).peak - weights;
  }
  ASSERT_LT(small, large);
  options.budgets.gpu = weights + (small + large) / 2;
  Engine engine(options);
  std::vector<GenerationRequest> requests(2);
  requests[0].prompt.assign(60, 5);  // too long for the budget
  requests[1].prompt = {2, 7};
  for (auto& r : requests) r.max_tokens = 2;
  const auto results = engine.generate(requests);
  EXPECT_NE(results[0].error.find("does not fit"), std::string::npos) << results[0].error;
  EXPECT_TRUE(results[1].error.empty()) << results[1].error;
  EXPECT_EQ(results[1].tokens.size(), 2u);
}

}  // namespace
}  // namespace offgen
