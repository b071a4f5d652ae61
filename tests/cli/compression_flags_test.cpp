// --compress-weights and --compress-kv from the command line: every command takes them, plan
// files record the storage and refuse a run with another, bench rows and compare reports carry
// it, and compare --storages runs the grid once per setting.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/cli/commands.h"
#include "engine/cli/compare_command.h"
#include "tests/cli/cli_commands.h"
#include "tests/cli/test_profile.h"
#include "tests/support/golden.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

TEST(CompressionFlags, EveryCommandTakesThem) {
  for (const std::string command :
       {"generate --model m --input a --output b", "score --model m --input a --output b", "bench",
        "compare --model m", "plan"}) {
    test::CliCommands commands;
    EXPECT_NO_THROW(commands.parse(command + " --compress-weights --compress-kv")) << command;
  }
  test::CliCommands commands;
  EXPECT_ANY_THROW(commands.parse("compare --model m --storages int8"));
}

TEST(CompressionFlags, APlanRecordsItsStorageAndRefusesARunWithAnother) {
  test::TempDir dir;
  cli::PlanOptions plan;
  plan.common.model = "opt-125m";
  plan.common.device = "cpu";
  plan.common.gpu_mem = "200MiB";
  plan.common.cpu_mem = "4GiB";
  plan.common.profile = test::write_profile(dir.path());
  plan.common.compress_weights = true;
  plan.prompt_len = 128;
  plan.gen_len = 8;
  plan.output = (dir.path() / "plan.json").string();
  ASSERT_EQ(cli::run_plan(plan), 0);
  const auto written = nlohmann::json::parse(std::ifstream(plan.output));
  EXPECT_EQ(written["compress_weights"], true);
  EXPECT_EQ(written["compress_kv"], false);

  // Under 200 MiB, opt-125m's 170 MB of fp16 layers beside its 80 MB of embeddings must stream;
  // packed, every layer stays on the gpu tier.
  cli::PlanOptions fp16 = plan;
  fp16.common.compress_weights = false;
  fp16.output = (dir.path() / "fp16.json").string();
  ASSERT_EQ(cli::run_plan(fp16), 0);
  const auto fp16_plan = nlohmann::json::parse(std::ifstream(fp16.output));
  EXPECT_LT(fp16_plan["weights_gpu_percent"].get<double>(), 100.0);
  EXPECT_EQ(written["weights_gpu_percent"].get<double>(), 100.0);

  cli::CommonOptions run = cli::CommonOptions::measuring();
  run.model = "opt-125m";
  run.plan = plan.output;
  run.compress_weights = true;
  EXPECT_EQ(test::error_of([&] { run.engine_options(); }), "");
  run.compress_weights = false;
  const std::string what = test::error_of([&] { run.engine_options(); });
  EXPECT_NE(what.find("was planned with --compress-weights, and this run is not given it"),
            std::string::npos)
      << what;
  run.compress_weights = true;
  run.compress_kv = true;
  EXPECT_NE(test::error_of([&] {
              run.engine_options();
            }).find("was planned without --compress-kv, and this run is given it"),
            std::string::npos);
}

TEST(CompressionFlags, BenchRowsSayTheirStorageAndMovePackedBytes) {
  test::TempDir dir;
  const auto bench = [&](bool weights, bool kv) {
    cli::BenchOptions options;
    options.common.model = "opt-125m";
    options.common.device = "cpu";
    options.common.weights_gpu_percent = 0;  // every layer streams: its bytes move every step
    options.common.compress_weights = weights;
    options.common.compress_kv = kv;
    options.batches = {2};
    options.prompt_lens = {16};
    options.gen_lens = {3};
    options.json = (dir.path() / "rows.json").string();
    EXPECT_EQ(cli::run_bench(options), 0);
    return nlohmann::json::parse(test::read_file(options.json)).at(0);
  };
  const auto fp16 = bench(false, false);
  const auto int4 = bench(true, true);
  EXPECT_EQ(fp16["weight_storage"], "fp16");
  EXPECT_EQ(int4["weight_storage"], "int4");
  EXPECT_EQ(int4["kv_storage"], "int4");
  const double weights = int4["weight_bytes_moved_per_step"].get<double>() /
                         fp16["weight_bytes_moved_per_step"].get<double>();
  EXPECT_GT(weights, 0.28);
  EXPECT_LT(weights, 0.32);
  // head_dim 64: one group per row, exactly 36 bytes for 128, in each of the 12 layers; plus the
  // one layer's fp16 block the packed cache is attended in.
  EXPECT_DOUBLE_EQ(
      int4["kv_bytes_per_sequence"].get<double>() / fp16["kv_bytes_per_sequence"].get<double>(),
      36.0 / 128.0 + 1.0 / 12.0);
}

TEST(CompressionFlags, CompareRunsTheGridPerStorageAgainstFp16sFull) {
  test::TempDir dir;
  const auto eval = dir.path() / "eval.jsonl";
  std::string lines;
  for (const ScoreRequest& r : test::golden_score_requests()) {
    lines += nlohmann::json({{"token_ids", r.tokens}}).dump() + "\n";
  }
  test::write_file(eval, lines);
  cli::CompareCommandOptions options;
  options.common.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.common.device = "cpu";
  options.policies = {"h2o"};
  options.budgets = {0.5};
  options.storages = {"int4", "int4-kv"};  // run grouped by weight storage: int4-kv first
  options.batch = 2;
  options.prompt_len = 16;
  options.gen_len = 4;
  options.repeats = 1;
  options.eval = eval.string();
  options.prefill_tokens = 3;
  options.prompt_tokens = 4;
  options.generated_tokens = 4;
  options.output = (dir.path() / "report").string();
  ASSERT_EQ(cli::run_compare(options), 0);

  const auto results =
      nlohmann::json::parse(test::read_file(dir.path() / "report" / "results.json"));
  // fp16 first (the reference), then each setting: full and h2o 0.5 under each.
  ASSERT_EQ(results["cells"].size(), 6u);
  const char* storages[] = {"fp16", "fp16", "int4-kv", "int4-kv", "int4", "int4"};
  for (std::size_t i = 0; i < 6; ++i) {
    SCOPED_TRACE(results["cells"][i].dump());
    EXPECT_EQ(results["cells"][i]["storage"], storages[i]);
    EXPECT_FALSE(results["cells"][i].contains("error"));
  }
  EXPECT_DOUBLE_EQ(results["cells"][0]["quality"]["greedy_agreement_with_full"].get<double>(), 1.0);
  // tiny-preln's head_dim 16 pads each row to one group of 64: 36 bytes against fp16's 32 in each
  // of its 2 layers, plus one layer's fp16 block to attend in: here int4 KV takes more, and the
  // footprint says so.
  EXPECT_DOUBLE_EQ(results["cells"][2]["kv_per_sequence_bytes"].get<double>() /
                       results["cells"][0]["kv_per_sequence_bytes"].get<double>(),
                   36.0 / 32.0 + 1.0 / 2.0);
  const std::string report = test::read_file(dir.path() / "report" / "report.md");
  EXPECT_NE(report.find("## Quality by storage"), std::string::npos) << report;
  EXPECT_NE(report.find("| fp16 | int4-kv | int4 |"), std::string::npos) << report;
  EXPECT_NE(report.find("| h2o, int4-kv | 0.5 |"), std::string::npos) << report;

  // --storages sets every cell's storage: beside --compress-* or a --plan it is refused, before
  // any work.
  options.overwrite = true;
  options.common.compress_kv = true;
  EXPECT_NE(test::error_of([&] {
              cli::run_compare(options);
            }).find("--storages sets the storage of every cell: drop --compress-weights"),
            std::string::npos);
  options.common.compress_kv = false;
  options.common.plan = (dir.path() / "plan.json").string();
  EXPECT_NE(test::error_of([&] {
              cli::run_compare(options);
            }).find("and --plan " + options.common.plan + " holds for the one it was planned"),
            std::string::npos);
}

}  // namespace
}  // namespace offgen
