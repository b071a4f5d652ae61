// Dequantization of every GGUF type offgen reads, bit for bit against the `gguf` Python
// package's gguf.quants.dequantize on a file its GGUFWriter wrote (tools/make_gguf_quant_golden.py:
// random data quantized by gguf for Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1, random raw blocks for the
// K-quants), and that file's metadata of every value type read back as gguf wrote it.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "engine/model/gguf_file.h"
#include "engine/model/gguf_types.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

std::filesystem::path gguf_dir() {
  return test::data_dir() / "golden" / "gguf";
}

TEST(GgufQuants, EveryTypeDequantizesAsTheGgufPackage) {
  const nlohmann::json index = nlohmann::json::parse(test::read_file(gguf_dir() / "quants.json"));
  const std::string expected_bytes = test::read_file(gguf_dir() / "quants_expected.bin");
  const auto file = GgufFile::open(gguf_dir() / "quants.gguf");
  int types = 0;
  for (const nlohmann::json& t : index["tensors"]) {
    const std::string name = t["name"].get<std::string>();
    SCOPED_TRACE(name);
    const GgufTensor* tensor = file->tensor(name);
    ASSERT_NE(tensor, nullptr);
    EXPECT_EQ(ggml_type_name(tensor->type), t["type"].get<std::string>());
    EXPECT_EQ(tensor->shape(), t["shape"].get<std::vector<std::int64_t>>());
    EXPECT_EQ(tensor->bytes, t["nbytes"].get<std::size_t>());
    const auto count = t["count"].get<std::size_t>();
    std::vector<float> want(count);
    std::memcpy(want.data(), expected_bytes.data() + 4 * t["offset"].get<std::size_t>(), 4 * count);
    std::vector<float> got(count);
    dequantize_gguf(tensor->type, tensor->data, got.data(), static_cast<std::int64_t>(count));
    int differ = 0;
    for (std::size_t i = 0; i < count; ++i) {
      if (std::memcmp(&got[i], &want[i], 4) != 0 && ++differ <= 5) {
        ADD_FAILURE() << "element " << i << ": " << got[i] << " != " << want[i];
      }
    }
    EXPECT_EQ(differ, 0);
    ++types;
  }
  EXPECT_EQ(types, 11);  // F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K
}

TEST(GgufQuants, MetadataOfEveryValueTypeReadsAsWritten) {
  const nlohmann::json index = nlohmann::json::parse(test::read_file(gguf_dir() / "quants.json"));
  const auto file = GgufFile::open(gguf_dir() / "quants.gguf");
  EXPECT_EQ(file->version(), 3u);
  for (const nlohmann::json& entry : index["metadata"]) {
    const std::string key = entry["key"].get<std::string>();
    SCOPED_TRACE(key);
    const nlohmann::json* value = file->find(key);
    ASSERT_NE(value, nullptr);
    const nlohmann::json& want = entry["value"];
    if (want.is_number_float() || (want.is_array() && !want.empty() && want[0].is_number_float())) {
      EXPECT_EQ(value->dump(), want.dump());
    } else {
      EXPECT_EQ(*value, want);
    }
  }
}

}  // namespace
}  // namespace offgen
