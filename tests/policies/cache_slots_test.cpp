#include "policies/cache_slots.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "engine/core/error.h"

namespace offgen {
namespace {

TEST(CacheSlots, FullKeepsEveryTokenAndDoneSequencesReuseTheirFreeSlot) {
  const auto policy = make_policy({PolicyKind::full}, 6);
  CacheSlots slots({policy.get(), policy.get()}, 7);
  EXPECT_EQ(slots.capacity(), 7);
  slots.start(std::vector<int>{3, 1});
  EXPECT_EQ(slots.prompt_slots(0, 3), (std::vector<std::int32_t>{0, 1, 2}));
  std::vector<std::int32_t> write(2), count(2);
  slots.plan_decode(write.data(), count.data());
  EXPECT_EQ(write, (std::vector<std::int32_t>{3, 1}));
  EXPECT_EQ(count, (std::vector<std::int32_t>{4, 2}));  // the new token attends to itself
  slots.commit(std::vector<std::uint8_t>{1, 0}, std::vector<std::int32_t>{3, 1});
  slots.plan_decode(write.data(), count.data());
  EXPECT_EQ(write, (std::vector<std::int32_t>{4, 1}));  // sequence 1 dropped its token
  EXPECT_EQ(count, (std::vector<std::int32_t>{5, 2}));
  EXPECT_EQ(slots.cached(0), 4);
  EXPECT_EQ(slots.cached(1), 1);
}

TEST(CacheSlots, LocalOverwritesTheOldestTokensSlot) {
  // C = 2: a prompt of 4 keeps positions 2 and 3 in slots 0 and 1.
  const auto policy = make_policy({PolicyKind::local}, 2);
  CacheSlots slots({policy.get()}, 3);
  slots.start(std::vector<int>{4});
  EXPECT_EQ(slots.prompt_slots(0, 4), (std::vector<std::int32_t>{-1, -1, 0, 1}));
  std::vector<std::int32_t> write(1), count(1);
  slots.plan_decode(write.data(), count.data());
  EXPECT_EQ(write[0], 2);  // the spare slot
  EXPECT_EQ(count[0], 3);  // C + 1 at attention time
  slots.commit(std::vector<std::uint8_t>{1}, std::vector<std::int32_t>{4});  // evicts position 2
  slots.plan_decode(write.data(), count.data());
  EXPECT_EQ(write[0], 0);  // position 2 lived in slot 0
  EXPECT_EQ(count[0], 3);
  slots.commit(std::vector<std::uint8_t>{1}, std::vector<std::int32_t>{5});  // evicts position 3
  slots.plan_decode(write.data(), count.data());
  EXPECT_EQ(write[0], 1);
  EXPECT_EQ(slots.cached(0), 2);
}

TEST(CacheSlots, StreamingNeverEvictsItsSinks) {
  const auto policy = make_policy({PolicyKind::streaming, 0.5, 1}, 3);
  CacheSlots slots({policy.get()}, 4);
  slots.start(std::vector<int>{5});  // keeps positions 0 (sink), 3, 4
  EXPECT_EQ(slots.prompt_slots(0, 5), (std::vector<std::int32_t>{0, -1, -1, 1, 2}));
  std::vector<std::int32_t> write(1), count(1);
  for (int position = 5; position < 9; ++position) {
    slots.plan_decode(write.data(), count.data());
    EXPECT_NE(write[0], 0) << "the sink's slot was reused at position " << position;
    slots.commit(std::vector<std::uint8_t>{1}, std::vector<std::int32_t>{position});
  }
}

TEST(CacheSlots, PoliciesThatNeedScoresAreRefused) {
  const auto policy = make_policy({PolicyKind::h2o}, 4);
  EXPECT_THROW(CacheSlots slots({policy.get()}, 5), Error);
}

TEST(CacheSlots, EachSequenceKeepsItsOwnBudgetInTheBatchsCapacity) {
  // Budgets 2 and 5 in caches of 6 slots: sequence 0 evicts from its first 3 slots only, exactly
  // as it would alone in caches of 3, while sequence 1 is still filling up.
  const auto small = make_policy({PolicyKind::local}, 2);
  const auto large = make_policy({PolicyKind::local}, 5);
  CacheSlots together({small.get(), large.get()}, 6);
  CacheSlots alone({small.get()}, 3);
  together.start(std::vector<int>{4, 4});
  alone.start(std::vector<int>{4});
  EXPECT_EQ(together.prompt_slots(0, 4), alone.prompt_slots(0, 4));
  EXPECT_EQ(together.prompt_slots(1, 4), (std::vector<std::int32_t>{0, 1, 2, 3}));
  std::vector<std::int32_t> write(2), count(2), write_alone(1), count_alone(1);
  for (int position = 4; position < 12; ++position) {
    together.plan_decode(write.data(), count.data());
    alone.plan_decode(write_alone.data(), count_alone.data());
    EXPECT_EQ(write[0], write_alone[0]) << "position " << position;
    EXPECT_EQ(count[0], count_alone[0]) << "position " << position;
    EXPECT_LE(write[0], 2);
    EXPECT_EQ(count[1], std::min(position, 5) + 1);
    together.commit(std::vector<std::uint8_t>{1, 1}, std::vector<std::int32_t>{position, position});
    alone.commit(std::vector<std::uint8_t>{1}, std::vector<std::int32_t>{position});
  }
}

TEST(CacheSlots, ABudgetLargerThanTheCachesIsRefused) {
  const auto policy = make_policy({PolicyKind::local}, 4);
  EXPECT_THROW(CacheSlots slots({policy.get()}, 4), Error);
}

}  // namespace
}  // namespace offgen
