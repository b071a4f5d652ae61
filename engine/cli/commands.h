// The offgen subcommands. Each registers its flags on a CLI11 app and runs from the parsed
// options; main.cpp only wires them together.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/runtime/engine.h"

namespace offgen::cli {

// Validators with messages a user can read ("must be a positive integer (got '0')").
extern const CLI::Validator kPositiveInteger;
extern const CLI::Validator kNonNegativeNumber;
extern const CLI::Validator kProbability;  // (0, 1]

// Flags every command shares: which model, where it runs, how big a batch.
struct CommonOptions {
  std::string model = "opt-125m";
  std::string tokenizer;
  std::string device = "auto";
  int batch_size = 8;
  std::string gpu_mem;  // e.g. "16GiB"; empty = the device's default
  std::string cpu_mem;  // budget of pinned + host memory; empty = the machine's default
  double weights_gpu_percent = 100.0;
  double weights_cpu_percent = -1.0;  // negative: the rest of the weights
  int num_gpu_batches = 1;
  double kv_gpu_percent = 100.0;
  bool cpu_attention = false;
  std::string disk;
  std::string plan;  // plan file from `offgen plan --output`: sets batch size and weight shares
  std::uint64_t dummy_seed = 0;
  std::string policy = "full";
  std::string kv_budget;  // empty: the whole sequence
  double recent_fraction = 0.5;
  int sinks = 4;

  EngineOptions engine_options() const;
};
void add_common_options(CLI::App& app, CommonOptions& options);
// The config of --model without loading weights: a checkpoint directory's config.json, or a
// config name. Throws offgen::Error listing the known names otherwise.
OptConfig model_config(const std::string& model);
// Reads a plan file (`offgen plan --output`) into the batch size and weight shares.
void apply_plan_file(const std::string& path, EngineOptions& out);

struct GenerateOptions {
  CommonOptions common;
  std::string input;
  std::string output;
  int max_tokens = 16;
  float temperature = 1.0f;
  int top_k = 0;
  float top_p = 1.0f;
  std::uint64_t seed = 0;
};
void add_generate_command(CLI::App& app, GenerateOptions& options);
int run_generate(const GenerateOptions& options);

struct ScoreOptions {
  CommonOptions common;
  std::string input;
  std::string output;
  int prefill_tokens = 0;
};
void add_score_command(CLI::App& app, ScoreOptions& options);
int run_score(const ScoreOptions& options);

struct BenchOptions {
  CommonOptions common;
  // The embedded default: about a minute on a 2-core machine with dummy opt-125m.
  std::vector<int> batches = {1, 8, 32};
  std::vector<int> prompt_lens = {128, 512};
  std::vector<int> gen_lens = {32};
  std::uint64_t seed = 0;
  std::string kv_mem;   // e.g. "4GiB": also report the largest batch whose KV fits in it
  std::string profile;  // calibrate profile: also print the cost model's prediction
};
void add_bench_command(CLI::App& app, BenchOptions& options);
int run_bench(const BenchOptions& options);

struct PlanOptions {
  CommonOptions common;
  std::string profile = "offgen-profile.json";
  int prompt_len = 512;
  int gen_len = 32;
  std::string output;  // plan file to write (for --plan)
};
void add_plan_command(CLI::App& app, PlanOptions& options);
int run_plan(const PlanOptions& options);

struct CalibrateOptions {
  std::string device = "auto";
  std::string model = "opt-6.7b";  // GEMM and attention shapes (config name or directory)
  std::string output = "offgen-profile.json";
  std::string copy_size = "256MiB";
  std::string disk;
  int repeats = 3;
};
void add_calibrate_command(CLI::App& app, CalibrateOptions& options);
int run_calibrate(const CalibrateOptions& options);

}  // namespace offgen::cli
