// A placement as one value: its block, its description, its checks (naming the parameter), and
// the plan file's fields it reads and writes.
#include "scheduler/placement.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/core/error.h"
#include "engine/core/parameter_error.h"

namespace offgen {
namespace {

// The message validate() throws ("" when it does not throw).
std::string validation_error(const Placement& placement) {
  try {
    placement.validate();
  } catch (const ParameterError<Error>& e) {
    return e.what();
  }
  return "";
}

Placement offloaded() {
  Placement p;
  p.gpu_batch = 8;
  p.block = {4, 0.5, true, false};
  p.weights = {0.4, 0.6};
  return p;
}

TEST(Placement, ABlockIsItsGpuBatchesAndTheWeightsNotOnGpuOrPinnedAreOnDisk) {
  const Placement p = offloaded();
  EXPECT_EQ(p.block_size(), 32);
  EXPECT_DOUBLE_EQ(p.weights_disk(), 0.0);
  EXPECT_FALSE(p.all_resident());
  Placement on_disk = p;
  on_disk.weights = {0.25, 0.25};
  EXPECT_DOUBLE_EQ(on_disk.weights_disk(), 0.5);
  EXPECT_TRUE(Placement{}.all_resident());
}

TEST(Placement, DescribesItselfForLogs) {
  EXPECT_EQ(offloaded().describe(),
            "8 x 4 GPU batches, weights 40/60/0% gpu/cpu/disk, KV 50% on the gpu tier (cpu "
            "attention), activations on the gpu");
  Placement resident;
  resident.gpu_batch = 2;
  EXPECT_EQ(resident.describe(),
            "2 x 1 GPU batch, weights 100/0/0% gpu/cpu/disk, KV 100% on the gpu tier, activations "
            "on the gpu");
}

TEST(Placement, ValidationNamesTheParameter) {
  EXPECT_EQ(validation_error(offloaded()), "");
  Placement p = offloaded();
  p.gpu_batch = 0;
  EXPECT_EQ(validation_error(p), "gpu_batch must be positive (got 0)");
  p = offloaded();
  p.block.num_gpu_batches = -1;
  EXPECT_EQ(validation_error(p), "block.num_gpu_batches must be positive (got -1)");
  p = offloaded();
  p.block.kv_gpu_fraction = 1.5;
  EXPECT_EQ(validation_error(p), "block.kv_gpu_fraction must be in [0, 1] (got 1.5)");
  p = offloaded();
  p.weights = {0.8, 0.4};
  EXPECT_EQ(validation_error(p), "weights.gpu + weights.pinned must be at most 1 (got 0.8 + 0.4)");
}

TEST(Placement, TheSameMessageNamesFlagsWithAnotherNamer) {
  Placement p = offloaded();
  p.gpu_batch = 0;
  try {
    p.validate();
    FAIL() << "expected an error";
  } catch (const ParameterError<Error>& e) {
    const auto flag = [](Parameter parameter) -> std::string {
      return parameter == Parameter::gpu_batch ? "--batch-size" : "?";
    };
    EXPECT_EQ(e.message(flag), "--batch-size must be positive (got 0)");
  }
}

TEST(Placement, ThePlanFileFieldsReadBackAsTheSamePlacement) {
  const Placement p = offloaded();
  const nlohmann::ordered_json file = placement_json(p);
  EXPECT_EQ(file["batch_size"], 8);
  EXPECT_EQ(file["num_gpu_batches"], 4);
  EXPECT_DOUBLE_EQ(file["weights_gpu_percent"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(file["weights_cpu_percent"].get<double>(), 60.0);
  EXPECT_DOUBLE_EQ(file["weights_disk_percent"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(file["kv_gpu_percent"].get<double>(), 50.0);
  EXPECT_EQ(file["cpu_attention"], true);
  EXPECT_EQ(file["activations_cpu"], false);
  EXPECT_EQ(placement_from_json(nlohmann::json::parse(file.dump())), p);
}

TEST(Placement, AFileWithOnlyTheGpuShareKeepsTheRestPinned) {
  const Placement p = placement_from_json(nlohmann::json{{"weights_gpu_percent", 30}});
  EXPECT_DOUBLE_EQ(p.weights.gpu, 0.3);
  EXPECT_DOUBLE_EQ(p.weights.pinned, 0.7);
  EXPECT_EQ(p.gpu_batch, Placement{}.gpu_batch);  // absent fields keep the defaults
}

}  // namespace
}  // namespace offgen
