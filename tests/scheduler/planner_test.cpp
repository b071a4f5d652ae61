// The planner: its memory arithmetic equals what the engine allocates for any placement, and its
// choices follow the budgets and the machine (stream weights, offload KV and add GPU batches when
// the gpu tier is tight; cpu attention when PCIe is slow; disk when pinned memory is short; all
// resident when that fits).
#include <gtest/gtest.h>

#include "engine/core/units.h"
#include "engine/runtime/block_runner.h"
#include "engine/runtime/engine.h"
#include "scheduler/planner.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

MachineProfile planner_pcie() {
  MachineProfile p;
  p.h2d = 25e9;
  p.d2h = 25e9;
  p.disk_read = 2e9;
  p.gemm_small = 90e12;
  p.gemm_large = 500e12;
  p.attention = 2e12;
  p.cpu_attention = 80e9;
  return p;
}

Placement placement(int gpu_batch, int num_gpu_batches, double weights_gpu, double weights_pinned,
                    double kv_gpu, bool cpu_attention, bool activations_on_host = false) {
  Placement out;
  out.gpu_batch = gpu_batch;
  out.block = {num_gpu_batches, kv_gpu, cpu_attention, activations_on_host};
  out.weights = {weights_gpu, weights_pinned};
  return out;
}

// What plan_memory says of a placement's whole blocks.
PlanMemory memory_of(const ModelConfig& model, const PlanRequest& request, const Placement& p) {
  return plan_memory(model, request, p, p.block_size());
}

struct MemoryCase {
  Placement placement;
  PolicyKind policy = PolicyKind::full;
  bool disk = false;
  Compression compression{};
};

constexpr Compression kInt4Weights{Storage::int4, Storage::fp16};
constexpr Compression kInt4Kv{Storage::fp16, Storage::int4};
constexpr Compression kInt4{Storage::int4, Storage::int4};

TEST(Planner, MemoryEqualsWhatTheEngineAllocates) {
  const MemoryCase cases[] = {
      {placement(3, 2, 0.5, 0.5, 0.5, false)},                         // 2 of 3 resident per batch
      {placement(2, 4, 0.0, 1.0, 0.0, true), PolicyKind::h2o},         // all KV on the host
      {placement(4, 2, 1.0, 0.0, 0.25, false), PolicyKind::h2o},       // weights resident
      {placement(3, 3, 0.3, 0.4, 0.0, true), PolicyKind::full, true},  // 30% of weights on disk
      {placement(8, 1, 1.0, 0.0, 1.0, false)},                         // all resident
      {placement(8, 2, 0.0, 1.0, 0.0, false)},  // the run's pinned memory outgrows the loading's
      {placement(3, 4, 1.0, 0.0, 1.0, false, true)},  // hidden states in pinned memory
      {placement(2, 3, 0.5, 0.5, 0.5, true, true), PolicyKind::h2o},  // and everything else moves
      // Packed weights and KV: images split by bytes, the expanded blocks, packed caches.
      {placement(8, 1, 1.0, 0.0, 1.0, false), PolicyKind::full, false, kInt4},
      {placement(3, 2, 0.5, 0.5, 0.5, false), PolicyKind::h2o, false, kInt4Weights},
      {placement(3, 3, 0.3, 0.4, 0.0, true), PolicyKind::full, true, kInt4},
      {placement(2, 4, 0.0, 1.0, 0.34, true, true), PolicyKind::h2o, false, kInt4Kv},
      {placement(4, 2, 1.0, 0.0, 0.5, false), PolicyKind::full, false, kInt4Kv},
  };
  const int prompt = 40, gen = 20;
  for (const MemoryCase& c : cases) {
    test::TempDir disk;
    EngineOptions options;
    options.model = (test::data_dir() / "golden" / "tiny-preln").string();
    options.device = DeviceChoice::cpu;
    options.placement = c.placement;
    options.policy.kind = c.policy;
    options.kv_budget = c.policy == PolicyKind::full ? KvBudget{} : KvBudget::fraction(0.5);
    if (c.disk) options.disk = disk.path().string();
    options.compression = c.compression;
    Engine engine(options);
    SCOPED_TRACE(c.placement.describe() + ", " + compression_name(c.compression));
    // Loading peaks pinned memory with its staging; the run holds the runner's buffers instead.
    const std::uint64_t load_peak = engine.device().usage(Tier::pinned).peak;
    auto runner = engine.make_runner(c.placement.block_size(), prompt, gen - 1, prompt + gen);
    const std::uint64_t gpu = engine.device().usage(Tier::gpu).used;
    const std::uint64_t pinned = std::max(load_peak, engine.device().usage(Tier::pinned).used);

    PlanRequest request;
    request.prompt_len = prompt;
    request.gen_len = gen;
    request.kv_tokens = engine.kv_capacity(prompt, gen - 1, prompt + gen) - 1;
    request.keeps_attention_scores = c.policy == PolicyKind::h2o;
    request.compression = c.compression;
    const PlanMemory memory = memory_of(engine.config(), request, c.placement);
    // The device accounts the bytes asked for (not its 256-byte rounding): exactly equal.
    EXPECT_EQ(gpu, memory.gpu);
    EXPECT_EQ(pinned, memory.pinned);
    EXPECT_EQ(memory.disk, engine.weight_disk_bytes());
  }
}

PlanRequest opt_request(const char* gpu, const char* pinned) {
  PlanRequest request;
  request.prompt_len = 512;
  request.gen_len = 32;
  request.kv_tokens = 512 + 31;
  request.gpu_bytes = parse_bytes(gpu);
  request.pinned_bytes = parse_bytes(pinned);
  return request;
}

TEST(Planner, PrefersResidentWeightsAndBigBatchesAndStreamsWhenItMust) {
  const ModelConfig model = ModelConfig::from_name("opt-6.7b").value();
  PlanRequest request = opt_request("70GiB", "100GiB");
  request.max_sequences = 64;  // 13 GB of weights and 64 sequences' KV fit: nothing moves
  const auto roomy = choose_plan(model, planner_pcie(), request);
  ASSERT_TRUE(roomy.has_value());
  EXPECT_TRUE(roomy->placement.all_resident());
  EXPECT_EQ(roomy->block, 64);
  EXPECT_LE(roomy->memory.gpu, request.gpu_bytes);

  request.gpu_bytes = parse_bytes("8GiB");  // less than the weights: some must stream
  const auto tight = choose_plan(model, planner_pcie(), request);
  ASSERT_TRUE(tight.has_value());
  EXPECT_LT(tight->placement.weights.gpu, 1.0);
  EXPECT_LE(tight->memory.gpu, request.gpu_bytes);
  EXPECT_LE(tight->memory.pinned, request.pinned_bytes);
  EXPECT_GT(tight->prediction.decode.weights_in, 0.0);
  EXPECT_LT(tight->prediction.tokens_per_second, roomy->prediction.tokens_per_second);

  request.gpu_bytes = parse_bytes("100MiB");  // not even the embeddings
  EXPECT_FALSE(choose_plan(model, planner_pcie(), request).has_value());
}

TEST(Planner, TightGpuStreamsWeightsOffloadsKvAndAddsGpuBatches) {
  // opt-30b (60 GB of weights, 0.75 GB of KV per sequence at 543 tokens) on a 16 GiB gpu tier:
  // the weights stream, so a big block amortizes them, and its KV can only live on the host.
  const ModelConfig model = ModelConfig::from_name("opt-30b").value();
  const PlanRequest request = opt_request("16GiB", "200GiB");
  const auto plan = choose_plan(model, planner_pcie(), request);
  ASSERT_TRUE(plan.has_value());
  EXPECT_LT(plan->placement.weights.gpu, 1.0);
  EXPECT_LT(plan->placement.block.kv_gpu_fraction, 1.0);
  EXPECT_GT(plan->placement.block.num_gpu_batches, 1);
  EXPECT_GE(plan->block, 32);
  EXPECT_LE(plan->memory.gpu, request.gpu_bytes);
  EXPECT_LE(plan->memory.pinned, request.pinned_bytes);
  EXPECT_EQ(plan->placement.weights_disk(), 0.0);
  // What the planner reports is what plan_memory says of the same placement.
  const PlanMemory memory = plan_memory(model, request, plan->placement, plan->block);
  EXPECT_EQ(memory.gpu, plan->memory.gpu);
  EXPECT_EQ(memory.pinned, plan->memory.pinned);
}

// KV shares are not limited to quarters: with a gpu tier between what half and three quarters of
// a block's KV need (weights resident), the planner keeps as many sequences there as fit.
TEST(Planner, KeepsAsMuchKvOnTheGpuAsFitsNotJustQuarters) {
  const ModelConfig model = ModelConfig::from_name("opt-1.3b").value();
  PlanRequest request = opt_request("80GiB", "200GiB");
  request.block = 20;
  request.max_gpu_batches = 1;
  const std::uint64_t half = memory_of(model, request, placement(20, 1, 1.0, 0.0, 0.5, false)).gpu;
  const std::uint64_t three_quarters =
      memory_of(model, request, placement(20, 1, 1.0, 0.0, 0.75, false)).gpu;
  request.gpu_bytes = (half + three_quarters) / 2;
  const auto plan = choose_plan(model, planner_pcie(), request);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->placement.weights.gpu, 1.0);
  EXPECT_GT(plan->placement.block.kv_gpu_fraction, 0.5);
  EXPECT_LT(plan->placement.block.kv_gpu_fraction, 0.75);
  EXPECT_LE(plan->memory.gpu, request.gpu_bytes);
}

TEST(Planner, PicksCpuAttentionWhenPcieIsSlowAndStagingWhenItIsFast) {
  const ModelConfig model = ModelConfig::from_name("opt-30b").value();
  const PlanRequest request = opt_request("16GiB", "200GiB");
  MachineProfile slow = planner_pcie();
  slow.h2d = slow.d2h = 4e9;  // PCIe 3 x4: far below host memory bandwidth
  const auto on_cpu = choose_plan(model, slow, request);
  ASSERT_TRUE(on_cpu.has_value());
  EXPECT_LT(on_cpu->placement.block.kv_gpu_fraction, 1.0);
  EXPECT_TRUE(on_cpu->placement.block.cpu_attention);

  MachineProfile fast = planner_pcie();
  fast.h2d = fast.d2h = 200e9;  // a link faster than ...
  fast.cpu_attention = 2e9;     // ... a CPU that attends slowly
  const auto staged = choose_plan(model, fast, request);
  ASSERT_TRUE(staged.has_value());
  EXPECT_LT(staged->placement.block.kv_gpu_fraction, 1.0);
  EXPECT_FALSE(staged->placement.block.cpu_attention);

  MachineProfile unmeasured = planner_pcie();
  unmeasured.cpu_attention = 0;  // an old profile: cpu attention cannot be predicted
  const auto old = choose_plan(model, unmeasured, request);
  ASSERT_TRUE(old.has_value());
  EXPECT_FALSE(old->placement.block.cpu_attention);
}

TEST(Planner, DiskTakesTheWeightsPinnedMemoryCannotHold) {
  const ModelConfig model = ModelConfig::from_name("opt-30b").value();
  PlanRequest request = opt_request("16GiB", "32GiB");  // 60 GB of weights fit neither
  EXPECT_FALSE(choose_plan(model, planner_pcie(), request).has_value());
  request.disk = true;
  const auto plan = choose_plan(model, planner_pcie(), request);
  ASSERT_TRUE(plan.has_value());
  EXPECT_GT(plan->placement.weights_disk(), 0.0);
  EXPECT_GT(plan->memory.disk, 0u);
  EXPECT_GT(plan->prediction.decode.disk, 0.0);
  EXPECT_LE(plan->memory.pinned, request.pinned_bytes);
  EXPECT_LE(plan->memory.gpu, request.gpu_bytes);
  // Without a disk measurement nothing on disk can be predicted.
  MachineProfile no_disk = planner_pcie();
  no_disk.disk_read = 0;
  EXPECT_FALSE(choose_plan(model, no_disk, request).has_value());
}

TEST(Planner, TakesTheAllResidentPlanWhenTheWholeBlockFits) {
  const ModelConfig model = ModelConfig::from_name("opt-125m").value();
  PlanRequest request;
  request.prompt_len = 512;
  request.gen_len = 32;
  request.kv_tokens = 512 + 31;
  request.gpu_bytes = parse_bytes("12GiB");
  request.pinned_bytes = parse_bytes("12GiB");
  request.block = 32;  // a bench row
  MachineProfile cpu_like = planner_pcie();
  cpu_like.cpu_attention = 1e15;  // even when attending on the host would look free
  const auto plan = choose_plan(model, cpu_like, request);
  ASSERT_TRUE(plan.has_value());
  EXPECT_TRUE(plan->placement.all_resident());
  EXPECT_EQ(plan->block, 32);
  EXPECT_EQ(plan->placement.gpu_batch, 32);

  // A block that does not fit resident is split and offloaded, still of the bench row's size.
  request.gpu_bytes = plan->memory.gpu - 1;
  const auto split = choose_plan(model, cpu_like, request);
  ASSERT_TRUE(split.has_value());
  EXPECT_FALSE(split->placement.all_resident());
  EXPECT_EQ(split->block, 32);
  EXPECT_EQ(split->placement.gpu_batch * split->placement.block.num_gpu_batches, 32);
}

TEST(Planner, MovesTheHiddenStatesToTheHostWhenOnlyThatLetsTheBlockFit) {
  const ModelConfig model = ModelConfig::from_name("opt-30b").value();
  PlanRequest request = opt_request("80GiB", "400GiB");
  request.prompt_len = 2048;
  request.kv_tokens = 2048 + 31;
  request.block = 32;  // a bench row: the block is given
  // The least gpu memory a 32-sequence block can take, with the hidden states on either tier.
  std::uint64_t least[2] = {~0ull, ~0ull};
  for (const bool on_host : {false, true}) {
    for (int num = 1; num <= 16; num *= 2) {
      const Placement p = placement(32 / num, num, 0.0, 1.0, 0.0, true, on_host);
      least[on_host] = std::min(least[on_host], plan_memory(model, request, p, 32).gpu);
    }
  }
  ASSERT_LT(least[true], least[false]);
  request.gpu_bytes = (least[true] + least[false]) / 2;
  const auto plan = choose_plan(model, planner_pcie(), request);
  ASSERT_TRUE(plan.has_value());
  EXPECT_TRUE(plan->placement.block.activations_on_host) << plan->describe();
  EXPECT_LE(plan->memory.gpu, request.gpu_bytes);
  EXPECT_EQ(plan->memory.gpu, plan_memory(model, request, plan->placement, plan->block).gpu);
  // With room for them, the hidden states stay on the gpu tier: moving them only costs.
  request.gpu_bytes = parse_bytes("80GiB");
  const auto roomy = choose_plan(model, planner_pcie(), request);
  ASSERT_TRUE(roomy.has_value());
  EXPECT_FALSE(roomy->placement.block.activations_on_host) << roomy->describe();
}

TEST(Planner, BlocksStopAtTheSequencesThereAre) {
  const ModelConfig model = ModelConfig::from_name("opt-30b").value();
  PlanRequest request = opt_request("16GiB", "200GiB");
  request.max_sequences = 3;
  const auto plan = choose_plan(model, planner_pcie(), request);
  ASSERT_TRUE(plan.has_value());
  EXPECT_LE(plan->block, 3);
  EXPECT_LE(plan->placement.gpu_batch * plan->placement.block.num_gpu_batches, 4);
}

}  // namespace
}  // namespace offgen
