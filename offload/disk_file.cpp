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
#include "engine/core/parameter_error.h"

namespace offgen {
namespace {

// Reads are cut into pieces of this size and issued from several threads: one synchronous read
// at a time leaves an NVMe drive mostly idle.
constexpr std::size_t kReadPiece = std::size_t{8} << 20;

}  // namespace

DiskFile::DiskFile(const std::filesystem::path& folder) : folder_(folder) {
  OFFGEN_CHECK_NAMING(std::filesystem::is_directory(folder), [=](ParameterNamer name) {
    return fmt::format("{} {}: not a directory", name(Parameter::disk_folder), folder.string());
  });
  std::random_device random;
  const std::filesystem::path path =
      folder / ("offgen-weights-" + std::to_string(::getpid()) + "-" + std::to_string(random()));
  write_fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  const std::string create_error = std::strerror(errno);
  OFFGEN_CHECK_NAMING(write_fd_ >= 0, [=](ParameterNamer name) {
    return fmt::format("{} {}: cannot create a file there: {}", name(Parameter::disk_folder),
                       folder.string(), create_error);
  });
  read_fd_ = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  direct_ = read_fd_ >= 0;
  if (!direct_) read_fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const int open_errno = errno;
  ::unlink(path.c_str());  // the open descriptors keep it; nothing is left behind
  if (read_fd_ < 0) {
    ::close(write_fd_);
    fail_naming([folder, reason = std::string(std::strerror(open_errno))](ParameterNamer name) {
      return fmt::format("{} {}: cannot reopen its file for reading: {}",
                         name(Parameter::disk_folder), folder.string(), reason);
    });
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
    if (n <= 0) {
      fail_naming(
          [folder = folder_, bytes,
           reason = std::string(n < 0 ? std::strerror(errno) : "no space written (disk full?)")](
              ParameterNamer name) {
            return fmt::format("{} {}: writing {} bytes failed: {}", name(Parameter::disk_folder),
                               folder.string(), bytes, reason);
          });
    }
    done += static_cast<std::size_t>(n);
  }
  end_ = offset + padded(bytes);
  // The padding must exist for whole-block direct reads of the last segment.
  if (::ftruncate(write_fd_, static_cast<off_t>(end_)) != 0) {
    fail_naming(
        [folder = folder_, reason = std::string(std::strerror(errno))](ParameterNamer name) {
          return fmt::format("{} {}: extending the file failed: {}", name(Parameter::disk_folder),
                             folder.string(), reason);
        });
  }
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
    if (error == 0) continue;
    fail_naming([folder = folder_, total, offset,
                 reason = std::string(std::strerror(error))](ParameterNamer name) {
      return fmt::format("{} {}: reading {} bytes at offset {} failed: {}",
                         name(Parameter::disk_folder), folder.string(), total, offset, reason);
    });
  }
  if (!direct_) {
    ::posix_fadvise(read_fd_, static_cast<off_t>(offset), static_cast<off_t>(total),
                    POSIX_FADV_DONTNEED);
  }
}

}  // namespace offgen
