#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
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
      : model_name_(std::filesystem::path(options.common.model).filename().string()),
        model_dir_(options.common.tokenizer.empty() ? options.common.model
                                                    : options.common.tokenizer),
        chat_template_file_(options.chat_template) {
    defaults_.max_tokens = options.max_tokens;
    defaults_.sampling = {options.temperature, options.top_k, options.top_p};
    defaults_.seed = options.seed;
    defaults_.allow_unknown_fields = options.allow_unknown_fields;
  }

  JobWords words() const override { return {"request", "requests", "answered"}; }

  void parse(const std::vector<JsonlLine>& lines, const ModelConfig& config,
             const Tokenizer* tokenizer) override {
    config_ = config;
    if (tokenizer == nullptr) check_no_text(lines);
    load_chat_template(lines, config, tokenizer);
    parsed_.reserve(lines.size());
    std::map<std::string, std::size_t> custom_ids;  // first line of each id
    std::map<std::string, std::size_t> warned;      // each warning once, with its first line
    for (const JsonlLine& line : lines) {
      parsed_.push_back(parse_generate_line(line, config, tokenizer, model_name_, defaults_));
      ParsedLine& p = parsed_.back();
      if (p.problem.empty() && !chat_problem_.empty() && p.endpoint == Endpoint::chat) {
        p.problem = chat_problem_;
        p.prompts.clear();
        p.request.prompt.clear();
      }
      if (p.problem.empty() && p.format == LineFormat::openai_batch) {
        const auto [it, fresh] = custom_ids.emplace(p.custom_id, line.line_number);
        if (!fresh) {
          p.problem = fmt::format("custom_id '{}' repeats line {}", p.custom_id, it->second);
          p.prompts.clear();
          p.request.prompt.clear();
        }
      }
      for (const std::string& warning : p.warnings) {
        if (warned.emplace(warning, line.line_number).second) {
          spdlog::warn("line {}: {} (said once per file)", line.line_number, warning);
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
    std::uint64_t tokens = 0;
    for (const auto& prompt : p.prompts) {
      tokens += (prompt.size() + static_cast<std::uint64_t>(std::max(p.request.max_tokens, 0))) *
                static_cast<std::uint64_t>(p.n);
    }
    return tokens;
  }

  std::optional<RunLengths> prepare(const std::vector<std::size_t>& to_run) override {
    RunLengths lengths;
    lengths.gen_len = 1;
    for (const std::size_t i : to_run) {
      const std::vector<GenerationRequest> choices = line_requests(parsed_[i]);
      remaining_[i] = choices.size();
      results_[i].resize(choices.size());
      for (std::size_t c = 0; c < choices.size(); ++c) {
        owner_.push_back({i, c});
        requests_.push_back(choices[c]);  // a rejected line has one request, its prompt empty
        const int prompt = static_cast<int>(choices[c].prompt.size());
        const int gen = choices[c].max_tokens;
        // (requests the engine rejects need no memory)
        if (parsed_[i].problem.empty() && prompt + gen - 1 <= config_.max_positions()) {
          lengths.prompt_len = std::max(lengths.prompt_len, prompt);
          lengths.gen_len = std::max(lengths.gen_len, gen);
          ++lengths.sequences;
        }
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
    const SlotUseCounter count_slots{engine, slots_};
    engine.generate(requests_, [&](std::size_t k, const GenerationResult& result) {
      const auto [index, choice] = owner_[k];
      results_[index][choice] = result;
      generated_ += result.tokens.size();
      if (--remaining_[index] > 0) return;  // the line's record waits for all its choices
      // A rejected line ran with an empty prompt, which the engine rejected at once without
      // work; the parse problem is what its output line reports. Otherwise the first choice
      // the engine refused names the line's problem.
      std::string problem = parsed_[index].problem;
      for (const GenerationResult& r : results_[index]) {
        if (problem.empty() && !r.error.empty()) problem = r.error;
      }
      put({result_record(lines[index], parsed_[index], results_[index], problem, engine.tokenizer(),
                         config_, model_name_, created),
           !problem.empty(), std::move(results_[index])});
      results_.erase(index);
    });
  }

  std::vector<std::vector<std::int32_t>> line_tokens(std::size_t index) const override {
    if (!parsed_[index].problem.empty()) return {};
    return parsed_[index].prompts;
  }

  std::string totals(double seconds) const override {
    return fmt::format("{} tokens generated in {:.2f} s ({:.1f} tokens/s); {}", generated_, seconds,
                       static_cast<double>(generated_) / std::max(seconds, 1e-9),
                       describe_slot_use(slots_));
  }

 private:
  struct Owner {
    std::size_t line;    // input index
    std::size_t choice;  // in the line's choices
  };

  // Without a tokenizer only token-id prompts run: a file with text fails once, before the model
  // loads, rather than answering each text line with the same error.
  void check_no_text(const std::vector<JsonlLine>& lines) const {
    std::size_t with_text = 0;
    std::size_t first = 0;
    for (const JsonlLine& line : lines) {
      if (!line.error.empty() || !line.value.is_object()) continue;
      const nlohmann::ordered_json& v = line.value;
      const nlohmann::ordered_json* fields = &v;
      bool text = false;
      if (v.contains("body") && v["body"].is_object()) {
        fields = &v["body"];
        text = v.contains("url") && v["url"] == "/v1/chat/completions";
        if (fields->contains("prompt")) {
          const auto& prompt = (*fields)["prompt"];
          text = text || prompt.is_string() ||
                 (prompt.is_array() && !prompt.empty() && prompt[0].is_string());
        }
      } else {
        text = v.contains("prompt") && !v.contains("prompt_token_ids") && v["prompt"].is_string();
      }
      text = text || (fields->contains("stop") && !(*fields)["stop"].is_null());
      if (text && with_text++ == 0) first = line.line_number;
    }
    OFFGEN_CHECK(with_text == 0,
                 "--model {} has no tokenizer (no vocab.json + merges.txt, tokenizer.json or GGUF "
                 "vocabulary), and {} of the {} requests give text or stop strings (the first on "
                 "line {}): pass --tokenizer DIR, or give prompts as token ids",
                 model_dir_, with_text, lines.size(), first);
  }

  // The template chat lines are rendered with, found once when some line asks for chat; a
  // template that cannot be read fails those lines, not the file.
  void load_chat_template(const std::vector<JsonlLine>& lines, const ModelConfig& config,
                          const Tokenizer* tokenizer) {
    const bool any_chat = std::any_of(lines.begin(), lines.end(), [](const JsonlLine& l) {
      return l.error.empty() && l.value.is_object() && l.value.contains("url") &&
             l.value["url"] == "/v1/chat/completions";
    });
    if (!any_chat || tokenizer == nullptr) return;
    try {
      chat_ = ChatPrompt::for_model(model_dir_, chat_template_file_, config, *tokenizer);
      defaults_.chat = &chat_;
    } catch (const Error& e) {
      chat_problem_ = fmt::format("the chat template cannot be used: {}", e.what());
    }
  }

  std::string model_name_;  // what the response body reports
  std::string model_dir_;   // where the chat template is looked for
  std::string chat_template_file_;
  GenerateDefaults defaults_;
  ChatPrompt chat_;
  std::string chat_problem_;
  ModelConfig config_;
  std::vector<ParsedLine> parsed_;  // by input index
  std::vector<GenerationRequest> requests_;
  std::vector<Owner> owner_;                      // of request k
  std::map<std::size_t, std::size_t> remaining_;  // choices still running, by input index
  std::map<std::size_t, std::vector<GenerationResult>> results_;  // finished choices, by index
  std::size_t generated_ = 0;
  SlotUse slots_;  // of this job's blocks
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
                  "top_p, seed, stop, stop_token_ids (other keys are copied to the output); or "
                  "the OpenAI Batch API format {\"custom_id\", \"method\": \"POST\", \"url\": "
                  "\"/v1/completions\" or \"/v1/chat/completions\", \"body\": {...}} as "
                  "vllm run-batch reads it")
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
  cmd->add_flag_callback(
      "--no-continuous-batching", [&options] { options.common.continuous_batching = false; },
      "run each block until its last request is done (by default a finished request's row takes "
      "the next request at once)");
  cmd->add_option("--max-tokens", options.max_tokens,
                  "tokens to generate per request that does not say")
      ->check(kPositiveInteger)
      ->capture_default_str();
  add_sampling_flags(*cmd, options.temperature, options.top_k, options.top_p);
  cmd->add_option("--seed", options.seed,
                  "sampling seed (request i without its own seed uses seed + i)")
      ->capture_default_str();
  cmd->add_option("--chat-template", options.chat_template,
                  "a Jinja chat template file for /v1/chat/completions lines (default: the "
                  "checkpoint's, from tokenizer_config.json, chat_template.jinja or the GGUF "
                  "file)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--allow-unknown-fields", options.allow_unknown_fields,
                "a key of a batch line or body that offgen does not know is a warning, not the "
                "line's error");
}

std::unique_ptr<BatchJob> make_generate_job(const GenerateOptions& options) {
  return std::make_unique<GenerateJob>(options);
}

int run_generate(const GenerateOptions& options) {
  GenerateJob job(options);
  return run_batch_job(job, options.common,
                       {options.input, options.output, options.resume, options.overwrite});
}

}  // namespace offgen::cli
