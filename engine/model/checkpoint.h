// A Hugging Face OPT checkpoint directory: config.json plus model.safetensors, or the shards named
// by model.safetensors.index.json. pytorch_model.bin is refused with instructions to convert.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/opt_config.h"
#include "engine/model/safetensors.h"
#include "engine/model/weight_source.h"

namespace offgen {

class Checkpoint final : public WeightSource {
 public:
  // Opens and validates every file's header (offsets and shapes against the file); reads no data.
  static std::unique_ptr<Checkpoint> open(const std::filesystem::path& dir);

  const OptConfig& config() const { return config_; }
  const std::filesystem::path& dir() const { return dir_; }

  // Accepts names with or without the "model." prefix; looks up both spellings in the files.
  bool contains(const std::string& name) const override;
  void read_f16(const std::string& name, std::span<const std::int64_t> shape,
                Half* dst) const override;
  std::string describe() const override { return dir_.string(); }

 private:
  Checkpoint() = default;
  const StoredTensor* find(const std::string& name) const;

  std::filesystem::path dir_;
  OptConfig config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::pair<const SafetensorsFile*, const StoredTensor*>> index_;
};

}  // namespace offgen
