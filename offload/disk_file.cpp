#include "offload/disk_file.h"

#include <fcntl.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/core/error.h"

namespace offgen {
namespace {

// Reads are cut into pieces of this size and issued from several threads: one synchronous read
// at a time leaves an NVMe drive mostly idle.
constexpr std::size_t kReadPiece = std::size_t{8} << 20;

}  // namespace

DiskFile::DiskFile(const std::filesystem::path& folder) : folder_(folder) {
  OFFGEN_CHECK(std::filesystem::is_directory(folder), "--disk {}: not a directory",
               folder.string());
  std::random_device random;
  const std::filesystem::path path =
      folder / ("offgen-weights-" + std::to_string(::getpid()) + "-" + std::to_string(random()));
  write_fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  OFFGEN_CHECK(write_fd_ >= 0, "--disk {}: cannot create a file there: {}", folder.string(),
               std::strerror(errno));
  read_fd_ = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  direct_ = read_fd_ >= 0;
  if (!direct_) read_fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const int open_errno = errno;
  ::unlink(path.c_str());  // the open descriptors keep it; nothing is left behind
  if (read_fd_ < 0) {
    ::close(write_fd_);
    fail("--disk {}: cannot reopen its file for reading: {}", folder.string(),
         std::strerror(open_errno));
  }
}

DiskFile::~DiskFile() {
  if (read_fd_ >= 0) ::close(read_fd_);
  if (write_fd_ >= 0) ::close(write_fd_);
}

std::uint64_t DiskFile::append(const void* data, std::size_t bytes) {
  const std::uint64_t offset = end_;
  const auto* p = static_cast<const char*>(data);
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n =
        ::pwrite(write_fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    OFFGEN_CHECK(n > 0, "--disk {}: writing {} bytes failed: {}", folder_.string(), bytes,
                 n < 0 ? std::strerror(errno) : "no space written (disk full?)");
    done += static_cast<std::size_t>(n);
  }
  end_ = offset + padded(bytes);
  // The padding must exist for whole-block direct reads of the last segment.
  OFFGEN_CHECK(::ftruncate(write_fd_, static_cast<off_t>(end_)) == 0,
               "--disk {}: extending the file failed: {}", folder_.string(), std::strerror(errno));
  // Written pages go to disk and leave the page cache, which should hold other things.
  ::fdatasync(write_fd_);
  ::posix_fadvise(write_fd_, static_cast<off_t>(offset), static_cast<off_t>(padded(bytes)),
                  POSIX_FADV_DONTNEED);
  return offset;
}

void DiskFile::read(std::uint64_t offset, void* dst, std::size_t bytes) const {
  const std::size_t total = padded(bytes);
  const std::size_t pieces = (total + kReadPiece - 1) / kReadPiece;
  std::vector<int> errors(pieces, 0);
  // Isolated: while this thread (a stream's host worker) waits for its pieces it must not pick up
  // unrelated TBB work, such as a compute kernel's chunks, and delay the read it stands for.
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(std::size_t{0}, pieces, [&](std::size_t piece) {
      const std::size_t begin = piece * kReadPiece;
      const std::size_t length = std::min(kReadPiece, total - begin);
      auto* p = static_cast<char*>(dst) + begin;
      std::size_t done = 0;
      while (done < length) {
        const ssize_t n =
            ::pread(read_fd_, p + done, length - done, static_cast<off_t>(offset + begin + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          errors[piece] = n < 0 ? errno : EIO;
          return;
        }
        done += static_cast<std::size_t>(n);
      }
    });
  });
  for (int error : errors) {
    OFFGEN_CHECK(error == 0, "--disk {}: reading {} bytes at offset {} failed: {}",
                 folder_.string(), total, offset, std::strerror(error));
  }
  if (!direct_) {
    ::posix_fadvise(read_fd_, static_cast<off_t>(offset), static_cast<off_t>(total),
                    POSIX_FADV_DONTNEED);
  }
}

}  // namespace offgen
