// offgen compare end to end on the tiny checkpoint: the grid runs, and the report folder holds
// results.json, report.md and report.html (with charts where python3-matplotlib is installed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "engine/cli/compare_command.h"
#include "tests/support/golden.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CompareCommand, WritesTheThreeReportFilesForTheWholeGrid) {
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
  options.policies = {"h2o", "local"};
  options.budgets = {0.5, 6};
  options.batch = 2;
  options.prompt_len = 16;
  options.gen_len = 4;
  options.eval = eval.string();
  options.prefill_tokens = 3;
  options.prompt_tokens = 4;
  options.generated_tokens = 4;
  options.output = (dir.path() / "report").string();
  ASSERT_EQ(cli::run_compare(options), 0);

  const auto results = nlohmann::json::parse(read_all(dir.path() / "report" / "results.json"));
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
  const std::string markdown = read_all(dir.path() / "report" / "report.md");
  EXPECT_NE(markdown.find("| h2o | 0.5 |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| local | 6 tokens |"), std::string::npos) << markdown;
  const std::string html = read_all(dir.path() / "report" / "report.html");
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

}  // namespace
}  // namespace offgen
