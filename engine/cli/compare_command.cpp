#include "engine/cli/compare_command.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "bench/compare.h"
#include "bench/long_context_tasks.h"
#include "bench/report.h"
#include "engine/cli/batch_job.h"
#include "engine/cli/flag_names.h"
#include "engine/cli/jsonl.h"
#include "engine/cli/request_fields.h"
#include "engine/cli/signals.h"
#include "engine/core/error.h"
#include "engine/core/units.h"
#include "engine/tokenizer/tokenizer.h"
#include "policies/kv_policy.h"

namespace offgen::cli {
namespace {

namespace fs = std::filesystem;

// The plotting script ships beside the binary: <prefix>/bin/offgen and
// <prefix>/share/offgen/plot_report.py (the build tree has the same layout).
fs::path plot_script() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return exe.parent_path().parent_path() / "share" / "offgen" / "plot_report.py";
}

// --tokenizer, else the model directory's own; empty when there is neither.
fs::path tokenizer_folder(const CompareCommandOptions& options, const std::string& model) {
  fs::path dir = options.common.tokenizer;
  if (dir.empty() && !model.empty() && Tokenizer::found_in(model)) {
    dir = model;
  }
  return dir;
}

// Evaluation texts: {"text": ...} (needs a tokenizer) or {"token_ids": [...]} per line. A curated
// file, so a bad line stops the run before anything is measured. `model` is the resolved --model.
std::vector<ScoreRequest> read_eval(const CompareCommandOptions& options,
                                    const std::string& model) {
  const ModelConfig config = model_config(model);
  std::unique_ptr<Tokenizer> tokenizer;
  const fs::path tokenizer_dir = tokenizer_folder(options, model);
  std::vector<ScoreRequest> texts;
  for (const JsonlLine& line : read_jsonl(options.eval)) {
    OFFGEN_CHECK(line.error.empty(), "--eval {}: {}", options.eval, line.error);
    ScoreRequest request;
    std::string problem;
    if (line.value.contains("token_ids")) {
      problem = read_token_ids(line.value, "token_ids", config, request.tokens);
    } else if (line.value.contains("text") && line.value["text"].is_string()) {
      if (!tokenizer) {
        OFFGEN_CHECK(!tokenizer_dir.empty(),
                     "--eval {} line {}: a text needs a tokenizer (--tokenizer DIR, or a model "
                     "directory with vocab.json or tokenizer.json)",
                     options.eval, line.line_number);
        tokenizer = Tokenizer::load(tokenizer_dir);
      }
      request.tokens = prompt_prefix(config, *tokenizer);
      const auto ids = tokenizer->encode(line.value["text"].get_ref<const std::string&>());
      request.tokens.insert(request.tokens.end(), ids.begin(), ids.end());
    } else {
      problem = "the line has neither a 'text' string nor 'token_ids'";
    }
    OFFGEN_CHECK(problem.empty(), "--eval {} line {}: {}", options.eval, line.line_number, problem);
    if (const std::size_t before = truncate_tokens(request.tokens, config.max_positions())) {
      spdlog::info("--eval line {}: {} tokens, cut to the model's {} positions", line.line_number,
                   before, config.max_positions());
    }
    OFFGEN_CHECK(static_cast<int>(request.tokens.size()) > options.prefill_tokens + 1,
                 "--eval {} line {}: {} tokens leave nothing after --prefill-tokens {}",
                 options.eval, line.line_number, request.tokens.size(), options.prefill_tokens);
    texts.push_back(std::move(request));
  }
  OFFGEN_CHECK(!texts.empty(), "--eval {} has no texts", options.eval);
  return texts;
}

// The text the task samples take their filler from: --task-text (plain text, or JSONL whose
// "text" fields are joined), else the --eval texts.
std::string read_task_text(const CompareCommandOptions& options) {
  const std::string path = options.task_text.empty() ? options.eval : options.task_text;
  OFFGEN_CHECK(!path.empty(),
               "--tasks needs a text to build its samples from: --task-text FILE (any text), or "
               "--eval texts");
  if (path.size() > 6 && path.ends_with(".jsonl")) {
    std::string text;
    for (const JsonlLine& line : read_jsonl(path)) {
      OFFGEN_CHECK(line.error.empty(), "{}: {}", path, line.error);
      OFFGEN_CHECK(line.value.contains("text") && line.value["text"].is_string(),
                   "{} line {}: the line has no 'text' string", path, line.line_number);
      text += line.value["text"].get_ref<const std::string&>() + "\n\n";
    }
    return text;
  }
  std::ifstream in(path, std::ios::binary);
  OFFGEN_CHECK(in.good(), "cannot read the task text {}", path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Every cell answers the same samples, built here once from the task text.
void build_task_samples(const CompareCommandOptions& options, const std::string& model,
                        bench::CompareOptions& compare) {
  if (options.tasks.empty()) return;
  const ModelConfig config = model_config(model);
  const fs::path tokenizer_dir = tokenizer_folder(options, model);
  OFFGEN_CHECK(!tokenizer_dir.empty(),
               "--tasks needs a tokenizer (--tokenizer DIR, or a model directory with vocab.json "
               "or tokenizer.json)");
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::load(tokenizer_dir);
  for (const std::string& name : options.tasks) compare.tasks.push_back(bench::parse_task(name));
  compare.task_grid.lengths = options.task_lengths;
  compare.task_grid.depths = options.task_depths;
  compare.task_grid.samples = options.task_samples;
  compare.task_grid.seed = options.seed;
  // The answers are at most a few tokens: 8 positions are left for them.
  for (const int length : options.task_lengths) {
    OFFGEN_CHECK(length + 8 <= config.max_positions(),
                 "--task-lengths {} leaves no room for an answer within the model's {} positions "
                 "(at most {})",
                 length, config.max_positions(), config.max_positions() - 8);
  }
  // Each sample opens with one document-start token: what the tokenizer's template puts first
  // (LLaMA's BOS), else the model's BOS (OPT's </s>; Qwen2's <|endoftext|>, its document
  // separator, since its template adds nothing).
  const std::vector<std::int32_t> prefix = prompt_prefix(config, *tokenizer);
  OFFGEN_CHECK(prefix.size() <= 1,
               "--tasks: the tokenizer's template starts a prompt with {} tokens; the tasks' "
               "samples start with one",
               prefix.size());
  const std::int32_t task_bos = prefix.empty() ? config.bos_token_id : prefix.front();
  const std::vector<std::int32_t> filler = bench::filler_tokens(
      *tokenizer, read_task_text(options), bench::filler_needed(compare.task_grid));
  for (const bench::LongContextTask task : compare.tasks) {
    auto samples = bench::make_task_samples(task, compare.task_grid, filler, *tokenizer, task_bos);
    compare.task_samples.insert(compare.task_samples.end(),
                                std::make_move_iterator(samples.begin()),
                                std::make_move_iterator(samples.end()));
  }
}

// An --output folder that holds anything is refused unless --overwrite, before any work: a
// second run must not replace a report that took hours. A file of that name is refused always.
// The folder must also be one this process can create or write into: a grid that runs for hours
// and then cannot keep its first cell has lost them all. Nothing is created here, so a run that
// fails before its first cell leaves no empty folder behind.
void check_report_folder(const fs::path& folder, bool overwrite) {
  std::error_code ec;
  if (!fs::exists(folder, ec)) {
    // The nearest folder that exists is where the report's folders would be made.
    fs::path existing = fs::absolute(folder, ec).parent_path();
    while (!existing.empty() && !fs::exists(existing, ec) && existing != existing.root_path()) {
      existing = existing.parent_path();
    }
    OFFGEN_CHECK(fs::is_directory(existing, ec),
                 "--output {}: cannot create the report folder: {} is not a folder",
                 folder.string(), existing.string());
    OFFGEN_CHECK(::access(existing.c_str(), W_OK | X_OK) == 0,
                 "--output {}: cannot create the report folder: {} is not writable",
                 folder.string(), existing.string());
    return;
  }
  OFFGEN_CHECK(fs::is_directory(folder, ec), "--output {} is a file, not a report folder",
               folder.string());
  OFFGEN_CHECK(::access(folder.c_str(), W_OK | X_OK) == 0,
               "--output {}: the report folder is not writable", folder.string());
  if (overwrite || fs::is_empty(folder, ec)) return;
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, ec)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  fail(
      "--output {} already holds a report ({}); add --overwrite to replace it, or give another "
      "--output",
      folder.string(), fmt::join(names, ", "));
}

}  // namespace

void add_compare_command(CLI::App& app, CompareCommandOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "KV policies x budgets on one model: throughput, memory and quality, written as a report "
      "folder (results.json, report.md, report.html)");
  add_common_options(*cmd, options.common);
  cmd->add_option("--policies", options.policies, "policies compared with full, e.g. h2o,local")
      ->delimiter(',')
      ->check(CLI::IsMember(policy_names()))
      ->capture_default_str();
  cmd->add_option("--budgets", options.budgets,
                  "KV budgets: fractions < 1 of prompt + generation, or token counts >= 1")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--storages", options.storages,
                  "storage settings compared, each over the whole grid: fp16, int4-weights, "
                  "int4-kv, int4 (both), int8-weights, int8-weights+int4-kv (the cpu device); "
                  "fp16 is added first, and its full is the reference of every agreement "
                  "(default: the --compress-weights / --int8-weights / --compress-kv setting "
                  "alone)")
      ->check(CLI::IsMember(
          {"fp16", "int4-weights", "int4-kv", "int4", "int8-weights", "int8-weights+int4-kv"}))
      ->delimiter(',');
  cmd->add_option("--batch", options.batch, "batch of the throughput case")
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--prompt-len", options.prompt_len, "prompt tokens of the throughput case")
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--gen-len", options.gen_len, "generated tokens of the throughput case")
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--seed", options.seed, "seed of the synthetic prompts")->capture_default_str();
  cmd->add_option("--eval", options.eval,
                  "JSONL of evaluation texts ({\"text\": ...} or {\"token_ids\": [...]}) for the "
                  "quality columns");
  cmd->add_option("--prefill-tokens", options.prefill_tokens,
                  "quality: tokens of each text run as one prefill; the rest are scored through "
                  "the policy's cache")
      ->check(kNonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--prompt-tokens", options.prompt_tokens,
                  "quality: prompt length of the greedy continuations compared with full")
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--generated-tokens", options.generated_tokens,
                  "quality: greedy tokens generated per text")
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--tasks", options.tasks,
                  "long-context tasks run on every cell: passkey, kv-recall, copy (e.g. "
                  "passkey,copy)")
      ->delimiter(',')
      ->check(CLI::IsMember({"passkey", "kv-recall", "copy"}));
  cmd->add_option("--task-text", options.task_text,
                  "text the task samples take their filler from: any text file, or JSONL of "
                  "{\"text\": ...} (default: the --eval texts)");
  cmd->add_option("--task-lengths", options.task_lengths,
                  "tasks: prompt lengths in tokens, BOS included")
      ->delimiter(',')
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--task-depths", options.task_depths,
                  "tasks: where the needle sits between the start (0) and the question (1)")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--task-samples", options.task_samples, "tasks: samples per length and depth")
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--repeats", options.repeats,
                  "timed runs of the throughput case per cell (the table shows the median and "
                  "the spread)")
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--kv-mem", options.kv_mem,
                  "KV memory the largest-batch column sizes against, e.g. 16GiB (default: the "
                  "gpu tier left after the weights)");
  cmd->add_option("--output", options.output,
                  "report folder; results.json and report.md are rewritten after every cell, so "
                  "an interrupted run keeps the cells that finished")
      ->capture_default_str();
  cmd->add_flag("--overwrite", options.overwrite,
                "write the report into an --output folder that already holds files (without it, "
                "such a folder is an error, so no earlier report is lost)");
}

int run_compare(const CompareCommandOptions& options) {
  if (!options.storages.empty()) {
    OFFGEN_CHECK(!options.common.compress_weights && !options.common.int8_weights &&
                     !options.common.compress_kv,
                 "--storages sets the storage of every cell: drop --compress-weights, "
                 "--int8-weights and --compress-kv (list int4-weights, int4-kv, int4, "
                 "int8-weights or int8-weights+int4-kv in --storages instead)");
    OFFGEN_CHECK(options.common.plan.empty(),
                 "--storages runs several storage settings, and --plan {} holds for the one it was "
                 "planned with: drop --plan, or --storages",
                 options.common.plan);
  }
  check_report_folder(options.output, options.overwrite);
  bench::CompareOptions compare;
  compare.base = options.common.engine_options();
  for (const std::string& policy : options.policies) {
    compare.policies.push_back(parse_policy(policy));
  }
  for (const double budget : options.budgets) {
    try {
      compare.budgets.push_back(KvBudget::of(budget));
    } catch (const ParameterError<Error>& e) {
      // compare's flag for the budgets is --budgets.
      throw Error(e.message([](Parameter parameter) {
        return parameter == Parameter::kv_budget ? std::string("--budgets") : flag_name(parameter);
      }));
    }
  }
  compare.throughput = {options.batch, options.prompt_len, options.gen_len};
  compare.seed = options.seed;
  compare.repeats = options.repeats;
  compare.prefill_tokens = options.prefill_tokens;
  compare.prompt_tokens = options.prompt_tokens;
  compare.generated_tokens = options.generated_tokens;
  if (!options.kv_mem.empty()) compare.kv_memory = parse_bytes(options.kv_mem);
  if (!options.eval.empty()) compare.eval = read_eval(options, compare.base.model);
  build_task_samples(options, compare.base.model, compare);

  if (!options.storages.empty()) {
    compare.storages.push_back(Compression{});
    for (const std::string& name : options.storages) {
      const Compression setting = parse_compression_setting(name).value();
      if (std::find(compare.storages.begin(), compare.storages.end(), setting) ==
          compare.storages.end()) {
        compare.storages.push_back(setting);
      }
    }
    // fp16 weights first (the reference among them), then the packed ones: one model load per
    // weight storage, one at a time.
    std::stable_sort(
        compare.storages.begin(), compare.storages.end(),
        [](const Compression& a, const Compression& b) { return a.weights < b.weights; });
  }

  // The grid runs on one load of the model per weight storage (KV storage switches per cell);
  // the first load is here, so a model that cannot load fails before any cell.
  EngineOptions first = compare.base;
  if (!compare.storages.empty()) first.compression = compare.storages.front();
  auto engine = std::make_unique<Engine>(first);
  engine->set_interrupt_check(&StopSignals::requested);
  const bench::EngineFor engine_for = [&](const Compression& setting) -> Engine& {
    if (setting.weights != engine->compression().weights) {
      EngineOptions options_for = compare.base;
      options_for.compression = setting;
      engine.reset();  // the old model leaves the device before the new one loads
      engine = std::make_unique<Engine>(options_for);
      engine->set_interrupt_check(&StopSignals::requested);
    }
    return *engine;
  };
  bench::CompareResult result;
  // Cells whose tables are on disk: what an interrupted or failed run may say it kept.
  std::size_t cells_written = 0;
  const int stopped = run_guarded(
      [&] {
        bench::run_compare(
            compare, engine_for, result,
            [&](std::size_t done, std::size_t total, const bench::CompareCell& cell) {
              spdlog::info("compare: {}/{} done ({} at budget {:g}, {}{})", done, total,
                           policy_name(cell.policy), cell.budget.value(),
                           compression_setting(cell.compression),
                           cell.error.empty() ? "" : ": " + cell.error);
              bench::write_compare_tables(result, compare, options.output);
              cells_written = result.cells.size();
            });
      },
      [&] {
        if (cells_written == 0) {
          return fmt::format("no cell was finished and written to {}", options.output);
        }
        return fmt::format(
            "{} of {} cells are kept in {}, marked incomplete (add --overwrite to run the grid "
            "again into that folder)",
            cells_written, result.cells_planned, options.output);
      });
  const bench::ReportFiles files =
      bench::write_compare_report(result, compare, options.output, plot_script());
  fmt::print("{}", bench::compare_markdown(result, compare));
  fmt::print("\nreport: {}, {}, {}{}\n", files.results_json.string(), files.markdown.string(),
             files.html.string(),
             files.charts ? "" : fmt::format(" (no charts: {})", files.charts_note));
  return stopped >= 0 ? stopped : 0;
}

}  // namespace offgen::cli
