#include "engine/model/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/core/error.h"
#include "engine/model/opt_tensors.h"
#include "engine/model/tensor_shape.h"

namespace offgen {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// PyTorch pickles offgen will not read: they cannot be memory-mapped and unpickling runs code.
std::vector<std::string> pytorch_weight_files(const fs::path& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string ext = entry.path().extension().string();
    const bool sharded_bin = name.starts_with("pytorch_model") && ext == ".bin";
    if (sharded_bin || ext == ".pt" || ext == ".pth") found.push_back(name);
  }
  std::ranges::sort(found);
  return found;
}

[[noreturn]] void refuse_pytorch(const fs::path& dir, const std::vector<std::string>& files) {
  fs::path base = dir.lexically_normal();
  if (base.filename().empty())
    base = base.parent_path();  // "opt/" -> "opt", not "opt/-safetensors"
  const std::string out = base.string() + "-safetensors";
  fail(
      "{} holds PyTorch weights ({}) but no {} or {}; offgen reads only safetensors. Convert once "
      "with:\n  python -c \"from transformers import AutoModelForCausalLM as M; "
      "M.from_pretrained('{}', torch_dtype='auto').save_pretrained('{}', "
      "safe_serialization=True)\"\nthen pass {} instead (it gets its own config.json).",
      dir.string(), fmt::join(files, ", "), kSingleFile, kIndexFile, dir.string(), out, out);
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

}  // namespace

std::unique_ptr<Checkpoint> Checkpoint::open(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) fail("checkpoint directory {} does not exist", dir.string());
  if (!fs::is_directory(dir, ec)) {
    fail("{} is not a directory; pass the checkpoint directory holding config.json", dir.string());
  }
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path, ec)) {
    fail(
        "{} has no config.json; a Hugging Face OPT checkpoint directory needs it next to the "
        "weights",
        dir.string());
  }

  std::unique_ptr<Checkpoint> checkpoint(new Checkpoint());
  checkpoint->dir_ = dir;
  checkpoint->config_ = OptConfig::from_json_file(config_path);

  // Registers a tensor under its canonical name (no "model." prefix); the tied lm_head is skipped.
  const auto add = [&checkpoint, &dir](const SafetensorsFile& file, const StoredTensor& tensor) {
    if (tensor.name == kTiedLmHeadName) return;
    const std::string canonical(canonical_tensor_name(tensor.name));
    const auto [it, inserted] = checkpoint->index_.emplace(canonical, std::pair{&file, &tensor});
    if (!inserted) {
      fail("{}: tensor '{}' is stored twice: as '{}' in {} and as '{}' in {}", dir.string(),
           canonical, it->second.second->name, it->second.first->path().string(), tensor.name,
           file.path().string());
    }
  };

  const fs::path single_path = dir / kSingleFile;
  const fs::path index_path = dir / kIndexFile;
  if (fs::exists(single_path, ec)) {
    checkpoint->files_.push_back(SafetensorsFile::open(single_path));
    const SafetensorsFile& file = *checkpoint->files_.back();
    for (const auto& [name, tensor] : file.tensors()) add(file, tensor);
  } else if (fs::exists(index_path, ec)) {
    const Json index = read_json_file(index_path);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      fail("{}: expected an object with a \"weight_map\" object {{tensor: file}}",
           index_path.string());
    }
    std::map<std::string, const SafetensorsFile*> shards;  // each distinct shard opened once
    for (const auto& [tensor_name, file_json] : index["weight_map"].items()) {
      if (!file_json.is_string()) {
        fail("{}: weight_map entry for tensor '{}' must be a file name, got {}",
             index_path.string(), tensor_name, file_json.dump());
      }
      const std::string file_name = file_json.get<std::string>();
      auto shard = shards.find(file_name);
      if (shard == shards.end()) {
        const fs::path path = shard_path(dir, index_path, file_name, tensor_name);
        if (!fs::exists(path, ec)) {
          fail("{}: shard '{}' (holding tensor '{}') is missing from {}", index_path.string(),
               file_name, tensor_name, dir.string());
        }
        checkpoint->files_.push_back(SafetensorsFile::open(path));
        shard = shards.emplace(file_name, checkpoint->files_.back().get()).first;
      }
      const StoredTensor* tensor = shard->second->find(tensor_name);
      if (tensor == nullptr) {
        fail("{}: tensor '{}' is listed in shard '{}', but {} does not contain it",
             index_path.string(), tensor_name, file_name, shard->second->path().string());
      }
      add(*shard->second, *tensor);
    }
  } else if (const auto pytorch = pytorch_weight_files(dir); !pytorch.empty()) {
    refuse_pytorch(dir, pytorch);
  } else {
    fail("{} has no {} or {}; offgen needs the weights in safetensors format", dir.string(),
         kSingleFile, kIndexFile);
  }
  return checkpoint;
}

const StoredTensor* Checkpoint::find(const std::string& name) const {
  const auto it = index_.find(std::string(canonical_tensor_name(name)));
  return it == index_.end() ? nullptr : it->second.second;
}

bool Checkpoint::contains(const std::string& name) const {
  return find(name) != nullptr;
}

void Checkpoint::read_f16(const std::string& name, std::span<const std::int64_t> shape,
                          Half* dst) const {
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
