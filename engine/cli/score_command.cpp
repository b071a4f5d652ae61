#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "engine/cli/batch_format.h"
#include "engine/cli/batch_job.h"
#include "engine/cli/commands.h"
#include "engine/cli/jsonl.h"
#include "engine/cli/progress.h"
#include "engine/cli/request_fields.h"
#include "engine/core/error.h"
#include "engine/runtime/batch_runner.h"

namespace offgen::cli {
namespace {

std::string parse_request(const nlohmann::ordered_json& line, const OptConfig& config,
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
                  "model's positions is an error)")
      ->check(kPositiveInteger);
}

int run_score(const ScoreOptions& options) {
  check_input_file(options.input);
  const auto lines = read_jsonl(options.input);
  // Fails now, not after the work, if the output cannot be written or read back (or is the
  // input); a model that cannot be found fails before the output is touched.
  const std::filesystem::path output = check_output_file(options.input, options.output);
  EngineOptions engine_options = options.common.engine_options();
  ResumableJsonlWriter writer(output, existing_output(options.resume, options.overwrite),
                              record_index);
  // The texts are read before the model loads, so a planned placement fits the longest.
  const OptConfig config = model_config(engine_options.model);
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(engine_options);

  std::vector<ScoreRequest> parsed(lines.size());
  std::vector<std::string> problems(lines.size());
  std::vector<std::size_t> truncated_from(lines.size());  // 0: not cut
  for (const JsonlLine& line : lines) {
    problems[line.index] = line.error;
    if (problems[line.index].empty()) {
      problems[line.index] = parse_request(line.value, config, tokenizer.get(),
                                           options.common.model, parsed[line.index]);
    }
    if (options.truncate > 0) {
      truncated_from[line.index] = truncate_tokens(parsed[line.index].tokens, options.truncate);
    }
    // A rejected line runs with no tokens, which the engine rejects at once without work.
    if (!problems[line.index].empty()) parsed[line.index].tokens.clear();
  }

  // What an interrupted run already scored stays; it must be this input's output. Its error
  // records run again (a bad line fails again at once; one that did not fit may fit now).
  auto is_error = [](const nlohmann::ordered_json& record) { return record.contains("error"); };
  std::size_t kept = 0;
  for (const auto& [index, record] : writer.recovered()) {
    OFFGEN_CHECK(index < lines.size(),
                 "--resume: {} answers text {}, but {} has only {} texts; is it the output of "
                 "this input?",
                 options.output, index, options.input, lines.size());
    if (is_error(record)) continue;
    OFFGEN_CHECK(record.contains("token_ids") && record["token_ids"] == parsed[index].tokens,
                 "--resume: {} scores other tokens for text {} than line {} has; is it the output "
                 "of this input?",
                 options.output, index, lines[index].line_number);
    ++kept;
  }
  if (options.resume) {
    spdlog::info(
        "--resume: {} of {} texts already scored in {}{}", kept, lines.size(), options.output,
        writer.dropped_bytes() > 0
            ? fmt::format(" (a partial last line of {} bytes was dropped)", writer.dropped_bytes())
            : std::string());
  }

  std::vector<std::size_t> to_run;  // input indices
  std::vector<ScoreRequest> requests;
  int longest = 0;
  int shortest = std::numeric_limits<int>::max();
  int sequences = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto recovered = writer.recovered().find(i);
    if (recovered != writer.recovered().end() && !is_error(recovered->second)) continue;
    to_run.push_back(i);
    requests.push_back(parsed[i]);
    const int length = static_cast<int>(parsed[i].tokens.size());
    if (problems[i].empty() && length > 0 && length <= config.max_position_embeddings) {
      longest = std::max(longest, length);
      shortest = std::min(shortest, length);
      ++sequences;
    }
  }
  if (to_run.empty()) {
    finish_output(writer, options.output);
    if (lines.empty()) {
      spdlog::warn("{} has no texts (no non-blank lines): {} is empty", options.input,
                   options.output);
    } else {
      spdlog::info("every text already has its result in {}", options.output);
    }
    return 0;
  }
  if (sequences > 0) {
    // The first --prefill-tokens run as one prefill, the rest as decode steps (at least one pass).
    RunLengths lengths;
    lengths.prompt_len =
        options.prefill_tokens > 0 ? std::min(options.prefill_tokens, longest) : longest;
    lengths.gen_len = std::max(1, longest - lengths.prompt_len);
    lengths.total_len = longest;
    lengths.sequences = sequences;
    plan_with_clear_errors([&] { plan_automatically(options.common, lengths, engine_options); });
  }
  Engine engine(engine_options);
  if (sequences > 0) {
    // The shortest text alone: a lower bound of what any text needs.
    const int prefix =
        options.prefill_tokens > 0 ? std::min(options.prefill_tokens, shortest) : shortest;
    check_one_sequence_fits(
        [&] { engine.make_runner(1, prefix, std::max(0, shortest - prefix - 1), shortest); },
        fmt::format("the shortest text ({} tokens)", shortest));
  }

  std::size_t errors = 0;
  double total_logprob = 0.0;
  std::size_t total_scored = 0;
  std::uint64_t expected_tokens = 0;
  for (const ScoreRequest& r : requests) expected_tokens += r.tokens.size();
  Progress progress(to_run.size(), expected_tokens);
  engine.set_job_progress({{}, [&](std::uint64_t tokens) { progress.tokens(tokens); }});
  const int stopped = run_guarded(
      engine,
      [&] {
        engine.score(
            requests, options.prefill_tokens, [&](std::size_t k, const ScoreResult& result) {
              const std::size_t index = to_run[k];
              progress.add();
              // "index" first, then the input line's own keys, then the results.
              nlohmann::ordered_json record = {{"index", index}};
              record.update(passthrough(lines[index].value,
                                        {"index", "text", "token_ids", "error", "truncated_from"}));
              const std::string& problem = problems[index].empty() ? result.error : problems[index];
              if (!problem.empty()) {
                record["error"] =
                    lines[index].error.empty()
                        ? fmt::format("line {}: {}", lines[index].line_number, problem)
                        : problem;
                ++errors;
                writer.put(record);
                return;
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
              record["token_ids"] = requests[k].tokens;
              if (truncated_from[index] > 0) record["truncated_from"] = truncated_from[index];
              record["token_logprobs"] = std::move(logprobs);
              record["sum_logprob"] = sum;
              record["num_scored"] = scored;
              record["perplexity"] =
                  scored > 0 ? nlohmann::ordered_json(std::exp(-sum / static_cast<double>(scored)))
                             : nlohmann::ordered_json(nullptr);
              total_logprob += sum;
              total_scored += scored;
              writer.put(record);
            });
      },
      [&] {
        progress.finish();
        return resume_hint(JobState{options.output, lines.size(),
                                    lines.size() - to_run.size() + writer.written(),
                                    writer.written()});
      });
  if (stopped >= 0) return stopped;
  progress.finish();
  finish_output(writer, options.output);
  spdlog::info("{} texts ({} failed), {} tokens scored, perplexity {:.3f} -> {}", to_run.size(),
               errors, total_scored,
               total_scored ? std::exp(-total_logprob / static_cast<double>(total_scored)) : 0.0,
               options.output);
  return errors == 0 ? 0 : 2;
}

}  // namespace offgen::cli
