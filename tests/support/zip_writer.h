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

}  // namespace offgen::test
