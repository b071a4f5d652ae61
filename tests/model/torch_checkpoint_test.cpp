// TorchCheckpointFile: tensors of a torch.save archive (every dtype, offsets, tied storages,
// zip64), and one test per kind of broken file, each naming the file and the problem.
#include "engine/model/torch_checkpoint.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/core/error.h"
#include "tests/support/safetensors_writer.h"
#include "tests/support/test_support.h"
#include "tests/support/torch_save_writer.h"
#include "tests/support/zip_writer.h"

namespace offgen {
namespace {

using test::TorchArchiveOptions;
using test::TorchTensorSpec;
using Storages = std::vector<std::pair<std::string, std::string>>;

std::vector<float> iota(std::size_t count) {
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = 0.5f + static_cast<float>(i);
  return values;
}

std::vector<float> read_floats(const StoredTensor& tensor) {
  std::vector<Half> halves(tensor.bytes / dtype_size(tensor.dtype));
  convert_to_f16(tensor, halves.data());
  std::vector<float> out;
  for (const Half h : halves) out.push_back(half_to_float(h));
  return out;
}

const std::vector<TorchTensorSpec> kTensors = {
    {"model.decoder.embed_tokens.weight", "0", "HalfStorage", 12, {3, 4}},
    {"lm_head.weight", "0", "HalfStorage", 12, {3, 4}},  // tied: the same storage
    {"model.decoder.layers.0.fc1.bias", "1", "BFloat16Storage", 12, {1, 5}, {77, 1}, 5},
    {"model.decoder.final_layer_norm.weight", "2", "FloatStorage", 12, {2}, {}, 10},
};

Storages storages() {
  const auto values = iota(12);
  return {{"0", test::f16_bytes(values)},
          {"1", test::bf16_bytes(values)},
          {"2", test::f32_bytes(values)}};
}

class TorchCheckpointTest : public ::testing::Test {
 protected:
  void write(const std::vector<TorchTensorSpec>& tensors, const Storages& data,
             const TorchArchiveOptions& options = {}) {
    test::write_file(
        path_, test::torch_archive_bytes(test::torch_state_dict_pickle(tensors), data, options));
  }
  std::string open_error() {
    try {
      TorchCheckpointFile::open(path_);
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find(path_.string()), 0u) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "open() accepted a broken file";
    return "";
  }

  test::TempDir tmp_;
  std::filesystem::path path_ = tmp_.path() / "pytorch_model.bin";
};

void expect_contents(const TensorFile& file) {
  ASSERT_EQ(file.tensors().size(), 4u);
  const StoredTensor& embed = *file.find("model.decoder.embed_tokens.weight");
  EXPECT_EQ(embed.dtype, DType::f16);
  EXPECT_EQ(embed.shape, (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(read_floats(embed), iota(12));
  const StoredTensor& head = *file.find("lm_head.weight");
  EXPECT_EQ(head.data, embed.data);  // tied tensors read the same bytes, in place
  const StoredTensor& bias = *file.find("model.decoder.layers.0.fc1.bias");
  EXPECT_EQ(bias.dtype, DType::bf16);
  EXPECT_EQ(read_floats(bias), (std::vector<float>{5.5f, 6.5f, 7.5f, 8.5f, 9.5f}));
  const StoredTensor& norm = *file.find("model.decoder.final_layer_norm.weight");
  EXPECT_EQ(norm.dtype, DType::f32);
  EXPECT_EQ(read_floats(norm), (std::vector<float>{10.5f, 11.5f}));
}

TEST_F(TorchCheckpointTest, ReadsEveryDtypeAtItsOffsetWithTiedStorages) {
  write(kTensors, storages());
  const auto file = TorchCheckpointFile::open(path_);
  EXPECT_EQ(file->path(), path_);
  expect_contents(*file);
}

TEST_F(TorchCheckpointTest, ReadsZip64ArchivesAndAnyFolderName) {
  write(kTensors, storages(), {.folder = "opt-13b", .zip64 = true});
  expect_contents(*TorchCheckpointFile::open(path_));
}

TEST_F(TorchCheckpointTest, ArchivesWithoutAByteOrderRecordAreLittleEndian) {
  write(kTensors, storages(), {.byte_order = ""});
  expect_contents(*TorchCheckpointFile::open(path_));
}

TEST_F(TorchCheckpointTest, BigEndianDataIsRefused) {
  write(kTensors, storages(), {.byte_order = "big"});
  EXPECT_NE(open_error().find("byteorder says 'big'"), std::string::npos);
}

TEST_F(TorchCheckpointTest, TheLegacyFormatIsNamed) {
  test::write_file(path_, test::torch_state_dict_pickle(kTensors));  // a bare pickle stream
  const std::string message = open_error();
  EXPECT_NE(message.find("legacy format of torch < 1.6"), std::string::npos) << message;
}

TEST_F(TorchCheckpointTest, AnyOtherFileIsNotAZipArchive) {
  test::write_file(path_, "<!doctype html> an error page saved instead of the weights");
  EXPECT_NE(open_error().find("not a zip archive"), std::string::npos);
  test::write_file(path_, "");
  EXPECT_NE(open_error().find("not a zip archive"), std::string::npos);
}

TEST_F(TorchCheckpointTest, AnArchiveWithoutAPickleIsNotATorchFile) {
  test::write_file(path_, test::zip_bytes({{"archive/version", "3\n"}, {"archive/data/0", ""}}));
  EXPECT_NE(open_error().find("without <name>/data.pkl"), std::string::npos);
}

TEST_F(TorchCheckpointTest, EveryTruncationIsAnError) {
  const std::string bytes =
      test::torch_archive_bytes(test::torch_state_dict_pickle(kTensors), storages());
  for (std::size_t size = 0; size < bytes.size(); size += 7) {
    test::write_file(path_, bytes.substr(0, size));
    open_error();
  }
}

TEST_F(TorchCheckpointTest, AMissingStorageEntryNamesATensor) {
  write(kTensors, {storages()[0], storages()[2]});
  const std::string message = open_error();
  EXPECT_NE(message.find("the storage of tensor 'model.decoder.layers.0.fc1.bias' should be the "
                         "entry archive/data/1, which the archive lacks"),
            std::string::npos)
      << message;
}

TEST_F(TorchCheckpointTest, AStorageOfTheWrongSizeIsRefused) {
  Storages data = storages();
  data[2].second.resize(40);
  write(kTensors, data);
  const std::string message = open_error();
  EXPECT_NE(message.find("entry archive/data/2 (the storage of tensor "
                         "'model.decoder.final_layer_norm.weight') is 40 bytes, but 12 elements "
                         "of f32 need 48"),
            std::string::npos)
      << message;
}

TEST_F(TorchCheckpointTest, ATensorPastItsStorageIsRefused) {
  write({{"w", "0", "HalfStorage", 12, {3, 4}, {}, 1}}, {storages()[0]});
  const std::string message = open_error();
  EXPECT_NE(message.find("tensor 'w' (elements 1..+12) runs past the end of its storage (12 "
                         "elements)"),
            std::string::npos)
      << message;
}

TEST_F(TorchCheckpointTest, NonContiguousTensorsAreRefused) {
  write({{"w", "0", "HalfStorage", 12, {3, 4}, {1, 3}}}, {storages()[0]});  // a transpose
  const std::string message = open_error();
  EXPECT_NE(message.find("tensor 'w' of shape [3, 4] has strides [1, 3], not contiguous"),
            std::string::npos)
      << message;
}

TEST_F(TorchCheckpointTest, UnsupportedDtypesNameTheTensor) {
  write({{"ids", "0", "LongStorage", 3, {3}}}, {{"0", std::string(24, '\0')}});
  const std::string message = open_error();
  EXPECT_NE(message.find("tensor 'ids' is stored as torch.LongStorage"), std::string::npos)
      << message;
}

TEST_F(TorchCheckpointTest, ForbiddenGlobalsNameTheFileAndThePickle) {
  test::PickleWriter w;
  w.proto(2).global("os", "system").op('(').string("true").op('t').op('R').stop();
  test::write_file(path_, test::torch_archive_bytes(w.bytes(), {}));
  const std::string message = open_error();
  EXPECT_NE(message.find(": archive/data.pkl: refusing global 'os.system'"), std::string::npos)
      << message;
}

// Files torch.save itself wrote (the torch_checkpoint_fuzz seeds, made by torch 2.x): a tied pair,
// views at offsets into a shared fp32 storage, bf16; at pickle protocols 2 and 4; and the legacy
// format.
TEST(TorchCheckpointSeeds, WhatTorchSaveWritesIsRead) {
  const std::filesystem::path seeds =
      test::data_dir() / ".." / "fuzz" / "corpus" / "torch_checkpoint";
  for (const char* name : {"tied_offsets_three_dtypes", "protocol4"}) {
    SCOPED_TRACE(name);
    const auto file = TorchCheckpointFile::open(seeds / name);
    ASSERT_EQ(file->tensors().size(), 5u);
    EXPECT_EQ(file->find("lm_head.weight")->data,
              file->find("model.decoder.embed_tokens.weight")->data);
    EXPECT_EQ(file->find("decoder.layers.0.fc1.bias")->dtype, DType::bf16);
    const StoredTensor& weight = *file->find("decoder.final_layer_norm.weight");  // big[1, 2:]
    const StoredTensor& bias = *file->find("decoder.final_layer_norm.bias");      // big[0]
    EXPECT_EQ(weight.shape, (std::vector<std::int64_t>{4}));
    EXPECT_EQ(weight.data, bias.data + 8 * sizeof(float));
  }
  try {
    TorchCheckpointFile::open(seeds / "legacy_format");
    ADD_FAILURE() << "the legacy format was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("legacy format"), std::string::npos) << e.what();
  }
}

TEST_F(TorchCheckpointTest, FromBytesReadsTheSame) {
  const std::string bytes =
      test::torch_archive_bytes(test::torch_state_dict_pickle(kTensors), storages());
  expect_contents(*TorchCheckpointFile::from_bytes(
      {reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, "memory"));
}

}  // namespace
}  // namespace offgen
