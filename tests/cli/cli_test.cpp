// The batch commands end to end, in-process: every input line gets exactly one output line in
// input order; a bad line gets an error record and the others still complete.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "engine/cli/commands.h"
#include "engine/core/error.h"
#include "scheduler/calibrate.h"
#include "tests/cli/cli_commands.h"
#include "tests/cli/test_profile.h"
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
    EXPECT_NE(std::string(e.what()).find("missing-dir does not exist"), std::string::npos)
        << e.what();
  }
  // A path that cannot be opened for writing (here: a folder).
  std::filesystem::create_directories(dir.path() / "a-folder");
  options.output = (dir.path() / "a-folder").string();
  try {
    cli::run_generate(options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write output file " + options.output),
              std::string::npos)
        << e.what();
  }
}

// Each bad request gets its own error record naming its line and the problem; every other line is
// answered, and the run exits 2.
TEST(GenerateCommand, EveryKindOfBadRequestFailsAloneWithAClearMessage) {
  test::TempDir dir;
  nlohmann::json long_ids = nlohmann::json::array();
  for (int i = 0; i < 64; ++i) long_ids.push_back(10);
  // (line, what the error says); an empty expectation marks a line that must succeed.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt_token_ids": [2, 7], "max_tokens": 2})", ""},
      {"{\"prompt\": \"bad \xff\xfe utf-8\"}", "invalid JSON"},
      {R"({"prompt": "lone \ud800 surrogate"})", "invalid JSON"},
      {R"({"prompt_token_ids": []})", "the prompt is empty"},
      {R"({"prompt": "", "max_tokens": 2})", ""},  // BOS alone: a valid prompt
      {R"({"prompt_token_ids": [2, -5]})", "outside the vocabulary"},
      {R"({"prompt_token_ids": [2, 1000]})", "outside the vocabulary"},
      {R"({"prompt_token_ids": [2, 4294967296]})", "outside the vocabulary"},
      {R"({"prompt_token_ids": [2, 1.5]})", "must be an array of integers"},
      {R"({"prompt_token_ids": [2, 7], "max_tokens": 0})", "'max_tokens' must be >= 1 (got 0)"},
      {R"({"prompt_token_ids": [2, 7], "max_tokens": -3})", "'max_tokens' must be >= 1 (got -3)"},
      {R"({"prompt_token_ids": [2, 7], "max_tokens": 63})", ""},  // 2 + 63 - 1 = 64 positions
      {R"({"prompt_token_ids": [2, 7], "max_tokens": 64})", "exceeds the model's 64 positions"},
      {R"({"prompt_token_ids": [2, 7], "max_tokens": 99999999999})",
       "more than any model's positions"},
      {R"({"prompt_token_ids": [2, 7], "max_tokens": 2.5})", "'max_tokens' must be an integer"},
      {nlohmann::json{{"prompt_token_ids", long_ids}, {"max_tokens", 2}}.dump(),
       "exceeds the model's 64 positions"},
      {R"({"prompt_token_ids": [2, 7], "temperature": -1})", "temperature must be >= 0"},
      {R"({"prompt_token_ids": [2, 7], "temperature": 1e39})", "temperature must be >= 0"},
      {R"({"prompt_token_ids": [2, 7], "temperature": "hot"})", "'temperature' must be a number"},
      {R"({"prompt_token_ids": [2, 7], "top_p": 0})", "top_p must be in (0, 1]"},
      {R"({"prompt_token_ids": [2, 7], "top_p": 1.5})", "top_p must be in (0, 1]"},
      {R"({"prompt_token_ids": [2, 7], "top_k": -2})", "'top_k' must be >= -1"},
      {R"({"prompt_token_ids": [2, 7], "top_k": 2.5})", "'top_k' must be an integer"},
      {R"({"prompt_token_ids": [2, 7], "top_k": -1, "max_tokens": 2})", ""},  // -1: off
      {R"({"prompt_token_ids": [2, 7], "seed": "x"})", "'seed' must be an integer"},
      {R"({"prompt_token_ids": [2, 7], "stop": [""]})", "'stop' strings must not be empty"},
      {R"({"prompt_token_ids": [2, 7], "index": 0, "error": "x", "max_tokens": 2})", ""},
      {R"({"custom_id": "b", "body": {"prompt": [], "max_tokens": 2}})", "the prompt is empty"},
      {R"({"custom_id": "c", "body": {"prompt": ["a", 5]}})", "prompt 1 of the list"},
      {R"({"custom_id": "d", "body": {"prompt": "x", "n": 0}})",
       "'n' must be an integer from 1 to 1024"},
      {R"({"custom_id": "f", "body": {"prompt": "x", "max_token": 3}})",
       "unknown key 'max_token' in 'body' (did you mean 'max_tokens'?)"},
      {R"({"custom_id": "g", "body": {"prompt": "x", "best_of": 2}})",
       "'best_of' is not supported"},
      {R"({"custom_id": "e", "body": {"prompt": [2, 7], "max_tokens": 0}})",
       "'max_tokens' must be >= 1"},
  };
  std::string text;
  for (const auto& [line, _] : cases) text += line + "\n";
  test::write_file(dir.path() / "in.jsonl", text);
  cli::GenerateOptions options;
  options.common = tiny_model();
  options.input = (dir.path() / "in.jsonl").string();
  options.output = (dir.path() / "out.jsonl").string();
  options.temperature = 0.0f;
  EXPECT_EQ(cli::run_generate(options), 2);
  const auto lines = read_lines(options.output);
  ASSERT_EQ(lines.size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const nlohmann::json& r = lines[i];
    SCOPED_TRACE(cases[i].first + " -> " + r.dump());
    const bool batch = r.contains("custom_id") && r.contains("response");
    const nlohmann::json error = batch ? r["error"] : (r.contains("error") ? r["error"] : nullptr);
    if (cases[i].second.empty()) {
      EXPECT_TRUE(error.is_null());
      EXPECT_EQ(r["index"], i);  // the line's own "index" key does not replace it
      EXPECT_FALSE(r["token_ids"].empty());
      continue;
    }
    ASSERT_FALSE(error.is_null());
    const std::string message =
        batch ? error["message"].get<std::string>() : error.get<std::string>();
    EXPECT_NE(message.find("line " + std::to_string(i + 1)), std::string::npos);
    EXPECT_NE(message.find(cases[i].second), std::string::npos);
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

TEST(ScoreCommand, BadTextsFailAloneAndTheRestAreScored) {
  test::TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"token_ids": [2, 40, 50]})", ""},
      {R"({"token_ids": []})", "the text has no tokens"},
      {R"({"text": ""})", ""},  // BOS alone: nothing to score, perplexity null
      {"{\"text\": \"bad \xc3\x28 utf-8\"}", "invalid JSON"},
      {R"({"token_ids": [2, -1]})", "outside the vocabulary"},
      {R"({"token_ids": [2, 1000]})", "outside the vocabulary"},
      {R"({"neither": 1})", "neither 'text' nor 'token_ids'"},
      {R"({"token_ids": [2, 40], "index": 7, "error": "x"})", ""},
  };
  std::string text;
  for (const auto& [line, _] : cases) text += line + "\n";
  test::write_file(dir.path() / "in.jsonl", text);
  cli::ScoreOptions options;
  options.common = tiny_model();
  options.input = (dir.path() / "in.jsonl").string();
  options.output = (dir.path() / "out.jsonl").string();
  EXPECT_EQ(cli::run_score(options), 2);
  const auto lines = read_lines(options.output);
  ASSERT_EQ(lines.size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const nlohmann::json& r = lines[i];
    SCOPED_TRACE(cases[i].first + " -> " + r.dump());
    EXPECT_EQ(r["index"], i);
    if (cases[i].second.empty()) {
      EXPECT_FALSE(r.contains("error"));
      EXPECT_TRUE(r.contains("perplexity"));
      continue;
    }
    ASSERT_TRUE(r.contains("error"));
    EXPECT_NE(r["error"].get<std::string>().find("line " + std::to_string(i + 1)),
              std::string::npos);
    EXPECT_NE(r["error"].get<std::string>().find(cases[i].second), std::string::npos);
  }
  EXPECT_EQ(lines[2]["num_scored"], 0);
  EXPECT_TRUE(lines[2]["perplexity"].is_null());
}

// --resume keeps the scored texts and runs the rest and every error record again (a run that
// did not fit may fit now); a foreign output is refused.
TEST(ScoreCommand, ResumeKeepsScoredTextsAndRedoesTheRest) {
  test::TempDir dir;
  test::write_file(dir.path() / "in.jsonl",
                   "{\"token_ids\": [2, 40, 50, 60]}\n{\"token_ids\": [2, 41, 51]}\n"
                   "{\"token_ids\": [2, 42, 52, 62, 72]}\n");
  cli::ScoreOptions options;
  options.common = tiny_model();
  options.input = (dir.path() / "in.jsonl").string();
  options.output = (dir.path() / "out.jsonl").string();
  ASSERT_EQ(cli::run_score(options), 0);
  const auto complete = read_lines(options.output);
  // An interrupted run: line 2's record kept, line 0's an error, line 1's torn.
  test::write_file(options.output, nlohmann::json{{"index", 0}, {"error", "did not fit"}}.dump() +
                                       "\n" + complete[2].dump() + "\n" +
                                       complete[1].dump().substr(0, 10));
  options.resume = true;
  ASSERT_EQ(cli::run_score(options), 0);
  EXPECT_EQ(read_lines(options.output), complete);

  test::write_file(options.output,
                   nlohmann::json{{"index", 1}, {"token_ids", {2, 9}}}.dump() + "\n");
  try {
    cli::run_score(options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is it the output of this input"), std::string::npos)
        << e.what();
  }

  // With --argmax, records kept from a run without it would lack argmax_ids: refused by name.
  test::write_file(options.output, complete[0].dump() + "\n");
  options.argmax = true;
  try {
    cli::run_score(options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("was scored without --argmax and this run asks for it"),
              std::string::npos)
        << e.what();
  }
  // Resumed with the flag it was written with, a record interrupted with --argmax is kept.
  options.resume = false;
  options.overwrite = true;
  ASSERT_EQ(cli::run_score(options), 0);
  const auto with_argmax = read_lines(options.output);
  ASSERT_TRUE(with_argmax[1].contains("argmax_ids"));
  test::write_file(options.output, with_argmax[1].dump() + "\n");
  options.overwrite = false;
  options.resume = true;
  ASSERT_EQ(cli::run_score(options), 0);
  EXPECT_EQ(read_lines(options.output), with_argmax);
}

// --truncate N cuts a longer text to its first N tokens (BOS included) and says so in its record;
// the cut text scores as the same tokens given whole. Without it, a text longer than the model's
// positions is an error.
TEST(ScoreCommand, TruncateCutsLongerTextsToTheirFirstTokensAndSaysSo) {
  test::TempDir dir;
  nlohmann::json long_ids = nlohmann::json::array({2});
  for (int i = 1; i < 70; ++i) long_ids.push_back(10 + i);  // the tiny model has 64 positions
  nlohmann::json cut_ids = long_ids;
  cut_ids.erase(cut_ids.begin() + 64, cut_ids.end());
  std::string text(300, 'a');
  for (std::size_t i = 0; i < text.size(); i += 3) text[i] = ' ';
  test::write_file(dir.path() / "in.jsonl",
                   nlohmann::json{{"token_ids", long_ids}, {"truncated_from", "x"}}.dump() +
                       "\n{\"token_ids\": [2, 40, 50]}\n" + nlohmann::json{{"text", text}}.dump() +
                       "\n");
  test::write_file(dir.path() / "cut.jsonl", nlohmann::json{{"token_ids", cut_ids}}.dump() + "\n");
  cli::ScoreOptions options;
  options.common = tiny_model();
  options.input = (dir.path() / "in.jsonl").string();
  options.output = (dir.path() / "without.jsonl").string();
  options.prefill_tokens = 8;
  // Without --truncate, texts past the positions fail the run once, before the model loads, and
  // say which flag cuts them (each line once failed alone with the same error).
  const std::string what = test::error_of([&] { cli::run_score(options); });
  EXPECT_NE(what.find("2 of the 3 texts are longer than the 65 tokens the model's 64 positions "
                      "score (the first on line 1; a text's last token is only a target): pass "
                      "--truncate 65"),
            std::string::npos)
      << what;
  EXPECT_FALSE(std::filesystem::exists(options.output));

  options.truncate = 64;
  options.output = (dir.path() / "cut-by-score.jsonl").string();
  ASSERT_EQ(cli::run_score(options), 0);
  const auto lines = read_lines(options.output);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["token_ids"], cut_ids);
  EXPECT_EQ(lines[0]["truncated_from"], 70);
  EXPECT_EQ(lines[0]["num_scored"], 63);
  EXPECT_FALSE(lines[1].contains("truncated_from"));
  EXPECT_EQ(lines[1]["num_scored"], 2);
  EXPECT_EQ(lines[2]["token_ids"].size(), 64u);
  EXPECT_GT(lines[2]["truncated_from"].get<int>(), 64);

  cli::ScoreOptions whole = options;
  whole.truncate = 0;
  whole.input = (dir.path() / "cut.jsonl").string();
  whole.output = (dir.path() / "given-cut.jsonl").string();
  ASSERT_EQ(cli::run_score(whole), 0);
  EXPECT_EQ(read_lines(whole.output)[0]["token_logprobs"], lines[0]["token_logprobs"]);

  // 65 tokens fit 64 positions: the 65th is only scored, never fed. Its first 64 log-probs are
  // the 64-token text's.
  options.truncate = 65;
  options.output = (dir.path() / "cut-at-65.jsonl").string();
  ASSERT_EQ(cli::run_score(options), 0);
  const auto longest = read_lines(options.output);
  EXPECT_EQ(longest[0]["token_ids"].size(), 65u);
  EXPECT_EQ(longest[0]["num_scored"], 64);
  auto first_64 = longest[0]["token_logprobs"];
  first_64.erase(first_64.begin() + 64, first_64.end());
  for (std::size_t i = 1; i < 64; ++i) {
    EXPECT_NEAR(first_64[i].get<double>(), lines[0]["token_logprobs"][i].get<double>(), 1e-3)
        << "token " << i;
  }

  // --max-len is the same flag.
  test::CliCommands parsed;
  parsed.parse("score --model m --input a --output b --max-len 12");
  EXPECT_EQ(parsed.score.truncate, 12);
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
  plan.common.profile = calibrate.output;
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
  plan.common.profile = "/nonexistent/profile.json";
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

namespace offgen {
namespace {

using test::error_of;
using test::write_profile;

TEST(PlanCommands, ThePlanFileCarriesTheWholePlacementAndReadsBack) {
  test::TempDir dir;
  cli::PlanOptions plan;
  plan.common.model = "opt-125m";  // planning reads only the config
  plan.common.device = "cpu";
  plan.common.gpu_mem = "200MiB";  // less than the weights (250 MB): they stream, and the KV moves
  plan.common.cpu_mem = "4GiB";
  plan.common.profile = write_profile(dir.path());
  plan.prompt_len = 512;
  plan.gen_len = 32;
  plan.output = (dir.path() / "plan.json").string();
  ASSERT_EQ(cli::run_plan(plan), 0);
  std::ifstream in(plan.output);
  const auto written = nlohmann::json::parse(in);
  for (const char* key :
       {"block_size", "batch_size", "num_gpu_batches", "weights_gpu_percent", "weights_cpu_percent",
        "weights_disk_percent", "kv_gpu_percent", "cpu_attention", "gpu_bytes", "pinned_bytes",
        "disk_bytes", "prefill_layer_seconds", "decode_layer_seconds", "lm_head_seconds_per_step",
        "predicted_seconds", "predicted_tokens_per_second"}) {
    EXPECT_TRUE(written.contains(key)) << key;
  }
  EXPECT_LE(written["gpu_bytes"].get<std::uint64_t>(), std::uint64_t{200} << 20);
  EXPECT_LT(written["weights_gpu_percent"].get<double>(), 100.0);
  EXPECT_TRUE(written["decode_layer_seconds"].contains("cpu_attention"));

  // The plan's model; its budgets are checked against those given (none here).
  const auto read = [](const auto& path) {
    return cli::read_plan_file(path, "dummy:opt-125m", DeviceBudgets{});
  };
  const Placement applied = read(plan.output);
  EXPECT_EQ(applied.gpu_batch, written["batch_size"].get<int>());
  EXPECT_EQ(applied.block.num_gpu_batches, written["num_gpu_batches"].get<int>());
  EXPECT_DOUBLE_EQ(applied.weights.gpu, written["weights_gpu_percent"].get<double>() / 100.0);
  EXPECT_DOUBLE_EQ(applied.weights.pinned, written["weights_cpu_percent"].get<double>() / 100.0);
  EXPECT_DOUBLE_EQ(applied.block.kv_gpu_fraction, written["kv_gpu_percent"].get<double>() / 100.0);
  EXPECT_EQ(applied.block.cpu_attention, written["cpu_attention"].get<bool>());

  // Every field, by hand.
  const auto full = dir.path() / "full.json";
  test::write_file(full, R"({"batch_size": 3, "num_gpu_batches": 4, "weights_gpu_percent": 30,
                             "weights_cpu_percent": 50, "kv_gpu_percent": 25,
                             "cpu_attention": true})");
  const Placement all = read(full.string());
  EXPECT_EQ(all.gpu_batch, 3);
  EXPECT_EQ(all.block.num_gpu_batches, 4);
  EXPECT_DOUBLE_EQ(all.weights.gpu, 0.3);
  EXPECT_DOUBLE_EQ(all.weights.pinned, 0.5);
  EXPECT_DOUBLE_EQ(all.block.kv_gpu_fraction, 0.25);
  EXPECT_TRUE(all.block.cpu_attention);

  // A file from before the block schedule: the fields it lacks keep their defaults.
  const auto old = dir.path() / "old.json";
  test::write_file(old,
                   R"({"batch_size": 5, "weights_gpu_percent": 40, "weights_cpu_percent": 60})");
  const Placement from_old = read(old.string());
  EXPECT_EQ(from_old.gpu_batch, 5);
  EXPECT_DOUBLE_EQ(from_old.weights.gpu, 0.4);
  EXPECT_EQ(from_old.block.num_gpu_batches, 1);
  EXPECT_DOUBLE_EQ(from_old.block.kv_gpu_fraction, 1.0);
  EXPECT_FALSE(from_old.block.cpu_attention);

  // A bad field is named, with the file.
  const std::pair<const char*, const char*> bad[] = {
      {R"({"batch_size": 2, "kv_gpu_percent": 150})", "kv_gpu_percent"},
      {R"({"batch_size": 2, "cpu_attention": "yes"})", "cpu_attention"},
      {R"({"batch_size": 2, "num_gpu_batches": 0})", "num_gpu_batches"},
      {R"({"batch_size": 2, "weights_gpu_percent": 80, "weights_cpu_percent": 40})",
       "weights_cpu_percent"},
      // 2^32 + 1 and 2^64 - 1 must not wrap to a valid count.
      {R"({"batch_size": 4294967297})", "batch_size"},
      {R"({"batch_size": 2, "num_gpu_batches": 18446744073709551615})", "num_gpu_batches"},
      {R"({"batch_size": -4294967295})", "batch_size"},
      {R"({"batch_size": 1e400})", "not a plan file"}};
  for (const auto& [text, field] : bad) {
    const auto path = dir.path() / "bad.json";
    test::write_file(path, text);
    const std::string what = error_of([&] { read(path.string()); });
    EXPECT_NE(what.find(path.string()), std::string::npos) << what;
    EXPECT_NE(what.find(field), std::string::npos) << what;
  }
  // A field nested a hundred thousand deep is named by its type, not printed.
  const auto deep = dir.path() / "deep.json";
  test::write_file(deep,
                   "{\"batch_size\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  const std::string what = error_of([&] { read(deep.string()); });
  EXPECT_NE(what.find("'batch_size' must be an integer >= 1 (got array)"), std::string::npos)
      << what;
}

// A plan file is checked against the run before any work: that it is a plan at all, that it was
// planned for a model of --model's shape (else it names the model it was for), and that its
// memory fits --gpu-mem / --cpu-mem when they are given (else it names both).
TEST(PlanCommands, APlanFileMustBeAPlanForThisModelWithinTheseBudgets) {
  test::TempDir dir;
  cli::PlanOptions plan;
  plan.common.model = "opt-125m";
  plan.common.device = "cpu";
  plan.common.gpu_mem = "200MiB";
  plan.common.cpu_mem = "4GiB";
  plan.common.profile = write_profile(dir.path());
  plan.prompt_len = 128;
  plan.gen_len = 8;
  plan.output = (dir.path() / "plan.json").string();
  ASSERT_EQ(cli::run_plan(plan), 0);
  const auto written = nlohmann::json::parse(std::ifstream(plan.output));
  EXPECT_EQ(written["kind"], cli::kPlanKind);
  EXPECT_EQ(written["model_config"]["hidden_size"], 768);

  // The same model by another name, within the budgets it was planned under: accepted.
  for (const char* model : {"opt-125m", "dummy:opt-125m"}) {
    cli::CommonOptions same = cli::CommonOptions::measuring();
    same.model = model;
    same.plan = plan.output;
    same.gpu_mem = "200MiB";
    same.cpu_mem = "4GiB";
    EXPECT_EQ(error_of([&] { same.engine_options(); }), "") << model;
    same.gpu_mem.clear();  // the device's default: checked when the model loads
    same.cpu_mem.clear();
    EXPECT_EQ(error_of([&] { same.engine_options(); }), "") << model;
  }

  cli::CommonOptions run = cli::CommonOptions::measuring();
  run.model = "opt-125m";
  run.plan = plan.output;
  std::string what;
  // Another model.
  run.model = "opt-350m";
  what = error_of([&] { run.engine_options(); });
  EXPECT_NE(what.find("--plan " + plan.output + " was planned for --model opt-125m ("),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("not for this --model dummy:opt-350m"), std::string::npos) << what;
  EXPECT_NE(what.find("hidden_size 1024"), std::string::npos) << what;
  run.model = tiny_model().model;
  EXPECT_NE(error_of([&] { run.engine_options(); }).find("was planned for --model opt-125m"),
            std::string::npos);
  // Budgets smaller than the plan needs.
  run.model = "opt-125m";
  run.gpu_mem = "100MiB";
  what = error_of([&] { run.engine_options(); });
  EXPECT_NE(what.find("on the gpu tier (it was planned under --gpu-mem 200.00 MiB), more than "
                      "--gpu-mem 100.00 MiB gives"),
            std::string::npos)
      << what;
  run.gpu_mem.clear();
  run.cpu_mem = "1MiB";
  what = error_of([&] { run.engine_options(); });
  EXPECT_NE(what.find("of pinned memory (it was planned under --cpu-mem 4.00 GiB), more than "
                      "--cpu-mem 1.00 MiB gives"),
            std::string::npos)
      << what;
  run.cpu_mem.clear();

  // Not a plan: a machine profile, another kind of file.
  run.plan = write_profile(dir.path());
  what = error_of([&] { run.engine_options(); });
  EXPECT_NE(what.find("not a plan file: it has neither 'kind' nor 'batch_size'"), std::string::npos)
      << what;
  test::write_file(dir.path() / "other.json", R"({"kind": "offgen profile", "batch_size": 2})");
  run.plan = (dir.path() / "other.json").string();
  what = error_of([&] { run.engine_options(); });
  EXPECT_NE(what.find("not a plan file: its 'kind' is \"offgen profile\""), std::string::npos)
      << what;
}

// A placement flag given beside --plan is a usage error naming it, for every command that takes
// --plan (the plan once replaced it without a word).
TEST(PlanCommands, APlacementFlagBesidePlanIsAUsageErrorNamingIt) {
  for (const std::string command : {"generate --model m --input a --output b",
                                    "score --model m "
                                    "--input a --output b",
                                    "bench", "compare --model m", "plan"}) {
    for (const std::string flag :
         {"--batch-size 4", "--num-gpu-batches 2", "--weights-gpu 50", "--weights-cpu 50",
          "--kv-gpu 50", "--cpu-attention", "--activations-cpu"}) {
      test::CliCommands commands;
      const std::string line = command + " --plan p.json " + flag;
      try {
        commands.parse(line);
        ADD_FAILURE() << line << " was accepted";
      } catch (const CLI::ValidationError& e) {
        const std::string name = flag.substr(0, flag.find(' '));
        EXPECT_EQ(std::string(e.what()).rfind(name + " cannot be given with --plan", 0), 0u)
            << e.what();
      }
    }
  }
}

TEST(PlannedRuns, GenerateWithoutPlacementFlagsPlansAndMatchesTheResidentRun) {
  test::TempDir dir;
  const auto input = dir.path() / "in.jsonl";
  test::write_file(input,
                   "{\"prompt\": \"The license\"}\n"
                   "{\"prompt_token_ids\": [2, 10, 20, 30, 40, 50, 60, 70, 80, 90, 11, 12]}\n"
                   "{\"prompt_token_ids\": [2, 7]}\n"
                   "{\"prompt_token_ids\": [2, 300, 301, 302, 303]}\n");
  const int max_tokens = 12;
  const int longest = 12;  // the second prompt; the text one is shorter

  cli::GenerateOptions planned;
  planned.common = tiny_model();
  planned.common.placement_source = cli::PlacementSource::planned;
  planned.common.profile = write_profile(dir.path());
  planned.input = input.string();
  planned.max_tokens = max_tokens;
  planned.temperature = 0.0f;
  // A gpu budget just short of all four sequences resident in one GPU batch.
  EngineOptions engine = planned.common.engine_options();
  OpenedDevice opened = open_device(DeviceChoice::cpu, engine.budgets);
  const ModelConfig config = cli::model_config(planned.common.model);
  const PlanRequest request =
      cli::plan_request(engine, config, *opened.device, longest, max_tokens, 0);
  Placement resident;
  resident.gpu_batch = 4;
  const std::uint64_t budget = plan_memory(config, request, resident, 4).gpu - 1;
  planned.common.gpu_mem = std::to_string(budget);

  cli::RunLengths lengths;
  lengths.prompt_len = longest;
  lengths.gen_len = max_tokens;
  lengths.sequences = 4;
  EngineOptions chosen = planned.common.engine_options();
  const auto plan = cli::plan_automatically(planned.common, lengths, chosen);
  ASSERT_TRUE(plan.has_value());
  EXPECT_FALSE(plan->placement.all_resident()) << plan->describe();
  EXPECT_LE(plan->memory.gpu, budget);
  EXPECT_EQ(chosen.placement, plan->placement);

  planned.output = (dir.path() / "planned.jsonl").string();
  ASSERT_EQ(cli::run_generate(planned), 0);

  // The same blocks, every sequence resident, with room to spare.
  cli::GenerateOptions reference = planned;
  reference.common.placement_source = cli::PlacementSource::as_given;
  reference.common.gpu_mem = "1GiB";
  reference.common.batch_size = plan->block;
  reference.output = (dir.path() / "resident.jsonl").string();
  ASSERT_EQ(cli::run_generate(reference), 0);

  const auto got = read_lines(planned.output);
  const auto want = read_lines(reference.output);
  ASSERT_EQ(got.size(), 4u);
  ASSERT_EQ(want.size(), 4u);
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i]["prompt_token_ids"], want[i]["prompt_token_ids"]);
    EXPECT_EQ(got[i]["token_ids"], want[i]["token_ids"]) << "line " << i;
    EXPECT_EQ(got[i]["token_ids"].size(), static_cast<std::size_t>(max_tokens));
  }
  EXPECT_LE(want[0]["prompt_token_ids"].size(), static_cast<std::size_t>(longest));
}

// A second run into an output that holds results is refused before any work and leaves it as
// it was; --overwrite replaces it; --resume and --overwrite together are a usage error.
TEST(GenerateCommand, AnOutputWithResultsIsKeptUnlessOverwriteOrResumeIsGiven) {
  test::TempDir dir;
  test::write_file(dir.path() / "in.jsonl", "{\"prompt_token_ids\": [2, 7, 9]}\n");
  cli::GenerateOptions options;
  options.common = tiny_model();
  options.input = (dir.path() / "in.jsonl").string();
  options.output = (dir.path() / "out.jsonl").string();
  options.max_tokens = 3;
  options.temperature = 0.0f;
  ASSERT_EQ(cli::run_generate(options), 0);
  const std::string first = test::read_file(options.output);
  options.max_tokens = 5;
  const std::string what = error_of([&] { cli::run_generate(options); });
  EXPECT_NE(what.find("--overwrite"), std::string::npos) << what;
  EXPECT_EQ(test::read_file(options.output), first);
  options.overwrite = true;
  ASSERT_EQ(cli::run_generate(options), 0);
  EXPECT_EQ(read_lines(options.output)[0]["token_ids"].size(), 5u);

  for (const char* command : {"generate --model m --input a --output b --resume --overwrite",
                              "score --model m --input a --output b --overwrite --resume"}) {
    test::CliCommands commands;
    EXPECT_THROW(commands.parse(command), CLI::ExcludesError) << command;
  }
}

TEST(PlannedRuns, TheCliPlansOnlyWithoutPlanOrPlacementFlags) {
  auto placement = [](const std::string& command) {
    test::CliCommands commands;
    commands.parse(command);
    if (commands.app.got_subcommand("generate")) return commands.generate.common.placement_source;
    if (commands.app.got_subcommand("score")) return commands.score.common.placement_source;
    return commands.bench.common.placement_source;
  };
  using cli::PlacementSource;
  EXPECT_EQ(placement("generate --model m --input a --output b"), PlacementSource::planned);
  EXPECT_EQ(placement("generate --model m --input a --output b --gpu-mem 1GiB --disk d"),
            PlacementSource::planned);
  EXPECT_EQ(placement("generate --model m --input a --output b --batch-size 4"),
            PlacementSource::as_given);
  EXPECT_EQ(placement("generate --model m --input a --output b --plan p.json"),
            PlacementSource::as_given);
  EXPECT_EQ(placement("score --model m --input a --output b --kv-gpu 50"),
            PlacementSource::as_given);
  EXPECT_EQ(placement("score --model m --input a --output b --cpu-attention"),
            PlacementSource::as_given);
  EXPECT_EQ(placement("bench"), PlacementSource::planned);
  EXPECT_EQ(placement("bench --batch 4 --batch-size 4"),
            PlacementSource::planned);  // rows are blocks
  EXPECT_EQ(placement("bench --num-gpu-batches 2"), PlacementSource::as_given);
  EXPECT_EQ(placement("bench --weights-gpu 50"), PlacementSource::as_given);
  EXPECT_EQ(placement("bench --weights-cpu 50"), PlacementSource::as_given);
}

// --speculate-pages is a quest option, not a placement: a run it is given to is still planned,
// and the engine gets it with whatever placement the run ends up with.
TEST(CliParse, SpeculatePagesReachesTheEngineAndLeavesTheRunPlanned) {
  test::CliCommands commands;
  commands.parse(
      "generate --model dummy:opt-125m --input a --output b --policy quest --kv-budget 0.2 "
      "--speculate-pages");
  EXPECT_EQ(commands.generate.common.placement_source, cli::PlacementSource::planned);
  EXPECT_TRUE(commands.generate.common.engine_options().placement.block.speculative_pages);
  test::CliCommands plain;
  plain.parse(
      "generate --model dummy:opt-125m --input a --output b --policy quest --kv-budget 0.2 "
      "--kv-gpu 0");
  EXPECT_FALSE(plain.generate.common.engine_options().placement.block.speculative_pages);
}

TEST(PlannedRuns, ScoreAndBenchPlanTooAndScoreAsTheResidentRunDoes) {
  test::TempDir dir;
  test::write_file(dir.path() / "in.jsonl",
                   "{\"token_ids\": [2, 40, 50, 60, 70, 80, 90]}\n{\"text\": \"The quick fox\"}\n");
  cli::ScoreOptions planned;
  planned.common = tiny_model();
  planned.common.placement_source = cli::PlacementSource::planned;
  planned.common.profile = write_profile(dir.path());
  planned.input = (dir.path() / "in.jsonl").string();
  planned.output = (dir.path() / "planned.jsonl").string();
  planned.prefill_tokens = 3;
  ASSERT_EQ(cli::run_score(planned), 0);
  cli::ScoreOptions reference = planned;
  reference.common.placement_source = cli::PlacementSource::as_given;
  reference.common.batch_size = 2;  // what the roomy default budget plans: both in one batch
  reference.output = (dir.path() / "resident.jsonl").string();
  ASSERT_EQ(cli::run_score(reference), 0);
  const auto got = read_lines(planned.output);
  const auto want = read_lines(reference.output);
  ASSERT_EQ(got.size(), 2u);
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i]["token_logprobs"], want[i]["token_logprobs"]) << "line " << i;
  }

  cli::BenchOptions bench;
  bench.common = tiny_model();
  bench.common.placement_source = cli::PlacementSource::planned;
  bench.common.profile = planned.common.profile;
  bench.common.gpu_mem = "2MiB";
  bench.batches = {1, 4};
  bench.prompt_lens = {8};
  bench.gen_lens = {4};
  EXPECT_EQ(cli::run_bench(bench), 0);
}

// Sets an environment variable for a scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The quick calibration fits the budgets it is given: smaller released shapes and smaller copies
// when the tiers are small, and an error naming what it needs when not even the smallest fit.
TEST(PlannedRuns, TheQuickCalibrationShrinksToFitTheBudgets) {
  test::TempDir dir;
  const ScopedEnv cache("XDG_CACHE_HOME", dir.path().string());
  DeviceBudgets budgets;
  budgets.gpu = std::uint64_t{48} << 20;
  budgets.pinned = std::uint64_t{48} << 20;
  budgets.host = std::uint64_t{1} << 30;
  OpenedDevice opened = open_device(DeviceChoice::cpu, budgets);
  // opt-1.3b's attention measurement alone holds 64 MiB of KV: opt-350m's shapes, 16 MiB copies.
  const ModelConfig big = ModelConfig::from_name("opt-1.3b").value();
  const MachineProfile measured = cli::resolve_profile("", opened, big);
  EXPECT_GT(measured.h2d, 0.0);
  EXPECT_LE(opened.device->usage(Tier::gpu).peak, budgets.gpu);
  // Cached under the shapes it measured (opt-350m's hidden 1024), where a run with the same
  // budgets looks next: it reads the cache rather than measure again.
  const auto cached = cli::cached_profile_path(opened.device->name(), 1024);
  std::ifstream in(cached);
  const auto profile = nlohmann::json::parse(in);
  EXPECT_EQ(profile["model"], "opt-350m");
  EXPECT_NE(profile["measurements"]["h2d_pinned"]["detail"].get<std::string>().find("16.00 MiB"),
            std::string::npos)
      << profile.dump();

  std::filesystem::remove(cached);
  budgets.gpu = 64 << 10;
  OpenedDevice small = open_device(DeviceChoice::cpu, budgets);
  try {
    cli::resolve_profile("", small, big);
    FAIL() << "expected an error";
  } catch (const OutOfMemoryError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("needs at least gpu"), std::string::npos) << what;
    EXPECT_NE(what.find("leave gpu 64.00 KiB"), std::string::npos) << what;
  }
}

TEST(PlannedRuns, WithoutAProfileAQuickCalibrationIsCachedForTheDevice) {
  test::TempDir dir;
  const ScopedEnv cache("XDG_CACHE_HOME", dir.path().string());
  OpenedDevice opened = open_device(DeviceChoice::cpu, DeviceBudgets{});
  // The tiny model's quick calibration measures at opt-125m's shapes (hidden 768).
  const auto path = cli::cached_profile_path(opened.device->name(), 768);
  EXPECT_EQ(path.parent_path(), dir.path() / "offgen");
  EXPECT_EQ(path.filename().string().find(' '), std::string::npos);
  ASSERT_FALSE(std::filesystem::exists(path));
  const ModelConfig config = cli::model_config(tiny_model().model);
  const MachineProfile measured = cli::resolve_profile("", opened, config);
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_GT(measured.h2d, 0.0);
  EXPECT_GT(measured.cpu_attention, 0.0);

  // The next run reads the cache instead of measuring again (when it was measured on a quiet
  // machine: this suite's other tests may have loaded this one while it measured).
  std::ifstream in(path);
  auto json = nlohmann::json::parse(in);
  json["measurements"]["h2d_pinned"]["value"] = 123.0;
  json["measurements"]["other_processes_load"]["value"] = 0.0;
  test::write_file(path, json.dump());
  EXPECT_EQ(cli::resolve_profile("", opened, config).h2d, 123e9);

  // `offgen calibrate` without --output caches the profile under its model's shapes (the tiny
  // model's hidden 64), beside the quick one, which it does not replace; the model's own profile
  // is the one its runs plan from from then on.
  cli::CalibrateOptions calibrate;
  calibrate.device = "cpu";
  calibrate.model = tiny_model().model;
  calibrate.copy_size = "1MiB";
  calibrate.repeats = 1;
  ASSERT_EQ(cli::run_calibrate(calibrate), 0);
  const auto tiny_path = cli::cached_profile_path(opened.device->name(), 64);
  ASSERT_TRUE(std::filesystem::exists(tiny_path));
  auto tiny_json = nlohmann::json::parse(std::ifstream(tiny_path));
  EXPECT_EQ(tiny_json["hidden_size"], 64);
  tiny_json["measurements"]["other_processes_load"]["value"] = 0.0;  // as if measured quiet
  test::write_file(tiny_path, tiny_json.dump());
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(path))["measurements"]["h2d_pinned"]["value"],
            123.0);  // the quick one is still there
  std::filesystem::path used;
  cli::resolve_profile("", opened, config, &used);
  EXPECT_EQ(used, tiny_path);

  // A larger model's own calibration is its own: opt-2.7b plans from it (not from a profile at
  // quick shapes), and the smaller models' profile is left as it was.
  const ModelConfig larger = ModelConfig::from_name("opt-2.7b").value();
  const auto larger_path = cli::cached_profile_path(opened.device->name(), larger.hidden_size);
  auto own = json;
  own["model"] = "opt-2.7b";
  own["hidden_size"] = larger.hidden_size;
  own["measurements"]["h2d_pinned"]["value"] = 77.0;
  test::write_file(larger_path, own.dump());
  EXPECT_EQ(cli::resolve_profile("", opened, larger, &used).h2d, 77e9);
  EXPECT_EQ(used, larger_path);
  EXPECT_NE(cli::resolve_profile("", opened, config, &used).h2d, 77e9);
  EXPECT_EQ(used, tiny_path);

  // A cached file that says it was measured at other shapes than its name is not trusted: the
  // quick calibration's shapes for opt-2.7b (opt-1.3b's, hidden 2048) are looked up next.
  own["hidden_size"] = 768;
  test::write_file(larger_path, own.dump());
  auto quick = json;
  quick["model"] = "opt-1.3b";
  quick["hidden_size"] = 2048;
  quick["measurements"]["h2d_pinned"]["value"] = 55.0;
  const auto quick_path = cli::cached_profile_path(opened.device->name(), 2048);
  test::write_file(quick_path, quick.dump());
  EXPECT_EQ(cli::resolve_profile("", opened, larger, &used).h2d, 55e9);
  EXPECT_EQ(used, quick_path);
}

// A profile measured while other processes kept the machine busy has low rates: it is measured
// again, and the quieter of the two kept.
TEST(PlannedRuns, AProfileMeasuredOnABusyMachineIsMeasuredAgain) {
  test::TempDir dir;
  const ScopedEnv cache("XDG_CACHE_HOME", dir.path().string());
  OpenedDevice opened = open_device(DeviceChoice::cpu, DeviceBudgets{});
  const ModelConfig config = cli::model_config(tiny_model().model);
  const auto path = cli::cached_profile_path(opened.device->name(), 768);
  cli::resolve_profile("", opened, config);
  auto json = nlohmann::json::parse(std::ifstream(path));
  json["measurements"]["h2d_pinned"]["value"] = 123.0;
  // More cores than this machine has: whatever the load now, the new measurement is quieter.
  json["measurements"]["other_processes_load"]["value"] = 1000.0;
  test::write_file(path, json.dump());
  std::filesystem::path used;
  const MachineProfile again = cli::resolve_profile("", opened, config, &used);
  EXPECT_NE(again.h2d, 123e9);
  EXPECT_LT(again.others_load, 1000.0);
  EXPECT_EQ(used, path);
  const auto replaced = nlohmann::json::parse(std::ifstream(path));
  EXPECT_LT(replaced["measurements"]["other_processes_load"]["value"].get<double>(), 1000.0);

  // A quiet one is read as it is.
  json["measurements"]["other_processes_load"]["value"] = 0.0;
  test::write_file(path, json.dump());
  EXPECT_EQ(cli::resolve_profile("", opened, config).h2d, 123e9);
}

// A cached profile from an older offgen (fc1's GEMM alone, its weights hot in the cache) is a
// cache entry out of date: measured again and replaced, never planned from.
TEST(PlannedRuns, ACachedProfileOfAnOlderOffgenIsMeasuredAgain) {
  test::TempDir dir;
  const ScopedEnv cache("XDG_CACHE_HOME", dir.path().string());
  OpenedDevice opened = open_device(DeviceChoice::cpu, DeviceBudgets{});
  const ModelConfig config = cli::model_config(tiny_model().model);
  const auto path = cli::cached_profile_path(opened.device->name(), 768);
  cli::resolve_profile("", opened, config);
  auto json = nlohmann::json::parse(std::ifstream(path));
  ASSERT_TRUE(json["measurements"].contains("gemm_layer_m32")) << json.dump();
  auto& values = json["measurements"];
  for (const int rows : {1, 32, 128, 512}) {
    const std::string layer = "gemm_layer_m" + std::to_string(rows);
    values["gemm_fc1_m" + std::to_string(rows)] = values[layer];
    values.erase(layer);
  }
  values.erase("prefill_attention");
  values["h2d_pinned"]["value"] = 123.0;
  values["other_processes_load"]["value"] = 0.0;
  test::write_file(path, json.dump());
  ASSERT_FALSE(MachineProfile::load(path).layer_gemms);
  std::filesystem::path used;
  const MachineProfile again = cli::resolve_profile("", opened, config, &used);
  EXPECT_TRUE(again.layer_gemms);
  EXPECT_NE(again.h2d, 123e9);
  EXPECT_EQ(used, path);
  EXPECT_TRUE(
      nlohmann::json::parse(std::ifstream(path))["measurements"].contains("gemm_layer_m32"));
}

// On a CPU with AVX512-BF16, a cached cpu profile without the bf16 prefill rates (an older
// offgen's) is measured again, so a --prefill-math bf16 run can be planned from the cache.
TEST(PlannedRuns, ACachedProfileWithoutBf16RatesIsMeasuredAgainWhereTheCpuHasBf16) {
  test::TempDir dir;
  const ScopedEnv cache("XDG_CACHE_HOME", dir.path().string());
  OpenedDevice opened = open_device(DeviceChoice::cpu, DeviceBudgets{});
  if (!measures_bf16(*opened.device)) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const ModelConfig config = cli::model_config(tiny_model().model);
  const auto path = cli::cached_profile_path(opened.device->name(), 768);
  EXPECT_GT(cli::resolve_profile("", opened, config).gemm_bf16_large, 0.0);
  auto json = nlohmann::json::parse(std::ifstream(path));
  json["measurements"].erase("gemm_layer_bf16_m128");
  json["measurements"].erase("gemm_layer_bf16_m512");
  json["measurements"]["other_processes_load"]["value"] = 0.0;
  test::write_file(path, json.dump());
  EXPECT_GT(cli::resolve_profile("", opened, config).gemm_bf16_large, 0.0);
  EXPECT_TRUE(
      nlohmann::json::parse(std::ifstream(path))["measurements"].contains("gemm_layer_bf16_m512"));
}

}  // namespace
}  // namespace offgen
