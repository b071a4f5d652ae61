#include "engine/cli/jsonl.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "engine/core/error.h"

namespace offgen::cli {

std::vector<JsonlLine> read_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  OFFGEN_CHECK(in.good(), "cannot read input file {}: {}", path.string(), std::strerror(errno));
  std::vector<JsonlLine> lines;
  std::string text;
  std::size_t line_number = 0;
  while (std::getline(in, text)) {
    ++line_number;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    JsonlLine line;
    line.index = lines.size();
    line.line_number = line_number;
    try {
      line.value = nlohmann::ordered_json::parse(text);
      if (!line.value.is_object()) {
        line.error = fmt::format("{} line {}: expected a JSON object, got {}", path.string(),
                                 line_number, line.value.type_name());
        line.value = nullptr;
      }
    } catch (const nlohmann::ordered_json::parse_error& e) {
      line.error =
          fmt::format("{} line {}: invalid JSON ({})", path.string(), line_number, e.what());
    }
    lines.push_back(std::move(line));
  }
  OFFGEN_CHECK(in.eof(), "error while reading {}", path.string());
  return lines;
}

std::string dump_json(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

OrderedJsonlWriter::OrderedJsonlWriter(const std::filesystem::path& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "wb");
  OFFGEN_CHECK(file_ != nullptr, "cannot write output file {}: {}", path.string(),
               std::strerror(errno));
}

OrderedJsonlWriter::~OrderedJsonlWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void OrderedJsonlWriter::write_line(std::string line) {
  line += '\n';
  const bool ok =
      std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fflush(file_) == 0;
  OFFGEN_CHECK(ok, "writing {} failed: {}", path_.string(), std::strerror(errno));
}

void OrderedJsonlWriter::put(std::size_t index, const nlohmann::ordered_json& record) {
  if (index != next_) {
    pending_[index] = dump_json(record);
    return;
  }
  write_line(dump_json(record));
  ++next_;
  for (auto it = pending_.find(next_); it != pending_.end(); it = pending_.find(next_)) {
    write_line(std::move(it->second));
    pending_.erase(it);
    ++next_;
  }
}

}  // namespace offgen::cli
