#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "bench/table.h"
#include "bench/throughput.h"
#include "engine/cli/commands.h"
#include "engine/core/units.h"

namespace offgen::cli {

void add_bench_command(CLI::App& app, BenchOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "throughput sweep over batch sizes and lengths (synthetic prompts, EOS ignored); without "
      "--plan or a placement flag, the planner places the run for the sweep's largest case, and "
      "with a profile every row shows the predicted throughput beside the measured");
  add_common_options(*cmd, options.common);
  plan_unless_placed(*cmd, options.common);
  cmd->add_option("--batch", options.batches, "batch sizes, e.g. 1,8,32")
      ->delimiter(',')
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--prompt-len", options.prompt_lens, "prompt lengths in tokens, e.g. 128,512")
      ->delimiter(',')
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--gen-len", options.gen_lens, "generated tokens per sequence, e.g. 32")
      ->delimiter(',')
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--kv-mem", options.kv_mem,
                  "KV memory, e.g. 4GiB: report the largest batch whose KV cache fits in it, under "
                  "this policy and under full");
  cmd->add_option("--seed", options.seed, "seed of the synthetic prompts")->capture_default_str();
}

int run_bench(const BenchOptions& options) {
  const std::uint64_t kv_memory = options.kv_mem.empty() ? 0 : parse_bytes(options.kv_mem);
  std::optional<MachineProfile> profile;
  if (!options.common.profile.empty()) profile = MachineProfile::load(options.common.profile);
  EngineOptions engine_options = options.common.engine_options();
  if (options.common.placement == Placement::planned) {
    // The engine's weight placement is fixed when it loads: plan once, for the sweep's largest
    // case, with every row a block of its --batch split the plan's way.
    RunLengths lengths;
    lengths.block = *std::max_element(options.batches.begin(), options.batches.end());
    lengths.prompt_len = *std::max_element(options.prompt_lens.begin(), options.prompt_lens.end());
    lengths.gen_len = *std::max_element(options.gen_lens.begin(), options.gen_lens.end());
    MachineProfile used;
    if (plan_automatically(options.common, lengths, engine_options, &used)) profile = used;
  }
  Engine engine(engine_options);
  const std::string budget =
      options.common.kv_budget.empty() ? std::string("whole sequence") : options.common.kv_budget;
  fmt::print(
      "model: {}   device: {}   weights: {} ({} on the gpu tier)   policy: {}   kv budget: {}\n",
      engine.model_description(), engine.device().name(), format_bytes(engine.weight_bytes()),
      format_bytes(engine.weight_gpu_bytes()), options.common.policy, budget);
  // One small untimed case first, so first-touch page faults and thread-pool start-up are not
  // charged to the first row.
  bench::run_case(engine, {1, 8, 2}, options.seed);
  std::vector<bench::BenchRow> rows;
  for (const bench::BenchCase& c :
       bench::sweep(options.batches, options.prompt_lens, options.gen_lens)) {
    rows.push_back(bench::run_case(engine, c, options.seed, profile ? &*profile : nullptr));
    spdlog::debug("batch {} prompt {} gen {} done", c.batch, c.prompt_len, c.gen_len);
  }
  fmt::print("{}", bench::format_table(rows, kv_memory));
  return 0;
}

}  // namespace offgen::cli
