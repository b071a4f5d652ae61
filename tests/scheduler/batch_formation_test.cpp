#include "scheduler/batch_formation.h"

#include <gtest/gtest.h>

namespace offgen {
namespace {

TEST(OrderForBlocks, GroupsByPromptLengthThenOrdersByStepsKeepingInputOrderAmongEquals) {
  // Groups of factor 1.5: 3 in [2.25, 3.375), 5 in [3.375, 5.06), 7 in [5.06, 7.59), each its
  // own; 20 and 24 share [17.1, 25.6), where fewer steps go first.
  const std::vector<SequenceWork> works = {{5, 1}, {3, 9}, {24, 2}, {3, 9}, {20, 40}, {7, 3}};
  EXPECT_EQ(order_for_blocks(works), (std::vector<std::size_t>{1, 3, 0, 5, 2, 4}));
  EXPECT_TRUE(order_for_blocks({}).empty());
  // Equal steps in a group: shorter prompts first.
  const std::vector<SequenceWork> same_steps = {{24, 4}, {20, 4}, {22, 4}};
  EXPECT_EQ(order_for_blocks(same_steps), (std::vector<std::size_t>{1, 2, 0}));
  // Lengths 0 and 1 share the first group.
  const std::vector<SequenceWork> tiny = {{1, 5}, {0, 2}};
  EXPECT_EQ(order_for_blocks(tiny), (std::vector<std::size_t>{1, 0}));
}

TEST(LeftPad, PadsOnTheLeftWithHuggingFacePositionIds) {
  const std::vector<std::vector<std::int32_t>> seqs = {{2, 10, 11}, {2}, {2, 20, 21, 22, 23}};
  const PaddedBatch p = left_pad(seqs, /*pad_id=*/1);
  ASSERT_EQ(p.batch, 3);
  ASSERT_EQ(p.seq, 5);
  EXPECT_EQ(p.tokens, (std::vector<std::int32_t>{1, 1, 2, 10, 11,  //
                                                 1, 1, 1, 1, 2,    //
                                                 2, 20, 21, 22, 23}));
  EXPECT_EQ(p.valid, (std::vector<std::uint8_t>{0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}));
  // cumsum(mask) - 1, with padding at -1 as Hugging Face computes it.
  EXPECT_EQ(p.positions, (std::vector<std::int32_t>{-1, -1, 0, 1, 2,    //
                                                    -1, -1, -1, -1, 0,  //
                                                    0, 1, 2, 3, 4}));
  EXPECT_EQ(p.lengths, (std::vector<int>{3, 1, 5}));
}

}  // namespace
}  // namespace offgen
