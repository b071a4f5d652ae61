// How ranks share a batch job's lines (the token split) and the part files they leave, and how one
// process treats such parts: --resume keeps their records, --overwrite removes them, and without
// either they refuse the run. (The jobs on several ranks themselves: mpi_job_test.cpp.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "engine/cli/batch_format.h"
#include "engine/cli/commands.h"
#include "engine/cli/rank_parts.h"
#include "engine/cli/ranks.h"
#include "engine/core/error.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::uint64_t run_sum(const std::vector<std::uint64_t>& work,
                      std::pair<std::size_t, std::size_t> r) {
  return std::accumulate(work.begin() + static_cast<std::ptrdiff_t>(r.first),
                         work.begin() + static_cast<std::ptrdiff_t>(r.second), std::uint64_t{0});
}

TEST(SplitByWork, RunsAreContiguousCoverEveryItemAndBalanceTokensNotLines) {
  // Ten long requests then a hundred short ones: an even line split would give rank 0 most of
  // the work.
  std::vector<std::uint64_t> work(10, 100);
  work.insert(work.end(), 100, 10);
  const auto runs = cli::split_by_work(work, 2);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].first, 0u);
  EXPECT_EQ(runs[0].second, runs[1].first);
  EXPECT_EQ(runs[1].second, work.size());
  EXPECT_EQ(runs[0].second, 10u);  // 1000 tokens each, 10 lines against 100
  EXPECT_EQ(run_sum(work, runs[0]), 1000u);
  EXPECT_EQ(run_sum(work, runs[1]), 1000u);

  // Every split is within one item of even.
  for (int parts = 1; parts <= 7; ++parts) {
    const auto split = cli::split_by_work(work, parts);
    ASSERT_EQ(split.size(), static_cast<std::size_t>(parts));
    std::size_t next = 0;
    for (const auto& r : split) {
      EXPECT_EQ(r.first, next);
      EXPECT_LE(r.first, r.second);
      next = r.second;
      const double even = 2000.0 / parts;
      EXPECT_LE(std::abs(static_cast<double>(run_sum(work, r)) - even), 100.0) << parts << " parts";
    }
    EXPECT_EQ(next, work.size());
  }
}

TEST(SplitByWork, FewerItemsThanRanksLeavesSomeRanksNone) {
  const auto runs = cli::split_by_work({5, 5}, 4);
  ASSERT_EQ(runs.size(), 4u);
  std::size_t items = 0;
  for (const auto& r : runs) items += r.second - r.first;
  EXPECT_EQ(items, 2u);
  EXPECT_EQ(runs.back().second, 2u);
  const auto none = cli::split_by_work({}, 3);
  for (const auto& r : none) EXPECT_EQ(r.first, r.second);
}

TEST(DescribeIndices, GivesRangesAndCutsLongLists) {
  EXPECT_EQ(cli::describe_indices({}), "");
  EXPECT_EQ(cli::describe_indices({3, 4, 5, 6, 7, 12, 40, 41}), "3-7, 12, 40-41");
  std::vector<std::size_t> many;
  for (std::size_t i = 0; i < 40; i += 2) many.push_back(i);
  EXPECT_EQ(cli::describe_indices(many, 3), "0, 2, 4 and 17 more ranges");
}

TEST(PartFiles, FindsEveryRanksPartAndNothingElse) {
  test::TempDir dir;
  const fs::path output = dir.path() / "out.jsonl";
  for (const char* name : {"out.jsonl.part-0", "out.jsonl.part-12", "out.jsonl.part-x",
                           "out.jsonl.part-", "other.jsonl.part-1", "out.jsonl.ordering"}) {
    test::write_file(dir.path() / name, "");
  }
  const auto parts = cli::part_files(output);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts.at(0), cli::part_path(output, 0));
  EXPECT_EQ(parts.at(12), dir.path() / "out.jsonl.part-12");
}

TEST(AnsweredRecords, AResultWinsOverAnErrorWhicheverFileHoldsIt) {
  test::TempDir dir;
  const fs::path output = dir.path() / "out.jsonl";
  // An earlier run: line 0 failed in the output, then answered by rank 1 of a resumed run; line
  // 1 answered in the output, and a stale error for it in rank 2's part; line 2 only in a part,
  // its last line torn.
  test::write_file(output, Json{{"index", 0}, {"error", "did not fit"}}.dump() + "\n" +
                               Json{{"index", 1}, {"text", "b"}}.dump() + "\n");
  test::write_file(cli::part_path(output, 1), Json{{"index", 0}, {"text", "a"}}.dump() + "\n" +
                                                  Json{{"index", 2}, {"text", "c"}}.dump() + "\n" +
                                                  "{\"index\": 3, \"te");
  test::write_file(cli::part_path(output, 2), Json{{"index", 1}, {"error", "stale"}}.dump() + "\n");
  const auto records = cli::answered_records(output, cli::record_index);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records.at(0)["text"], "a");
  EXPECT_EQ(records.at(1)["text"], "b");
  EXPECT_EQ(records.at(2)["text"], "c");
}

TEST(Ranks, APlainProcessIsOneRank) {
  const cli::RankInfo me = cli::job_ranks().info();
  EXPECT_EQ(me.rank, 0);
  EXPECT_EQ(me.size, 1);
  EXPECT_EQ(cli::launched_ranks(), 1);
}

cli::GenerateOptions tiny_generate(const fs::path& dir) {
  cli::GenerateOptions options;
  options.common.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.common.device = "cpu";
  options.common.batch_size = 2;
  options.input = (dir / "in.jsonl").string();
  options.output = (dir / "out.jsonl").string();
  options.temperature = 0;
  std::string text;
  for (int i = 0; i < 6; ++i) {
    text += Json{{"prompt_token_ids", {2, 10 + i, 20 + i, 30}}, {"max_tokens", 3 + i}}.dump();
    text += '\n';
  }
  test::write_file(options.input, text);
  return options;
}

std::vector<std::string> lines_of(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

TEST(OneProcess, ResumesFromThePartsOfARunOnSeveralRanks) {
  test::TempDir dir;
  cli::GenerateOptions options = tiny_generate(dir.path());
  ASSERT_EQ(cli::run_generate(options), 0);
  const auto complete = lines_of(options.output);
  ASSERT_EQ(complete.size(), 6u);

  // A job on two ranks stopped early: rank 0 answered line 1, rank 1 line 4 and half of line 5.
  const fs::path output = options.output;
  fs::remove(output);
  test::write_file(cli::part_path(output, 0), complete[1] + "\n");
  test::write_file(cli::part_path(output, 1), complete[4] + "\n" + complete[5].substr(0, 9));

  // Without --resume or --overwrite the parts refuse the run, naming them, and stay.
  try {
    cli::run_generate(options);
    ADD_FAILURE() << "parts were ignored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out.jsonl.part-0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--resume"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::exists(cli::part_path(output, 1)));

  options.resume = true;
  ASSERT_EQ(cli::run_generate(options), 0);
  EXPECT_EQ(lines_of(output), complete);
  EXPECT_TRUE(cli::part_files(output).empty()) << "merged parts are removed";

  // --overwrite removes parts and starts afresh.
  test::write_file(cli::part_path(output, 3), complete[0] + "\n");
  options.resume = false;
  options.overwrite = true;
  ASSERT_EQ(cli::run_generate(options), 0);
  EXPECT_EQ(lines_of(output), complete);
  EXPECT_TRUE(cli::part_files(output).empty());
}

}  // namespace
}  // namespace offgen
