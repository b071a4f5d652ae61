// The batch commands end to end, in-process: every input line gets exactly one output line in
// input order; a bad line gets an error record and the others still complete.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/cli/commands.h"
#include "engine/core/error.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

std::vector<nlohmann::json> read_lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

cli::CommonOptions tiny_model() {
  cli::CommonOptions common;
  common.model = (test::data_dir() / "golden" / "tiny-preln").string();
  common.device = "cpu";
  common.batch_size = 2;
  return common;
}

TEST(GenerateCommand, BadLinesGetErrorsAndTheRestComplete) {
  test::TempDir dir;
  const auto input = dir.path() / "in.jsonl";
  test::write_file(
      input,
      "{\"prompt\": \"Hello world\", \"custom_id\": \"a\"}\n"
      "{\"prompt_token_ids\": [2, 10, 20, 30]}\n"
      "this is not json\n"
      "\n"
      "{\"prompt_token_ids\": [2, 5000]}\n"
      "{\"no_prompt\": 1, \"custom_id\": \"e\"}\n"
      "{\"prompt\": \"a longer prompt that still fits easily\", \"custom_id\": \"f\"}\n");
  cli::GenerateOptions options;
  options.common = tiny_model();
  options.input = input.string();
  options.output = (dir.path() / "out.jsonl").string();
  options.max_tokens = 5;
  options.temperature = 0.0f;
  EXPECT_EQ(cli::run_generate(options), 2);  // completed, with per-request errors

  const auto lines = read_lines(options.output);
  ASSERT_EQ(lines.size(), 6u);
  for (std::size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i]["index"], i);
  EXPECT_EQ(lines[0]["custom_id"], "a");
  EXPECT_EQ(lines[0]["token_ids"].size(), 5u);
  EXPECT_EQ(lines[0]["prompt_token_ids"][0], 2);  // BOS prepended to text prompts
  EXPECT_TRUE(lines[0]["text"].is_string());
  EXPECT_EQ(lines[0]["finish_reason"], "length");
  EXPECT_EQ(lines[1]["prompt_token_ids"], nlohmann::json({2, 10, 20, 30}));
  EXPECT_NE(lines[2]["error"].get<std::string>().find("line 3"), std::string::npos);
  EXPECT_NE(lines[2]["error"].get<std::string>().find("invalid JSON"), std::string::npos);
  EXPECT_NE(lines[3]["error"].get<std::string>().find("outside the vocabulary"), std::string::npos);
  EXPECT_EQ(lines[4]["custom_id"], "e");
  EXPECT_NE(lines[4]["error"].get<std::string>().find("neither"), std::string::npos);
  EXPECT_EQ(lines[5]["custom_id"], "f");
  EXPECT_EQ(lines[5]["token_ids"].size(), 5u);
}

TEST(GenerateCommand, PromptLongerThanThePositionsIsRejectedAlone) {
  test::TempDir dir;
  nlohmann::json long_prompt = nlohmann::json::array();
  for (int i = 0; i < 70; ++i) long_prompt.push_back(10);  // the tiny model has 64 positions
  test::write_file(dir.path() / "in.jsonl",
                   nlohmann::json{{"prompt_token_ids", long_prompt}}.dump() +
                       "\n{\"prompt_token_ids\": [2, 7]}\n");
  cli::GenerateOptions options;
  options.common = tiny_model();
  options.input = (dir.path() / "in.jsonl").string();
  options.output = (dir.path() / "out.jsonl").string();
  options.max_tokens = 3;
  EXPECT_EQ(cli::run_generate(options), 2);
  const auto lines = read_lines(options.output);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0]["error"].get<std::string>().find("positions"), std::string::npos);
  EXPECT_EQ(lines[1]["token_ids"].size(), 3u);
}

TEST(GenerateCommand, UnwritableOutputFailsBeforeAnyWork) {
  test::TempDir dir;
  test::write_file(dir.path() / "in.jsonl", "{\"prompt_token_ids\": [2, 7]}\n");
  cli::GenerateOptions options;
  options.common = tiny_model();
  options.input = (dir.path() / "in.jsonl").string();
  options.output = (dir.path() / "missing-dir" / "out.jsonl").string();
  try {
    cli::run_generate(options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write output file"), std::string::npos);
  }
}

TEST(GenerateCommand, MissingInputNamesTheFile) {
  cli::GenerateOptions options;
  options.common = tiny_model();
  options.input = "/nonexistent/in.jsonl";
  options.output = "/tmp/unused.jsonl";
  try {
    cli::run_generate(options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/in.jsonl"), std::string::npos);
  }
}

TEST(GenerateCommand, SamplingIsReproducibleForASeed) {
  test::TempDir dir;
  test::write_file(dir.path() / "in.jsonl",
                   "{\"prompt_token_ids\": [2, 7, 9]}\n{\"prompt_token_ids\": [2, 7, 9]}\n");
  cli::GenerateOptions options;
  options.common = tiny_model();
  options.input = (dir.path() / "in.jsonl").string();
  options.max_tokens = 12;
  options.temperature = 1.0f;
  options.top_p = 0.9f;
  options.seed = 5;
  options.output = (dir.path() / "a.jsonl").string();
  ASSERT_EQ(cli::run_generate(options), 0);
  options.output = (dir.path() / "b.jsonl").string();
  ASSERT_EQ(cli::run_generate(options), 0);
  const auto a = read_lines(dir.path() / "a.jsonl");
  const auto b = read_lines(dir.path() / "b.jsonl");
  EXPECT_EQ(a[0]["token_ids"], b[0]["token_ids"]);
  EXPECT_EQ(a[1]["token_ids"], b[1]["token_ids"]);
  // Request i samples with seed + i, so identical prompts still get their own draws.
  EXPECT_NE(a[0]["token_ids"], a[1]["token_ids"]);
}

TEST(ScoreCommand, WritesLogprobsAndPerplexityAndErrors) {
  test::TempDir dir;
  test::write_file(dir.path() / "in.jsonl",
                   "{\"text\": \"The quick brown fox\", \"id\": 1}\n"
                   "{\"token_ids\": [2, 40, 50, 60, 70]}\n"
                   "{\"token_ids\": \"oops\"}\n"
                   "[1, 2]\n");
  cli::ScoreOptions options;
  options.common = tiny_model();
  options.input = (dir.path() / "in.jsonl").string();
  options.output = (dir.path() / "out.jsonl").string();
  options.prefill_tokens = 2;
  EXPECT_EQ(cli::run_score(options), 2);
  const auto lines = read_lines(options.output);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["id"], 1);
  EXPECT_TRUE(lines[0]["token_logprobs"][0].is_null());
  const auto& second = lines[1];
  EXPECT_EQ(second["num_scored"], 4);
  double sum = 0;
  for (std::size_t i = 1; i < 5; ++i) {
    const double lp = second["token_logprobs"][i].get<double>();
    EXPECT_LE(lp, 0.0);
    sum += lp;
  }
  EXPECT_NEAR(second["sum_logprob"].get<double>(), sum, 1e-6);
  EXPECT_NEAR(second["perplexity"].get<double>(), std::exp(-sum / 4), 1e-6);
  EXPECT_NE(lines[2]["error"].get<std::string>().find("token_ids"), std::string::npos);
  EXPECT_NE(lines[3]["error"].get<std::string>().find("expected a JSON object"), std::string::npos);
}

}  // namespace
}  // namespace offgen

namespace offgen {
namespace {

TEST(PlanCommands, CalibrateThenPlanThenGenerateWithThePlan) {
  test::TempDir dir;
  cli::CalibrateOptions calibrate;
  calibrate.device = "cpu";
  calibrate.model = (test::data_dir() / "golden" / "tiny-preln").string();
  calibrate.output = (dir.path() / "profile.json").string();
  calibrate.copy_size = "1MiB";
  calibrate.repeats = 1;
  ASSERT_EQ(cli::run_calibrate(calibrate), 0);

  cli::PlanOptions plan;
  plan.common = tiny_model();
  plan.common.gpu_mem = "2MiB";  // less than all weights + a big batch: the plan must trade off
  plan.profile = calibrate.output;
  plan.prompt_len = 16;
  plan.gen_len = 8;
  plan.output = (dir.path() / "plan.json").string();
  ASSERT_EQ(cli::run_plan(plan), 0);
  std::ifstream in(plan.output);
  const auto written = nlohmann::json::parse(in);
  EXPECT_GE(written["batch_size"].get<int>(), 1);
  EXPECT_LE(written["gpu_bytes"].get<std::uint64_t>(), std::uint64_t{2} << 20);

  // The plan's batch size and placement drive a run within the same budget.
  const auto input = dir.path() / "in.jsonl";
  test::write_file(input, "{\"prompt_token_ids\": [2, 10, 20, 30]}\n{\"prompt\": \"Hello\"}\n");
  cli::GenerateOptions generate;
  generate.common = tiny_model();
  generate.common.gpu_mem = "2MiB";
  generate.common.plan = plan.output;
  generate.input = input.string();
  generate.output = (dir.path() / "out.jsonl").string();
  generate.max_tokens = 4;
  generate.temperature = 0.0f;
  EXPECT_EQ(cli::run_generate(generate), 0);
  EXPECT_EQ(read_lines(generate.output).size(), 2u);
}

TEST(PlanCommands, AMissingProfileOrPlanNamesTheFile) {
  cli::PlanOptions plan;
  plan.common = tiny_model();
  plan.profile = "/nonexistent/profile.json";
  try {
    cli::run_plan(plan);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/profile.json"), std::string::npos);
  }
  cli::CommonOptions common = tiny_model();
  common.plan = "/nonexistent/plan.json";
  try {
    common.engine_options();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/plan.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace offgen
