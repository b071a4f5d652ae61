#include "bench/throughput.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "engine/core/error.h"
#include "engine/core/units.h"
#include "engine/runtime/block_runner.h"
#include "scheduler/batch_formation.h"
#include "scheduler/planner.h"

namespace offgen::bench {

double BenchRow::prefill_tokens_per_second() const {
  return prefill_seconds > 0
             ? config.batch * static_cast<double>(config.prompt_len) / prefill_seconds
             : 0.0;
}

double BenchRow::decode_tokens_per_second() const {
  return decode_seconds > 0
             ? config.batch * static_cast<double>(config.gen_len - 1) / decode_seconds
             : 0.0;
}

double BenchRow::generated_tokens_per_second() const {
  return total_seconds() > 0 ? config.batch * static_cast<double>(config.gen_len) / total_seconds()
                             : 0.0;
}

double BenchRow::copy_overlap() const {
  if (compute_busy_seconds < 0 || weight_copy_busy_seconds <= 0) return -1.0;
  const double hidden = compute_busy_seconds + weight_copy_busy_seconds - total_seconds();
  return std::clamp(hidden / weight_copy_busy_seconds, 0.0, 1.0);
}

std::vector<BenchCase> sweep(const std::vector<int>& batches, const std::vector<int>& prompt_lens,
                             const std::vector<int>& gen_lens, const SamplingParams& sampling) {
  std::vector<BenchCase> cases;
  for (int batch : batches) {
    for (int prompt : prompt_lens) {
      for (int gen : gen_lens) cases.push_back({batch, prompt, gen, sampling});
    }
  }
  return cases;
}

BenchRow run_case(Engine& engine, const BenchCase& config, std::uint64_t seed,
                  const MachineProfile* profile) {
  using Clock = std::chrono::steady_clock;
  BenchRow row;
  row.config = config;
  row.policy = policy_name(engine.policy_kind());
  row.compression = engine.compression();
  row.prefill_math = engine.prefill_math();
  const ModelConfig& model = engine.config();
  if (config.batch >= 1) {
    row.num_gpu_batches = std::min(engine.placement().block.num_gpu_batches, config.batch);
    row.gpu_batch = gpu_batch_size(config.batch, row.num_gpu_batches);
  }
  if (config.batch < 1 || config.prompt_len < 1 || config.gen_len < 1) {
    row.error = "batch, prompt and gen lengths must be >= 1";
    return row;
  }
  // The last generated token is never fed back, so prompt + gen - 1 positions are used.
  const std::int64_t positions = std::int64_t{config.prompt_len} + config.gen_len - 1;
  if (positions > model.max_positions()) {
    row.error = fmt::format("prompt + gen - 1 = {} exceeds the model's {} positions", positions,
                            model.max_positions());
    return row;
  }
  // Synthetic prompts: BOS then uniformly drawn ordinary token ids.
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> token(4, model.vocab_size - 1);
  std::vector<std::vector<std::int32_t>> prompts(static_cast<std::size_t>(config.batch));
  for (auto& prompt : prompts) {
    prompt.push_back(model.bos_token_id);
    while (static_cast<int>(prompt.size()) < config.prompt_len) prompt.push_back(token(rng));
  }
  const PaddedBatch padded = left_pad(prompts, model.pad_token_id);
  const int total_len = config.prompt_len + config.gen_len;
  row.kv_per_sequence = engine.kv_footprint(config.prompt_len, config.gen_len - 1, total_len);
  row.full_kv_per_sequence = kv_footprint(model, static_cast<int>(positions) + 1,
                                          /*keeps_attention_scores=*/false, config.prompt_len);
  if (profile != nullptr) {
    RunShape run;
    run.batch = config.batch;
    run.prompt_len = config.prompt_len;
    run.gen_len = config.gen_len;
    run.kv_capacity = engine.kv_capacity(config.prompt_len, config.gen_len - 1, total_len);
    run.keeps_attention_scores =
        engine.keeps_attention_scores(config.prompt_len, config.gen_len - 1, total_len);
    run.weights = engine.placement().weights;
    run.block = engine.placement().block;
    run.compression = engine.compression();
    run.prefill_math = engine.prefill_math();
    run.page_size = engine.kv_page_size();
    run.pages_per_step = engine.kv_pages_per_step(config.prompt_len, config.gen_len - 1, total_len);
    run.dense_layers = engine.kv_dense_layers();
    row.predicted_tokens_per_second = predict(model, *profile, run).tokens_per_second;
  }
  engine.check_interrupt();
  engine.device().reset_peaks();
  try {
    auto runner =
        engine.make_runner(config.batch, config.prompt_len, config.gen_len - 1, total_len);
    row.kv_bytes = runner->kv_bytes() + runner->policy_state_bytes() + runner->kv_expanded_bytes();
    std::vector<std::int32_t> next(prompts.size());
    const std::vector<std::uint8_t> advancing(prompts.size(), 1);
    // Picked on the device: only the token ids come back each step, as in a real run.
    std::vector<std::mt19937_64> streams;
    for (std::size_t b = 0; b < prompts.size(); ++b) streams.emplace_back(seed + b);
    std::vector<kernels::SampleParams> sample(prompts.size());
    auto pick = [&] {
      for (std::size_t b = 0; b < sample.size(); ++b) {
        sample[b] = next_sample(config.sampling, streams[b]);
      }
      const std::span<const std::int32_t> ids = runner->next_tokens(sample);
      std::copy(ids.begin(), ids.end(), next.begin());
    };

    const std::uint64_t weights_moved_before = engine.weight_bytes_moved();
    Device& device = engine.device();
    const double compute_busy = device.busy_seconds(StreamRole::compute);
    const double copy_busy = device.busy_seconds(StreamRole::h2d_weights);
    const auto start = Clock::now();
    runner->prefill(padded);
    pick();
    const auto prefilled = Clock::now();
    const BlockRunner::KvTraffic after_prefill = runner->kv_traffic();
    for (int step = 1; step < config.gen_len; ++step) {
      engine.check_interrupt();
      runner->decode(next, advancing);
      pick();
    }
    const auto done = Clock::now();
    const BlockRunner::KvTraffic traffic = runner->kv_traffic();
    row.kv_moved_per_step = traffic.moved_per_step();
    row.slots = runner->slot_use();
    if (traffic.decode_steps > 0) {
      row.kv_pcie_per_step =
          static_cast<double>(traffic.loaded_bytes + traffic.stored_bytes -
                              after_prefill.loaded_bytes - after_prefill.stored_bytes) /
          traffic.decode_steps;
    }
    if (compute_busy >= 0 && copy_busy >= 0) {
      row.compute_busy_seconds = device.busy_seconds(StreamRole::compute) - compute_busy;
      row.weight_copy_busy_seconds = device.busy_seconds(StreamRole::h2d_weights) - copy_busy;
    }
    // Every step (the prefill and each decode) is one pass over the layers.
    row.weights_moved_per_step =
        static_cast<double>(engine.weight_bytes_moved() - weights_moved_before) / config.gen_len;
    row.prefill_seconds = std::chrono::duration<double>(prefilled - start).count();
    row.decode_seconds = std::chrono::duration<double>(done - prefilled).count();
    row.measured = true;
  } catch (const OutOfMemoryError& e) {
    // What the run would need: the planner's arithmetic for the engine's placement.
    PlanRequest request;
    request.prompt_len = config.prompt_len;
    request.gen_len = config.gen_len;
    request.kv_tokens = engine.kv_capacity(config.prompt_len, config.gen_len - 1, total_len) - 1;
    request.keeps_attention_scores =
        engine.keeps_attention_scores(config.prompt_len, config.gen_len - 1, total_len);
    request.per_layer_budgets =
        engine.budgets_differ_by_layer(config.prompt_len, config.gen_len - 1, total_len);
    request.page_size = engine.kv_page_size();
    request.multiprocessors = engine.device().multiprocessors();
    request.compression = engine.compression();
    const PlanMemory needed = plan_memory(model, request, engine.placement(), config.batch);
    row.needed_gpu_bytes = needed.gpu;
    row.needed_pinned_bytes = needed.pinned;
    row.error = fmt::format(
        "does not fit: needs {} on the gpu tier (budget {}), {} pinned ({})",
        format_bytes(needed.gpu), format_bytes(engine.device().usage(Tier::gpu).budget),
        format_bytes(needed.pinned), format_bytes(engine.device().usage(Tier::pinned).budget));
    spdlog::debug("{}", e.what());
  }
  row.peak_gpu_bytes = engine.device().usage(Tier::gpu).peak;
  row.peak_pinned_bytes = engine.device().usage(Tier::pinned).peak;
  return row;
}

}  // namespace offgen::bench
