#include "engine/cli/batch_job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <new>

#include "bench/rewritten_file.h"
#include "engine/cli/signals.h"
#include "engine/core/error.h"

namespace offgen::cli {

void check_input_file(const std::filesystem::path& input) {
  std::error_code ec;
  OFFGEN_CHECK(!std::filesystem::is_directory(input, ec),
               "--input {} is a folder: give a JSONL file", input.string());
}

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

namespace {

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

}  // namespace

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

void check_one_sequence_fits(const std::function<void()>& make, const std::string& what) {
  try {
    make();
  } catch (const OutOfMemoryError& e) {
    fail(
        "nothing can run: one sequence of {} does not fit the memory budgets with this "
        "placement ({}). Raise --gpu-mem / --cpu-mem, keep less on the gpu tier (--weights-gpu, "
        "--kv-gpu, --cpu-attention), shrink the KV cache (--policy with --kv-budget), or give no "
        "placement flags and let the planner choose",
        what, e.what());
  }
}

void plan_with_clear_errors(const std::function<void()>& plan) {
  try {
    plan();
  } catch (const OutOfMemoryError& e) {
    fail(
        "the planner needs a machine profile, and the quick calibration that makes one does not "
        "fit the memory budgets ({}). Run `offgen calibrate` once without --gpu-mem / --cpu-mem "
        "(or give --profile FILE), or give placement flags (--batch-size, --weights-gpu, ...)",
        e.what());
  }
}

std::string resume_hint(const JobState& s) {
  const std::size_t left = s.total - std::min(s.answered, s.total);
  return fmt::format(
      "{} of {} requests are answered in {} ({} by this run); run the same command with --resume "
      "to answer the other {}",
      s.answered, s.total, s.output, s.this_run, left);
}

int run_guarded(Engine& engine, const std::function<void()>& work,
                const std::function<std::string()>& kept) {
  StopSignals signals;
  engine.set_interrupt_check(&StopSignals::requested);
  try {
    work();
  } catch (const Interrupted&) {
    engine.set_interrupt_check({});
    const int signal = StopSignals::signal_number();
    spdlog::warn("stopped by {}: {}", StopSignals::signal_name(signal), kept());
    return StopSignals::exit_code(signal);
  } catch (const Error& e) {
    engine.set_interrupt_check({});
    throw Error(fmt::format("{}\n{}", e.what(), kept()));
  } catch (const std::bad_alloc&) {
    engine.set_interrupt_check({});
    throw Error(fmt::format("out of host memory\n{}", kept()));
  } catch (const std::exception& e) {
    engine.set_interrupt_check({});
    throw Error(fmt::format("unexpected error: {}\n{}", e.what(), kept()));
  }
  engine.set_interrupt_check({});
  return -1;
}

}  // namespace offgen::cli
