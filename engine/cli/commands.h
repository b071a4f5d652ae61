// The offgen subcommands. Each registers its flags on a CLI11 app and runs from the parsed
// options; main.cpp only wires them together.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/model_name.h"
#include "engine/runtime/engine.h"
#include "scheduler/cost_model.h"
#include "scheduler/planner.h"

namespace offgen::cli {

// Validators with messages a user can read ("must be a positive integer (got '0')").
extern const CLI::Validator kPositiveInteger;
extern const CLI::Validator kNonNegativeNumber;
extern const CLI::Validator kProbability;  // (0, 1]

// Who chooses a run's placement (batch size, GPU batches, weight and KV shares, cpu attention):
// the flags and --plan as given, or the planner (the CLI's choice when none of them was given).
enum class PlacementSource { as_given, planned };

// Flags every command shares: which model, where it runs, how big a batch.
struct CommonOptions {
  // --model (engine/model/model_name.h). generate, score and compare report text and quality, so
  // they have no default and refuse a bare config name: dummy weights only as dummy:NAME or with
  // --dummy. bench and plan measure speed and plans: their options come from measuring().
  std::string model;
  BareConfigName bare_config_name = BareConfigName::refused;
  bool dummy = false;  // --dummy: --model is a config name, for dummy weights
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
  bool activations_cpu = false;
  // --compress-weights, --compress-kv: FlexGen's 4-bit group-wise storage.
  bool compress_weights = false;
  bool compress_kv = false;
  // --int8-weights: the decoder layers' matrices in int8 per output channel, multiplied in int8
  // (the cpu device; kernels/int8_matrix.h). Excludes --compress-weights.
  bool int8_weights = false;
  std::string prefill_math = "fp32";  // fp32 or bf16 (the cpu device's prefill GEMMs)
  std::string disk;
  std::string plan;     // plan file from `offgen plan --output`: sets the whole placement
  std::string profile;  // calibrate profile for the planner; empty: the cached one (or calibrate)
  // Code that fills these options itself gets the placement it wrote; the CLI sets `planned` when
  // none of --plan and the placement flags was given (see plan_unless_placed).
  PlacementSource placement_source = PlacementSource::as_given;
  std::uint64_t dummy_seed = 0;
  std::string policy = "full";
  std::string kv_budget;  // empty: the whole sequence
  double recent_fraction = 0.5;
  int sinks = 4;
  int observation_window = 32;
  int pool_kernel = 5;
  int pyramid_beta = 20;
  int page_size = 16;
  int dense_layers = 2;
  bool speculate_pages = false;
  // Batch jobs: blocks kept near this much work, so results are written at least this often.
  double block_seconds = 30.0;
  // generate: a finished request's row takes the next request (EngineOptions).
  bool continuous_batching = true;

  // bench's and plan's: --model defaults to opt-125m, and a bare config name means dummy weights.
  static CommonOptions measuring();
  // What --model (with --dummy) names under this command's rule; throws offgen::Error saying
  // what to pass instead.
  ModelName model_name() const;
  // The placement the flags give (--batch-size, --num-gpu-batches, --kv-gpu, --cpu-attention,
  // --activations-cpu, --weights-gpu, --weights-cpu).
  Placement flag_placement() const;
  // The engine's options; their `model` is the resolved spelling (a directory or dummy:NAME), and
  // their placement is --plan's, else the flags'. Errors name flags (flag_names.h).
  EngineOptions engine_options() const;
};
// Registers the common flags; --model is required when a bare config name is refused. After
// parsing, a placement flag (--batch-size, --weights-gpu, ...) beside --plan is a usage error
// naming it (CLI::ValidationError).
void add_common_options(CLI::App& app, CommonOptions& options);
// The config of a model as EngineOptions::model names it (a directory, org/name or dummy:NAME)
// without loading weights. Throws offgen::Error naming the model otherwise.
ModelConfig model_config(const std::string& model);
// The "kind" of a plan file `offgen plan --output` writes.
inline constexpr const char* kPlanKind = "offgen plan";
// A plan file's "model_config": the sizes of `config` its memory depends on.
nlohmann::ordered_json plan_model_config(const ModelConfig& config);
// Reads the placement of a plan file (`offgen plan --output`): batch size, GPU batches, weight
// and KV shares, cpu attention, activations (placement_from_json: a field the file lacks, in
// files from older versions, keeps the default). A bad field is an offgen::Error naming the file
// and the field. Also an error: a file that is not a plan (a "kind" other than kPlanKind;
// neither "kind" nor "batch_size"), a plan made for a model of another shape than `model` (its
// "model_config"), and a plan whose memory exceeds `budgets` where they are set (--gpu-mem,
// --cpu-mem).
// A plan that records its compression ("compress_weights", "int8_weights", "compress_kv") must
// match the run's (--compress-weights, --int8-weights, --compress-kv): its memory was planned for
// those bytes.
Placement read_plan_file(const std::string& path, const std::string& model,
                         const DeviceBudgets& budgets, const Compression& compression = {});

// --resume (described by `resume_help`) and --overwrite, which exclude each other: what to do
// with an --output that already holds results (existing_output() turns them into a mode).
void add_output_mode_flags(CLI::App& cmd, bool& resume, bool& overwrite,
                           const std::string& resume_help);

// --block-seconds (generate, score): how often results are written, at most about.
void add_block_seconds_flag(CLI::App& cmd, double& block_seconds);

// --temperature, --top-k and --top-p (generate's defaults for requests that do not say; bench's
// for every sequence).
void add_sampling_flags(CLI::App& cmd, float& temperature, int& top_k, float& top_p);

// After `app` is parsed, sets options.placement_source to `planned` when none of --plan,
// --num-gpu-batches, --weights-gpu, --weights-cpu, --kv-gpu, --cpu-attention, --activations-cpu
// and `also` (flags that place sequences for this command, e.g. --batch-size) was given. Like
// add_common_options, refuses a placement flag given beside --plan (CLI::ValidationError).
void plan_unless_placed(CLI::App& app, CommonOptions& options, std::vector<std::string> also = {});

// Where `offgen calibrate` caches a device's profile measured at shapes of this hidden size:
// $XDG_CACHE_HOME/offgen/profile-<device>-h<hidden>.json, else ~/.cache/offgen/...; empty when
// neither XDG_CACHE_HOME nor HOME is set.
std::filesystem::path cached_profile_path(const std::string& device_name, int hidden_size);
// The profile the planner uses: the file at `path` when one is given; else the profile cached for
// this device at this model's shapes, else at a quick calibration's shapes for it; else a quick
// calibration on `opened` (one log line says so), cached for next time. `used`, when given, gets
// the file it came from ("(measured now, not cached)" when the cache could not be written).
MachineProfile resolve_profile(const std::string& path, OpenedDevice& opened,
                               const ModelConfig& model, std::filesystem::path* used = nullptr);
// The planner's request for runs of these lengths (prompt_len + gen_len - 1 fed-back positions,
// total_len tokens per sequence for a --kv-budget fraction) under the device's budgets and the
// engine options' policy and disk, for `model` (its layers: pyramidkv's caches are sized by its
// largest layer budget).
PlanRequest plan_request(const EngineOptions& engine, const ModelConfig& model,
                         const Device& device, int prompt_len, int gen_len, int total_len);

// What an automatically planned run looks like: the longest prompt and generation, and how many
// sequences there are (generate, score) or the block every run has (bench).
struct RunLengths {
  int prompt_len = 1;
  int gen_len = 1;
  int total_len = 0;  // 0: prompt_len + gen_len
  int sequences = 0;  // > 0: blocks need not be bigger
  int block = 0;      // > 0: plan blocks of exactly this many sequences
};
// When common.placement_source is `planned`: chooses a plan for the run (from --profile or the
// cached profile, see resolve_profile), sets engine.placement to its placement and logs it in one
// line. When nothing fits, warns and leaves `engine` as it is. `profile`, when not null, receives
// the profile used. Returns the plan chosen, if any.
std::optional<Plan> plan_automatically(const CommonOptions& common, const RunLengths& lengths,
                                       EngineOptions& engine, MachineProfile* profile = nullptr);

struct GenerateOptions {
  CommonOptions common;
  std::string input;
  std::string output;
  bool resume = false;
  bool overwrite = false;
  int max_tokens = 16;
  float temperature = 1.0f;
  int top_k = 0;
  float top_p = 1.0f;
  std::uint64_t seed = 0;
  std::string chat_template;  // a file: the template chat lines are rendered with
  bool allow_unknown_fields = false;
};
void add_generate_command(CLI::App& app, GenerateOptions& options);
int run_generate(const GenerateOptions& options);

struct ScoreOptions {
  CommonOptions common;
  std::string input;
  std::string output;
  bool resume = false;
  bool overwrite = false;
  int prefill_tokens = 0;
  int truncate = 0;     // > 0: a longer text is cut to its first `truncate` tokens (BOS included)
  bool argmax = false;  // records also say the most likely id at each position ("argmax_ids")
};
void add_score_command(CLI::App& app, ScoreOptions& options);
int run_score(const ScoreOptions& options);

struct BenchOptions {
  CommonOptions common = CommonOptions::measuring();
  // The embedded default: about 20 s on a 2-core machine with dummy opt-125m.
  std::vector<int> batches = {1, 8, 32};
  std::vector<int> prompt_lens = {128, 512};
  std::vector<int> gen_lens = {32};
  std::uint64_t seed = 0;
  std::string kv_mem;  // e.g. "4GiB": also report the largest batch whose KV fits in it
  // Swept too (each row's policy x budget; empty = the common --policy / --kv-budget).
  std::vector<std::string> policies;
  std::vector<std::string> kv_budgets;
  std::string json;  // write every row here as JSON
  std::string csv;   // ... and as CSV
  // How every sequence picks its tokens (greedy by default, as FlexGen measures).
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
};
void add_bench_command(CLI::App& app, BenchOptions& options);
int run_bench(const BenchOptions& options);

struct PlanOptions {
  CommonOptions common = CommonOptions::measuring();
  int prompt_len = 512;
  int gen_len = 32;
  std::string output;  // plan file to write (for --plan)
};
void add_plan_command(CLI::App& app, PlanOptions& options);
int run_plan(const PlanOptions& options);

struct CalibrateOptions {
  std::string device = "auto";
  std::string model = "opt-6.7b";  // GEMM and attention shapes (any --model; only the config)
  std::string
      output;  // empty: the device's cached profile at the model's shapes (cached_profile_path)
  std::string copy_size = "256MiB";
  std::string disk;
  int repeats = 3;
};
void add_calibrate_command(CLI::App& app, CalibrateOptions& options);
int run_calibrate(const CalibrateOptions& options);

}  // namespace offgen::cli
