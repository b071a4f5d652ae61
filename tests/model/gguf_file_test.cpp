// The GGUF reader: metadata of every value type, tensor placement by offset and alignment, and
// every refusal (not GGUF, versions, truncation at every byte, bad counts, types, shapes,
// offsets, overlaps) with a message naming the file and the problem.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/core/error.h"
#include "engine/model/gguf_file.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using test::GgufWriter;
using Type = GgufWriter::Type;
using Json = nlohmann::json;

std::vector<std::byte> f32_bytes(const std::vector<float>& values) {
  std::vector<std::byte> out(values.size() * 4);
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

GgufWriter small_file() {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add("u8", Type::u8, 200);
  w.add("i8", Type::i8, -100);
  w.add("u16", Type::u16, 60000);
  w.add("i16", Type::i16, -30000);
  w.add_u32("u32", 4000000000u);
  w.add("i32", Type::i32, -2000000000);
  w.add("u64", Type::u64, std::uint64_t{1} << 40);
  w.add("i64", Type::i64, -(std::int64_t{1} << 40));
  w.add_f32("f32", 0.25f);
  w.add("f64", Type::f64, 1e-300);
  w.add_bool("yes", true);
  w.add("strings", Type::array, Json::array({"a", "", "日本"}), Type::string);
  w.add("floats", Type::array, Json::array({1.5, -2.0}), Type::f32);
  w.add_tensor("first", {4, 2}, 0, f32_bytes({1, 2, 3, 4, 5, 6, 7, 8}));
  w.add_tensor("second", {3}, 0, f32_bytes({9, 10, 11}));
  return w;
}

std::unique_ptr<GgufFile> parse(const std::vector<std::byte>& bytes) {
  return GgufFile::from_bytes(bytes, "test.gguf");
}

std::string parse_error(const std::vector<std::byte>& bytes) {
  return test::error_of([&] { parse(bytes); });
}

TEST(GgufFile, ReadsEveryMetadataTypeAndPlacesTensors) {
  for (const std::uint32_t version : {2u, 3u}) {
    GgufWriter w = small_file();
    w.version = version;
    const auto file = parse(w.bytes());
    EXPECT_EQ(file->version(), version);
    EXPECT_EQ(file->string("general.architecture"), "llama");
    EXPECT_EQ(file->integer("u8"), 200);
    EXPECT_EQ(file->integer("i8"), -100);
    EXPECT_EQ(file->integer("u16"), 60000);
    EXPECT_EQ(file->integer("i16"), -30000);
    EXPECT_EQ(file->integer("u32"), 4000000000LL);
    EXPECT_EQ(file->integer("i32"), -2000000000);
    EXPECT_EQ(file->integer("u64"), std::int64_t{1} << 40);
    EXPECT_EQ(file->integer("i64"), -(std::int64_t{1} << 40));
    EXPECT_EQ(file->number("f32"), 0.25);
    EXPECT_EQ(file->number("f64"), 1e-300);
    EXPECT_EQ(file->boolean("yes"), true);
    EXPECT_EQ(*file->array("strings", GgufFile::Element::string, 3),
              Json::array({"a", "", "日本"}));
    EXPECT_EQ(*file->array("floats", GgufFile::Element::number), Json::array({1.5, -2.0}));
    EXPECT_EQ(file->integer("absent"), std::nullopt);

    const GgufTensor* first = file->tensor("first");
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(first->shape(), (std::vector<std::int64_t>{2, 4}));
    EXPECT_EQ(first->rows(), 2);
    EXPECT_EQ(first->bytes, 32u);
    float values[3];
    const GgufTensor* second = file->tensor("second");
    ASSERT_NE(second, nullptr);
    std::memcpy(values, second->data, sizeof(values));
    EXPECT_EQ(values[0], 9.0f);
    EXPECT_EQ(values[2], 11.0f);
    // Aligned to 32 bytes from the data's start: the second tensor follows the first's 32.
    EXPECT_EQ(second->data - first->data, 32);
  }
}

TEST(GgufFile, TypedLookupsNameTheKeyOnAMismatch) {
  const auto file = parse(small_file().bytes());
  EXPECT_NE(test::error_of([&] {
              file->integer("general.architecture");
            }).find("metadata 'general.architecture' must be an integer"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { file->string("u8"); }).find("metadata 'u8' must be a string"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              file->array("strings", GgufFile::Element::integer);
            }).find("metadata 'strings' must hold integers"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              file->array("strings", GgufFile::Element::string, 5);
            }).find("has 3 elements, expected 5"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              file->required_integer("llama.block_count");
            }).find("test.gguf: metadata key 'llama.block_count' is missing"),
            std::string::npos);
}

TEST(GgufFile, RefusesWhatIsNotGgufOrAnotherVersion) {
  EXPECT_NE(parse_error({}).find("not a GGUF file"), std::string::npos);
  std::vector<std::byte> bytes = small_file().bytes();
  bytes[0] = std::byte{'X'};
  EXPECT_NE(parse_error(bytes).find("not a GGUF file"), std::string::npos);
  for (const std::uint32_t version : {1u, 4u}) {
    GgufWriter w = small_file();
    w.version = version;
    EXPECT_NE(parse_error(w.bytes()).find(fmt::format("GGUF version {} is not supported", version)),
              std::string::npos);
  }
}

// Every prefix of a good file is refused with a message, never read past its end.
TEST(GgufFile, EveryTruncationIsRefused) {
  const std::vector<std::byte> bytes = small_file().bytes();
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    const std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<long>(size));
    const std::string error = parse_error(cut);
    EXPECT_FALSE(error.empty()) << "a file cut to " << size << " bytes opened";
  }
  EXPECT_TRUE(parse_error(bytes).empty());
}

TEST(GgufFile, RefusesBadCountsTypesShapesAndOffsets) {
  {
    // A tensor count far beyond what the file could hold.
    std::vector<std::byte> bytes = small_file().bytes();
    const std::uint64_t huge = std::uint64_t{1} << 60;
    std::memcpy(&bytes[8], &huge, 8);
    EXPECT_NE(parse_error(bytes).find("tensors cannot fit"), std::string::npos);
    std::memcpy(&bytes[16], &huge, 8);
    EXPECT_NE(parse_error(bytes).find("metadata entries cannot fit"), std::string::npos);
  }
  {
    GgufWriter w;
    w.add("a", Type::array, Json::array(), Type::u8);
    std::vector<std::byte> bytes = w.bytes();
    // Header 24 bytes, key 8 + 1, value type 4, element type 4: the count is at byte 41.
    const std::uint64_t huge = std::uint64_t{1} << 40;
    std::memcpy(&bytes[41], &huge, 8);
    EXPECT_NE(parse_error(bytes).find("an array of 1099511627776 elements cannot fit"),
              std::string::npos);
  }
  {
    GgufWriter w;
    w.add_tensor("t", {32}, 99, std::vector<std::byte>(64));
    EXPECT_NE(parse_error(w.bytes()).find("tensor 't' has an unknown ggml type 99"),
              std::string::npos);
  }
  {
    GgufWriter w;
    w.add_tensor("t", {48}, 8, std::vector<std::byte>(64));  // Q8_0 rows are whole 32-blocks
    EXPECT_NE(parse_error(w.bytes()).find("not a multiple of the type's block of 32"),
              std::string::npos);
  }
  {
    GgufWriter w;
    w.add_tensor("t", {1, 2, 3, 4, 5}, 0, std::vector<std::byte>(480));
    EXPECT_NE(parse_error(w.bytes()).find("has 5 dimensions"), std::string::npos);
  }
  {
    GgufWriter w;
    w.add_tensor("t", {4}, 0, std::vector<std::byte>(8));  // 4 floats need 16 bytes
    EXPECT_NE(parse_error(w.bytes()).find("runs past the end of the file"), std::string::npos);
  }
  {
    GgufWriter w;
    w.add_tensor("a", {8}, 0, std::vector<std::byte>(32));
    w.add_tensor("a", {8}, 0, std::vector<std::byte>(32));
    EXPECT_NE(parse_error(w.bytes()).find("tensor 'a' appears twice"), std::string::npos);
  }
  {
    GgufWriter w;
    w.add_u32("general.alignment", 24);
    EXPECT_NE(parse_error(w.bytes()).find("general.alignment 24 is not a power of two"),
              std::string::npos);
  }
  {
    GgufWriter w;
    w.add_u32("k", 1);
    w.add_u32("k", 2);
    EXPECT_NE(parse_error(w.bytes()).find("metadata key 'k' appears twice"), std::string::npos);
  }
  {
    GgufWriter w;
    w.add("b", Type::u8, 7);
    std::vector<std::byte> bytes = w.bytes();
    bytes[33] = std::byte{7};  // the value type (after the 24-byte header and the key): bool
    EXPECT_NE(parse_error(bytes).find("a bool must be 0 or 1"), std::string::npos);
  }
}

TEST(GgufFile, RefusesOverlappingAndMisalignedTensors) {
  GgufWriter w;
  w.add_tensor("a", {16}, 0, std::vector<std::byte>(64));
  w.add_tensor("b", {16}, 0, std::vector<std::byte>(64));
  std::vector<std::byte> bytes = w.bytes();
  // b's offset (the last 8 bytes of its info, just before the padding) is 64: make it 32.
  const std::uint64_t b_offset = 64;
  const auto at =
      std::search(bytes.begin(), bytes.end(), reinterpret_cast<const std::byte*>(&b_offset),
                  reinterpret_cast<const std::byte*>(&b_offset) + 8);
  ASSERT_NE(at, bytes.end());
  std::vector<std::byte> overlapping = bytes;
  const std::uint64_t thirty_two = 32;
  std::memcpy(&overlapping[static_cast<std::size_t>(at - bytes.begin())], &thirty_two, 8);
  EXPECT_NE(parse_error(overlapping).find("tensors 'a' and 'b' overlap"), std::string::npos);
  std::vector<std::byte> misaligned = bytes;
  const std::uint64_t odd = 65;
  std::memcpy(&misaligned[static_cast<std::size_t>(at - bytes.begin())], &odd, 8);
  EXPECT_NE(parse_error(misaligned).find("not a multiple of the alignment 32"), std::string::npos);
}

}  // namespace
}  // namespace offgen
