// What the engine says of its parameters, the CLI says of the flags that set them: the same
// message, worded with flag names (engine/cli/flag_names.h).
#include "engine/cli/flag_names.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/cli/commands.h"
#include "engine/core/error.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

cli::CommonOptions tiny() {
  cli::CommonOptions options;
  options.model = (test::data_dir() / "golden" / "tiny-preln").string();
  options.device = "cpu";
  return options;
}

// A budget means nothing to full (it keeps every token): asking for one is a mistake to name, not
// a setting to ignore.
TEST(FlagNames, AKvBudgetWithPolicyFullIsRefused) {
  cli::CommonOptions options = tiny();
  options.kv_budget = "0.2";
  const std::string what = test::error_of([&] { options.engine_options(); });
  EXPECT_NE(what.find("--kv-budget 0.2 means nothing to --policy full"), std::string::npos) << what;
  options.policy = "h2o";
  EXPECT_NO_THROW(options.engine_options());
}

TEST(FlagNames, EngineOptionsNameTheFlags) {
  cli::CommonOptions options = tiny();
  options.policy = "h2o";
  try {
    options.engine_options();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--policy h2o needs --kv-budget (a fraction like 0.2 or a token count)");
  }
  options.kv_budget = "1.5";
  try {
    options.engine_options();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "--kv-budget 1.5 is neither a fraction below 1 nor a whole number of tokens");
  }
}

TEST(FlagNames, SnapKvOptionsNameTheirFlags) {
  cli::CommonOptions options = tiny();
  options.policy = "snapkv";
  options.kv_budget = "8";
  try {
    options.engine_options();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "--kv-budget 8 cannot hold --policy snapkv's observation window "
                 "(--observation-window 32) plus one prompt token: give --kv-budget 33 or more, "
                 "or lower --observation-window");
  }
  options.kv_budget = "0.2";
  options.pool_kernel = 4;
  try {
    options.engine_options();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--pool-kernel must be an odd number >= 1 (got 4)");
  }
}

TEST(FlagNames, AnEngineErrorIsWordedWithFlagsAtTheCli) {
  cli::CommonOptions options = tiny();
  options.weights_gpu_percent = 50;
  options.weights_cpu_percent = 0;  // half of each layer to disk, and no --disk
  const EngineOptions engine = options.engine_options();
  try {
    Engine loaded(engine);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "50% of the weights would go to disk, but no disk folder was given");
    EXPECT_EQ(cli::flag_message(e),
              "50% of the weights would go to disk, but no --disk folder was given");
  }
  // naming_flags rethrows the same type, worded with flags.
  try {
    cli::naming_flags([&] { Engine loaded(engine); });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "50% of the weights would go to disk, but no --disk folder was given");
  }
}

TEST(FlagNames, AnErrorThatNamesNoParameterIsItsOwnMessage) {
  EXPECT_EQ(cli::flag_message(Error("plain")), "plain");
}

}  // namespace
}  // namespace offgen
