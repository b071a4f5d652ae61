#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/cli/batch_job.h"
#include "engine/cli/commands.h"
#include "engine/cli/jsonl.h"
#include "engine/cli/request_fields.h"
#include "engine/core/error.h"
#include "engine/runtime/block_runner.h"

namespace offgen::cli {
namespace {

std::string parse_request(const nlohmann::ordered_json& line, const ModelConfig& config,
                          const Tokenizer* tokenizer, const std::string& model,
                          ScoreRequest& request) {
  if (line.contains("token_ids")) {
    return read_token_ids(line, "token_ids", config, request.tokens);
  }
  if (line.contains("text")) {
    return read_text(line, "text", "token_ids", config, tokenizer, model, request.tokens);
  }
  return "the line has neither 'text' nor 'token_ids'";
}

// score's part of a batch job: lines are texts (or token ids), answered with each token's
// log-probability, their sum and the perplexity.
class ScoreJob final : public BatchJob {
 public:
  explicit ScoreJob(const ScoreOptions& options) : options_(options) {}

  JobWords words() const override { return {"text", "texts", "scored"}; }

  void parse(const std::vector<JsonlLine>& lines, const ModelConfig& config,
             const Tokenizer* tokenizer) override {
    config_ = config;
    parsed_.resize(lines.size());
    problems_.resize(lines.size());
    truncated_from_.resize(lines.size());
    for (const JsonlLine& line : lines) {
      problems_[line.index] = line.error;
      if (problems_[line.index].empty()) {
        problems_[line.index] = parse_request(line.value, config, tokenizer, options_.common.model,
                                              parsed_[line.index]);
      }
      if (options_.truncate > 0) {
        truncated_from_[line.index] =
            truncate_tokens(parsed_[line.index].tokens, options_.truncate);
      }
      // A rejected line runs with no tokens, which the engine rejects at once without work.
      if (!problems_[line.index].empty()) parsed_[line.index].tokens.clear();
      parsed_[line.index].argmax = options_.argmax;
    }
    // Texts longer than the model's positions score would each fail alone; without --truncate
    // that is a file made for another model or a forgotten flag, said once before the model loads.
    const std::int64_t limit = score_max_tokens(config);
    std::size_t too_long = 0;
    std::size_t first = 0;
    for (const JsonlLine& line : lines) {
      if (static_cast<std::int64_t>(parsed_[line.index].tokens.size()) > limit && too_long++ == 0) {
        first = line.line_number;
      }
    }
    OFFGEN_CHECK(too_long == 0,
                 "{} of the {} texts are longer than the {} tokens the model's {} positions score "
                 "(the first on line {}; a text's last token is only a target): pass --truncate "
                 "{} to score each text's first {} tokens, or shorten them",
                 too_long, lines.size(), limit, config.max_positions(), first, limit, limit);
  }

  void check_recovered(const JsonlLine& line, const nlohmann::ordered_json& record,
                       const std::string& output) const override {
    if (is_error_record(record)) return;
    OFFGEN_CHECK(record.contains("token_ids") && record["token_ids"] == parsed_[line.index].tokens,
                 "--resume: {} scores other tokens for text {} than line {} has; is it the output "
                 "of this input?",
                 output, line.index, line.line_number);
    // A kept record must have what this run's records have, so the file reads as one job.
    OFFGEN_CHECK(record.contains("argmax_ids") == options_.argmax,
                 "--resume: {}'s record of line {} was scored {} --argmax and this run {}: resume "
                 "with the flags it was written with, or --overwrite",
                 output, line.line_number, options_.argmax ? "without" : "with",
                 options_.argmax ? "asks for it" : "does not");
  }

  std::uint64_t work(std::size_t index) const override {
    return std::max<std::uint64_t>(1, parsed_[index].tokens.size());
  }

  std::optional<RunLengths> prepare(const std::vector<std::size_t>& to_run) override {
    to_run_ = to_run;
    int longest = 0;
    int sequences = 0;
    for (const std::size_t i : to_run) {
      requests_.push_back(parsed_[i]);
      const int length = static_cast<int>(parsed_[i].tokens.size());
      if (problems_[i].empty() && length > 0 && length <= score_max_tokens(config_)) {
        longest = std::max(longest, length);
        shortest_ = std::min(shortest_, length);
        ++sequences;
      }
    }
    if (sequences == 0) return std::nullopt;
    // The first --prefill-tokens run as one prefill, the rest as decode steps (at least one pass).
    RunLengths lengths;
    lengths.prompt_len = score_prefill_length(options_.prefill_tokens, longest);
    lengths.gen_len = std::max(1, longest - lengths.prompt_len);
    lengths.total_len = longest;
    lengths.sequences = sequences;
    return lengths;
  }

  void check_smallest_fits(Engine& engine) const override {
    // The shortest text alone: a lower bound of what any text needs.
    const int shortest = shortest_;
    const int prefix = score_prefill_length(options_.prefill_tokens, shortest);
    check_one_sequence_fits(
        [&] { engine.make_runner(1, prefix, std::max(0, shortest - prefix - 1), shortest); },
        fmt::format("the shortest text ({} tokens)", shortest));
  }

  std::uint64_t expected_tokens() const override {
    std::uint64_t tokens = 0;
    for (const ScoreRequest& r : requests_) tokens += r.tokens.size();
    return tokens;
  }

  void run(Engine& engine, const std::vector<JsonlLine>& lines,
           const std::function<void(JobRecord)>& put) override {
    const SlotUseCounter count_slots{engine, slots_};
    engine.score(requests_, options_.prefill_tokens, [&](std::size_t k, const ScoreResult& result) {
      put(record(lines[to_run_[k]], k, result));
    });
  }

  std::vector<std::vector<std::int32_t>> line_tokens(std::size_t index) const override {
    if (!problems_[index].empty()) return {};
    return {parsed_[index].tokens};
  }

  std::string totals(double /*seconds*/) const override {
    return fmt::format(
        "{} tokens scored, perplexity {:.3f}; {}", total_scored_,
        total_scored_ ? std::exp(-total_logprob_ / static_cast<double>(total_scored_)) : 0.0,
        describe_slot_use(slots_));
  }

 private:
  // The output record of request k, whose input line is `line`: "index" first, then the line's
  // own keys, then the results (or the error).
  JobRecord record(const JsonlLine& line, std::size_t k, const ScoreResult& result) {
    const std::size_t index = line.index;
    nlohmann::ordered_json json = {{"index", index}};
    json.update(passthrough(line.value, {"index", "text", "token_ids", "error", "truncated_from"}));
    const std::string& problem = problems_[index].empty() ? result.error : problems_[index];
    if (!problem.empty()) {
      json["error"] =
          line.error.empty() ? fmt::format("line {}: {}", line.line_number, problem) : problem;
      return {std::move(json), true, {}};
    }
    nlohmann::ordered_json logprobs = nlohmann::ordered_json::array();
    double sum = 0.0;
    std::size_t scored = 0;
    for (float lp : result.token_logprobs) {
      if (std::isnan(lp)) {
        logprobs.push_back(nullptr);
      } else {
        logprobs.push_back(lp);
        sum += lp;
        ++scored;
      }
    }
    json["token_ids"] = requests_[k].tokens;
    if (truncated_from_[index] > 0) json["truncated_from"] = truncated_from_[index];
    json["token_logprobs"] = std::move(logprobs);
    if (options_.argmax) {
      nlohmann::ordered_json ids = nlohmann::ordered_json::array();
      for (const std::int32_t id : result.argmax_ids) {
        ids.push_back(id < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(id));
      }
      json["argmax_ids"] = std::move(ids);
    }
    json["sum_logprob"] = sum;
    json["num_scored"] = scored;
    json["perplexity"] = scored > 0
                             ? nlohmann::ordered_json(std::exp(-sum / static_cast<double>(scored)))
                             : nlohmann::ordered_json(nullptr);
    total_logprob_ += sum;
    total_scored_ += scored;
    return {std::move(json), false, {}};
  }

  const ScoreOptions& options_;
  ModelConfig config_;
  std::vector<ScoreRequest> parsed_;         // by input index
  std::vector<std::string> problems_;        // by input index; non-empty: why it cannot run
  std::vector<std::size_t> truncated_from_;  // by input index; 0: not cut
  std::vector<std::size_t> to_run_;          // input index of request k
  std::vector<ScoreRequest> requests_;
  int shortest_ = std::numeric_limits<int>::max();
  double total_logprob_ = 0.0;
  std::size_t total_scored_ = 0;
  SlotUse slots_;  // of this job's blocks
};

}  // namespace

void add_score_command(CLI::App& app, ScoreOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "score", "log-probabilities and perplexity of texts (token_logprobs[i] = log p(t_i | t_<i))");
  add_common_options(*cmd, options.common);
  plan_unless_placed(*cmd, options.common, {"--batch-size"});
  cmd->add_option("--input", options.input,
                  "JSONL: {\"text\": \"...\"} or {\"token_ids\": [...]} per line")
      ->required();
  cmd->add_option("--output", options.output,
                  "JSONL results, one per input line: written as texts finish, then put in input "
                  "order")
      ->required();
  add_output_mode_flags(
      *cmd, options.resume, options.overwrite,
      "keep the results already in --output (from an interrupted run of the same input) "
      "and score only the texts without one, or whose record is an error");
  add_block_seconds_flag(*cmd, options.common.block_seconds);
  cmd->add_option("--prefill-tokens", options.prefill_tokens,
                  "run the first N tokens as one prefill and the rest as teacher-forced decode "
                  "steps through the KV cache (0 = the whole text as prefill)")
      ->check(kNonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--truncate,--max-len", options.truncate,
                  "cut a text longer than N tokens to its first N (BOS included), as compare cuts "
                  "its --eval texts at the model's positions; its record says "
                  "\"truncated_from\": the length before (default: a text longer than the "
                  "model's positions + 1 is an error; its last token is only a target)")
      ->check(kPositiveInteger);
  cmd->add_flag("--argmax", options.argmax,
                "records also give \"argmax_ids\": the most likely id at each position (null at "
                "0), so a text can be checked to be what greedy decoding writes");
}

std::unique_ptr<BatchJob> make_score_job(const ScoreOptions& options) {
  return std::make_unique<ScoreJob>(options);
}

int run_score(const ScoreOptions& options) {
  ScoreJob job(options);
  return run_batch_job(job, options.common,
                       {options.input, options.output, options.resume, options.overwrite});
}

}  // namespace offgen::cli
