#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/cli/commands.h"
#include "engine/core/error.h"
#include "engine/core/units.h"
#include "engine/runtime/device_setup.h"
#include "engine/runtime/engine.h"
#include "scheduler/planner.h"

namespace offgen::cli {
namespace {

nlohmann::ordered_json layer_json(const LayerCost& c) {
  return {{"weights_in", c.weights_in},
          {"kv_load", c.kv_load},
          {"kv_store", c.kv_store},
          {"activations_in", c.act_in},
          {"activations_out", c.act_out},
          {"disk", c.disk},
          {"gemm", c.gemm},
          {"attention", c.attention},
          {"cpu_attention", c.cpu_attention}};
}

// The flags that run `plan` with `offgen bench` (the budgets and policy as given).
std::string run_command(const PlanOptions& options, const Plan& plan) {
  const CommonOptions& c = options.common;
  std::string out = fmt::format("offgen bench --model {}", c.model);
  if (c.device != "auto") out += " --device " + c.device;
  out += fmt::format(" --batch {} --prompt-len {} --gen-len {}", plan.block, options.prompt_len,
                     options.gen_len);
  out += fmt::format(" --batch-size {} --num-gpu-batches {}", plan.gpu_batch, plan.num_gpu_batches);
  out += fmt::format(" --weights-gpu {:g} --weights-cpu {:g}", 100.0 * plan.weights_gpu,
                     100.0 * plan.weights_cpu);
  out += fmt::format(" --kv-gpu {:g}", 100.0 * plan.kv_gpu);
  if (plan.cpu_attention) out += " --cpu-attention";
  if (plan.activations_on_host) out += " --activations-cpu";
  if (!c.gpu_mem.empty()) out += " --gpu-mem " + c.gpu_mem;
  if (!c.cpu_mem.empty()) out += " --cpu-mem " + c.cpu_mem;
  if (plan.weights_disk() > 1e-9) out += " --disk " + c.disk;
  if (c.policy != "full") out += " --policy " + c.policy;
  if (!c.kv_budget.empty()) out += " --kv-budget " + c.kv_budget;
  return out;
}

}  // namespace

void add_plan_command(CLI::App& app, PlanOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "choose the placement (GPU batch size and count, weight shares per tier, KV share on the "
      "gpu tier, cpu attention) under the memory budgets from a machine profile, and print the "
      "predicted time per layer of each resource");
  add_common_options(*cmd, options.common);
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
  const EngineOptions engine = common.engine_options();
  const OptConfig model = model_config(engine.model);
  // The budgets the run would get: what was asked for, else the device's defaults.
  OpenedDevice opened = open_device(engine.device, engine.budgets, engine.cpu_kernels);
  const MachineProfile profile = resolve_profile(common.profile, opened, model);
  const PlanRequest request =
      plan_request(engine, *opened.device, options.prompt_len, options.gen_len, 0);

  const std::string profile_name =
      common.profile.empty() ? cached_profile_path(opened.device->name()).string() : common.profile;
  fmt::print("model: {}   device: {}   profile: {} ({})\n", common.model_name().describe(),
             opened.device->name(), profile_name, profile.device);
  fmt::print("budgets: gpu {}   pinned {}   disk {}   prompt {}   gen {}   policy {} (C = {})\n",
             format_bytes(request.gpu_bytes), format_bytes(request.pinned_bytes),
             request.disk ? common.disk : std::string("none"), options.prompt_len, options.gen_len,
             common.policy, request.kv_budget);
  const auto plan = choose_plan(model, profile, request);
  if (!plan) {
    Plan smallest;  // one sequence, every layer streamed, its KV on the host
    smallest.weights_gpu = 0.0;
    smallest.weights_cpu = 1.0;
    smallest.kv_gpu = 0.0;
    const PlanMemory least = plan_memory(model, request, smallest);
    fail(
        "nothing fits: one sequence with every layer streamed and its KV in pinned memory needs "
        "{} on the gpu tier (budget {}) and {} of pinned memory (budget {}{}). Raise --gpu-mem "
        "or --cpu-mem{}",
        format_bytes(least.gpu), format_bytes(request.gpu_bytes), format_bytes(least.pinned),
        format_bytes(request.pinned_bytes), request.disk ? ", less what --disk takes" : "",
        request.disk ? "" : ", or give --disk DIR for weights");
  }
  const Prediction& p = plan->prediction;
  fmt::print("plan: block {} = GPU batch {} x {} GPU batch{}\n", plan->block, plan->gpu_batch,
             plan->num_gpu_batches, plan->num_gpu_batches == 1 ? "" : "es");
  fmt::print("  weights  gpu {:.0f}%   cpu (pinned) {:.0f}%   disk {:.0f}%\n",
             100.0 * plan->weights_gpu, 100.0 * plan->weights_cpu, 100.0 * plan->weights_disk());
  fmt::print(
      "  KV       gpu {:.0f}% of each GPU batch's sequences, the rest pinned   cpu "
      "attention {}\n",
      100.0 * plan->kv_gpu, plan->cpu_attention ? "on" : "off");
  fmt::print("  activations on the {}\n",
             plan->activations_on_host ? "cpu (pinned; two GPU batches on the gpu tier)" : "gpu");
  fmt::print("  memory   gpu {}   pinned {}   disk {}\n", format_bytes(plan->gpu_bytes),
             format_bytes(plan->pinned_bytes), format_bytes(plan->disk_bytes));
  fmt::print("{:>9} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}\n", "per layer",
             "weights in", "kv load", "kv store", "acts in+out", "disk", "gemm", "attention",
             "cpu attn", "layer");
  auto row = [](const char* name, const LayerCost& c, double total) {
    fmt::print("{:>9}", name);
    for (const double s : {c.weights_in, c.kv_load, c.kv_store, c.act_in + c.act_out, c.disk,
                           c.gemm, c.attention, c.cpu_attention, total}) {
      fmt::print(" {:>9.3f}ms", 1e3 * s);
    }
    fmt::print("\n");
  };
  row("prefill", p.prefill, p.prefill.total());
  row("decode", p.decode, p.decode_layer);
  fmt::print(
      "predicted: {:.4g} s per block ({:.4g} ms LM head per step), {:.4g} generated "
      "tokens/s\n",
      p.seconds, 1e3 * p.head_per_step, p.tokens_per_second);
  if (!options.output.empty()) {
    // "kind", "model_config" and the budgets let --plan check the file against the run
    // (apply_plan_file).
    nlohmann::ordered_json file = {{"kind", kPlanKind},
                                   {"model", common.model},
                                   {"model_config", plan_model_config(model)},
                                   {"device", opened.device->name()},
                                   {"profile_device", profile.device},
                                   {"prompt_len", options.prompt_len},
                                   {"gen_len", options.gen_len},
                                   {"policy", common.policy},
                                   {"kv_budget_tokens", request.kv_budget},
                                   {"block_size", plan->block},
                                   {"batch_size", plan->gpu_batch},
                                   {"num_gpu_batches", plan->num_gpu_batches},
                                   {"weights_gpu_percent", 100.0 * plan->weights_gpu},
                                   {"weights_cpu_percent", 100.0 * plan->weights_cpu},
                                   {"weights_disk_percent", 100.0 * plan->weights_disk()},
                                   {"kv_gpu_percent", 100.0 * plan->kv_gpu},
                                   {"cpu_attention", plan->cpu_attention},
                                   {"activations_cpu", plan->activations_on_host},
                                   {"gpu_budget_bytes", request.gpu_bytes},
                                   {"pinned_budget_bytes", request.pinned_bytes},
                                   {"gpu_bytes", plan->gpu_bytes},
                                   {"pinned_bytes", plan->pinned_bytes},
                                   {"disk_bytes", plan->disk_bytes},
                                   {"prefill_layer_seconds", layer_json(p.prefill)},
                                   {"decode_layer_seconds", layer_json(p.decode)},
                                   {"prefill_layer_total_seconds", p.prefill.total()},
                                   {"decode_layer_total_seconds", p.decode_layer},
                                   {"lm_head_seconds_per_step", p.head_per_step},
                                   {"predicted_seconds", p.seconds},
                                   {"predicted_tokens_per_second", p.tokens_per_second}};
    std::ofstream out(options.output);
    out << file.dump(2) << '\n';
    OFFGEN_CHECK(out.good(), "cannot write the plan to {}", options.output);
    fmt::print("plan written to {} (use it with --plan)\n", options.output);
  }
  fmt::print("run it: {}\n", run_command(options, *plan));
  return 0;
}

}  // namespace offgen::cli
