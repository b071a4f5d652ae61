// JSON Lines in and out for the batch commands: reading requests line by line (a bad line
// becomes an error record, never an abort) and writing results in input order as they finish.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <istream>
#include <map>
#include <string>
#include <vector>

namespace offgen::cli {

struct JsonlLine {
  std::size_t index = 0;         // position among the non-blank lines, from 0
  std::size_t line_number = 0;   // 1-based line in the file, for messages
  nlohmann::ordered_json value;  // the parsed object (null if `error` is set)
  std::string error;             // parse problem, naming the line
};

// Reads every non-blank line; lines that are not a JSON object get `error`. Throws offgen::Error
// only when the file itself cannot be read. "-" reads standard input.
std::vector<JsonlLine> read_jsonl(const std::filesystem::path& path);
// The same from a stream; messages call it `name`.
std::vector<JsonlLine> read_jsonl(std::istream& in, const std::string& name);

// Writes one JSON object per line, in index order: results that finish early wait until every
// lower index is written. Each line is written whole and flushed. Opening fails with a clear
// error before any work starts. "-" writes to standard output.
class OrderedJsonlWriter {
 public:
  explicit OrderedJsonlWriter(const std::filesystem::path& path);
  ~OrderedJsonlWriter();
  OrderedJsonlWriter(const OrderedJsonlWriter&) = delete;
  OrderedJsonlWriter& operator=(const OrderedJsonlWriter&) = delete;

  void put(std::size_t index, const nlohmann::ordered_json& record);
  std::size_t written() const { return next_; }

 private:
  void write_line(std::string line);
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::size_t next_ = 0;
  std::map<std::size_t, std::string> pending_;
};

// Dumps JSON with invalid UTF-8 replaced by U+FFFD, never throwing on text from a model.
std::string dump_json(const nlohmann::ordered_json& value);

}  // namespace offgen::cli

namespace offgen::cli {

// What to do with an output file that already holds something.
enum class ExistingOutput {
  refuse,     // an error before any work: hours of results are not lost to a forgotten --resume
  overwrite,  // start it afresh (--overwrite)
  resume,     // keep its whole records and append (--resume)
};

// The mode the --resume / --overwrite flags ask for (the CLI lets only one be given).
inline ExistingOutput existing_output(bool resume, bool overwrite) {
  if (resume) return ExistingOutput::resume;
  return overwrite ? ExistingOutput::overwrite : ExistingOutput::refuse;
}

// The whole records of a results file written by ResumableJsonlWriter, by input index (a later
// record of an index wins). A partial last line (a run killed mid-write) is left out and its bytes
// counted in `dropped_bytes`. Throws offgen::Error naming the file when it cannot be read, when a
// line before the last is not JSON, or when a line is not a record of ours (index_of gives -1).
std::map<std::size_t, nlohmann::ordered_json> read_jsonl_records(
    const std::filesystem::path& path,
    const std::function<std::int64_t(const nlohmann::ordered_json&)>& index_of,
    std::size_t* dropped_bytes = nullptr);

// An output file written as results finish, in any order, that survives being killed: each
// record is one whole line, written and flushed at once, so a crash leaves at most a partial
// last line. `--resume` reopens it: the partial line is cut off, the complete records are kept
// (their input indices come back from recover()), and new ones are appended. finish() rewrites
// the file in input order (a new file renamed over the old, so a crash there loses nothing).
class ResumableJsonlWriter {
 public:
  // index_of(record): the input index a record answers (-1: not one of ours). Throws
  // offgen::Error naming the file when it cannot be opened, when `existing` is refuse and the
  // file is not empty, or when resuming finds a line that is not one of ours.
  ResumableJsonlWriter(const std::filesystem::path& path, ExistingOutput existing,
                       std::function<std::int64_t(const nlohmann::ordered_json&)> index_of);
  ~ResumableJsonlWriter();
  ResumableJsonlWriter(const ResumableJsonlWriter&) = delete;
  ResumableJsonlWriter& operator=(const ResumableJsonlWriter&) = delete;

  // The records kept from the earlier run, by input index.
  const std::map<std::size_t, nlohmann::ordered_json>& recovered() const { return recovered_; }
  // Bytes of a partial last line cut off when resuming (0 if none).
  std::size_t dropped_bytes() const { return dropped_bytes_; }

  void put(const nlohmann::ordered_json& record);
  std::size_t written() const { return written_; }
  // Rewrites the file with every record in input order.
  void finish();

 private:
  void write_line(const std::string& line);
  std::filesystem::path path_;
  std::function<std::int64_t(const nlohmann::ordered_json&)> index_of_;
  std::FILE* file_ = nullptr;
  std::map<std::size_t, nlohmann::ordered_json> recovered_;
  std::size_t dropped_bytes_ = 0;
  std::size_t written_ = 0;
  bool created_ = false;   // the file did not exist before this writer
  bool finished_ = false;  // finish() ran: an empty output is the answer to an empty input
};

}  // namespace offgen::cli
