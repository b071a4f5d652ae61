// The disk tier's backing file: one anonymous file in the folder given by --disk (unlinked as soon
// as it is created, so nothing is left behind even after a crash). Segments start at 4 KiB
// offsets so reads can bypass the page cache (O_DIRECT) — streaming hundreds of GB through the
// page cache would evict everything else the machine holds. Where the file system refuses
// O_DIRECT (tmpfs), reads are buffered and the pages dropped after each read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "engine/core/direct_io.h"

namespace offgen {

class DiskFile {
 public:
  static constexpr std::size_t kAlignment = kDirectIoAlignment;

  // Throws offgen::Error naming the folder when it cannot hold a file.
  explicit DiskFile(const std::filesystem::path& folder);
  DiskFile(const DiskFile&) = delete;
  DiskFile& operator=(const DiskFile&) = delete;
  ~DiskFile();

  // Appends `bytes` from `data` as a new segment; returns its offset (a multiple of kAlignment).
  std::uint64_t append(const void* data, std::size_t bytes);
  // Reads the segment at `offset` into `dst`, which must be kAlignment-aligned and hold
  // padded(bytes). Large reads are split across threads. Throws offgen::Error on an I/O error.
  // Concurrent reads are safe (positioned reads on one descriptor); not concurrent with append.
  void read(std::uint64_t offset, void* dst, std::size_t bytes) const;

  static std::size_t padded(std::size_t bytes) { return direct_io_padded(bytes); }
  bool direct() const { return direct_; }
  std::uint64_t size() const { return end_; }
  const std::filesystem::path& folder() const { return folder_; }

 private:
  std::filesystem::path folder_;
  int write_fd_ = -1;
  int read_fd_ = -1;
  bool direct_ = false;
  std::uint64_t end_ = 0;
};

}  // namespace offgen
