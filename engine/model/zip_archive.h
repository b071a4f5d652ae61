// The directory of a zip archive held in memory (a mapped file): the format of torch.save since
// torch 1.6. Only what torch.save writes is accepted — entries STORED (uncompressed), not
// encrypted, on one disk, zip64 records where sizes or offsets need them — so every entry's bytes
// are a range of the file, used in place: nothing is inflated or copied. Every offset and size is
// checked against the file when the archive is opened. CRCs are not checked (that would read
// every byte of a multi-GB file up front).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace offgen {

class ZipArchive {
 public:
  struct Entry {
    std::string name;
    std::uint64_t offset = 0;  // of the entry's data in the file
    std::uint64_t size = 0;    // bytes of data
  };

  // Reads the central directory of `file`. Throws offgen::Error naming `where` and the problem:
  // not a zip archive (or truncated), a compressed or encrypted entry, a record or entry running
  // past the end, a name given twice. `file` must outlive the archive.
  ZipArchive(std::span<const std::byte> file, std::string where);

  const std::string& where() const { return where_; }
  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* find(std::string_view name) const;
  std::span<const std::byte> data(const Entry& entry) const;

 private:
  std::span<const std::byte> file_;
  std::string where_;
  std::vector<Entry> entries_;
  std::map<std::string, std::size_t, std::less<>> by_name_;
};

}  // namespace offgen
