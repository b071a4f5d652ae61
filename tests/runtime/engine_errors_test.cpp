// Errors a user meets when loading: each names the file and the problem, none crashes.
#include <gtest/gtest.h>

#include <filesystem>

#include "bench/throughput.h"
#include "engine/core/error.h"
#include "engine/core/units.h"
#include "engine/runtime/block_runner.h"
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
  std::string text = test::read_file(model / "config.json");
  const std::string from = "\"ffn_dim\": 256";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), "\"ffn_dim\": 128");
  test::write_file(model / "config.json", text);
  const std::string error = load_error(model);
  EXPECT_NE(error.find("fc1.weight"), std::string::npos) << error;
  EXPECT_NE(error.find("[256, 64]"), std::string::npos) << error;
}

TEST(EngineLoad, ABrokenPytorchBinNamesTheFileAndTheProblem) {
  test::TempDir dir;
  const fs::path model = dir.path() / "old";
  fs::create_directories(model);
  fs::copy(test::data_dir() / "golden" / "tiny-preln" / "config.json", model / "config.json");
  test::write_file(model / "pytorch_model.bin", "not really a zip archive");
  const std::string error = load_error(model);
  EXPECT_NE(error.find((model / "pytorch_model.bin").string() + ": not a zip archive"),
            std::string::npos)
      << error;
}

TEST(EngineLoad, TruncatedPytorchBinShardNamesTheShard) {
  test::TempDir dir;
  const fs::path model = dir.path() / "model";
  fs::copy(test::data_dir() / "golden" / "tiny-postln-proj-bin", model,
           fs::copy_options::recursive);
  const fs::path shard = model / "pytorch_model-00002-of-00003.bin";
  fs::resize_file(shard, fs::file_size(shard) - 100);
  const std::string error = load_error(model);
  EXPECT_EQ(error.find(shard.string() + ": "), 0u) << error;
}

TEST(EngineLoad, UnknownModelNameListsTheKnownOnes) {
  const std::string error = load_error("opt-7b");
  EXPECT_NE(error.find("opt-125m"), std::string::npos) << error;
}

TEST(EngineLoad, WeightsLargerThanTheGpuBudgetSayWhatDidNotFit) {
  EngineOptions options;
  options.model = "dummy:opt-125m";  // 250 MB of fp16 weights
  options.device = DeviceChoice::cpu;
  options.budgets.gpu = parse_bytes("64MiB");
  try {
    Engine engine(options);
    FAIL() << "expected an out-of-memory error";
  } catch (const OutOfMemoryError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("gpu tier"), std::string::npos) << what;
    // Below the CLI it names the parameters that move the weights, not flags.
    EXPECT_NE(what.find("weights.gpu / weights.pinned"), std::string::npos) << what;
    EXPECT_NE(what.find("budgets.gpu"), std::string::npos) << what;
    EXPECT_EQ(what.find("--"), std::string::npos) << what;
  }
}

TEST(EngineLoad, ABadPlacementNamesTheParameter) {
  EngineOptions options;
  options.model = "dummy:opt-125m";
  options.device = DeviceChoice::cpu;
  options.placement.block.num_gpu_batches = 0;
  try {
    Engine engine(options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "block.num_gpu_batches must be positive (got 0)");
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
  roomy.placement.gpu_batch = 8;
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

namespace offgen {
namespace {

EngineOptions tiny_options() {
  EngineOptions options;
  options.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.device = DeviceChoice::cpu;
  return options;
}

std::vector<GenerationRequest> numbered_requests(int n, int max_tokens) {
  std::vector<GenerationRequest> requests(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    auto& r = requests[static_cast<std::size_t>(i)];
    r.prompt = {2, 10 + i, 20 + i, 30 + i};
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
  }
  return requests;
}

// The interrupt check stops a run between steps: what was reported is complete and identical to
// an uninterrupted run, nothing is reported twice, and the rest is not reported at all.
TEST(EngineInterrupt, StopsBetweenStepsAndReportsOnlyFinishedRequestsOnce) {
  EngineOptions options = tiny_options();
  options.placement.gpu_batch = 2;
  Engine engine(options);
  const auto requests = numbered_requests(7, 6);
  const auto expected = engine.generate(requests);
  for (int stop_at : {1, 2, 9, 12, 20}) {
    SCOPED_TRACE("stop at check " + std::to_string(stop_at));
    int checks = 0;
    engine.set_interrupt_check([&] { return ++checks >= stop_at; });
    std::vector<int> reported(requests.size(), 0);
    EXPECT_THROW(engine.generate(requests,
                                 [&](std::size_t i, const GenerationResult& result) {
                                   ++reported[i];
                                   EXPECT_EQ(result.tokens, expected[i].tokens);
                                 }),
                 Interrupted);
    int done = 0;
    for (int n : reported) {
      EXPECT_LE(n, 1);
      done += n;
    }
    EXPECT_LT(done, 7);
    if (stop_at <= 2) {
      EXPECT_EQ(done, 0);  // before the first batch, or before its prefill
    }
  }
  engine.set_interrupt_check({});
  EXPECT_EQ(engine.generate(requests).size(), requests.size());

  // score stops the same way.
  std::vector<ScoreRequest> texts(4);
  for (auto& t : texts) t.tokens = {2, 40, 50, 60, 70, 80};
  int checks = 0;
  engine.set_interrupt_check([&] { return ++checks >= 4; });
  std::size_t scored = 0;
  EXPECT_THROW(engine.score(texts, 2, [&](std::size_t, const ScoreResult&) { ++scored; }),
               Interrupted);
  EXPECT_LT(scored, texts.size());
}

// score reports each text of a batch as soon as its last token is scored, so an interrupt in the
// middle of a batch keeps the shorter texts already finished (with the uninterrupted log-probs)
// and reports none twice.
TEST(EngineInterrupt, ScoreReportsEachTextWhenItsLastTokenIsScored) {
  EngineOptions options = tiny_options();
  options.placement.gpu_batch = 4;
  options.block_seconds = 0;  // the planned block: all four texts together
  Engine engine(options);
  // One batch: lengths 3, 5, 7 and 9 after a 2-token prefill need 0, 2, 4 and 6 decode steps.
  std::vector<ScoreRequest> texts(4);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    for (std::size_t t = 0; t < 3 + 2 * i; ++t) {
      texts[i].tokens.push_back(static_cast<std::int32_t>(2 + 7 * t + i));
    }
  }
  const auto expected = engine.score(texts, 2);
  // Checks: one before the batch, one before the prefill, then one before each decode step.
  for (int stop_at = 3; stop_at <= 8; ++stop_at) {
    SCOPED_TRACE("stop at check " + std::to_string(stop_at));
    int checks = 0;
    engine.set_interrupt_check([&] { return ++checks >= stop_at; });
    std::vector<int> reported(texts.size(), 0);
    EXPECT_THROW(engine.score(texts, 2,
                              [&](std::size_t i, const ScoreResult& result) {
                                ++reported[i];
                                ASSERT_EQ(result.token_logprobs.size(), texts[i].tokens.size());
                                for (std::size_t t = 1; t < texts[i].tokens.size(); ++t) {
                                  EXPECT_FLOAT_EQ(result.token_logprobs[t],
                                                  expected[i].token_logprobs[t]);
                                }
                              }),
                 Interrupted);
    // Decode steps done before the stop: stop_at - 3. Text i needs 2 * i of them.
    const int steps_done = stop_at - 3;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      EXPECT_EQ(reported[i], static_cast<int>(2 * i) <= steps_done ? 1 : 0) << "text " << i;
    }
  }
  engine.set_interrupt_check({});
}

// Streaming KV budgets: a token budget below the sinks is refused before any work, naming the
// flags; a fraction that resolves below them for short sequences, and sequences shorter than the
// sinks, run (the batch keeps fewer sinks) instead of failing midway.
TEST(EnginePolicies, StreamingBudgetsBelowTheSinksFailEarlyOrRun) {
  EngineOptions options = tiny_options();
  options.policy.kind = PolicyKind::streaming;
  options.policy.sinks = 4;
  options.kv_budget = KvBudget::tokens(3);
  try {
    Engine engine(options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("kv_budget 3"), std::string::npos) << what;
    EXPECT_NE(what.find("sinks 4"), std::string::npos) << what;
  }
  options.kv_budget = KvBudget::tokens(5);
  Engine engine(options);
  std::vector<GenerationRequest> short_ones = numbered_requests(2, 2);
  for (auto& r : short_ones) r.prompt = {2, 7};  // 3 tokens cached in all: fewer than the sinks
  for (const auto& r : engine.generate(short_ones)) {
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.tokens.size(), 2u);
  }
  EXPECT_THROW(engine.set_policy(options.policy, KvBudget::tokens(2)), Error);
  engine.set_policy(options.policy,
                    KvBudget::fraction(0.1));  // C = ceil(0.1 * 12) = 2 for the requests below
  for (const auto& r : engine.generate(numbered_requests(3, 8))) {
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.tokens.size(), 8u);
  }
  // h2o with the smallest budget keeps only the newest token, and runs.
  PolicyOptions h2o;
  h2o.kind = PolicyKind::h2o;
  for (double recent : {0.0, 0.5, 1.0}) {
    h2o.recent_fraction = recent;
    engine.set_policy(h2o, KvBudget::tokens(1));
    for (const auto& r : engine.generate(numbered_requests(2, 5))) {
      EXPECT_TRUE(r.error.empty()) << r.error;
      EXPECT_EQ(r.tokens.size(), 5u);
    }
  }
  h2o.recent_fraction = 1.5;
  EXPECT_THROW(engine.set_policy(h2o, KvBudget::fraction(0.2)), Error);
}

}  // namespace
}  // namespace offgen
