#include "bench/rewritten_file.h"

#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "engine/core/error.h"

namespace offgen::bench {
namespace {

namespace fs = std::filesystem;

void write_whole(const fs::path& path, const fs::path& shown, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  OFFGEN_CHECK(out.good(), "cannot write {}: {}", shown.string(), std::strerror(errno));
}

}  // namespace

fs::path file_behind_links(const fs::path& path) {
  fs::path file = path;
  std::error_code ec;
  // As many hops as the kernel follows (ELOOP beyond): a loop ends here, and fails when written.
  for (int hops = 0; hops < 40 && fs::is_symlink(file, ec); ++hops) {
    const fs::path target = fs::read_symlink(file, ec);
    if (ec) break;
    file = target.is_absolute() ? target : file.parent_path() / target;
  }
  return file;
}

void write_file_atomically(const fs::path& path, const std::string& text) {
  std::error_code ec;
  const fs::path target = file_behind_links(path);
  // A temporary of this process's own: two processes replacing the same file (ranks caching one
  // machine profile) each rename a whole file of theirs, never one both wrote into.
  const fs::path temporary = target.string() + ".writing-" + std::to_string(::getpid());
  try {
    write_whole(temporary, path, text);
  } catch (...) {
    fs::remove(temporary, ec);  // a full disk: the part written goes, the old file stays as it was
    throw;
  }
  fs::rename(temporary, target, ec);
  if (ec) {
    const std::string reason = ec.message();
    fs::remove(temporary, ec);
    fail("cannot write {}: {}", path.string(), reason);
  }
}

RewrittenFile::RewrittenFile(fs::path path, const std::string& initial) : path_(std::move(path)) {
  std::error_code ec;
  const fs::file_status status = fs::status(path_, ec);
  streamed_ = fs::exists(status) && !fs::is_regular_file(status) && !fs::is_directory(status);
  update(initial);
}

void RewrittenFile::update(const std::string& text) {
  if (!streamed_) write_file_atomically(path_, text);
}

void RewrittenFile::finish(const std::string& text) {
  if (streamed_) {
    write_whole(path_, path_, text);
  } else {
    update(text);
  }
}

}  // namespace offgen::bench
