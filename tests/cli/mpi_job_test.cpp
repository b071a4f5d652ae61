// offgen under mpirun: batch jobs split over two (and three) ranks on the cpu device give exactly
// the output of one process; a rank killed mid-run leaves its finished lines, rank 0 says which
// requests are not answered, and --resume on another rank count finishes them; bench reports
// each rank and the sum; a rank that fails without dying says why. Built only with MPI
// (scripts/setup installs Open MPI, so CI runs them).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cli/rank_parts.h"
#include "tests/cli/offgen_process.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

#ifdef OFFGEN_MPIRUN

fs::path trained_model() {
  return test::data_dir().parent_path().parent_path() / "models" / "opt-tiny-kjv-docs";
}

// mpirun -n N <offgen> args...: oversubscribed (two cores here), and allowed as root (CI).
std::vector<std::string> on_ranks(int ranks, const std::vector<std::string>& args) {
  std::vector<std::string> command = {OFFGEN_MPIRUN, "-n", std::to_string(ranks),
                                      "--oversubscribe"};
  if (::geteuid() == 0) command.push_back("--allow-run-as-root");
  command.push_back(OFFGEN_CLI_BINARY);
  command.insert(command.end(), args.begin(), args.end());
  return command;
}

// Requests of mixed prompt lengths and max_tokens (so a token split is not a line split), greedy,
// with a malformed line among them.
void write_rank_requests(const fs::path& path, int count, int max_tokens_base) {
  std::string text;
  for (int i = 0; i < count; ++i) {
    if (i == 7) {
      text += "{\"prompt\": \n";  // not JSON: an error record, the others still run
      continue;
    }
    Json prompt = Json::array({2});
    for (int t = 0; t < 2 + (i * 5) % 17; ++t) prompt.push_back(100 + (i * 37 + t * 11) % 900);
    text += Json({{"prompt_token_ids", prompt},
                  {"max_tokens", max_tokens_base + (i * 3) % 9},
                  {"temperature", 0},
                  {"tag", fmt::format("r{}", i)}})
                .dump();
    text += '\n';
  }
  test::write_file(path, text);
}

std::vector<std::string> generate_args(const fs::path& input, const fs::path& output) {
  return {"generate",     "--model",  trained_model().string(), "--device", "cpu", "--input",
          input.string(), "--output", output.string()};
}

// What one plain process writes for `input` (the malformed line makes its exit code 2).
std::string one_process_output(const fs::path& input, const fs::path& dir) {
  const auto single = dir / "single.jsonl";
  const auto one = test::run_offgen(generate_args(input, single), dir / "single.log");
  EXPECT_EQ(one.code, 2) << one.output;
  return test::read_file(single);
}

// The pid of the offgen process that is rank `rank` of a job writing `output`, or -1.
pid_t rank_pid(int rank, const fs::path& output) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = test::read_file(entry.path() / "cmdline");
    if (cmdline.find(output.string()) == std::string::npos ||
        cmdline.find(OFFGEN_MPIRUN) != std::string::npos) {
      continue;
    }
    std::istringstream environment(test::read_file(entry.path() / "environ"));
    std::string variable;
    while (std::getline(environment, variable, '\0')) {
      if (variable == want) return static_cast<pid_t>(std::stol(name));
    }
  }
  return -1;
}

bool has_parts(const fs::path& output) {
  return !cli::part_files(output).empty();
}

TEST(MpiJob, TwoRanksAnswerExactlyAsOneProcess) {
  if (!fs::exists(trained_model())) GTEST_SKIP() << "no " << trained_model();
  test::TempDir dir;
  const auto input = dir.path() / "in.jsonl";
  write_rank_requests(input, 30, 4);
  const auto ranked = dir.path() / "ranked.jsonl";
  const std::string single = one_process_output(input, dir.path());
  const auto two =
      test::run_program(on_ranks(2, generate_args(input, ranked)), dir.path() / "ranked.log");
  EXPECT_EQ(two.code, 2) << two.output;
  EXPECT_NE(two.output.find("2 ranks share 30 requests by tokens"), std::string::npos)
      << two.output;
  EXPECT_NE(two.output.find("[rank 1/2]"), std::string::npos) << two.output;
  // One progress for the job: rank 0 counts every rank's requests.
  EXPECT_NE(two.output.find("progress: 30/30 requests"), std::string::npos) << two.output;
  EXPECT_EQ(test::read_file(ranked), single);
  EXPECT_FALSE(has_parts(ranked)) << "the parts are merged and removed";

  // Without --resume or --overwrite a finished output is refused on every rank, and kept.
  const auto again =
      test::run_program(on_ranks(2, generate_args(input, ranked)), dir.path() / "again.log");
  EXPECT_EQ(again.code, 1) << again.output;
  EXPECT_NE(again.output.find("--resume"), std::string::npos) << again.output;
  EXPECT_EQ(test::read_file(ranked), single);

  // score too (with each position's most likely id): the same numbers as one process.
  std::string texts;
  for (int i = 0; i < 9; ++i) {
    Json ids = Json::array({2});
    for (int t = 0; t < 5 + i * 3; ++t) ids.push_back(50 + (i * 13 + t * 7) % 800);
    texts += Json({{"token_ids", ids}}).dump() + "\n";
  }
  const auto score_input = dir.path() / "texts.jsonl";
  test::write_file(score_input, texts);
  auto score_args = [&](const fs::path& out) {
    return std::vector<std::string>{"score",      "--model", trained_model().string(), "--device",
                                    "cpu",        "--input", score_input.string(),     "--output",
                                    out.string(), "--argmax"};
  };
  const auto scored_one = test::run_offgen(score_args(dir.path() / "s1.jsonl"), dir.path() / "s1");
  ASSERT_EQ(scored_one.code, 0) << scored_one.output;
  const auto scored_two =
      test::run_program(on_ranks(2, score_args(dir.path() / "s2.jsonl")), dir.path() / "s2");
  ASSERT_EQ(scored_two.code, 0) << scored_two.output;
  EXPECT_EQ(test::read_file(dir.path() / "s2.jsonl"), test::read_file(dir.path() / "s1.jsonl"));

  // Sampled requests too: each draws from its own seed, and its logits do not depend on how many
  // rows its rank's batches hold.
  std::string sampled;
  for (int i = 0; i < 24; ++i) {
    sampled += Json({{"prompt_token_ids", {2, 30 + i, 40 + (i * 7) % 300}},
                     {"max_tokens", 6 + i % 11},
                     {"temperature", 1}})
                   .dump();
    sampled += '\n';
  }
  const auto sampled_input = dir.path() / "sampled.jsonl";
  test::write_file(sampled_input, sampled);
  const auto sampled_one =
      test::run_offgen(generate_args(sampled_input, dir.path() / "g1.jsonl"), dir.path() / "g1");
  ASSERT_EQ(sampled_one.code, 0) << sampled_one.output;
  const auto sampled_two = test::run_program(
      on_ranks(2, generate_args(sampled_input, dir.path() / "g2.jsonl")), dir.path() / "g2");
  ASSERT_EQ(sampled_two.code, 0) << sampled_two.output;
  EXPECT_EQ(test::read_file(dir.path() / "g2.jsonl"), test::read_file(dir.path() / "g1.jsonl"));
}

// A GGUF model under two ranks: each rank reads the file (weights and tokenizer) itself, and text
// prompts with stop strings, penalties and min_tokens, sampled and greedy, come out as one process
// writes them.
TEST(MpiJob, TwoRanksOnAGgufFileAnswerAsOneProcess) {
  test::TempDir dir;
  const auto gguf = dir.path() / "model.gguf";
  test::convert_gguf_from_checkpoint(test::data_dir() / "golden" / "tiny-llama-gqa", gguf,
                                     test::GgufStorage::f16);
  std::string text;
  for (int i = 0; i < 14; ++i) {
    Json line = {{"prompt", fmt::format("Line {} says{}", i, std::string(i % 5, '!'))},
                 {"max_tokens", 3 + i % 7},
                 {"temperature", i % 2 == 0 ? 0.0 : 0.8},
                 {"seed", i}};
    if (i % 3 == 0) line["stop"] = Json::array({"e", "\n"});
    if (i % 4 == 1) {  // penalties and bias on some lines, min_tokens on a stop line
      line["repetition_penalty"] = 1.2;
      line["presence_penalty"] = 0.5;
      line["logit_bias"] = {{"7", 2.0}};
    }
    if (i == 6) line["min_tokens"] = 2;
    text += line.dump() + "\n";
  }
  const auto input = dir.path() / "in.jsonl";
  test::write_file(input, text);
  const auto args = [&](const fs::path& output) {
    return std::vector<std::string>{"generate",     "--model",  gguf.string(),
                                    "--device",     "cpu",      "--input",
                                    input.string(), "--output", output.string()};
  };
  const auto single = dir.path() / "single.jsonl";
  const auto one = test::run_offgen(args(single), dir.path() / "single.log");
  EXPECT_EQ(one.code, 0) << one.output;
  const auto ranked = dir.path() / "ranked.jsonl";
  const auto two = test::run_program(on_ranks(2, args(ranked)), dir.path() / "ranked.log");
  EXPECT_EQ(two.code, 0) << two.output;
  EXPECT_NE(two.output.find("[rank 1/2]"), std::string::npos) << two.output;
  EXPECT_EQ(test::read_file(ranked), test::read_file(single));
}

TEST(MpiJob, AKilledRankLeavesItsLinesAndResumeOnOtherRankCountsFinishes) {
  if (!fs::exists(trained_model())) GTEST_SKIP() << "no " << trained_model();
  test::TempDir dir;
  const auto input = dir.path() / "in.jsonl";
  const int requests = 60;
  write_rank_requests(input, requests, 20);
  const auto output = dir.path() / "out.jsonl";
  // One sequence at a time, so that rank 1 is killed with most of its share left.
  auto first = generate_args(input, output);
  first.insert(first.end(), {"--batch-size", "1"});
  const pid_t job = test::start_program(on_ranks(2, first), {dir.path() / "killed.log"});
  const fs::path part1 = cli::part_path(output, 1);
  ASSERT_TRUE(test::wait_for_lines(job, part1, 3)) << test::read_file(dir.path() / "killed.log");
  const pid_t rank1 = rank_pid(1, output);
  ASSERT_GT(rank1, 0);
  ::kill(rank1, SIGKILL);
  const int status = test::wait_for(job);
  const std::string log = test::read_file(dir.path() / "killed.log");
  EXPECT_NE(test::exit_code(status), 0) << log;
  // Rank 0 was stopped by the launcher and said what is not answered, and how to go on.
  EXPECT_NE(log.find("not answered: requests"), std::string::npos) << log;
  EXPECT_NE(log.find("--resume"), std::string::npos) << log;
  std::size_t kept = 0;  // results; an error record (the malformed line) runs again
  for (const fs::path& part : {cli::part_path(output, 0), part1}) {
    std::istringstream lines(test::read_file(part));
    std::string line;
    while (std::getline(lines, line)) kept += Json::parse(line)["error"].is_null() ? 1 : 0;
  }
  ASSERT_GE(kept, 2u);
  ASSERT_LT(kept, static_cast<std::size_t>(requests)) << "the job finished before the kill";
  EXPECT_FALSE(fs::exists(output) && test::count_lines(output) > 0) << "nothing merged yet";

  // Resumed on three ranks: only the unanswered requests run, and the output is one process's.
  auto resume = generate_args(input, output);
  resume.push_back("--resume");
  const auto resumed = test::run_program(on_ranks(3, resume), dir.path() / "resumed.log");
  EXPECT_EQ(resumed.code, 2) << resumed.output;  // the malformed line's error record
  EXPECT_NE(resumed.output.find(
                fmt::format("--resume: {} of {} requests already answered", kept, requests)),
            std::string::npos)
      << resumed.output;
  EXPECT_FALSE(has_parts(output));
  EXPECT_EQ(test::read_file(output), one_process_output(input, dir.path()));
}

// A rank that fails without dying (here its part file outgrows a 2 KiB file-size limit, as on a
// full disk: SIGXFSZ ignored, so the write fails with EFBIG) reports why; rank 0 keeps every
// finished line, names the unanswered requests and merges nothing, and one process resumes them.
TEST(MpiJob, ARankThatFailsSaysWhyAndItsRequestsResume) {
  if (!fs::exists(trained_model())) GTEST_SKIP() << "no " << trained_model();
  test::TempDir dir;
  const auto input = dir.path() / "in.jsonl";
  const int requests = 40;
  write_rank_requests(input, requests, 10);
  const auto output = dir.path() / "out.jsonl";
  const auto args = generate_args(input, output);
  // MPMD: rank 0 as usual, rank 1 through a shell that sets the limit and execs offgen.
  std::vector<std::string> command = on_ranks(1, args);
  command.insert(command.end(),
                 {":", "-n", "1", "/bin/bash", "-c",
                  "trap '' XFSZ; ulimit -f 2; exec \"$0\" \"$@\"", OFFGEN_CLI_BINARY});
  command.insert(command.end(), args.begin(), args.end());
  const auto failed = test::run_program(command, dir.path() / "failed.log");
  EXPECT_EQ(failed.code, 1) << failed.output;
  EXPECT_NE(failed.output.find("rank 1: writing " + cli::part_path(output, 1).string() + " failed"),
            std::string::npos)
      << failed.output;
  EXPECT_NE(failed.output.find("not answered: requests"), std::string::npos) << failed.output;
  EXPECT_FALSE(fs::exists(output) && test::count_lines(output) > 0) << "nothing merged";
  const std::size_t rank0_lines = test::count_lines(cli::part_path(output, 0));
  const std::size_t rank1_lines = test::count_lines(cli::part_path(output, 1));
  EXPECT_GT(rank0_lines, 0u);
  EXPECT_LT(rank0_lines + rank1_lines, static_cast<std::size_t>(requests));

  auto resume = args;
  resume.push_back("--resume");
  const auto resumed = test::run_offgen(resume, dir.path() / "resumed.log");
  EXPECT_EQ(resumed.code, 2) << resumed.output;  // the malformed line's error record
  EXPECT_FALSE(has_parts(output));
  EXPECT_EQ(test::read_file(output), one_process_output(input, dir.path()));
}

TEST(MpiJob, BenchReportsEachRankAndTheirSum) {
  test::TempDir dir;
  const auto rows_file = dir.path() / "rows.json";
  const auto bench = test::run_program(
      on_ranks(2, {"bench", "--model", "dummy:opt-125m", "--device", "cpu", "--batch", "1,2",
                   "--prompt-len", "8", "--gen-len", "4", "--json", rows_file.string()}),
      dir.path() / "bench.log");
  ASSERT_EQ(bench.code, 0) << bench.output;
  EXPECT_NE(bench.output.find("ranks: 2"), std::string::npos) << bench.output;
  const Json rows = Json::parse(test::read_file(rows_file));
  ASSERT_EQ(rows.size(), 6u);  // per batch: rank 0, rank 1, sum
  for (std::size_t i = 0; i < rows.size(); i += 3) {
    EXPECT_EQ(rows[i]["rank"], "0");
    EXPECT_EQ(rows[i + 1]["rank"], "1");
    const Json& sum = rows[i + 2];
    EXPECT_EQ(sum["rank"], "sum");
    EXPECT_EQ(sum["batch"].get<int>(), rows[i]["batch"].get<int>() * 2);
    EXPECT_EQ(sum["status"], "measured");
    // The slowest rank's seconds, and so at most the sum of the ranks' rates.
    EXPECT_DOUBLE_EQ(sum["total_seconds"].get<double>(),
                     std::max(rows[i]["prefill_seconds"].get<double>(),
                              rows[i + 1]["prefill_seconds"].get<double>()) +
                         std::max(rows[i]["decode_seconds"].get<double>(),
                                  rows[i + 1]["decode_seconds"].get<double>()));
    EXPECT_LE(sum["generated_tokens_per_second"].get<double>(),
              rows[i]["generated_tokens_per_second"].get<double>() +
                  rows[i + 1]["generated_tokens_per_second"].get<double>() + 1e-9);
  }
}

#else

// Started by a launcher as one of several ranks, a build without MPI would run the whole job on
// each into the same output: it refuses, saying why.
TEST(MpiJob, ABuildWithoutMpiRefusesToRunAsSeveralRanks) {
  test::TempDir dir;
  test::write_file(dir.path() / "in.jsonl", "{\"prompt_token_ids\": [2, 10]}\n");
  const auto run = test::run_program(
      {"/usr/bin/env", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=1", OFFGEN_CLI_BINARY,
       "generate", "--model", (test::data_dir() / "golden" / "tiny-preln").string(), "--device",
       "cpu", "--input", (dir.path() / "in.jsonl").string(), "--output",
       (dir.path() / "out.jsonl").string()},
      dir.path() / "log");
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_NE(run.output.find("built without MPI"), std::string::npos) << run.output;
  EXPECT_FALSE(fs::exists(dir.path() / "out.jsonl"));
}

#endif

}  // namespace
}  // namespace offgen
