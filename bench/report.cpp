#include "bench/report.h"

#include <fmt/format.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "bench/compare_answer.h"
#include "bench/rewritten_file.h"
#include "engine/core/error.h"
#include "engine/core/units.h"

extern char** environ;

namespace offgen::bench {
namespace {

// JSON has no NaN: a missing measurement is null.
nlohmann::ordered_json number(double value) {
  return std::isfinite(value) ? nlohmann::ordered_json(value) : nlohmann::ordered_json(nullptr);
}

// The policy, and the storage setting when it is not fp16 ("h2o, int4-kv").
std::string policy_label(const CompareCell& cell) {
  if (cell.compression == Compression{}) return std::string(policy_name(cell.policy));
  return fmt::format("{}, {}", policy_name(cell.policy), compression_setting(cell.compression));
}

std::string budget_label(const CompareCell& cell) {
  if (cell.policy == PolicyKind::full) return "whole";
  return cell.budget.kind() == KvBudget::Kind::fraction
             ? fmt::format("{:g}", cell.budget.value())
             : fmt::format("{:g} tokens", cell.budget.value());
}

std::string fixed(double value, int digits) {
  return std::isfinite(value) ? fmt::format("{:.{}f}", value, digits) : std::string("-");
}

// Runs argv without a shell; returns the exit status (-1 when it could not start).
int run_program(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<std::string> task_names(const CompareOptions& options) {
  std::vector<std::string> names;
  for (const LongContextTask task : options.tasks) names.emplace_back(task_name(task));
  return names;
}

// "12.3 (11.9-12.8)": the median run and the spread of all runs.
std::string speed_with_spread(const CompareCell& cell) {
  const BenchRow& t = cell.throughput;
  if (!t.error.empty()) return "does not fit";
  if (cell.tokens_per_second.size() < 2) return fixed(cell.median_tokens_per_second(), 1);
  const auto [low, high] =
      std::minmax_element(cell.tokens_per_second.begin(), cell.tokens_per_second.end());
  return fmt::format("{:.1f} ({:.1f}-{:.1f})", cell.median_tokens_per_second(), *low, *high);
}

// A pooled task result for the main table: "95% (88-98)" or a copy log-prob.
std::string pooled_text(const PooledTask& t) {
  if (t.task == LongContextTask::copy) return fixed(t.mean_logprob, 3);
  const Interval ci = wilson_interval(t.correct, t.samples);
  return fmt::format("{:.0f}% ({:.0f}-{:.0f})", 100.0 * t.correct / t.samples, 100 * ci.low,
                     100 * ci.high);
}

// One table per task: a row per cell, a column per depth (pooled over lengths) and per length
// (pooled over depths).
std::string task_table(const CompareResult& result, const CompareOptions& options,
                       LongContextTask task) {
  const TaskGrid& g = options.task_grid;
  const bool copy = task == LongContextTask::copy;
  std::string md = fmt::format("\n## {}: {} by depth and by length\n\n", task_name(task),
                               copy ? "mean log-probability of the repeated span" : "accuracy");
  // A task full never gets right judges no policy: a sentence, not a table of zeros.
  if (!copy) {
    const auto full = std::find_if(result.cells.begin(), result.cells.end(), [](const auto& c) {
      return c.policy == PolicyKind::full && c.error.empty();
    });
    if (full != result.cells.end()) {
      const PooledTask t = pool_scores(full->tasks, task, [](const TaskScore&) { return true; });
      if (t.samples > 0 && t.correct == 0) {
        return md + fmt::format(
                        "full itself retrieves none of its {} samples at these lengths, so this "
                        "task judges no policy here; a model that uses more context, or shorter "
                        "lengths, would.\n",
                        t.samples);
      }
    }
  }
  md += "| policy | budget |";
  std::string rule = "|---|---|";
  for (const double d : g.depths) {
    md += fmt::format(" depth {:g} |", d);
    rule += "---|";
  }
  for (const int l : g.lengths) {
    md += fmt::format(" length {} |", l);
    rule += "---|";
  }
  md += "\n" + rule + "\n";
  for (const CompareCell& cell : result.cells) {
    if (!cell.error.empty()) continue;
    md += fmt::format("| {} | {} |", policy_label(cell), budget_label(cell));
    auto pooled = [&](const std::function<bool(const TaskScore&)>& keep) {
      const PooledTask t = pool_scores(cell.tasks, task, keep);
      if (t.samples == 0) return std::string(" - |");
      if (copy) return fmt::format(" {} |", fixed(t.mean_logprob, 3));
      return fmt::format(" {:.0f}% |", 100.0 * t.correct / t.samples);
    };
    for (const double d : g.depths) md += pooled([&](const TaskScore& t) { return t.depth == d; });
    for (const int l : g.lengths) md += pooled([&](const TaskScore& t) { return t.length == l; });
    md += "\n";
  }
  return md;
}

// With more than one storage setting: a row per policy and budget, a column per setting, each
// cell its perplexity and greedy agreement with the reference (full under the first setting).
std::string storage_table(const CompareResult& result) {
  std::vector<Compression> settings;
  for (const CompareCell& cell : result.cells) {
    if (std::find(settings.begin(), settings.end(), cell.compression) == settings.end()) {
      settings.push_back(cell.compression);
    }
  }
  if (settings.size() < 2) return {};
  std::string md =
      "\n## Quality by storage: perplexity (greedy agreement with the first setting's full)\n\n"
      "| policy | budget |";
  std::string rule = "|---|---|";
  for (const Compression& setting : settings) {
    md += fmt::format(" {} |", compression_setting(setting));
    rule += "---|";
  }
  md += "\n" + rule + "\n";
  std::vector<const CompareCell*> rows;  // one per (policy, budget), in first-seen order
  for (const CompareCell& cell : result.cells) {
    const bool seen = std::any_of(rows.begin(), rows.end(), [&](const CompareCell* row) {
      return row->policy == cell.policy && row->budget == cell.budget;
    });
    if (!seen) rows.push_back(&cell);
  }
  for (const CompareCell* row : rows) {
    md += fmt::format("| {} | {} |", policy_name(row->policy), budget_label(*row));
    for (const Compression& setting : settings) {
      const auto it = std::find_if(result.cells.begin(), result.cells.end(), [&](const auto& c) {
        return c.policy == row->policy && c.budget == row->budget && c.compression == setting;
      });
      if (it == result.cells.end() || !it->error.empty()) {
        md += " - |";
        continue;
      }
      md += fmt::format(" {} ({}) |", fixed(it->perplexity, 3),
                        std::isfinite(it->agreement) ? fmt::format("{:.1f}%", 100 * it->agreement)
                                                     : std::string("-"));
    }
    md += "\n";
  }
  return md;
}

}  // namespace

nlohmann::ordered_json compare_json(const CompareResult& result, const CompareOptions& options) {
  nlohmann::ordered_json cells = nlohmann::ordered_json::array();
  for (const CompareCell& c : result.cells) {
    nlohmann::ordered_json cell = {{"policy", policy_name(c.policy)},
                                   {"storage", compression_setting(c.compression)},
                                   {"kv_budget", c.budget.value()},
                                   {"budget_tokens", c.budget_tokens}};
    if (!c.error.empty()) {
      cell["error"] = c.error;
      cells.push_back(cell);
      continue;
    }
    const BenchRow& t = c.throughput;
    cell["throughput"] = {{"error", t.error.empty() ? nlohmann::ordered_json(nullptr)
                                                    : nlohmann::ordered_json(t.error)},
                          {"prefill_seconds", t.prefill_seconds},
                          {"decode_seconds", t.decode_seconds},
                          {"prefill_tokens_per_second", t.prefill_tokens_per_second()},
                          {"decode_tokens_per_second", t.decode_tokens_per_second()},
                          {"generated_tokens_per_second", c.median_tokens_per_second()},
                          {"kv_moved_per_step_bytes", t.kv_moved_per_step},
                          {"peak_gpu_bytes", t.peak_gpu_bytes}};
    cell["throughput"]["generated_tokens_per_second_runs"] = c.tokens_per_second;
    cell["kv_per_sequence_bytes"] = c.kv_per_sequence;
    cell["largest_batch"] = c.largest_batch;
    cell["quality"] = {{"mean_logprob", number(c.mean_logprob)},
                       {"perplexity", number(c.perplexity)},
                       {"scored_tokens", c.scored_tokens},
                       {"greedy_agreement_with_full", number(c.agreement)}};
    nlohmann::ordered_json tasks = nlohmann::ordered_json::array();
    for (const TaskScore& score : c.tasks) {
      nlohmann::ordered_json task = {{"task", task_name(score.task)},
                                     {"length", score.length},
                                     {"depth", score.depth},
                                     {"mean_distance", score.mean_distance},
                                     {"samples", score.samples}};
      if (score.task == LongContextTask::copy) {
        task["mean_logprob"] = number(score.mean_logprob);
        task["scored_tokens"] = score.scored_tokens;
      } else {
        const Interval ci = wilson_interval(score.correct, score.samples);
        task["correct"] = score.correct;
        task["accuracy"] = score.accuracy();
        task["accuracy_95"] = {ci.low, ci.high};
      }
      tasks.push_back(task);
    }
    cell["tasks"] = tasks;
    cells.push_back(cell);
  }
  return {{"model", result.model},
          {"device", result.device},
          {"throughput_case",
           {{"batch", options.throughput.batch},
            {"prompt_len", options.throughput.prompt_len},
            {"gen_len", options.throughput.gen_len}}},
          {"kv_memory_bytes", result.kv_memory},
          {"complete", result.complete()},
          {"cells_planned", result.cells_planned},
          {"answer", compare_answer(result)},
          {"throughput_repeats", options.repeats},
          {"tasks",
           {{"names", task_names(options)},
            {"lengths", options.task_grid.lengths},
            {"depths", options.task_grid.depths},
            {"samples", options.task_grid.samples},
            {"seed", options.task_grid.seed}}},
          {"quality",
           {{"texts", options.eval.size()},
            {"prefill_tokens", options.prefill_tokens},
            {"prompt_tokens", options.prompt_tokens},
            {"generated_tokens", options.generated_tokens}}},
          {"cells", cells}};
}

std::string compare_markdown(const CompareResult& result, const CompareOptions& options) {
  const BenchCase& c = options.throughput;
  std::string md = fmt::format("# KV policy comparison: {}\n\n", result.model);
  md += compare_answer(result) + "\n\n";
  md += fmt::format(
      "Device: {}. Throughput case: batch {}, prompt {}, gen {} (synthetic prompts, EOS "
      "ignored), run {} times per cell: the median generated tokens/s, the spread of the runs in "
      "brackets. Largest batch: sequences whose KV cache fits in {}.\n",
      result.device, c.batch, c.prompt_len, c.gen_len, std::max(1, options.repeats),
      format_bytes(result.kv_memory));
  if (!options.eval.empty()) {
    md += fmt::format(
        "Quality: {} evaluation texts; log-probability of the tokens after the first {} (those "
        "predicted through the policy's cache; the first {} run as one prefill); greedy "
        "agreement: share of {} greedy tokens after a {}-token prompt equal to full's.\n",
        options.eval.size(), options.prefill_tokens + 1, options.prefill_tokens,
        options.generated_tokens, options.prompt_tokens);
  }
  if (!options.tasks.empty()) {
    const TaskGrid& g = options.task_grid;
    md += fmt::format(
        "Tasks: {} samples per length ({}) and depth ({}), seed {}; accuracy with its 95% "
        "(Wilson) interval in brackets, so two cells differ where their intervals part. The "
        "budget is a share of each sample's own prompt and answer.\n",
        g.samples, fmt::join(g.lengths, ", "), fmt::join(g.depths, ", "), g.seed);
  }
  md +=
      "C is the tokens a decode step attends per head: an evicting policy caches C, a selection "
      "policy (quest) caches every token and reads only C of them a step (KV moved/step).\n";
  if (!result.complete()) {
    md += fmt::format("\n**Incomplete**: {} of {} cells finished (the run was stopped).\n",
                      result.cells.size(), result.cells_planned);
  }
  md +=
      "\n| policy | budget | C | total tok/s | decode tok/s | KV/seq | largest batch | KV "
      "moved/step | mean logprob | perplexity | agreement |";
  std::string rule = "|---|---|---|---|---|---|---|---|---|---|---|";
  for (const LongContextTask task : options.tasks) {
    md += fmt::format(" {} |", task_name(task));
    rule += "---|";
  }
  md += "\n" + rule + "\n";
  for (const CompareCell& cell : result.cells) {
    if (!cell.error.empty()) {
      md += fmt::format("| {} | {} | {} | error: {} | | | | | | | |", policy_label(cell),
                        budget_label(cell), cell.budget_tokens, cell.error);
      for (std::size_t i = 0; i < options.tasks.size(); ++i) md += " |";
      md += "\n";
      continue;
    }
    const BenchRow& t = cell.throughput;
    const std::string decode = t.error.empty() ? fixed(t.decode_tokens_per_second(), 1) : "-";
    md +=
        fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |", policy_label(cell),
                    budget_label(cell), cell.budget_tokens, speed_with_spread(cell), decode,
                    format_bytes(cell.kv_per_sequence), cell.largest_batch,
                    format_bytes(static_cast<std::uint64_t>(t.kv_moved_per_step)),
                    fixed(cell.mean_logprob, 4), fixed(cell.perplexity, 3),
                    std::isfinite(cell.agreement) ? fmt::format("{:.1f}%", 100 * cell.agreement)
                                                  : std::string("-"));
    const std::vector<PooledTask> pooled = pool_tasks(cell);
    for (const LongContextTask task : options.tasks) {
      const auto it = std::find_if(pooled.begin(), pooled.end(),
                                   [&](const PooledTask& p) { return p.task == task; });
      md += it == pooled.end() ? std::string(" - |") : fmt::format(" {} |", pooled_text(*it));
    }
    md += "\n";
  }
  md += storage_table(result);
  for (const LongContextTask task : options.tasks) md += task_table(result, options, task);
  return md;
}

ReportFiles write_compare_tables(const CompareResult& result, const CompareOptions& options,
                                 const std::filesystem::path& folder) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  OFFGEN_CHECK(!ec, "cannot create the report folder {}: {}", folder.string(), ec.message());
  ReportFiles files;
  files.results_json = folder / "results.json";
  files.markdown = folder / "report.md";
  files.html = folder / "report.html";
  write_file_atomically(files.results_json, compare_json(result, options).dump(2) + "\n");
  write_file_atomically(files.markdown, compare_markdown(result, options));
  return files;
}

ReportFiles write_compare_report(const CompareResult& result, const CompareOptions& options,
                                 const std::filesystem::path& folder,
                                 const std::filesystem::path& plot_script) {
  ReportFiles files = write_compare_tables(result, options, folder);
  const std::string markdown = compare_markdown(result, options);
  if (plot_script.empty() || !std::filesystem::exists(plot_script)) {
    files.charts_note = "the plotting script (tools/plot_report.py) was not found";
  } else {
    // python3 on the PATH first; Debian's python3-matplotlib belongs to /usr/bin/python3, which
    // a virtual environment or pyenv may shadow.
    int status = -1;
    for (const char* python : {"python3", "/usr/bin/python3"}) {
      // Quiet: a python3 without matplotlib is not worth a message when the next one draws; the
      // warning below says it once when none could.
      status = run_program({"env", "OFFGEN_PLOT_QUIET=1", python, plot_script.string(),
                            files.results_json.string(), files.html.string()});
      if (status == 0 || status == 2) break;  // drawn, or the script itself refused the input
    }
    if (status == 0) {
      files.charts = true;
    } else {
      files.charts_note = status == 3
                              ? "python3-matplotlib is not installed"
                              : fmt::format("the plotting script failed (status {})", status);
    }
  }
  if (!files.charts) {
    spdlog::warn("report.html without charts: {}", files.charts_note);
    write_file_atomically(
        files.html,
        fmt::format("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>offgen "
                    "compare</title></head><body><p><em>No charts: {}.</em></p><pre>{}</pre>"
                    "</body></html>\n",
                    html_escape(files.charts_note), html_escape(markdown)));
  }
  return files;
}

}  // namespace offgen::bench
