#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <limits>
#include <map>

#include "engine/cli/batch_format.h"
#include "engine/cli/batch_job.h"
#include "engine/cli/commands.h"
#include "engine/cli/jsonl.h"
#include "engine/cli/progress.h"
#include "engine/cli/request_fields.h"
#include "engine/core/error.h"
#include "engine/runtime/batch_runner.h"

namespace offgen::cli {

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
  check_input_file(options.input);
  const auto lines = read_jsonl(options.input);
  // Fails now, not after the work, if the output cannot be written or read back (or is the
  // input); a model that cannot be found fails before the output is touched.
  const std::filesystem::path output = check_output_file(options.input, options.output);
  EngineOptions engine_options = options.common.engine_options();
  ResumableJsonlWriter writer(output, existing_output(options.resume, options.overwrite),
                              record_index);
  // The requests are read before the model loads, so a planned placement fits the longest.
  const OptConfig config = model_config(engine_options.model);
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(engine_options);
  const std::string model_name = std::filesystem::path(options.common.model).filename().string();

  GenerateDefaults defaults;
  defaults.max_tokens = options.max_tokens;
  defaults.sampling = {options.temperature, options.top_k, options.top_p};
  defaults.seed = options.seed;
  std::vector<ParsedLine> parsed;
  parsed.reserve(lines.size());
  std::map<std::string, std::size_t> custom_ids;  // first line of each id
  for (const JsonlLine& line : lines) {
    parsed.push_back(parse_generate_line(line, config, tokenizer.get(), model_name, defaults));
    ParsedLine& p = parsed.back();
    if (p.problem.empty() && p.format == LineFormat::openai_batch) {
      const auto [it, fresh] = custom_ids.emplace(p.custom_id, line.line_number);
      if (!fresh) {
        p.problem = fmt::format("custom_id '{}' repeats line {}", p.custom_id, it->second);
        p.request.prompt.clear();
      }
    }
  }

  // A line that is not JSON is answered in the file's format (that of its first good line).
  const auto first_good =
      std::find_if(lines.begin(), lines.end(), [](const JsonlLine& l) { return l.error.empty(); });
  if (first_good != lines.end()) {
    const LineFormat file_format = parsed[first_good->index].format;
    for (const JsonlLine& line : lines) {
      if (!line.error.empty()) parsed[line.index].format = file_format;
    }
  }

  // What an interrupted run already answered stays; it must be this input's output. Its error
  // records run again (a bad line fails again at once; one that did not fit may fit now).
  std::size_t errors = 0;
  std::size_t kept = 0;
  auto is_error = [](const nlohmann::ordered_json& record) {
    return record.contains("error") && !record["error"].is_null();
  };
  for (const auto& [index, record] : writer.recovered()) {
    OFFGEN_CHECK(index < lines.size(),
                 "--resume: {} answers request {}, but {} has only {} requests; is it the output "
                 "of this input?",
                 options.output, index, options.input, lines.size());
    const ParsedLine& p = parsed[index];
    if (p.format == LineFormat::openai_batch && !p.custom_id.empty()) {
      OFFGEN_CHECK(record.contains("custom_id") && record["custom_id"] == p.custom_id,
                   "--resume: {} answers request {} with a custom_id other than line {}'s '{}'; "
                   "is it the output of this input?",
                   options.output, index, lines[index].line_number, p.custom_id);
    }
    if (!is_error(record)) ++kept;
  }
  if (options.resume) {
    spdlog::info(
        "--resume: {} of {} requests already answered in {}{}{}", kept, lines.size(),
        options.output,
        kept < writer.recovered().size()
            ? fmt::format(" ({} error records run again)", writer.recovered().size() - kept)
            : std::string(),
        writer.dropped_bytes() > 0
            ? fmt::format(" (a partial last line of {} bytes was dropped)", writer.dropped_bytes())
            : std::string());
  }

  std::vector<std::size_t> to_run;  // input indices
  std::vector<GenerationRequest> requests;
  RunLengths lengths;
  lengths.gen_len = 1;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto recovered = writer.recovered().find(i);
    if (recovered != writer.recovered().end() && !is_error(recovered->second)) continue;
    to_run.push_back(i);
    requests.push_back(parsed[i].request);  // a rejected line has an empty prompt
    const int prompt = static_cast<int>(parsed[i].request.prompt.size());
    const int gen = parsed[i].request.max_tokens;
    // (requests the engine rejects need no memory)
    if (parsed[i].problem.empty() && prompt + gen - 1 <= config.max_position_embeddings) {
      lengths.prompt_len = std::max(lengths.prompt_len, prompt);
      lengths.gen_len = std::max(lengths.gen_len, gen);
      ++lengths.sequences;
    }
  }
  if (to_run.empty()) {
    finish_output(writer, options.output);
    if (lines.empty()) {
      spdlog::warn("{} has no requests (no non-blank lines): {} is empty", options.input,
                   options.output);
    } else {
      spdlog::info("every request already has its result in {}", options.output);
    }
    return errors == 0 ? 0 : 2;
  }
  if (lengths.sequences > 0) {
    plan_with_clear_errors([&] { plan_automatically(options.common, lengths, engine_options); });
  }
  Engine engine(engine_options);
  if (lengths.sequences > 0) {
    // The smallest request alone: a lower bound of what any request needs.
    int prompt = std::numeric_limits<int>::max();
    int gen = std::numeric_limits<int>::max();
    for (const GenerationRequest& r : requests) {
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

  // A rejected line runs with an empty prompt, which the engine rejects at once without work;
  // the parse problem is what its output line reports.
  const auto created = static_cast<std::int64_t>(std::time(nullptr));
  std::size_t generated = 0;
  std::uint64_t expected_tokens = 0;
  for (const GenerationRequest& r : requests) {
    expected_tokens += static_cast<std::uint64_t>(std::max(r.max_tokens, 0));
  }
  Progress progress(to_run.size(), expected_tokens);
  engine.set_job_progress({{}, [&](std::uint64_t tokens) { progress.tokens(tokens); }});
  const auto start = std::chrono::steady_clock::now();
  const int stopped = run_guarded(
      engine,
      [&] {
        engine.generate(requests, [&](std::size_t k, const GenerationResult& result) {
          const std::size_t index = to_run[k];
          const std::string& problem =
              parsed[index].problem.empty() ? result.error : parsed[index].problem;
          if (!problem.empty()) ++errors;
          writer.put(result_record(lines[index], parsed[index], result, problem, engine.tokenizer(),
                                   config, model_name, created));
          generated += result.tokens.size();
          progress.add();
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
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("{} requests ({} failed), {} tokens generated in {:.2f} s ({:.1f} tokens/s) -> {}",
               to_run.size(), errors, generated, seconds,
               static_cast<double>(generated) / std::max(seconds, 1e-9), options.output);
  return errors == 0 ? 0 : 2;
}

}  // namespace offgen::cli
