// What the batch jobs (generate, score) share to fail clearly or keep going: checks before any
// work, the run under a stop-signal guard (bench and compare run under it too), and the one
// message a stopped or failed run ends with (how many requests are answered, and how `--resume`
// answers the rest).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>

#include "engine/cli/jsonl.h"
#include "engine/runtime/engine.h"

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

// Fails before any request runs (offgen::Error) when not even one sequence of the smallest request
// (shortest prompt, fewest new tokens / decode steps) fits the memory budgets with the engine's
// placement: every request would fail alone. `make` builds that runner (Engine::make_runner).
void check_one_sequence_fits(const std::function<void()>& make, const std::string& what);

// Runs `plan` (plan_automatically); an out-of-memory error there comes from the quick
// calibration under small budgets and is reported as such, with what to do instead.
void plan_with_clear_errors(const std::function<void()>& plan);

// Where an interrupted or failed batch job stands.
struct JobState {
  std::string output;        // --output
  std::size_t total = 0;     // requests in the input
  std::size_t answered = 0;  // of them, with a record in the output
  std::size_t this_run = 0;  // of those, written by this run
};
// "13 of 200 requests are answered in out.jsonl (13 by this run); run the same command with
// --resume to answer the other 187".
std::string resume_hint(const JobState& state);

// Runs `work` (the engine's pass over the requests, bench's rows, compare's cells) with SIGINT /
// SIGTERM / SIGHUP caught:
//  - finished: returns -1;
//  - stopped by a signal: logs "stopped by SIGINT: " and what `kept()` says is kept (and how to
//    go on), and returns the exit code (128 + the signal);
//  - failed (offgen::Error, e.g. a write error on the output or a device error): rethrows it with
//    what `kept()` says appended.
// `kept()` is read after the work ends. `engine` gets the stop flag as its interrupt check.
int run_guarded(Engine& engine, const std::function<void()>& work,
                const std::function<std::string()>& kept);

}  // namespace offgen::cli
