// --prefill-math from the command line: every command takes it, the cuda device refuses bf16 by
// flag name (before it looks for a GPU, so the message is the same on any machine), and a plan
// predicts bf16 from the profile's bf16 rates, refusing a profile that has none.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/cli/commands.h"
#include "kernels/cpu/cpu_features.h"
#include "tests/cli/cli_commands.h"
#include "tests/cli/offgen_process.h"
#include "tests/cli/test_profile.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

TEST(PrefillMathFlag, EveryCommandTakesIt) {
  for (const std::string command :
       {"generate --model m --input a --output b", "score --model m --input a --output b", "bench",
        "compare --model m", "plan"}) {
    test::CliCommands commands;
    EXPECT_NO_THROW(commands.parse(command + " --prefill-math bf16")) << command;
  }
  test::CliCommands commands;
  EXPECT_ANY_THROW(commands.parse("bench --prefill-math int8"));
}

TEST(PrefillMathFlag, TheCudaDeviceRefusesBf16ByFlagName) {
  test::TempDir dir;
  const auto run =
      test::run_offgen({"bench", "--model", "dummy:opt-125m", "--device", "cuda", "--batch", "1",
                        "--prompt-len", "8", "--gen-len", "2", "--prefill-math", "bf16"},
                       dir.path() / "log");
  EXPECT_NE(run.code, 0) << run.output;
  EXPECT_NE(run.output.find("--prefill-math bf16 is for the cpu device"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("--device cpu"), std::string::npos) << run.output;
}

TEST(PrefillMathFlag, APlanPredictsBf16FromTheProfilesBf16Rates) {
  if (!kernels::cpu::cpu_features().bf16_gemm()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  test::TempDir dir;
  cli::PlanOptions plan;
  plan.common.model = "opt-125m";
  plan.common.device = "cpu";
  plan.common.profile = test::write_profile(dir.path());
  plan.common.prefill_math = "bf16";
  plan.prompt_len = 512;
  plan.gen_len = 8;
  plan.output = (dir.path() / "plan.json").string();
  // The hand-written profile has no bf16 measurement: nothing to predict bf16 with.
  const std::string what = test::error_of([&] { cli::run_plan(plan); });
  EXPECT_NE(what.find("no bf16 GEMM measurement"), std::string::npos) << what;

  // With bf16 rates twice the fp32 ones (300 TFLOP/s at 512 rows in the profile), the prefill's
  // GEMMs are predicted in half the time (512-row prompts: the 512-row point alone), and the plan
  // file says how it was planned.
  auto profile = nlohmann::json::parse(std::ifstream(plan.common.profile));
  profile["measurements"]["gemm_layer_bf16_m128"] = {{"value", 600}};
  profile["measurements"]["gemm_layer_bf16_m512"] = {{"value", 600}};
  test::write_file(plan.common.profile, profile.dump());
  ASSERT_EQ(cli::run_plan(plan), 0);
  const auto bf16 = nlohmann::json::parse(std::ifstream(plan.output));
  EXPECT_EQ(bf16["prefill_math"], "bf16");
  cli::PlanOptions exact = plan;
  exact.common.prefill_math = "fp32";
  exact.output = (dir.path() / "exact.json").string();
  ASSERT_EQ(cli::run_plan(exact), 0);
  const auto fp32 = nlohmann::json::parse(std::ifstream(exact.output));
  EXPECT_EQ(fp32["prefill_math"], "fp32");
  // Per sequence of the block (the two plans may choose other blocks).
  const auto per_sequence = [](const nlohmann::json& p) {
    return p["prefill_layer_seconds"]["gemm"].get<double>() / p["block_size"].get<double>();
  };
  EXPECT_NEAR(per_sequence(bf16), per_sequence(fp32) / 2, per_sequence(fp32) * 0.01);
}

}  // namespace
}  // namespace offgen
