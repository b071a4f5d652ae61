#include "engine/model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

#include "engine/core/error.h"

namespace offgen {
namespace {

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

// Closes the descriptor on every path out of open(); the mapping outlives it.
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile MappedFile::open(const std::filesystem::path& path) {
  const std::string where = path.string();
  FileDescriptor file_descriptor{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file_descriptor.fd < 0) fail("cannot open {}: {}", where, errno_text(errno));
  struct stat status {};
  if (::fstat(file_descriptor.fd, &status) != 0) {
    fail("cannot stat {}: {}", where, errno_text(errno));
  }
  if (!S_ISREG(status.st_mode)) fail("{}: not a regular file", where);
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<std::size_t>(status.st_size);
  if (file.size_ == 0) return file;  // mmap refuses a length of 0
  void* mapping = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, file_descriptor.fd, 0);
  if (mapping == MAP_FAILED) fail("cannot memory-map {}: {}", where, errno_text(errno));
  file.mapping_ = mapping;
  file.data_ = static_cast<const std::byte*>(mapping);
  return file;
}

MappedFile MappedFile::copy_of(std::span<const std::byte> bytes, const std::string& name) {
  MappedFile file;
  file.path_ = name;
  file.owned_.assign(bytes.begin(), bytes.end());
  file.data_ = file.owned_.data();
  file.size_ = file.owned_.size();
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      owned_(std::move(other.owned_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapping_ = std::exchange(other.mapping_, nullptr);
    owned_ = std::move(other.owned_);
  }
  return *this;
}

MappedFile::~MappedFile() {
  release();
}

void MappedFile::release() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
  mapping_ = nullptr;
}

}  // namespace offgen
