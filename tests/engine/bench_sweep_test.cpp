// offgen bench as a sweep: batch x prompt x gen x policy x budget rows, one of which cannot fit
// (it says what it would need instead of aborting), written to the terminal, JSON and CSV.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "engine/cli/commands.h"
#include "engine/core/error.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(BenchSweep, EveryPolicyAndBudgetGetsARowAndARowThatCannotFitSaysWhatItNeeds) {
  test::TempDir dir;
  cli::BenchOptions options;
  options.common.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.common.device = "cpu";
  options.common.gpu_mem = "6MiB";
  options.common.weights_gpu_percent = 100;  // an explicit placement: no planning
  options.common.placement = cli::Placement::as_given;
  options.batches = {2, 4096};
  options.prompt_lens = {16};
  options.gen_lens = {3};
  options.policies = {"full", "h2o", "local"};
  options.kv_budgets = {"0.5", "4"};
  options.json = (dir.path() / "rows.json").string();
  options.csv = (dir.path() / "rows.csv").string();
  ASSERT_EQ(cli::run_bench(options), 0);

  const auto rows = nlohmann::json::parse(read_all(options.json));
  ASSERT_EQ(rows.size(), 10u);  // (full + 2 policies x 2 budgets) x 2 batches
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

  const std::string csv = read_all(options.csv);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 11);  // a header and 10 rows
  EXPECT_EQ(csv.rfind("policy,kv_budget,gpu_batch_size,num_gpu_batches,batch", 0), 0u) << csv;
}

TEST(BenchSweep, APolicyWithoutABudgetIsRefusedBeforeAnythingRuns) {
  cli::BenchOptions options;
  options.common.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.common.device = "cpu";
  options.policies = {"h2o"};
  EXPECT_THROW(cli::run_bench(options), Error);
}

}  // namespace
}  // namespace offgen
