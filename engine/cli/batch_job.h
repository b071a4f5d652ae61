// The batch jobs (generate, score) as one skeleton: run_batch_job checks --input and --output,
// reads the lines, keeps what an interrupted run already answered (--resume), plans for the rest,
// loads the engine, runs it under a stop-signal guard with progress, and puts the output in input
// order; each job supplies only what differs (a BatchJob: how it parses a line, checks a kept
// record, sizes its requests, runs the engine and writes a result). Also what the other
// long-running commands share: the run under the stop-signal guard (bench and compare run under
// it too) and the check that one sequence fits.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/cli/commands.h"
#include "engine/cli/jsonl.h"
#include "engine/runtime/engine.h"
#include "engine/tokenizer/tokenizer.h"

namespace offgen::cli {

// What a batch job's messages call its lines: generate answers requests, score scores texts.
struct JobWords {
  std::string item;   // "request"
  std::string items;  // "requests"
  std::string done;   // "answered"
};

// One line's output record, and whether it reports an error (the job then exits 2).
struct JobRecord {
  nlohmann::ordered_json json;
  bool failed = false;
  // generate: the engine's result of each choice, as the record reports them (in-memory drivers
  // read what the JSON leaves out: the ids of the top log-probs).
  std::vector<GenerationResult> results;
};

// A record of an earlier run that reports an error: --resume runs its line again (a bad line
// fails again at once; one that did not fit may fit now).
bool is_error_record(const nlohmann::ordered_json& record);

// "token slots used 0.64 (14 of 22 computed; wasted: 5 padding prompts to their block's longest,
// 3 rows of sequences that had finished)", for a job's closing line.
std::string describe_slot_use(const SlotUse& slots);

// What one batch job does that another does not. run_batch_job calls these in the order listed,
// each at most once (prepare and what follows only when some line runs).
class BatchJob {
 public:
  virtual ~BatchJob() = default;

  virtual JobWords words() const = 0;

  // Reads every input line (line.index = its position) into the request the engine runs for it.
  // A line that cannot run keeps why: it runs as a request the engine rejects at once, without
  // work, and its record reports the reason.
  virtual void parse(const std::vector<JsonlLine>& lines, const ModelConfig& config,
                     const Tokenizer* tokenizer) = 0;

  // Throws offgen::Error (naming `output`) when `record`, which --resume keeps from `output` for
  // `line`, cannot be an answer to this input.
  virtual void check_recovered(const JsonlLine& line, const nlohmann::ordered_json& record,
                               const std::string& output) const = 0;

  // What line `index` (after parse) costs, in tokens: ranks under MPI split the lines so that
  // their sums are equal. A line that cannot run costs 1 (it is answered at once).
  virtual std::uint64_t work(std::size_t index) const = 0;

  // The lines this run answers (input indices, in order): the engine's request k is the request
  // of line to_run[k]. Returns the lengths to plan for, or none when not one of them can run
  // (then nothing needs memory).
  virtual std::optional<RunLengths> prepare(const std::vector<std::size_t>& to_run) = 0;

  // Throws offgen::Error before any work when not even the smallest request fits the memory
  // budgets (check_one_sequence_fits). Called only when prepare returned lengths.
  virtual void check_smallest_fits(Engine& engine) const = 0;

  // The most tokens the requests process: the base of the progress's rate and ETA.
  virtual std::uint64_t expected_tokens() const = 0;

  // Runs the engine over the requests; hands each one's record to `put` as it finishes. `lines`:
  // those parse() read.
  virtual void run(Engine& engine, const std::vector<JsonlLine>& lines,
                   const std::function<void(JobRecord)>& put) = 0;

  // The token ids line `index` runs (after parse): each prompt of a generate line, the text of a
  // score line; none for a line that cannot run.
  virtual std::vector<std::vector<std::int32_t>> line_tokens(std::size_t index) const = 0;

  // What the finished run did, for its summary line after "N requests (M failed), " — e.g.
  // "40 tokens generated in 1.20 s (33.3 tokens/s)". `seconds`: the run's wall time.
  virtual std::string totals(double seconds) const = 0;
};

// The files of a batch job and what to do with an output that already holds results.
struct JobFiles {
  std::string input;
  std::string output;
  bool resume = false;
  bool overwrite = false;
};

// Runs `job` over files.input into files.output with the model and placement of `common`.
// Refused before any work, with an offgen::Error naming the flag: an --input that is a folder; an
// --output in a missing folder, that is the input file (however it is spelled), that cannot be
// read back (a pipe, FIFO, socket, terminal or other device), or that holds results without
// --resume or --overwrite; a --resume output that is not this input's; a placement in which not
// even the smallest request fits. Results are appended as they finish (ResumableJsonlWriter),
// then put in input order. Returns the exit code: 0 when every record is a result, 2 when some
// report an error, 128 + the signal when a stop signal ended the run (what is kept, and how
// --resume answers the rest, is logged); a failure during the run is rethrown with the same.
// Under mpirun / srun with several ranks (ranks.h) this is run_batch_job_on_ranks; parts that
// such a run left beside --output (rank_parts.h) count as output here: --resume keeps their
// records, --overwrite removes them, and without either they refuse the run as --output does.
int run_batch_job(BatchJob& job, const CommonOptions& common, const JobFiles& files);

// generate's and score's jobs (generate_command.cpp, score_command.cpp), for drivers other than
// run_generate / run_score (engine/cli/session.h). A score job reads `options` as it runs: they
// must outlive it.
std::unique_ptr<BatchJob> make_generate_job(const GenerateOptions& options);
std::unique_ptr<BatchJob> make_score_job(const ScoreOptions& options);

class Ranks;
// run_batch_job over the ranks of an MPI job (rank_job.cpp): the lines still to answer are split
// by tokens (BatchJob::work) into one contiguous run per rank; rank r writes its records to
// `<output>.part-<r>` as they finish; rank 0 shows everyone's progress, then merges every part
// into --output in input order and removes them. A rank that fails, stops or dies leaves its
// finished records: rank 0 says which requests are not answered, and --resume (with any number of
// ranks) runs only those. The exit code (rank 0's) is as run_batch_job's; other ranks exit 0
// unless stopped.
int run_batch_job_on_ranks(BatchJob& job, const CommonOptions& common, const JobFiles& files,
                           Ranks& ranks);

// Fails before any request runs (offgen::Error) when not even one sequence of the smallest request
// (shortest prompt, fewest new tokens / decode steps) fits the memory budgets with the engine's
// placement: every request would fail alone. `make` builds that runner (Engine::make_runner).
void check_one_sequence_fits(const std::function<void()>& make, const std::string& what);

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
// The same for work that makes its engines itself (compare --storages loads one per weight
// storage): each must take StopSignals::requested (signals.h) as its interrupt check.
int run_guarded(const std::function<void()>& work, const std::function<std::string()>& kept);

}  // namespace offgen::cli
