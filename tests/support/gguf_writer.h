// Writes GGUF files for tests (the layout gguf_file.h describes): metadata of every value type,
// tensors of any ggml type from raw bytes, and a Hugging Face LLaMA-family checkpoint converted
// as llama.cpp's convert_hf_to_gguf.py converts it (names, q / k rows permuted for its rotary
// layout, tokenizer metadata), so the reader's undoing of each step is checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model/gguf_file.h"

namespace offgen::test {

class GgufWriter {
 public:
  using Type = GgufValueType;

  // A scalar, or (with `array`) an array of `element` values; `value` is JSON of the right kind.
  void add(const std::string& key, Type type, const nlohmann::json& value, Type element = Type::u8);
  void add_string(const std::string& key, const std::string& value) {
    add(key, Type::string, value);
  }
  void add_u32(const std::string& key, std::uint32_t value) { add(key, Type::u32, value); }
  void add_f32(const std::string& key, float value) { add(key, Type::f32, value); }
  void add_bool(const std::string& key, bool value) { add(key, Type::boolean, value); }

  // `dims` as GGUF stores them (dims[0] contiguous); `data` the type's raw blocks.
  void add_tensor(const std::string& name, std::vector<std::int64_t> dims, std::uint32_t type,
                  std::vector<std::byte> data);

  std::uint32_t version = 3;
  std::uint64_t alignment = 32;

  std::vector<std::byte> bytes() const;
  void write(const std::filesystem::path& path) const;

 private:
  struct Entry {
    std::string key;
    Type type;
    Type element;
    nlohmann::json value;
  };
  struct Tensor {
    std::string name;
    std::vector<std::int64_t> dims;
    std::uint32_t type;
    std::vector<std::byte> data;
  };
  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
};

// The tokenizer.ggml.* keys of a gpt2-model tokenizer from vocab.json + merges.txt in `dir`
// (every token NORMAL), with tokenizer.ggml.pre = `pre`; `control` tokens are appended after
// the vocabulary as CONTROL tokens.
void add_gpt2_tokenizer(GgufWriter& w, const std::filesystem::path& dir, const std::string& pre,
                        const std::vector<std::string>& control = {});

// How convert_gguf_from_checkpoint stores the matrices (norms are always F32).
enum class GgufStorage { f32, f16 };

// Converts the Hugging Face LLaMA-family checkpoint in `dir` (config.json, safetensors, and
// vocab.json + merges.txt) into a GGUF file at `out`, as llama.cpp does: general.architecture
// and the {arch}.* keys, tokenizer.ggml.* (model gpt2, pre "default"), tensors renamed and q / k
// permuted (except qwen2).
void convert_gguf_from_checkpoint(const std::filesystem::path& dir,
                                  const std::filesystem::path& out, GgufStorage storage);

// Writes `in` again with every 2-D tensor of a quantized type dequantized and stored as F16
// (what llama.cpp's f16 conversion of the same weights holds), the rest copied; the metadata is
// copied (integers as u32 / i32 / i64, floats as f32 where exact) with general.file_type 1.
void write_f16_copy(const GgufFile& in, const std::filesystem::path& out);

}  // namespace offgen::test
