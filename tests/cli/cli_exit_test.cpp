// What the offgen binary itself exits with: 0 for --help and --version, 1 for every usage error
// (as README and --help document), never CLI11's own codes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/cli/offgen_process.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

TEST(CliExit, VersionPrintsTheProjectVersionAndExitsZero) {
  test::TempDir dir;
  const test::Finished version = test::run_offgen({"--version"}, dir.path() / "log");
  EXPECT_EQ(version.code, 0) << version.output;
  EXPECT_EQ(version.output, std::string("offgen ") + OFFGEN_VERSION + "\n");
  const test::Finished help = test::run_offgen({"generate", "--help"}, dir.path() / "log");
  EXPECT_EQ(help.code, 0) << help.output;
  EXPECT_NE(help.output.find("--input"), std::string::npos) << help.output;
}

TEST(CliExit, EveryUsageErrorExitsOneAndNamesTheProblem) {
  test::TempDir dir;
  // (arguments, what the message says)
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "subcommand"},
      {{"frobnicate"}, "A subcommand is required"},
      {{"generate", "--input", "a", "--output", "b"}, "--model is required"},
      {{"bench", "--batch", "0"}, "--batch"},
      {{"bench", "--no-such-flag"}, "--no-such-flag"},
      {{"bench", "--policy", "lru"}, "lru"},
      {{"generate", "--model", "m", "--input", "a", "--output", "b", "--resume", "--overwrite"},
       "--overwrite"},
  };
  for (const auto& [args, says] : cases) {
    std::string line;
    for (const std::string& a : args) line += a + " ";
    SCOPED_TRACE(line);
    const test::Finished run = test::run_offgen(args, dir.path() / "log");
    EXPECT_EQ(run.code, 1) << run.output;
    EXPECT_NE(run.output.find(says), std::string::npos) << run.output;
  }
}

}  // namespace
}  // namespace offgen
