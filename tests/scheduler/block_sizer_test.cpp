#include "scheduler/block_sizer.h"

#include <gtest/gtest.h>

#include <vector>

namespace offgen {
namespace {

// n requests of `prompt` tokens and `steps` passes (the prefill and steps - 1 decode steps).
std::vector<SequenceWork> requests(std::size_t n, int prompt, int steps) {
  return std::vector<SequenceWork>(n, SequenceWork{prompt, steps});
}

TEST(BlockSizer, StartsSmallThenFillsTheTargetFromWhatItMeasured) {
  // 600 short requests that all fit one planned block: the first block measures, then each block
  // takes about 30 s of work instead of the whole job running as one block.
  BlockSizer sizer(600, 30.0);
  const auto work = requests(600, 8, 33);
  const std::size_t first = sizer.next(work);
  EXPECT_EQ(first, 75u);
  // 75 requests x 40 slots (8 prompt + 32 decode) took 15 s: 0.005 s per slot.
  sizer.observe(33, 75 * 40, 15.0);
  EXPECT_EQ(sizer.next(work), 150u);
}

TEST(BlockSizer, LearnsTheFixedCostPerStepAndKeepsTheBlockWhenItDominates) {
  // Weights streamed every pass: 1 s per step whatever the block, plus 1 ms per token.
  BlockSizer sizer(256, 30.0);
  sizer.observe(33, 32 * 100, 33 + 0.001 * 32 * 100);
  sizer.observe(33, 128 * 100, 33 + 0.001 * 128 * 100);
  EXPECT_NEAR(sizer.seconds_per_step(), 1.0, 1e-6);
  EXPECT_NEAR(sizer.seconds_per_slot(), 0.001, 1e-9);
  // 33 fixed seconds already pass the target: shrinking cannot meet it, so the planned block runs.
  EXPECT_EQ(sizer.next(requests(1000, 68, 33)), 256u);
  // The target no longer bounds the block then, but padding still does: one long prompt after a
  // hundred short ones would pad all of them to its length, so it waits for the next block.
  std::vector<SequenceWork> work = requests(100, 10, 33);
  work.push_back({2000, 33});
  EXPECT_EQ(sizer.next(work), 100u);
}

TEST(BlockSizer, FitsTokensAndStepsTogether) {
  BlockSizer sizer(1000, 10.0);
  // 0.1 s per step and 0.002 s per slot.
  sizer.observe(10, 500, 1.0 + 1.0);
  sizer.observe(20, 2000, 2.0 + 4.0);
  EXPECT_NEAR(sizer.seconds_per_step(), 0.1, 1e-9);
  EXPECT_NEAR(sizer.seconds_per_slot(), 0.002, 1e-12);
  // 20 steps = 2 s fixed, leaving 8 s = 4000 slots = 100 requests of 21 + 19 slots; equal
  // requests never pad, so the largest block that fits is also the fastest.
  EXPECT_EQ(sizer.next(requests(1000, 21, 20)), 100u);
}

// Fifty short requests, then fifty long ones: a block of all hundred would pad the short prompts
// to 500 tokens, predicted to halve the rate of useful work, so the block stops at the short ones
// and the long ones run together next.
TEST(BlockSizer, StopsBeforeRequestsThatWouldPadMoreThanTheyAdd) {
  BlockSizer sizer(1000, 1000.0);
  sizer.observe(10, 1000, 0.1 + 1.0);  // 0.01 s per step, 0.001 s per slot
  sizer.observe(20, 4000, 0.2 + 4.0);
  ASSERT_NEAR(sizer.seconds_per_step(), 0.01, 1e-9);
  ASSERT_NEAR(sizer.seconds_per_slot(), 0.001, 1e-12);
  std::vector<SequenceWork> work = requests(50, 10, 10);
  const auto long_ones = requests(50, 500, 10);
  work.insert(work.end(), long_ones.begin(), long_ones.end());
  EXPECT_EQ(sizer.next(work), 50u);
  EXPECT_EQ(sizer.next(long_ones), 50u);
  // Lengths that grow slowly cost little padding: the block takes them all.
  std::vector<SequenceWork> gradual;
  for (int i = 0; i < 100; ++i) gradual.push_back({100 + i / 10, 10});
  EXPECT_EQ(sizer.next(gradual), 100u);
}

TEST(BlockSizer, NeverBelowOneRequestNorAboveThePlannedBlockOrWhatIsLeft) {
  BlockSizer sizer(64, 1.0);
  sizer.observe(10, 100, 50.0);  // very slow: even one request is over the target
  EXPECT_EQ(sizer.next(requests(500, 91, 10)), 1u);
  BlockSizer fast(64, 30.0);
  fast.observe(10, 100, 0.001);
  EXPECT_EQ(fast.next(requests(500, 10, 10)), 64u);
  EXPECT_EQ(fast.next(requests(5, 10, 10)), 5u);
}

TEST(BlockSizer, WithoutAProbeTheFirstBlockIsThePlannedOne) {
  BlockSizer sizer(256, 30.0, /*probe=*/false);
  EXPECT_EQ(sizer.next(requests(1000, 100, 33)), 256u);
}

TEST(BlockSizer, NoTargetMeansThePlannedBlock) {
  BlockSizer sizer(600, 0.0);
  EXPECT_EQ(sizer.next(requests(1000, 40, 33)), 600u);
  BlockSizer small(4, 30.0);
  EXPECT_EQ(small.next(requests(1000, 40, 33)), 1u);  // an eighth of 4, at least one
}

}  // namespace
}  // namespace offgen

namespace offgen {
namespace {

// A sizer whose fit is exactly `per_step` seconds per pass plus `per_slot` per token slot.
BlockSizer fitted(std::size_t max_block, double target, double per_step, double per_slot) {
  BlockSizer sizer(max_block, target);
  sizer.observe(1, 1000, per_step + 1000 * per_slot);      // a prefill
  sizer.observe(40, 400, 40 * per_step + 400 * per_slot);  // decode steps
  return sizer;
}

TEST(BlockSizer, SimulatesTheRefilledRunnerPassByPass) {
  const BlockSizer sizer = fitted(8, 30.0, 1.0, 0.01);
  // Two rows: requests 0 and 1 prefill together (padded to 4); request 1 ends at its first pick,
  // so request 2 prefills alone into its row (6 slots); then 3 decode steps, each charged for
  // both rows.
  const std::vector<SequenceWork> work = {{4, 3}, {2, 1}, {6, 4}};
  EXPECT_NEAR(sizer.continuous_seconds(work, 2, 8), 5 * 1.0 + (8 + 6 + 3 * 2) * 0.01, 1e-9);
}

TEST(BlockSizer, RowsTradePaddingAgainstTheFixedCostOfAPass) {
  // Prompts growing from 10 to 808 tokens, in the order they run: the first rows prefill
  // together, padded to the longest of them.
  std::vector<SequenceWork> work;
  for (int i = 0; i < 400; ++i) work.push_back({10 + 2 * i, 20});
  // A slot costs much more than a pass: fewer rows pad less.
  const BlockSizer slots_dominate = fitted(400, 1e9, 0.001, 0.01);
  const std::size_t rows = slots_dominate.rows(work, 8);
  EXPECT_LT(rows, 200u);
  EXPECT_LT(slots_dominate.continuous_seconds(work, rows, 8),
            slots_dominate.continuous_seconds(work, 400, 8));
  // A pass costs much more than a slot: every row at once.
  EXPECT_EQ(fitted(400, 1e9, 10.0, 1e-6).rows(work, 8), 400u);
  // The target bounds the rows by the life of the longest request: 20 passes of
  // 0.001 + 0.01 x rows seconds within 3 s leaves at most 14 rows.
  EXPECT_LE(fitted(400, 3.0, 0.001, 0.01).rows(work, 8), 14u);
}

}  // namespace
}  // namespace offgen
