// The --model rule: generate, score and compare need real weights (no default; a bare config name
// is refused, dummy weights only as dummy:NAME or --dummy); bench and plan default to dummy
// opt-125m; a Hugging Face name runs from the local hub cache end to end.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/cli/commands.h"
#include "engine/cli/compare_command.h"
#include "engine/core/error.h"
#include "tests/cli/cli_commands.h"
#include "tests/support/hf_cache_fixture.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(ModelFlag, CommandsThatReportTextHaveNoDefaultModel) {
  for (const char* command :
       {"generate --input a --output b", "score --input a --output b", "compare --eval e"}) {
    test::CliCommands commands;
    EXPECT_THROW(commands.parse(command), CLI::RequiredError) << command;
  }
}

TEST(ModelFlag, BenchAndPlanDefaultToDummyOpt125m) {
  CLI::App app;
  cli::BenchOptions bench;
  cli::PlanOptions plan;
  cli::add_bench_command(app, bench);
  cli::add_plan_command(app, plan);
  app.parse("bench", false);
  EXPECT_EQ(bench.common.engine_options().model, "dummy:opt-125m");
  CLI::App again;
  cli::add_plan_command(again, plan);
  again.parse("plan --model opt-30b", false);
  EXPECT_EQ(plan.common.engine_options().model, "dummy:opt-30b");
  EXPECT_EQ(plan.common.model_name().describe(), "opt-30b (dummy weights)");
}

TEST(ModelFlag, ABareConfigNameIsRefusedWhereTextIsReported) {
  test::TempDir dir;
  test::write_file(dir.path() / "in.jsonl", "{\"prompt_token_ids\": [2, 10, 20]}\n");
  cli::GenerateOptions generate;
  generate.common.model = "opt-125m";
  generate.common.device = "cpu";
  generate.input = (dir.path() / "in.jsonl").string();
  generate.output = (dir.path() / "out.jsonl").string();
  const std::string message = error_of([&] { cli::run_generate(generate); });
  EXPECT_NE(message.find("--model opt-125m is a config name"), std::string::npos) << message;
  EXPECT_NE(message.find("--model dummy:opt-125m (or --dummy)"), std::string::npos) << message;
  cli::ScoreOptions score;
  score.common.model = "opt-350m";
  EXPECT_NE(error_of([&] { score.common.engine_options(); }).find("dummy:opt-350m"),
            std::string::npos);
}

TEST(ModelFlag, DummyWeightsWhenAskedByPrefixOrFlag) {
  cli::CommonOptions common;
  common.model = "dummy:opt-350m";
  EXPECT_EQ(common.engine_options().model, "dummy:opt-350m");
  common.model = "OPT-1.3B";
  common.dummy = true;
  EXPECT_EQ(common.engine_options().model, "dummy:opt-1.3b");
  common.model = (test::data_dir() / "golden" / "tiny-preln").string();
  EXPECT_NE(error_of([&] { common.engine_options(); }).find("--dummy takes a config name"),
            std::string::npos);
}

TEST(ModelFlag, AHubNameRunsFromTheLocalCache) {
  test::TempDir dir;
  test::ScopedEnv env("HF_HUB_CACHE", (dir.path() / "hub").string());
  const fs::path snapshot =
      test::add_hf_snapshot(dir.path() / "hub", "facebook/opt-tiny",
                            test::data_dir() / "golden" / "tiny-preln-bin", "0123abcd");
  test::write_file(dir.path() / "in.jsonl", "{\"prompt\": \"Hello world\"}\n");
  cli::GenerateOptions options;
  options.common.model = "facebook/opt-tiny";
  options.common.device = "cpu";
  options.common.batch_size = 1;
  options.input = (dir.path() / "in.jsonl").string();
  options.output = (dir.path() / "hub.jsonl").string();
  options.max_tokens = 4;
  options.temperature = 0.0f;
  EXPECT_EQ(options.common.engine_options().model, snapshot.string());
  ASSERT_EQ(cli::run_generate(options), 0);  // the tokenizer comes from the snapshot too

  cli::GenerateOptions direct = options;  // the same weights as safetensors, by directory
  direct.common.model = (test::data_dir() / "golden" / "tiny-preln").string();
  direct.output = (dir.path() / "direct.jsonl").string();
  ASSERT_EQ(cli::run_generate(direct), 0);
  const auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return nlohmann::json::parse(line);
  };
  EXPECT_EQ(read(options.output)["token_ids"], read(direct.output)["token_ids"]);
  EXPECT_EQ(read(options.output)["token_ids"].size(), 4u);

  options.common.model = "facebook/opt-1.3b";
  options.output = (dir.path() / "missing.jsonl").string();
  const std::string message = error_of([&] { cli::run_generate(options); });
  EXPECT_FALSE(fs::exists(options.output));  // refused before the output is touched
  EXPECT_NE(message.find("huggingface-cli download facebook/opt-1.3b"), std::string::npos)
      << message;
  EXPECT_NE(message.find("--model dummy:opt-1.3b"), std::string::npos) << message;
}

}  // namespace
}  // namespace offgen
