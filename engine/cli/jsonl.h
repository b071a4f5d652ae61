// JSON Lines in and out for the batch commands: reading requests line by line (a bad line
// becomes an error record, never an abort) and writing results in input order as they finish.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
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
// only when the file itself cannot be read.
std::vector<JsonlLine> read_jsonl(const std::filesystem::path& path);

// Writes one JSON object per line, in index order: results that finish early wait until every
// lower index is written. Each line is written whole and flushed. Opening fails with a clear
// error before any work starts.
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
