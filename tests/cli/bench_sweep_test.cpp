// offgen bench as a sweep: batch x prompt x gen x policy x budget rows, one of which cannot fit
// (it says what it would need instead of aborting), written to the terminal, JSON and CSV as each
// row finishes, and kept when the sweep is interrupted.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "bench/rewritten_file.h"
#include "engine/cli/commands.h"
#include "engine/core/error.h"
#include "tests/cli/offgen_process.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

namespace fs = std::filesystem;

TEST(BenchSweep, EveryPolicyAndBudgetGetsARowAndARowThatCannotFitSaysWhatItNeeds) {
  test::TempDir dir;
  cli::BenchOptions options;
  options.common.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.common.device = "cpu";
  options.common.gpu_mem = "6MiB";
  options.common.weights_gpu_percent = 100;  // an explicit placement: no planning
  options.common.placement_source = cli::PlacementSource::as_given;
  options.batches = {2, 4096};
  options.prompt_lens = {16};
  options.gen_lens = {3};
  options.policies = {"full", "h2o", "local"};
  options.kv_budgets = {"0.5", "4"};
  options.json = (dir.path() / "rows.json").string();
  options.csv = (dir.path() / "rows.csv").string();
  options.kv_mem = "1MiB";
  ASSERT_EQ(cli::run_bench(options), 2);  // the sweep ran to its end; some rows could not

  const auto rows = nlohmann::json::parse(test::read_file(options.json));
  ASSERT_EQ(rows.size(), 10u);  // (full + 2 policies x 2 budgets) x 2 batches
  // Each row says what measured it, and carries the table's columns.
  for (const auto& row : rows) {
    EXPECT_EQ(row["model"], options.common.model);
    EXPECT_EQ(row["device"].get<std::string>().rfind("cpu", 0), 0u) << row["device"];
    EXPECT_EQ(row["offgen_version"], OFFGEN_VERSION);
    EXPECT_EQ(row["date"].get<std::string>().size(), 20u) << row["date"];  // 2026-11-27T13:20:00Z
    if (row["status"] == "measured") {
      EXPECT_GT(row["max_batch"].get<int>(), 0);
      EXPECT_GT(row["full_max_batch"].get<int>(), 0);
    }
  }
  int measured = 0;
  for (const auto& row : rows) {
    SCOPED_TRACE(row.dump());
    if (row["batch"] == 2) {
      EXPECT_EQ(row["status"], "measured");
      EXPECT_GT(row["generated_tokens_per_second"].get<double>(), 0.0);
      ++measured;
    } else {
      EXPECT_NE(row["status"], "measured");
      EXPECT_NE(row["error"].get<std::string>().find("does not fit: needs"), std::string::npos);
      EXPECT_GT(row["needed_gpu_bytes"].get<std::uint64_t>(), 6u << 20);
    }
  }
  EXPECT_EQ(measured, 5);
  EXPECT_EQ(rows[2]["policy"], "h2o");
  EXPECT_EQ(rows[2]["kv_budget"], "0.5");
  EXPECT_EQ(rows[9]["policy"], "local");
  EXPECT_EQ(rows[9]["kv_budget"], "4");

  const std::string csv = test::read_file(options.csv);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 11);  // a header and 10 rows
  EXPECT_EQ(csv.rfind("model,device,offgen_version,date,policy,kv_budget,gpu_batch_size", 0), 0u)
      << csv;
}

// A (policy, budget) pair that cannot run — snapkv's observation window does not fit a budget of
// 8 tokens — is a row with its error for every case; the other pairs run, and the exit code says
// that some rows failed.
TEST(BenchSweep, APairThatCannotRunIsARowWithItsErrorAndTheSweepGoesOn) {
  test::TempDir dir;
  cli::BenchOptions options;
  options.common.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.common.device = "cpu";
  options.common.weights_gpu_percent = 100;
  options.common.placement_source = cli::PlacementSource::as_given;
  options.batches = {2};
  options.prompt_lens = {16, 24};
  options.gen_lens = {2};
  options.policies = {"snapkv", "h2o"};
  options.kv_budgets = {"8", "0.5"};
  options.json = (dir.path() / "rows.json").string();
  EXPECT_EQ(cli::run_bench(options), 2);
  const auto rows = nlohmann::json::parse(test::read_file(options.json));
  ASSERT_EQ(rows.size(), 8u);
  for (const auto& row : rows) {
    SCOPED_TRACE(row.dump());
    const bool refused = row["policy"] == "snapkv" && row["kv_budget"] == "8";
    EXPECT_EQ(row["status"] == "measured", !refused);
    if (refused) {
      EXPECT_NE(row["error"].get<std::string>().find("observation window"), std::string::npos);
    }
  }
}

TEST(BenchSweep, APolicyWithoutABudgetIsRefusedBeforeAnythingRuns) {
  cli::BenchOptions options;
  options.common.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.common.device = "cpu";
  options.policies = {"h2o"};
  EXPECT_THROW(cli::run_bench(options), Error);
}

// The sweep as a user runs it: each row is printed and written to --json / --csv as it finishes,
// both files are whole at every moment, and Ctrl-C keeps every finished row and exits 130.
TEST(BenchSweep, EachRowIsWrittenAsItFinishesAndAnInterruptKeepsTheRows) {
  const fs::path model =
      test::data_dir().parent_path().parent_path() / "models" / "opt-tiny-kjv-docs";
  if (!fs::exists(model)) GTEST_SKIP() << "no " << model;
  test::TempDir dir;
  const fs::path json = dir.path() / "rows.json";
  const fs::path csv = dir.path() / "rows.csv";
  // 16 rows of a few hundred decode steps each: about a second a row on a 2-core machine.
  std::string gen_lens;
  for (int i = 0; i < 16; ++i) gen_lens += (i ? "," : "") + std::to_string(300 + i);
  const pid_t pid =
      test::start_offgen({"bench", "--model", model.string(), "--device", "cpu", "--weights-gpu",
                          "100", "--batch", "1", "--prompt-len", "8", "--gen-len", gen_lens,
                          "--json", json.string(), "--csv", csv.string()},
                         {dir.path() / "log"});
  // Stop once a row has been written.
  const std::size_t rows = test::wait_for_json(json, [](const nlohmann::json& written) {
                             return written.is_array() && !written.empty();
                           }).size();
  ASSERT_GE(rows, 1u);
  ::kill(pid, SIGINT);
  const int status = test::wait_for(pid);
  const std::string log = test::read_file(dir.path() / "log");
  ASSERT_EQ(test::exit_code(status), 130) << log;
  const auto kept = nlohmann::json::parse(test::read_file(json));
  ASSERT_GE(kept.size(), rows);
  ASSERT_LT(kept.size(), 16u) << log;
  for (const auto& row : kept) EXPECT_EQ(row["status"], "measured") << row.dump();
  EXPECT_EQ(test::count_lines(csv), kept.size() + 1)
      << test::read_file(csv);  // a header and the rows
  // Each kept row was printed, under the header printed before the first.
  EXPECT_EQ(test::count_of(log, "\n     full "), kept.size()) << log;
  EXPECT_LT(log.find("prefill t/s"), log.find("\n     full ")) << log;
  EXPECT_NE(log.find("stopped by SIGINT: " + std::to_string(kept.size()) +
                     " of 16 rows are kept (printed above, and in " + json.string() + " and " +
                     csv.string() + ")"),
            std::string::npos)
      << log;
  EXPECT_FALSE(fs::exists(json.string() + ".writing"));
}

// A file rewritten as rows come in: replaced whole each time (through a link, the file it names);
// a pipe gets the final contents once.
TEST(RewrittenFile, ReplacesAFileWholeFollowsALinkAndWritesAPipeOnce) {
  test::TempDir dir;
  const fs::path real = dir.path() / "real.json";
  const fs::path link = dir.path() / "link.json";
  fs::create_symlink(real, link);
  bench::RewrittenFile file(link, "[]\n");
  EXPECT_EQ(test::read_file(real), "[]\n");
  file.update("[1]\n");
  EXPECT_EQ(test::read_file(real), "[1]\n");
  file.finish("[1, 2]\n");
  EXPECT_EQ(test::read_file(real), "[1, 2]\n");
  EXPECT_TRUE(fs::is_symlink(link));

  const fs::path fifo = dir.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  bench::RewrittenFile piped(fifo, "[]\n");
  piped.update("[1]\n");
  piped.finish("[1, 2]\n");
  char buffer[64] = {};
  const ssize_t got = ::read(reader, buffer, sizeof buffer);
  ::close(reader);
  EXPECT_EQ(std::string(buffer, got > 0 ? static_cast<std::size_t>(got) : 0), "[1, 2]\n");

  EXPECT_THROW(bench::RewrittenFile(dir.path() / "missing" / "x.json", ""), Error);
}

}  // namespace
}  // namespace offgen
