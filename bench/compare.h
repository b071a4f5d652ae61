// `offgen compare`: one model under a grid of KV policies x budgets, measured on speed, memory and
// quality, so a user can pick a policy and budget. The model is loaded once; each cell switches
// the engine's policy (Engine::set_policy); `full` runs once, first, as the reference every other
// cell is compared with.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/long_context_tasks.h"
#include "bench/task_eval.h"
#include "bench/throughput.h"
#include "engine/runtime/engine.h"
#include "policies/kv_budget.h"

namespace offgen::bench {

struct CompareOptions {
  EngineOptions base;  // model, device, budgets, placement (policy is replaced)
  // Storage settings compared (engine/core/compression.h), each over the whole policy grid; the
  // first one's full is the reference every cell's agreement is measured against. Empty:
  // base.compression alone.
  std::vector<Compression> storages;
  std::vector<PolicyKind> policies;  // `full` is always added as the reference
  std::vector<KvBudget> budgets;     // the budgets of every policy but full
  BenchCase throughput{8, 512, 32};  // the throughput case each cell runs
  int repeats = 3;  // timed runs of the throughput case per cell (median and spread reported)
  std::uint64_t seed = 0;
  // Quality: texts scored with the first `prefill_tokens` as one prefill and the rest
  // teacher-forced through the (evicting) cache; greedy continuations of their first
  // `prompt_tokens` tokens, `generated_tokens` long, compared with full's.
  std::vector<ScoreRequest> eval;
  int prefill_tokens = 64;
  int prompt_tokens = 64;
  int generated_tokens = 32;
  // Long-context task samples (long_context_tasks.h), built once so every cell answers the same
  // prompts; the grid they came from, for the report.
  std::vector<TaskSample> task_samples;
  std::vector<LongContextTask> tasks;
  TaskGrid task_grid;
  // Memory the "largest batch" column sizes against: KV bytes available (0 = what the gpu tier
  // has left after the weights).
  std::uint64_t kv_memory = 0;
};

struct CompareCell {
  Compression compression{};  // how the cell's engine stored weights and KV
  PolicyKind policy = PolicyKind::full;
  KvBudget budget;  // the whole sequence for full
  // C at the throughput case's lengths: the tokens a step attends (quest: its pages' worth, of a
  // cache that keeps them all)
  int budget_tokens = 0;
  // The run at the median generated tokens/s (of an even number, the lower middle one): its
  // other columns (memory, bytes moved) are one run's, as measured.
  BenchRow throughput;
  std::vector<double> tokens_per_second;  // generated tokens/s of every timed run, as measured
  // The median of tokens_per_second: of an even number of runs, the mean of the middle two (the
  // throughput run's own rate when there are none).
  double median_tokens_per_second() const;
  std::uint64_t kv_per_sequence = 0;  // KV cache + policy state at the throughput lengths
  std::uint64_t largest_batch = 0;    // sequences whose KV fits in the KV memory
  // Quality over the continuation tokens (those predicted through the cache: index >
  // prefill_tokens); NaN when there are no eval texts.
  double mean_logprob = 0.0;
  double perplexity = 0.0;
  std::uint64_t scored_tokens = 0;
  // Share of greedy continuation tokens equal to full's at the same position.
  double agreement = 0.0;
  std::vector<TaskScore> tasks;  // per (task, length, depth), in the samples' order
  std::string error;             // the cell could not run (the others still did)
};

struct CompareResult {
  std::string model;
  std::string device;
  std::uint64_t kv_memory = 0;
  std::vector<CompareCell> cells;  // full first, then policy x budget in the order given
  std::size_t cells_planned = 0;   // the whole grid's
  // Every cell of the grid ran (an interrupted run keeps the cells that finished).
  bool complete() const { return cells.size() == cells_planned; }
};

// Runs the grid, each storage setting on `engine_for(setting)` (an engine loaded with
// options.base and that setting's weight storage; its policy and KV storage are switched cell by
// cell; the settings run in the order given, so group them by weight storage and one engine at a
// time is enough), appending each cell to `result` as it finishes, then calling
// `progress(done, total, cell)` (may be empty). A cell that fails carries its error and the others
// still run; Interrupted (the engine's interrupt check) ends the run, and `result` holds the cells
// that finished.
using EngineFor = std::function<Engine&(const Compression&)>;
void run_compare(
    const CompareOptions& options, const EngineFor& engine_for, CompareResult& result,
    const std::function<void(std::size_t, std::size_t, const CompareCell&)>& progress = {});

}  // namespace offgen::bench
