// A LLaMA-family model in one GGUF file (llama.cpp's format): general.architecture llama,
// mistral or qwen2. The config comes from the file's metadata ({arch}.block_count, ...), read
// into the same ModelConfig (and the same checks) a config.json gives; the weights are the
// Hugging Face tensors, dequantized to fp16 at load (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K, Q5_K, Q6_K; gguf_types.h) on the TBB pool. llama.cpp's converter permutes the rows
// of LLaMA's and Mistral's q_proj / k_proj for its rotary layout (pairs of dimensions side by
// side); reading undoes that, so the model equals transformers'. Every tensor of the file must
// be one the model uses: a file with others (llama.cpp's rope_freqs, a vision tower) is refused
// by name rather than run without them.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "engine/model/gguf_file.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_source.h"

namespace offgen {

class GgufCheckpoint final : public WeightSource {
 public:
  // Opens and validates the file, its config and its tensor list; reads no weights.
  static std::unique_ptr<GgufCheckpoint> open(const std::filesystem::path& path);
  // The config only (the file's header is still read whole).
  static ModelConfig read_config(const std::filesystem::path& path);
  // The config of an opened file; throws offgen::Error naming the file and the key.
  static ModelConfig config_of(const GgufFile& file);

  const ModelConfig& config() const { return config_; }
  const GgufFile& file() const { return *file_; }

  bool contains(const std::string& name) const override;
  void read_f16(const std::string& name, std::span<const std::int64_t> shape,
                Half* dst) const override;
  std::string describe() const override { return file_->path().string(); }

 private:
  GgufCheckpoint() = default;

  std::unique_ptr<GgufFile> file_;
  ModelConfig config_;
  std::map<std::string, const GgufTensor*> tensors_;  // by Hugging Face name
  bool permuted_qk_ = false;
};

// The GGUF file a --model path names: the path itself when it is a regular file ending in
// .gguf, or the one .gguf file of a directory that has no config.json; nullopt otherwise.
// A directory with several .gguf files and no config.json is an error listing them.
std::optional<std::filesystem::path> find_gguf_file(const std::filesystem::path& path);

}  // namespace offgen
