#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/cli/commands.h"
#include "engine/core/error.h"
#include "engine/core/units.h"
#include "engine/runtime/device_setup.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/planner.h"
#include "policies/kv_budget.h"

namespace offgen::cli {

void add_plan_command(CLI::App& app, PlanOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "choose batch size and weight placement under the memory budgets from a calibrate "
      "profile, and print the predicted time per layer of each resource");
  add_common_options(*cmd, options.common);
  cmd->add_option("--profile", options.profile, "profile made by `offgen calibrate`")
      ->capture_default_str();
  cmd->add_option("--prompt-len", options.prompt_len, "prompt tokens per sequence")
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--gen-len", options.gen_len, "generated tokens per sequence")
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--output", options.output,
                  "also write the plan to this file, for `--plan` on generate, score and bench");
}

int run_plan(const PlanOptions& options) {
  const CommonOptions& common = options.common;
  const OptConfig model = model_config(common.model);
  const MachineProfile profile = MachineProfile::load(options.profile);
  const EngineOptions engine = common.engine_options();
  // The budgets the run would get: what was asked for, else the device's defaults.
  OpenedDevice opened = open_device(engine.device, engine.budgets);
  PlanRequest request;
  request.prompt_len = options.prompt_len;
  request.gen_len = options.gen_len;
  // As a bench run of these lengths: the last generated token is never fed back.
  request.kv_budget = policy_budget(engine.policy.kind, engine.kv_budget, options.prompt_len,
                                    options.gen_len - 1, options.prompt_len + options.gen_len);
  request.scored_policy = make_policy(engine.policy, request.kv_budget)->needs_scores();
  request.gpu_bytes = opened.device->usage(Tier::gpu).budget;
  request.pinned_bytes = opened.device->usage(Tier::pinned).budget;

  fmt::print("model: {}   device: {}   profile: {} ({})\n", common.model, opened.device->name(),
             options.profile, profile.device);
  fmt::print("budgets: gpu {}   pinned {}   prompt {}   gen {}   policy {} (C = {})\n",
             format_bytes(request.gpu_bytes), format_bytes(request.pinned_bytes),
             options.prompt_len, options.gen_len, common.policy, request.kv_budget);
  const auto plan = choose_plan(model, profile, request);
  OFFGEN_CHECK(
      plan.has_value(),
      "nothing fits: batch 1 needs {} on the gpu tier with every layer streamed (budget "
      "{}), or {} on it with every layer resident; streamed layers need up to {} of "
      "pinned memory (budget {}). Raise --gpu-mem or --cpu-mem",
      format_bytes(plan_gpu_bytes(model, request, 1, 0.0)), format_bytes(request.gpu_bytes),
      format_bytes(plan_gpu_bytes(model, request, 1, 1.0)),
      format_bytes(plan_gpu_bytes(model, request, 1, 1.0) - plan_gpu_bytes(model, request, 1, 0.0)),
      format_bytes(request.pinned_bytes));
  const Prediction& p = plan->prediction;
  fmt::print(
      "plan: batch {}   weights on the gpu tier {:.0f}% (rest pinned)   needs gpu {}   "
      "pinned {}\n",
      plan->batch, 100.0 * plan->weights_gpu, format_bytes(plan->gpu_bytes),
      format_bytes(plan->pinned_bytes));
  fmt::print("{:>8} {:>12} {:>12} {:>12} {:>12}\n", "per layer", "weights in", "gemm", "attention",
             "layer");
  auto row = [](const char* name, const LayerCost& c) {
    fmt::print("{:>8} {:>10.3f}ms {:>10.3f}ms {:>10.3f}ms {:>10.3f}ms\n", name, 1e3 * c.transfer,
               1e3 * c.gemm, 1e3 * c.attention, 1e3 * c.total());
  };
  row("prefill", p.prefill);
  row("decode", p.decode);
  fmt::print("predicted: {:.2f} s for the run, {:.1f} generated tokens/s\n", p.seconds,
             p.tokens_per_second);
  if (!options.output.empty()) {
    nlohmann::json file = {{"model", common.model},
                           {"device", opened.device->name()},
                           {"batch_size", plan->batch},
                           {"weights_gpu_percent", 100.0 * plan->weights_gpu},
                           {"weights_cpu_percent", 100.0 * (1.0 - plan->weights_gpu)},
                           {"prompt_len", options.prompt_len},
                           {"gen_len", options.gen_len},
                           {"policy", common.policy},
                           {"kv_budget_tokens", request.kv_budget},
                           {"gpu_bytes", plan->gpu_bytes},
                           {"pinned_bytes", plan->pinned_bytes},
                           {"predicted_tokens_per_second", p.tokens_per_second}};
    std::ofstream out(options.output);
    out << file.dump(2) << '\n';
    OFFGEN_CHECK(out.good(), "cannot write the plan to {}", options.output);
    fmt::print("plan written to {} (use it with --plan)\n", options.output);
  }
  fmt::print(
      "run it: offgen bench --model {} --batch {} --prompt-len {} --gen-len {} "
      "--weights-gpu {:.0f}\n",
      common.model, plan->batch, options.prompt_len, options.gen_len, 100.0 * plan->weights_gpu);
  return 0;
}

}  // namespace offgen::cli
