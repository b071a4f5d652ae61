// A compare cell's speed is the median of its timed runs: of an even number, the mean of the
// middle two (it was the lower middle run's, so two runs showed the slower one).
#include <gtest/gtest.h>

#include "bench/compare.h"

namespace offgen::bench {
namespace {

TEST(CompareCell, MedianOfAnEvenNumberOfRunsIsTheMeanOfTheMiddleTwo) {
  CompareCell cell;
  cell.tokens_per_second = {4.0, 1.0, 3.0, 2.0};
  EXPECT_DOUBLE_EQ(cell.median_tokens_per_second(), 2.5);
  cell.tokens_per_second = {10.0, 30.0};
  EXPECT_DOUBLE_EQ(cell.median_tokens_per_second(), 20.0);
  cell.tokens_per_second = {3.0, 1.0, 2.0};
  EXPECT_DOUBLE_EQ(cell.median_tokens_per_second(), 2.0);
}

TEST(CompareCell, WithoutTimedRunsTheMedianIsTheThroughputRunsOwn) {
  CompareCell cell;
  cell.throughput.decode_seconds = 0.0;
  cell.throughput.prefill_seconds = 0.0;
  EXPECT_DOUBLE_EQ(cell.median_tokens_per_second(), cell.throughput.generated_tokens_per_second());
}

}  // namespace
}  // namespace offgen::bench
