#include "engine/model/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/core/error.h"
#include "engine/core/json_integer.h"
#include "engine/model/model_tensors.h"
#include "engine/model/safetensors.h"
#include "engine/model/tensor_shape.h"
#include "engine/model/torch_checkpoint.h"

namespace offgen {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::unique_ptr<TensorFile> open_safetensors(const fs::path& path) {
  return SafetensorsFile::open(path);
}
std::unique_ptr<TensorFile> open_torch_save(const fs::path& path) {
  return TorchCheckpointFile::open(path);
}

// The weight files looked for, in order of preference.
struct WeightFormat {
  const char* single;
  const char* index;
  std::unique_ptr<TensorFile> (*open)(const fs::path&);
};
constexpr WeightFormat kFormats[] = {
    {"model.safetensors", "model.safetensors.index.json", open_safetensors},
    {"pytorch_model.bin", "pytorch_model.bin.index.json", open_torch_save},
};

// Files that look like weights offgen did not find a way into (shards without their index,
// other names or formats), for the message that says what it looked for.
std::vector<std::string> other_weight_files(const fs::path& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string ext = entry.path().extension().string();
    for (const char* weights : {".bin", ".pt", ".pth", ".safetensors", ".h5", ".msgpack"}) {
      if (ext == weights) found.push_back(entry.path().filename().string());
    }
  }
  std::ranges::sort(found);
  return found;
}

[[noreturn]] void fail_no_weights(const fs::path& dir) {
  const std::vector<std::string> others = other_weight_files(dir);
  fail(
      "{} has no model.safetensors, model.safetensors.index.json, pytorch_model.bin or "
      "pytorch_model.bin.index.json{}; offgen reads the weights from one of those (shards through "
      "their index file)",
      dir.string(),
      others.empty() ? std::string() : fmt::format(" (it holds {})", fmt::join(others, ", ")));
}

Json read_json_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) fail("{}: could not be opened for reading", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return Json::parse(text.str());
  } catch (const Json::exception& e) {  // parse errors, and numbers past double's range
    fail("{}: malformed JSON: {}", path.string(), e.what());
  }
}

// The shard file names must stay inside the checkpoint directory.
fs::path shard_path(const fs::path& dir, const fs::path& index_path, const std::string& file,
                    const std::string& tensor) {
  const fs::path relative(file);
  bool escapes = file.empty() || relative.is_absolute();
  for (const auto& part : relative) escapes = escapes || part == "..";
  if (escapes) {
    fail("{}: tensor '{}' is mapped to '{}', which is not a file inside {}", index_path.string(),
         tensor, file, dir.string());
  }
  return dir / relative;
}

// generation_config.json's eos_token_id (an id or a list): instruct models list their end-of-turn
// ids there (Llama-3-Instruct's <|eot_id|>, Qwen2-Instruct's <|im_end|>), and transformers'
// generate stops at any of them, so offgen does too. A missing file or field adds nothing.
void add_generation_eos(const fs::path& path, ModelConfig& config) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  const Json json = read_json_file(path);
  if (!json.is_object()) fail("{}: expected a JSON object", path.string());
  const auto it = json.find("eos_token_id");
  if (it == json.end() || it->is_null()) return;
  const Json ids = it->is_array() ? *it : Json::array({*it});
  for (const Json& id : ids) {
    const auto value = json_integer<int>(id);
    if (!value || *value < 0 || *value >= config.vocab_size) {
      fail("{}: eos_token_id {} is not a token id of the vocabulary (vocab_size {})", path.string(),
           id.dump(), config.vocab_size);
    }
    if (!config.is_eos(*value)) config.more_eos_token_ids.push_back(*value);
  }
}

}  // namespace

ModelConfig Checkpoint::read_config(const fs::path& dir) {
  if (const auto gguf = find_gguf_file(dir)) return GgufCheckpoint::read_config(*gguf);
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    fail("{} {} does not exist", dir.extension() == ".gguf" ? "GGUF file" : "checkpoint directory",
         dir.string());
  }
  if (!fs::is_directory(dir, ec)) {
    fail(
        "{} is not a directory; pass the checkpoint directory holding config.json, or a .gguf file",
        dir.string());
  }
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path, ec)) {
    fail(
        "{} has no config.json; a Hugging Face OPT checkpoint directory needs it next to the "
        "weights",
        dir.string());
  }
  ModelConfig config = ModelConfig::from_json_file(config_path);
  add_generation_eos(dir / "generation_config.json", config);
  return config;
}

std::unique_ptr<Checkpoint> Checkpoint::open(const fs::path& dir) {
  std::unique_ptr<Checkpoint> checkpoint(new Checkpoint());
  checkpoint->dir_ = dir;
  if (const auto gguf = find_gguf_file(dir)) {
    checkpoint->gguf_ = GgufCheckpoint::open(*gguf);
    checkpoint->config_ = checkpoint->gguf_->config();
    checkpoint->weights_file_ = gguf->filename().string();
    return checkpoint;
  }
  checkpoint->config_ = read_config(dir);
  std::error_code ec;
  for (const WeightFormat& format : kFormats) {
    if (fs::exists(dir / format.single, ec)) {
      checkpoint->weights_file_ = format.single;
      checkpoint->files_.push_back(format.open(dir / format.single));
      const TensorFile& file = *checkpoint->files_.back();
      for (const auto& [name, tensor] : file.tensors()) checkpoint->add(file, tensor);
      return checkpoint;
    }
    if (fs::exists(dir / format.index, ec)) {
      checkpoint->weights_file_ = format.index;
      checkpoint->open_index(dir / format.index, format.open);
      return checkpoint;
    }
  }
  fail_no_weights(dir);
}

// Registers a tensor under its canonical name (no "model." prefix); a tied lm_head is skipped, and
// so are the rotary inverse frequencies older LLaMA checkpoints store (computed from the config).
void Checkpoint::add(const TensorFile& file, const StoredTensor& tensor) {
  if (tensor.name == kTiedLmHeadName && config_.tie_word_embeddings) return;
  if (tensor.name.ends_with("rotary_emb.inv_freq")) return;
  const std::string canonical(canonical_tensor_name(tensor.name));
  const auto [it, inserted] = index_.emplace(canonical, std::pair{&file, &tensor});
  if (!inserted) {
    fail("{}: tensor '{}' is stored twice: as '{}' in {} and as '{}' in {}", dir_.string(),
         canonical, it->second.second->name, it->second.first->path().string(), tensor.name,
         file.path().string());
  }
}

void Checkpoint::open_index(const fs::path& index_path,
                            std::unique_ptr<TensorFile> (*open_shard)(const fs::path&)) {
  const Json index = read_json_file(index_path);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    fail("{}: expected an object with a \"weight_map\" object {{tensor: file}}",
         index_path.string());
  }
  std::error_code ec;
  std::map<std::string, const TensorFile*> shards;  // each distinct shard opened once
  for (const auto& [tensor_name, file_json] : index["weight_map"].items()) {
    if (!file_json.is_string()) {
      fail("{}: weight_map entry for tensor '{}' must be a file name, got {}", index_path.string(),
           tensor_name, file_json.dump());
    }
    const std::string file_name = file_json.get<std::string>();
    auto shard = shards.find(file_name);
    if (shard == shards.end()) {
      const fs::path path = shard_path(dir_, index_path, file_name, tensor_name);
      if (!fs::exists(path, ec)) {
        fail("{}: shard '{}' (holding tensor '{}') is missing from {}", index_path.string(),
             file_name, tensor_name, dir_.string());
      }
      files_.push_back(open_shard(path));
      shard = shards.emplace(file_name, files_.back().get()).first;
    }
    const StoredTensor* tensor = shard->second->find(tensor_name);
    if (tensor == nullptr) {
      fail("{}: tensor '{}' is listed in shard '{}', but {} does not contain it",
           index_path.string(), tensor_name, file_name, shard->second->path().string());
    }
    add(*shard->second, *tensor);
  }
}

const StoredTensor* Checkpoint::find(const std::string& name) const {
  const auto it = index_.find(std::string(canonical_tensor_name(name)));
  return it == index_.end() ? nullptr : it->second.second;
}

bool Checkpoint::contains(const std::string& name) const {
  if (gguf_) return gguf_->contains(name);
  return find(name) != nullptr;
}

void Checkpoint::read_f16(const std::string& name, std::span<const std::int64_t> shape,
                          Half* dst) const {
  if (gguf_) {
    gguf_->read_f16(name, shape, dst);
    return;
  }
  const auto it = index_.find(std::string(canonical_tensor_name(name)));
  if (it == index_.end()) {
    fail("checkpoint {} has no tensor '{}' (looked for it with and without the \"model.\" prefix)",
         dir_.string(), name);
  }
  const auto& [file, tensor] = it->second;
  check_tensor_shape(name, file->path().string(), tensor->shape, shape);
  convert_to_f16(*tensor, dst);
}

}  // namespace offgen
