#include "policies/full_cache_slots.h"

#include <gtest/gtest.h>

#include <vector>

namespace offgen {
namespace {

TEST(FullCacheSlots, KeepsEveryRealTokenAndReusesTheSpareSlotForDoneSequences) {
  FullCacheSlots policy;
  const std::vector<int> prompts = {3, 1};
  policy.start(prompts);
  std::vector<std::int32_t> write(2), count(2);
  policy.plan_decode(write.data(), count.data());
  EXPECT_EQ(write, (std::vector<std::int32_t>{3, 1}));
  EXPECT_EQ(count, (std::vector<std::int32_t>{4, 2}));  // the new token attends to itself
  policy.commit(std::vector<std::uint8_t>{1, 0});       // sequence 1 is done: its token is dropped
  policy.plan_decode(write.data(), count.data());
  EXPECT_EQ(write, (std::vector<std::int32_t>{4, 1}));
  EXPECT_EQ(count, (std::vector<std::int32_t>{5, 2}));
  EXPECT_EQ(policy.cached(0), 4);
  EXPECT_EQ(policy.cached(1), 1);
}

TEST(FullCacheSlots, CapacityCoversPromptGenerationAndTheSpareSlot) {
  EXPECT_EQ(FullCacheSlots::capacity(512, 32), 545);
}

}  // namespace
}  // namespace offgen
