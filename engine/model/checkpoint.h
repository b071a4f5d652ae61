// A Hugging Face checkpoint directory (OPT or the LLaMA family): config.json plus the weights in
// the first of
//   model.safetensors, model.safetensors.index.json (+ the shards it names),
//   pytorch_model.bin, pytorch_model.bin.index.json (+ the shards it names)
// that the directory holds (safetensors first, as transformers prefers them). .bin files are
// torch.save archives read by TorchCheckpointFile, without Python and without running their
// pickles. A stored lm_head.weight is skipped when the config ties the head to the token embedding
// (always for OPT).
// A GGUF file (llama.cpp's format), or a directory holding one .gguf and no config.json, is read
// by GgufCheckpoint (gguf_checkpoint.h): config from its metadata, weights dequantized to fp16.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/gguf_checkpoint.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_file.h"
#include "engine/model/weight_source.h"

namespace offgen {

class Checkpoint final : public WeightSource {
 public:
  // Opens and validates every file's header (offsets and shapes against the file); reads no data.
  static std::unique_ptr<Checkpoint> open(const std::filesystem::path& dir);
  // `dir` may also be a GGUF file, or a directory holding one (find_gguf_file()).
  // The directory's config.json (or the GGUF's metadata), with the same errors open() gives for
  // a missing one.
  static ModelConfig read_config(const std::filesystem::path& dir);

  const ModelConfig& config() const { return config_; }
  // The path given: the directory, or the GGUF file.
  const std::filesystem::path& dir() const { return dir_; }
  // The file the weights were found through: "model.safetensors", "pytorch_model.bin.index.json".
  const std::string& weights_file() const { return weights_file_; }

  // Accepts names with or without the "model." prefix; looks up both spellings in the files.
  bool contains(const std::string& name) const override;
  void read_f16(const std::string& name, std::span<const std::int64_t> shape,
                Half* dst) const override;
  std::string describe() const override { return dir_.string(); }

 private:
  Checkpoint() = default;
  const StoredTensor* find(const std::string& name) const;
  void add(const TensorFile& file, const StoredTensor& tensor);
  void open_index(const std::filesystem::path& index_path,
                  std::unique_ptr<TensorFile> (*open_shard)(const std::filesystem::path&));

  std::filesystem::path dir_;
  ModelConfig config_;
  std::string weights_file_;
  std::vector<std::unique_ptr<TensorFile>> files_;
  std::map<std::string, std::pair<const TensorFile*, const StoredTensor*>> index_;
  std::unique_ptr<GgufCheckpoint> gguf_;  // the weights, when they are a GGUF file
};

}  // namespace offgen
