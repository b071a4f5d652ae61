// offgen generate as a batch job: a large file mixing both line formats with per-request
// parameters and a malformed line, and a run killed midway (SIGKILL) then resumed. (Stop signals,
// full disks and other faults: faults_test.cpp.)
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/cli/commands.h"
#include "tests/cli/offgen_process.h"
#include "tests/support/test_support.h"

extern char** environ;

namespace offgen {
namespace {

using Json = nlohmann::json;

std::vector<Json> read_lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<Json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(Json::parse(line));
  return out;
}

TEST(GenerateJob, TwoHundredMixedRequestsAreEachAnsweredOnceInInputOrder) {
  test::TempDir dir;
  const auto input = dir.path() / "requests.jsonl";
  std::string text;
  std::vector<int> max_tokens;
  for (int i = 0; i < 200; ++i) {
    const int n = 1 + i % 6;
    max_tokens.push_back(n);
    if (i == 77) {
      text += "{\"custom_id\": \"broken\", \"body\": {\"prompt\": \"x\"\n";  // malformed
    } else if (i % 2 == 0) {
      Json body = {{"prompt", "Line " + std::to_string(i) + " of the test"},
                   {"max_tokens", n},
                   {"temperature", i % 4 == 0 ? 0.0 : 0.8},
                   {"seed", i}};
      if (i % 10 == 0) body["stop"] = "\n";
      text += Json({{"custom_id", "req-" + std::to_string(i)},
                    {"method", "POST"},
                    {"url", "/v1/completions"},
                    {"body", body}})
                  .dump() +
              "\n";
    } else {
      text += Json({{"prompt_token_ids", {2, 10 + i % 50, 20 + i % 30}},
                    {"max_tokens", n},
                    {"top_k", 5},
                    {"tag", i}})
                  .dump() +
              "\n";
    }
  }
  test::write_file(input, text);
  cli::GenerateOptions options;
  options.common.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.common.device = "cpu";
  options.common.batch_size = 16;
  options.input = input.string();
  options.output = (dir.path() / "out.jsonl").string();
  EXPECT_EQ(cli::run_generate(options), 2);  // one request failed

  const auto out = read_lines(options.output);
  ASSERT_EQ(out.size(), 200u);
  for (int i = 0; i < 200; ++i) {
    const Json& r = out[static_cast<std::size_t>(i)];
    SCOPED_TRACE(r.dump());
    if (i == 77) {
      EXPECT_TRUE(r["response"].is_null());
      EXPECT_NE(r["error"]["message"].get<std::string>().find("line 78"), std::string::npos);
    } else if (i % 2 == 0) {
      EXPECT_EQ(r["custom_id"], "req-" + std::to_string(i));
      ASSERT_EQ(r["response"]["status_code"], 200);
      const Json& body = r["response"]["body"];
      const auto completion = body["usage"]["completion_tokens"].get<int>();
      EXPECT_EQ(completion, body["choices"][0]["token_ids"].size());
      EXPECT_LE(completion, max_tokens[static_cast<std::size_t>(i)]);
      if (body["choices"][0]["finish_reason"] == "length") {
        EXPECT_EQ(completion, max_tokens[static_cast<std::size_t>(i)]);
      }
      EXPECT_TRUE(body["choices"][0]["text"].is_string());
    } else {
      EXPECT_EQ(r["index"], i);
      EXPECT_EQ(r["tag"], i);
      EXPECT_LE(r["token_ids"].size(),
                static_cast<std::size_t>(max_tokens[static_cast<std::size_t>(i)]));
    }
  }
}

// The closing line says how much of the computed work the file's requests used: one block of a
// 3-token and an 8-token prompt, 1 and 4 new tokens (EOS ignored) computes 2 x 8 prefill slots
// and 3 decode steps, of which 11 + 3 slots carry a request's token.
TEST(GenerateJob, TheClosingLineSaysWhatShareOfTheComputedTokenSlotsWasUsed) {
  test::TempDir dir;
  const auto input = dir.path() / "requests.jsonl";
  test::write_file(input,
                   "{\"prompt_token_ids\": [2, 10, 11], \"max_tokens\": 1, \"ignore_eos\": true}\n"
                   "{\"prompt_token_ids\": [2, 10, 11, 12, 13, 14, 15, 16], \"max_tokens\": 4, "
                   "\"ignore_eos\": true}\n");
  const auto run = [&](bool continuous) {
    std::vector<std::string> args = {"generate",
                                     "--model",
                                     (test::data_dir() / "golden" / "tiny-preln").string(),
                                     "--device",
                                     "cpu",
                                     "--block-seconds",
                                     "0",
                                     "--input",
                                     input.string(),
                                     "--output",
                                     (dir.path() / "out.jsonl").string(),
                                     "--overwrite"};
    if (!continuous) args.push_back("--no-continuous-batching");
    return test::run_offgen(args, dir.path() / "log.txt");
  };
  // Blocks: prefill 2 x 8 columns, 5 of them padding; decode: 3 steps of 2 rows, the first
  // request's idle in all of them.
  const test::Finished blocks = run(false);
  ASSERT_EQ(blocks.code, 0) << blocks.output;
  EXPECT_NE(blocks.output.find("token slots used 0.64 (14 of 22 computed; wasted: 5 padding "
                               "prompts to their block's longest, 3 rows of sequences that had "
                               "finished)"),
            std::string::npos)
      << blocks.output;
  // Continuous batching computes only the running rows: the decode steps are the second
  // request's alone.
  const test::Finished refilled = run(true);
  ASSERT_EQ(refilled.code, 0) << refilled.output;
  EXPECT_NE(refilled.output.find("token slots used 0.74 (14 of 19 computed; wasted: 5 padding "
                                 "prompts to their block's longest, 0 rows of sequences that had "
                                 "finished)"),
            std::string::npos)
      << refilled.output;
}

// Starts the offgen binary with `args`; returns its pid.
pid_t spawn_offgen(const std::vector<std::string>& args) {
  std::vector<std::string> all = {OFFGEN_CLI_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  return pid;
}

TEST(GenerateJob, AKilledRunResumedAnswersEveryRequestExactlyOnce) {
  // A small trained checkpoint: one sequence at a time lasts long enough to be killed midway,
  // and the resumed run finishes the rest in big batches.
  const auto model = test::data_dir().parent_path().parent_path() / "models" / "opt-tiny-kjv-docs";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "no " << model;
  test::TempDir dir;
  const auto input = dir.path() / "requests.jsonl";
  const int requests = 120;
  std::string text;
  for (int i = 0; i < requests; ++i) {
    text += Json({{"custom_id", "r" + std::to_string(i)},
                  {"body",
                   {{"prompt", {2, 100 + i, 200 + i, 300 + (i * 7) % 50}},
                    {"max_tokens", 24},
                    {"temperature", 0}}}})
                .dump() +
            "\n";
  }
  test::write_file(input, text);
  const auto output = dir.path() / "out.jsonl";
  const std::vector<std::string> args = {"generate",      "--model",     model.string(), "--device",
                                         "cpu",           "--input",     input.string(), "--output",
                                         output.string(), "--log-level", "warn"};
  std::vector<std::string> first = args;
  first.insert(first.end(), {"--batch-size", "1"});
  const pid_t pid = spawn_offgen(first);
  // Kill it once some requests are answered, well before all are.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (test::count_lines(output) < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::size_t before = test::count_lines(output);
  ASSERT_GE(before, 4u);
  ASSERT_LT(before, static_cast<std::size_t>(requests)) << "the run finished before the kill";

  std::vector<std::string> resume = args;
  resume.insert(resume.end(), {"--batch-size", "64", "--resume"});
  const pid_t again = spawn_offgen(resume);
  waitpid(again, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);

  const auto out = read_lines(output);
  ASSERT_EQ(out.size(), static_cast<std::size_t>(requests));
  std::set<std::string> seen;
  for (int i = 0; i < requests; ++i) {
    const Json& r = out[static_cast<std::size_t>(i)];
    EXPECT_EQ(r["custom_id"], "r" + std::to_string(i));  // input order
    EXPECT_EQ(r["response"]["body"]["usage"]["completion_tokens"], 24);
    seen.insert(r["custom_id"].get<std::string>());
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(requests));
}

}  // namespace
}  // namespace offgen
