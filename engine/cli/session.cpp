#include "engine/cli/session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <utility>

#include "engine/cli/batch_files.h"
#include "engine/cli/batch_format.h"
#include "engine/cli/batch_job.h"
#include "engine/cli/progress.h"
#include "engine/cli/request_fields.h"
#include "engine/core/error.h"

namespace offgen::cli {

CommonOptions parse_session_flags(const std::vector<std::string>& flags) {
  CommonOptions options;
  CLI::App app{"offgen session"};
  add_common_options(app, options);
  plan_unless_placed(app, options, {"--batch-size"});
  // generate's and score's own flags that set common options.
  add_block_seconds_flag(app, options.block_seconds);
  app.add_flag_callback("--no-continuous-batching",
                        [&options] { options.continuous_batching = false; });
  std::vector<std::string> reversed(flags.rbegin(), flags.rend());  // CLI11 parses from the back
  app.parse(reversed);
  return options;
}

Session::Session(CommonOptions common)
    : common_(std::move(common)),
      engine_options_(common_.engine_options()),
      config_(model_config(engine_options_.model)),
      tokenizer_(load_tokenizer(engine_options_)) {}

Session::~Session() = default;

std::vector<Session::LineResult> Session::generate(std::vector<nlohmann::ordered_json> lines,
                                                   GenerateOptions options, const Hooks& hooks) {
  options.common = common_;
  const std::unique_ptr<BatchJob> job = make_generate_job(options);
  return run(*job, std::move(lines), hooks);
}

std::vector<Session::LineResult> Session::score(std::vector<nlohmann::ordered_json> lines,
                                                ScoreOptions options, const Hooks& hooks) {
  options.common = common_;
  const std::unique_ptr<BatchJob> job = make_score_job(options);
  return run(*job, std::move(lines), hooks);
}

std::vector<Session::LineResult> Session::run(BatchJob& job,
                                              std::vector<nlohmann::ordered_json> values,
                                              const Hooks& hooks) {
  std::vector<JsonlLine> lines(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    lines[i].index = i;
    lines[i].line_number = i + 1;
    lines[i].value = std::move(values[i]);
  }
  std::vector<LineResult> results(lines.size());
  if (lines.empty()) return results;
  job.parse(lines, config_, tokenizer_.get());
  std::vector<std::size_t> to_run(lines.size());
  std::iota(to_run.begin(), to_run.end(), std::size_t{0});

  // Placed as the CLI places a file of these lines; the weights load again only when the
  // placement differs from the loaded one (a job of longer prompts may need smaller blocks).
  EngineOptions engine_options = engine_options_;
  const std::optional<RunLengths> lengths = job.prepare(to_run);
  if (lengths) {
    plan_with_clear_errors([&] { plan_automatically(common_, *lengths, engine_options); });
  }
  if (engine_ == nullptr || !(engine_->placement() == engine_options.placement)) {
    if (engine_ != nullptr) {
      spdlog::info("this job is placed otherwise than the last one: loading the model again");
    }
    engine_.reset();
    engine_ = std::make_unique<Engine>(engine_options);
  }
  Engine& engine = *engine_;
  if (lengths) job.check_smallest_fits(engine);

  std::optional<Progress> progress;
  if (hooks.progress) progress.emplace(lines.size(), job.expected_tokens());
  engine.set_interrupt_check(hooks.interrupted);
  engine.set_job_progress({{}, [&](std::uint64_t tokens) {
                             if (progress) progress->tokens(tokens);
                           }});
  struct Detach {
    Engine& engine;
    ~Detach() {
      engine.set_interrupt_check({});
      engine.set_job_progress({});
    }
  } detach{engine};
  job.run(engine, lines, [&](JobRecord record) {
    const std::int64_t index = record_index(record.json);
    OFFGEN_CHECK(index >= 0 && static_cast<std::size_t>(index) < results.size(),
                 "internal: a job's record names no line of it");
    LineResult& result = results[static_cast<std::size_t>(index)];
    result.record = std::move(record.json);
    result.tokens = job.line_tokens(static_cast<std::size_t>(index));
    result.results = std::move(record.results);
    if (progress) progress->add();
  });
  if (progress) progress->finish();
  return results;
}

}  // namespace offgen::cli
