#include "scheduler/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "scheduler/kv_cache_layout.h"
#include "scheduler/runner_layout.h"
#include "scheduler/weight_layout.h"

namespace offgen {
namespace {

int next_power_of_two(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// True when `a` predicts meaningfully faster than `b` (a hair of slack keeps ties stable).
bool faster(const Plan& a, const Plan& b) {
  return a.prediction.tokens_per_second > b.prediction.tokens_per_second * 1.0001;
}

}  // namespace

std::string Plan::describe() const {
  return fmt::format("block {} = {}, predicted {:.1f} tokens/s", block, placement.describe(),
                     prediction.tokens_per_second);
}

std::vector<int> offloaded_per_gpu_batch(int block, const BlockShape& shape) {
  return offloaded_per_gpu_batch(split_block(block, shape));
}

PlanMemory plan_memory(const ModelConfig& model, const PlanRequest& request,
                       const Placement& placement, int block) {
  const WeightLayout weights = weight_layout(model, placement.weights, request.compression.weights);
  RunnerShape runner;
  runner.block = block;
  runner.max_prompt = request.prompt_len;
  runner.kv_capacity = request.cache_slots();
  runner.keeps_attention_scores = request.keeps_attention_scores;
  runner.per_layer_budgets = request.per_layer_budgets;
  runner.page_size = request.page_size;
  // As the runner decides it: a guess applies with one GPU batch and every weight resident as
  // fp16 (block_shape.h's idle_speculation).
  const bool speculates =
      placement.block.speculative_pages &&
      idle_speculation(
          placement.block, request.page_size > 0,
          placement.weights.gpu < 1.0 || request.compression.weights == Storage::int4) == nullptr;
  const std::vector<int> offloaded = offloaded_per_gpu_batch(block, placement.block);
  const bool any_offloaded =
      std::any_of(offloaded.begin(), offloaded.end(), [](int n) { return n > 0; });
  runner.kv_staged_capacity =
      any_offloaded ? compact_staged_capacity(request.cache_slots(), request.page_size,
                                              request.pages_per_step, placement.block.cpu_attention,
                                              speculates)
                    : 0;
  runner.placement = placement.block;
  runner.multiprocessors = request.multiprocessors;
  runner.kv_storage = request.compression.kv;
  const MemoryLayout layout = runner_layout(model, runner);
  PlanMemory out;
  out.gpu = weights.held.bytes(Tier::gpu) + layout.bytes(Tier::gpu);
  // Loading's staging is freed before any runner is made.
  out.pinned = weights.held.bytes(Tier::pinned) +
               std::max(weights.loading.bytes(Tier::pinned), layout.bytes(Tier::pinned));
  out.disk = weights.disk_bytes;
  return out;
}

RunShape plan_run_shape(const PlanRequest& request, const Plan& plan) {
  RunShape run;
  run.batch = plan.block;
  run.prompt_len = request.prompt_len;
  run.gen_len = request.gen_len;
  run.kv_capacity = request.cache_slots();
  run.keeps_attention_scores = request.keeps_attention_scores;
  run.weights = plan.placement.weights;
  run.block = plan.placement.block;
  run.compression = request.compression;
  run.prefill_math = request.prefill_math;
  run.page_size = request.page_size;
  run.pages_per_step = request.pages_per_step;
  run.dense_layers = request.dense_layers;
  return run;
}

std::optional<Plan> choose_plan(const ModelConfig& model, const MachineProfile& profile,
                                const PlanRequest& request) {
  // Block shapes: (block, GPU batch, GPU batches), smaller blocks first, then fewer GPU batches:
  // the order that breaks ties.
  struct Shape {
    int block, gpu_batch, num;
  };
  std::vector<Shape> shapes;
  const int most_batches = std::max(1, request.max_gpu_batches);
  if (request.block > 0) {
    for (int num = 1; num <= std::min(most_batches, request.block); num *= 2) {
      shapes.push_back({request.block, gpu_batch_size(request.block, num), num});
    }
  } else {
    const int cap = request.max_sequences > 0 ? next_power_of_two(request.max_sequences)
                                              : request.max_gpu_batch * most_batches;
    for (int gpu_batch = 1; gpu_batch <= std::min(request.max_gpu_batch, cap); gpu_batch *= 2) {
      for (int num = 1; num <= most_batches && gpu_batch * num <= cap; num *= 2) {
        int block = gpu_batch * num;
        if (request.max_sequences > 0) block = std::min(block, request.max_sequences);
        shapes.push_back({block, gpu_batch, num});
      }
    }
  }
  std::stable_sort(shapes.begin(), shapes.end(), [](const Shape& a, const Shape& b) {
    return std::pair(a.block, a.num) < std::pair(b.block, b.num);
  });

  // Fills in the plan's memory; says whether the gpu tier and pinned memory hold it.
  struct Fit {
    bool gpu = false, pinned = false;
  };
  auto fit = [&](Plan& plan) {
    plan.memory = plan_memory(model, request, plan.placement, plan.block);
    return Fit{plan.memory.gpu <= request.gpu_bytes, plan.memory.pinned <= request.pinned_bytes};
  };
  auto fits = [&](Plan& plan) {
    const Fit f = fit(plan);
    return f.gpu && f.pinned;
  };
  auto predicted = [&](Plan plan) {
    plan.prediction = predict(model, profile, plan_run_shape(request, plan));
    return plan;
  };

  // The largest block the request allows in one GPU batch, all on the gpu tier: at that block,
  // offloading only adds transfers, so nothing beats it.
  Plan resident;
  resident.block = request.block > 0 ? request.block : std::max(1, request.max_gpu_batch);
  if (request.block == 0 && request.max_sequences > 0) {
    resident.block = std::min(resident.block, request.max_sequences);
  }
  resident.placement.gpu_batch = resident.block;
  if (fits(resident)) return predicted(resident);

  const bool disk = request.disk && profile.disk_read > 0;
  std::optional<Plan> best;
  for (const Shape& s : shapes) {
    std::vector<std::vector<int>> seen_kv;
    // KV shares in 5% steps: the cache splits by sequences, so a share is how many of each GPU
    // batch's sequences stay on the gpu tier; steps finer than a sequence are the same plan.
    for (int kv_percent = 100; kv_percent >= 0; kv_percent -= 5) {
      const double kv_gpu = kv_percent / 100.0;
      Plan base;
      base.block = s.block;
      base.placement.gpu_batch = s.gpu_batch;
      base.placement.block.num_gpu_batches = s.num;
      base.placement.block.kv_gpu_fraction = kv_gpu;
      // Shares that round to the same sequences per GPU batch are the same plan.
      const std::vector<int> offloaded = offloaded_per_gpu_batch(s.block, base.placement.block);
      if (std::find(seen_kv.begin(), seen_kv.end(), offloaded) != seen_kv.end()) continue;
      seen_kv.push_back(offloaded);
      const bool some_on_host =
          std::any_of(offloaded.begin(), offloaded.end(), [](int n) { return n > 0; });
      for (const bool cpu_attention : {false, true}) {
        if (cpu_attention && (!some_on_host || profile.cpu_attention <= 0)) continue;
        base.placement.block.cpu_attention = cpu_attention;
        for (const bool activations_on_host : {false, true}) {
          base.placement.block.activations_on_host = activations_on_host;
          // Most resident weights first: a share that needs no disk is never beaten by a smaller
          // one (those only move more), so the search stops there.
          for (int percent = 100; percent >= 0; percent -= 5) {
            Plan plan = base;
            WeightPlacement& weights = plan.placement.weights;
            weights.gpu = percent / 100.0;
            weights.pinned = 1.0 - weights.gpu;
            bool on_disk = false;
            const Fit first = fit(plan);
            if (!first.gpu) continue;
            if (!first.pinned) {
              if (!disk) continue;
              // The most pinned memory can hold, the rest on disk.
              bool found = false;
              for (int pinned = 100 - percent - 5; pinned >= 0 && !found; pinned -= 5) {
                weights.pinned = pinned / 100.0;
                found = fits(plan);
              }
              if (!found) continue;
              on_disk = true;
            }
            plan = predicted(plan);
            if (!best || faster(plan, *best)) best = plan;
            if (!on_disk) break;
          }
        }
      }
    }
  }
  return best;
}

}  // namespace offgen
