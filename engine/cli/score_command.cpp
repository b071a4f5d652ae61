#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "engine/cli/commands.h"
#include "engine/cli/jsonl.h"
#include "engine/cli/request_fields.h"
#include "engine/core/error.h"

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
  cmd->add_option("--output", options.output, "JSONL results in input order")->required();
  cmd->add_option("--prefill-tokens", options.prefill_tokens,
                  "run the first N tokens as one prefill and the rest as teacher-forced decode "
                  "steps through the KV cache (0 = the whole text as prefill)")
      ->check(kNonNegativeNumber)
      ->capture_default_str();
}

int run_score(const ScoreOptions& options) {
  const auto lines = read_jsonl(options.input);
  OrderedJsonlWriter writer(options.output);
  EngineOptions engine_options = options.common.engine_options();
  // The texts are read before the model loads, so a planned placement fits the longest.
  const OptConfig config = model_config(options.common.model);
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(engine_options);

  std::vector<ScoreRequest> requests(lines.size());
  std::vector<std::string> problems(lines.size());
  int longest = 0;
  int sequences = 0;
  for (const JsonlLine& line : lines) {
    problems[line.index] = line.error;
    if (problems[line.index].empty()) {
      problems[line.index] = parse_request(line.value, config, tokenizer.get(),
                                           options.common.model, requests[line.index]);
    }
    const int length = static_cast<int>(requests[line.index].tokens.size());
    // A rejected line runs with no tokens, which the engine rejects at once without work.
    if (!problems[line.index].empty()) {
      requests[line.index].tokens.clear();
    } else if (length <= config.max_position_embeddings) {
      longest = std::max(longest, length);
      ++sequences;
    }
  }
  if (sequences > 0) {
    // The first --prefill-tokens run as one prefill, the rest as decode steps (at least one pass).
    RunLengths lengths;
    lengths.prompt_len =
        options.prefill_tokens > 0 ? std::min(options.prefill_tokens, longest) : longest;
    lengths.gen_len = std::max(1, longest - lengths.prompt_len);
    lengths.total_len = longest;
    lengths.sequences = sequences;
    plan_automatically(options.common, lengths, engine_options);
  }
  Engine engine(engine_options);

  std::size_t errors = 0;
  double total_logprob = 0.0;
  std::size_t total_scored = 0;
  engine.score(requests, options.prefill_tokens, [&](std::size_t index, const ScoreResult& result) {
    // "index" first, then the input line's own keys, then the results.
    nlohmann::ordered_json record = {{"index", index}};
    record.update(passthrough(lines[index].value, {"text", "token_ids"}));
    const std::string& problem = problems[index].empty() ? result.error : problems[index];
    if (!problem.empty()) {
      record["error"] = fmt::format("line {}: {}", lines[index].line_number, problem);
      ++errors;
      writer.put(index, record);
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
    record["token_ids"] = requests[index].tokens;
    record["token_logprobs"] = std::move(logprobs);
    record["sum_logprob"] = sum;
    record["num_scored"] = scored;
    record["perplexity"] =
        scored > 0 ? nlohmann::ordered_json(std::exp(-sum / static_cast<double>(scored)))
                   : nlohmann::ordered_json(nullptr);
    total_logprob += sum;
    total_scored += scored;
    writer.put(index, record);
  });
  spdlog::info("{} texts ({} failed), {} tokens scored, perplexity {:.3f} -> {}", lines.size(),
               errors, total_scored,
               total_scored ? std::exp(-total_logprob / static_cast<double>(total_scored)) : 0.0,
               options.output);
  return errors == 0 ? 0 : 2;
}

}  // namespace offgen::cli
