#include "scheduler/batch_formation.h"

#include <gtest/gtest.h>

namespace offgen {
namespace {

TEST(OrderByLength, SortsByLengthKeepingInputOrderAmongEquals) {
  const std::vector<std::size_t> lengths = {5, 3, 9, 3, 7};
  EXPECT_EQ(order_by_length(lengths), (std::vector<std::size_t>{1, 3, 0, 4, 2}));
  EXPECT_TRUE(order_by_length({}).empty());
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
