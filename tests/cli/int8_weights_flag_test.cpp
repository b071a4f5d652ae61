// --int8-weights from the command line: every command takes it, never beside --compress-weights,
// plan files record it and refuse a run without it (and plan the packed bytes), bench rows say
// "int8" and move about half of fp16's bytes.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/cli/commands.h"
#include "tests/cli/cli_commands.h"
#include "tests/cli/test_profile.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

TEST(Int8WeightsFlag, EveryCommandTakesItButNotBesideCompressWeights) {
  for (const std::string command :
       {"generate --model m --input a --output b", "score --model m --input a --output b", "bench",
        "compare --model m", "plan"}) {
    test::CliCommands commands;
    EXPECT_NO_THROW(commands.parse(command + " --int8-weights --compress-kv")) << command;
    test::CliCommands both;
    EXPECT_ANY_THROW(both.parse(command + " --int8-weights --compress-weights")) << command;
  }
  test::CliCommands commands;
  EXPECT_NO_THROW(commands.parse("compare --model m --storages int8-weights,int8-weights+int4-kv"));
}

TEST(Int8WeightsFlag, APlanRecordsItAndRefusesARunWithout) {
  test::TempDir dir;
  cli::PlanOptions plan;
  plan.common.model = "opt-125m";
  plan.common.device = "cpu";
  plan.common.gpu_mem = "200MiB";
  plan.common.cpu_mem = "4GiB";
  plan.common.profile = test::write_profile(dir.path());
  plan.common.int8_weights = true;
  plan.prompt_len = 128;
  plan.gen_len = 8;
  plan.output = (dir.path() / "plan.json").string();
  ASSERT_EQ(cli::run_plan(plan), 0);
  const auto written = nlohmann::json::parse(std::ifstream(plan.output));
  EXPECT_EQ(written["int8_weights"], true);
  EXPECT_EQ(written["compress_weights"], false);
  // Under 200 MiB opt-125m's fp16 layers must stream beside its embeddings (compression_flags_
  // test); in int8 (~88 MB) they stay on the gpu tier.
  EXPECT_EQ(written["weights_gpu_percent"].get<double>(), 100.0);

  cli::CommonOptions run = cli::CommonOptions::measuring();
  run.model = "opt-125m";
  run.plan = plan.output;
  run.int8_weights = true;
  EXPECT_EQ(test::error_of([&] { run.engine_options(); }), "");
  run.int8_weights = false;
  const std::string what = test::error_of([&] { run.engine_options(); });
  EXPECT_NE(what.find("was planned with --int8-weights, and this run is not given it"),
            std::string::npos)
      << what;
}

TEST(Int8WeightsFlag, BenchRowsSayInt8AndMoveAboutHalfTheBytes) {
  test::TempDir dir;
  const auto bench = [&](bool int8) {
    cli::BenchOptions options;
    options.common.model = "opt-125m";
    options.common.device = "cpu";
    options.common.weights_gpu_percent = 0;  // every layer streams: its bytes move every step
    options.common.int8_weights = int8;
    options.batches = {2};
    options.prompt_lens = {16};
    options.gen_lens = {3};
    options.json = (dir.path() / "rows.json").string();
    EXPECT_EQ(cli::run_bench(options), 0);
    return nlohmann::json::parse(test::read_file(options.json)).at(0);
  };
  const auto fp16 = bench(false);
  const auto int8 = bench(true);
  EXPECT_EQ(int8["weight_storage"], "int8");
  const double moved = int8["weight_bytes_moved_per_step"].get<double>() /
                       fp16["weight_bytes_moved_per_step"].get<double>();
  EXPECT_GT(moved, 0.5);
  EXPECT_LT(moved, 0.52);
}

}  // namespace
}  // namespace offgen
