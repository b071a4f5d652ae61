// ZipArchive: the entries of classic and zip64 archives, and one test per kind of broken archive.
#include "engine/model/zip_archive.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/core/error.h"
#include "tests/support/zip_writer.h"

namespace offgen {
namespace {

using test::ZipEntrySpec;

std::span<const std::byte> as_bytes(const std::string& text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

std::string text_of(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::string open_error(const std::string& bytes) {
  try {
    ZipArchive archive(as_bytes(bytes), "test.bin");
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "the archive was accepted";
  return "";
}

const std::vector<ZipEntrySpec> kEntries = {{"archive/data.pkl", "pickle bytes"},
                                            {"archive/data/0", std::string(1000, 'x')},
                                            {"archive/data/1", ""},
                                            {"archive/version", "3\n"}};

void expect_entries(const std::string& bytes) {
  const ZipArchive archive(as_bytes(bytes), "test.bin");
  ASSERT_EQ(archive.entries().size(), kEntries.size());
  for (std::size_t i = 0; i < kEntries.size(); ++i) {
    const ZipArchive::Entry& entry = archive.entries()[i];
    EXPECT_EQ(entry.name, kEntries[i].name);
    EXPECT_EQ(archive.find(kEntries[i].name), &entry);
    EXPECT_EQ(text_of(archive.data(entry)), kEntries[i].data) << entry.name;
    EXPECT_EQ(entry.offset % 64, 0u) << entry.name;  // the writer aligns data as torch.save does
  }
  EXPECT_EQ(archive.find("archive/data/2"), nullptr);
}

TEST(ZipArchive, ReadsStoredEntriesInPlace) {
  const std::string bytes = test::zip_bytes(kEntries);
  expect_entries(bytes);
  const ZipArchive archive(as_bytes(bytes), "test.bin");
  // In place: the data is a range of the file, not a copy.
  EXPECT_EQ(archive.data(archive.entries()[1]).data(),
            as_bytes(bytes).data() + archive.entries()[1].offset);
}

TEST(ZipArchive, ReadsZip64Records) {
  expect_entries(test::zip_bytes(kEntries, {.zip64 = true}));
}

TEST(ZipArchive, ReadsAnArchiveWithAComment) {
  // The comment holds an end-record signature of its own, which must not be taken for the real one.
  const std::string comment = std::string("PK\x05\x06", 4) + std::string(40, '-');
  expect_entries(test::zip_bytes(kEntries, {.comment = comment}));
}

TEST(ZipArchive, EmptyAndTooShortFilesAreNotArchives) {
  for (const std::string& bytes : {std::string(), std::string("PK"), std::string(100, '\0')}) {
    const std::string message = open_error(bytes);
    EXPECT_NE(message.find("test.bin: not a zip archive"), std::string::npos) << message;
  }
}

TEST(ZipArchive, EveryTruncationIsAnError) {
  for (const bool zip64 : {false, true}) {
    const std::string bytes = test::zip_bytes(kEntries, {.zip64 = zip64});
    for (std::size_t size = 0; size < bytes.size(); ++size) {
      const std::string message = open_error(bytes.substr(0, size));
      EXPECT_NE(message.find("test.bin: "), std::string::npos) << size << ": " << message;
    }
  }
}

TEST(ZipArchive, CompressedEntriesAreRefused) {
  std::vector<ZipEntrySpec> entries = kEntries;
  entries[1].method = 8;
  const std::string message = open_error(test::zip_bytes(entries));
  EXPECT_NE(message.find("entry 'archive/data/0' is compressed (method 8)"), std::string::npos)
      << message;
}

TEST(ZipArchive, EncryptedEntriesAreRefused) {
  std::vector<ZipEntrySpec> entries = kEntries;
  entries[2].encrypted = true;
  const std::string message = open_error(test::zip_bytes(entries));
  EXPECT_NE(message.find("entry 'archive/data/1' is encrypted"), std::string::npos) << message;
}

TEST(ZipArchive, ANameGivenTwiceIsRefused) {
  std::vector<ZipEntrySpec> entries = kEntries;
  entries.push_back(kEntries[0]);
  const std::string message = open_error(test::zip_bytes(entries));
  EXPECT_NE(message.find("entry 'archive/data.pkl' appears twice"), std::string::npos) << message;
}

TEST(ZipArchive, ADirectoryPointingAtTheWrongPlaceIsCorrupt) {
  const std::string good = test::zip_bytes(kEntries);
  // The second central record's local header offset (byte 42 of the record) moved by one byte.
  const std::size_t directory = good.rfind(std::string("PK\x01\x02", 4), good.size());
  ASSERT_NE(directory, std::string::npos);
  std::string bytes = good;
  bytes[directory + 42] = static_cast<char>(bytes[directory + 42] + 1);
  const std::string message = open_error(bytes);
  EXPECT_NE(message.find("entry 'archive/version' has no local header"), std::string::npos)
      << message;
}

TEST(ZipArchive, AnEntryRunningIntoTheDirectoryIsCorrupt) {
  std::string bytes = test::zip_bytes(kEntries);
  // The last record's compressed and uncompressed sizes (bytes 20 and 24) made huge.
  const std::size_t record = bytes.rfind(std::string("PK\x01\x02", 4));
  for (const std::size_t field : {20, 24}) {
    for (std::size_t i = 0; i < 4; ++i) bytes[record + field + i] = '\x7f';
  }
  const std::string message = open_error(bytes);
  EXPECT_NE(message.find("entry 'archive/version'"), std::string::npos) << message;
  EXPECT_NE(message.find("runs into the central directory"), std::string::npos) << message;
}

}  // namespace
}  // namespace offgen
