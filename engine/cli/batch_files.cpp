#include "engine/cli/batch_files.h"

#include "bench/rewritten_file.h"
#include "engine/cli/flag_names.h"
#include "engine/core/error.h"

namespace offgen::cli {
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

void check_input_file(const std::filesystem::path& input) {
  std::error_code ec;
  OFFGEN_CHECK(!std::filesystem::is_directory(input, ec),
               "--input {} is a folder: give a JSONL file", input.string());
}

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
        "(--output out.jsonl) and read that, or give --output - for records on standard output",
        output.string(), what);
  }
  return bench::file_behind_links(output);
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

}  // namespace offgen::cli
