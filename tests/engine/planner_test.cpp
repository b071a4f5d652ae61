// The cost model and the planner: memory arithmetic equal to what the engine allocates, and
// choices that follow the budgets.
#include <gtest/gtest.h>

#include "engine/core/units.h"
#include "engine/runtime/batch_runner.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/planner.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

MachineProfile pcie_like() {
  MachineProfile p;
  p.h2d = 25e9;
  p.disk_read = 2e9;
  p.gemm_small = 20e12;
  p.gemm_large = 300e12;
  p.attention = 2e12;
  return p;
}

TEST(Planner, GpuBytesEqualWhatTheEngineAllocates) {
  for (double share : {1.0, 0.5, 0.0}) {
    EngineOptions options;
    options.model = (test::data_dir() / "golden" / "tiny-preln").string();
    options.device = DeviceChoice::cpu;
    options.weights_gpu_fraction = share;
    Engine engine(options);
    const std::uint64_t before = engine.device().usage(Tier::gpu).used;
    auto runner = engine.make_runner(6, 24, 7);
    const std::uint64_t used = engine.device().usage(Tier::gpu).used;
    (void)before;
    PlanRequest request;
    request.prompt_len = 24;
    request.gen_len = 8;
    request.kv_budget = 24 + 7;
    EXPECT_EQ(plan_gpu_bytes(engine.config(), request, 6, share), used) << "share " << share;
  }
}

TEST(Planner, PrefersResidentWeightsAndBigBatchesAndStreamsWhenItMust) {
  const OptConfig model = OptConfig::from_name("opt-6.7b").value();
  PlanRequest request;
  request.prompt_len = 512;
  request.gen_len = 32;
  request.kv_budget = 512 + 31;
  request.pinned_bytes = parse_bytes("100GiB");

  request.gpu_bytes = parse_bytes("70GiB");  // 13 GB of weights fit with room for a big batch
  const auto roomy = choose_plan(model, pcie_like(), request);
  ASSERT_TRUE(roomy.has_value());
  EXPECT_EQ(roomy->weights_gpu, 1.0);
  EXPECT_GE(roomy->batch, 32);
  EXPECT_LE(roomy->gpu_bytes, request.gpu_bytes);

  request.gpu_bytes = parse_bytes("8GiB");  // less than the weights: some must stream
  const auto tight = choose_plan(model, pcie_like(), request);
  ASSERT_TRUE(tight.has_value());
  EXPECT_LT(tight->weights_gpu, 1.0);
  EXPECT_LE(tight->gpu_bytes, request.gpu_bytes);
  EXPECT_GT(tight->prediction.decode.transfer, 0.0);
  EXPECT_LT(tight->prediction.tokens_per_second, roomy->prediction.tokens_per_second);

  request.gpu_bytes = parse_bytes("100MiB");  // not even the embeddings
  EXPECT_FALSE(choose_plan(model, pcie_like(), request).has_value());
}

TEST(CostModel, StreamingWeightsCostsTheirTransferAndH2oCutsAttention) {
  const OptConfig model = OptConfig::from_name("opt-30b").value();
  RunShape run;
  run.batch = 64;
  run.prompt_len = 512;
  run.gen_len = 32;
  run.kv_capacity = 512 + 31;
  const Prediction resident = predict(model, pcie_like(), run);
  EXPECT_EQ(resident.decode.transfer, 0.0);
  run.weights_gpu = 0.0;
  const Prediction streamed = predict(model, pcie_like(), run);
  // A layer of opt-30b is 2 (4h² + 2hf) = 1.23 GB: at 25 GB/s, 49 ms per layer.
  const double h = model.hidden_size, f = model.ffn_dim;
  EXPECT_NEAR(streamed.decode.transfer, 2 * (4 * h * h + 2 * h * f) / 25e9, 1e-6);
  EXPECT_LT(streamed.tokens_per_second, resident.tokens_per_second);
  run.weights_gpu = 1.0;
  run.kv_capacity = 206;
  const Prediction h2o = predict(model, pcie_like(), run);
  EXPECT_LT(h2o.decode.attention, resident.decode.attention);
}

}  // namespace
}  // namespace offgen
