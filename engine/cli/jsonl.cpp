#include "engine/cli/jsonl.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "engine/core/error.h"

namespace offgen::cli {
namespace {

// Deeper than any request needs. Copying or printing a value recurses once per level, so a line
// nested a million deep would overflow the stack; it becomes an error record instead.
constexpr int kMaxLineDepth = 256;

struct TooDeep {};

bool limit_depth(int depth, nlohmann::ordered_json::parse_event_t event,
                 const nlohmann::ordered_json&) {
  using Event = nlohmann::ordered_json::parse_event_t;
  if ((event == Event::object_start || event == Event::array_start) && depth >= kMaxLineDepth) {
    throw TooDeep{};
  }
  return true;
}

}  // namespace

std::vector<JsonlLine> read_jsonl(const std::filesystem::path& path) {
  if (path == "-") return read_jsonl(std::cin, "standard input");
  std::ifstream in(path, std::ios::binary);
  OFFGEN_CHECK(in.good(), "cannot read input file {}: {}", path.string(), std::strerror(errno));
  return read_jsonl(in, path.string());
}

std::vector<JsonlLine> read_jsonl(std::istream& in, const std::string& name) {
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
      line.value = nlohmann::ordered_json::parse(text, limit_depth);
      if (!line.value.is_object()) {
        line.error = fmt::format("{} line {}: expected a JSON object, got {}", name, line_number,
                                 line.value.type_name());
        line.value = nullptr;
      }
    } catch (const nlohmann::ordered_json::exception& e) {
      // parse_error, or out_of_range for a number like 1e400
      line.error = fmt::format("{} line {}: invalid JSON ({})", name, line_number, e.what());
    } catch (const TooDeep&) {
      line.error = fmt::format("{} line {}: JSON nested more than {} levels deep", name,
                               line_number, kMaxLineDepth);
    }
    lines.push_back(std::move(line));
  }
  OFFGEN_CHECK(in.eof(), "error while reading {}", name);
  return lines;
}

std::string dump_json(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

OrderedJsonlWriter::OrderedJsonlWriter(const std::filesystem::path& path) : path_(path) {
  if (path == "-") {
    file_ = stdout;
    path_ = "standard output";
    return;
  }
  file_ = std::fopen(path.c_str(), "wb");
  OFFGEN_CHECK(file_ != nullptr, "cannot write output file {}: {}", path.string(),
               std::strerror(errno));
}

OrderedJsonlWriter::~OrderedJsonlWriter() {
  if (file_ != nullptr && file_ != stdout) std::fclose(file_);
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

namespace offgen::cli {

std::map<std::size_t, nlohmann::ordered_json> read_jsonl_records(
    const std::filesystem::path& path,
    const std::function<std::int64_t(const nlohmann::ordered_json&)>& index_of,
    std::size_t* dropped_bytes) {
  std::ifstream in(path, std::ios::binary);
  OFFGEN_CHECK(in.good(), "--resume: cannot read {}: {}", path.string(), std::strerror(errno));
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::size_t, nlohmann::ordered_json> records;
  std::size_t start = 0;
  std::size_t line_number = 0;
  while (start < content.size()) {
    const std::size_t end = content.find('\n', start);
    if (end == std::string::npos) break;  // no newline: a partial last line
    ++line_number;
    const std::string_view text(content.data() + start, end - start);
    if (text.find_first_not_of(" \t\r") != std::string_view::npos) {
      nlohmann::ordered_json record;
      try {
        record = nlohmann::ordered_json::parse(text);
      } catch (const nlohmann::ordered_json::exception&) {
        // Whole lines are written at once, so only the last can be torn.
        OFFGEN_CHECK(content.find('\n', end + 1) == std::string::npos,
                     "--resume: {} line {} is not JSON; is this the output of this command?",
                     path.string(), line_number);
        break;
      }
      const std::int64_t index = index_of(record);
      OFFGEN_CHECK(index >= 0, "--resume: {} line {} is not a result record of this command",
                   path.string(), line_number);
      records[static_cast<std::size_t>(index)] = std::move(record);  // a later record wins
    }
    start = end + 1;
  }
  if (dropped_bytes != nullptr) *dropped_bytes = content.size() - start;
  return records;
}

namespace {

// Opens (creating) `path` for writing and takes its exclusive lock, so that a second run writing
// the same output — which would cut this one's partial line on --resume, or truncate it — stops
// with an error instead of interleaving with it. The lock lasts while the descriptor is open. A
// lock taken on a file that meanwhile lost the name (the other run renamed its ordered copy over
// it, or removed it) is let go and the path opened again. A file system without locks (some
// network ones) is written unlocked, with a warning.
int open_locked(const std::filesystem::path& path) {
  for (int attempt = 0;; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    OFFGEN_CHECK(fd >= 0, "cannot write output file {}: {}", path.string(), std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      if (error == ENOLCK || error == EOPNOTSUPP || error == ENOSYS) {
        spdlog::warn("{} cannot be locked ({}): a second run on it would not be stopped",
                     path.string(), std::strerror(error));
        return fd;
      }
      ::close(fd);
      OFFGEN_CHECK(error != EWOULDBLOCK,
                   "{} is being written by another run (it holds the file's lock): wait for it "
                   "to finish, or choose another output",
                   path.string());
      fail("cannot lock output file {}: {}", path.string(), std::strerror(error));
    }
    struct stat locked {};
    struct stat named {};
    const bool same = ::fstat(fd, &locked) == 0 && ::stat(path.c_str(), &named) == 0 &&
                      locked.st_dev == named.st_dev && locked.st_ino == named.st_ino;
    if (same) return fd;
    ::close(fd);
    OFFGEN_CHECK(attempt < 8, "{} keeps being replaced by another run: choose another output",
                 path.string());
  }
}

// The stream of a locked descriptor, appending (the descriptor, and the lock, close with it).
std::FILE* append_stream(int fd, const std::filesystem::path& path) {
  std::FILE* file = ::fdopen(fd, "ab");
  if (file == nullptr) {
    const int error = errno;
    ::close(fd);
    fail("cannot write output file {}: {}", path.string(), std::strerror(error));
  }
  return file;
}

}  // namespace

ResumableJsonlWriter::ResumableJsonlWriter(
    const std::filesystem::path& path, ExistingOutput existing,
    std::function<std::int64_t(const nlohmann::ordered_json&)> index_of)
    : path_(path), index_of_(std::move(index_of)) {
  namespace fs = std::filesystem;
  const bool resume = existing == ExistingOutput::resume;
  std::error_code size_error;
  const auto existing_bytes = fs::file_size(path, size_error);
  OFFGEN_CHECK(existing != ExistingOutput::refuse || size_error || existing_bytes == 0,
               "{} already holds {} bytes of results; add --resume to keep them and run only "
               "the rest, or --overwrite to replace them",
               path.string(), existing_bytes);
  std::error_code ec;
  created_ = !fs::exists(path, ec);
  // Locked before anything is read, cut or truncated.
  const int fd = open_locked(path);
  try {
    if (resume && !created_) {
      recovered_ = read_jsonl_records(path, index_of_, &dropped_bytes_);
      if (dropped_bytes_ > 0) {
        OFFGEN_CHECK(::ftruncate(fd, static_cast<off_t>(fs::file_size(path) - dropped_bytes_)) == 0,
                     "--resume: cannot cut the partial last line of {}: {}", path.string(),
                     std::strerror(errno));
      }
    } else if (!resume) {
      OFFGEN_CHECK(::ftruncate(fd, 0) == 0, "cannot write output file {}: {}", path.string(),
                   std::strerror(errno));
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  file_ = append_stream(fd, path);
}

ResumableJsonlWriter::~ResumableJsonlWriter() {
  // A run that failed before its first record leaves no empty file of its own making behind
  // (removed while its lock is held, so no other run can have taken it).
  if (created_ && written_ == 0 && !finished_) {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  if (file_ != nullptr) std::fclose(file_);
}

void ResumableJsonlWriter::write_line(const std::string& line) {
  const std::string whole = line + '\n';
  const bool ok =
      std::fwrite(whole.data(), 1, whole.size(), file_) == whole.size() && std::fflush(file_) == 0;
  OFFGEN_CHECK(ok, "writing {} failed: {}", path_.string(), std::strerror(errno));
}

void ResumableJsonlWriter::put(const nlohmann::ordered_json& record) {
  write_line(dump_json(record));
  ++written_;
}

void ResumableJsonlWriter::finish() {
  namespace fs = std::filesystem;
  finished_ = true;
  OFFGEN_CHECK(std::fflush(file_) == 0, "writing {} failed: {}", path_.string(),
               std::strerror(errno));
  std::ifstream in(path_, std::ios::binary);
  OFFGEN_CHECK(in.good(), "cannot read back {}: {}", path_.string(), std::strerror(errno));
  std::map<std::size_t, std::string> ordered;
  std::string text;
  while (std::getline(in, text)) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::int64_t index = index_of_(nlohmann::ordered_json::parse(text));
    ordered[static_cast<std::size_t>(index)] = std::move(text);  // a later record wins
  }
  const fs::path temporary = path_.string() + ".ordering";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    for (const auto& [index, line] : ordered) out << line << '\n';
    out.flush();
    if (!out.good()) {
      // The output itself is complete; only its ordered copy failed (a full disk): remove the
      // copy, which holds as much again.
      const int error = errno;
      out.close();
      std::error_code ignored;
      if (fs::is_regular_file(temporary, ignored)) fs::remove(temporary, ignored);
      fail("writing {} (the ordered copy of {}) failed: {}", temporary.string(), path_.string(),
           std::strerror(error));
    }
  }
  // The ordered copy is locked before it takes the output's name, and the output's lock is held
  // until then: no moment where another run could take the path.
  const auto drop_copy = [&] {
    std::error_code ignored;
    fs::remove(temporary, ignored);
  };
  int fd = -1;
  try {
    fd = open_locked(temporary);
  } catch (...) {
    drop_copy();
    throw;
  }
  std::error_code ec;
  fs::rename(temporary, path_, ec);
  if (ec) {
    ::close(fd);
    drop_copy();
  }
  OFFGEN_CHECK(!ec, "cannot replace {} with its ordered copy: {}", path_.string(), ec.message());
  std::FILE* ordered_file = append_stream(fd, path_);
  std::fclose(file_);
  file_ = ordered_file;
}

}  // namespace offgen::cli
