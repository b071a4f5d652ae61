// A LLaMA-family model from a GGUF file: the golden Hugging Face checkpoints converted as
// llama.cpp converts them (names, q / k rows permuted for its rotary layout, F16 or F32) read
// back to the same config and bit-identical fp16 tensors; a directory holding one .gguf; and
// every refusal: another architecture, a tensor the model does not use, a type offgen does not
// read, a missing key, partial rotary, several .gguf files in one directory.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/core/error.h"
#include "engine/model/checkpoint.h"
#include "engine/model/gguf_checkpoint.h"
#include "engine/model/model_tensors.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using test::GgufStorage;
using test::GgufWriter;

class GgufCheckpointTest : public ::testing::TestWithParam<std::tuple<std::string, GgufStorage>> {};

TEST_P(GgufCheckpointTest, ReadsBackTheHuggingFaceModel) {
  const auto& [model, storage] = GetParam();
  const test::TempDir tmp;
  const auto dir = test::data_dir() / "golden" / model;
  const auto path = tmp.path() / "model.gguf";
  test::convert_gguf_from_checkpoint(dir, path, storage);

  const auto hf = Checkpoint::open(dir);
  const auto gguf = GgufCheckpoint::open(path);
  const ModelConfig& a = hf->config();
  const ModelConfig& b = gguf->config();
  EXPECT_EQ(b.model_type, a.model_type);
  EXPECT_EQ(b.hidden_size, a.hidden_size);
  EXPECT_EQ(b.num_layers, a.num_layers);
  EXPECT_EQ(b.num_heads, a.num_heads);
  EXPECT_EQ(b.kv_heads(), a.kv_heads());
  EXPECT_EQ(b.ffn_dim, a.ffn_dim);
  EXPECT_EQ(b.vocab_size, a.vocab_size);
  EXPECT_EQ(b.max_position_embeddings, a.max_position_embeddings);
  EXPECT_EQ(b.tie_word_embeddings, a.tie_word_embeddings);
  EXPECT_EQ(b.qkv_bias, a.qkv_bias);
  EXPECT_EQ(b.rope_theta, a.rope_theta);
  EXPECT_EQ(b.rope_inv_freq(), a.rope_inv_freq());
  EXPECT_EQ(b.max_positions(), a.max_positions());
  EXPECT_EQ(b.layer_norm_eps, a.layer_norm_eps);
  EXPECT_EQ(b.bos_token_id, a.bos_token_id);
  EXPECT_EQ(b.eos_token_id, a.eos_token_id);
  EXPECT_EQ(b.pad_token_id, a.pad_token_id);
  EXPECT_EQ(b.name, model);
  for (const TensorSpec& spec : model_tensor_specs(a)) {
    SCOPED_TRACE(spec.name);
    ASSERT_TRUE(gguf->contains(spec.name));
    std::vector<Half> want(static_cast<std::size_t>(spec.numel()));
    std::vector<Half> got(want.size());
    hf->read_f16(spec.name, spec.shape, want.data());
    gguf->read_f16("model." + spec.name, spec.shape, got.data());
    ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(Half)), 0);
  }

  // Checkpoint opens the file, and a directory that holds it (and no config.json).
  EXPECT_EQ(Checkpoint::open(path)->config().hidden_size, a.hidden_size);
  EXPECT_EQ(Checkpoint::open(tmp.path())->weights_file(), "model.gguf");
  EXPECT_EQ(Checkpoint::read_config(tmp.path()).num_layers, a.num_layers);
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, GgufCheckpointTest,
    ::testing::Combine(::testing::Values("tiny-llama-gqa", "tiny-qwen2-mqa", "tiny-mistral-bin"),
                       ::testing::Values(GgufStorage::f16, GgufStorage::f32)),
    [](const auto& param_info) {
      std::string name = std::get<0>(param_info.param);
      for (char& c : name) {
        if (c == '-') c = '_';
      }
      return name + (std::get<1>(param_info.param) == GgufStorage::f16 ? "_f16" : "_f32");
    });

// A minimal llama GGUF with one layer, for the refusals.
GgufWriter tiny_llama(const std::string& arch = "llama", std::uint32_t kv_heads = 2) {
  GgufWriter w;
  w.add_string("general.architecture", arch);
  const auto key = [&arch](const char* name) { return arch + "." + name; };
  w.add_u32(key("context_length"), 64);
  w.add_u32(key("embedding_length"), 64);
  w.add_u32(key("block_count"), 1);
  w.add_u32(key("feed_forward_length"), 32);
  w.add_u32(key("attention.head_count"), 4);
  w.add_u32(key("attention.head_count_kv"), kv_heads);
  const auto tensor = [&w](const std::string& name, std::vector<std::int64_t> dims) {
    std::int64_t n = 1;
    for (const auto d : dims) n *= d;
    w.add_tensor(name, std::move(dims), 0, std::vector<std::byte>(static_cast<std::size_t>(4 * n)));
  };
  tensor("token_embd.weight", {64, 100});
  tensor("output_norm.weight", {64});
  tensor("blk.0.attn_norm.weight", {64});
  tensor("blk.0.attn_q.weight", {64, 64});
  tensor("blk.0.attn_k.weight", {64, 32});
  tensor("blk.0.attn_v.weight", {64, 32});
  tensor("blk.0.attn_output.weight", {64, 64});
  tensor("blk.0.ffn_norm.weight", {64});
  tensor("blk.0.ffn_gate.weight", {64, 32});
  tensor("blk.0.ffn_up.weight", {64, 32});
  tensor("blk.0.ffn_down.weight", {32, 64});
  return w;
}

std::string open_error(const GgufWriter& w) {
  const test::TempDir tmp;
  w.write(tmp.path() / "m.gguf");
  return test::error_of([&] { GgufCheckpoint::open(tmp.path() / "m.gguf"); });
}

TEST(GgufCheckpoint, AMinimalFileOpensWithTransformersDefaults) {
  const test::TempDir tmp;
  tiny_llama().write(tmp.path() / "m.gguf");
  const auto checkpoint = GgufCheckpoint::open(tmp.path() / "m.gguf");
  EXPECT_EQ(checkpoint->config().kv_heads(), 2);
  EXPECT_TRUE(checkpoint->config().tie_word_embeddings);  // no output.weight
  EXPECT_EQ(checkpoint->config().rope_theta, 10000.0f);
  EXPECT_EQ(checkpoint->config().name, "m");
}

TEST(GgufCheckpoint, Refusals) {
  EXPECT_NE(open_error(tiny_llama("gpt2")).find("general.architecture is 'gpt2'"),
            std::string::npos);
  {
    GgufWriter w = tiny_llama();
    w.add_tensor("rope_freqs.weight", {32}, 0, std::vector<std::byte>(128));
    const std::string error = open_error(w);
    EXPECT_NE(error.find("tensor 'rope_freqs.weight' is not part of the llama model"),
              std::string::npos);
    EXPECT_NE(error.find("LLaMA 3.1's per-frequency rope scaling"), std::string::npos);
  }
  {
    GgufWriter w = tiny_llama();
    w.add_tensor("blk.0.attn_q_norm.weight", {16}, 0, std::vector<std::byte>(64));
    EXPECT_NE(open_error(w).find("tensor 'blk.0.attn_q_norm.weight' is not part"),
              std::string::npos);
  }
  {
    GgufWriter w = tiny_llama();
    w.add_tensor("output.weight", {256, 100}, 10, std::vector<std::byte>(100 * 84));  // Q2_K
    EXPECT_NE(open_error(w).find("tensor 'output.weight' is stored as Q2_K, which offgen does not "
                                 "read"),
              std::string::npos);
  }
  {
    GgufWriter w = tiny_llama();
    w.add_u32("llama.rope.dimension_count", 8);
    EXPECT_NE(open_error(w).find("partial rotary is not supported"), std::string::npos);
  }
  {
    GgufWriter w = tiny_llama();
    w.add_string("llama.rope.scaling.type", "yarn");
    EXPECT_NE(open_error(w).find("llama.rope.scaling.type 'yarn' is not supported"),
              std::string::npos);
  }
  {
    GgufWriter w;
    w.add_string("general.architecture", "llama");
    EXPECT_NE(open_error(w).find("metadata key 'llama.embedding_length' is missing"),
              std::string::npos);
  }
  {
    const GgufWriter w = tiny_llama("llama", 3);
    EXPECT_NE(open_error(w).find("(GGUF metadata): num_attention_heads 4 is not a multiple of "
                                 "num_key_value_heads 3"),
              std::string::npos);
  }
}

TEST(GgufCheckpoint, AMissingFileIsNamedAsAFile) {
  const test::TempDir tmp;
  EXPECT_NE(test::error_of([&] {
              Checkpoint::open(tmp.path() / "absent.gguf");
            }).find("GGUF file " + (tmp.path() / "absent.gguf").string() + " does not exist"),
            std::string::npos);
  test::write_file(tmp.path() / "not-gguf.gguf", "PK\x03\x04 a zip, not a GGUF file");
  EXPECT_NE(test::error_of([&] {
              Checkpoint::open(tmp.path() / "not-gguf.gguf");
            }).find("not a GGUF file"),
            std::string::npos);
}

TEST(GgufCheckpoint, ADirectoryWithSeveralGgufFilesSaysWhichToPass) {
  const test::TempDir tmp;
  tiny_llama().write(tmp.path() / "a.gguf");
  tiny_llama().write(tmp.path() / "b.gguf");
  EXPECT_NE(test::error_of([&] {
              Checkpoint::open(tmp.path());
            }).find("holds several GGUF files (a.gguf, b.gguf); pass the one to run"),
            std::string::npos);
}

}  // namespace
}  // namespace offgen
