#include "tests/support/zip_writer.h"

namespace offgen::test {
namespace {

constexpr std::size_t kAlignment = 64;

template <typename T>
void put(std::string& out, T value) {
  append_little_endian(out, value);
}

}  // namespace

std::string zip_bytes(const std::vector<ZipEntrySpec>& entries, const ZipWriteOptions& options) {
  std::string out;
  std::string directory;
  for (const ZipEntrySpec& entry : entries) {
    const std::uint64_t local = out.size();
    const std::uint16_t flags = entry.encrypted ? 1 : 0;
    const auto size = static_cast<std::uint32_t>(entry.data.size());
    // Local header, padded with an unknown extra field so the data starts at a multiple of 64.
    std::size_t padding = (kAlignment - (local + 30 + entry.name.size()) % kAlignment) % kAlignment;
    if (padding != 0 && padding < 4) padding += kAlignment;
    put<std::uint32_t>(out, 0x04034b50);
    put<std::uint16_t>(out, 45);
    put<std::uint16_t>(out, flags);
    put<std::uint16_t>(out, entry.method);
    put<std::uint32_t>(out, 0);  // time, date
    put<std::uint32_t>(out, 0);  // CRC: not checked by the reader
    put<std::uint32_t>(out, size);
    put<std::uint32_t>(out, size);
    put<std::uint16_t>(out, static_cast<std::uint16_t>(entry.name.size()));
    put<std::uint16_t>(out, static_cast<std::uint16_t>(padding));
    out += entry.name;
    if (padding != 0) {
      put<std::uint16_t>(out, 0x4246);  // "FB", as torch.save's padding field
      put<std::uint16_t>(out, static_cast<std::uint16_t>(padding - 4));
      out.append(padding - 4, 'Z');
    }
    out += entry.data;

    std::string extra;
    if (options.zip64) {
      put<std::uint16_t>(extra, 0x0001);
      put<std::uint16_t>(extra, 24);
      put<std::uint64_t>(extra, entry.data.size());
      put<std::uint64_t>(extra, entry.data.size());
      put<std::uint64_t>(extra, local);
    }
    const std::uint32_t marker = 0xFFFFFFFF;
    put<std::uint32_t>(directory, 0x02014b50);
    put<std::uint16_t>(directory, 45);
    put<std::uint16_t>(directory, 45);
    put<std::uint16_t>(directory, flags);
    put<std::uint16_t>(directory, entry.method);
    put<std::uint32_t>(directory, 0);
    put<std::uint32_t>(directory, 0);
    put<std::uint32_t>(directory, options.zip64 ? marker : size);
    put<std::uint32_t>(directory, options.zip64 ? marker : size);
    put<std::uint16_t>(directory, static_cast<std::uint16_t>(entry.name.size()));
    put<std::uint16_t>(directory, static_cast<std::uint16_t>(extra.size()));
    put<std::uint16_t>(directory, 0);  // comment
    put<std::uint16_t>(directory, 0);  // disk
    put<std::uint16_t>(directory, 0);  // internal attributes
    put<std::uint32_t>(directory, 0);  // external attributes
    put<std::uint32_t>(directory, options.zip64 ? marker : static_cast<std::uint32_t>(local));
    directory += entry.name;
    directory += extra;
  }
  const std::uint64_t directory_offset = out.size();
  out += directory;
  if (options.zip64) {
    const std::uint64_t record = out.size();
    put<std::uint32_t>(out, 0x06064b50);
    put<std::uint64_t>(out, 44);  // the record's size after this field
    put<std::uint16_t>(out, 45);
    put<std::uint16_t>(out, 45);
    put<std::uint32_t>(out, 0);
    put<std::uint32_t>(out, 0);
    put<std::uint64_t>(out, entries.size());
    put<std::uint64_t>(out, entries.size());
    put<std::uint64_t>(out, directory.size());
    put<std::uint64_t>(out, directory_offset);
    put<std::uint32_t>(out, 0x07064b50);
    put<std::uint32_t>(out, 0);
    put<std::uint64_t>(out, record);
    put<std::uint32_t>(out, 1);
  }
  put<std::uint32_t>(out, 0x06054b50);
  put<std::uint16_t>(out, 0);
  put<std::uint16_t>(out, 0);
  put<std::uint16_t>(out, options.zip64 ? 0xFFFF : static_cast<std::uint16_t>(entries.size()));
  put<std::uint16_t>(out, options.zip64 ? 0xFFFF : static_cast<std::uint16_t>(entries.size()));
  put<std::uint32_t>(out,
                     options.zip64 ? 0xFFFFFFFF : static_cast<std::uint32_t>(directory.size()));
  put<std::uint32_t>(out,
                     options.zip64 ? 0xFFFFFFFF : static_cast<std::uint32_t>(directory_offset));
  put<std::uint16_t>(out, static_cast<std::uint16_t>(options.comment.size()));
  out += options.comment;
  return out;
}

}  // namespace offgen::test
