// A file of named tensors whose bytes lie in the file's mapping: a .safetensors file
// (safetensors.h) or a torch.save archive (torch_checkpoint.h). The readers validate every tensor
// against the file when they open it, so a StoredTensor's bytes are always inside the mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/half.h"
#include "engine/model/mapped_file.h"

namespace offgen {

struct StoredTensor {
  std::string name;
  DType dtype = DType::f16;  // f16, bf16 or f32: the readers refuse every other type
  std::vector<std::int64_t> shape;
  const std::byte* data = nullptr;  // into the file's mapping, valid while the file object lives
  std::size_t bytes = 0;            // numel(shape) x dtype size, row-major and contiguous
};

// Converts a stored tensor to fp16 (round to nearest even). dst holds numel elements (may be null
// when there are none). Thread-safe; large tensors convert on the TBB pool.
void convert_to_f16(const StoredTensor& tensor, Half* dst);

class TensorFile {
 public:
  using Tensor = StoredTensor;

  virtual ~TensorFile() = default;
  TensorFile(const TensorFile&) = delete;
  TensorFile& operator=(const TensorFile&) = delete;

  const std::filesystem::path& path() const { return file_.path(); }
  const std::map<std::string, StoredTensor>& tensors() const { return tensors_; }
  const StoredTensor* find(const std::string& name) const;

 protected:
  TensorFile(MappedFile file, std::map<std::string, StoredTensor> tensors)
      : file_(std::move(file)), tensors_(std::move(tensors)) {}

 private:
  MappedFile file_;
  std::map<std::string, StoredTensor> tensors_;
};

}  // namespace offgen
