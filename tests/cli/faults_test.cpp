// Faults a batch job meets while it runs for hours: a stop signal (SIGINT, SIGTERM, twice), a
// full disk under the output file or the disk tier, a missing output folder, a device budget that
// cannot hold the run. Each must end with a clear message and exit code, keep every finished line
// whole, and leave a state that `--resume` completes with every request answered exactly once.
// The real binary runs in a child process (to signal it, or to limit its file sizes).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/cli/commands.h"
#include "engine/cli/signals.h"
#include "engine/core/error.h"
#include "engine/runtime/device_setup.h"
#include "tests/cli/offgen_process.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// Every line of a finished output (each must be whole JSON).
std::vector<Json> read_records(const fs::path& path) {
  std::istringstream in(test::read_file(path));
  std::vector<Json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(Json::parse(line));
  return out;
}

using test::ChildOptions;
using test::count_lines;
using test::exit_code;
using test::start_offgen;
using test::wait_for;
using test::wait_for_lines;

fs::path tiny_model() {
  return test::data_dir() / "golden" / "tiny-preln";
}

// A small trained checkpoint (5.5M parameters): about 2 ms a decode step at batch 1 on a loaded
// 2-core machine, so a run of one sequence at a time lasts long enough to be signalled midway,
// while big batches finish the rest quickly.
fs::path small_model() {
  return test::data_dir().parent_path().parent_path() / "models" / "opt-tiny-kjv-docs";
}

// `n` generate requests in the batch format, each with its own custom_id.
void write_requests(const fs::path& path, int n, int max_tokens) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    text += Json({{"custom_id", "r" + std::to_string(i)},
                  {"body",
                   {{"prompt", {2, 10 + i % 90, 100 + (i * 7) % 300, 400 + i % 11}},
                    {"max_tokens", max_tokens},
                    {"temperature", 0},
                    {"ignore_eos", true}}}})
                .dump() +
            "\n";
  }
  test::write_file(path, text);
}

// The output answers each of the `n` requests exactly once, in input order.
void expect_each_answered_once(const fs::path& output, int n, int max_tokens) {
  const auto records = read_records(output);
  ASSERT_EQ(records.size(), static_cast<std::size_t>(n));
  std::set<std::string> seen;
  for (int i = 0; i < n; ++i) {
    const Json& r = records[static_cast<std::size_t>(i)];
    EXPECT_EQ(r["custom_id"], "r" + std::to_string(i));
    ASSERT_TRUE(r["error"].is_null()) << r.dump();
    EXPECT_EQ(r["response"]["body"]["usage"]["completion_tokens"], max_tokens);
    seen.insert(r["custom_id"].get<std::string>());
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(n));
}

// Every line already in a stopped run's output is whole JSON, and no request twice.
void expect_whole_distinct_lines(const fs::path& output) {
  const std::string text = test::read_file(output);
  ASSERT_TRUE(text.empty() || text.back() == '\n') << "a torn last line";
  std::set<std::string> ids;
  for (const Json& r : read_records(output)) {
    EXPECT_TRUE(ids.insert(r["custom_id"].get<std::string>()).second) << r.dump();
  }
}

// A stop signal at a random point of a generate run: the run stops within a decode step, every
// finished line is whole, the message says how to resume, the exit code is 128 + the signal; a
// resumed run answers every request exactly once. The first run goes one sequence at a time (so
// there is time to signal it mid-run); the resumed run takes big batches (so the test is quick).
void signal_generate_then_resume(int signal) {
  if (!fs::exists(small_model())) GTEST_SKIP() << "no " << small_model();
  test::TempDir dir;
  const int requests = 120;
  const int max_tokens = 24;
  write_requests(dir.path() / "in.jsonl", requests, max_tokens);
  const fs::path output = dir.path() / "out.jsonl";
  const std::vector<std::string> args = {"generate",
                                         "--model",
                                         small_model().string(),
                                         "--device",
                                         "cpu",
                                         "--input",
                                         (dir.path() / "in.jsonl").string(),
                                         "--output",
                                         output.string()};
  std::mt19937 rng(std::random_device{}());
  const std::size_t after = 1 + rng() % 3;
  SCOPED_TRACE("signal after " + std::to_string(after) + " lines");

  std::vector<std::string> first = args;
  first.insert(first.end(), {"--batch-size", "1"});
  const pid_t pid = start_offgen(first, {dir.path() / "first.log"});
  ASSERT_TRUE(wait_for_lines(pid, output, after));
  ::kill(pid, signal);
  const int status = wait_for(pid);
  const std::string log = test::read_file(dir.path() / "first.log");
  SCOPED_TRACE(log);
  ASSERT_EQ(exit_code(status), 128 + signal);
  EXPECT_NE(log.find(std::string("stopped by ") + cli::StopSignals::signal_name(signal)),
            std::string::npos);
  EXPECT_NE(log.find("--resume"), std::string::npos);
  expect_whole_distinct_lines(output);
  const std::size_t kept = count_lines(output);
  EXPECT_GE(kept, after);
  EXPECT_LT(kept, static_cast<std::size_t>(requests));
  EXPECT_NE(log.find(std::to_string(kept) + " of " + std::to_string(requests) + " requests"),
            std::string::npos);

  std::vector<std::string> again = args;
  again.insert(again.end(), {"--batch-size", "64", "--resume"});
  const int resumed = wait_for(start_offgen(again, {dir.path() / "again.log"}));
  ASSERT_EQ(exit_code(resumed), 0) << test::read_file(dir.path() / "again.log");
  expect_each_answered_once(output, requests, max_tokens);
}

TEST(Faults, SigintDuringGenerateStopsCleanlyAndResumeAnswersTheRest) {
  signal_generate_then_resume(SIGINT);
}

TEST(Faults, SigtermDuringGenerateStopsCleanlyAndResumeAnswersTheRest) {
  signal_generate_then_resume(SIGTERM);
}

TEST(Faults, SigtermDuringScoreStopsCleanlyAndResumeScoresTheRest) {
  if (!fs::exists(small_model())) GTEST_SKIP() << "no " << small_model();
  test::TempDir dir;
  const int texts = 80;
  std::string text;
  for (int i = 0; i < texts; ++i) {
    Json ids = Json::array({2});
    for (int t = 0; t < 20 + i % 10; ++t) ids.push_back(10 + (i * 13 + t * 7) % 900);
    text += Json({{"token_ids", ids}, {"tag", i}}).dump() + "\n";
  }
  test::write_file(dir.path() / "in.jsonl", text);
  const fs::path output = dir.path() / "out.jsonl";
  const std::vector<std::string> args = {
      "score",    "--model",      small_model().string(),
      "--device", "cpu",          "--prefill-tokens",
      "4",        "--input",      (dir.path() / "in.jsonl").string(),
      "--output", output.string()};
  std::vector<std::string> first = args;
  first.insert(first.end(), {"--batch-size", "1"});
  const pid_t pid = start_offgen(first, {dir.path() / "first.log"});
  ASSERT_TRUE(wait_for_lines(pid, output, 1));
  ::kill(pid, SIGTERM);
  const int status = wait_for(pid);
  const std::string log = test::read_file(dir.path() / "first.log");
  ASSERT_EQ(exit_code(status), 143) << log;
  EXPECT_NE(log.find("--resume"), std::string::npos) << log;
  const std::size_t kept = count_lines(output);
  EXPECT_LT(kept, static_cast<std::size_t>(texts));
  for (const Json& r : read_records(output)) EXPECT_TRUE(r.contains("perplexity")) << r.dump();

  std::vector<std::string> again = args;
  again.insert(again.end(), {"--batch-size", "64", "--resume"});
  const int resumed = wait_for(start_offgen(again, {dir.path() / "again.log"}));
  ASSERT_EQ(exit_code(resumed), 0) << test::read_file(dir.path() / "again.log");
  const auto records = read_records(output);
  ASSERT_EQ(records.size(), static_cast<std::size_t>(texts));
  for (int i = 0; i < texts; ++i) {
    EXPECT_EQ(records[static_cast<std::size_t>(i)]["index"], i);
    EXPECT_EQ(records[static_cast<std::size_t>(i)]["tag"], i);
    EXPECT_EQ(records[static_cast<std::size_t>(i)]["num_scored"], 20 + i % 10);
  }
}

// The handler itself, in a child of the test: the first signal sets the flag, the second ends
// the process at once with the signal's default action.
TEST(Faults, TheFirstStopSignalSetsTheFlagAndASecondEndsTheProcess) {
  for (int signal : {SIGINT, SIGTERM}) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::signal(signal, SIG_DFL);
      const int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, STDERR_FILENO);
      cli::StopSignals guard;
      if (cli::StopSignals::requested()) ::_exit(3);
      ::raise(signal);
      if (!cli::StopSignals::requested() || cli::StopSignals::signal_number() != signal) {
        ::_exit(4);
      }
      ::raise(signal);
      ::_exit(5);  // not reached: the second signal ends the process
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exit code " << exit_code(status);
    EXPECT_EQ(WTERMSIG(status), signal);
  }
}

// Two signals in a row on a real run: it ends at once (or, if the first already stopped it, with
// 130); either way the output holds whole lines only but perhaps the last, and --resume
// completes it.
TEST(Faults, TwoSignalsEndTheRunAndResumeStillAnswersEveryRequestOnce) {
  if (!fs::exists(small_model())) GTEST_SKIP() << "no " << small_model();
  test::TempDir dir;
  const int requests = 120;
  write_requests(dir.path() / "in.jsonl", requests, 16);
  const fs::path output = dir.path() / "out.jsonl";
  const std::vector<std::string> args = {"generate",
                                         "--model",
                                         small_model().string(),
                                         "--device",
                                         "cpu",
                                         "--input",
                                         (dir.path() / "in.jsonl").string(),
                                         "--output",
                                         output.string()};
  std::vector<std::string> first = args;
  first.insert(first.end(), {"--batch-size", "1"});
  const pid_t pid = start_offgen(first, {dir.path() / "first.log"});
  ASSERT_TRUE(wait_for_lines(pid, output, 1));
  ::kill(pid, SIGINT);
  ::kill(pid, SIGINT);
  const int status = wait_for(pid);
  EXPECT_TRUE((WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) || exit_code(status) == 130)
      << test::read_file(dir.path() / "first.log");
  std::vector<std::string> again = args;
  again.insert(again.end(), {"--batch-size", "64", "--resume"});
  const int resumed = wait_for(start_offgen(again, {dir.path() / "again.log"}));
  ASSERT_EQ(exit_code(resumed), 0) << test::read_file(dir.path() / "again.log");
  expect_each_answered_once(output, requests, 16);
}

// The output's file system fills up mid-run (RLIMIT_FSIZE: writes past the limit fail with
// EFBIG): a clear error naming the file and the reason, exit 1, nothing but a torn last line that
// --resume cuts off; the resumed run answers every request once.
TEST(Faults, AFullOutputDiskEndsWithAClearErrorAndResumeCompletes) {
  test::TempDir dir;
  const int requests = 80;
  write_requests(dir.path() / "in.jsonl", requests, 6);
  const fs::path output = dir.path() / "out.jsonl";
  const std::vector<std::string> args = {
      "generate", "--model",      tiny_model().string(),
      "--device", "cpu",          "--batch-size",
      "4",        "--input",      (dir.path() / "in.jsonl").string(),
      "--output", output.string()};
  ChildOptions limited{dir.path() / "first.log", 5000};
  const int status = wait_for(start_offgen(args, limited));
  const std::string log = test::read_file(dir.path() / "first.log");
  ASSERT_EQ(exit_code(status), 1) << log;
  EXPECT_NE(log.find("writing " + output.string() + " failed: File too large"), std::string::npos)
      << log;
  EXPECT_NE(log.find("--resume"), std::string::npos) << log;
  EXPECT_LE(fs::file_size(output), 5000u);
  const std::size_t whole = count_lines(output);
  EXPECT_GT(whole, 0u);
  EXPECT_LT(whole, static_cast<std::size_t>(requests));

  std::vector<std::string> again = args;
  again.push_back("--resume");
  const int resumed = wait_for(start_offgen(again, {dir.path() / "again.log"}));
  const std::string again_log = test::read_file(dir.path() / "again.log");
  ASSERT_EQ(exit_code(resumed), 0) << again_log;
  expect_each_answered_once(output, requests, 6);
}

// The same for score, whose output was not resumable before.
TEST(Faults, AFullOutputDiskUnderScoreIsResumedToo) {
  test::TempDir dir;
  const int texts = 30;
  std::string text;
  for (int i = 0; i < texts; ++i) {
    text += Json({{"token_ids", {2, 10 + i, 20 + i, 30 + i, 40 + i}}}).dump() + "\n";
  }
  test::write_file(dir.path() / "in.jsonl", text);
  const fs::path output = dir.path() / "out.jsonl";
  const std::vector<std::string> args = {
      "score",    "--model",      tiny_model().string(),
      "--device", "cpu",          "--batch-size",
      "2",        "--input",      (dir.path() / "in.jsonl").string(),
      "--output", output.string()};
  const int status = wait_for(start_offgen(args, {dir.path() / "first.log", 2000}));
  const std::string log = test::read_file(dir.path() / "first.log");
  ASSERT_EQ(exit_code(status), 1) << log;
  EXPECT_NE(log.find("File too large"), std::string::npos) << log;
  std::vector<std::string> again = args;
  again.push_back("--resume");
  const int resumed = wait_for(start_offgen(again, {dir.path() / "again.log"}));
  ASSERT_EQ(exit_code(resumed), 0) << test::read_file(dir.path() / "again.log");
  const auto records = read_records(output);
  ASSERT_EQ(records.size(), static_cast<std::size_t>(texts));
  for (int i = 0; i < texts; ++i) {
    EXPECT_EQ(records[static_cast<std::size_t>(i)]["index"], i);
    EXPECT_EQ(records[static_cast<std::size_t>(i)]["num_scored"], 4);
  }
}

// The batch jobs of both commands, on the same input and output.
struct BatchJobs {
  cli::GenerateOptions generate;
  cli::ScoreOptions score;

  BatchJobs(const fs::path& input, const fs::path& output) {
    generate.common.model = tiny_model().string();
    generate.common.device = "cpu";
    generate.input = input.string();
    generate.output = output.string();
    generate.max_tokens = 2;
    score.common = generate.common;
    score.input = generate.input;
    score.output = generate.output;
  }
  void set_output(const fs::path& output) { generate.output = score.output = output.string(); }
  void set_overwrite(bool overwrite) { generate.overwrite = score.overwrite = overwrite; }
  // The error each command ends with ("" when it does not fail).
  std::vector<std::string> errors() {
    std::vector<std::string> out;
    for (const auto& run : std::vector<std::function<int()>>{[&] { return run_generate(generate); },
                                                             [&] { return run_score(score); }}) {
      try {
        run();
        out.emplace_back();
      } catch (const Error& e) {
        out.emplace_back(e.what());
      }
    }
    return out;
  }
};

// An output that is not a file (a pipe, a FIFO, a device) cannot be read back to put the results
// in input order: refused before any work, saying to write to a file. Before, a FIFO without a
// reader hung at open, `--output /dev/stdout | cat` hung in the ordering step reading its own
// pipe, and /dev/full ran the whole job to fail at the first write.
TEST(Faults, AnOutputThatCannotBeReadBackIsRefusedBeforeAnyWork) {
  test::TempDir dir;
  test::write_file(dir.path() / "in.jsonl",
                   "{\"prompt_token_ids\": [2, 7], \"token_ids\": [2, 7]}\n");
  const fs::path fifo = dir.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0);
  // What `--output /dev/stdout` names when stdout is a pipe.
  const fs::path pipe_output = "/proc/self/fd/" + std::to_string(pipe_ends[1]);
  const std::vector<std::pair<fs::path, std::string>> cases = {
      {fifo, "is a pipe or FIFO, not a file"},
      {pipe_output, "is a pipe or FIFO, not a file"},
      {"/dev/null", "is a terminal or character device, not a file"},
      {"/dev/full", "is a terminal or character device, not a file"}};
  BatchJobs jobs(dir.path() / "in.jsonl", dir.path() / "unused");
  for (const auto& [output, says] : cases) {
    if (!fs::exists(output)) continue;
    jobs.set_output(output);
    for (const std::string& what : jobs.errors()) {
      SCOPED_TRACE(output.string());
      EXPECT_NE(what.find("--output " + output.string() + " " + says), std::string::npos) << what;
      EXPECT_NE(what.find("Write to a file"), std::string::npos) << what;
    }
  }
  ::close(pipe_ends[0]);
  ::close(pipe_ends[1]);
}

// An --output that is the --input file, however it is spelled, is refused before any work, even
// with --overwrite (which once replaced the requests with their answers) or --resume.
TEST(Faults, AnOutputThatIsTheInputIsRefusedAndTheRequestsAreKept) {
  test::TempDir dir;
  const fs::path input = dir.path() / "in.jsonl";
  const std::string requests = "{\"prompt_token_ids\": [2, 7], \"token_ids\": [2, 7]}\n";
  test::write_file(input, requests);
  fs::create_directories(dir.path() / "sub");
  fs::create_symlink(input, dir.path() / "link.jsonl");
  fs::create_hard_link(input, dir.path() / "hard.jsonl");
  BatchJobs jobs(input, input);
  for (const fs::path& output :
       {input, dir.path() / "." / "in.jsonl", dir.path() / "sub" / ".." / "in.jsonl",
        dir.path() / "link.jsonl", dir.path() / "hard.jsonl"}) {
    SCOPED_TRACE(output.string());
    jobs.set_output(output);
    for (const bool overwrite : {true, false}) {
      jobs.set_overwrite(overwrite);
      jobs.generate.resume = jobs.score.resume = !overwrite;
      for (const std::string& what : jobs.errors()) {
        EXPECT_NE(what.find("--output " + output.string() + " is the --input file"),
                  std::string::npos)
            << what;
      }
      EXPECT_EQ(test::read_file(input), requests);
    }
  }
}

// An --output that is a link to a file: the results are put in order in that file, and the link
// stays a link (the ordered copy once replaced the link with a file of its own).
TEST(Faults, AnOutputThroughALinkOrdersTheFileItNames) {
  test::TempDir dir;
  test::write_file(dir.path() / "in.jsonl",
                   "{\"prompt_token_ids\": [2, 7], \"token_ids\": [2, 7]}\n"
                   "{\"prompt_token_ids\": [2, 7, 9, 11], \"token_ids\": [2, 7, 9, 11]}\n");
  fs::create_directories(dir.path() / "results");
  const fs::path link = dir.path() / "out.jsonl";
  fs::create_symlink(dir.path() / "results" / "out.jsonl", link);
  BatchJobs jobs(dir.path() / "in.jsonl", link);
  jobs.generate.common.batch_size = 1;
  jobs.score.common.batch_size = 1;
  jobs.set_overwrite(true);
  ASSERT_EQ(jobs.errors(), std::vector<std::string>(2));
  EXPECT_TRUE(fs::is_symlink(link));
  const auto records = read_records(dir.path() / "results" / "out.jsonl");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["index"], 0);
  EXPECT_EQ(records[1]["index"], 1);
}

// The disk tier's folder fills up while the weights are written there at load: a clear error
// naming the folder, exit 1, no crash, and no request answered (no output line).
TEST(Faults, AFullDiskTierNamesTheFolder) {
  test::TempDir dir;
  write_requests(dir.path() / "in.jsonl", 4, 2);
  const fs::path disk = dir.path() / "disk";
  fs::create_directories(disk);
  const fs::path output = dir.path() / "out.jsonl";
  const std::vector<std::string> args = {
      "generate", "--model",       tiny_model().string(),
      "--device", "cpu",           "--weights-gpu",
      "0",        "--weights-cpu", "0",
      "--disk",   disk.string(),   "--batch-size",
      "2",        "--input",       (dir.path() / "in.jsonl").string(),
      "--output", output.string()};
  const int status = wait_for(start_offgen(args, {dir.path() / "log", 64 * 1024}));
  const std::string log = test::read_file(dir.path() / "log");
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(exit_code(status), 1) << log;
  EXPECT_NE(log.find("--disk " + disk.string()), std::string::npos) << log;
  EXPECT_NE(log.find("File too large"), std::string::npos) << log;
  EXPECT_EQ(count_lines(output), 0u);
  // With room, the same command runs.
  const int fine = wait_for(start_offgen(args, {dir.path() / "log2"}));
  EXPECT_EQ(exit_code(fine), 0) << test::read_file(dir.path() / "log2");
}

// A run that measures the machine again (the cached profile was measured on a busy machine) and
// cannot cache the new measurement (a file-size limit, as on a full disk; here 2 KiB, smaller than
// a profile) warns and plans from the measurement; the cached profile, which other runs and other
// MPI ranks read, stays whole, and no temporary is left beside it.
TEST(Faults, AProfileThatCannotBeCachedLeavesTheCacheWholeAndTheRunGoesOn) {
  test::TempDir dir;
  const fs::path cache = dir.path() / "cache";
  const test::ScopedEnv cache_home("XDG_CACHE_HOME", cache.string());
  const std::string device = open_device(DeviceChoice::cpu, DeviceBudgets{}).device->name();
  // The tiny model plans from a profile at opt-125m's shapes (hidden 768).
  const fs::path cached = cli::cached_profile_path(device, 768);
  Json busy = {{"device", device}, {"hidden_size", 768}};
  const std::pair<const char*, double> values[] = {
      {"h2d_pinned", 123},          {"gemm_layer_m32", 50},
      {"gemm_layer_m512", 300},     {"decode_attention_device", 20},
      {"decode_attention_cpu", 20}, {"other_processes_load", 1000}};
  for (const auto& [name, value] : values) busy["measurements"][name] = {{"value", value}};
  test::write_file(cached, busy.dump(2));

  // The limit on offgen alone: its output goes through a pipe to the log, which has no limit.
  const std::vector<std::string> command = {
      "/bin/bash",
      "-c",
      "set -o pipefail; (trap '' XFSZ; ulimit -f 2; exec \"$0\" \"$@\") 2>&1 | cat",
      OFFGEN_CLI_BINARY,
      "plan",
      "--model",
      tiny_model().string(),
      "--device",
      "cpu",
      "--prompt-len",
      "16",
      "--gen-len",
      "4"};
  const auto limited = test::run_program(command, dir.path() / "limited.log");
  EXPECT_EQ(limited.code, 0) << limited.output;
  EXPECT_NE(limited.output.find("measuring again"), std::string::npos) << limited.output;
  EXPECT_NE(
      limited.output.find("could not cache the machine profile: cannot write " + cached.string()),
      std::string::npos)
      << limited.output;
  EXPECT_NE(limited.output.find("(measured now, not cached)"), std::string::npos) << limited.output;
  EXPECT_EQ(Json::parse(test::read_file(cached)), busy) << "the cached profile was changed";
  for (const auto& entry : fs::directory_iterator(cached.parent_path())) {
    EXPECT_EQ(entry.path(), cached) << "left behind: " << entry.path();
  }

  // With room, the new measurement (quieter than 1000 cores' worth) replaces it.
  const auto fine = test::run_offgen({"plan", "--model", tiny_model().string(), "--device", "cpu",
                                      "--prompt-len", "16", "--gen-len", "4"},
                                     dir.path() / "fine.log");
  EXPECT_EQ(fine.code, 0) << fine.output;
  const Json replaced = Json::parse(test::read_file(cached));
  EXPECT_LT(replaced["measurements"]["other_processes_load"]["value"].get<double>(), 1000.0);
}

TEST(Faults, AMissingOutputFolderIsNamedBeforeAnyWork) {
  test::TempDir dir;
  test::write_file(dir.path() / "in.jsonl", "{\"prompt_token_ids\": [2, 7]}\n");
  const fs::path missing = dir.path() / "no-such-folder";
  cli::GenerateOptions generate;
  generate.common.model = tiny_model().string();
  generate.common.device = "cpu";
  generate.input = (dir.path() / "in.jsonl").string();
  generate.output = (missing / "out.jsonl").string();
  cli::ScoreOptions score;
  score.common = generate.common;
  score.input = generate.input;
  score.output = generate.output;
  for (const auto& run : std::vector<std::function<int()>>{[&] { return run_generate(generate); },
                                                           [&] { return run_score(score); }}) {
    try {
      run();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("the folder " + missing.string() + " does not exist"), std::string::npos)
          << what;
    }
  }
  EXPECT_FALSE(fs::exists(missing));
}

// The last step, putting the results in input order through a copy, fails (here: the copy's name
// is taken by a folder; in life, a full disk): the error says every result is in the output and
// --resume orders it, which it then does without running anything again.
TEST(Faults, AFailedOrderingStepKeepsEveryResultAndResumeOrdersThem) {
  test::TempDir dir;
  write_requests(dir.path() / "in.jsonl", 6, 3);
  cli::GenerateOptions options;
  options.common.model = tiny_model().string();
  options.common.device = "cpu";
  options.common.batch_size = 4;
  options.input = (dir.path() / "in.jsonl").string();
  options.output = (dir.path() / "out.jsonl").string();
  const fs::path copy = options.output + ".ordering";
  fs::create_directories(copy);
  try {
    cli::run_generate(options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("writing " + copy.string()), std::string::npos) << what;
    EXPECT_NE(what.find("Is a directory"), std::string::npos) << what;
    EXPECT_NE(what.find("every request is answered in " + options.output), std::string::npos)
        << what;
  }
  EXPECT_EQ(count_lines(options.output), 6u);
  fs::remove(copy);
  options.resume = true;
  EXPECT_EQ(cli::run_generate(options), 0);
  expect_each_answered_once(options.output, 6, 3);
}

TEST(Faults, AnInputFolderOrAnEmptyInputIsSaidPlainly) {
  test::TempDir dir;
  cli::GenerateOptions options;
  options.common.model = tiny_model().string();
  options.common.device = "cpu";
  options.input = dir.path().string();
  options.output = (dir.path() / "out.jsonl").string();
  try {
    cli::run_generate(options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a folder"), std::string::npos) << e.what();
  }
  test::write_file(dir.path() / "empty.jsonl", "\n  \n");
  options.input = (dir.path() / "empty.jsonl").string();
  EXPECT_EQ(cli::run_generate(options), 0);
  EXPECT_EQ(count_lines(options.output), 0u);
}

// The cpu device's emulated gpu tier: weights that do not fit fail at load naming the placement
// flags; weights that fit with no room for even one sequence fail before any request runs; both
// exit 1 with nothing written.
TEST(Faults, AGpuTierBudgetTooSmallFailsClearlyBeforeAnyWork) {
  test::TempDir dir;
  write_requests(dir.path() / "in.jsonl", 3, 4);
  const fs::path output = dir.path() / "out.jsonl";
  auto run = [&](const std::string& gpu_mem, const std::string& log) {
    const std::vector<std::string> args = {"generate",
                                           "--model",
                                           tiny_model().string(),
                                           "--device",
                                           "cpu",
                                           "--batch-size",
                                           "2",
                                           "--gpu-mem",
                                           gpu_mem,
                                           "--input",
                                           (dir.path() / "in.jsonl").string(),
                                           "--output",
                                           output.string()};
    const int status = wait_for(start_offgen(args, {dir.path() / log}));
    return std::make_pair(exit_code(status), test::read_file(dir.path() / log));
  };
  const auto [weights_code, weights_log] = run("64KiB", "weights.log");  // weights: ~0.4 MB
  EXPECT_EQ(weights_code, 1) << weights_log;
  EXPECT_NE(weights_log.find("do not fit"), std::string::npos) << weights_log;
  EXPECT_NE(weights_log.find("gpu tier"), std::string::npos) << weights_log;
  EXPECT_NE(weights_log.find("--weights-gpu"), std::string::npos) << weights_log;
  EXPECT_EQ(count_lines(output), 0u);

  // Just above the weights (measured in-process): the runner of one sequence cannot fit.
  EngineOptions probe_options;
  probe_options.model = tiny_model().string();
  probe_options.device = DeviceChoice::cpu;
  std::uint64_t weights = 0;
  {
    Engine probe(probe_options);
    weights = probe.device().usage(Tier::gpu).used;
  }
  const auto [runner_code, runner_log] = run(std::to_string(weights + 1024), "runner.log");
  EXPECT_EQ(runner_code, 1) << runner_log;
  EXPECT_NE(runner_log.find("nothing can run"), std::string::npos) << runner_log;
  EXPECT_NE(runner_log.find("--gpu-mem"), std::string::npos) << runner_log;
  EXPECT_EQ(count_lines(output), 0u);
}

// A KV budget that cannot hold a policy's fixed part fails before any work, naming the flags.
TEST(Faults, AKvBudgetBelowTheStreamingSinksNamesTheFlags) {
  test::TempDir dir;
  write_requests(dir.path() / "in.jsonl", 2, 4);
  cli::GenerateOptions options;
  options.common.model = tiny_model().string();
  options.common.device = "cpu";
  options.common.policy = "streaming";
  options.common.sinks = 4;
  options.common.kv_budget = "3";
  options.input = (dir.path() / "in.jsonl").string();
  options.output = (dir.path() / "out.jsonl").string();
  try {
    cli::run_generate(options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--kv-budget 3"), std::string::npos) << what;
    EXPECT_NE(what.find("--sinks 4"), std::string::npos) << what;
  }
  EXPECT_EQ(count_lines(options.output), 0u);
}

}  // namespace
}  // namespace offgen
