#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "engine/cli/commands.h"
#include "engine/cli/jsonl.h"
#include "engine/cli/request_fields.h"
#include "engine/core/error.h"

namespace offgen::cli {
namespace {

// Parses one line into a request; returns the problem or an empty string.
std::string parse_request(const nlohmann::ordered_json& line, const OptConfig& config,
                          const Tokenizer* tokenizer, const GenerateOptions& options,
                          std::size_t index, GenerationRequest& request) {
  std::string problem;
  if (line.contains("prompt_token_ids")) {
    problem = read_token_ids(line, "prompt_token_ids", config, request.prompt);
  } else if (line.contains("prompt")) {
    problem = read_text(line, "prompt", "prompt_token_ids", config, tokenizer, options.common.model,
                        request.prompt);
  } else {
    problem = "the line has neither 'prompt' nor 'prompt_token_ids'";
  }
  request.max_tokens = options.max_tokens;
  request.sampling = {options.temperature, options.top_k, options.top_p};
  request.seed = options.seed + index;  // distinct per request, reproducible per run
  return problem;
}

std::string decode_text(const Engine& engine, const std::vector<std::int32_t>& tokens) {
  const OptConfig& c = engine.config();
  std::vector<std::int32_t> visible;
  for (std::int32_t t : tokens) {
    if (t != c.eos_token_id && t != c.bos_token_id && t != c.pad_token_id) visible.push_back(t);
  }
  return to_valid_utf8(engine.tokenizer()->decode(visible));
}

}  // namespace

void add_generate_command(CLI::App& app, GenerateOptions& options) {
  CLI::App* cmd =
      app.add_subcommand("generate",
                         "generate completions for a JSONL file of prompts (without --plan or a "
                         "placement flag, the planner places the run for the longest prompt)");
  add_common_options(*cmd, options.common);
  plan_unless_placed(*cmd, options.common, {"--batch-size"});
  cmd->add_option("--input", options.input,
                  "JSONL: {\"prompt\": \"...\"} or {\"prompt_token_ids\": [...]} per line; other "
                  "keys are copied to the output")
      ->required();
  cmd->add_option("--output", options.output, "JSONL results, one per input line, in input order")
      ->required();
  cmd->add_option("--max-tokens", options.max_tokens, "tokens to generate per prompt")
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--temperature", options.temperature, "0 = greedy")
      ->check(kNonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--top-k", options.top_k, "0 = off")
      ->check(kNonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--top-p", options.top_p, "nucleus mass in (0, 1]; 1 = off")
      ->check(kProbability)
      ->capture_default_str();
  cmd->add_option("--seed", options.seed, "sampling seed (request i uses seed + i)")
      ->capture_default_str();
}

int run_generate(const GenerateOptions& options) {
  const auto lines = read_jsonl(options.input);
  OrderedJsonlWriter writer(options.output);  // fails now, not after the work, if unwritable
  EngineOptions engine_options = options.common.engine_options();
  // The requests are read before the model loads, so a planned placement fits the longest.
  const OptConfig config = model_config(options.common.model);
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(engine_options);

  std::vector<GenerationRequest> requests(lines.size());
  std::vector<std::string> problems(lines.size());
  RunLengths lengths;
  lengths.gen_len = options.max_tokens;
  for (const JsonlLine& line : lines) {
    problems[line.index] = line.error;
    if (problems[line.index].empty()) {
      problems[line.index] = parse_request(line.value, config, tokenizer.get(), options, line.index,
                                           requests[line.index]);
    }
    const int prompt = static_cast<int>(requests[line.index].prompt.size());
    if (!problems[line.index].empty()) {
      requests[line.index].prompt.clear();
    } else if (prompt + options.max_tokens - 1 <= config.max_position_embeddings) {
      // (longer ones are rejected by the engine and need no memory)
      lengths.prompt_len = std::max(lengths.prompt_len, prompt);
      ++lengths.sequences;
    }
  }
  if (lengths.sequences > 0) plan_automatically(options.common, lengths, engine_options);
  Engine engine(engine_options);

  // A rejected line runs with an empty prompt, which the engine rejects at once without work;
  // the parse problem is what its output line reports.
  std::size_t errors = 0;
  std::size_t generated = 0;
  const auto start = std::chrono::steady_clock::now();
  engine.generate(requests, [&](std::size_t index, const GenerationResult& result) {
    // "index" first, then the input line's own keys, then the results.
    nlohmann::ordered_json record = {{"index", index}};
    record.update(passthrough(lines[index].value, {"prompt", "prompt_token_ids"}));
    const std::string& problem = problems[index].empty() ? result.error : problems[index];
    if (!problem.empty()) {
      record["error"] = fmt::format("line {}: {}", lines[index].line_number, problem);
      ++errors;
    } else {
      record["prompt_token_ids"] = requests[index].prompt;
      record["token_ids"] = result.tokens;
      record["text"] = engine.tokenizer()
                           ? nlohmann::ordered_json(decode_text(engine, result.tokens))
                           : nlohmann::ordered_json(nullptr);
      record["finish_reason"] = finish_reason_name(result.finish);
      generated += result.tokens.size();
    }
    writer.put(index, record);
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("{} requests ({} failed), {} tokens generated in {:.2f} s ({:.1f} tokens/s) -> {}",
               lines.size(), errors, generated, seconds,
               static_cast<double>(generated) / std::max(seconds, 1e-9), options.output);
  return errors == 0 ? 0 : 2;
}

}  // namespace offgen::cli
