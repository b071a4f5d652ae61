// A batch job on many short requests whose planned block would hold them all: results come out
// block by block (the first block small, the next sized to the time target), so a user sees
// answers early and an interrupt keeps every finished block; tokens are reported step by step.
#include <gtest/gtest.h>

#include <vector>

#include "engine/runtime/engine.h"
#include "tests/runtime/real_vocab_model.h"

namespace offgen {
namespace {

std::vector<GenerationRequest> short_requests(int n) {
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < n; ++i) {
    GenerationRequest r;
    r.prompt = {2, 4 + i % 900, 5 + i % 700, 6 + i % 500};
    r.max_tokens = 6;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    requests.push_back(r);
  }
  return requests;
}

class JobBlocks : public ::testing::Test {
 protected:
  void SetUp() override { test::write_real_vocab_model(dir_.path()); }
  Engine engine(double block_seconds) {
    EngineOptions options;
    options.model = dir_.path().string();
    options.device = DeviceChoice::cpu;
    options.placement.gpu_batch = 600;  // one planned block would hold the whole job
    options.block_seconds = block_seconds;
    return Engine(options);
  }
  test::TempDir dir_;
};

TEST_F(JobBlocks, ManyShortRequestsRunAsSeveralBlocksWithResultsAfterEach) {
  Engine e = engine(0.05);
  std::vector<std::size_t> blocks;
  std::vector<std::size_t> answered_before_block;  // results already out when a block starts
  std::uint64_t tokens = 0;
  std::size_t answered = 0;
  e.set_job_progress({[&](std::size_t n) {
                        blocks.push_back(n);
                        answered_before_block.push_back(answered);
                      },
                      [&](std::uint64_t t) { tokens += t; }});
  const auto requests = short_requests(600);
  const auto results =
      e.generate(requests, [&](std::size_t, const GenerationResult&) { ++answered; });
  EXPECT_EQ(answered, 600u);
  ASSERT_GE(blocks.size(), 2u);
  EXPECT_EQ(blocks.front(), 75u);  // an eighth of the planned block measures the cost
  std::size_t total = 0;
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    EXPECT_EQ(answered_before_block[k], total) << "block " << k;  // each block's results are out
    total += blocks[k];
  }
  EXPECT_EQ(total, 600u);
  EXPECT_EQ(tokens, 600u * 6u);  // every generated token reported as its step ran
  for (const auto& r : results) EXPECT_EQ(r.tokens.size(), 6u);
}

TEST_F(JobBlocks, AnInterruptKeepsTheBlocksThatFinished) {
  Engine e = engine(0.05);
  std::size_t answered = 0;
  std::size_t blocks = 0;
  e.set_job_progress({[&](std::size_t) { ++blocks; }, {}});
  e.set_interrupt_check([&] { return blocks >= 2; });  // stop inside the second block
  const auto requests = short_requests(600);
  EXPECT_THROW(e.generate(requests, [&](std::size_t, const GenerationResult&) { ++answered; }),
               Interrupted);
  EXPECT_EQ(answered, 75u);  // the first block, whole
}

TEST_F(JobBlocks, WithoutATargetThePlannedBlockRuns) {
  Engine e = engine(0.0);
  std::vector<std::size_t> blocks;
  e.set_job_progress({[&](std::size_t n) { blocks.push_back(n); }, {}});
  e.generate(short_requests(100));
  EXPECT_EQ(blocks, (std::vector<std::size_t>{100}));
}

}  // namespace
}  // namespace offgen
