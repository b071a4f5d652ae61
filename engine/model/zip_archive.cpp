#include "engine/model/zip_archive.h"

#include <fmt/format.h>

#include <optional>
#include <utility>

#include "engine/core/error.h"
#include "engine/model/little_endian.h"

namespace offgen {
namespace {

constexpr std::uint32_t kEndSignature = 0x06054b50;
constexpr std::uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr std::uint32_t kZip64EndSignature = 0x06064b50;
constexpr std::uint32_t kCentralSignature = 0x02014b50;
constexpr std::uint32_t kLocalSignature = 0x04034b50;
constexpr std::uint64_t kEndBytes = 22;
constexpr std::uint64_t kZip64LocatorBytes = 20;
constexpr std::uint64_t kZip64EndBytes = 56;
constexpr std::uint64_t kCentralBytes = 46;
constexpr std::uint64_t kLocalBytes = 30;
constexpr std::uint64_t kMaxCommentBytes = 0xFFFF;
constexpr std::uint16_t kZip64ExtraId = 0x0001;
constexpr std::uint32_t kZip64Marker32 = 0xFFFFFFFF;
constexpr std::uint16_t kZip64Marker16 = 0xFFFF;

// An entry name as messages show it: a hostile archive may hold a 64 KiB name.
std::string shown(std::string_view name) {
  return name.size() <= 100 ? std::string(name) : std::string(name.substr(0, 97)) + "...";
}

// Bounds-checked little-endian reads from the file; a read past its end names what was read.
class Reader {
 public:
  Reader(std::span<const std::byte> file, const std::string& where) : file_(file), where_(where) {}

  std::uint64_t size() const { return file_.size(); }
  bool holds(std::uint64_t offset, std::uint64_t length) const {
    return offset <= file_.size() && length <= file_.size() - offset;
  }
  void need(std::uint64_t offset, std::uint64_t length, std::string_view what) const {
    if (!holds(offset, length)) {
      fail("{}: {} at byte {} runs past the end of the file ({} bytes); is it truncated?", where_,
           what, offset, file_.size());
    }
  }
  template <typename T>
  T at(std::uint64_t offset) const {
    need(offset, sizeof(T), "a field");
    return load_little_endian<T>(file_.data() + offset);
  }
  std::string_view text(std::uint64_t offset, std::uint64_t length) const {
    need(offset, length, "a name");
    return {reinterpret_cast<const char*>(file_.data() + offset), static_cast<std::size_t>(length)};
  }

 private:
  std::span<const std::byte> file_;
  const std::string& where_;
};

struct Directory {
  std::uint64_t entries = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t limit = 0;  // where the records after the directory begin
};

// The end-of-central-directory record: its comment must run exactly to the end of the file,
// which rules out a stray signature inside the comment.
std::optional<std::uint64_t> find_end_record(const Reader& file) {
  if (file.size() < kEndBytes) return std::nullopt;
  const std::uint64_t last = file.size() - kEndBytes;
  const std::uint64_t first = last > kMaxCommentBytes ? last - kMaxCommentBytes : 0;
  for (std::uint64_t pos = last + 1; pos-- > first;) {
    if (file.at<std::uint32_t>(pos) == kEndSignature &&
        std::uint64_t{file.at<std::uint16_t>(pos + 20)} == file.size() - pos - kEndBytes) {
      return pos;
    }
  }
  return std::nullopt;
}

Directory read_directory(const Reader& file, const std::string& where) {
  const std::optional<std::uint64_t> end = find_end_record(file);
  if (!end) {
    fail(
        "{}: not a zip archive (no end-of-central-directory record in its last 64 KiB); is the "
        "file truncated?",
        where);
  }
  Directory directory;
  const bool zip64 = *end >= kZip64LocatorBytes &&
                     file.at<std::uint32_t>(*end - kZip64LocatorBytes) == kZip64LocatorSignature;
  if (zip64) {
    const std::uint64_t locator = *end - kZip64LocatorBytes;
    const auto record = file.at<std::uint64_t>(locator + 8);
    if (file.at<std::uint32_t>(locator + 4) != 0 || file.at<std::uint32_t>(locator + 16) != 1) {
      fail("{}: a zip archive split over several disks; offgen reads single-file archives", where);
    }
    if (record > locator || kZip64EndBytes > locator - record) {
      fail("{}: the zip64 end record at byte {} does not lie before its locator (byte {})", where,
           record, locator);
    }
    if (file.at<std::uint32_t>(record) != kZip64EndSignature) {
      fail("{}: no zip64 end record at byte {}, where its locator points", where, record);
    }
    if (file.at<std::uint32_t>(record + 16) != 0 || file.at<std::uint32_t>(record + 20) != 0) {
      fail("{}: a zip archive split over several disks; offgen reads single-file archives", where);
    }
    directory.entries = file.at<std::uint64_t>(record + 32);
    directory.size = file.at<std::uint64_t>(record + 40);
    directory.offset = file.at<std::uint64_t>(record + 48);
    directory.limit = record;
  } else {
    if (file.at<std::uint16_t>(*end + 4) != 0 || file.at<std::uint16_t>(*end + 6) != 0) {
      fail("{}: a zip archive split over several disks; offgen reads single-file archives", where);
    }
    directory.entries = file.at<std::uint16_t>(*end + 10);
    directory.size = file.at<std::uint32_t>(*end + 12);
    directory.offset = file.at<std::uint32_t>(*end + 16);
    directory.limit = *end;
  }
  if (directory.offset > directory.limit || directory.size > directory.limit - directory.offset) {
    fail(
        "{}: the central directory (bytes {}..+{}) runs past where it must end (byte {}); is the "
        "file truncated or corrupt?",
        where, directory.offset, directory.size, directory.limit);
  }
  if (directory.entries > directory.size / kCentralBytes) {
    fail("{}: the central directory claims {} entries but has room for {}", where,
         directory.entries, directory.size / kCentralBytes);
  }
  return directory;
}

// The fields a zip64 extra field replaces, in the order it stores them.
struct Sizes {
  std::uint64_t uncompressed;
  std::uint64_t compressed;
  std::uint64_t local_offset;
  std::uint32_t disk;
};

void apply_zip64_extra(const Reader& file, const std::string& where, std::string_view name,
                       std::uint64_t extra, std::uint64_t extra_end, Sizes& sizes) {
  while (extra_end - extra >= 4) {
    const auto id = file.at<std::uint16_t>(extra);
    const auto length = file.at<std::uint16_t>(extra + 2);
    const std::uint64_t body = extra + 4;
    if (length > extra_end - body) {
      fail("{}: entry '{}': an extra field runs past the entry's record", where, shown(name));
    }
    if (id == kZip64ExtraId) {
      std::uint64_t at = body;
      const auto take = [&](auto& field, auto marker) {
        using Field = std::remove_reference_t<decltype(field)>;
        if (field != marker) return;
        if (body + length - at < sizeof(Field)) {
          fail("{}: entry '{}': its zip64 extra field is too short", where, shown(name));
        }
        field = file.at<Field>(at);
        at += sizeof(Field);
      };
      take(sizes.uncompressed, std::uint64_t{kZip64Marker32});
      take(sizes.compressed, std::uint64_t{kZip64Marker32});
      take(sizes.local_offset, std::uint64_t{kZip64Marker32});
      take(sizes.disk, std::uint32_t{kZip64Marker16});
    }
    extra = body + length;
  }
}

}  // namespace

ZipArchive::ZipArchive(std::span<const std::byte> file, std::string where)
    : file_(file), where_(std::move(where)) {
  const Reader reader(file_, where_);
  const Directory directory = read_directory(reader, where_);
  const std::uint64_t directory_end = directory.offset + directory.size;
  std::uint64_t record = directory.offset;
  entries_.reserve(static_cast<std::size_t>(directory.entries));
  for (std::uint64_t i = 0; i < directory.entries; ++i) {
    if (directory_end - record < kCentralBytes ||
        reader.at<std::uint32_t>(record) != kCentralSignature) {
      fail("{}: central directory entry {} of {} (byte {}) is missing or corrupt", where_, i + 1,
           directory.entries, record);
    }
    const auto flags = reader.at<std::uint16_t>(record + 8);
    const auto method = reader.at<std::uint16_t>(record + 10);
    Sizes sizes{reader.at<std::uint32_t>(record + 24), reader.at<std::uint32_t>(record + 20),
                reader.at<std::uint32_t>(record + 42), reader.at<std::uint16_t>(record + 34)};
    const std::uint64_t name_length = reader.at<std::uint16_t>(record + 28);
    const std::uint64_t extra_length = reader.at<std::uint16_t>(record + 30);
    const std::uint64_t comment_length = reader.at<std::uint16_t>(record + 32);
    const std::uint64_t next = record + kCentralBytes + name_length + extra_length + comment_length;
    if (next > directory_end) {
      fail("{}: central directory entry {} runs past the end of the directory", where_, i + 1);
    }
    std::string name(reader.text(record + kCentralBytes, name_length));
    const std::uint64_t extra = record + kCentralBytes + name_length;
    apply_zip64_extra(reader, where_, name, extra, extra + extra_length, sizes);
    record = next;

    if ((flags & 1u) != 0) {
      fail("{}: entry '{}' is encrypted; torch.save writes plain entries", where_, shown(name));
    }
    if (method != 0 || sizes.compressed != sizes.uncompressed) {
      fail(
          "{}: entry '{}' is compressed (method {}); torch.save stores entries uncompressed and "
          "offgen reads only those (was the archive re-zipped?)",
          where_, shown(name), method);
    }
    if (sizes.disk != 0) {
      fail("{}: a zip archive split over several disks; offgen reads single-file archives", where_);
    }
    const std::uint64_t local = sizes.local_offset;
    reader.need(local, kLocalBytes, fmt::format("the local header of entry '{}'", shown(name)));
    if (reader.at<std::uint32_t>(local) != kLocalSignature) {
      fail("{}: entry '{}' has no local header at byte {}, where the directory points", where_,
           shown(name), local);
    }
    const std::uint64_t local_name = reader.at<std::uint16_t>(local + 26);
    const std::uint64_t local_extra = reader.at<std::uint16_t>(local + 28);
    reader.need(local + kLocalBytes, local_name + local_extra,
                fmt::format("the local header of entry '{}'", shown(name)));
    if (reader.text(local + kLocalBytes, local_name) != name) {
      fail("{}: entry '{}' has another name in its local header (byte {}): the file is corrupt",
           where_, shown(name), local);
    }
    const std::uint64_t data = local + kLocalBytes + local_name + local_extra;
    if (data > directory.offset || sizes.uncompressed > directory.offset - data) {
      fail(
          "{}: entry '{}' ({} bytes at byte {}) runs into the central directory at byte {}: the "
          "file is corrupt",
          where_, shown(name), sizes.uncompressed, data, directory.offset);
    }
    if (!by_name_.emplace(name, entries_.size()).second) {
      fail("{}: entry '{}' appears twice", where_, shown(name));
    }
    entries_.push_back(Entry{std::move(name), data, sizes.uncompressed});
  }
}

const ZipArchive::Entry* ZipArchive::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

std::span<const std::byte> ZipArchive::data(const Entry& entry) const {
  return file_.subspan(static_cast<std::size_t>(entry.offset),
                       static_cast<std::size_t>(entry.size));
}

}  // namespace offgen
