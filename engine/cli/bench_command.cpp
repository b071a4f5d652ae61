#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "bench/rank_rows.h"
#include "bench/rewritten_file.h"
#include "bench/table.h"
#include "bench/throughput.h"
#include "engine/cli/batch_job.h"
#include "engine/cli/commands.h"
#include "engine/cli/flag_names.h"
#include "engine/cli/ranks.h"
#include "engine/core/error.h"
#include "engine/core/units.h"
#include "policies/kv_budget.h"
#include "policies/kv_policy.h"

namespace offgen::cli {

void add_bench_command(CLI::App& app, BenchOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "throughput sweep over batch sizes and lengths (synthetic prompts, EOS ignored); without "
      "--plan or a placement flag, the planner places the run for the sweep's largest case, and "
      "with a profile every row shows the predicted throughput beside the measured");
  add_common_options(*cmd, options.common);
  plan_unless_placed(*cmd, options.common);
  // bench sweeps policies and budgets: lists in place of the common single values.
  cmd->remove_option(cmd->get_option("--policy"));
  cmd->remove_option(cmd->get_option("--kv-budget"));
  cmd->add_option("--policy", options.policies,
                  "KV eviction policies, e.g. full,h2o (default full)")
      ->delimiter(',')
      ->check(CLI::IsMember(policy_names()));
  cmd->add_option("--kv-budget", options.kv_budgets,
                  "KV budgets swept for every policy but full: fractions < 1 of prompt + "
                  "generation, or token counts >= 1, e.g. 0.1,0.2,0.5")
      ->delimiter(',');
  cmd->add_option("--json", options.json, "also write every row, with every field, to this file");
  cmd->add_option("--csv", options.csv, "also write every row as CSV to this file");
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
  cmd->add_option("--seed", options.seed, "seed of the synthetic prompts and of sampling")
      ->capture_default_str();
  add_sampling_flags(*cmd, options.temperature, options.top_k, options.top_p);
}

namespace {

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// "3 of 12 rows are kept (printed above, and in rows.json and rows.csv)".
std::string rows_kept(std::size_t done, std::size_t total, const BenchOptions& options) {
  std::vector<std::string> files;
  for (const std::string& path : {options.json, options.csv}) {
    if (!path.empty()) files.push_back(path);
  }
  return fmt::format("{} of {} rows are kept (printed above{}{})", done, total,
                     files.empty() ? "" : ", and in ", fmt::join(files, " and "));
}

}  // namespace

int run_bench(const BenchOptions& options) {
  const std::uint64_t kv_memory = options.kv_mem.empty() ? 0 : parse_bytes(options.kv_mem);
  // Every (policy, budget) pair of the sweep: full once, the others at every budget.
  std::vector<std::pair<PolicyKind, std::string>> policies;
  const std::vector<std::string> policy_names =
      options.policies.empty() ? std::vector<std::string>{"full"} : options.policies;
  for (const std::string& name : policy_names) {
    const PolicyKind kind = parse_policy(name);
    if (kind == PolicyKind::full) {
      policies.emplace_back(kind, "");
      continue;
    }
    OFFGEN_CHECK(!options.kv_budgets.empty(),
                 "--policy {} needs --kv-budget (a fraction like 0.2 or a token count)", name);
    for (const std::string& budget : options.kv_budgets) policies.emplace_back(kind, budget);
  }
  // Under mpirun / srun every rank runs each row at the same time on its own engine, and rank 0
  // reports a row per rank and their sum (bench/rank_rows.h).
  Ranks& ranks = job_ranks();
  const RankInfo me = ranks.info();
  const bool several = me.size > 1;
  const bool reports = me.rank == 0;
  // The files hold every finished row from the start (none yet), so an unwritable one fails
  // before the sweep, not after it. Rank 0 alone writes them.
  std::optional<bench::RewrittenFile> json;
  std::optional<bench::RewrittenFile> csv;
  if (reports && !options.json.empty()) json.emplace(options.json, "[]\n");
  if (reports && !options.csv.empty()) csv.emplace(options.csv, "");

  std::optional<MachineProfile> profile;
  if (!options.common.profile.empty()) profile = MachineProfile::load(options.common.profile);
  CommonOptions common = options.common;
  // A pair that cannot run (snapkv's window above its budget) is a row with its error for every
  // case, and the sweep goes on; the engine loads and plans for the first pair that can.
  common.policy = "full";
  common.kv_budget.clear();
  const PolicyOptions flag_policy = common.engine_options().policy;
  std::vector<std::string> pair_problem(policies.size());
  for (std::size_t i = 0; i < policies.size(); ++i) {
    try {
      PolicyOptions policy = flag_policy;
      policy.kind = policies[i].first;
      validate_policy_budget(
          policy, policies[i].second.empty() ? KvBudget{} : KvBudget::parse(policies[i].second));
    } catch (const Error& e) {
      pair_problem[i] = flag_message(e);
    }
  }
  const auto runnable = std::find(pair_problem.begin(), pair_problem.end(), std::string());
  if (runnable == pair_problem.end()) fail("{}", pair_problem.front());
  const std::size_t first_runnable = static_cast<std::size_t>(runnable - pair_problem.begin());
  common.policy = policy_name(policies[first_runnable].first);
  common.kv_budget = policies[first_runnable].second;
  EngineOptions engine_options = common.engine_options();
  if (common.placement_source == PlacementSource::planned) {
    // The engine's weight placement is fixed when it loads: plan once, for the sweep's largest
    // case (under its first policy), with every row a block of its --batch split the plan's way.
    RunLengths lengths;
    lengths.block = *std::max_element(options.batches.begin(), options.batches.end());
    lengths.prompt_len = *std::max_element(options.prompt_lens.begin(), options.prompt_lens.end());
    lengths.gen_len = *std::max_element(options.gen_lens.begin(), options.gen_lens.end());
    MachineProfile used;
    if (plan_automatically(common, lengths, engine_options, &used)) profile = used;
  }
  Engine engine(engine_options);
  if (reports) {
    fmt::print("model: {}   device: {}   weights: {} ({} on the gpu tier)   storage: {}\n",
               engine.model_description(), engine.device().name(),
               format_bytes(engine.weight_bytes()), format_bytes(engine.weight_gpu_bytes()),
               compression_name(engine.compression()));
    if (several) {
      fmt::print(
          "ranks: {}, one engine each, every row run by all at once; the sum row is the job's "
          "(every rank's batch, the slowest rank's seconds)\n",
          me.size);
    }
  }
  // One small untimed case first, so first-touch page faults and thread-pool start-up are not
  // charged to the first row.
  bench::run_case(engine, {1, 8, 2}, options.seed);
  const SamplingParams sampling{options.temperature, options.top_k, options.top_p};
  validate(sampling);
  if (reports && !is_greedy(sampling)) {
    fmt::print("sampling: temperature {}, top_k {}, top_p {} (on the device)\n",
               sampling.temperature, sampling.top_k, sampling.top_p);
  }
  const std::vector<bench::BenchCase> cases =
      bench::sweep(options.batches, options.prompt_lens, options.gen_lens, sampling);
  const std::size_t total = policies.size() * cases.size();
  // Each row is printed and written as it finishes, so its columns are chosen now, from what
  // every row will have: a prediction with a profile, host KV with a KV share off the gpu tier,
  // the copy overlap with streamed weights where the device measures it.
  bench::TableColumns columns;
  columns.kv_offloaded = engine.placement().block.kv_gpu_fraction < 1.0;
  columns.predicted = profile.has_value();
  columns.overlap =
      engine.weight_offloaded_bytes() > 0 && engine.device().busy_seconds(StreamRole::compute) >= 0;
  columns.kv_memory = kv_memory;
  columns.ranks = several;
  if (reports) fmt::print("{}", bench::format_header(columns));
  std::fflush(stdout);
  const bench::RunInfo run_info{engine.model_description(), engine.device().name(), OFFGEN_VERSION,
                                utc_now_iso8601()};
  std::vector<bench::BenchRow> rows;
  const int stopped = run_guarded(
      engine,
      [&] {
        for (std::size_t p = 0; p < policies.size(); ++p) {
          const auto& [kind, budget] = policies[p];
          std::string problem = pair_problem[p];
          if (problem.empty()) {
            PolicyOptions policy = engine_options.policy;
            policy.kind = kind;
            try {
              engine.set_policy(policy, budget.empty() ? KvBudget{} : KvBudget::parse(budget));
            } catch (const Error& e) {
              problem = flag_message(e);
            }
          }
          for (const bench::BenchCase& c : cases) {
            if (several && !ranks.barrier()) throw Interrupted("stopped");  // rows start together
            bench::BenchRow row;
            if (problem.empty()) {
              row = bench::run_case(engine, c, options.seed, profile ? &*profile : nullptr);
            } else {
              row.config = c;
              row.policy = policy_name(kind);
              row.compression = engine.compression();
              row.prefill_math = engine.prefill_math();
              row.error = problem;
            }
            row.kv_budget = budget;
            const std::size_t first = rows.size();
            if (several) {
              const std::vector<std::string> measured =
                  ranks.gather(bench::row_measurement(row).dump());
              if (!reports) continue;
              std::vector<bench::BenchRow> of_ranks;
              for (std::size_t r = 0; r < measured.size(); ++r) {
                of_ranks.push_back(
                    bench::with_measurement(row, nlohmann::json::parse(measured[r])));
                of_ranks.back().rank = std::to_string(r);
              }
              rows.insert(rows.end(), of_ranks.begin(), of_ranks.end());
              rows.push_back(bench::sum_of_ranks(of_ranks));
            } else {
              rows.push_back(std::move(row));
            }
            for (std::size_t i = first; i < rows.size(); ++i) {
              fmt::print("{}", bench::format_row(rows[i], columns));
            }
            std::fflush(stdout);
            if (json) json->update(bench::rows_json(rows, run_info, kv_memory).dump(2) + "\n");
            if (csv) csv->update(bench::rows_csv(rows, run_info, kv_memory));
          }
        }
      },
      [&] { return rows_kept(rows.size(), total, options); });
  // A pipe or device gets the rows once, now (a regular file already has them).
  if (json) json->finish(bench::rows_json(rows, run_info, kv_memory).dump(2) + "\n");
  if (csv) csv->finish(bench::rows_csv(rows, run_info, kv_memory));
  if (stopped >= 0) return stopped;
  const auto failed = std::count_if(rows.begin(), rows.end(),
                                    [](const bench::BenchRow& r) { return !r.error.empty(); });
  if (failed > 0 && reports) {
    spdlog::warn("{} of {} rows could not run (their errors are in the table)", failed,
                 rows.size());
  }
  return failed > 0 ? 2 : 0;
}

}  // namespace offgen::cli
