// Shared by the fuzz targets: an invariant check that crashes (so libFuzzer keeps the input), the
// test data folder, and a memory file for readers that take a path.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace offgen::fuzz {

// A broken invariant is a finding: print it and abort, which libFuzzer reports as a crash.
#define OFFGEN_FUZZ_EXPECT(cond, what)                                                             \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "fuzz invariant failed at %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   std::string(what).c_str());                                                     \
      std::abort();                                                                                \
    }                                                                                              \
  } while (0)

inline std::filesystem::path data_dir() {
  return OFFGEN_FUZZ_DATA_DIR;
}

// An anonymous in-memory file, rewritten with each input, that readers open by path.
class MemoryFile {
 public:
  MemoryFile() : fd_(::memfd_create("offgen-fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  const std::filesystem::path& path() const { return path_; }

  void write(const std::uint8_t* data, std::size_t size) {
    bool ok = ::ftruncate(fd_, 0) == 0;
    std::size_t done = 0;
    while (ok && done < size) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      ok = n > 0;
      if (ok) done += static_cast<std::size_t>(n);
    }
    if (!ok) {
      std::perror("writing the memory file");
      std::abort();
    }
  }

 private:
  int fd_;
  std::filesystem::path path_;
};

}  // namespace offgen::fuzz
