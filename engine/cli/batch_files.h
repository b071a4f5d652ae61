// The steps of a batch job shared by one process (batch_job.cpp) and its ranks under MPI
// (rank_job.cpp): checking --input and --output, planning with clear errors, and putting the
// output in input order.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "engine/cli/jsonl.h"

namespace offgen::cli {

// --input must not be a folder: a clear error naming it, before any work.
void check_input_file(const std::filesystem::path& input);

// --output must be a file in an existing folder that the job can read back and replace: results
// are appended as they finish, then read again to put them in input order (and by --resume).
// Refused before any work, with an offgen::Error naming it: a missing folder; the --input file
// itself, however it is spelled (a link, another path to it); a pipe, FIFO, socket, terminal or
// other device (`--output /dev/stdout | cat` would wait forever on its own pipe). Returns the
// path to write: `output`, or the file it links to, so that the ordered copy replaces that file
// and not the link.
std::filesystem::path check_output_file(const std::filesystem::path& input,
                                        const std::filesystem::path& output);

// writer.finish() (the results put in input order); when that fails (a full disk under the
// ordered copy), the error adds that every result is in the output and --resume orders it.
void finish_output(ResumableJsonlWriter& writer, const std::string& output);

// Runs `plan` (plan_automatically); an out-of-memory error there comes from the quick
// calibration under small budgets and is reported as such, with what to do instead.
void plan_with_clear_errors(const std::function<void()>& plan);

}  // namespace offgen::cli
