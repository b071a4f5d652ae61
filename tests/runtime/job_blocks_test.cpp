// A batch job on many short requests whose planned block would hold them all: results come out
// block by block (the first block small, the next sized to the time target), so a user sees
// answers early and an interrupt keeps every finished block; tokens are reported step by step.
// This is the path of scoring and of placements that keep KV or hidden states off the gpu tier;
// generate refills finished rows elsewhere (continuous_batching_test.cpp), so these tests turn
// that off.
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
    options.continuous_batching = false;
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

namespace offgen {
namespace {

// Useful token slots against computed ones: a block pads its prompts to the longest, and every
// decode step computes every row, finished or not. Two requests in one block: prompts of 3 and 7
// tokens, 2 and 5 new tokens (EOS ignored).
TEST_F(JobBlocks, CountsTheTokenSlotsABlockComputedAndThoseItsRequestsUsed) {
  Engine e = engine(0);
  std::vector<GenerationRequest> requests(2);
  requests[0].prompt = {2, 10, 11};
  requests[0].max_tokens = 2;
  requests[1].prompt = {2, 20, 21, 22, 23, 24, 25};
  requests[1].max_tokens = 5;
  for (GenerationRequest& r : requests) r.ignore_eos = true;
  EXPECT_EQ(e.slot_use().computed(), 0u);
  const auto results = e.generate(requests);
  ASSERT_EQ(results[0].tokens.size(), 2u);
  ASSERT_EQ(results[1].tokens.size(), 5u);
  // Prefill: 2 rows x 7 columns, 3 + 7 real. Decode: the last token is never fed back, so 4
  // steps of 2 rows; the first request feeds one token (its first), the second four.
  EXPECT_EQ(e.slot_use().computed(), 2u * 7u + 2u * 4u);
  EXPECT_EQ(e.slot_use().useful, (3u + 7u) + (1u + 4u));
  EXPECT_DOUBLE_EQ(e.slot_use().efficiency(), 15.0 / 22.0);
  EXPECT_EQ(e.slot_use().passes, 1u + 4u);  // the prefill and the decode steps
  EXPECT_EQ(e.slot_use().padding, 4u);      // the shorter prompt's 4 columns
  EXPECT_EQ(e.slot_use().idle, 3u);         // the first request's row in steps 2 to 4

  // A second job adds to the count; scoring counts its passes the same way.
  const SlotUse before = e.slot_use();
  std::vector<ScoreRequest> texts(2);
  texts[0].tokens = {2, 30, 31, 32};
  texts[1].tokens = {2, 40, 41, 42, 43, 44};
  e.score(texts, 0);  // the whole text as one prefill, but for each text's last token (a target)
  const SlotUse scored = e.slot_use() - before;
  EXPECT_EQ(scored.computed(), 2u * 5u);
  EXPECT_EQ(scored.useful, 3u + 5u);
  EXPECT_EQ(scored.passes, 1u);
  EXPECT_EQ(scored.padding, 2u);
  EXPECT_EQ(scored.idle, 0u);
}

}  // namespace
}  // namespace offgen
