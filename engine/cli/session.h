// A model kept loaded across batch jobs whose lines are held in memory: the Python package's way
// into the engine (python/module.cpp). Each job is generate's or score's exactly as the CLI runs
// a file of the same lines (the same parsing, defaults, planning, requests and records), so its
// records equal the CLI's bit for bit; only the files, --resume and MPI ranks are left out.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/cli/commands.h"
#include "engine/runtime/engine.h"

namespace offgen::cli {

class BatchJob;

// The options of a session from command-line flags, parsed as `offgen generate` parses its common
// flags (--model, placement, budgets, policy, compression; --plan), so their validation and
// messages are the CLI's; without --plan or a placement flag the planner places each job. Also
// generate's --block-seconds and --no-continuous-batching.
// Throws CLI::ParseError (a usage error: an unknown flag, a value out of range) or offgen::Error.
CommonOptions parse_session_flags(const std::vector<std::string>& flags);

class Session {
 public:
  // Checks the options (as the CLI does before a job), reads the model's config and loads its
  // tokenizer; the weights load with the first job, placed for it. Throws offgen::Error naming
  // the flag or file.
  explicit Session(CommonOptions common);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const ModelConfig& config() const { return config_; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const CommonOptions& options() const { return common_; }
  // The loaded engine, or null before the first job.
  const Engine* engine() const { return engine_.get(); }

  struct Hooks {
    // Checked before each block and each step; true stops the job (Engine::Interrupted).
    std::function<bool()> interrupted;
    // Draw the CLI's progress (a bar on a terminal, a log line every few seconds otherwise).
    bool progress = false;
  };

  // A line's record, and the token ids it ran (BatchJob::line_tokens).
  struct LineResult {
    nlohmann::ordered_json record;
    std::vector<std::vector<std::int32_t>> tokens;
    std::vector<GenerationResult> results;  // generate: each choice's (JobRecord::results)
  };

  // generate's job over `lines` (each a batch-file line: plain or OpenAI Batch) with the
  // defaults of `options` (its `common` is ignored: the session's is used). Returns one record
  // per line, in order; a line that cannot run gets its error record and the others still run.
  std::vector<LineResult> generate(std::vector<nlohmann::ordered_json> lines,
                                   GenerateOptions options, const Hooks& hooks);
  // score's job over `lines` ({"text": ...} or {"token_ids": [...]}) with `options`'
  // --prefill-tokens and --truncate.
  std::vector<LineResult> score(std::vector<nlohmann::ordered_json> lines, ScoreOptions options,
                                const Hooks& hooks);

 private:
  std::vector<LineResult> run(BatchJob& job, std::vector<nlohmann::ordered_json> values,
                              const Hooks& hooks);

  CommonOptions common_;
  EngineOptions engine_options_;
  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace offgen::cli
