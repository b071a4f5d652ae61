// Checkpoint: single-file and sharded directories in safetensors and torch.save formats, both
// tensor-name spellings, and the refusals.
#include "engine/model/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/model/model_tensors.h"
#include "tests/support/safetensors_writer.h"
#include "tests/support/test_support.h"
#include "tests/support/torch_save_writer.h"

namespace offgen {
namespace {

namespace fs = std::filesystem;
using test::SafetensorsEntry;

// A tiny OPT (pre-LN, 2 layers) that keeps the files small.
constexpr const char* kTinyConfig = R"({
  "model_type": "opt", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "ffn_dim": 128, "vocab_size": 100, "max_position_embeddings": 32, "word_embed_proj_dim": 64,
  "do_layer_norm_before": true, "activation_function": "relu"
})";

ModelConfig tiny_config() {
  return ModelConfig::from_json_text(kTinyConfig, "tiny");
}

// Value k of the tensor at position `t` in the spec list, so every tensor's contents differ.
float value_of(std::size_t t, std::int64_t k) {
  return static_cast<float>(t % 16) * 0.25f + static_cast<float>(k % 64) * 0.015625f;
}

// Every tensor of the tiny model as F16 entries named `prefix` + canonical name.
std::vector<SafetensorsEntry> tiny_entries(const std::string& prefix, const char* dtype = "F16") {
  std::vector<SafetensorsEntry> entries;
  const auto specs = model_tensor_specs(tiny_config());
  for (std::size_t t = 0; t < specs.size(); ++t) {
    std::vector<float> values(static_cast<std::size_t>(specs[t].numel()));
    for (std::size_t k = 0; k < values.size(); ++k) {
      values[k] = value_of(t, static_cast<std::int64_t>(k));
    }
    entries.push_back(
        {prefix + specs[t].name, dtype, specs[t].shape,
         std::string(dtype) == "F32" ? test::f32_bytes(values) : test::f16_bytes(values)});
  }
  return entries;
}

// The same tensors as torch.save writes them, each in a storage of its own.
std::string torch_save_bytes(const std::vector<SafetensorsEntry>& entries) {
  std::vector<test::TorchTensorSpec> tensors;
  std::vector<std::pair<std::string, std::string>> storages;
  for (const SafetensorsEntry& entry : entries) {
    const std::string key = std::to_string(storages.size());
    const bool f32 = entry.dtype == "F32";
    const std::size_t numel = entry.data.size() / (f32 ? 4 : 2);
    tensors.push_back({entry.name, key, f32 ? "FloatStorage" : "HalfStorage", numel, entry.shape});
    storages.emplace_back(key, entry.data);
  }
  return test::torch_archive_bytes(test::torch_state_dict_pickle(tensors), storages);
}

// Reads every spec'd tensor and checks its values against value_of().
void expect_tiny_contents(const Checkpoint& checkpoint) {
  const auto specs = model_tensor_specs(checkpoint.config());
  for (std::size_t t = 0; t < specs.size(); ++t) {
    ASSERT_TRUE(checkpoint.contains(specs[t].name)) << specs[t].name;
    ASSERT_TRUE(checkpoint.contains("model." + specs[t].name)) << specs[t].name;
    std::vector<Half> out(static_cast<std::size_t>(specs[t].numel()));
    checkpoint.read_f16(specs[t].name, specs[t].shape, out.data());
    for (std::size_t k = 0; k < out.size(); k += 7) {
      ASSERT_EQ(half_to_float(out[k]), value_of(t, static_cast<std::int64_t>(k)))
          << specs[t].name << "[" << k << "]";
    }
  }
}

// The tiny model in two shards <stem>-0000k-of-00002<ext>, written by `write`, and the index
// <stem><ext>.index.json that maps every tensor to its shard.
void write_two_shards(
    const fs::path& dir, const std::string& stem, const std::string& ext,
    const std::function<void(const fs::path&, const std::vector<SafetensorsEntry>&)>& write) {
  const auto entries = tiny_entries("model.");
  const std::size_t half = entries.size() / 2;
  nlohmann::json index = {{"metadata", {{"total_size", 12345}}},
                          {"weight_map", nlohmann::json::object()}};
  for (int shard = 0; shard < 2; ++shard) {
    const std::string name = stem + "-0000" + std::to_string(shard + 1) + "-of-00002" + ext;
    const std::vector<SafetensorsEntry> part(entries.begin() + (shard == 0 ? 0 : half),
                                             shard == 0 ? entries.begin() + half : entries.end());
    write(dir / name, part);
    for (const auto& e : part) index["weight_map"][e.name] = name;
  }
  test::write_file(dir / (stem + ext + ".index.json"), index.dump(2));
}

std::string open_error(const fs::path& dir) {
  try {
    Checkpoint::open(dir);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "open() accepted " << dir;
  return "";
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override { test::write_file(dir_ / "config.json", kTinyConfig); }

  test::TempDir tmp_;
  fs::path dir_ = tmp_.path() / "tiny-opt";
};

TEST_F(CheckpointTest, SingleFileWithCausalLmNames) {
  auto entries = tiny_entries("model.");
  // OPTForCausalLM also saves the tied head; it must be ignored, not rejected.
  entries.push_back({"lm_head.weight", "F16", {100, 64}, std::string(100 * 64 * 2, '\0')});
  test::write_safetensors(dir_ / "model.safetensors", entries);
  const auto checkpoint = Checkpoint::open(dir_);
  EXPECT_EQ(checkpoint->config().name, "tiny-opt");
  EXPECT_EQ(checkpoint->config().hidden_size, 64);
  EXPECT_EQ(checkpoint->dir(), dir_);
  EXPECT_EQ(checkpoint->describe(), dir_.string());
  EXPECT_FALSE(checkpoint->contains("lm_head.weight"));
  EXPECT_FALSE(checkpoint->contains("decoder.layers.2.fc1.weight"));
  expect_tiny_contents(*checkpoint);
}

TEST_F(CheckpointTest, SingleFileWithOptModelNamesInF32) {
  test::write_safetensors(dir_ / "model.safetensors", tiny_entries("", "F32"));
  expect_tiny_contents(*Checkpoint::open(dir_));
}

TEST_F(CheckpointTest, ShardedWithIndex) {
  write_two_shards(dir_, "model", ".safetensors", [](const auto& path, const auto& entries) {
    test::write_safetensors(path, entries);
  });
  expect_tiny_contents(*Checkpoint::open(dir_));
}

TEST_F(CheckpointTest, ShardMissingFromDisk) {
  test::write_safetensors(dir_ / "a.safetensors", tiny_entries(""));
  test::write_file(dir_ / "model.safetensors.index.json",
                   R"({"weight_map": {"decoder.embed_tokens.weight": "a.safetensors",
                                      "decoder.layers.0.fc1.weight": "b.safetensors"}})");
  const std::string message = open_error(dir_);
  EXPECT_NE(message.find("model.safetensors.index.json"), std::string::npos) << message;
  EXPECT_NE(message.find("shard 'b.safetensors'"), std::string::npos) << message;
  EXPECT_NE(message.find("is missing"), std::string::npos) << message;
}

TEST_F(CheckpointTest, IndexListsATensorItsShardLacks) {
  test::write_safetensors(dir_ / "a.safetensors", tiny_entries(""));
  test::write_file(dir_ / "model.safetensors.index.json",
                   R"({"weight_map": {"decoder.not_a_tensor": "a.safetensors"}})");
  const std::string message = open_error(dir_);
  EXPECT_NE(message.find("tensor 'decoder.not_a_tensor'"), std::string::npos) << message;
  EXPECT_NE(message.find("a.safetensors does not contain it"), std::string::npos) << message;
}

TEST_F(CheckpointTest, MalformedIndex) {
  test::write_file(dir_ / "model.safetensors.index.json", R"({"weight_map": [1]})");
  EXPECT_NE(open_error(dir_).find("weight_map"), std::string::npos);
  test::write_file(dir_ / "model.safetensors.index.json", R"({"weight_map": )");
  EXPECT_NE(open_error(dir_).find("model.safetensors.index.json: malformed JSON"),
            std::string::npos);
  test::write_file(dir_ / "model.safetensors.index.json", R"({"weight_map": {"x": "../x"}})");
  EXPECT_NE(open_error(dir_).find("not a file inside"), std::string::npos);
  // A number past double's range is a clear error too, not an escaped exception.
  test::write_file(dir_ / "model.safetensors.index.json", R"({"metadata": {"total_size": 1e400}})");
  EXPECT_NE(open_error(dir_).find("model.safetensors.index.json: malformed JSON"),
            std::string::npos);
}

TEST_F(CheckpointTest, TensorStoredUnderBothSpellingsIsRejected) {
  auto entries = tiny_entries("model.");
  entries.push_back({"decoder.embed_tokens.weight", "F16", {100, 64}, std::string(12800, '\0')});
  test::write_safetensors(dir_ / "model.safetensors", entries);
  EXPECT_NE(open_error(dir_).find("tensor 'decoder.embed_tokens.weight' is stored twice"),
            std::string::npos);
}

TEST_F(CheckpointTest, PytorchBinSingleFile) {
  auto entries = tiny_entries("model.");
  entries.push_back({"lm_head.weight", "F16", {100, 64}, entries.front().data});
  test::write_file(dir_ / "pytorch_model.bin", torch_save_bytes(entries));
  const auto checkpoint = Checkpoint::open(dir_);
  EXPECT_EQ(checkpoint->weights_file(), "pytorch_model.bin");
  EXPECT_FALSE(checkpoint->contains("lm_head.weight"));
  expect_tiny_contents(*checkpoint);
}

TEST_F(CheckpointTest, PytorchBinInF32WithOptModelNames) {
  test::write_file(dir_ / "pytorch_model.bin", torch_save_bytes(tiny_entries("", "F32")));
  expect_tiny_contents(*Checkpoint::open(dir_));
}

TEST_F(CheckpointTest, PytorchBinShardedWithIndex) {
  write_two_shards(dir_, "pytorch_model", ".bin", [](const auto& path, const auto& entries) {
    test::write_file(path, torch_save_bytes(entries));
  });
  const auto checkpoint = Checkpoint::open(dir_);
  EXPECT_EQ(checkpoint->weights_file(), "pytorch_model.bin.index.json");
  expect_tiny_contents(*checkpoint);
}

// The golden checkpoints saved by torch.save (tools/make_torch_save_fixtures.py: tied, sharded,
// and bf16 with an untied head) read bit for bit as their safetensors twins, every tensor.
TEST(CheckpointFixtures, TorchSaveFilesReadAsTheSafetensorsOnes) {
  for (const std::string name : {"tiny-preln", "tiny-postln-proj", "tiny-bf16-noprefix"}) {
    SCOPED_TRACE(name);
    const auto safetensors = Checkpoint::open(test::data_dir() / "golden" / name);
    const auto torch_save = Checkpoint::open(test::data_dir() / "golden" / (name + "-bin"));
    EXPECT_EQ(torch_save->weights_file().find("pytorch_model.bin"), 0u);
    const auto specs = model_tensor_specs(safetensors->config());
    for (const TensorSpec& spec : specs) {
      ASSERT_TRUE(torch_save->contains(spec.name)) << spec.name;
      std::vector<Half> want(static_cast<std::size_t>(spec.numel()));
      std::vector<Half> got(want.size(), float_to_half(-7.0f));
      safetensors->read_f16(spec.name, spec.shape, want.data());
      torch_save->read_f16(spec.name, spec.shape, got.data());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(Half)), 0) << spec.name;
    }
    EXPECT_FALSE(torch_save->contains("lm_head.weight"));
  }
}

TEST_F(CheckpointTest, SafetensorsArePreferredOverPytorchBin) {
  test::write_safetensors(dir_ / "model.safetensors", tiny_entries(""));
  test::write_file(dir_ / "pytorch_model.bin", "not read: the safetensors file comes first");
  const auto checkpoint = Checkpoint::open(dir_);
  EXPECT_EQ(checkpoint->weights_file(), "model.safetensors");
  expect_tiny_contents(*checkpoint);
}

TEST_F(CheckpointTest, BrokenPytorchBinIsReportedWithItsPath) {
  test::write_file(dir_ / "pytorch_model.bin", torch_save_bytes(tiny_entries("")).substr(0, 500));
  const std::string message = open_error(dir_);
  EXPECT_EQ(message.find((dir_ / "pytorch_model.bin").string() + ": "), 0u) << message;
}

TEST_F(CheckpointTest, WeightsWithoutAFileOffgenLooksForAreNamed) {
  test::write_file(dir_ / "pytorch_model-00001-of-00002.bin", "a shard without its index");
  test::write_file(dir_ / "opt.pt", "x");
  const std::string message = open_error(dir_);
  EXPECT_NE(message.find("no model.safetensors, model.safetensors.index.json, pytorch_model.bin "
                         "or pytorch_model.bin.index.json (it holds opt.pt, "
                         "pytorch_model-00001-of-00002.bin)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("shards through their index file"), std::string::npos) << message;
}

TEST_F(CheckpointTest, NoWeightsAtAll) {
  const std::string message = open_error(dir_);
  EXPECT_NE(message.find("no model.safetensors"), std::string::npos) << message;
}

TEST_F(CheckpointTest, MissingDirectoryOrConfig) {
  EXPECT_NE(open_error(tmp_.path() / "nowhere").find("does not exist"), std::string::npos);
  test::TempDir empty;
  const std::string message = open_error(empty.path());
  EXPECT_NE(message.find("has no config.json"), std::string::npos) << message;
  EXPECT_NE(open_error(dir_ / "config.json").find("is not a directory"), std::string::npos);
}

TEST_F(CheckpointTest, BadConfigIsReportedWithItsPath) {
  test::write_safetensors(dir_ / "model.safetensors", tiny_entries(""));
  test::write_file(dir_ / "config.json", R"({"hidden_size": 64})");
  const std::string message = open_error(dir_);
  EXPECT_NE(
      message.find((dir_ / "config.json").string() + ": field 'num_hidden_layers' is missing"),
      std::string::npos)
      << message;
}

TEST_F(CheckpointTest, BrokenSafetensorsIsReportedWithItsPath) {
  test::write_safetensors(dir_ / "model.safetensors", tiny_entries(""), {.truncate_to = 100});
  const std::string message = open_error(dir_);
  EXPECT_NE(message.find((dir_ / "model.safetensors").string()), std::string::npos) << message;
}

TEST_F(CheckpointTest, ShapeMismatchAgainstTheConfigNamesTheTensor) {
  auto entries = tiny_entries("");
  for (auto& entry : entries) {
    if (entry.name == "decoder.layers.0.fc1.weight") {
      entry.shape = {256, 64};
      entry.data = std::string(256 * 64 * 2, '\0');
    }
  }
  test::write_safetensors(dir_ / "model.safetensors", entries);
  const auto checkpoint = Checkpoint::open(dir_);  // headers are self-consistent; opening works
  std::vector<Half> out(128 * 64);
  const std::vector<std::int64_t> wanted = {128, 64};
  try {
    checkpoint->read_f16("decoder.layers.0.fc1.weight", wanted, out.data());
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "tensor 'decoder.layers.0.fc1.weight' in " +
                                         (dir_ / "model.safetensors").string() +
                                         " has shape [256, 64] but the config needs [128, 64]");
  }
}

TEST_F(CheckpointTest, ReadingAMissingTensorNamesIt) {
  test::write_safetensors(dir_ / "model.safetensors", tiny_entries(""));
  const auto checkpoint = Checkpoint::open(dir_);
  Half out[64];
  const std::vector<std::int64_t> shape = {64};
  try {
    checkpoint->read_f16("decoder.project_in.weight", shape, out);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tensor 'decoder.project_in.weight'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace offgen
