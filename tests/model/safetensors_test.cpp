// SafetensorsFile: round trips in every accepted dtype and one test per kind of broken file.
#include "engine/model/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>
#include <vector>

#include "engine/core/error.h"
#include "tests/support/safetensors_writer.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using test::SafetensorsEntry;
using test::SafetensorsWriteOptions;

std::vector<float> to_floats(const std::vector<Half>& values) {
  std::vector<float> out;
  for (const Half h : values) out.push_back(half_to_float(h));
  return out;
}

std::vector<Half> read_all(const SafetensorsFile::Tensor& tensor) {
  std::vector<Half> out(tensor.bytes / dtype_size(tensor.dtype));
  convert_to_f16(tensor, out.data());
  return out;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  // Writes `tensors` with `options` and returns the message of the Error open() throws.
  std::string open_error(const std::vector<SafetensorsEntry>& tensors,
                         const SafetensorsWriteOptions& options = {}) {
    test::write_safetensors(path_, tensors, options);
    try {
      SafetensorsFile::open(path_);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "open() accepted a broken file";
    return "";
  }

  // Expects the error to name the file and to contain `problem`.
  void expect_error(const std::string& message, const std::string& problem) {
    EXPECT_NE(message.find(path_.string()), std::string::npos) << message;
    EXPECT_NE(message.find(problem), std::string::npos) << message;
  }

  static SafetensorsEntry f16_entry(std::string name, std::vector<std::int64_t> shape) {
    const auto numel = static_cast<std::size_t>(
        std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>()));
    return {std::move(name), "F16", std::move(shape), std::string(numel * 2, '\0')};
  }

  test::TempDir tmp_;
  std::filesystem::path path_ = tmp_.path() / "weights.safetensors";
};

TEST_F(SafetensorsTest, RoundTripsEveryDtype) {
  const std::vector<float> values = {0.0f, 1.0f, -2.5f, 0.1f, 3.14159f, -65504.0f, 1e-3f, 7.0f};
  test::write_safetensors(path_, {{"a.f16", "F16", {2, 4}, test::f16_bytes(values)},
                                  {"b.bf16", "BF16", {8}, test::bf16_bytes(values)},
                                  {"c.f32", "F32", {4, 2}, test::f32_bytes(values)},
                                  {"d.scalar", "F32", {}, test::f32_bytes(std::vector{42.0f})}});
  const auto file = SafetensorsFile::open(path_);
  EXPECT_EQ(file->path(), path_);
  ASSERT_EQ(file->tensors().size(), 4u);  // __metadata__ is not a tensor
  EXPECT_EQ(file->find("__metadata__"), nullptr);
  EXPECT_EQ(file->find("missing"), nullptr);

  const auto* f16 = file->find("a.f16");
  ASSERT_NE(f16, nullptr);
  EXPECT_EQ(f16->dtype, DType::f16);
  EXPECT_EQ(f16->shape, (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(f16->bytes, 16u);
  EXPECT_EQ(f16->name, "a.f16");
  const auto* bf16 = file->find("b.bf16");
  ASSERT_NE(bf16, nullptr);
  EXPECT_EQ(bf16->dtype, DType::bf16);
  const auto* f32 = file->find("c.f32");
  ASSERT_NE(f32, nullptr);
  EXPECT_EQ(f32->dtype, DType::f32);
  EXPECT_EQ(f32->bytes, 32u);

  const auto from_f16 = to_floats(read_all(*f16));
  const auto from_bf16 = to_floats(read_all(*bf16));
  const auto from_f32 = to_floats(read_all(*f32));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float expected_f16 = half_to_float(float_to_half(values[i]));
    EXPECT_EQ(from_f16[i], expected_f16) << i;
    EXPECT_EQ(from_f32[i], expected_f16) << i;  // f32 -> f16 rounds once
    // bf16 keeps 8 mantissa bits, so bf16 -> fp16 is exact within fp16's range; -65504 rounds
    // to bf16 -65536, which is past it and becomes -inf.
    EXPECT_EQ(from_bf16[i], half_to_float(float_to_half(bf16_to_float(float_to_bf16(values[i])))))
        << i;
  }
  EXPECT_TRUE(std::isinf(from_bf16[5]) && from_bf16[5] < 0);
  EXPECT_EQ(to_floats(read_all(*file->find("d.scalar"))), std::vector<float>{42.0f});
}

TEST_F(SafetensorsTest, ConvertsLargeTensorsInParallelIdentically) {
  std::vector<float> values(1 << 20);
  for (std::size_t i = 0; i < values.size(); ++i) {
    values[i] = std::sin(static_cast<float>(i) * 0.001f) * 100.0f;
  }
  // A 2-byte tensor first leaves the big F32 tensor 2 bytes off alignment: none is assumed.
  test::write_safetensors(path_, {{"pad", "F16", {1}, test::f16_bytes(std::vector{0.0f})},
                                  {"big.f32", "F32", {1024, 1024}, test::f32_bytes(values)},
                                  {"big.bf16", "BF16", {1 << 20}, test::bf16_bytes(values)}});
  const auto file = SafetensorsFile::open(path_);
  const auto f32 = read_all(*file->find("big.f32"));
  const auto bf16 = read_all(*file->find("big.bf16"));
  for (std::size_t i = 0; i < values.size(); i += 997) {
    ASSERT_EQ(f32[i].bits, float_to_half(values[i]).bits) << i;
    ASSERT_EQ(bf16[i].bits, float_to_half(bf16_to_float(float_to_bf16(values[i]))).bits) << i;
  }
}

TEST_F(SafetensorsTest, UnalignedF32DataIsRead) {
  // A hand-made header of 9 bytes puts the data at file offset 17.
  const std::vector<float> values = {1.5f, -2.0f};
  std::string bytes =
      test::safetensors_bytes({{"x", "F32", {2}, test::f32_bytes(values)}},
                              {.header_text = std::string(R"({"x":{"dtype":"F32","shape":[2],)"
                                                          R"("data_offsets":[0,8]}} )")});
  ASSERT_NE((bytes.size() - 8) % 4, 0u);
  test::write_file(path_, bytes);
  const auto file = SafetensorsFile::open(path_);
  EXPECT_EQ(to_floats(read_all(*file->find("x"))), values);
}

TEST_F(SafetensorsTest, AcceptsAnEmptyHeaderObject) {
  test::write_safetensors(path_, {}, {.metadata = false});
  EXPECT_TRUE(SafetensorsFile::open(path_)->tensors().empty());
}

TEST_F(SafetensorsTest, FromBytesReadsWhatOpenReads) {
  const std::vector<float> values = {1.5f, -2.0f, 0.25f};
  const std::string bytes = test::safetensors_bytes(
      {{"x", "F32", {3}, test::f32_bytes(values)}, {"y", "F16", {3}, test::f16_bytes(values)}});
  const auto file = SafetensorsFile::from_bytes(
      std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()), "in memory");
  EXPECT_EQ(file->path(), "in memory");
  ASSERT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(to_floats(read_all(*file->find("x"))), values);
  try {
    SafetensorsFile::from_bytes(
        std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size() - 1), "cut");
    ADD_FAILURE() << "from_bytes() accepted a truncated file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cut: tensor"), std::string::npos) << e.what();
  }
}

// Found by tests/fuzz/safetensors_fuzz: converting a tensor with no elements passed dst (null for
// an empty vector) to memcpy, which is undefined behaviour even for zero bytes.
TEST_F(SafetensorsTest, EmptyTensorsConvertWithoutADestination) {
  test::write_safetensors(
      path_, {{"a", "F16", {0}, ""}, {"b", "BF16", {2, 0}, ""}, {"c", "F32", {0, 3}, ""}});
  const auto file = SafetensorsFile::open(path_);
  ASSERT_EQ(file->tensors().size(), 3u);
  for (const auto& [name, tensor] : file->tensors()) {
    EXPECT_EQ(tensor.bytes, 0u) << name;
    convert_to_f16(tensor, nullptr);
  }
}

TEST_F(SafetensorsTest, MissingFile) {
  try {
    SafetensorsFile::open(tmp_.path() / "nope.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.safetensors"), std::string::npos) << e.what();
  }
}

TEST_F(SafetensorsTest, FileShorterThanTheLengthField) {
  expect_error(open_error({f16_entry("x", {2})}, {.truncate_to = 5}), "file is 5 bytes");
  expect_error(open_error({}, {.truncate_to = 0}), "too short");
}

TEST_F(SafetensorsTest, HeaderLengthPastTheEndOfTheFile) {
  expect_error(open_error({f16_entry("x", {2})}, {.header_length = 1'000'000}),
               "header length 1000000 runs past the end of the file");
  // Huge values must not overflow the 8 + N check.
  expect_error(open_error({f16_entry("x", {2})}, {.header_length = ~std::uint64_t{0}}),
               "runs past the end of the file");
}

TEST_F(SafetensorsTest, TruncatedData) {
  const auto entries = {f16_entry("a", {4}), f16_entry("b", {4})};
  const std::size_t full = test::safetensors_bytes(entries).size();
  expect_error(open_error(entries, {.truncate_to = full - 1}),
               "tensor 'b': data_offsets [8, 16] run past the end of the data");
}

TEST_F(SafetensorsTest, TruncatedHeader) {
  const auto entries = {f16_entry("a", {4})};
  const std::size_t header = test::safetensors_header(entries).size();
  expect_error(open_error(entries, {.truncate_to = 8 + header / 2}),
               "runs past the end of the file");
}

TEST_F(SafetensorsTest, HeaderIsNotJson) {
  const std::string message = open_error({}, {.header_text = "{\"x\": {\"dtype\": F16}}"});
  expect_error(message, "header is not valid JSON");
  EXPECT_NE(message.find("column"), std::string::npos) << message;  // the parser's position
  expect_error(open_error({}, {.header_text = ""}), "header is not valid JSON");
}

// Found by tests/fuzz/config_fuzz in the config reader, the same catch was here: a number past
// double's range makes nlohmann throw out_of_range, not parse_error, which escaped as a foreign
// exception without the file's name.
TEST_F(SafetensorsTest, HeaderNumberPastDoubleRange) {
  expect_error(open_error({}, {.header_text = R"({"x": {"dtype": "F16", "shape": [1e400],)"
                                              R"( "data_offsets": [0, 2]}})"}),
               "header is not valid JSON");
}

// Found reading the code the fuzzer drives: a header nested a million deep parsed, then
// overflowed the stack when printed for the error message.
TEST_F(SafetensorsTest, HeaderNestedTooDeep) {
  const std::size_t depth = 1'000'000;
  const std::string deep = std::string(depth, '[') + std::string(depth, ']');
  expect_error(open_error({}, {.header_text = "{\"x\": " + deep + "}"}),
               "header is nested more than 64 levels deep");
  expect_error(open_error({}, {.header_text = deep}), "header is nested more than 64 levels deep");
}

TEST_F(SafetensorsTest, HeaderIsNotAnObject) {
  expect_error(open_error({}, {.header_text = "[1, 2, 3]"}), "header must be a JSON object");
}

TEST_F(SafetensorsTest, EntryMissingAField) {
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    nlohmann::json entry = {{"dtype", "F16"}, {"shape", {2}}, {"data_offsets", {0, 4}}};
    entry.erase(field);
    expect_error(open_error({}, {.header_text = nlohmann::json{{"w", entry}}.dump()}),
                 fmt::format("tensor 'w' has no '{}'", field));
  }
}

TEST_F(SafetensorsTest, EntryFieldsOfWrongJsonTypes) {
  const auto header = [](nlohmann::json dtype, nlohmann::json shape, nlohmann::json offsets) {
    return nlohmann::json{{"w", {{"dtype", dtype}, {"shape", shape}, {"data_offsets", offsets}}}}
        .dump();
  };
  expect_error(open_error({}, {.header_text = R"({"w": 5})"}),
               "tensor 'w': entry must be an object");
  expect_error(open_error({}, {.header_text = header(16, {2}, {0, 4})}),
               "tensor 'w': dtype must be a string");
  expect_error(open_error({}, {.header_text = header("F16", "2", {0, 4})}),
               "tensor 'w': shape must be an array of integers");
  expect_error(open_error({}, {.header_text = header("F16", {2.5}, {0, 4})}),
               "tensor 'w': shape must be an array of integers");
  expect_error(open_error({}, {.header_text = header("F16", {2}, {0})}),
               "tensor 'w': data_offsets must be [begin, end]");
  expect_error(open_error({}, {.header_text = header("F16", {2}, {0, "4"})}),
               "tensor 'w': data_offsets must be [begin, end]");
  expect_error(open_error({}, {.header_text = header("F16", {2}, {-4, 4})}),
               "tensor 'w': data_offsets must be [begin, end]");
}

TEST_F(SafetensorsTest, UnsupportedDtypesAreRejectedByName) {
  for (const char* dtype : {"I8", "U8", "I16", "I32", "I64", "F64", "BOOL", "F8_E4M3", "f16"}) {
    expect_error(open_error({{"x", dtype, {2}, std::string(2, '\0')}}),
                 fmt::format("unsupported dtype '{}' for tensor 'x'", dtype));
  }
}

TEST_F(SafetensorsTest, NegativeOrOverflowingShape) {
  auto entry = f16_entry("x", {2});
  entry.shape = {-1, 2};
  expect_error(open_error({entry}), "tensor 'x' has negative dimension -1");
  entry.shape = {1LL << 40, 1LL << 40};
  expect_error(open_error({entry}), "tensor 'x': shape [1099511627776,1099511627776] has too many");
  entry.shape = {1LL << 62};  // numel fits, numel * 2 bytes does not
  expect_error(open_error({entry}), "has too many elements");
}

TEST_F(SafetensorsTest, OffsetsBeginAfterEnd) {
  auto entry = f16_entry("x", {2});
  entry.data_offsets = {{4, 0}};
  expect_error(open_error({entry}), "tensor 'x': data_offsets [4, 0] begin after they end");
}

TEST_F(SafetensorsTest, OffsetsPastTheData) {
  auto entry = f16_entry("x", {2});
  entry.data_offsets = {{2, 6}};
  expect_error(open_error({entry}), "tensor 'x': data_offsets [2, 6] run past the end of the data");
}

TEST_F(SafetensorsTest, SpanDoesNotMatchShapeTimesDtype) {
  auto entry = f16_entry("x", {2, 3});
  entry.dtype = "F32";  // 6 elements of F32 need 24 bytes; the data holds 12
  expect_error(open_error({entry, f16_entry("y", {6})}),
               "tensor 'x': data_offsets [0, 12] span 12 bytes but shape [2, 3] of F32 needs 24");
}

TEST_F(SafetensorsTest, OverlappingTensors) {
  auto a = f16_entry("a", {4});
  auto b = f16_entry("b", {4});
  b.data_offsets = {{4, 12}};
  expect_error(open_error({a, b}), "tensors 'a' (bytes 0..8) and 'b' (bytes 4..12) overlap");
  // A tensor nested inside an earlier, longer one.
  auto big = f16_entry("big", {8});
  auto small = f16_entry("small", {1});
  small.data_offsets = {{10, 12}};
  expect_error(open_error({big, small, f16_entry("pad", {1})}), "overlap");
  // Empty tensors share offsets harmlessly.
  auto empty1 = f16_entry("e1", {0});
  auto empty2 = f16_entry("e2", {0, 5});
  empty2.data_offsets = {{0, 0}};
  test::write_safetensors(path_, {empty1, empty2, f16_entry("z", {1})});
  EXPECT_EQ(SafetensorsFile::open(path_)->tensors().size(), 3u);
}

}  // namespace
}  // namespace offgen
