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
  const Placement& p = plan.placement;
  out += fmt::format(" --batch-size {} --num-gpu-batches {}", p.gpu_batch, p.block.num_gpu_batches);
  out += fmt::format(" --weights-gpu {:g} --weights-cpu {:g}", 100.0 * p.weights.gpu,
                     100.0 * p.weights.pinned);
  out += fmt::format(" --kv-gpu {:g}", 100.0 * p.block.kv_gpu_fraction);
  if (p.block.cpu_attention) out += " --cpu-attention";
  if (p.block.activations_on_host) out += " --activations-cpu";
  if (!c.gpu_mem.empty()) out += " --gpu-mem " + c.gpu_mem;
  if (!c.cpu_mem.empty()) out += " --cpu-mem " + c.cpu_mem;
  if (p.weights_disk() > 1e-9) out += " --disk " + c.disk;
  if (c.compress_weights) out += " --compress-weights";
  if (c.int8_weights) out += " --int8-weights";
  if (c.compress_kv) out += " --compress-kv";
  if (c.prefill_math != "fp32") out += " --prefill-math " + c.prefill_math;
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
  const ModelConfig model = model_config(engine.model);
  // The budgets the run would get: what was asked for, else the device's defaults.
  OpenedDevice opened = open_device(engine.device, engine.budgets, engine.cpu_kernels,
                                    engine.gpu_slot, engine.prefill_math);
  std::filesystem::path profile_file;
  const MachineProfile profile = resolve_profile(common.profile, opened, model, &profile_file);
  const PlanRequest request =
      plan_request(engine, model, *opened.device, options.prompt_len, options.gen_len, 0);

  const std::string profile_name = profile_file.string();
  fmt::print("model: {}   device: {}   profile: {} ({})\n", common.model_name().describe(),
             opened.device->name(), profile_name, profile.device);
  fmt::print(
      "budgets: gpu {}   pinned {}   disk {}   prompt {}   gen {}   policy {} (C = {})   "
      "storage {}   prefill math {}\n",
      format_bytes(request.gpu_bytes), format_bytes(request.pinned_bytes),
      request.disk ? common.disk : std::string("none"), options.prompt_len, options.gen_len,
      common.policy, request.kv_tokens, compression_name(engine.compression), common.prefill_math);
  const auto plan = choose_plan(model, profile, request);
  if (!plan) {
    Placement smallest;  // one sequence, every layer streamed, its KV on the host
    smallest.gpu_batch = 1;
    smallest.weights = {0.0, 1.0};
    smallest.block.kv_gpu_fraction = 0.0;
    const PlanMemory least = plan_memory(model, request, smallest, 1);
    fail(
        "nothing fits: one sequence with every layer streamed and its KV in pinned memory needs "
        "{} on the gpu tier (budget {}) and {} of pinned memory (budget {}{}). Raise --gpu-mem "
        "or --cpu-mem{}",
        format_bytes(least.gpu), format_bytes(request.gpu_bytes), format_bytes(least.pinned),
        format_bytes(request.pinned_bytes), request.disk ? ", less what --disk takes" : "",
        request.disk ? "" : ", or give --disk DIR for weights");
  }
  const Prediction& p = plan->prediction;
  const Placement& placement = plan->placement;
  fmt::print("plan: block {} = GPU batch {} x {} GPU batch{}\n", plan->block, placement.gpu_batch,
             placement.block.num_gpu_batches, placement.block.num_gpu_batches == 1 ? "" : "es");
  fmt::print("  weights  gpu {:.0f}%   cpu (pinned) {:.0f}%   disk {:.0f}%\n",
             100.0 * placement.weights.gpu, 100.0 * placement.weights.pinned,
             100.0 * placement.weights_disk());
  fmt::print(
      "  KV       gpu {:.0f}% of each GPU batch's sequences, the rest pinned   cpu "
      "attention {}\n",
      100.0 * placement.block.kv_gpu_fraction, placement.block.cpu_attention ? "on" : "off");
  fmt::print("  activations on the {}\n", placement.block.activations_on_host
                                              ? "cpu (pinned; two GPU batches on the gpu tier)"
                                              : "gpu");
  fmt::print("  memory   gpu {}   pinned {}   disk {}\n", format_bytes(plan->memory.gpu),
             format_bytes(plan->memory.pinned), format_bytes(plan->memory.disk));
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
    // (read_plan_file).
    nlohmann::ordered_json file = {{"kind", kPlanKind},
                                   {"model", common.model},
                                   {"model_config", plan_model_config(model)},
                                   {"device", opened.device->name()},
                                   {"profile_device", profile.device},
                                   {"prompt_len", options.prompt_len},
                                   {"gen_len", options.gen_len},
                                   {"policy", common.policy},
                                   {"kv_budget_tokens", request.kv_tokens},
                                   {"compress_weights", common.compress_weights},
                                   {"int8_weights", common.int8_weights},
                                   {"compress_kv", common.compress_kv},
                                   {"prefill_math", common.prefill_math},
                                   {"block_size", plan->block}};
    // The placement's fields (batch_size ... activations_cpu), as --plan reads them back.
    file.update(placement_json(placement));
    file.update(nlohmann::ordered_json{{"gpu_budget_bytes", request.gpu_bytes},
                                       {"pinned_budget_bytes", request.pinned_bytes},
                                       {"gpu_bytes", plan->memory.gpu},
                                       {"pinned_bytes", plan->memory.pinned},
                                       {"disk_bytes", plan->memory.disk},
                                       {"prefill_layer_seconds", layer_json(p.prefill)},
                                       {"decode_layer_seconds", layer_json(p.decode)},
                                       {"prefill_layer_total_seconds", p.prefill.total()},
                                       {"decode_layer_total_seconds", p.decode_layer},
                                       {"lm_head_seconds_per_step", p.head_per_step},
                                       {"predicted_seconds", p.seconds},
                                       {"predicted_tokens_per_second", p.tokens_per_second}});
    std::ofstream out(options.output);
    out << file.dump(2) << '\n';
    OFFGEN_CHECK(out.good(), "cannot write the plan to {}", options.output);
    fmt::print("plan written to {} (use it with --plan)\n", options.output);
  }
  fmt::print("run it: {}\n", run_command(options, *plan));
  return 0;
}

}  // namespace offgen::cli
