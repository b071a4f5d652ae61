#include <algorithm>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/cli/batch_format.h"
#include "engine/cli/batch_job.h"
#include "engine/cli/commands.h"
#include "engine/cli/jsonl.h"
#include "engine/cli/request_fields.h"
#include "engine/core/error.h"
#include "engine/runtime/block_runner.h"

namespace offgen::cli {
namespace {

// generate's part of a batch job: lines are completion requests (plain or OpenAI Batch API),
// answered with the generated text.
class GenerateJob final : public BatchJob {
 public:
  explicit GenerateJob(const GenerateOptions& options)
      : model_name_(std::filesystem::path(options.common.model).filename().string()) {
    defaults_.max_tokens = options.max_tokens;
    defaults_.sampling = {options.temperature, options.top_k, options.top_p};
    defaults_.seed = options.seed;
  }

  JobWords words() const override { return {"request", "requests", "answered"}; }

  void parse(const std::vector<JsonlLine>& lines, const ModelConfig& config,
             const Tokenizer* tokenizer) override {
    config_ = config;
    parsed_.reserve(lines.size());
    std::map<std::string, std::size_t> custom_ids;  // first line of each id
    for (const JsonlLine& line : lines) {
      parsed_.push_back(parse_generate_line(line, config, tokenizer, model_name_, defaults_));
      ParsedLine& p = parsed_.back();
      if (p.problem.empty() && p.format == LineFormat::openai_batch) {
        const auto [it, fresh] = custom_ids.emplace(p.custom_id, line.line_number);
        if (!fresh) {
          p.problem = fmt::format("custom_id '{}' repeats line {}", p.custom_id, it->second);
          p.request.prompt.clear();
        }
      }
    }
    // A line that is not JSON is answered in the file's format (that of its first good line).
    const auto first_good = std::find_if(lines.begin(), lines.end(),
                                         [](const JsonlLine& l) { return l.error.empty(); });
    if (first_good != lines.end()) {
      const LineFormat file_format = parsed_[first_good->index].format;
      for (const JsonlLine& line : lines) {
        if (!line.error.empty()) parsed_[line.index].format = file_format;
      }
    }
  }

  void check_recovered(const JsonlLine& line, const nlohmann::ordered_json& record,
                       const std::string& output) const override {
    const ParsedLine& p = parsed_[line.index];
    if (p.format == LineFormat::openai_batch && !p.custom_id.empty()) {
      OFFGEN_CHECK(record.contains("custom_id") && record["custom_id"] == p.custom_id,
                   "--resume: {} answers request {} with a custom_id other than line {}'s '{}'; "
                   "is it the output of this input?",
                   output, line.index, line.line_number, p.custom_id);
    }
  }

  std::uint64_t work(std::size_t index) const override {
    const ParsedLine& p = parsed_[index];
    if (!p.problem.empty()) return 1;
    return p.request.prompt.size() + static_cast<std::uint64_t>(std::max(p.request.max_tokens, 0));
  }

  std::optional<RunLengths> prepare(const std::vector<std::size_t>& to_run) override {
    to_run_ = to_run;
    RunLengths lengths;
    lengths.gen_len = 1;
    for (const std::size_t i : to_run) {
      requests_.push_back(parsed_[i].request);  // a rejected line has an empty prompt
      const int prompt = static_cast<int>(parsed_[i].request.prompt.size());
      const int gen = parsed_[i].request.max_tokens;
      // (requests the engine rejects need no memory)
      if (parsed_[i].problem.empty() && prompt + gen - 1 <= config_.max_positions()) {
        lengths.prompt_len = std::max(lengths.prompt_len, prompt);
        lengths.gen_len = std::max(lengths.gen_len, gen);
        ++lengths.sequences;
      }
    }
    if (lengths.sequences == 0) return std::nullopt;
    return lengths;
  }

  void check_smallest_fits(Engine& engine) const override {
    // The smallest request alone: a lower bound of what any request needs.
    int prompt = std::numeric_limits<int>::max();
    int gen = std::numeric_limits<int>::max();
    for (const GenerationRequest& r : requests_) {
      if (!engine.check(r).empty()) continue;
      prompt = std::min(prompt, static_cast<int>(r.prompt.size()));
      gen = std::min(gen, r.max_tokens);
    }
    if (prompt != std::numeric_limits<int>::max()) {
      check_one_sequence_fits(
          [&] { engine.make_runner(1, prompt, gen - 1, prompt + gen); },
          fmt::format("the smallest request (prompt {}, max_tokens {})", prompt, gen));
    }
  }

  std::uint64_t expected_tokens() const override {
    std::uint64_t tokens = 0;
    for (const GenerationRequest& r : requests_) {
      tokens += static_cast<std::uint64_t>(std::max(r.max_tokens, 0));
    }
    return tokens;
  }

  void run(Engine& engine, const std::vector<JsonlLine>& lines,
           const std::function<void(JobRecord)>& put) override {
    const auto created = static_cast<std::int64_t>(std::time(nullptr));
    engine.generate(requests_, [&](std::size_t k, const GenerationResult& result) {
      const std::size_t index = to_run_[k];
      // A rejected line ran with an empty prompt, which the engine rejected at once without
      // work; the parse problem is what its output line reports.
      const std::string& problem =
          parsed_[index].problem.empty() ? result.error : parsed_[index].problem;
      put({result_record(lines[index], parsed_[index], result, problem, engine.tokenizer(), config_,
                         model_name_, created),
           !problem.empty()});
      generated_ += result.tokens.size();
    });
  }

  std::string totals(double seconds) const override {
    return fmt::format("{} tokens generated in {:.2f} s ({:.1f} tokens/s)", generated_, seconds,
                       static_cast<double>(generated_) / std::max(seconds, 1e-9));
  }

 private:
  std::string model_name_;  // what the completions body reports
  GenerateDefaults defaults_;
  ModelConfig config_;
  std::vector<ParsedLine> parsed_;   // by input index
  std::vector<std::size_t> to_run_;  // input index of request k
  std::vector<GenerationRequest> requests_;
  std::size_t generated_ = 0;
};

}  // namespace

void add_generate_command(CLI::App& app, GenerateOptions& options) {
  CLI::App* cmd =
      app.add_subcommand("generate",
                         "generate completions for a JSONL file of requests (without --plan or a "
                         "placement flag, the planner places the run for the longest prompt)");
  add_common_options(*cmd, options.common);
  plan_unless_placed(*cmd, options.common, {"--batch-size"});
  cmd->add_option("--input", options.input,
                  "JSONL, one request per line: {\"prompt\": \"...\"} or "
                  "{\"prompt_token_ids\": [...]} with optional max_tokens, temperature, top_k, "
                  "top_p, seed, stop (other keys are copied to the output); or the OpenAI Batch "
                  "API format {\"custom_id\", \"method\": \"POST\", \"url\": "
                  "\"/v1/completions\", \"body\": {\"prompt\", \"max_tokens\", ...}}")
      ->required();
  cmd->add_option("--output", options.output,
                  "JSONL results, one per input line: written as requests finish, then put in "
                  "input order")
      ->required();
  add_output_mode_flags(
      *cmd, options.resume, options.overwrite,
      "keep the results already in --output (from an interrupted run of the same input) "
      "and run only the requests without one, or whose record is an error");
  add_block_seconds_flag(*cmd, options.common.block_seconds);
  cmd->add_option("--max-tokens", options.max_tokens,
                  "tokens to generate per request that does not say")
      ->check(kPositiveInteger)
      ->capture_default_str();
  add_sampling_flags(*cmd, options.temperature, options.top_k, options.top_p);
  cmd->add_option("--seed", options.seed,
                  "sampling seed (request i without its own seed uses seed + i)")
      ->capture_default_str();
}

int run_generate(const GenerateOptions& options) {
  GenerateJob job(options);
  return run_batch_job(job, options.common,
                       {options.input, options.output, options.resume, options.overwrite});
}

}  // namespace offgen::cli
