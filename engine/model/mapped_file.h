// The bytes of a whole file, read-only: a memory mapping of a regular file, or a heap copy of
// bytes already in memory (fuzzers and tests). Readers keep pointers into it, so it never moves
// its bytes; move-only.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace offgen {

class MappedFile {
 public:
  // Maps `path` (a regular file). Throws offgen::Error naming it when it cannot be opened,
  // is not a regular file or cannot be mapped. An empty file maps to no bytes.
  static MappedFile open(const std::filesystem::path& path);
  // A copy of `bytes`; `name` stands for the path in messages.
  static MappedFile copy_of(std::span<const std::byte> bytes, const std::string& name);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::filesystem::path& path() const { return path_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  MappedFile() = default;
  void release();

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  void* mapping_ = nullptr;       // what munmap() gets; null for copies and empty files
  std::vector<std::byte> owned_;  // copy_of()'s bytes
};

}  // namespace offgen
