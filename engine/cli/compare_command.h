// `offgen compare`: KV policies x budgets on one model, into a report folder (bench/compare.h,
// bench/report.h).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "engine/cli/commands.h"

namespace offgen::cli {

struct CompareCommandOptions {
  CommonOptions common;
  std::vector<std::string> policies = {"local", "h2o", "streaming"};
  std::vector<double> budgets = {0.1, 0.2, 0.5};
  // Storage settings compared (fp16, int4-weights, int4-kv, int4), fp16 first; empty: the
  // --compress-weights / --compress-kv setting alone.
  std::vector<std::string> storages;
  int batch = 8;
  int prompt_len = 512;
  int gen_len = 32;
  std::uint64_t seed = 0;
  std::string eval;  // JSONL of texts for quality; empty = no quality columns
  int prefill_tokens = 64;
  int prompt_tokens = 64;
  int generated_tokens = 32;
  std::vector<std::string> tasks;  // long-context tasks: passkey, kv-recall, copy
  std::string task_text;           // filler text file (plain, or JSONL of {"text": ...})
  std::vector<int> task_lengths = {256, 512, 1000};
  std::vector<double> task_depths = {0.0, 0.25, 0.5, 0.75, 1.0};
  int task_samples = 8;
  int repeats = 3;
  std::string kv_mem;
  std::string output = "compare-report";
  bool overwrite = false;  // write into an --output folder that already holds something
};
void add_compare_command(CLI::App& app, CompareCommandOptions& options);
int run_compare(const CompareCommandOptions& options);

}  // namespace offgen::cli
