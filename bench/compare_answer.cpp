#include "bench/compare_answer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/core/units.h"

namespace offgen::bench {
namespace {

constexpr double kAccuracyPoints = 0.05;   // absolute accuracy below full's
constexpr double kPerplexityRatio = 0.05;  // relative perplexity above full's
constexpr double kCopyNats = 0.1;          // mean log-probability below full's
constexpr double kAgreement = 0.9;         // share of greedy tokens equal to full's
// A task full itself answers less often than this cannot judge a policy: the model cannot do it.
constexpr double kTaskFloor = 0.5;

bool full_can_do(const PooledTask& full_task) {
  return full_task.task == LongContextTask::copy ||
         (full_task.samples > 0 &&
          static_cast<double>(full_task.correct) / full_task.samples >= kTaskFloor);
}

// The budget, and the storage setting when it is not fp16 ("0.2 with int4-kv").
std::string budget_text(const CompareCell& cell) {
  const std::string budget = cell.policy == PolicyKind::full ? std::string("whole")
                             : cell.budget.kind() == KvBudget::Kind::fraction
                                 ? fmt::format("{:g}", cell.budget.value())
                                 : fmt::format("{:g} tokens", cell.budget.value());
  if (cell.compression == Compression{}) return budget;
  return fmt::format("{} with {}", budget, compression_setting(cell.compression));
}

std::string percent(double share) {
  return fmt::format("{:.0f}%", 100 * share);
}

bool ok(const CompareCell& cell) {
  return cell.error.empty() && cell.throughput.error.empty();
}

// What the cell buys against full: memory per sequence, batch, speed.
std::string gains(const CompareCell& cell, const CompareCell& full, std::uint64_t kv_memory) {
  const double kv_ratio = full.kv_per_sequence > 0 ? static_cast<double>(cell.kv_per_sequence) /
                                                         static_cast<double>(full.kv_per_sequence)
                                                   : 0.0;
  return fmt::format(
      "Its KV cache is {:.2f}x full's per sequence, so {} sequences fit in {} instead of {}, and "
      "it generates {:.1f} tokens/s against full's {:.1f} (medians of the throughput case).",
      kv_ratio, cell.largest_batch, format_bytes(kv_memory), full.largest_batch,
      cell.median_tokens_per_second(), full.median_tokens_per_second());
}

}  // namespace

const char* const kQualityRule =
    "each task's accuracy at most 5 points below full's, perplexity at most 5% above full's, "
    "greedy continuations at least 90% the same tokens as full's, and the copy task's mean "
    "log-probability at most 0.1 below full's";

std::vector<PooledTask> pool_tasks(const CompareCell& cell) {
  std::vector<PooledTask> pooled;
  for (const TaskScore& s : cell.tasks) {
    const bool seen = std::any_of(pooled.begin(), pooled.end(),
                                  [&](const PooledTask& p) { return p.task == s.task; });
    if (!seen) pooled.push_back(pool_scores(cell.tasks, s.task));
  }
  return pooled;
}

QualityVsFull quality_vs_full(const CompareCell& cell, const CompareCell& full) {
  QualityVsFull q;
  double worst = std::numeric_limits<double>::infinity();
  auto consider = [&](double margin, std::string phrase) {
    q.measured = true;
    if (margin < worst) {
      worst = margin;
      q.worst = std::move(phrase);
    }
  };
  if (std::isfinite(cell.perplexity) && std::isfinite(full.perplexity) && full.perplexity > 0) {
    const double ratio = cell.perplexity / full.perplexity;
    consider((1.0 + kPerplexityRatio - ratio) / kPerplexityRatio,
             fmt::format("perplexity {:+.1f}% against full's", 100 * (ratio - 1)));
  }
  if (std::isfinite(cell.agreement)) {
    consider((cell.agreement - kAgreement) / (1.0 - kAgreement),
             fmt::format("greedy agreement {:.1f}% with full", 100 * cell.agreement));
  }
  const std::vector<PooledTask> mine = pool_tasks(cell), theirs = pool_tasks(full);
  for (const PooledTask& t : mine) {
    const auto f = std::find_if(theirs.begin(), theirs.end(),
                                [&](const PooledTask& p) { return p.task == t.task; });
    if (f == theirs.end() || t.samples == 0 || !full_can_do(*f)) continue;
    if (t.task == LongContextTask::copy) {
      consider((t.mean_logprob - (f->mean_logprob - kCopyNats)) / kCopyNats,
               fmt::format("copy log-prob {:.2f} against full's {:.2f}", t.mean_logprob,
                           f->mean_logprob));
    } else {
      const double mine_acc = static_cast<double>(t.correct) / t.samples;
      const double full_acc = static_cast<double>(f->correct) / f->samples;
      consider((mine_acc - (full_acc - kAccuracyPoints)) / kAccuracyPoints,
               fmt::format("{} {} against full's {}", task_name(t.task), percent(mine_acc),
                           percent(full_acc)));
    }
  }
  q.worst_margin = q.measured ? worst : 0.0;
  q.keeps = q.measured && worst >= 0.0;
  return q;
}

std::string compare_answer(const CompareResult& result) {
  if (result.cells.empty()) return "No cell ran.";
  const CompareCell& full = result.cells.front();
  if (!ok(full)) {
    return fmt::format("full, the reference, did not run ({}), so no policy can be judged.",
                       full.error.empty() ? full.throughput.error : full.error);
  }
  // Per policy and storage setting: its cells by ascending budget.
  std::map<std::pair<PolicyKind, std::string>, std::vector<const CompareCell*>> by_policy;
  for (std::size_t i = 1; i < result.cells.size(); ++i) {
    const CompareCell& cell = result.cells[i];
    by_policy[{cell.policy, compression_setting(cell.compression)}].push_back(&cell);
  }
  if (by_policy.empty()) return "Only full ran: there is nothing to compare it with.";

  bool any_quality = false;
  const CompareCell* best = nullptr;
  const CompareCell* least_moved = nullptr;  // of the cells keeping quality: least KV per step
  std::vector<std::string> lines;
  for (auto& [key, cells] : by_policy) {
    const auto& [policy, setting] = key;
    std::sort(cells.begin(), cells.end(), [](const CompareCell* a, const CompareCell* b) {
      return a->budget_tokens < b->budget_tokens;
    });
    const CompareCell* smallest_keeping = nullptr;
    const CompareCell* closest = nullptr;
    QualityVsFull closest_q;
    for (const CompareCell* cell : cells) {
      if (!ok(*cell)) continue;
      const QualityVsFull q = quality_vs_full(*cell, full);
      any_quality = any_quality || q.measured;
      if (q.keeps && !smallest_keeping) smallest_keeping = cell;
      if (!closest || q.worst_margin > closest_q.worst_margin) {
        closest = cell;
        closest_q = q;
      }
    }
    const std::string name = setting == compression_setting(Compression{})
                                 ? std::string(policy_name(policy))
                                 : fmt::format("{} ({})", policy_name(policy), setting);
    if (smallest_keeping) {
      lines.push_back(policy == PolicyKind::full
                          ? fmt::format("{} keeps quality.", name)
                          : fmt::format("{} keeps quality down to budget {} (C = {} tokens).", name,
                                        budget_text(*smallest_keeping),
                                        smallest_keeping->budget_tokens));
      if (!best || smallest_keeping->kv_per_sequence < best->kv_per_sequence ||
          (smallest_keeping->kv_per_sequence == best->kv_per_sequence &&
           smallest_keeping->median_tokens_per_second() > best->median_tokens_per_second())) {
        best = smallest_keeping;
      }
      if (!least_moved || smallest_keeping->throughput.kv_moved_per_step <
                              least_moved->throughput.kv_moved_per_step) {
        least_moved = smallest_keeping;
      }
    } else if (closest && closest_q.measured) {
      lines.push_back(
          fmt::format("{} does not keep quality at any budget tried; at its best (budget {}) {}.",
                      name, budget_text(*closest), closest_q.worst));
    } else if (!closest) {
      lines.push_back(fmt::format("{} did not run at any budget.", name));
    }
  }
  std::vector<std::string> undoable;
  for (const PooledTask& t : pool_tasks(full)) {
    if (!full_can_do(t)) {
      undoable.push_back(fmt::format(
          "{} ({})", task_name(t.task),
          percent(t.samples > 0 ? static_cast<double>(t.correct) / static_cast<double>(t.samples)
                                : 0.0)));
    }
  }
  if (!any_quality && !undoable.empty()) {
    // Tasks ran, but full itself fails them: they measured the model, not the policies.
    return fmt::format(
        "**No policy can be judged**: quality was measured only by {}, and full itself answers "
        "{} below {}, so this model cannot do {} at these lengths and depths. Run lengths where "
        "full answers (--task-lengths, --task-depths) or give --eval texts; the table compares "
        "speed and memory only.",
        undoable.size() == 1 ? "that task" : "those tasks", fmt::join(undoable, ", "),
        percent(kTaskFloor), undoable.size() == 1 ? "it" : "them");
  }
  if (!any_quality) {
    return "No quality was measured (give --eval texts or --tasks), so the table compares speed "
           "and memory only.";
  }
  std::string text;
  if (best) {
    const QualityVsFull q = quality_vs_full(*best, full);
    // "h2o at budget 0.2", "h2o at budget 0.2 with int4-kv", "full with int4-kv".
    const std::string named =
        best->policy == PolicyKind::full
            ? fmt::format("full with {}", compression_setting(best->compression))
            : fmt::format("{} at budget {}", policy_name(best->policy), budget_text(*best));
    text = fmt::format(
        "**{}** (C = {} tokens) uses the least KV memory of the "
        "cells that keep quality ({}); its weakest measure is {}. {}",
        named, best->budget_tokens, kQualityRule, q.worst, gains(*best, full, result.kv_memory));
    if (least_moved != best) {
      text += fmt::format(
          " **{} at budget {}** moves the least KV per decode step of those cells: {} against "
          "full's {}.",
          policy_name(least_moved->policy), budget_text(*least_moved),
          format_bytes(static_cast<std::uint64_t>(least_moved->throughput.kv_moved_per_step)),
          format_bytes(static_cast<std::uint64_t>(full.throughput.kv_moved_per_step)));
    }
  } else {
    text = fmt::format("**No policy keeps quality** ({}) at the budgets tried.", kQualityRule);
  }
  for (const std::string& line : lines) text += " " + line;
  if (!undoable.empty()) {
    text += fmt::format(
        " Full itself answers {} below {}: this model cannot do {}, so {} judge no policy.",
        fmt::join(undoable, ", "), percent(kTaskFloor), undoable.size() == 1 ? "that task" : "them",
        undoable.size() == 1 ? "it does" : "they");
  }
  return text;
}

}  // namespace offgen::bench
