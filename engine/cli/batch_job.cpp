#include "engine/cli/batch_job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <new>

#include "bench/rewritten_file.h"
#include "engine/cli/batch_format.h"
#include "engine/cli/flag_names.h"
#include "engine/cli/progress.h"
#include "engine/cli/request_fields.h"
#include "engine/cli/signals.h"
#include "engine/core/error.h"

namespace offgen::cli {
namespace {

// --input must not be a folder: a clear error naming it, before any work.
void check_input_file(const std::filesystem::path& input) {
  std::error_code ec;
  OFFGEN_CHECK(!std::filesystem::is_directory(input, ec),
               "--input {} is a folder: give a JSONL file", input.string());
}

// writer.finish() (the results put in input order); when that fails (a full disk under the
// ordered copy), the error adds that every result is in the output and --resume orders it.
void finish_output(ResumableJsonlWriter& writer, const std::string& output) {
  try {
    writer.finish();
  } catch (const Error& e) {
    fail(
        "{}\nevery request is answered in {}, not yet in input order: when there is room, the "
        "same command with --resume puts it in order",
        e.what(), output);
  }
}

void check_output_folder(const std::filesystem::path& output) {
  namespace fs = std::filesystem;
  const fs::path folder = output.has_parent_path() ? output.parent_path() : fs::path(".");
  std::error_code ec;
  const fs::file_status status = fs::status(folder, ec);
  OFFGEN_CHECK(fs::exists(status), "--output {}: the folder {} does not exist", output.string(),
               folder.string());
  OFFGEN_CHECK(fs::is_directory(status), "--output {}: {} is not a folder", output.string(),
               folder.string());
}

// What a file that is not a regular one is, for messages; null for regular files and folders
// (a folder fails as an unwritable output).
const char* not_a_file(std::filesystem::file_type type) {
  using Type = std::filesystem::file_type;
  switch (type) {
    case Type::fifo:
      return "a pipe or FIFO";
    case Type::character:
      return "a terminal or character device";
    case Type::block:
      return "a block device";
    case Type::socket:
      return "a socket";
    case Type::none:
    case Type::not_found:
    case Type::regular:
    case Type::directory:
    case Type::symlink:
    case Type::unknown:
      return nullptr;
  }
  return nullptr;
}

// --output must be a file in an existing folder that the job can read back and replace: results
// are appended as they finish, then read again to put them in input order (and by --resume).
// Refused before any work, with an offgen::Error naming it: a missing folder; the --input file
// itself, however it is spelled (a link, another path to it); a pipe, FIFO, socket, terminal or
// other device (`--output /dev/stdout | cat` would wait forever on its own pipe). Returns the
// path to write: `output`, or the file it links to, so that the ordered copy replaces that file
// and not the link.
std::filesystem::path check_output_file(const std::filesystem::path& input,
                                        const std::filesystem::path& output) {
  namespace fs = std::filesystem;
  check_output_folder(output);
  std::error_code ec;
  const fs::file_status status = fs::status(output, ec);             // through links
  if (!fs::exists(status)) return bench::file_behind_links(output);  // a new file
  OFFGEN_CHECK(!fs::equivalent(input, output, ec),
               "--output {} is the --input file {}: the results would overwrite the requests. "
               "Give --output another file",
               output.string(), input.string());
  if (const char* what = not_a_file(status.type())) {
    fail(
        "--output {} is {}, not a file: results are written as they finish and read back to put "
        "them in input order (and by --resume), which needs a regular file. Write to a file "
        "(--output out.jsonl) and read that",
        output.string(), what);
  }
  return bench::file_behind_links(output);
}

// Runs `plan` (plan_automatically); an out-of-memory error there comes from the quick
// calibration under small budgets and is reported as such, with what to do instead.
void plan_with_clear_errors(const std::function<void()>& plan) {
  try {
    plan();
  } catch (const OutOfMemoryError& e) {
    fail(
        "the planner needs a machine profile, and the quick calibration that makes one does not "
        "fit the memory budgets ({}). Run `offgen calibrate` once without --gpu-mem / --cpu-mem "
        "(or give --profile FILE), or give placement flags (--batch-size, --weights-gpu, ...)",
        flag_message(e));
  }
}

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

}  // namespace

bool is_error_record(const nlohmann::ordered_json& record) {
  return record.contains("error") && !record["error"].is_null();
}

int run_batch_job(BatchJob& job, const CommonOptions& common, const JobFiles& files) {
  const JobWords words = job.words();
  check_input_file(files.input);
  const auto lines = read_jsonl(files.input);
  // Fails now, not after the work, if the output cannot be written or read back (or is the
  // input); a model that cannot be found fails before the output is touched.
  const std::filesystem::path output = check_output_file(files.input, files.output);
  EngineOptions engine_options = common.engine_options();
  ResumableJsonlWriter writer(output, existing_output(files.resume, files.overwrite), record_index);
  // The lines are read before the model loads, so a planned placement fits the longest.
  const ModelConfig config = model_config(engine_options.model);
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(engine_options);
  job.parse(lines, config, tokenizer.get());

  // What an interrupted run already answered stays; it must be this input's output. Its error
  // records run again.
  std::size_t kept = 0;
  for (const auto& [index, record] : writer.recovered()) {
    OFFGEN_CHECK(index < lines.size(),
                 "--resume: {} answers {} {}, but {} has only {} {}; is it the output of this "
                 "input?",
                 files.output, words.item, index, files.input, lines.size(), words.items);
    job.check_recovered(lines[index], record, files.output);
    if (!is_error_record(record)) ++kept;
  }
  if (files.resume) {
    spdlog::info(
        "--resume: {} of {} {} already {} in {}{}{}", kept, lines.size(), words.items, words.done,
        files.output,
        kept < writer.recovered().size()
            ? fmt::format(" ({} error records run again)", writer.recovered().size() - kept)
            : std::string(),
        writer.dropped_bytes() > 0
            ? fmt::format(" (a partial last line of {} bytes was dropped)", writer.dropped_bytes())
            : std::string());
  }

  std::vector<std::size_t> to_run;  // input indices
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto recovered = writer.recovered().find(i);
    if (recovered == writer.recovered().end() || is_error_record(recovered->second)) {
      to_run.push_back(i);
    }
  }
  if (to_run.empty()) {
    finish_output(writer, files.output);
    if (lines.empty()) {
      spdlog::warn("{} has no {} (no non-blank lines): {} is empty", files.input, words.items,
                   files.output);
    } else {
      spdlog::info("every {} already has its result in {}", words.item, files.output);
    }
    return 0;
  }
  const std::optional<RunLengths> lengths = job.prepare(to_run);
  if (lengths) {
    plan_with_clear_errors([&] { plan_automatically(common, *lengths, engine_options); });
  }
  Engine engine(engine_options);
  if (lengths) job.check_smallest_fits(engine);

  std::size_t errors = 0;
  Progress progress(to_run.size(), job.expected_tokens());
  engine.set_job_progress({{}, [&](std::uint64_t tokens) { progress.tokens(tokens); }});
  const auto start = std::chrono::steady_clock::now();
  const int stopped = run_guarded(
      engine,
      [&] {
        job.run(engine, lines, [&](JobRecord record) {
          if (record.failed) ++errors;
          writer.put(record.json);
          progress.add();
        });
      },
      [&] {
        progress.finish();
        return resume_hint(JobState{files.output, lines.size(),
                                    lines.size() - to_run.size() + writer.written(),
                                    writer.written()});
      });
  if (stopped >= 0) return stopped;
  progress.finish();
  finish_output(writer, files.output);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("{} {} ({} failed), {} -> {}", to_run.size(), words.items, errors,
               job.totals(seconds), files.output);
  return errors == 0 ? 0 : 2;
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
