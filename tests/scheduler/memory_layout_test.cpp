// Memory layouts: what a layout sums and hands out is what a device then accounts, a name that
// is not in the layout is an error, and decode attention's split scratch appears in the KV
// cache's layout exactly where a GPU would split (never on the cpu device).
#include "scheduler/memory_layout.h"

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "engine/device/cpu_device.h"
#include "kernels/decode_split.h"
#include "scheduler/kv_cache_layout.h"

namespace offgen {
namespace {

TEST(MemoryLayout, SumsEachTierAndAllocatesExactlyWhatItLists) {
  MemoryLayout layout;
  layout.add("a", Tier::gpu, 100);
  layout.add("per layer", Tier::gpu, 40, 3);
  layout.add("staging", Tier::pinned, 64, 2);
  layout.add("unused", Tier::gpu, 0);
  layout.add("per layer", Tier::pinned, 8, 3);  // a second entry of the same name
  EXPECT_EQ(layout.bytes(Tier::gpu), 100u + 3 * 40);
  EXPECT_EQ(layout.bytes(Tier::pinned), 2u * 64 + 3 * 8);
  EXPECT_EQ(layout.bytes(Tier::host), 0u);
  EXPECT_EQ(layout.at("per layer", 1).tier, Tier::pinned);

  CpuDevice device(DeviceBudgets{.gpu = 1 << 20, .pinned = 1 << 20, .host = 1 << 20});
  Buffer a = layout.allocate(device, "a");
  std::vector<Buffer> per_layer = layout.allocate_all(device, "per layer");
  std::vector<Buffer> staging = layout.allocate_all(device, "staging");
  std::vector<Buffer> pinned_per_layer = layout.allocate_all(device, "per layer", 1);
  Buffer unused = layout.allocate(device, "unused");
  EXPECT_EQ(per_layer.size(), 3u);
  EXPECT_FALSE(unused);
  EXPECT_EQ(device.usage(Tier::gpu).used, layout.bytes(Tier::gpu));
  EXPECT_EQ(device.usage(Tier::pinned).used, layout.bytes(Tier::pinned));
}

TEST(MemoryLayout, ANameItDoesNotListOrASingleBufferOfManyIsAnError) {
  MemoryLayout layout;
  layout.add("per layer", Tier::gpu, 40, 3);
  CpuDevice device(DeviceBudgets{.gpu = 1 << 20, .pinned = 1 << 20, .host = 1 << 20});
  EXPECT_THROW(layout.at("missing"), Error);
  EXPECT_THROW(layout.at("per layer", 1), Error);
  EXPECT_THROW(layout.allocate(device, "per layer"), Error);
  EXPECT_EQ(device.usage(Tier::gpu).used, 0u);
}

TEST(DecodeSplit, CoversTheCapacityInWholeChunksAndOnlySplitsOnAGpu) {
  for (const int capacity : {1, 63, 64, 65, 543, 2049, 4096, 9000}) {
    for (const int batch : {1, 3, 64}) {
      for (const int sms : {0, 1, 132}) {
        SCOPED_TRACE(testing::Message()
                     << "capacity " << capacity << " batch " << batch << " sms " << sms);
        const kernels::DecodeSplit split = kernels::plan_decode_split(batch, 12, capacity, sms);
        EXPECT_GE(std::int64_t{split.chunk} * split.splits, capacity);
        EXPECT_LT(std::int64_t{split.chunk} * (split.splits - 1), capacity);
        if (sms == 0) {
          EXPECT_EQ(split.splits, 1);
          EXPECT_EQ(kernels::decode_split_scratch_bytes(split, batch, 12, 64), 0u);
          continue;
        }
        EXPECT_EQ(split.chunk % kernels::kDecodeMinChunk, 0);
        EXPECT_LE(split.chunk, kernels::kDecodeMaxChunk);
        const std::uint64_t scratch = kernels::decode_split_scratch_bytes(split, batch, 12, 64);
        EXPECT_EQ(scratch,
                  split.splits == 1 ? 0u : std::uint64_t{12} * batch * split.splits * (2 + 64) * 4);
      }
    }
  }
  // One sequence on a large GPU splits a long cache to fill its SMs.
  EXPECT_GT(kernels::plan_decode_split(1, 12, 2048, 132).splits, 1);
}

TEST(KvCacheLayout, HoldsTheLargestSplitScratchOfTheAttentionsThatRunOnTheGpu) {
  const ModelConfig config = ModelConfig::from_name("opt-125m").value();
  KvCacheShape shape;
  shape.gpu_batches = split_block(4, {.num_gpu_batches = 2, .kv_gpu_fraction = 0.5});
  shape.capacity = 2048;
  shape.max_prompt = 512;
  const auto scratch = [&] {
    return block_kv_cache_own_layout(config, shape).at("decode attention scratch").bytes;
  };
  EXPECT_EQ(scratch(), 0u);  // the cpu device never splits
  shape.multiprocessors = 132;
  // One resident and one staged sequence per GPU batch, attended one after the other.
  const kernels::DecodeSplit one =
      kernels::plan_decode_split(1, config.num_heads, shape.capacity, shape.multiprocessors);
  EXPECT_EQ(scratch(),
            kernels::decode_split_scratch_bytes(one, 1, config.num_heads, config.head_dim()));
  EXPECT_GT(scratch(), 0u);
  shape.cpu_attention = true;  // the staged sequences attend on the host: the same largest
  EXPECT_EQ(scratch(),
            kernels::decode_split_scratch_bytes(one, 1, config.num_heads, config.head_dim()));
  EXPECT_EQ(block_kv_cache_layout(config, shape).bytes(Tier::gpu),
            block_kv_cache_own_layout(config, shape).bytes(Tier::gpu) +
                offloaded_kv_layout(config, {1, 1}, shape.capacity, false, true).bytes(Tier::gpu));
}

}  // namespace
}  // namespace offgen
