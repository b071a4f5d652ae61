// Weights split between the gpu tier and pinned memory, streamed in per layer: the outputs are
// bit-identical to the all-resident run (the same kernels see the same bytes), the gpu tier holds
// only the resident share plus two layer slots, and the bytes moved are the offloaded share.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/core/error.h"
#include "engine/core/units.h"
#include "engine/runtime/engine.h"
#include "offload/disk_file.h"
#include "tests/support/golden.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

EngineOptions tiny(double gpu_fraction, PolicyKind policy = PolicyKind::full) {
  EngineOptions options;
  options.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.device = DeviceChoice::cpu;
  options.max_batch = 4;
  options.weights_gpu_fraction = gpu_fraction;
  options.policy.kind = policy;
  options.kv_budget = policy == PolicyKind::full ? 0.0 : 6;
  return options;
}

std::vector<GenerationRequest> prompts() {
  std::vector<GenerationRequest> requests;
  for (const ScoreRequest& text : test::golden_score_requests()) {
    GenerationRequest r;
    r.prompt.assign(text.tokens.begin(), text.tokens.begin() + 4);
    r.max_tokens = 10;
    r.sampling.temperature = 0.0f;
    requests.push_back(r);
  }
  return requests;
}

class OffloadedWeights : public ::testing::TestWithParam<double> {};

TEST_P(OffloadedWeights, GiveExactlyTheResidentRunsOutputs) {
  for (PolicyKind policy : {PolicyKind::full, PolicyKind::h2o}) {
    Engine resident(tiny(1.0, policy));
    Engine offloaded(tiny(GetParam(), policy));
    const auto want = resident.score(test::golden_score_requests(), 3);
    const auto got = offloaded.score(test::golden_score_requests(), 3);
    ASSERT_EQ(want.size(), got.size());
    for (std::size_t r = 0; r < want.size(); ++r) {
      EXPECT_EQ(got[r].token_logprobs.size(), want[r].token_logprobs.size());
      for (std::size_t i = 1; i < want[r].token_logprobs.size(); ++i) {
        EXPECT_EQ(got[r].token_logprobs[i], want[r].token_logprobs[i]) << "text " << r << " " << i;
      }
    }
    const auto generated = offloaded.generate(prompts());
    const auto expected = resident.generate(prompts());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(generated[i].tokens, expected[i].tokens) << "request " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shares, OffloadedWeights, ::testing::Values(0.0, 0.3, 0.77, 0.999));

TEST(OffloadedWeights, MoveTheOffloadedShareOncePerPass) {
  Engine engine(tiny(0.25));
  EXPECT_GT(engine.weight_offloaded_bytes(), 0u);
  EXPECT_EQ(engine.weight_bytes_moved(), 0u);
  std::vector<GenerationRequest> one = {prompts().front()};
  one[0].max_tokens = 5;  // a prefill and 4 decode steps: 5 passes over the layers
  engine.generate(one);
  EXPECT_EQ(engine.weight_bytes_moved(), 5 * engine.weight_offloaded_bytes());
  EXPECT_EQ(Engine(tiny(1.0)).weight_offloaded_bytes(), 0u);
}

TEST(OffloadedWeights, LetAModelRunUnderAGpuBudgetItsWeightsExceed) {
  // opt-125m: 12 layers of ~14 MB plus ~80 MB of embeddings, 239 MiB in all. 200 MiB holds the
  // embeddings, two layer slots and a small batch, but not every layer.
  EngineOptions options;
  options.model = "opt-125m";
  options.device = DeviceChoice::cpu;
  options.budgets.gpu = parse_bytes("200MiB");
  EXPECT_THROW(Engine{options}, OutOfMemoryError);

  options.weights_gpu_fraction = 0.0;
  Engine offloaded(options);
  options.budgets.gpu = 0;
  options.weights_gpu_fraction = 1.0;
  Engine resident(options);
  EXPECT_LT(offloaded.weight_gpu_bytes(), offloaded.weight_bytes() / 2);

  std::vector<GenerationRequest> requests(3);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    requests[i].prompt = {2};
    for (int t = 0; t < 12; ++t) {
      requests[i].prompt.push_back(static_cast<std::int32_t>(100 + i * 37 + t * 11));
    }
    requests[i].max_tokens = 6;
    requests[i].sampling.temperature = 0.0f;
  }
  offloaded.device().reset_peaks();
  const auto got = offloaded.generate(requests);
  const auto want = resident.generate(requests);
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i].tokens, want[i].tokens);
  EXPECT_LE(offloaded.device().usage(Tier::gpu).peak, parse_bytes("200MiB"));
}

TEST(OffloadedWeights, AShareOutsideZeroToOneIsRefused) {
  try {
    Engine engine(tiny(1.5));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[0, 1]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace offgen

namespace offgen {
namespace {

TEST(DiskWeights, GiveExactlyTheResidentRunsOutputsAndLeaveNoFile) {
  test::TempDir disk;
  EngineOptions options = tiny(0.2);
  options.weights_cpu_fraction = 0.3;  // the remaining half of each layer on disk
  options.disk = disk.path().string();
  Engine on_disk(options);
  Engine resident(tiny(1.0));
  EXPECT_TRUE(std::filesystem::is_empty(disk.path()));  // the file is unlinked at once
  EXPECT_GT(on_disk.weight_disk_bytes(), on_disk.weight_offloaded_bytes() / 3);
  EXPECT_LT(on_disk.weight_disk_bytes(), on_disk.weight_offloaded_bytes());
  const auto want = resident.score(test::golden_score_requests(), 3);
  const auto got = on_disk.score(test::golden_score_requests(), 3);
  for (std::size_t r = 0; r < want.size(); ++r) {
    for (std::size_t i = 1; i < want[r].token_logprobs.size(); ++i) {
      EXPECT_EQ(got[r].token_logprobs[i], want[r].token_logprobs[i]) << "text " << r << " " << i;
    }
  }
  const auto generated = on_disk.generate(prompts());
  const auto expected = resident.generate(prompts());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(generated[i].tokens, expected[i].tokens) << "request " << i;
  }
}

TEST(DiskWeights, ADiskShareWithoutAFolderIsAnError) {
  EngineOptions options = tiny(0.2);
  options.weights_cpu_fraction = 0.3;
  try {
    Engine engine(options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--disk"), std::string::npos) << e.what();
  }
  options.disk = "/nonexistent/offgen-disk";
  try {
    Engine engine(options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/offgen-disk"), std::string::npos)
        << e.what();
  }
}

TEST(DiskFile, ReadsBackEverySegmentAtAlignedOffsets) {
  test::TempDir dir;
  DiskFile file(dir.path());
  std::mt19937 rng(7);
  std::vector<std::vector<char>> segments;
  std::vector<std::uint64_t> offsets;
  for (std::size_t bytes :
       {std::size_t{1}, std::size_t{4096}, std::size_t{10000}, std::size_t{9} << 20}) {
    std::vector<char> data(bytes);
    for (char& c : data) c = static_cast<char>(rng());
    offsets.push_back(file.append(data.data(), data.size()));
    EXPECT_EQ(offsets.back() % DiskFile::kAlignment, 0u);
    segments.push_back(std::move(data));
  }
  for (std::size_t s = segments.size(); s-- > 0;) {
    const std::size_t padded = DiskFile::padded(segments[s].size());
    void* raw = std::aligned_alloc(DiskFile::kAlignment, padded);
    file.read(offsets[s], raw, segments[s].size());
    EXPECT_EQ(std::memcmp(raw, segments[s].data(), segments[s].size()), 0) << "segment " << s;
    std::free(raw);
  }
}

}  // namespace
}  // namespace offgen
