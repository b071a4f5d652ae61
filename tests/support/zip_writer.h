// Writes zip archives for the zip and torch.save readers' tests: STORED entries laid out as
// torch.save lays them out (data aligned to 64 bytes through the local header's extra field), in
// the classic format or with every size and offset in zip64 records (as torch.save writes files
// past 4 GiB), and deliberately odd ones (a compression method, an encryption flag, a comment).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace offgen::test {

struct ZipEntrySpec {
  std::string name;
  std::string data;
  std::uint16_t method = 0;  // 0 STORED; 8 would be deflate (the data is written as given)
  bool encrypted = false;
};

struct ZipWriteOptions {
  bool zip64 = false;  // every size / offset through zip64 extra fields and end records
  std::string comment = "";
};

std::string zip_bytes(const std::vector<ZipEntrySpec>& entries,
                      const ZipWriteOptions& options = {});

// Appends `value`'s bytes, least significant first (zip and pickle integers).
template <typename T>
void append_little_endian(std::string& out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out.push_back(static_cast<char>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xFF));
  }
}

}  // namespace offgen::test
