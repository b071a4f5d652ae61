// offgen compare end to end on the tiny checkpoint: the grid runs on one load of the model, and the
// report folder holds results.json, report.md and report.html (with charts where
// python3-matplotlib is installed), the cells that finished when it is interrupted, and is not
// replaced by a second run without --overwrite.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "engine/cli/compare_command.h"
#include "engine/core/error.h"
#include "tests/cli/offgen_process.h"
#include "tests/support/golden.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

// The options of a small grid on the tiny checkpoint, its report in dir/report.
cli::CompareCommandOptions small_grid(const std::filesystem::path& dir) {
  cli::CompareCommandOptions options;
  options.common.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.common.device = "cpu";
  options.policies = {"h2o", "local"};
  options.budgets = {0.5, 6};
  options.batch = 2;
  options.prompt_len = 16;
  options.gen_len = 4;
  options.output = (dir / "report").string();
  return options;
}

TEST(CompareCommand, WritesTheThreeReportFilesForTheWholeGrid) {
  test::TempDir dir;
  const auto eval = dir.path() / "eval.jsonl";
  std::string lines;
  for (const ScoreRequest& r : test::golden_score_requests()) {
    lines += nlohmann::json({{"token_ids", r.tokens}}).dump() + "\n";
  }
  test::write_file(eval, lines);

  cli::CompareCommandOptions options = small_grid(dir.path());
  options.eval = eval.string();
  options.prefill_tokens = 3;
  options.prompt_tokens = 4;
  options.generated_tokens = 4;
  ASSERT_EQ(cli::run_compare(options), 0);

  const auto results =
      nlohmann::json::parse(test::read_file(dir.path() / "report" / "results.json"));
  ASSERT_EQ(results["cells"].size(), 5u);  // full, then 2 policies x 2 budgets
  EXPECT_EQ(results["cells"][0]["policy"], "full");
  const auto& full = results["cells"][0];
  EXPECT_DOUBLE_EQ(full["quality"]["greedy_agreement_with_full"].get<double>(), 1.0);
  EXPECT_GT(full["throughput"]["generated_tokens_per_second"].get<double>(), 0.0);
  EXPECT_GT(full["quality"]["scored_tokens"].get<int>(), 0);
  for (const auto& cell : results["cells"]) {
    SCOPED_TRACE(cell.dump());
    EXPECT_FALSE(cell.contains("error"));
    EXPECT_TRUE(cell["quality"]["perplexity"].is_number());
    EXPECT_LE(cell["kv_per_sequence_bytes"].get<std::uint64_t>(),
              full["kv_per_sequence_bytes"].get<std::uint64_t>());
    EXPECT_GE(cell["largest_batch"].get<std::uint64_t>(),
              full["largest_batch"].get<std::uint64_t>());
  }
  const std::string markdown = test::read_file(dir.path() / "report" / "report.md");
  EXPECT_NE(markdown.find("| h2o | 0.5 |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| local | 6 tokens |"), std::string::npos) << markdown;
  const std::string html = test::read_file(dir.path() / "report" / "report.html");
  EXPECT_NE(html.find("<html"), std::string::npos);
  const bool matplotlib =
      std::system("python3 -c 'import matplotlib' > /dev/null 2>&1") == 0 ||
      std::system("/usr/bin/python3 -c 'import matplotlib' > /dev/null 2>&1") == 0;
  if (matplotlib) {
    EXPECT_NE(html.find("data:image/png;base64,"), std::string::npos);
  } else {
    EXPECT_NE(html.find("No charts"), std::string::npos);
  }
}

// A folder that already holds a report is refused before any work (here the model does not even
// exist: the folder is checked first) and left as it was; --overwrite replaces the report; an
// empty folder is fine.
TEST(CompareCommand, AnExistingReportFolderIsRefusedUnlessOverwriteIsGiven) {
  test::TempDir dir;
  cli::CompareCommandOptions options = small_grid(dir.path());
  test::write_file(dir.path() / "report" / "results.json", "{\"earlier\": true}\n");
  test::write_file(dir.path() / "report" / "report.md", "earlier\n");
  options.common.model = (dir.path() / "no-such-model").string();
  const std::string what = test::error_of([&] { cli::run_compare(options); });
  EXPECT_NE(what.find("--output " + options.output +
                      " already holds a report (report.md, results.json); add --overwrite"),
            std::string::npos)
      << what;
  EXPECT_EQ(test::read_file(dir.path() / "report" / "results.json"), "{\"earlier\": true}\n");

  options = small_grid(dir.path());
  options.overwrite = true;
  ASSERT_EQ(cli::run_compare(options), 0);
  const auto results =
      nlohmann::json::parse(test::read_file(dir.path() / "report" / "results.json"));
  EXPECT_EQ(results["cells"].size(), 5u);
  EXPECT_EQ(results["complete"], true);

  std::filesystem::create_directories(dir.path() / "empty");
  options = small_grid(dir.path());
  options.output = (dir.path() / "empty").string();
  EXPECT_EQ(cli::run_compare(options), 0);
  test::write_file(dir.path() / "a-file", "x");
  options.output = (dir.path() / "a-file").string();
  options.overwrite = true;
  EXPECT_NE(
      test::error_of([&] { cli::run_compare(options); }).find("is a file, not a report folder"),
      std::string::npos);
}

// An --output that cannot be created (a file stands where a folder of its path should be) is
// refused before any work: the model is not even loaded (it does not exist here), nothing is
// created, and no cell is claimed kept.
TEST(CompareCommand, AnOutputFolderThatCannotBeCreatedIsRefusedBeforeAnyWork) {
  test::TempDir dir;
  test::write_file(dir.path() / "a-file", "x");
  cli::CompareCommandOptions options = small_grid(dir.path());
  options.output = (dir.path() / "a-file" / "report").string();
  options.common.model = (dir.path() / "no-such-model").string();
  const std::string what = test::error_of([&] { cli::run_compare(options); });
  EXPECT_NE(what.find("--output " + options.output + ": cannot create the report folder: " +
                      (dir.path() / "a-file").string() + " is not a folder"),
            std::string::npos)
      << what;
  EXPECT_EQ(what.find("kept"), std::string::npos) << what;
  EXPECT_EQ(test::read_file(dir.path() / "a-file"), "x");
}

// The grid runs on one load of the model: the engine's load line appears once for five cells
// (each cell once built an engine of its own).
// A budget is a fraction below 1 or a whole number of tokens, named by compare's own flag.
TEST(CompareCommand, ABudgetThatIsNeitherAFractionNorTokensNamesBudgets) {
  test::TempDir dir;
  cli::CompareCommandOptions options = small_grid(dir.path());
  options.budgets = {0.5, 1.5};
  const std::string what = test::error_of([&] { cli::run_compare(options); });
  EXPECT_EQ(what, "--budgets 1.5 is neither a fraction below 1 nor a whole number of tokens");
}

TEST(CompareCommand, LoadsTheModelOnceForTheWholeGrid) {
  test::TempDir dir;
  const cli::CompareCommandOptions options = small_grid(dir.path());
  const test::Finished run =
      test::run_offgen({"compare", "--model", options.common.model, "--device", "cpu", "--policies",
                        "h2o,local", "--budgets", "0.5,6", "--batch", "2", "--prompt-len", "16",
                        "--gen-len", "4", "--output", options.output},
                       dir.path() / "log");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_EQ(test::count_of(run.output, "[info] model "), 1u) << run.output;
  const auto results =
      nlohmann::json::parse(test::read_file(dir.path() / "report" / "results.json"));
  EXPECT_EQ(results["cells"].size(), 5u);
}

// --tasks on the shipped checkpoint: every cell answers the same samples, results.json holds a
// score per (task, length, depth), report.md opens with its answer and has a table per task, and
// the throughput case ran --repeats times.
// compare's options on the shipped checkpoint (models/opt-tiny-kjv-docs), the cpu device.
cli::CompareCommandOptions on_shipped_model(const std::filesystem::path& model) {
  cli::CompareCommandOptions options;
  options.common.model = model.string();
  options.common.device = "cpu";
  return options;
}

std::filesystem::path shipped_model() {
  return test::data_dir().parent_path().parent_path() / "models" / "opt-tiny-kjv-docs";
}

TEST(CompareCommand, TasksRunOnEveryCellAndTheReportLeadsWithItsAnswer) {
  const std::filesystem::path model = shipped_model();
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "no " << model;
  test::TempDir dir;
  cli::CompareCommandOptions options = on_shipped_model(model);
  options.policies = {"local"};
  options.budgets = {0.5};
  options.batch = 2;
  options.prompt_len = 16;
  options.gen_len = 4;
  options.repeats = 2;
  options.tasks = {"passkey", "kv-recall", "copy"};
  options.task_text = (model / "eval.jsonl").string();
  options.task_lengths = {128, 300};
  options.task_depths = {0.0, 1.0};
  options.task_samples = 2;
  options.output = (dir.path() / "report").string();
  ASSERT_EQ(cli::run_compare(options), 0);

  const auto results =
      nlohmann::json::parse(test::read_file(dir.path() / "report" / "results.json"));
  EXPECT_EQ(results["tasks"]["names"], nlohmann::json({"passkey", "kv-recall", "copy"}));
  ASSERT_EQ(results["cells"].size(), 2u);
  for (const auto& cell : results["cells"]) {
    SCOPED_TRACE(cell.dump());
    EXPECT_EQ(cell["throughput"]["generated_tokens_per_second_runs"].size(), 2u);
    ASSERT_EQ(cell["tasks"].size(), 3u * 2u * 2u);  // task x length x depth
    for (const auto& t : cell["tasks"]) {
      EXPECT_EQ(t["samples"], 2);
      if (t["task"] == "copy") {
        EXPECT_LT(t["mean_logprob"].get<double>(), 0.0);
        EXPECT_EQ(t["scored_tokens"], 2 * 31);
      } else {
        EXPECT_GE(t["correct"].get<int>(), 0);
        EXPECT_LE(t["accuracy_95"][0].get<double>(), t["accuracy"].get<double>());
      }
    }
  }
  const std::string markdown = test::read_file(dir.path() / "report" / "report.md");
  const std::string answer = results["answer"];
  EXPECT_EQ(markdown.find(answer), markdown.find('\n') + 2) << markdown;
  EXPECT_EQ(test::count_of(markdown, "# KV policy comparison"), 1u) << markdown;
  EXPECT_EQ(test::count_of(markdown, answer), 1u) << markdown;
  // The tiny model answers none of the retrieval samples: the answer says so, not that nothing
  // was measured.
  EXPECT_EQ(answer.find("No quality was measured"), std::string::npos) << answer;
  EXPECT_NE(markdown.find("## passkey: accuracy by depth and by length"), std::string::npos);
  EXPECT_NE(markdown.find("## copy: mean log-probability"), std::string::npos);
  // A task full gets none of is a sentence, not a table of zeros; copy always has its table.
  EXPECT_EQ(test::count_of(markdown, "full itself retrieves none of its 8 samples"), 2u)
      << markdown;
  EXPECT_EQ(markdown.find("| local | 0.5 | 0% |"), std::string::npos) << markdown;
}

TEST(CompareCommand, TasksNeedATextAndLengthsTheModelHolds) {
  const std::filesystem::path model = shipped_model();
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "no " << model;
  test::TempDir dir;
  cli::CompareCommandOptions options = on_shipped_model(model);
  options.tasks = {"passkey"};
  options.output = (dir.path() / "report").string();
  EXPECT_NE(test::error_of([&] { cli::run_compare(options); }).find("--tasks needs a text"),
            std::string::npos);
  options.task_text = (model / "eval.jsonl").string();
  options.task_lengths = {1020};
  EXPECT_NE(test::error_of([&] { cli::run_compare(options); })
                .find("--task-lengths 1020 leaves no room for an answer within the model's 1024 "
                      "positions"),
            std::string::npos);
  const auto short_text = dir.path() / "short.txt";
  test::write_file(short_text, "Only a few words.");
  options.task_text = short_text.string();
  options.task_lengths = {256};
  EXPECT_NE(test::error_of([&] { cli::run_compare(options); }).find("give a longer text"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "report"));  // nothing ran
}

// The attention-score policies beside h2o run through the CLI the way it does, with snapkv's own
// flags.
TEST(CompareCommand, ComparesTovaAndSnapKv) {
  test::TempDir dir;
  const cli::CompareCommandOptions options = small_grid(dir.path());
  const test::Finished run = test::run_offgen({"compare",
                                               "--model",
                                               options.common.model,
                                               "--device",
                                               "cpu",
                                               "--policies",
                                               "tova,snapkv",
                                               "--observation-window",
                                               "4",
                                               "--pool-kernel",
                                               "3",
                                               "--budgets",
                                               "0.5,6",
                                               "--batch",
                                               "2",
                                               "--prompt-len",
                                               "16",
                                               "--gen-len",
                                               "4",
                                               "--output",
                                               options.output},
                                              dir.path() / "log");
  ASSERT_EQ(run.code, 0) << run.output;
  const auto results =
      nlohmann::json::parse(test::read_file(dir.path() / "report" / "results.json"));
  ASSERT_EQ(results["cells"].size(), 5u);
  EXPECT_EQ(results["cells"][1]["policy"], "tova");
  EXPECT_EQ(results["cells"][3]["policy"], "snapkv");
}

// Ctrl-C in the middle of the grid: results.json and report.md hold the cells that finished
// (rewritten after each one, whole at every moment), marked incomplete; the run exits 130.
TEST(CompareCommand, AnInterruptKeepsTheFinishedCellsMarkedIncomplete) {
  const std::filesystem::path model =
      test::data_dir().parent_path().parent_path() / "models" / "opt-tiny-kjv-docs";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "no " << model;
  test::TempDir dir;
  const std::filesystem::path report = dir.path() / "report";
  // 13 cells of a few hundred decode steps each: about a second a cell on a 2-core machine.
  const pid_t pid =
      test::start_offgen({"compare", "--model", model.string(), "--device", "cpu", "--policies",
                          "local,h2o,streaming", "--budgets", "0.1,0.2,0.3,0.5", "--batch", "1",
                          "--prompt-len", "16", "--gen-len", "400", "--output", report.string()},
                         {dir.path() / "log"});
  const std::size_t cells =
      test::wait_for_json(report / "results.json",
                          [](const nlohmann::json& results) {
                            return results.is_object() && !results["cells"].empty();
                          })["cells"]
          .size();
  ASSERT_GE(cells, 1u);
  ::kill(pid, SIGINT);
  const int status = test::wait_for(pid);
  const std::string log = test::read_file(dir.path() / "log");
  ASSERT_EQ(test::exit_code(status), 130) << log;
  const auto results = nlohmann::json::parse(test::read_file(report / "results.json"));
  const std::size_t kept = results["cells"].size();
  EXPECT_GE(kept, cells);
  EXPECT_LT(kept, 13u);
  EXPECT_EQ(results["complete"], false);
  EXPECT_EQ(results["cells_planned"], 13);
  EXPECT_EQ(results["cells"][0]["policy"], "full");
  const std::string counts = std::to_string(kept) + " of 13 cells";
  EXPECT_NE(test::read_file(report / "report.md").find("**Incomplete**: " + counts + " finished"),
            std::string::npos);
  EXPECT_NE(test::read_file(report / "report.html").find("Incomplete"), std::string::npos);
  EXPECT_NE(log.find("stopped by SIGINT: " + counts + " are kept in " + report.string()),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace offgen
