#include "engine/cli/batch_job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <new>
#include <numeric>

#include "bench/rewritten_file.h"
#include "engine/cli/batch_files.h"
#include "engine/cli/batch_format.h"
#include "engine/cli/flag_names.h"
#include "engine/cli/progress.h"
#include "engine/cli/rank_parts.h"
#include "engine/cli/ranks.h"
#include "engine/cli/request_fields.h"
#include "engine/cli/signals.h"
#include "engine/core/error.h"

namespace offgen::cli {
namespace {

// Where an interrupted or failed batch job stands.
struct JobState {
  std::string output;        // --output
  std::size_t total = 0;     // lines in the input
  std::size_t answered = 0;  // of them, with a record in the output
  std::size_t this_run = 0;  // of those, written by this run
};

// "13 of 200 requests are answered in out.jsonl (13 by this run); run the same command with
// --resume to answer the other 187".
std::string resume_hint(const JobState& s) {
  const std::size_t left = s.total - std::min(s.answered, s.total);
  return fmt::format(
      "{} of {} requests are answered in {} ({} by this run); run the same command with --resume "
      "to answer the other {}",
      s.answered, s.total, s.output, s.this_run, left);
}

void remove_parts(const std::map<int, std::filesystem::path>& parts) {
  std::error_code ec;
  for (const auto& [rank, part] : parts) std::filesystem::remove(part, ec);
}

// The engine for the lines `to_run`: placed by the planner for their lengths (unless the options
// place it), loaded, and checked to hold at least the smallest request.
std::unique_ptr<Engine> start_engine(BatchJob& job, const CommonOptions& common,
                                     const std::vector<std::size_t>& to_run,
                                     EngineOptions& engine_options) {
  const std::optional<RunLengths> lengths = job.prepare(to_run);
  if (lengths) {
    plan_with_clear_errors([&] { plan_automatically(common, *lengths, engine_options); });
  }
  auto engine = std::make_unique<Engine>(engine_options);
  if (lengths) job.check_smallest_fits(*engine);
  return engine;
}

// How a job's pass over its requests ended: the stop signal's exit code (or -1 when it finished),
// the records that report an error, and its wall time.
struct JobRun {
  int stopped = -1;
  std::size_t errors = 0;
  double seconds = 0;
};

// Runs `count` requests of `job` under the stop-signal guard with progress: each record goes to
// `put` as it finishes; `kept()` says what an interrupted or failed run leaves.
JobRun run_job(BatchJob& job, Engine& engine, const std::vector<JsonlLine>& lines,
               std::size_t count, const std::function<void(const JobRecord&)>& put,
               const std::function<std::string()>& kept) {
  JobRun run;
  Progress progress(count, job.expected_tokens());
  engine.set_job_progress({{}, [&](std::uint64_t tokens) { progress.tokens(tokens); }});
  const auto start = std::chrono::steady_clock::now();
  run.stopped = run_guarded(
      engine,
      [&] {
        job.run(engine, lines, [&](JobRecord record) {
          if (record.failed) ++run.errors;
          put(record);
          progress.add();
        });
      },
      [&] {
        progress.finish();
        return kept();
      });
  if (run.stopped < 0) progress.finish();  // (a stopped run finished it in kept)
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

// --output -: records go to standard output as they finish, in input order (logs and progress are
// on standard error), and nothing is kept to resume from.
int run_to_stdout(BatchJob& job, const CommonOptions& common, const JobFiles& files,
                  const std::vector<JsonlLine>& lines) {
  const JobWords words = job.words();
  OFFGEN_CHECK(!files.resume,
               "--resume needs an --output file to resume from: standard output keeps nothing");
  EngineOptions engine_options = common.engine_options();
  const ModelConfig config = model_config(engine_options.model);
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(engine_options);
  job.parse(lines, config, tokenizer.get());
  std::vector<std::size_t> to_run(lines.size());
  std::iota(to_run.begin(), to_run.end(), std::size_t{0});
  if (to_run.empty()) {
    spdlog::warn("{} has no {} (no non-blank lines)", files.input, words.items);
    return 0;
  }
  const std::unique_ptr<Engine> loaded = start_engine(job, common, to_run, engine_options);
  Engine& engine = *loaded;

  OrderedJsonlWriter writer("-");
  std::size_t finished = 0;
  const JobRun run = run_job(
      job, engine, lines, to_run.size(),
      [&](const JobRecord& record) {
        writer.put(static_cast<std::size_t>(record_index(record.json)), record.json);
        ++finished;
      },
      [&] {
        return fmt::format(
            "{} of {} {} finished; those before the first unfinished one were written to "
            "standard output",
            finished, lines.size(), words.items);
      });
  if (run.stopped >= 0) return run.stopped;
  spdlog::info("{} {} ({} failed), {} -> standard output", to_run.size(), words.items, run.errors,
               job.totals(run.seconds));
  return run.errors == 0 ? 0 : 2;
}

}  // namespace

std::string describe_slot_use(const SlotUse& slots) {
  if (slots.computed() == 0) return "no token slots computed";
  return fmt::format(
      "token slots used {:.2f} ({} of {} computed; wasted: {} padding prompts to their block's "
      "longest, {} rows of sequences that had finished)",
      slots.efficiency(), slots.useful, slots.computed(), slots.padding, slots.idle);
}

bool is_error_record(const nlohmann::ordered_json& record) {
  return record.contains("error") && !record["error"].is_null();
}

int run_batch_job(BatchJob& job, const CommonOptions& common, const JobFiles& files) {
  if (Ranks& ranks = job_ranks(); ranks.info().size > 1) {
    return run_batch_job_on_ranks(job, common, files, ranks);
  }
  const JobWords words = job.words();
  if (files.input != "-") check_input_file(files.input);
  const auto lines = read_jsonl(files.input);  // "-": standard input
  if (files.output == "-") return run_to_stdout(job, common, files, lines);
  // Fails now, not after the work, if the output cannot be written or read back (or is the
  // input); a model that cannot be found fails before the output is touched.
  const std::filesystem::path output = check_output_file(files.input, files.output);
  EngineOptions engine_options = common.engine_options();
  const auto parts = earlier_parts(output, files.output, files.resume || files.overwrite);
  ResumableJsonlWriter writer(output, existing_output(files.resume, files.overwrite), record_index);
  if (files.overwrite) remove_parts(parts);
  // The lines are read before the model loads, so a planned placement fits the longest.
  const ModelConfig config = model_config(engine_options.model);
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(engine_options);
  job.parse(lines, config, tokenizer.get());

  // What an interrupted run already answered stays; it must be this input's output. Its error
  // records run again. Records in parts of a run on several ranks join the output.
  std::map<std::size_t, nlohmann::ordered_json> recovered = writer.recovered();
  if (files.resume) {
    for (const auto& [rank, part] : parts) {
      for (auto& [index, record] : read_jsonl_records(part, record_index)) {
        const auto it = recovered.find(index);
        if (it != recovered.end() && !(is_error_record(it->second) && !is_error_record(record))) {
          continue;
        }
        OFFGEN_CHECK(index < lines.size(),
                     "--resume: {} answers {} {}, but {} has only {} {}; is it a part of this "
                     "input's output?",
                     part.string(), words.item, index, files.input, lines.size(), words.items);
        job.check_recovered(lines[index], record, part.string());
        writer.put(record);
        recovered[index] = std::move(record);
      }
    }
  }
  std::size_t kept = 0;
  for (const auto& [index, record] : recovered) {
    OFFGEN_CHECK(index < lines.size(),
                 "--resume: {} answers {} {}, but {} has only {} {}; is it the output of this "
                 "input?",
                 files.output, words.item, index, files.input, lines.size(), words.items);
    job.check_recovered(lines[index], record, files.output);
    if (!is_error_record(record)) ++kept;
  }
  if (files.resume) {
    spdlog::info(
        "--resume: {} of {} {} already {} in {}{}{}{}", kept, lines.size(), words.items, words.done,
        files.output,
        parts.empty()
            ? std::string()
            : fmt::format(" and its {} part files of a run on several ranks", parts.size()),
        kept < recovered.size()
            ? fmt::format(" ({} error records run again)", recovered.size() - kept)
            : std::string(),
        writer.dropped_bytes() > 0
            ? fmt::format(" (a partial last line of {} bytes was dropped)", writer.dropped_bytes())
            : std::string());
  }

  std::vector<std::size_t> to_run;  // input indices
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto it = recovered.find(i);
    if (it == recovered.end() || is_error_record(it->second)) {
      to_run.push_back(i);
    }
  }
  if (to_run.empty()) {
    finish_output(writer, files.output);
    remove_parts(parts);
    if (lines.empty()) {
      spdlog::warn("{} has no {} (no non-blank lines): {} is empty", files.input, words.items,
                   files.output);
    } else {
      spdlog::info("every {} already has its result in {}", words.item, files.output);
    }
    return 0;
  }
  const std::unique_ptr<Engine> loaded = start_engine(job, common, to_run, engine_options);
  Engine& engine = *loaded;

  const JobRun run = run_job(
      job, engine, lines, to_run.size(), [&](const JobRecord& record) { writer.put(record.json); },
      [&] {
        return resume_hint(JobState{files.output, lines.size(),
                                    lines.size() - to_run.size() + writer.written(),
                                    writer.written()});
      });
  if (run.stopped >= 0) return run.stopped;
  finish_output(writer, files.output);
  remove_parts(parts);
  spdlog::info("{} {} ({} failed), {} -> {}", to_run.size(), words.items, run.errors,
               job.totals(run.seconds), files.output);
  return run.errors == 0 ? 0 : 2;
}

void check_one_sequence_fits(const std::function<void()>& make, const std::string& what) {
  try {
    make();
  } catch (const OutOfMemoryError& e) {
    fail(
        "nothing can run: one sequence of {} does not fit the memory budgets with this "
        "placement ({}). Raise --gpu-mem / --cpu-mem, keep less on the gpu tier (--weights-gpu, "
        "--kv-gpu, --cpu-attention), shrink the KV cache (--policy with --kv-budget), or give no "
        "placement flags and let the planner choose",
        what, flag_message(e));
  }
}

int run_guarded(const std::function<void()>& work, const std::function<std::string()>& kept) {
  StopSignals signals;
  try {
    work();
  } catch (const Interrupted&) {
    const int signal = StopSignals::signal_number();
    spdlog::warn("stopped by {}: {}", StopSignals::signal_name(signal), kept());
    // Under mpirun / srun the launcher is tearing the job down: a collective MPI_Finalize could
    // wait for a rank that is gone.
    MpiSession::skip_finalize();
    return StopSignals::exit_code(signal);
  } catch (const Error& e) {
    throw Error(fmt::format("{}\n{}", flag_message(e), kept()));
  } catch (const std::bad_alloc&) {
    throw Error(fmt::format("out of host memory\n{}", kept()));
  } catch (const std::exception& e) {
    throw Error(fmt::format("unexpected error: {}\n{}", e.what(), kept()));
  }
  return -1;
}

int run_guarded(Engine& engine, const std::function<void()>& work,
                const std::function<std::string()>& kept) {
  engine.set_interrupt_check(&StopSignals::requested);
  struct Clear {
    Engine& engine;
    ~Clear() { engine.set_interrupt_check({}); }
  } clear{engine};
  return run_guarded(work, kept);
}

}  // namespace offgen::cli
