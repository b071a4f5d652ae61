// A results file rewritten whole as results come in (bench's --json and --csv after every row,
// compare's results.json and report.md after every cell), so that it holds every finished result
// and is valid at every moment, an interrupt or a crash included.
#pragma once

#include <filesystem>
#include <string>

namespace offgen::bench {

// The file `path` names through any chain of symbolic links (which need not exist yet): the file
// to replace, so that a link stays a link.
std::filesystem::path file_behind_links(const std::filesystem::path& path);

// Replaces the file at `path` with `text` at once: a temporary file beside it (named for this
// process, so concurrent writers never share one) is written, then renamed over it (through a link:
// over the file the link names, so the link stays). A reader sees the old contents or the new,
// never part of them. Throws offgen::Error naming `path`.
void write_file_atomically(const std::filesystem::path& path, const std::string& text);

class RewrittenFile {
 public:
  // `initial`: the contents before any result (valid as a file of none). A regular file (or a new
  // one) gets it now, which checks that it can be written (offgen::Error naming it otherwise).
  RewrittenFile(std::filesystem::path path, const std::string& initial);

  // Every result so far. A regular file is replaced at once (write_file_atomically). A pipe, FIFO
  // or device cannot be rewritten: it waits for finish().
  void update(const std::string& text);
  // The final contents: written to a pipe, FIFO or device now (the one time they are written); a
  // regular file is replaced as by update().
  void finish(const std::string& text);

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  bool streamed_ = false;  // a pipe, FIFO or device
};

}  // namespace offgen::bench
