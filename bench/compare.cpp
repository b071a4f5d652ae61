#include "bench/compare.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/core/error.h"
#include "engine/core/parameter_error.h"
#include "policies/kv_budget.h"

namespace offgen::bench {
namespace {

struct Quality {
  double mean_logprob = std::numeric_limits<double>::quiet_NaN();
  std::uint64_t scored = 0;
};

Quality score_continuations(Engine& engine, const CompareOptions& options) {
  Quality q;
  if (options.eval.empty()) return q;
  const auto results = engine.score(options.eval, options.prefill_tokens);
  double sum = 0.0;
  for (const ScoreResult& r : results) {
    OFFGEN_CHECK(r.error.empty(), "an evaluation text was rejected: {}", r.error);
    // Tokens up to prefill_tokens are predicted inside the prefill, with the whole prompt in
    // view; only the later ones go through the policy's cache.
    for (std::size_t i = static_cast<std::size_t>(options.prefill_tokens) + 1;
         i < r.token_logprobs.size(); ++i) {
      sum += r.token_logprobs[i];
      ++q.scored;
    }
  }
  if (q.scored > 0) q.mean_logprob = sum / static_cast<double>(q.scored);
  return q;
}

std::vector<GenerationRequest> continuation_requests(const CompareOptions& options) {
  std::vector<GenerationRequest> requests;
  for (const ScoreRequest& text : options.eval) {
    GenerationRequest r;
    const std::size_t n =
        std::min(text.tokens.size(), static_cast<std::size_t>(options.prompt_tokens));
    r.prompt.assign(text.tokens.begin(), text.tokens.begin() + static_cast<std::ptrdiff_t>(n));
    r.max_tokens = options.generated_tokens;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    requests.push_back(std::move(r));
  }
  return requests;
}

double agreement(const std::vector<GenerationResult>& got,
                 const std::vector<GenerationResult>& reference) {
  std::uint64_t same = 0, total = 0;
  for (std::size_t i = 0; i < reference.size() && i < got.size(); ++i) {
    const auto& want = reference[i].tokens;
    for (std::size_t t = 0; t < want.size(); ++t) {
      ++total;
      if (t < got[i].tokens.size() && got[i].tokens[t] == want[t]) ++same;
    }
  }
  return total > 0 ? static_cast<double>(same) / static_cast<double>(total)
                   : std::numeric_limits<double>::quiet_NaN();
}

// Runs the throughput case `repeats` times: the first run warms caches and allocations up like
// any other, so the median of the runs is what the table shows and their spread says how far one
// run can be trusted.
void measure_throughput(Engine& engine, const CompareOptions& options, CompareCell& cell) {
  std::vector<BenchRow> runs;
  for (int r = 0; r < std::max(1, options.repeats); ++r) {
    runs.push_back(run_case(engine, options.throughput, options.seed));
    if (!runs.back().error.empty()) break;  // does not fit: the same every time
    cell.tokens_per_second.push_back(runs.back().generated_tokens_per_second());
  }
  std::vector<std::size_t> order(runs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return runs[a].generated_tokens_per_second() < runs[b].generated_tokens_per_second();
  });
  cell.throughput = runs[order[(order.size() - 1) / 2]];
}

}  // namespace

double CompareCell::median_tokens_per_second() const {
  if (tokens_per_second.empty()) return throughput.generated_tokens_per_second();
  std::vector<double> sorted = tokens_per_second;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
}

void run_compare(
    const CompareOptions& options, const EngineFor& engine_for, CompareResult& result,
    const std::function<void(std::size_t, std::size_t, const CompareCell&)>& progress) {
  struct Spec {
    Compression compression{};
    PolicyKind policy;
    KvBudget budget;
  };
  const std::vector<Compression> storages = options.storages.empty()
                                                ? std::vector<Compression>{options.base.compression}
                                                : options.storages;
  std::vector<Spec> grid;
  for (const Compression& storage : storages) {
    grid.push_back({storage, PolicyKind::full, KvBudget{}});
    for (PolicyKind policy : options.policies) {
      if (policy == PolicyKind::full) continue;
      for (const KvBudget& budget : options.budgets) grid.push_back({storage, policy, budget});
    }
  }
  OFFGEN_CHECK_NAMING(grid.size() > storages.size() || options.policies.empty() ||
                          std::all_of(options.policies.begin(), options.policies.end(),
                                      [](PolicyKind p) { return p == PolicyKind::full; }),
                      [](ParameterNamer name) {
                        return fmt::format("compare: policies other than full need at least one {}",
                                           name(Parameter::kv_budget));
                      });

  // Every cell's largest batch is sized against the same KV memory: --kv-mem, else what the
  // reference's gpu tier has left after its weights.
  std::uint64_t kv_memory = options.kv_memory;
  {
    Engine& first = engine_for(storages.front());
    result.model = first.model_description();
    result.device = first.device().name();
    if (kv_memory == 0) {
      const TierUsage gpu = first.device().usage(Tier::gpu);
      kv_memory = gpu.budget > gpu.used ? gpu.budget - gpu.used : 0;
    }
    result.kv_memory = kv_memory;
  }
  result.cells_planned = grid.size();
  std::vector<GenerationResult> reference;
  const std::vector<GenerationRequest> continuations = continuation_requests(options);
  const BenchCase& c = options.throughput;
  for (std::size_t i = 0; i < grid.size(); ++i) {
    CompareCell cell;
    cell.compression = grid[i].compression;
    cell.policy = grid[i].policy;
    cell.budget = grid[i].budget;
    try {
      Engine& engine = engine_for(cell.compression);
      engine.set_kv_storage(cell.compression.kv);
      PolicyOptions policy = options.base.policy;
      policy.kind = cell.policy;
      engine.set_policy(policy, cell.budget);
      const int total_len = c.prompt_len + c.gen_len;
      cell.budget_tokens = engine.kv_attended(c.prompt_len, c.gen_len - 1, total_len);
      cell.kv_per_sequence =
          engine.kv_footprint(c.prompt_len, c.gen_len - 1, total_len).per_sequence();
      cell.largest_batch =
          engine.kv_footprint(c.prompt_len, c.gen_len - 1, total_len).largest_batch(kv_memory);
      measure_throughput(engine, options, cell);
      const Quality q = score_continuations(engine, options);
      cell.mean_logprob = q.mean_logprob;
      cell.perplexity = std::exp(-q.mean_logprob);
      cell.scored_tokens = q.scored;
      if (!continuations.empty()) {
        const auto generated = engine.generate(continuations);
        if (i == 0) reference = generated;  // full under the first storage setting
        cell.agreement = agreement(generated, reference);
      } else {
        cell.agreement = std::numeric_limits<double>::quiet_NaN();
      }
      cell.tasks = run_task_samples(engine, options.task_samples);
    } catch (const Interrupted&) {
      throw;  // the run stops; the cell in flight is dropped
    } catch (const Error& e) {
      cell.error = e.what();
      spdlog::warn("compare: {} at budget {} ({}): {}", policy_name(cell.policy),
                   cell.budget.value(), compression_setting(cell.compression), e.what());
    }
    result.cells.push_back(cell);
    if (progress) progress(i + 1, grid.size(), result.cells.back());
  }
}

}  // namespace offgen::bench
