// A batch job on several ranks (mpirun / srun; ranks.h): every rank reads the same input and
// what earlier runs answered, the lines still to answer are split by tokens into one contiguous
// run per rank, each rank answers its run with its own engine into its part file, and rank 0
// shows the progress of all, merges the parts into --output in input order, and reports. Ranks
// exchange only small JSON messages (rank_parts.h has the file side).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "engine/cli/batch_files.h"
#include "engine/cli/batch_format.h"
#include "engine/cli/batch_job.h"
#include "engine/cli/flag_names.h"
#include "engine/cli/progress.h"
#include "engine/cli/rank_parts.h"
#include "engine/cli/ranks.h"
#include "engine/cli/request_fields.h"
#include "engine/cli/signals.h"
#include "engine/core/error.h"

namespace offgen::cli {
namespace {

using Clock = std::chrono::steady_clock;
using Records = std::map<std::size_t, nlohmann::ordered_json>;

// How one rank's share ended, as it reports it to rank 0.
struct RankOutcome {
  int code = 0;           // 0 every record a result, 2 some error records, 1 failed, 128+N stopped
  std::size_t share = 0;  // requests it was to answer
  std::size_t written = 0;   // records it wrote to its part
  std::size_t errors = 0;    // of them, error records
  std::uint64_t tokens = 0;  // tokens its engine processed
  std::string totals;        // BatchJob::totals of its run
  std::string message;       // why it failed or stopped

  bool finished() const { return code == 0 || code == 2; }

  nlohmann::json to_json() const {
    return {{"code", code},     {"share", share},   {"written", written}, {"errors", errors},
            {"tokens", tokens}, {"totals", totals}, {"message", message}};
  }
  static RankOutcome from_json(const nlohmann::json& j) {
    RankOutcome o;
    o.code = j.at("code").get<int>();
    o.share = j.at("share").get<std::size_t>();
    o.written = j.at("written").get<std::size_t>();
    o.errors = j.at("errors").get<std::size_t>();
    o.tokens = j.at("tokens").get<std::uint64_t>();
    o.totals = j.at("totals").get<std::string>();
    o.message = j.at("message").get<std::string>();
    return o;
  }
};

// A rank's side of the progress: rank 0 draws the bar of the whole job and folds in what the
// others report; the others send their counts to rank 0 at most once a second.
class JobProgress {
 public:
  JobProgress(Ranks& ranks, std::size_t total) : ranks_(ranks), me_(ranks.info()) {
    if (me_.rank == 0) {
      bar_.emplace(total, 0);
      done_.assign(static_cast<std::size_t>(me_.size), 0);
      tokens_.assign(static_cast<std::size_t>(me_.size), 0);
    }
  }

  // This rank's share will process about `tokens` tokens.
  void expect(std::uint64_t tokens) {
    if (bar_) {
      bar_->expect(tokens);
    } else {
      ranks_.send_to_root(nlohmann::json{{"expect", tokens}}.dump());
    }
  }
  void tokens(std::uint64_t count) {
    own_tokens_ += count;
    if (bar_) bar_->tokens(count);
    poll(false);
  }
  void answered() {
    ++own_done_;
    if (bar_) bar_->add();
    poll(false);
  }

  // Rank 0: folds in what has arrived. Others: sends the counts when a second has passed (or
  // `now`).
  void poll(bool now) {
    if (!bar_) {
      if (!now && Clock::now() - last_sent_ < std::chrono::seconds(1)) return;
      last_sent_ = Clock::now();
      ranks_.send_to_root(nlohmann::json{{"done", own_done_}, {"tokens", own_tokens_}}.dump());
      return;
    }
    while (auto message = ranks_.receive()) {
      const auto [rank, text] = *message;
      const auto r = static_cast<std::size_t>(rank);
      const nlohmann::json j = nlohmann::json::parse(text);
      if (j.contains("expect")) bar_->expect(j["expect"].get<std::uint64_t>());
      if (j.contains("done")) {
        const auto done = j["done"].get<std::size_t>();
        const auto tokens = j["tokens"].get<std::uint64_t>();
        bar_->tokens(tokens - std::min(tokens, tokens_[r]));
        bar_->add(done - std::min(done, done_[r]));
        done_[r] = std::max(done_[r], done);
        tokens_[r] = std::max(tokens_[r], tokens);
      }
      if (j.contains("outcome")) outcomes_[rank] = RankOutcome::from_json(j["outcome"]);
    }
  }

  // Others: sends the outcome (after the last counts) and waits until rank 0 has it.
  void report(const RankOutcome& outcome) {
    poll(true);
    ranks_.send_to_root(nlohmann::json{{"outcome", outcome.to_json()}}.dump());
    ranks_.flush();
  }

  // Rank 0: waits for every other rank's outcome; after a stop signal, only `grace` more.
  const std::map<int, RankOutcome>& outcomes(std::chrono::milliseconds grace) {
    const auto stop_by = Clock::now() + grace;
    while (static_cast<int>(outcomes_.size()) < me_.size - 1) {
      if (StopSignals::requested() && Clock::now() > stop_by) break;
      poll(false);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (bar_) bar_->finish();
    return outcomes_;
  }

  std::uint64_t own_tokens() const { return own_tokens_; }

 private:
  Ranks& ranks_;
  RankInfo me_;
  std::optional<Progress> bar_;
  std::vector<std::size_t> done_;  // rank 0: the last counts each rank sent
  std::vector<std::uint64_t> tokens_;
  std::map<int, RankOutcome> outcomes_;
  std::size_t own_done_ = 0;
  std::uint64_t own_tokens_ = 0;
  Clock::time_point last_sent_ = Clock::now();
};

// What earlier runs answered (--resume), after checking that --output and its parts may be
// used: without --resume or --overwrite they must be empty. Every rank runs this before any
// writes.
Records earlier_records(const std::filesystem::path& output, const JobFiles& files) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!files.resume && !files.overwrite) {
    const auto bytes = fs::file_size(output, ec);
    OFFGEN_CHECK(ec || bytes == 0,
                 "{} already holds {} bytes of results; add --resume to keep them and run only "
                 "the rest, or --overwrite to replace them",
                 output.string(), bytes);
    earlier_parts(output, files.output, false);
  }
  if (!files.resume) return {};
  return answered_records(output, record_index);
}

// Rank 0, with --overwrite, before any rank writes: empties --output and removes the parts no
// rank of this run rewrites.
void clear_earlier_output(const std::filesystem::path& output, int ranks) {
  std::error_code ec;
  if (std::filesystem::exists(output, ec)) std::filesystem::resize_file(output, 0, ec);
  OFFGEN_CHECK(!ec, "--overwrite: cannot empty {}: {}", output.string(), ec.message());
  for (const auto& [rank, part] : part_files(output)) {
    if (rank >= ranks) std::filesystem::remove(part, ec);
  }
}

// Rank 0: every record of --output and its parts into --output in input order, then the parts
// removed. Returns the records.
Records merge_parts(const std::filesystem::path& output, const std::string& output_flag,
                    std::size_t lines) {
  ResumableJsonlWriter merged(output, ExistingOutput::resume, record_index);
  Records records = merged.recovered();
  const auto parts = part_files(output);
  for (const auto& [rank, part] : parts) {
    for (auto& [index, record] : read_jsonl_records(part, record_index)) {
      const auto it = records.find(index);
      if (it != records.end() && !(is_error_record(it->second) && !is_error_record(record))) {
        continue;
      }
      merged.put(record);
      records[index] = std::move(record);
    }
  }
  std::vector<std::size_t> missing;
  for (std::size_t i = 0; i < lines; ++i) {
    if (!records.contains(i)) missing.push_back(i);
  }
  OFFGEN_CHECK(missing.empty(),
               "merging the parts of {}: requests {} have no record although every rank finished; "
               "the parts are kept, and --resume answers them",
               output_flag, describe_indices(missing));
  finish_output(merged, output_flag);
  std::error_code ec;
  for (const auto& [rank, part] : parts) std::filesystem::remove(part, ec);
  return records;
}

// Rank 0, when some rank did not finish: what is answered (on disk, whoever wrote it) and what
// is not.
std::string unanswered_hint(const std::filesystem::path& output, const std::string& output_flag,
                            std::size_t lines, const JobWords& words) {
  Records records;
  try {
    records = answered_records(output, record_index);
  } catch (const Error& e) {
    return fmt::format("the results could not be read back ({}); --resume reads them again",
                       e.what());
  }
  std::vector<std::size_t> left;
  for (std::size_t i = 0; i < lines; ++i) {
    const auto it = records.find(i);
    if (it == records.end() || is_error_record(it->second)) left.push_back(i);
  }
  return fmt::format(
      "{} of {} {} are {} in {} and its part files {}.part-*; not {}: {} {} (input indices from "
      "0). Run the same command with --resume (with any number of ranks) to answer them",
      lines - left.size(), lines, words.items, words.done, output_flag, output_flag, words.done,
      words.items, describe_indices(left));
}

// Runs this rank's share; never throws (a failure is its outcome).
RankOutcome run_share(BatchJob& job, const CommonOptions& common, EngineOptions engine_options,
                      const std::vector<JsonlLine>& lines, const std::vector<std::size_t>& share,
                      ResumableJsonlWriter& writer, JobProgress& progress, const RankInfo& me,
                      const std::string& part) {
  RankOutcome outcome;
  outcome.share = share.size();
  if (share.empty()) return outcome;
  const auto start = Clock::now();
  try {
    const std::optional<RunLengths> lengths = job.prepare(share);
    if (lengths) {
      plan_with_clear_errors([&] { plan_automatically(common, *lengths, engine_options); });
    }
    Engine engine(engine_options);
    if (lengths) job.check_smallest_fits(engine);
    progress.expect(job.expected_tokens());
    engine.set_job_progress({{}, [&](std::uint64_t tokens) { progress.tokens(tokens); }});
    const int stopped = run_guarded(
        engine,
        [&] {
          job.run(engine, lines, [&](JobRecord record) {
            if (record.failed) ++outcome.errors;
            writer.put(record.json);
            ++outcome.written;
            progress.answered();
          });
        },
        [&] {
          return fmt::format("rank {} wrote {} of its {} records to {}", me.rank, outcome.written,
                             share.size(), part);
        });
    if (stopped >= 0) {
      outcome.code = stopped;
      outcome.message =
          fmt::format("stopped by {}", StopSignals::signal_name(StopSignals::signal_number()));
    } else {
      outcome.code = outcome.errors == 0 ? 0 : 2;
    }
  } catch (const Error& e) {
    outcome.code = 1;
    outcome.message = flag_message(e);
    spdlog::error("{}", outcome.message);
  } catch (const std::exception& e) {
    outcome.code = 1;
    outcome.message = fmt::format("unexpected error: {}", e.what());
    spdlog::error("{}", outcome.message);
  }
  outcome.tokens = progress.own_tokens();
  outcome.totals = job.totals(std::chrono::duration<double>(Clock::now() - start).count());
  return outcome;
}

}  // namespace

int run_batch_job_on_ranks(BatchJob& job, const CommonOptions& common, const JobFiles& files,
                           Ranks& ranks) {
  namespace fs = std::filesystem;
  const RankInfo me = ranks.info();
  const JobWords words = job.words();
  StopSignals signals;  // over the whole job, the waits for other ranks included

  // Every rank reads and checks the same files before any rank writes; a rank that cannot start
  // stops them all before any work.
  std::string problem;
  std::vector<JsonlLine> lines;
  fs::path output;
  EngineOptions engine_options;
  Records earlier;
  // The parsed requests keep pointers to the config and tokenizer (a stop string's check decodes
  // through it), so both live as long as the job, not only while it is parsed.
  ModelConfig config;
  std::unique_ptr<Tokenizer> tokenizer;
  try {
    // mpirun hands standard input to rank 0 only, and every rank writes its own part file.
    OFFGEN_CHECK(files.input != "-" && files.output != "-",
                 "--input - and --output - run in one process: under mpirun / srun give files");
    check_input_file(files.input);
    lines = read_jsonl(files.input);
    output = check_output_file(files.input, files.output);
    engine_options = common.engine_options();
    config = model_config(engine_options.model);
    tokenizer = load_tokenizer(engine_options);
    job.parse(lines, config, tokenizer.get());
    earlier = earlier_records(output, files);
    for (const auto& [index, record] : earlier) {
      OFFGEN_CHECK(index < lines.size(),
                   "--resume: {} (or a part file beside it) answers {} {}, but {} has only {} {}; "
                   "is it the output of this input?",
                   files.output, words.item, index, files.input, lines.size(), words.items);
      job.check_recovered(lines[index], record, files.output);
    }
  } catch (const Error& e) {
    problem = flag_message(e);
  } catch (const std::exception& e) {
    problem = fmt::format("unexpected error: {}", e.what());
  }
  if (!ranks.all(problem.empty())) {
    if (!problem.empty()) fail("{}", problem);
    fail("another rank could not start the job (its message says why)");
  }
  if (me.rank == 0 && files.overwrite) clear_earlier_output(output, me.size);
  if (!ranks.all(true)) fail("another rank could not start the job");  // output cleared first

  std::vector<std::size_t> to_run;
  std::vector<std::uint64_t> work;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto it = earlier.find(i);
    if (it == earlier.end() || is_error_record(it->second)) {
      to_run.push_back(i);
      work.push_back(job.work(i));
    }
  }
  const auto runs = split_by_work(work, me.size);
  const auto [begin, end] = runs[static_cast<std::size_t>(me.rank)];
  const std::vector<std::size_t> share(to_run.begin() + static_cast<std::ptrdiff_t>(begin),
                                       to_run.begin() + static_cast<std::ptrdiff_t>(end));
  if (me.rank == 0) {
    if (files.resume) {
      spdlog::info("--resume: {} of {} {} already {} in {} and its part files; {} run now{}",
                   lines.size() - to_run.size(), lines.size(), words.items, words.done,
                   files.output, to_run.size(),
                   to_run.empty() ? std::string() : ": " + describe_indices(to_run));
    }
    std::vector<std::string> split;
    for (int r = 0; r < me.size; ++r) {
      const auto [b, e] = runs[static_cast<std::size_t>(r)];
      std::uint64_t tokens = 0;
      for (std::size_t k = b; k < e; ++k) tokens += work[k];
      split.push_back(
          b == e
              ? fmt::format("rank {}: none", r)
              : fmt::format("rank {}: {} (about {} tokens)", r,
                            describe_indices({to_run.begin() + b, to_run.begin() + e}, 3), tokens));
    }
    spdlog::info("{} ranks share {} {} by tokens: {}", me.size, to_run.size(), words.items,
                 fmt::join(split, "; "));
  }

  const fs::path part = part_path(output, me.rank);
  std::optional<ResumableJsonlWriter> writer;
  RankOutcome mine;
  try {
    writer.emplace(part, files.resume ? ExistingOutput::resume : ExistingOutput::overwrite,
                   record_index);
  } catch (const Error& e) {
    mine.code = 1;
    mine.message = flag_message(e);
    spdlog::error("{}", mine.message);
  }
  JobProgress progress(ranks, to_run.size());
  const auto start = Clock::now();
  if (writer) {
    mine =
        run_share(job, common, engine_options, lines, share, *writer, progress, me, part.string());
  }

  if (me.rank != 0) {
    progress.report(mine);
    ranks.barrier();  // rank 0 has merged: the job's exit code is rank 0's
    if (StopSignals::requested()) MpiSession::skip_finalize();
    return mine.finished() ? 0 : mine.code;
  }

  if (StopSignals::requested()) {
    // mpirun / srun stop every rank when one dies, or on Ctrl-C, and kill them soon after: say
    // at once what is answered, from the files, without waiting for the others' reports.
    spdlog::warn(
        "the job stopped ({} reached rank 0; when a rank died, mpirun / srun names it "
        "above): {}",
        StopSignals::signal_name(StopSignals::signal_number()),
        unanswered_hint(output, files.output, lines.size(), words));
    MpiSession::skip_finalize();
    return StopSignals::exit_code(StopSignals::signal_number());
  }
  std::map<int, RankOutcome> outcomes = progress.outcomes(std::chrono::milliseconds(1000));
  outcomes[0] = mine;
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  bool all_finished = true;
  int code = 0;
  std::size_t errors = 0;
  for (int r = 0; r < me.size; ++r) {
    const auto it = outcomes.find(r);
    if (it == outcomes.end()) {
      spdlog::error("rank {} did not report: it died, or the job was stopped before it could", r);
      all_finished = false;
      code = code == 0 ? 1 : code;
      continue;
    }
    const RankOutcome& o = it->second;
    errors += o.errors;
    if (!o.finished()) {
      all_finished = false;
      if (r != 0) spdlog::error("rank {}: {}", r, o.message);
      code = o.code > 128 ? o.code : (code == 0 ? o.code : code);
    } else if (o.share > 0) {
      spdlog::info("rank {}: {} {} ({} failed), {}", r, o.share, words.items, o.errors, o.totals);
    }
  }
  if (all_finished) {
    try {
      merge_parts(output, files.output, lines.size());
      spdlog::info("{} {} ({} failed) on {} ranks in {:.2f} s -> {}", to_run.size(), words.items,
                   errors, me.size, seconds, files.output);
      code = errors == 0 ? 0 : 2;
    } catch (const Error& e) {
      spdlog::error("{}", flag_message(e));
      code = 1;
    }
  } else {
    spdlog::warn("{}", unanswered_hint(output, files.output, lines.size(), words));
    if (StopSignals::requested()) code = StopSignals::exit_code(StopSignals::signal_number());
  }
  ranks.barrier();
  if (StopSignals::requested()) MpiSession::skip_finalize();
  return code;
}

}  // namespace offgen::cli
